//! The daemon's TOML configuration: parsed, validated, typed.
//!
//! Parsing happens in two steps. Serde turns the text into `Raw*` structs
//! (`raw`), rejecting unknown keys and values of the wrong shape
//! (durations, prefixes, states are parsed by their own `Deserialize`
//! impls, so their errors carry the position of the offending value).
//! Then `validate` checks what spans several keys (duplicate names,
//! address families, limits) and reports the position of the table at
//! fault. Every error names the file, line, column and key: a config is
//! either wholly right or the daemon does not start. [`load`] and
//! [`parse`] run both steps, over the main file and the files
//! `[daemon] include` names (`include`).
//!
//! Identities: `[daemon] private_key_file` (X25519, written by `mpt
//! keypair`) is read during validation, because two checks need our own
//! public key: no connection may name it as its peer's, and no two
//! connections may name the same peer key. A connection with a
//! `public_key` runs the public-key (Noise IK) handshake, with its
//! `key_file` PSK mixed in if it has one (see `crate::control::noise`).
//!
//! This file holds the typed config and its limits; the other files of
//! the module one step each: `prefix` and `duration` (value types),
//! `defaults`, `raw`, `validate`, [`load`] (with `position` and
//! `error` for where an error is), `include` and [`reload`].

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpt_proto::crypto::Cipher;
use mpt_proto::noise::PublicKey;
use mpt_proto::path::AdminStatus;

pub use accel::AccelSettings;
pub use defaults::DEFAULT_CIPHER;
pub use duration::parse_duration;
pub use error::ConfigError;
pub use handshake::{HandshakeConfig, DEFAULT_HANDSHAKE_QUEUE};
pub use host::{is_host_name, MAX_HOST_NAME};
pub use include::IncludedFile;
#[cfg(test)]
use load::parse_with;
pub use load::{load, load_without_peers, parse};
pub use prefix::Prefix;
pub use validate::is_interface_name;

pub mod accel;
mod defaults;
mod duration;
mod error;
mod handshake;
mod host;
mod include;
mod load;
mod position;
mod prefix;
mod raw;
pub mod reload;
mod validate;

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `[daemon]`.
    pub daemon: DaemonConfig,
    /// `[tunnel]`.
    pub tunnel: TunnelConfig,
    /// `[[connection]]`, those of the main file first, then those of the
    /// included files.
    pub connections: Vec<ConnectionConfig>,
    /// The files `[daemon] include` read, in order.
    pub includes: Vec<IncludedFile>,
}

/// `[daemon]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    /// Unix control socket path.
    pub control: PathBuf,
    /// Remote command port (0 = off).
    pub cmd_port: u16,
    /// Whether a key on the remote command port may also reload the
    /// server and add or remove paths (default: only status, path state
    /// and weights of its own connection).
    pub cmd_port_admin: bool,
    /// `include` pattern ("" = none), as written.
    pub include: String,
    /// Data-plane workers (tun queues); 0 = one per core.
    pub threads: usize,
    /// Prometheus listen address ("" = off).
    pub metrics: String,
    /// Log filter.
    pub log: String,
    /// Our X25519 private key file (`mpt keypair` writes it).
    pub private_key_file: Option<PathBuf>,
    /// Our public key, derived from `private_key_file` when the config was
    /// validated.
    pub public_key: Option<PublicKey>,
    /// The data cipher of every encrypted connection (both ends must
    /// agree; the handshake fails otherwise).
    pub cipher: Cipher,
    /// The hook's program and arguments (empty: no hook), run on tunnel,
    /// connection and path events (see `crate::io::hook`).
    pub hook: Vec<String>,
    /// A hook run is killed after this long.
    pub hook_timeout: Duration,
    /// How often a path's `remote` host name is resolved again
    /// (`crate::control::names`).
    pub resolve_interval: Duration,
    /// The numbers of the rules, tables and marks mptd's policy routing
    /// uses (`route_table_base`, `fwmark_base`, `rule_priority_base`).
    pub routing: RoutingNumbers,
    /// The handshake limits (`handshake_source_rate`,
    /// `handshake_source_burst`, `handshake_rate`, `handshake_queue`).
    pub handshake: HandshakeConfig,
}

