//! Requests to mptd, and the JSON line each one becomes.
//!
//! A client builds a [`Request`] and sends [`Request::to_json`] as one
//! line; optional fields it was not given are left out (the daemon reads
//! a missing field as "not given", and ignores fields it does not know).
//! The daemon reads the line back with [`Request::parse`], whose checks
//! run in a fixed order and answer with the messages mptd always gave
//! ([`RequestError`]).

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use crate::version::CONTROL_VERSION;

mod parse;

pub use parse::RequestError;

/// A path's configured status, as `mpt path CONN PATH up|down|backup` sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathState {
    /// Carries traffic.
    Up,
    /// Carries nothing (still probed so it can come back).
    Down,
    /// Carries traffic only when no `up` path is alive.
    Backup,
}

impl PathState {
    /// The wire name: `up`, `down` or `backup`.
    pub fn as_str(self) -> &'static str {
        match self {
            PathState::Up => "up",
            PathState::Down => "down",
            PathState::Backup => "backup",
        }
    }

    /// The state of a wire name.
    pub fn from_name(name: &str) -> Option<PathState> {
        match name {
            "up" => Some(PathState::Up),
            "down" => Some(PathState::Down),
            "backup" => Some(PathState::Backup),
            _ => None,
        }
    }
}

/// One request to the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// The status document.
    Status,
    /// The status document with one connection only (the daemon answers
    /// an error naming close names when there is no such connection).
    StatusOf {
        /// Connection name.
        conn: String,
    },
    /// Set a path's configured status.
    PathState {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// New status.
        state: PathState,
    },
    /// Set a path's weights; `weight_in` unchanged when `None`.
    PathWeight {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// Share of outgoing traffic.
        weight_out: u32,
        /// Share asked of the peer.
        weight_in: Option<u16>,
    },
    /// Add a path at run time.
    PathAdd {
        /// Connection name.
        conn: String,
        /// New path's name.
        name: String,
        /// Local address.
        local: IpAddr,
        /// Remote address (learnt if absent).
        remote: Option<IpAddr>,
        /// Device to bind to.
        interface: Option<String>,
        /// Outgoing weight (and incoming, for a new path; default 1).
        weight_out: Option<u32>,
    },
    /// Remove a path at run time.
    PathRemove {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// Even if it is the only usable path.
        force: bool,
    },
    /// Re-read the config file.
    Reload,
}

impl Request {
    /// Every `request` name the daemon answers (what [`Request::name`]
    /// gives; any other is refused as unknown).
    pub const NAMES: [&'static str; 6] = [
        "status",
        "path_state",
        "path_weight",
        "path_add",
        "path_remove",
        "reload",
    ];

    /// The `request` field.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Status | Request::StatusOf { .. } => "status",
            Request::PathState { .. } => "path_state",
            Request::PathWeight { .. } => "path_weight",
            Request::PathAdd { .. } => "path_add",
            Request::PathRemove { .. } => "path_remove",
            Request::Reload => "reload",
        }
    }

    /// The request object; optional fields are left out when not given.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("version".into(), json!(CONTROL_VERSION));
        m.insert("request".into(), json!(self.name()));
        let mut put = |k: &str, v: Value| {
            m.insert(k.into(), v);
        };
        match self {
            Request::Status | Request::Reload => {}
            Request::StatusOf { conn } => put("conn", json!(conn)),
            Request::PathState { conn, path, state } => {
                put("conn", json!(conn));
                put("path", json!(path));
                put("state", json!(state.as_str()));
            }
            Request::PathWeight {
                conn,
                path,
                weight_out,
                weight_in,
            } => {
                put("conn", json!(conn));
                put("path", json!(path));
                put("weight_out", json!(weight_out));
                if let Some(w) = weight_in {
                    put("weight_in", json!(w));
                }
            }
            Request::PathAdd {
                conn,
                name,
                local,
                remote,
                interface,
                weight_out,
            } => {
                put("conn", json!(conn));
                put("name", json!(name));
                put("local", json!(local.to_string()));
                if let Some(r) = remote {
                    put("remote", json!(r.to_string()));
                }
                if let Some(i) = interface {
                    put("interface", json!(i));
                }
                if let Some(w) = weight_out {
                    put("weight_out", json!(w));
                }
            }
            Request::PathRemove { conn, path, force } => {
                put("conn", json!(conn));
                put("path", json!(path));
                if *force {
                    put("force", json!(true));
                }
            }
        }
        Value::Object(m)
    }

    /// The request as one line of text (no newline).
    pub fn to_line(&self) -> String {
        self.to_json().to_string()
    }
}

#[cfg(test)]
mod tests;
