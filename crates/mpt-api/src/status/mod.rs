//! The status document: what `status` answers and `mpt status --json`
//! prints, the contract scripts rely on.
//!
//! The document is a tree of objects: the daemon ([`Status`]), its
//! connections ([`Connection`]) and their paths ([`PathStatus`]), with
//! groups of counters along the way. These types describe it field by
//! field, for the daemon that writes it and for every client that reads
//! it, under three rules:
//!
//! - **Every field is an `Option`, `None` when the document does not
//!   have it.** A daemon older than a field does not send it, and a
//!   client must still show the rest (`mpt status` prints `-`). mptd
//!   fills every field (`Some`). A field left `None` is left out when
//!   written, so a document read and written again is unchanged (but for
//!   a `null` where mptd always writes a value, which reads as `None`
//!   too and is then left out).
//! - **A field the daemon may set to `null` is an `Option<Option<T>>`**:
//!   `Some(None)` is the daemon's `null` (a path's remote address not
//!   learnt yet, nothing received yet, no estimate yet, no key), which a
//!   reader may show differently from a missing field.
//! - **A field this version does not know is kept** in the struct's
//!   `other` map, and written back after the known ones: `mpt status
//!   --json` passes a newer daemon's fields on, and `mpt status` lists a
//!   newer daemon's non-zero counters. Nothing is refused.
//!
//! Fields are declared in alphabetical order of their names: the daemon
//! used to build the document as `serde_json` maps, which sort their keys,
//! and this keeps the bytes it writes the same. A field of another type
//! than declared here makes the document unreadable; the daemon has never
//! changed a field's type.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::field::nullable;

mod accel;
mod connection;
mod handshake;
mod path;

pub use accel::{AccelPathBytes, AccelStats};
pub use connection::{
    Connection, ConnectionDrops, Equalize, Handover, HoldTimes, LastHandover, Redundancy, Reorder,
    Repair, Session, Tcp,
};
pub use handshake::{HandshakeRefusals, HandshakeStats};
pub use path::PathStatus;

/// The whole document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    /// TCP acceleration (absent: not configured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accel: Option<AccelStats>,
    /// The remote command port's counters; only in the answer to a
    /// `status` that came over that port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmd_port: Option<CmdPortStats>,
    /// The connections, in the configuration's order (those removed by a
    /// reload are not listed; with a `conn` request, that one alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<Vec<Connection>>,
    /// Daemon-wide drops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops: Option<DaemonDrops>,
    /// The netlink listener's counters (`null`: not listening).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub netlink: Option<Option<NetlinkStats>>,
    /// The public-key handshake's responder, for all connections (`null`:
    /// no connection uses it); its refusals include the daemon-wide ones.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub noise: Option<Option<HandshakeStats>>,
    /// The uplinks' policy routing: where each path leaves, and what the
    /// operator should know about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// What the shared ports refused before knowing the connection
    /// (`null`: no client connection).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub shared_port: Option<Option<SharedPortStats>>,
    /// How the operator's hook runs ended (absent: no `[daemon] hook`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hooks: Option<HookStats>,
    /// The tun interface's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
    /// Seconds since the daemon started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_s: Option<u64>,
    /// Fields this version does not know (see the module docs).
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Status {
    /// The connections (none when the document has no list).
    pub fn connections(&self) -> &[Connection] {
        self.connections.as_deref().unwrap_or_default()
    }

    /// The connection named `name`.
    pub fn connection(&self, name: &str) -> Option<&Connection> {
        self.connections()
            .iter()
            .find(|c| c.name.as_deref() == Some(name))
    }
}

/// The uplinks' policy routing (see docs/DEPLOY.md, "How routing
/// works").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Routing {
    /// `networks` prefixes not routed into the tunnel, each with why (a
    /// route mptd did not create is there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<Vec<String>>,
    /// `0.0.0.0/0` goes through the tunnel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_tunnel_ipv4: Option<bool>,
    /// `::/0` goes through the tunnel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_tunnel_ipv6: Option<bool>,
    /// A full IPv4 tunnel on a host with an IPv6 default route, `::/0` not
    /// in `networks`: IPv6 traffic leaves outside the tunnel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_not_tunnelled: Option<bool>,
    /// Where each configured path leaves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<PathRouting>>,
    /// Routes mptd installed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<u64>,
    /// Rules mptd installed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<u64>,
    /// What the operator should know (two paths of a connection on one
    /// uplink, an uplink without gateway, IPv6 outside the tunnel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Where one path leaves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PathRouting {
    /// Connection name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conn: Option<String>,
    /// The gateway, in words (an address, or why there is none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// The mark of its sockets (0: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mark: Option<u32>,
    /// Path name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The routing table its traffic looks up (254: the main table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// The interface it leaves by (`null`: not known).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub uplink: Option<Option<String>>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Daemon-wide drops (not tied to a connection).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DaemonDrops {
    /// Handshake messages dropped because the control loop's handshake
    /// queue was full (a handshake flood; sessions' own control traffic
    /// has its own queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake_queue_full: Option<u64>,
    /// Packets from the tun with no connection routing them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_route: Option<u64>,
    /// Failed reads from the tun.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tun_read_errors: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The hook's runs (`[daemon] hook`), by how they ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HookStats {
    /// Runs that exited with status 0.
    pub ok: u64,
    /// Runs that exited non-zero, died of a signal or could not start.
    pub failed: u64,
    /// Runs killed at `hook_timeout`.
    pub timed_out: u64,
    /// Events dropped (queue full, or the daemon stopping).
    pub dropped: u64,
}

/// The netlink listener (addresses and links coming and going).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NetlinkStats {
    /// Error answers to the listener's dump requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// Events passed on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
    /// Messages (or whole datagrams) that did not parse: skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<u64>,
    /// Notifications the kernel dropped (`ENOBUFS`); each costs a new dump.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overruns: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// What the shared ports refused before knowing the connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SharedPortStats {
    /// Initiations whose mac1 is wrong (not made for our public key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_mac1: Option<u64>,
    /// Initiations handed to the control loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initiations: Option<u64>,
    /// Initiations the kernel dropped at a full initiation lane (a flood
    /// beyond what the daemon reads; established sessions do not queue
    /// there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane_drops: Option<u64>,
    /// Datagrams too short or malformed to name a session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<u64>,
    /// Initiations dropped because the control loop's queue was full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_full: Option<u64>,
    /// Failed writes to the tun.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tun_write_errors: Option<u64>,
    /// Datagrams whose session index is no client connection's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_session: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The remote command port's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CmdPortStats {
    /// Authenticated requests executed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<u64>,
    /// Requests refused, by reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<CmdPortRefusals>,
    /// TCP connections turned away (too many at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_busy: Option<u64>,
    /// UDP answers replaced by "use TCP" (too large for a datagram).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_too_large: Option<u64>,
    /// Refusals not sent (UDP: larger than the request, or over the rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unanswered: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Remote command port requests refused, by reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CmdPortRefusals {
    /// Bad MAC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<u64>,
    /// Authenticated, but outside the key's scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forbidden: Option<u64>,
    /// Not an envelope, or a bad field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<u64>,
    /// Names a connection without `key_file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_key: Option<u64>,
    /// Longer than a request may be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oversized: Option<u64>,
    /// A nonce seen before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<u64>,
    /// The replay set was full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_full: Option<u64>,
    /// Timestamp out of the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<u64>,
    /// Names no configured connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_connection: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

#[cfg(test)]
mod tests;