/// Where mptd's policy routing lives in the kernel's number spaces (see
/// `crate::control::routing_plan` and docs/DEPLOY.md, "How routing
/// works"). Two daemons on one host need different values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingNumbers {
    /// The full tunnel's table; uplink `i` uses table `table_base + 1 + i`.
    pub table_base: u32,
    /// The mark of path sockets without an uplink of their own; uplink
    /// `i`'s sockets carry `fwmark_base + 1 + i`. The low 16 bits are
    /// zero: `fwmark_base/0xffff0000` matches every mark of this daemon.
    pub fwmark_base: u32,
    /// Rules at `priority_base` (uplinks), `+ 1` (main table without its
    /// default routes) and `+ 2` (everything else into the tunnel).
    pub priority_base: u32,
}

impl Default for RoutingNumbers {
    fn default() -> Self {
        RoutingNumbers {
            table_base: DEFAULT_ROUTE_TABLE_BASE,
            fwmark_base: DEFAULT_FWMARK_BASE,
            priority_base: DEFAULT_RULE_PRIORITY_BASE,
        }
    }
}

/// Default `route_table_base`: 0x6d70 ("mp"), far from the tables other
/// tools number by default (wg-quick 51820, NetworkManager's
/// per-connection tables from 1000 up, the reserved 253-255).
pub const DEFAULT_ROUTE_TABLE_BASE: u32 = 0x6d70;
/// Default `fwmark_base`: "mp" in the high 16 bits, so it does not meet
/// marks that use the low bits (wg-quick's 0xca6c, firewalld's zones).
pub const DEFAULT_FWMARK_BASE: u32 = 0x6d70_0000;
/// Default `rule_priority_base`: before the main table's rule (32766),
/// after the usual hand-written rules (100-1000s).
pub const DEFAULT_RULE_PRIORITY_BASE: u32 = 28000;
/// The part of a mark that says "mptd's": every mark of one daemon
/// shares its bits under this mask.
pub const FWMARK_MASK: u32 = 0xffff_0000;

/// `[tunnel]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct TunnelConfig {
    /// Interface name.
    pub name: String,
    /// MTU of the tun interface.
    pub mtu: u16,
    /// IPv4 address and prefix length.
    pub ipv4: Option<Prefix>,
    /// IPv6 address and prefix length.
    pub ipv6: Option<Prefix>,
    /// Lower the MSS option of TCP SYNs read from tun to what fits the
    /// MTU (`mss_clamp`, on by default; see `mpt_proto::mss`).
    pub mss_clamp: bool,
    /// TCP acceleration (`accel_port`, `accel_congestion`, `accel_pool`).
    pub accel: AccelSettings,
}

/// One `[[connection]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionConfig {
    /// Name.
    pub name: String,
    /// Connection id on the wire (both sides must agree).
    pub id: u32,
    /// Peer tunnel IPv4 address.
    pub peer_ipv4: Option<IpAddr>,
    /// Peer tunnel IPv6 address.
    pub peer_ipv6: Option<IpAddr>,
    /// Further prefixes routed to this peer.
    pub networks: Vec<Prefix>,
    /// Local UDP port of every path.
    pub port: u16,
    /// The peer's UDP port.
    pub remote_port: u16,
    /// Probe interval.
    pub keepalive: Duration,
    /// Silence before a path is down.
    pub dead_timer: Duration,
    /// Scheduler.
    pub scheduler: SchedulerKind,
    /// Ask the peer again for datagrams a path lost at random (see
    /// `mpt_proto::repair`).
    pub repair: bool,
    /// Which packets also go on a second path.
    pub redundancy: mpt_proto::sched::Redundancy,
    /// Pre-shared key file.
    pub key_file: Option<PathBuf>,
    /// The peer's X25519 public key (needs `[daemon] private_key_file`):
    /// the connection runs the public-key handshake.
    pub public_key: Option<PublicKey>,
    /// Public-key connections: age of the keys at which a new handshake
    /// starts, instead of 120 s (the hard limits scale with it). For tests
    /// of rekeying; not meant to be changed in service.
    pub rekey_after: Option<Duration>,
    // Further local prefixes on which the peer may open paths (besides
    /// the configured paths' own addresses).
    pub allow_peer_paths: Vec<Prefix>,
    /// Destinations whose TCP flows are accelerated (split at this
    /// gateway and carried over legs to the peer; docs/ACCELERATION.md).
    pub accelerate: Vec<mpt_accel::Selector>,
    /// Paths.
    pub paths: Vec<PathConfig>,
}

impl ConnectionConfig {
    /// A server's client connection: no configured paths, served on the
    /// shared port (`port`), its paths learnt from the client (needs a
    /// `public_key`; see `crate::plane::shared_port`).
    pub fn is_client(&self) -> bool {
        self.paths.is_empty()
    }

