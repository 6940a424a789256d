//! The second step of reading a config: checks of what spans several keys
//! (duplicate names and ids, address families, limits, identities) and the
//! turn from `Raw*` tables into the typed [`Config`]. One function per
//! section: [`daemon`], [`tunnel`], [`connection`] (with [`peer_key`] and
//! [`rekey_after`]) and [`path`]. The first error wins, reported at the
//! position of the table (or value) at fault; the checks run in the order
//! the sections and keys are listed here, so the same config always gets
//! the same error.

use std::path::Path;
use std::time::Duration;

use mpt_proto::crypto::Cipher;
use mpt_proto::noise::PublicKey;
use mpt_proto::path::AdminStatus;
use mpt_proto::sched::Redundancy;
use toml::Spanned;

use super::defaults::{default_control, default_log, DEFAULT_CIPHER, DEFAULT_RESOLVE_INTERVAL};
use super::duration::Dur;
use super::host::RawRemote;
use super::raw::{
    RawConfig, RawConnection, RawDaemon, RawHook, RawPath, RawRedundancy, RawScheduler, RawStatus,
    RawTunnel,
};
use super::{
    Config, ConnectionConfig, DaemonConfig, HandshakeConfig, PathConfig, RoutingNumbers,
    SchedulerKind, TunnelConfig, ACCEPT_REMOTE_REMOVED, FWMARK_MASK, MAX_CONNECTIONS, MAX_WEIGHT,
    MAX_WINDOW, RESOLVE_INTERVAL_RANGE,
};

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

/// What is wrong: the offset in the (combined) text of the table or value
/// at fault, and the message naming the key.
pub(super) type Invalid = (usize, String);

/// Reads `[daemon] private_key_file` and gives our public key.
type OwnKey<'a> = &'a dyn Fn(&Path) -> Result<PublicKey, String>;

