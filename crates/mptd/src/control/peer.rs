//! The peer's path changes: control messages that add or remove a path on
//! the other side (checked against what the config allows us to bind),
//! and the peer's answers to ours.

use std::net::SocketAddr;
use std::time::Instant;

use mpt_proto::path::{AdminStatus, PathParams};
use mpt_proto::wire::{ControlBody, ControlMsg, PathAdd, PathName, Refusal};

use crate::config::{Prefix, MAX_WEIGHT, MAX_WINDOW};
use crate::control::pathset::{self, AddError, NewPath};

use super::control_loop::*;

impl ControlLoop {
    /// Acts on a control message from the peer and answers it.
    pub(super) fn on_peer_control(&mut self, ci: usize, via: usize, msg: ControlMsg, now: Instant) {
        let id = usize::from(msg.path_id);
        let result = match msg.body {
            ControlBody::PathAdd(add) => self.peer_add(ci, id, &add, now),
            ControlBody::PathRemove { name } => self.peer_remove(ci, id, name, now),
            ControlBody::Ack(_) => return,
        };
        if let Err(r) = result {
            tracing::warn!(conn = %self.conns[ci].name, id, refusal = r.as_str(), "refused the peer's path change");
        }
        self.sessions[ci].answer_control(via, &msg, result, now);
    }

    pub(super) fn peer_add(
        &mut self,
        ci: usize,
        id: usize,
        add: &PathAdd,
        now: Instant,
    ) -> Result<(), Refusal> {
        let conn = self.conns[ci].clone();
        if !add.name.is_plain() {
            tracing::debug!(conn = %conn.name, id, name = %add.name, "refused a peer path: name is not printable ASCII");
            return Err(Refusal::Refused);
        }
        let table = conn.paths();
        if let Some(p) = table.get(id) {
            if p.is_removed() {
                // Still draining from an earlier removal: end that now.
                self.draining.retain(|d| !(d.conn == ci && d.id == id));
                pathset::finish(&conn, id);
            } else if p.name == add.name.as_str() {
                // Both sides added it (e.g. both configs were reloaded).
                return Ok(());
            } else {
                return Err(Refusal::IdInUse);
            }
        }
        // The old table may hold a draining socket on the address to bind.
        drop(table);
        if conn.paths().find_live(add.name.as_str()).is_some() {
            return Err(Refusal::NameInUse);
        }
        let setup = self.setups[ci];
        let params = PathParams {
            keepalive: setup.keepalive,
            dead_timer: setup.dead_timer,
            weight_out: u32::from(add.weight_in).clamp(1, MAX_WEIGHT),
            weight_in: u16::try_from(add.weight_out).unwrap_or(u16::MAX).max(1),
            window: add.window.clamp(1, MAX_WINDOW),
            admin: if add.backup {
                AdminStatus::Backup
            } else {
                AdminStatus::Up
            },
        };
        // Our end: where the peer sends to, if it said and we have that
        // address; else the source our routing picks towards the peer.
        // Always on the connection's port, and only on an address the
        // config lets the peer use: the peer chooses paths, not sockets.
        let mut candidates: Vec<SocketAddr> = add
            .sender_remote
            .map(|a| SocketAddr::new(a.ip(), setup.port))
            .into_iter()
            .collect();
        if let Ok(ip) = pathset::source_towards(add.sender_local) {
            candidates.push(SocketAddr::new(ip, setup.port));
        }
        let allowed = &self.peer_locals[ci];
        candidates.retain(|c| peer_may_bind(c.ip(), allowed));
        if candidates.is_empty() {
            tracing::debug!(conn = %conn.name, path = %add.name, wanted = ?add.sender_remote, "refused a peer path: no local address it may use (see allow_peer_paths)");
            return Err(Refusal::Refused);
        }
        let mut last = Refusal::CannotBind;
        for local in candidates {
            let new = NewPath {
                name: add.name.as_str().to_string(),
                local,
                remote: Some(add.sender_local),
                remote_fixed: false,
                remote_name: None,
                interface: None,
                follow: false,
                from_config: false,
                params,
            };
            match pathset::add(&conn, &mut self.sessions[ci], id, new, now) {
                Ok(p) => {
                    tracing::info!(conn = %conn.name, path = %p.name, id, local = %p.local, remote = %add.sender_local, "path added by the peer");
                    return Ok(());
                }
                Err(AddError::Bind { local, source, .. }) => {
                    tracing::debug!(conn = %conn.name, path = %add.name, local = %local, error = %source, "cannot bind for the peer's path");
                    last = Refusal::CannotBind;
                }
                Err(AddError::NameInUse { .. }) => return Err(Refusal::NameInUse),
                Err(AddError::IdInUse(_)) => return Err(Refusal::IdInUse),
                Err(AddError::NoRoom) => return Err(Refusal::TooManyPaths),
            }
        }
        Err(last)
    }