    /// The local addresses on which the peer may have paths opened: each
    /// configured path's own address, and `allow_peer_paths`.
    pub fn peer_locals(&self) -> Vec<Prefix> {
        // An interface-only path's address changes: such addresses belong
        // in `allow_peer_paths`.
        self.paths
            .iter()
            .filter_map(|p| p.local)
            .map(|local| Prefix {
                addr: local,
                len: if local.is_ipv4() { 32 } else { 128 },
            })
            .chain(self.allow_peer_paths.iter().copied())
            .collect()
    }
}

/// One `[[connection.path]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathConfig {
    /// Name.
    pub name: String,
    /// Bind to this device.
    pub interface: Option<String>,
    /// Local address; `None`: the interface's current address of the
    /// remote's family, followed as it changes (then `interface` is set).
    pub local: Option<IpAddr>,
    /// Remote address (learnt if absent, and resolved from
    /// `remote_name` when that is set).
    pub remote: Option<IpAddr>,
    /// `remote` as a host name: resolved at start and again every
    /// `resolve_interval` (then `remote` is `None`).
    pub remote_name: Option<String>,
    /// The uplink's gateway for this path, when the kernel's routes do not
    /// tell it (no default route on the interface).
    pub gateway: Option<IpAddr>,
    /// Outgoing share.
    pub weight_out: u32,
    /// Share asked of the peer.
    pub weight_in: u16,
    /// Back-to-back packets per turn.
    pub window: u32,
    /// Configured status.
    pub status: AdminStatus,
    /// The congestion control of this path's pinned acceleration leg
    /// (`None`: `[tunnel] accel_congestion`).
    pub accel_congestion: Option<String>,
}

/// Scheduler choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerKind {
    /// By measured capacity and delay (the default; the weights cap a
    /// path's share of its capacity).
    Adaptive,
    /// Smooth weighted round robin by `weight_out`.
    Weighted,
}

/// Why `[daemon] accept_remote` is refused, and what to do instead.
pub const ACCEPT_REMOTE_REMOVED: &str = "accept_remote was removed: list each client with public_key (a connection without [[connection.path]] learns its paths); use include = \"clients.d/*.toml\" for many";

/// Largest weight accepted; keeps scheduler credit arithmetic far from
/// overflow with 64 paths.
pub const MAX_WEIGHT: u32 = 1_000_000;
/// Most connections one daemon serves (the transmit stage packs the
/// connection index into 8 bits).
pub const MAX_CONNECTIONS: usize = 256;

/// A connection's `port` when it names none, and the shared port a
/// concentrator opens while it awaits its first client (see
/// [`Config::awaits_clients`]).
pub const DEFAULT_SHARED_PORT: u16 = 65022;
/// Shortest and longest `[daemon] resolve_interval`.
pub const RESOLVE_INTERVAL_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(24 * 3600));

/// Largest path window accepted.
pub const MAX_WINDOW: u32 = 1024;

impl Config {
    /// A concentrator started before its first client: no connection yet,
    /// clients to come from `include` files on reload. It opens
    /// [`DEFAULT_SHARED_PORT`].
    pub fn awaits_clients(&self) -> bool {
        self.connections.is_empty() && !self.daemon.include.is_empty()
    }

    /// What `mptd --check` and `mpt config check` print for a valid
    /// config: totals, then one line per included file.
    pub fn check_report(&self, file: &Path) -> String {
        let paths: usize = self.connections.iter().map(|c| c.paths.len()).sum();
        let mut out = format!(
            "{}: ok ({} connection(s), {} path(s))",
            file.display(),
            self.connections.len(),
            paths
        );
        if !self.daemon.include.is_empty() {
            out.push_str(&format!(
                "\n  include = \"{}\": {} file(s)",
                self.daemon.include,
                self.includes.len()
            ));
        }
        for inc in &self.includes {
            out.push_str(&format!(
                "\n  included {}: {} connection(s)",
                inc.path.display(),
                inc.connections.len()
            ));
        }
        out
    }

    /// Warnings about identity settings that have no effect: a private key
    /// that no connection uses (none has a `public_key`). Printed by `mptd
    /// --check` and logged at start-up.
    pub fn identity_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let any_peer_key = self.connections.iter().any(|c| c.public_key.is_some());
        if !any_peer_key && self.daemon.private_key_file.is_some() && !self.awaits_clients() {
            out.push("[daemon] `private_key_file` is loaded but no connection has a `public_key`: no public-key handshake will run".into());
        }
        out
    }
}

#[cfg(test)]
mod tests;