/// Checks what spans several keys. `own_key` reads the private key file
/// and derives our public key (a parameter so that tests need no file).
/// `need_peer`: no connection at all is an error (always, but for `mpt
/// client add` reading a server that has no client yet).
pub(super) fn validate(
    raw: RawConfig,
    own_key: OwnKey,
    need_peer: bool,
) -> Result<Config, Invalid> {
    let daemon = daemon(raw.daemon, own_key)?;
    let tunnel = tunnel(raw.tunnel)?;
    let mut connections: Vec<ConnectionConfig> = Vec::new();
    for c in raw.connection {
        let c = connection(c, &connections, &daemon, &tunnel)?;
        connections.push(c);
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
    if need_peer && connections.is_empty() && !may_await_clients(&daemon) {
        return Err((
            0,
            "no [[connection]]: the tunnel would have no peer (a concentrator may start with none when [daemon] has `include` and `private_key_file`, to take clients on reload)".into(),
        ));
    }
    Ok(Config {
        daemon,
        tunnel,
        connections,
        includes: Vec::new(),
    })
}

/// Whether a config with no connection may still start: a concentrator
/// whose clients come from `include` files (none written yet) and that
/// can answer their Noise handshakes. It opens the default shared port
/// and takes clients as a reload adds them.
fn may_await_clients(daemon: &DaemonConfig) -> bool {
    !daemon.include.is_empty() && daemon.private_key_file.is_some()
}

/// `[daemon]`, or its defaults if the config has none.
fn daemon(raw: Option<Spanned<RawDaemon>>, own_key: OwnKey) -> Result<DaemonConfig, Invalid> {
    let Some(d) = raw else {
        return Ok(DaemonConfig {
            control: default_control(),
            cmd_port: 0,
            cmd_port_admin: false,
            include: String::new(),
            threads: 0,
            metrics: String::new(),
            log: default_log(),
            private_key_file: None,
            public_key: None,
            cipher: DEFAULT_CIPHER,
            hook: Vec::new(),
            hook_timeout: super::defaults::default_hook_timeout().0,
            resolve_interval: DEFAULT_RESOLVE_INTERVAL,
            routing: RoutingNumbers::default(),
            handshake: HandshakeConfig::default(),
        });
    };
    let span = d.span().start;
    let d = d.into_inner();
    if let Some(v) = &d.accept_remote {
        return Err((
            v.span().start,
            format!("[daemon] key `accept_remote`: {ACCEPT_REMOTE_REMOVED}"),
        ));
    }
    let routing = routing_numbers(&d).map_err(|m| (span, m))?;
    let handshake = super::handshake::handshake_config(&d).map_err(|m| (span, m))?;
    // `private_key_file = ""` (as in the spec's example) means none.
    let private_key_file = d.private_key_file.filter(|p| !p.as_os_str().is_empty());
    let public_key = match &private_key_file {
        Some(file) => Some(
            own_key(file).map_err(|e| (span, format!("[daemon] key `private_key_file`: {e}")))?,
        ),
        None => None,
    };
    if !d.metrics.is_empty() && d.metrics.parse::<std::net::SocketAddr>().is_err() {
        return Err((
            span,
            format!(
                "[daemon] key `metrics`: `{}` is not ADDRESS:PORT (e.g. \"127.0.0.1:9469\")",
                d.metrics
            ),
        ));
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
    let hook = hook(d.hook)?;
    if d.hook_timeout.0.is_zero() || d.hook_timeout.0 > Duration::from_secs(600) {
        return Err((
            span,
            "[daemon] key `hook_timeout`: must be more than 0 and at most 10m".into(),
        ));
    }
    let resolve_interval = match &d.resolve_interval {
        None => DEFAULT_RESOLVE_INTERVAL,
        Some(v) => {
            let (lo, hi) = RESOLVE_INTERVAL_RANGE;
            let Dur(i) = *v.get_ref();
            if !(lo..=hi).contains(&i) {
                return Err((
                    v.span().start,
                    format!("[daemon] key `resolve_interval`: {i:?} is outside 1s..=24h"),
                ));
            }
            i
        }
    };
    Ok(DaemonConfig {
        routing,
        handshake,
        control: d.control,
        cmd_port: d.cmd_port,
        cmd_port_admin: d.cmd_port_admin,
        include: d.include,
        threads: d.threads,
        metrics: d.metrics,
        log: d.log,
        private_key_file,
        public_key,
        cipher,
        hook,
        hook_timeout: d.hook_timeout.0,
        resolve_interval,
    })
}

/// `[daemon] hook`: an absolute program path, with its arguments.
fn hook(raw: Option<Spanned<RawHook>>) -> Result<Vec<String>, Invalid> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let at = raw.span().start;
    let argv = match raw.into_inner() {
        RawHook::Program(p) => vec![p],
        RawHook::Argv(a) => a,
    };
    match argv.first() {
        None => Err((at, "[daemon] key `hook`: empty (give a program, e.g. \"/etc/mpt/hook\")".into())),
        Some(p) if !p.starts_with('/') => Err((
            at,
            format!("[daemon] key `hook`: `{p}` is not an absolute path (the hook runs without a shell and without PATH lookup; e.g. \"/etc/mpt/hook\")"),
        )),
        Some(_) => Ok(argv),
    }
}

/// `route_table_base`, `fwmark_base`, `rule_priority_base`: each within
/// the range the kernel gives it meaning in (see [`RoutingNumbers`]).
fn routing_numbers(d: &RawDaemon) -> Result<RoutingNumbers, String> {
    let def = RoutingNumbers::default();
    let n = RoutingNumbers {
        table_base: d.route_table_base.unwrap_or(def.table_base),
        fwmark_base: d.fwmark_base.unwrap_or(def.fwmark_base),
        priority_base: d.rule_priority_base.unwrap_or(def.priority_base),
    };
    // Room for one table per uplink (at most every path of every
    // connection) above the base.
    let uplinks = (MAX_CONNECTIONS as u32) * 64;
    if n.table_base < 256 || n.table_base > u32::MAX - uplinks {
        return Err(format!("[daemon] key `route_table_base`: {} is outside 256..={} (0 and 253-255 are the kernel's; the tables above it are the uplinks')", n.table_base, u32::MAX - uplinks));
    }
    if n.fwmark_base == 0 || n.fwmark_base & !FWMARK_MASK != 0 {
        return Err(format!("[daemon] key `fwmark_base`: {:#x} must be nonzero with its low 16 bits zero (e.g. 0x6d700000): the uplinks' marks are the base plus 1, 2, ...", n.fwmark_base));
    }
    if n.priority_base == 0 || n.priority_base > 32000 {
        return Err(format!("[daemon] key `rule_priority_base`: {} is outside 1..=32000 (mptd's three rule priorities must come before the main table's rule, 32766)", n.priority_base));
    }
    Ok(n)
}

/// `[tunnel]`.
fn tunnel(raw: Spanned<RawTunnel>) -> Result<TunnelConfig, Invalid> {
    let tspan = raw.span().start;
    let t = raw.into_inner();
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
    let accel = super::accel::settings(
        super::accel::RawAccel {
            port: t.accel_port,
            congestion: t.accel_congestion,
            pool: t.accel_pool,
            legs: t.accel_legs,
            initial_window: t.accel_initial_window,
            source: t.accel_source,
        },
        tspan,
    )?;
    Ok(TunnelConfig {
        accel,
        name: t.name,
        mtu: t.mtu,
        ipv4: t.ipv4,
        ipv6: t.ipv6,
        mss_clamp: t.mss_clamp,
    })
}

/// One `[[connection]]`, checked against the `earlier` ones and against
/// our own key (`daemon`).
fn connection(
    raw: Spanned<RawConnection>,
    earlier: &[ConnectionConfig],
    daemon: &DaemonConfig,
    tunnel: &TunnelConfig,
) -> Result<ConnectionConfig, Invalid> {
    let span = raw.span().start;
    let c = raw.into_inner();
    let here = |msg: String| (span, format!("connection `{}`: {msg}", c.name));
    if earlier.iter().any(|o| o.name == c.name) {
        return Err(here(
            "key `name`: a connection of that name already exists".into(),
        ));
    }
    // A client connection (no paths) is named on the wire by its
    // session index, never by `id`: clients need no ids of their own.
    if !c.path.is_empty() && earlier.iter().any(|o| o.id == c.id && !o.is_client()) {
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
    let public_key = peer_key(&c, span, earlier, daemon.public_key)?;
    let rekey_after = rekey_after(&c, span, public_key.is_some())?;
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
    let accelerate =
        super::accel::selectors(c.accelerate, tunnel, (c.peer_ipv4, c.peer_ipv6), &c.name)?;
    let authenticated = c.key_file.is_some() || public_key.is_some();
    let mut paths: Vec<PathConfig> = Vec::new();
    for p in c.path {
        let p = path(p, &c.name, authenticated, &paths)?;
        paths.push(p);
    }
    if !accelerate.is_empty() && tunnel.accel.legs == super::accel::LegMode::Direct {
        super::accel::direct_paths(&paths).map_err(here)?;
    }
    Ok(ConnectionConfig {
        name: c.name,
        id: c.id,
        peer_ipv4: c.peer_ipv4,
        peer_ipv6: c.peer_ipv6,
        networks: c.networks,
        port: c.port,
        remote_port: c.remote_port.unwrap_or(c.port),
        keepalive: c.keepalive.0,
        dead_timer: c.dead_timer.0,
        scheduler: scheduler(c.scheduler),
        repair: c.repair,
        redundancy: redundancy(c.redundancy),
        key_file: c.key_file,
        public_key,
        rekey_after,
        allow_peer_paths: c.allow_peer_paths,
        accelerate,
        paths,
    })
}

/// The connection's `public_key` (at `span`): the peer's key, which needs
/// our own key pair (`ours`) and may be neither ours, nor all zero, nor
/// that of an `earlier` connection.
fn peer_key(
    c: &RawConnection,
    span: usize,
    earlier: &[ConnectionConfig],
    ours: Option<PublicKey>,
) -> Result<Option<PublicKey>, Invalid> {
    let Some(text) = &c.public_key else {
        return Ok(None);
    };
    let here = |msg: String| (span, format!("connection `{}`: {msg}", c.name));
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
    let Some(ours) = ours else {
        return Err(here("key `public_key` needs `[daemon] private_key_file` (our own key pair, from `mpt keypair FILE`)".into()));
    };
    if key == ours {
        return Err(at("is our own public key (that of [daemon] private_key_file); give the peer's, which `mpt pubkey` prints on the peer".into()));
    }
    if key.is_zero() {
        return Err(at("all zero bytes is not a public key".into()));
    }
    if let Some(other) = earlier.iter().find(|o| o.public_key == Some(key)) {
        return Err(at(format!(
            "connection `{}` has the same public key; each peer has its own key pair",
            other.name
        )));
    }
    Ok(Some(key))
}

/// The connection's `rekey_after` (at `span`): public-key connections
/// only, within 2s..=120s.
fn rekey_after(
    c: &RawConnection,
    span: usize,
    has_public_key: bool,
) -> Result<Option<Duration>, Invalid> {
    let here = |msg: String| (span, format!("connection `{}`: {msg}", c.name));
    match c.rekey_after {
        None => Ok(None),
        Some(_) if !has_public_key => Err(here(
            "key `rekey_after` applies to public-key handshakes only (set `public_key`)".into(),
        )),
        Some(Dur(d)) if d < Duration::from_secs(2) || d > Duration::from_secs(120) => Err(here(
            format!("key `rekey_after`: {d:?} is outside 2s..=120s"),
        )),
        Some(Dur(d)) => Ok(Some(d)),
    }
}

/// One `[[connection.path]]` of connection `conn`, checked against the
/// connection's `earlier` paths. `authenticated`: the connection has a
/// `key_file` or `public_key`, so the peer's address can be learnt.
fn path(
    raw: Spanned<RawPath>,
    conn: &str,
    authenticated: bool,
    earlier: &[PathConfig],
) -> Result<PathConfig, Invalid> {
    let pspan = raw.span().start;
    let p = raw.into_inner();
    let at = |msg: String| {
        (
            pspan,
            format!("connection `{conn}` path `{}`: {msg}", p.name),
        )
    };
    if !mpt_proto::wire::is_plain_name(&p.name) {
        return Err(at(format!(
            "key `name`: must be 1 to {} printable ASCII characters without spaces (the peer refuses other names)",
            mpt_proto::wire::MAX_NAME_LEN
        )));
    }
    if earlier.iter().any(|o| o.name == p.name) {
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
            if earlier.iter().any(|o| o.local.is_none() && o.interface.as_ref() == Some(dev)) {
                return Err(at(format!("key `interface`: another path of this connection already follows the address of `{dev}` (give one of them `local = \"ADDRESS\"`)")));
            }
        }
        (Some(local), _) => {
            if earlier
                .iter()
                .any(|o| o.local == Some(local) && o.interface == p.interface)
            {
                return Err(at(format!("key `local`: {local} is used by another path of this connection (each path needs its own local address or interface)")));
            }
        }
    }
    let (remote, remote_name) = match p.remote.clone() {
        None => (None, None),
        Some(RawRemote::Addr(ip)) => (Some(ip), None),
        Some(RawRemote::Name(name)) => (None, Some(name)),
    };
    if p.remote.is_none() && !authenticated {
        return Err(at("key `remote` is missing: without `key_file` or `public_key` nothing authenticates the peer, so its address is never learnt from its packets; set `remote`, or give the connection a `key_file` or `public_key`".into()));
    }
    if let (Some(r), Some(local)) = (remote, p.local) {
        if r.is_ipv4() != local.is_ipv4() {
            return Err(at(
                "key `remote`: address family differs from `local`".into()
            ));
        }
    }
    if let Some(g) = p.gateway {
        let family = remote.or(p.local);
        if family.is_some_and(|a| a.is_ipv4() != g.is_ipv4()) {
            return Err(at(
                "key `gateway`: address family differs from the path's".into()
            ));
        }
        if g.is_unspecified() || g.is_multicast() {
            return Err(at(format!("key `gateway`: {g} is not a router's address")));
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
    if let Some(cc) = p.accel_congestion.as_deref() {
        if !super::accel::is_congestion_name(cc) {
            return Err(at(format!("key `accel_congestion`: `{cc}` is not a congestion control name (like bbr or cubic)")));
        }
    }
    if !(1..=MAX_WINDOW).contains(&p.window) {
        return Err(at(format!(
            "key `window`: {} is outside 1..={MAX_WINDOW}",
            p.window
        )));
    }
    Ok(PathConfig {
        name: p.name,
        interface: p.interface,
        local: p.local,
        remote,
        remote_name,
        gateway: p.gateway,
        weight_out: p.weight_out,
        weight_in: p.weight_in,
        window: p.window,
        status: status(p.status),
        accel_congestion: p.accel_congestion,
    })
}

/// `scheduler`, adaptive if not given.
fn scheduler(raw: Option<RawScheduler>) -> SchedulerKind {
    match raw.unwrap_or(RawScheduler::Adaptive) {
        RawScheduler::Adaptive => SchedulerKind::Adaptive,
        RawScheduler::Weighted => SchedulerKind::Weighted,
    }
}

/// `redundancy`, auto if not given.
fn redundancy(raw: Option<RawRedundancy>) -> Redundancy {
    match raw.unwrap_or(RawRedundancy::Auto) {
        RawRedundancy::Auto => Redundancy::Auto,
        RawRedundancy::Off => Redundancy::Off,
        RawRedundancy::All => Redundancy::All,
    }
}

/// A path's `status`, up if not given.
fn status(raw: Option<RawStatus>) -> AdminStatus {
    match raw.unwrap_or(RawStatus::Up) {
        RawStatus::Up => AdminStatus::Up,
        RawStatus::Down => AdminStatus::Down,
        RawStatus::Backup => AdminStatus::Backup,
    }
}
