//! The daemon's TOML configuration: parsed, validated, typed.
//!
//! Parsing happens in two steps. Serde turns the text into `Raw*` structs,
//! rejecting unknown keys and values of the wrong shape (durations,
//! prefixes, states are parsed by their own `Deserialize` impls, so their
//! errors carry the position of the offending value). Then [`validate`]
//! checks what spans several keys (duplicate names, address families,
//! limits) and reports the position of the table at fault. Every error
//! names the file, line, column and key: a config is either wholly right or
//! the daemon does not start.
//!
//! Identities: `[daemon] private_key_file` (X25519, written by `mpt
//! keypair`) is read during validation, because two checks need our own
//! public key: no connection may name it as its peer's, and no two
//! connections may name the same peer key. A connection with a
//! `public_key` runs the public-key (Noise IK) handshake, with its
//! `key_file` PSK mixed in if it has one (see `crate::control::noise`).

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpt_proto::crypto::Cipher;
use mpt_proto::noise::PublicKey;
use mpt_proto::path::AdminStatus;
use serde::de::{self, Deserializer};
use serde::Deserialize;
use toml::Spanned;

pub use include::IncludedFile;
use include::Sources;

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
}

/// `[daemon] cipher` when not given: AES-256-GCM, about twice as fast as
/// ChaCha20-Poly1305 on CPUs with AES instructions (see
/// `mpt_proto::crypto::Cipher`).
pub const DEFAULT_CIPHER: Cipher = Cipher::Aes256Gcm;

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
    /// Remote address (learnt if absent).
    pub remote: Option<IpAddr>,
    /// Outgoing share.
    pub weight_out: u32,
    /// Share asked of the peer.
    pub weight_in: u16,
    /// Back-to-back packets per turn.
    pub window: u32,
    /// Configured status.
    pub status: AdminStatus,
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

/// An address with a prefix length, e.g. `10.20.0.0/16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    /// Address.
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
}

impl Prefix {
    /// Whether `ip` lies inside this prefix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| format!("expected ADDRESS/PREFIXLEN, got `{s}`"))?;
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("`{a}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len: u8 = l
            .parse()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("prefix length `{l}` is not a number in 0..={max}"))?;
        Ok(Prefix { addr, len })
    }
}

impl<'de> Deserialize<'de> for Prefix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// Parses "2s", "250ms", "1.5s", "100us", "1m".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("duration `{s}` needs a unit: us, ms, s or m (e.g. \"2s\")"))?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("duration `{s}`: `{num}` is not a number"))?;
    let secs = match unit {
        "us" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" => n * 60.0,
        _ => {
            return Err(format!(
                "duration `{s}`: unknown unit `{unit}` (use us, ms, s or m)"
            ))
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("duration `{s}` is out of range"))
}

