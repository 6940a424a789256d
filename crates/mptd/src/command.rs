//! Runtime changes requested over the control socket or by SIGHUP.
//!
//! The control loop owns the sessions, so every change goes to it as a
//! [`Command`] with a reply channel, and it applies the change between two
//! rounds. Nothing here touches the data plane directly except through the
//! same per-path atomics the workers read once per batch.

use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::SyncSender;
use std::time::Instant;

use mpt_proto::path::{AdminStatus, PathParams};
use mpt_proto::Session;
use serde_json::{json, Value};

use crate::config::{self, MAX_WEIGHT};
use crate::state::ConnShared;

/// A change to apply.
#[derive(Debug, Clone)]
pub enum Command {
    /// Set a path's configured status.
    PathState {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// New status.
        state: AdminStatus,
    },
    /// Set a path's weights.
    PathWeight {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// New `weight_out`.
        weight_out: u32,
        /// New `weight_in`, if given.
        weight_in: Option<u16>,
    },
    /// Re-read the config file and apply what can change at run time.
    Reload,
}

/// A command with the channel its answer goes back on.
pub type Request = (Command, SyncSender<Result<Value, String>>);

/// Applies commands to the sessions; lives inside the control loop.
pub struct Applier {
    /// The config file, for reload.
    pub config_path: PathBuf,
}

fn find(
    conns: &[std::sync::Arc<ConnShared>],
    conn: &str,
    path: &str,
) -> Result<(usize, usize), String> {
    let ci = conns
        .iter()
        .position(|c| c.name == conn)
        .ok_or_else(|| format!("no connection named \"{conn}\""))?;
    let pi = conns[ci]
        .paths
        .iter()
        .position(|p| p.name == path)
        .ok_or_else(|| format!("connection \"{conn}\" has no path named \"{path}\""))?;
    Ok((ci, pi))
}

fn status_name(s: AdminStatus) -> &'static str {
    match s {
        AdminStatus::Up => "up",
        AdminStatus::Down => "down",
        AdminStatus::Backup => "backup",
    }
}

impl Applier {
    /// Applies one command.
    pub fn apply(
        &self,
        cmd: Command,
        conns: &[std::sync::Arc<ConnShared>],
        sessions: &mut [Session],
        now: Instant,
    ) -> Result<Value, String> {
        match cmd {
            Command::PathState { conn, path, state } => {
                let (ci, pi) = find(conns, &conn, &path)?;
                let mut params = *sessions[ci].paths()[pi].params();
                params.admin = state;
                set(sessions, conns, ci, pi, params, now)?;
                tracing::info!(conn = %conn, path = %path, status = status_name(state), "path status set by operator");
                Ok(json!({}))
            }
            Command::PathWeight {
                conn,
                path,
                weight_out,
                weight_in,
            } => {
                if !(1..=MAX_WEIGHT).contains(&weight_out) {
                    return Err(format!(
                        "weight_out {weight_out} is outside 1..={MAX_WEIGHT}"
                    ));
                }
                if weight_in == Some(0) {
                    return Err("weight_in must be at least 1".into());
                }
                let (ci, pi) = find(conns, &conn, &path)?;
                let mut params = *sessions[ci].paths()[pi].params();
                params.weight_out = weight_out;
                if let Some(w) = weight_in {
                    params.weight_in = w;
                }
                set(sessions, conns, ci, pi, params, now)?;
                tracing::info!(conn = %conn, path = %path, weight_out, weight_in = params.weight_in, "path weights set by operator");
                Ok(json!({}))
            }
            Command::Reload => self.reload(conns, sessions, now),
        }
    }

    fn reload(
        &self,
        conns: &[std::sync::Arc<ConnShared>],
        sessions: &mut [Session],
        now: Instant,
    ) -> Result<Value, String> {
        let new = config::load(&self.config_path).map_err(|e| e.to_string())?;
        let mut changes = Vec::new();
        let mut not_applied = Vec::new();
        for c in &new.connections {
            let Some(ci) = conns.iter().position(|s| s.name == c.name) else {
                not_applied.push(format!(
                    "connection {} is new (restart to add connections)",
                    c.name
                ));
                continue;
            };
            for p in &c.paths {
                let Some(pi) = conns[ci].paths.iter().position(|s| s.name == p.name) else {
                    not_applied.push(format!("connection {} path {} is new (adding paths at run time is not supported yet)", c.name, p.name));
                    continue;
                };
                let old = *sessions[ci].paths()[pi].params();
                let params = PathParams {
                    keepalive: c.keepalive,
                    dead_timer: c.dead_timer,
                    weight_out: p.weight_out,
                    weight_in: p.weight_in,
                    window: p.window,
                    admin: p.status,
                };
                if params != old {
                    set(sessions, conns, ci, pi, params, now)?;
                    changes.push(format!(
                        "connection {} path {}: {}",
                        c.name,
                        p.name,
                        describe(&old, &params)
                    ));
                }
            }
            for s in &conns[ci].paths {
                if !c.paths.iter().any(|p| p.name == s.name) {
                    not_applied.push(format!("connection {} path {} is gone from the file (removing paths at run time is not supported yet)", c.name, s.name));
                }
            }
        }
        for s in conns {
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
        Ok(json!({"changes": changes, "not_applied": not_applied}))
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

fn set(
    sessions: &mut [Session],
    conns: &[std::sync::Arc<ConnShared>],
    ci: usize,
    pi: usize,
    params: PathParams,
    now: Instant,
) -> Result<(), String> {
    sessions[ci]
        .set_path_params(pi, params, now)
        .map_err(|e| e.to_string())?;
    let shared = &conns[ci].paths[pi];
    shared.weight_out.store(params.weight_out, Relaxed);
    shared.weight_in.store(u32::from(params.weight_in), Relaxed);
    shared.window.store(params.window, Relaxed);
    Ok(())
}