    pub(super) fn peer_remove(
        &mut self,
        ci: usize,
        id: usize,
        name: PathName,
        now: Instant,
    ) -> Result<(), Refusal> {
        let conn = self.conns[ci].clone();
        let table = conn.paths();
        let Some(p) = table.get(id) else {
            // Already gone: the answer to a repeat, or both sides removed it.
            return Ok(());
        };
        if p.name != name.as_str() {
            return Err(Refusal::UnknownPath);
        }
        if p.is_removed() {
            return Ok(());
        }
        // The peer may move the connection to other paths, not cut it off:
        // it keeps one path it can come back on.
        let others = table
            .iter()
            .filter(|q| q.id != id && !q.is_removed())
            .count();
        if others == 0 {
            tracing::debug!(conn = %conn.name, path = %name, id, "refused to remove the last path at the peer's request");
            return Err(Refusal::Refused);
        }
        drop(table);
        if let Some(d) = pathset::remove(&conn, ci, &mut self.sessions[ci], id, now) {
            self.draining.push(d);
        }
        tracing::info!(conn = %conn.name, path = %name, id, "path removed by the peer");
        Ok(())
    }

    /// The peer answered one of our control messages.
    pub(super) fn on_control_answer(
        &mut self,
        ci: usize,
        msg: ControlMsg,
        result: Result<(), Refusal>,
        now: Instant,
    ) {
        let conn = self.conns[ci].clone();
        let id = usize::from(msg.path_id);
        match (msg.body, result) {
            (_, Ok(())) => {
                tracing::info!(conn = %conn.name, id, "peer confirmed the path change");
                self.answer_pending(ci, msg.id, Ok(()));
            }
            (ControlBody::PathAdd(add), Err(r)) => {
                // A path the peer will not serve is useless: take it out.
                let ours = conn
                    .paths()
                    .get(id)
                    .is_some_and(|p| p.name == add.name.as_str() && !p.is_removed());
                if ours {
                    if let Some(d) = pathset::remove(&conn, ci, &mut self.sessions[ci], id, now) {
                        self.draining.push(d);
                    }
                }
                tracing::error!(conn = %conn.name, path = %add.name, refusal = r.as_str(), "the peer refused the new path; removed it again");
                self.answer_pending(
                    ci,
                    msg.id,
                    Err(format!(
                        "the peer refused path {}: {}; nothing changed",
                        add.name,
                        r.as_str()
                    )),
                );
            }
            (_, Err(r)) => {
                tracing::warn!(conn = %conn.name, id, refusal = r.as_str(), "the peer refused the path change");
                self.answer_pending(
                    ci,
                    msg.id,
                    Err(format!(
                        "the path was removed here, but the peer answered: {}",
                        r.as_str()
                    )),
                );
            }
        }
    }
}

/// Whether the peer may have a path opened on local address `ip`: only on
/// one the config allows, and never on an address no peer can reach
/// (unspecified, multicast, broadcast).
pub fn peer_may_bind(ip: std::net::IpAddr, allowed: &[Prefix]) -> bool {
    let unusable = ip.is_unspecified()
        || ip.is_multicast()
        || matches!(ip, std::net::IpAddr::V4(v4) if v4.is_broadcast());
    !unusable && allowed.iter().any(|p| p.contains(ip))
}
