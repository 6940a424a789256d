//! Applying operator commands in the control loop: path state and
//! weights, paths added and removed (announced to the peer, answered when
//! the peer confirms), and reload.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use mpt_api::Response;
use mpt_proto::path::{AdminStatus, PathParams};
use mpt_proto::wire::{ControlBody, PathAdd, PathName};

use super::command::*;
use crate::config::{self, MAX_WEIGHT};
use crate::control::control_loop::ControlLoop;
use crate::control::pathset::{self, ConnSetup, NewPath};
use crate::plane::PathShared;

impl ControlLoop {
    fn find_conn(&self, conn: &str) -> Result<usize, String> {
        self.conns
            .iter()
            .position(|c| c.name == conn && !c.removed.load(std::sync::atomic::Ordering::Relaxed))
            .ok_or_else(|| format!("no connection named \"{conn}\""))
    }

    fn find(&self, conn: &str, path: &str) -> Result<(usize, usize), String> {
        let ci = self.find_conn(conn)?;
        let id = self.conns[ci]
            .paths()
            .iter()
            .find(|p| p.name == path && !p.is_removed())
            .map(|p| p.id)
            .ok_or_else(|| format!("connection \"{conn}\" has no path named \"{path}\""))?;
        Ok((ci, id))
    }

    fn params_of(&self, ci: usize, id: usize) -> Result<PathParams, String> {
        self.sessions[ci]
            .path(id)
            .map(|p| *p.params())
            .ok_or_else(|| format!("path id {id} is not in the session"))
    }

    /// Applies one command.
    pub(crate) fn apply(&mut self, cmd: Command, now: Instant) -> Outcome {
        let result = match cmd {
            Command::PathState { conn, path, state } => (|| {
                let (ci, id) = self.find(&conn, &path)?;
                let mut params = self.params_of(ci, id)?;
                params.admin = state;
                self.set_params(ci, id, params, now)?;
                tracing::info!(conn = %conn, path = %path, status = status_name(state), "path status set by operator");
                Ok(Response::ok())
            })(),
            Command::PathWeight {
                conn,
                path,
                weight_out,
                weight_in,
            } => (|| {
                if !(1..=MAX_WEIGHT).contains(&weight_out) {
                    return Err(format!(
                        "weight_out {weight_out} is outside 1..={MAX_WEIGHT}"
                    ));
                }
                if weight_in == Some(0) {
                    return Err("weight_in must be at least 1".into());
                }
                let (ci, id) = self.find(&conn, &path)?;
                let mut params = self.params_of(ci, id)?;
                params.weight_out = weight_out;
                if let Some(w) = weight_in {
                    params.weight_in = w;
                }
                self.set_params(ci, id, params, now)?;
                tracing::info!(conn = %conn, path = %path, weight_out, weight_in = params.weight_in, "path weights set by operator");
                Ok(Response::ok())
            })(),
            Command::PathAdd {
                conn,
                name,
                local,
                remote,
                interface,
                weight,
            } => return self.operator_add(&conn, name, local, remote, interface, weight, now),
            Command::PathRemove { conn, path, force } => {
                return self.operator_remove(&conn, &path, force, now)
            }
            Command::Reload => self.reload(now),
        };
        Outcome::Done(result)
    }