#[derive(Debug, Clone, Copy)]
struct Dur(Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map(Dur).map_err(de::Error::custom)
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawStatus {
    Up,
    Down,
    Backup,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawScheduler {
    Adaptive,
    Weighted,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawRedundancy {
    Auto,
    Off,
    All,
}

fn default_control() -> PathBuf {
    PathBuf::from("/run/mpt/mptd.sock")
}
fn default_log() -> String {
    "info".into()
}
fn default_tun_name() -> String {
    "mpt0".into()
}
fn default_mtu() -> u16 {
    1400
}
fn default_port() -> u16 {
    65022
}
fn default_keepalive() -> Dur {
    Dur(Duration::from_secs(2))
}
fn default_dead() -> Dur {
    Dur(Duration::from_secs(5))
}
fn default_repair() -> bool {
    true
}
fn default_one_u32() -> u32 {
    1
}
fn default_one_u16() -> u16 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    daemon: Option<Spanned<RawDaemon>>,
    tunnel: Spanned<RawTunnel>,
    #[serde(default)]
    connection: Vec<Spanned<RawConnection>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDaemon {
    #[serde(default = "default_control")]
    control: PathBuf,
    #[serde(default)]
    cmd_port: u16,
    /// Removed (refused with advice); any value.
    #[serde(default)]
    accept_remote: Option<Spanned<toml::Value>>,
    #[serde(default)]
    include: String,
    #[serde(default)]
    threads: usize,
    #[serde(default)]
    metrics: String,
    #[serde(default = "default_log")]
    log: String,
    #[serde(default)]
    private_key_file: Option<PathBuf>,
    #[serde(default)]
    cipher: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTunnel {
    #[serde(default = "default_tun_name")]
    name: String,
    #[serde(default = "default_mtu")]
    mtu: u16,
    ipv4: Option<Prefix>,
    ipv6: Option<Prefix>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConnection {
    name: String,
    #[serde(default = "default_one_u32")]
    id: u32,
    peer_ipv4: Option<IpAddr>,
    peer_ipv6: Option<IpAddr>,
    #[serde(default)]
    networks: Vec<Prefix>,
    #[serde(default = "default_port")]
    port: u16,
    remote_port: Option<u16>,
    #[serde(default = "default_keepalive")]
    keepalive: Dur,
    #[serde(default = "default_dead")]
    dead_timer: Dur,
    #[serde(default)]
    scheduler: Option<RawScheduler>,
    #[serde(default = "default_repair")]
    repair: bool,
    #[serde(default)]
    redundancy: Option<RawRedundancy>,
    key_file: Option<PathBuf>,
    public_key: Option<Spanned<String>>,
    #[serde(default)]
    rekey_after: Option<Dur>,
    #[serde(default)]
    allow_peer_paths: Vec<Prefix>,
    #[serde(default)]
    path: Vec<Spanned<RawPath>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    name: String,
    interface: Option<String>,
    local: Option<IpAddr>,
    remote: Option<IpAddr>,
    #[serde(default = "default_one_u32")]
    weight_out: u32,
    #[serde(default = "default_one_u16")]
    weight_in: u16,
    #[serde(default = "default_one_u32")]
    window: u32,
    #[serde(default)]
    status: Option<RawStatus>,
}

/// A configuration error with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ConfigError {
    /// File name as given.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, naming the key.
    pub message: String,
}

/// Why `[daemon] accept_remote` is refused, and what to do instead.
pub const ACCEPT_REMOTE_REMOVED: &str = "accept_remote was removed: list each client with public_key (a connection without [[connection.path]] learns its paths); use include = \"clients.d/*.toml\" for many";

/// Largest weight accepted; keeps scheduler credit arithmetic far from
/// overflow with 64 paths.
pub const MAX_WEIGHT: u32 = 1_000_000;
/// Most connections one daemon serves (the transmit stage packs the
/// connection index into 8 bits).
pub const MAX_CONNECTIONS: usize = 256;
/// Largest path window accepted.
pub const MAX_WINDOW: u32 = 1024;

impl Config {
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
        if !any_peer_key && self.daemon.private_key_file.is_some() {
            out.push("[daemon] `private_key_file` is loaded but no connection has a `public_key`: no public-key handshake will run".into());
        }
        out
    }
}

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        line: 0,
        column: 0,
        message: format!("cannot read: {e}"),
    })?;
    parse(&text, &path.display().to_string())
}

/// Parses and validates config text; `file` names it in errors.
/// `[daemon] private_key_file` is read from the file system.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
    parse_with(text, file, &load_own_key)
}

