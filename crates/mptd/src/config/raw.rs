//! The config as serde reads it: `Raw*` tables that refuse unknown keys
//! and values of the wrong shape, each value parsed by its own
//! `Deserialize` impl so that its error carries its position. Nothing
//! here checks what spans several keys: that is [`super::validate`]'s.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::defaults::{
    default_control, default_dead, default_hook_timeout, default_keepalive, default_log,
    default_mss_clamp, default_mtu, default_one_u16, default_one_u32, default_port, default_repair,
    default_tun_name,
};
use super::duration::Dur;
use super::host::RawRemote;
use super::prefix::Prefix;

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawStatus {
    Up,
    Down,
    Backup,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawScheduler {
    Adaptive,
    Weighted,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawRedundancy {
    Auto,
    Off,
    All,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) daemon: Option<Spanned<RawDaemon>>,
    pub(super) tunnel: Spanned<RawTunnel>,
    #[serde(default)]
    pub(super) connection: Vec<Spanned<RawConnection>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDaemon {
    #[serde(default = "default_control")]
    pub(super) control: PathBuf,
    #[serde(default)]
    pub(super) cmd_port: u16,
    #[serde(default)]
    pub(super) cmd_port_admin: bool,
    /// Removed (refused with advice); any value.
    #[serde(default)]
    pub(super) accept_remote: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) include: String,
    #[serde(default)]
    pub(super) threads: usize,
    #[serde(default)]
    pub(super) metrics: String,
    #[serde(default = "default_log")]
    pub(super) log: String,
    #[serde(default)]
    pub(super) private_key_file: Option<PathBuf>,
    #[serde(default)]
    pub(super) cipher: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) route_table_base: Option<u32>,
    #[serde(default)]
    pub(super) fwmark_base: Option<u32>,
    #[serde(default)]
    pub(super) rule_priority_base: Option<u32>,
    #[serde(default)]
    pub(super) resolve_interval: Option<Spanned<Dur>>,
    /// The hook program: a path, or a program and its arguments.
    #[serde(default)]
    pub(super) hook: Option<Spanned<RawHook>>,
    #[serde(default = "default_hook_timeout")]
    pub(super) hook_timeout: Dur,
    /// See [`super::handshake`].
    #[serde(default)]
    pub(super) handshake_source_rate: Option<u32>,
    #[serde(default)]
    pub(super) handshake_source_burst: Option<u32>,
    #[serde(default)]
    pub(super) handshake_rate: Option<u32>,
    #[serde(default)]
    pub(super) handshake_queue: Option<usize>,
}

/// `[daemon] hook`: `"/path/to/program"` or `["/path/to/program", "arg"]`
/// (never a shell command line).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawHook {
    Program(String),
    Argv(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTunnel {
    #[serde(default = "default_tun_name")]
    pub(super) name: String,
    #[serde(default = "default_mtu")]
    pub(super) mtu: u16,
    pub(super) ipv4: Option<Prefix>,
    pub(super) ipv6: Option<Prefix>,
    #[serde(default = "default_mss_clamp")]
    pub(super) mss_clamp: bool,
    #[serde(default)]
    pub(super) accel_port: u16,
    #[serde(default)]
    pub(super) accel_congestion: Option<String>,
    #[serde(default)]
    pub(super) accel_pool: Option<usize>,
    #[serde(default)]
    pub(super) accel_legs: Option<String>,
    #[serde(default)]
    pub(super) accel_initial_window: Option<u32>,
    #[serde(default)]
    pub(super) accel_source: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConnection {
    pub(super) name: String,
    #[serde(default = "default_one_u32")]
    pub(super) id: u32,
    pub(super) peer_ipv4: Option<IpAddr>,
    pub(super) peer_ipv6: Option<IpAddr>,
    #[serde(default)]
    pub(super) networks: Vec<Prefix>,
    #[serde(default = "default_port")]
    pub(super) port: u16,
    pub(super) remote_port: Option<u16>,
    #[serde(default = "default_keepalive")]
    pub(super) keepalive: Dur,
    #[serde(default = "default_dead")]
    pub(super) dead_timer: Dur,
    #[serde(default)]
    pub(super) scheduler: Option<RawScheduler>,
    #[serde(default = "default_repair")]
    pub(super) repair: bool,
    #[serde(default)]
    pub(super) redundancy: Option<RawRedundancy>,
    pub(super) key_file: Option<PathBuf>,
    pub(super) public_key: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) rekey_after: Option<Dur>,
    #[serde(default)]
    pub(super) allow_peer_paths: Vec<Prefix>,
    #[serde(default)]
    pub(super) accelerate: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) path: Vec<Spanned<RawPath>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPath {
    pub(super) name: String,
    pub(super) interface: Option<String>,
    pub(super) local: Option<IpAddr>,
    pub(super) remote: Option<RawRemote>,
    pub(super) gateway: Option<IpAddr>,
    #[serde(default = "default_one_u32")]
    pub(super) weight_out: u32,
    #[serde(default = "default_one_u16")]
    pub(super) weight_in: u16,
    #[serde(default = "default_one_u32")]
    pub(super) window: u32,
    #[serde(default)]
    pub(super) status: Option<RawStatus>,
    pub(super) accel_congestion: Option<String>,
}