    fn set_params(
        &mut self,
        ci: usize,
        id: usize,
        params: PathParams,
        now: Instant,
    ) -> Result<(), String> {
        self.sessions[ci]
            .set_path_params(id, params, now)
            .map_err(|e| e.to_string())?;
        if let Some(shared) = self.conns[ci].paths().get(id) {
            pathset::publish_params(shared, &params);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn operator_add(
        &mut self,
        conn: &str,
        name: String,
        local: IpAddr,
        remote: Option<IpAddr>,
        interface: Option<String>,
        weight: Option<u32>,
        now: Instant,
    ) -> Outcome {
        let ci = match self.find_conn(conn) {
            Ok(ci) => ci,
            Err(e) => return Outcome::Done(Err(e)),
        };
        let weight = weight.unwrap_or(1);
        if !(1..=MAX_WEIGHT).contains(&weight) {
            return Outcome::Done(Err(format!("weight {weight} is outside 1..={MAX_WEIGHT}")));
        }
        if remote.is_some_and(|r| r.is_ipv4() != local.is_ipv4()) {
            return Outcome::Done(Err(
                "--local and --remote must be of the same address family".into(),
            ));
        }
        if remote.is_none() && self.conns[ci].crypto.is_none() {
            return Outcome::Done(Err(format!(
                "connection {conn} has no key_file: give --remote (a cleartext path never learns its peer's address)"
            )));
        }
        let setup = self.setups[ci];
        let new = NewPath {
            name: name.clone(),
            local: SocketAddr::new(local, setup.port),
            remote: remote.map(|r| SocketAddr::new(r, setup.remote_port)),
            remote_fixed: remote.is_some(),
            remote_name: None,
            interface,
            follow: false,
            from_config: false,
            params: PathParams {
                keepalive: setup.keepalive,
                dead_timer: setup.dead_timer,
                weight_out: weight,
                weight_in: u16::try_from(weight).unwrap_or(u16::MAX),
                window: 1,
                admin: AdminStatus::Up,
            },
        };
        match self.add_and_announce(ci, new, now) {
            Ok((id, msg_id)) => {
                tracing::info!(conn = %conn, path = %name, id, local = %local, "path added by operator");
                awaiting_peer(ci, msg_id, path_answer(name, id))
            }
            Err(e) => Outcome::Done(Err(e)),
        }
    }

    fn operator_remove(&mut self, conn: &str, path: &str, force: bool, now: Instant) -> Outcome {
        let (ci, id) = match self.find(conn, path) {
            Ok(x) => x,
            Err(e) => return Outcome::Done(Err(e)),
        };
        let session = &self.sessions[ci];
        let usable = session.path(id).is_some_and(|p| p.usable());
        let others = session
            .paths()
            .filter(|(i, p)| *i != id && p.usable())
            .count();
        if usable && others == 0 && !force {
            return Outcome::Done(Err(format!(
                "{path} is the only usable path of {conn}: removing it stops the tunnel \
                 (add the new path first and wait until it is up, or use --force)"
            )));
        }
        match self.remove_and_announce(ci, id, now) {
            Ok(msg_id) => {
                tracing::info!(conn = %conn, path = %path, id, "path removed by operator");
                awaiting_peer(ci, msg_id, path_answer(path.to_string(), id))
            }
            Err(e) => Outcome::Done(Err(e)),
        }
    }

    /// Adds a path here and tells the peer; returns its id and the control
    /// message id (`None`: the connection has no key, the peer is not told).
    pub(crate) fn add_and_announce(
        &mut self,
        ci: usize,
        new: NewPath,
        now: Instant,
    ) -> Result<(usize, Option<u64>), String> {
        let conn = self.conns[ci].clone();
        let name = PathName::new(&new.name)
            .filter(PathName::is_plain)
            .ok_or_else(|| {
                format!(
                    "path name {:?} must be 1 to {} printable ASCII characters without spaces",
                    new.name,
                    mpt_proto::wire::MAX_NAME_LEN
                )
            })?;
        let session = &mut self.sessions[ci];
        let id = pathset::free_id(&conn, session)
            .ok_or_else(|| format!("connection {} has no room for another path", conn.name))?;
        let params = new.params;
        let remote = new.remote;
        let shared = pathset::add(&conn, session, id, new, now).map_err(|e| e.to_string())?;
        if conn.crypto.is_none() {
            return Ok((id, None));
        }
        let body = ControlBody::PathAdd(PathAdd {
            name,
            sender_local: shared.local,
            sender_remote: remote,
            weight_out: params.weight_out,
            weight_in: params.weight_in,
            window: params.window,
            backup: params.admin == AdminStatus::Backup,
        });
        match session.send_control(id as u16, body, now) {
            Ok(msg_id) => Ok((id, Some(msg_id))),
            Err(e) => {
                if let Some(d) = pathset::remove(&conn, ci, session, id, now) {
                    pathset::finish(&conn, d.id);
                }
                Err(format!("cannot tell the peer: {e}; nothing changed"))
            }
        }
    }

    /// Removes a path here (it drains) and tells the peer; returns the
    /// control message id (`None`: no key, the peer is not told).
    pub(crate) fn remove_and_announce(
        &mut self,
        ci: usize,
        id: usize,
        now: Instant,
    ) -> Result<Option<u64>, String> {
        let conn = self.conns[ci].clone();
        let table = conn.paths();
        let path = table
            .get(id)
            .ok_or_else(|| format!("no path with id {id}"))?;
        let name = PathName::new(&path.name)
            .ok_or_else(|| format!("path name \"{}\" cannot be sent", path.name))?;
        let session = &mut self.sessions[ci];
        // Queue the message first: if the queue is full nothing changes.
        let msg_id = match conn.crypto {
            None => None,
            Some(_) => Some(
                session
                    .send_control(id as u16, ControlBody::PathRemove { name }, now)
                    .map_err(|e| format!("cannot tell the peer: {e}; nothing changed"))?,
            ),
        };
        if let Some(d) = pathset::remove(&conn, ci, session, id, now) {
            self.draining.push(d);
        }
        Ok(msg_id)
    }

    fn reload(&mut self, now: Instant) -> Answer {
        let new = config::load(&self.config_path).map_err(|e| e.to_string())?;
        let mut changes = Vec::new();
        let mut not_applied = Vec::new();
        // Client connections (no paths, served on the shared port) come
        // and go without a restart; the others are left alone.
        let live = |conns: &[std::sync::Arc<crate::plane::ConnShared>], name: &str| {
            conns.iter().position(|s| {
                s.name == name && !s.removed.load(std::sync::atomic::Ordering::Relaxed)
            })
        };
        for ci in 0..self.conns.len() {
            let conn = &self.conns[ci];
            if conn.client
                && !conn.removed.load(std::sync::atomic::Ordering::Relaxed)
                && !new
                    .connections
                    .iter()
                    .any(|c| c.name == conn.name && c.is_client())
            {
                let name = conn.name.clone();
                self.remove_client(ci);
                changes.push(format!("connection {name}: removed (client)"));
            }
        }
        for c in new.connections.iter().filter(|c| c.is_client()) {
            if live(&self.conns, &c.name).is_some() {
                continue;
            }
            match self.add_client(c) {
                Ok(()) => changes.push(format!("connection {}: added (client)", c.name)),
                Err(e) => not_applied.push(format!("connection {}: not added: {e}", c.name)),
            }
        }
        for c in &new.connections {
            let Some(ci) = live(&self.conns, &c.name) else {
                not_applied.push(format!(
                    "connection {} is new (restart to add connections)",
                    c.name
                ));
                continue;
            };
            let setup = self.setups[ci];
            self.peer_locals[ci] = c.peer_locals();
            let allowed_before = self
                .config
                .connections
                .iter()
                .find(|r| r.name == c.name)
                .map(|r| r.allow_peer_paths.clone());
            if allowed_before.as_ref() != Some(&c.allow_peer_paths) {
                let list: Vec<String> = c.allow_peer_paths.iter().map(|p| p.to_string()).collect();
                changes.push(format!(
                    "connection {}: allow_peer_paths = [{}]",
                    c.name,
                    list.join(", ")
                ));
            }
            self.setups[ci].keepalive = c.keepalive;
            self.setups[ci].dead_timer = c.dead_timer;
            // Paths that left the file, or whose addresses changed, go
            // first, so their names are free for a re-add.
            let mut to_add = Vec::new();
            for s in self.conns[ci].paths().iter().filter(|p| !p.is_removed()) {
                match c.paths.iter().find(|p| p.name == s.name) {
                    // Added at run time (by `mpt path add` or the peer):
                    // not the file's to remove.
                    None if !s.from_config => {}
                    None => match self.remove_and_announce(ci, s.id, now) {
                        Ok(_) => {
                            changes.push(format!("connection {} path {}: removed", c.name, s.name))
                        }
                        Err(e) => not_applied.push(format!(
                            "connection {} path {}: not removed: {e}",
                            c.name, s.name
                        )),
                    },
                    Some(p) => {
                        if addresses_moved(p, s, &setup) {
                            match self.remove_and_announce(ci, s.id, now) {
                                Ok(_) => to_add.push((p.clone(), "re-added with new addresses")),
                                Err(e) => not_applied.push(format!(
                                    "connection {} path {}: addresses not changed: {e}",
                                    c.name, s.name
                                )),
                            }
                        }
                    }
                }
            }
            for p in &c.paths {
                let params = PathParams {
                    keepalive: c.keepalive,
                    dead_timer: c.dead_timer,
                    weight_out: p.weight_out,
                    weight_in: p.weight_in,
                    window: p.window,
                    admin: p.status,
                };
                let existing = self.conns[ci].paths().find_live(&p.name).map(|s| s.id);
                match existing {
                    Some(id) => {
                        let old = self.params_of(ci, id)?;
                        if params != old {
                            self.set_params(ci, id, params, now)?;
                            changes.push(format!(
                                "connection {} path {}: {}",
                                c.name,
                                p.name,
                                describe(&old, &params)
                            ));
                        }
                    }
                    None => {
                        let how = to_add
                            .iter()
                            .find(|(q, _)| q.name == p.name)
                            .map_or("added", |(_, how)| *how);
                        let new = NewPath {
                            name: p.name.clone(),
                            local: match (p.local, &p.interface) {
                                (Some(ip), _) => SocketAddr::new(ip, setup.port),
                                (None, Some(dev)) => {
                                    crate::control::links::initial_local(dev, p.remote, setup.port)
                                }
                                (None, None) => {
                                    not_applied.push(format!(
                                        "connection {} path {}: neither local nor interface",
                                        c.name, p.name
                                    ));
                                    continue;
                                }
                            },
                            remote: p.remote.map(|r| SocketAddr::new(r, setup.remote_port)),
                            remote_fixed: p.remote.is_some() || p.remote_name.is_some(),
                            remote_name: p.remote_name.clone(),
                            interface: p.interface.clone(),
                            follow: p.local.is_none(),
                            from_config: true,
                            params,
                        };
                        match self.add_and_announce(ci, new, now) {
                            Ok((id, _)) => changes.push(format!(
                                "connection {} path {}: {how} (id {id})",
                                c.name, p.name
                            )),
                            Err(e) => not_applied.push(format!(
                                "connection {} path {}: not added: {e}",
                                c.name, p.name
                            )),
                        }
                    }
                }
            }
        }
        not_applied.extend(config::reload::needs_restart(&self.config, &new));
        config::reload::record_applied(&mut self.config, &new);
        for s in self.conns.iter() {
            if s.removed.load(std::sync::atomic::Ordering::Relaxed) {
                continue;
            }
            if !new.connections.iter().any(|c| c.name == s.name) {
                not_applied.push(format!(
                    "connection {} is gone from the file (restart to remove connections)",
                    s.name
                ));
            }
        }
        tracing::info!(
            changes = changes.len(),
            not_applied = not_applied.len(),
            "configuration reloaded"
        );
        for c in &changes {
            tracing::info!(change = %c, "reload applied");
        }
        for n in &not_applied {
            tracing::warn!(change = %n, "reload could not apply");
        }
        Ok(Response {
            changes: Some(changes),
            not_applied: Some(not_applied),
            ..Response::ok()
        })
    }
}

/// How to answer a path change announced as control message `msg_id`:
/// when the peer answers; or at once, saying the peer was not told, on a
/// connection without a key (`msg_id` is `None`).
fn awaiting_peer(conn: usize, msg_id: Option<u64>, mut answer: Response) -> Outcome {
    match msg_id {
        Some(msg_id) => Outcome::AwaitPeer {
            conn,
            msg_id,
            answer,
        },
        None => {
            answer.peer = Some(
                "not told (no key_file: the peer accepts no control messages); make the same change there"
                    .into(),
            );
            Outcome::Done(Ok(answer))
        }
    }
}

/// The answer to a path added or removed: its name and id (the peer's
/// verdict is added when known).
fn path_answer(path: String, id: usize) -> Response {
    Response {
        path: Some(path),
        id: Some(id as u64),
        ..Response::ok()
    }
}

fn describe(old: &PathParams, new: &PathParams) -> String {
    let mut parts = Vec::new();
    if old.weight_out != new.weight_out {
        parts.push(format!(
            "weight_out {} -> {}",
            old.weight_out, new.weight_out
        ));
    }
    if old.weight_in != new.weight_in {
        parts.push(format!("weight_in {} -> {}", old.weight_in, new.weight_in));
    }
    if old.window != new.window {
        parts.push(format!("window {} -> {}", old.window, new.window));
    }
    if old.admin != new.admin {
        parts.push(format!(
            "status {} -> {}",
            status_name(old.admin),
            status_name(new.admin)
        ));
    }
    if old.keepalive != new.keepalive {
        parts.push(format!(
            "keepalive {:?} -> {:?}",
            old.keepalive, new.keepalive
        ));
    }
    if old.dead_timer != new.dead_timer {
        parts.push(format!(
            "dead_timer {:?} -> {:?}",
            old.dead_timer, new.dead_timer
        ));
    }
    parts.join(", ")
}

/// Whether the file's path `p` has other addresses than the running `s`
/// (then it is removed and added again). An interface-only path is where
/// its interface has it: only a change of interface moves it. A named
/// remote moves with its name, not with the address it resolved to.
fn addresses_moved(p: &config::PathConfig, s: &PathShared, setup: &ConnSetup) -> bool {
    let local_moved = match p.local {
        Some(ip) => SocketAddr::new(ip, setup.port) != s.local || s.follow,
        None => !s.follow,
    };
    let remote_moved = match (&p.remote_name, &s.remote_name) {
        (None, None) => {
            let remote = p.remote.map(|r| SocketAddr::new(r, setup.remote_port));
            (p.remote.is_some() || s.remote_fixed) && remote != s.remote().map(|(a, _)| a)
        }
        (a, b) => a != b,
    };
    local_moved || remote_moved || p.interface != s.interface
}