/// [`parse`], with `own_key` in place of reading the private key file.
fn parse_with(
    text: &str,
    file: &str,
    own_key: &dyn Fn(&Path) -> Result<PublicKey, String>,
) -> Result<Config, ConfigError> {
    let main = Sources::main(text, file);
    let raw = raw_config(&main)?;
    let pattern = raw
        .daemon
        .as_ref()
        .map(|d| (d.span().start, d.get_ref().include.clone()))
        .filter(|(_, p)| !p.is_empty());
    let (sources, raw, includes) = match pattern {
        None => (main, raw, Vec::new()),
        Some((span, pattern)) => {
            let base = Path::new(file).parent().unwrap_or(Path::new(""));
            let files = include::expand(&pattern, base)
                .map_err(|e| main.error(span, format!("[daemon] key `include`: {e}")))?;
            let mut sources = main;
            let mut includes = Vec::new();
            for path in files {
                let name = path.display().to_string();
                let text = std::fs::read_to_string(&path).map_err(|e| ConfigError {
                    file: name.clone(),
                    line: 0,
                    column: 0,
                    message: format!(
                        "cannot read (included by [daemon] include = \"{pattern}\"): {e}"
                    ),
                })?;
                let connections = sources.append(&text, &name)?;
                includes.push(IncludedFile { path, connections });
            }
            let raw = raw_config(&sources)?;
            if raw.connection.is_empty() {
                return Err(sources.error(
                    0,
                    format!(
                        "no [[connection]] here nor in the {} file(s) matching include = \"{pattern}\": the tunnel would have no peer",
                        includes.len()
                    ),
                ));
            }
            (sources, raw, includes)
        }
    };
    // The same name in two files: say both (within one file, `validate`
    // reports it).
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for c in &raw.connection {
        let (name, file) = (c.get_ref().name.as_str(), sources.file_at(c.span().start));
        if let Some((_, first)) = seen.iter().find(|(n, f)| *n == name && *f != file) {
            return Err(sources.error(
                c.span().start,
                format!("connection `{name}` is defined in both {first} and {file}; connection names must be unique"),
            ));
        }
        seen.push((name, file));
    }
    let mut config = validate(raw, own_key).map_err(|(offset, msg)| sources.error(offset, msg))?;
    config.includes = includes;
    Ok(config)
}

/// Deserializes the (combined) text, errors placed in the file at fault.
fn raw_config(sources: &Sources) -> Result<RawConfig, ConfigError> {
    let text = sources.text.as_str();
    toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        let message = e.message().trim().to_string();
        let message = match key_at(text, offset) {
            Some(key) if !message.contains(&format!("`{key}`")) => {
                format!("key `{key}`: {message}")
            }
            _ => message,
        };
        sources.error(offset, message)
    })
}

/// Reads `[daemon] private_key_file` and gives our public key.
fn load_own_key(path: &Path) -> Result<PublicKey, String> {
    crate::keys::load_private(path)
        .map(|secret| secret.public_key())
        .map_err(|e| e.to_string())
}

/// Whether `name` can name a network interface (what the kernel takes:
/// 1 to 15 bytes, no '/', ':' or whitespace, not "." or "..").
pub fn is_interface_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line, column)
}

/// The key assigned on the line holding `offset`, if the line is `key = …`.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let start = text[..offset.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.starts_with('[') && !key.starts_with('#')).then(|| key.to_string())
}

type Invalid = (usize, String);

