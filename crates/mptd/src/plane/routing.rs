//! The uplinks' routing as the control loop last applied it, for the
//! status to read: where each path leaves, and what the operator should
//! know (warnings, `networks` prefixes left alone, IPv6 outside a full
//! tunnel). Written by `crate::control::routing` after each change,
//! read by `crate::ops::status`.

use std::sync::{Arc, RwLock};

/// Where one path leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathUplink {
    /// Connection name.
    pub conn: String,
    /// Path name.
    pub path: String,
    /// Its sockets' mark (0: none).
    pub mark: u32,
    /// Its uplink's table (none: the main table decides).
    pub table: Option<u32>,
    /// The interface it leaves by, if known.
    pub uplink: Option<String>,
    /// Its gateway, in words: an address, "none (point-to-point)", or why
    /// there is none.
    pub gateway: String,
}

/// The routing state the status shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingView {
    /// Per path, where it leaves.
    pub paths: Vec<PathUplink>,
    /// What the operator should know.
    pub warnings: Vec<String>,
    /// `networks` prefixes not routed into the tunnel (a route mptd did
    /// not create is there).
    pub conflicts: Vec<String>,
    /// `0.0.0.0/0` is tunnelled.
    pub full_v4: bool,
    /// `::/0` is tunnelled.
    pub full_v6: bool,
    /// Full IPv4 tunnel, IPv6 default route on the host, `::/0` not
    /// tunnelled.
    pub ipv6_not_tunnelled: bool,
    /// Rules installed.
    pub rules: usize,
    /// Routes installed.
    pub routes: usize,
}

/// The view, shared between the control loop and the status.
pub type SharedRouting = Arc<RwLock<RoutingView>>;