/// Checks what spans several keys. `own_key` reads the private key file
/// and derives our public key (a parameter so that tests need no file).
fn validate(
    raw: RawConfig,
    own_key: &dyn Fn(&Path) -> Result<PublicKey, String>,
) -> Result<Config, Invalid> {
    let daemon = match raw.daemon {
        Some(d) => {
            let span = d.span().start;
            let d = d.into_inner();
            if let Some(v) = &d.accept_remote {
                return Err((
                    v.span().start,
                    format!("[daemon] key `accept_remote`: {ACCEPT_REMOTE_REMOVED}"),
                ));
            }
            // `private_key_file = ""` (as in the spec's example) means none.
            let private_key_file = d.private_key_file.filter(|p| !p.as_os_str().is_empty());
            let public_key = match &private_key_file {
                Some(file) => Some(
                    own_key(file)
                        .map_err(|e| (span, format!("[daemon] key `private_key_file`: {e}")))?,
                ),
                None => None,
            };
            if !d.metrics.is_empty() && d.metrics.parse::<std::net::SocketAddr>().is_err() {
                return Err((span, format!("[daemon] key `metrics`: `{}` is not ADDRESS:PORT (e.g. \"127.0.0.1:9469\")", d.metrics)));
            }
            if d.threads > 1024 {
                return Err((
                    span,
                    format!("[daemon] key `threads`: {} is more than 1024", d.threads),
                ));
            }
            let cipher = match &d.cipher {
                None => DEFAULT_CIPHER,
                Some(c) => Cipher::from_name(c.get_ref()).ok_or_else(|| {
                    let names: Vec<&str> = Cipher::ALL.iter().map(|c| c.name()).collect();
                    (
                        c.span().start,
                        format!(
                            "[daemon] key `cipher`: `{}` is not a cipher (one of: {}; both ends must use the same)",
                            c.get_ref(),
                            names.join(", ")
                        ),
                    )
                })?,
            };
            DaemonConfig {
                control: d.control,
                cmd_port: d.cmd_port,
                include: d.include,
                threads: d.threads,
                metrics: d.metrics,
                log: d.log,
                private_key_file,
                public_key,
                cipher,
            }
        }
        None => DaemonConfig {
            control: default_control(),
            cmd_port: 0,
            include: String::new(),
            threads: 0,
            metrics: String::new(),
            log: default_log(),
            private_key_file: None,
            public_key: None,
            cipher: DEFAULT_CIPHER,
        },
    };
    let tspan = raw.tunnel.span().start;
    let t = raw.tunnel.into_inner();
    if t.name.is_empty() || t.name.len() > 15 || t.name.contains(['/', ' ']) {
        return Err((tspan, format!("[tunnel] key `name`: `{}` is not a valid interface name (1-15 characters, no '/' or space)", t.name)));
    }
    if !(576..=9000).contains(&t.mtu) {
        return Err((
            tspan,
            format!("[tunnel] key `mtu`: {} is outside 576..=9000", t.mtu),
        ));
    }
    if t.ipv4.is_none() && t.ipv6.is_none() {
        return Err((tspan, "[tunnel]: set `ipv4`, `ipv6` or both".into()));
    }
    if t.ipv4.is_some_and(|p| !p.addr.is_ipv4()) {
        return Err((tspan, "[tunnel] key `ipv4`: not an IPv4 prefix".into()));
    }
    if t.ipv6.is_some_and(|p| !p.addr.is_ipv6()) {
        return Err((tspan, "[tunnel] key `ipv6`: not an IPv6 prefix".into()));
    }
    let tunnel = TunnelConfig {
        name: t.name,
        mtu: t.mtu,
        ipv4: t.ipv4,
        ipv6: t.ipv6,
    };
    let mut connections: Vec<ConnectionConfig> = Vec::new();
    for c in raw.connection {
        let span = c.span().start;
        let c = c.into_inner();
        let here = |msg: String| (span, format!("connection `{}`: {msg}", c.name));
        if connections.iter().any(|o| o.name == c.name) {
            return Err(here(
                "key `name`: a connection of that name already exists".into(),
            ));
        }
        // A client connection (no paths) is named on the wire by its
        // session index, never by `id`: clients need no ids of their own.
        if !c.path.is_empty() && connections.iter().any(|o| o.id == c.id && !o.is_client()) {
            return Err(here(format!(
                "key `id`: id {} is used by another connection",
                c.id
            )));
        }
        if c.peer_ipv4.is_some_and(|a| !a.is_ipv4()) {
            return Err(here("key `peer_ipv4`: not an IPv4 address".into()));
        }
        if c.peer_ipv6.is_some_and(|a| !a.is_ipv6()) {
            return Err(here("key `peer_ipv6`: not an IPv6 address".into()));
        }
        if c.peer_ipv4.is_none() && c.peer_ipv6.is_none() && c.networks.is_empty() {
            return Err(here(
                "set `peer_ipv4`, `peer_ipv6` or `networks`: nothing would be routed to this peer"
                    .into(),
            ));
        }
        if c.port == 0 {
            return Err(here("key `port`: 0 is not a usable port".into()));
        }
        if c.keepalive.0 < Duration::from_millis(10) {
            return Err(here("key `keepalive`: must be at least 10ms".into()));
        }
        if c.dead_timer.0 <= c.keepalive.0 {
            return Err(here(format!(
                "key `dead_timer`: {:?} must be longer than keepalive {:?}",
                c.dead_timer.0, c.keepalive.0
            )));
        }
        if c.path.len() > mpt_proto::sched::MAX_PATHS {
            return Err(here(format!(
                "{} paths, at most {} allowed",
                c.path.len(),
                mpt_proto::sched::MAX_PATHS
            )));
        }
        let public_key = match &c.public_key {
            None => None,
            Some(text) => {
                let at = |msg: String| {
                    (
                        text.span().start,
                        format!("connection `{}` key `public_key`: {msg}", c.name),
                    )
                };
                let key = crate::keys::decode_public(text.get_ref().trim()).map_err(|e| {
                    at(format!(
                        "expected the peer's X25519 public key, 32 bytes in base64 (what `mpt pubkey` prints), {e}"
                    ))
                })?;
                let Some(ours) = daemon.public_key else {
                    return Err(here("key `public_key` needs `[daemon] private_key_file` (our own key pair, from `mpt keypair FILE`)".into()));
                };
                if key == ours {
                    return Err(at("is our own public key (that of [daemon] private_key_file); give the peer's, which `mpt pubkey` prints on the peer".into()));
                }
                if key.is_zero() {
                    return Err(at("all zero bytes is not a public key".into()));
                }
                if let Some(other) = connections.iter().find(|o| o.public_key == Some(key)) {
                    return Err(at(format!(
                        "connection `{}` has the same public key; each peer has its own key pair",
                        other.name
                    )));
                }
                Some(key)
            }
        };
        let rekey_after =
            match c.rekey_after {
                None => None,
                Some(_) if public_key.is_none() => return Err(here(
                    "key `rekey_after` applies to public-key handshakes only (set `public_key`)"
                        .into(),
                )),
                Some(Dur(d)) if d < Duration::from_secs(2) || d > Duration::from_secs(120) => {
                    return Err(here(format!(
                        "key `rekey_after`: {d:?} is outside 2s..=120s"
                    )))
                }
                Some(Dur(d)) => Some(d),
            };
        // No paths: a server's client connection, served on the shared
        // port and its paths learnt from the client's datagrams. Only a
        // public key can tell such clients apart (the session index
        // names the connection, the static key identifies the client).
        if c.path.is_empty() && public_key.is_none() {
            return Err(here("needs at least one [[connection.path]], or a `public_key` (with `[daemon] private_key_file`) to be a client connection served on the shared port with paths learnt from the client".into()));
        }
        if c.path.is_empty() && c.remote_port.is_some() {
            return Err(here("key `remote_port`: a client connection (no [[connection.path]]) learns its client's ports; remove it".into()));
        }
        let mut paths: Vec<PathConfig> = Vec::new();
        for p in c.path {
            let pspan = p.span().start;
            let p = p.into_inner();
            let at = |msg: String| {
                (
                    pspan,
                    format!("connection `{}` path `{}`: {msg}", c.name, p.name),
                )
            };
            if !mpt_proto::wire::is_plain_name(&p.name) {
                return Err(at(format!(
                    "key `name`: must be 1 to {} printable ASCII characters without spaces (the peer refuses other names)",
                    mpt_proto::wire::MAX_NAME_LEN
                )));
            }
            if paths.iter().any(|o| o.name == p.name) {
                return Err(at("key `name`: a path of that name already exists".into()));
            }
            if let Some(dev) = &p.interface {
                if !is_interface_name(dev) {
                    return Err(at(format!("key `interface`: `{dev}` is not a valid interface name (1-15 characters, no '/', ':' or whitespace, e.g. interface = \"wlan0\")")));
                }
            }
            match (p.local, &p.interface) {
                (None, None) => return Err(at("no `local` and no `interface`: set `local = \"ADDRESS\"` (e.g. local = \"10.0.0.1\"), or `interface = \"NAME\"` (e.g. interface = \"wlan0\") to use that interface's current address and follow its changes".into())),
                (None, Some(dev)) => {
                    if paths.iter().any(|o| o.local.is_none() && o.interface.as_ref() == Some(dev)) {
                        return Err(at(format!("key `interface`: another path of this connection already follows the address of `{dev}` (give one of them `local = \"ADDRESS\"`)")));
                    }
                }
                (Some(local), _) => {
                    if paths
                        .iter()
                        .any(|o| o.local == Some(local) && o.interface == p.interface)
                    {
                        return Err(at(format!("key `local`: {local} is used by another path of this connection (each path needs its own local address or interface)")));
                    }
                }
            }
            if p.remote.is_none() && c.key_file.is_none() && public_key.is_none() {
                return Err(at("key `remote` is missing: without `key_file` or `public_key` nothing authenticates the peer, so its address is never learnt from its packets; set `remote`, or give the connection a `key_file` or `public_key`".into()));
            }
            if let (Some(r), Some(local)) = (p.remote, p.local) {
                if r.is_ipv4() != local.is_ipv4() {
                    return Err(at(
                        "key `remote`: address family differs from `local`".into()
                    ));
                }
            }
            if !(1..=MAX_WEIGHT).contains(&p.weight_out) {
                return Err(at(format!(
                    "key `weight_out`: {} is outside 1..={MAX_WEIGHT}",
                    p.weight_out
                )));
            }
            if p.weight_in == 0 {
                return Err(at("key `weight_in`: must be at least 1".into()));
            }
            if !(1..=MAX_WINDOW).contains(&p.window) {
                return Err(at(format!(
                    "key `window`: {} is outside 1..={MAX_WINDOW}",
                    p.window
                )));
            }
            paths.push(PathConfig {
                name: p.name,
                interface: p.interface,
                local: p.local,
                remote: p.remote,
                weight_out: p.weight_out,
                weight_in: p.weight_in,
                window: p.window,
                status: match p.status.unwrap_or(RawStatus::Up) {
                    RawStatus::Up => AdminStatus::Up,
                    RawStatus::Down => AdminStatus::Down,
                    RawStatus::Backup => AdminStatus::Backup,
                },
            });
        }
        connections.push(ConnectionConfig {
            name: c.name,
            id: c.id,
            peer_ipv4: c.peer_ipv4,
            peer_ipv6: c.peer_ipv6,
            networks: c.networks,
            port: c.port,
            remote_port: c.remote_port.unwrap_or(c.port),
            keepalive: c.keepalive.0,
            dead_timer: c.dead_timer.0,
            scheduler: match c.scheduler.unwrap_or(RawScheduler::Adaptive) {
                RawScheduler::Adaptive => SchedulerKind::Adaptive,
                RawScheduler::Weighted => SchedulerKind::Weighted,
            },
            repair: c.repair,
            redundancy: match c.redundancy.unwrap_or(RawRedundancy::Auto) {
                RawRedundancy::Auto => mpt_proto::sched::Redundancy::Auto,
                RawRedundancy::Off => mpt_proto::sched::Redundancy::Off,
                RawRedundancy::All => mpt_proto::sched::Redundancy::All,
            },
            key_file: c.key_file,
            public_key,
            rekey_after,
            allow_peer_paths: c.allow_peer_paths,
            paths,
        });
    }
    if connections.len() > MAX_CONNECTIONS {
        return Err((
            0,
            format!(
                "{} connections, at most {MAX_CONNECTIONS} allowed",
                connections.len()
            ),
        ));
    }
    if connections.is_empty() {
        return Err((0, "no [[connection]]: the tunnel would have no peer".into()));
    }
    Ok(Config {
        daemon,
        tunnel,
        connections,
        includes: Vec::new(),
    })
}

mod include;
pub mod reload;

#[cfg(test)]
mod tests;
