//! The TCP acceleration keys (docs/ACCELERATION.md): `[tunnel]
//! accel_port`, `accel_congestion`, `accel_pool`, `accel_legs`,
//! `accel_initial_window`, `accel_source`, and each connection's
//! `accelerate` list, checked against each other and against the tunnel
//! and peer addresses (an IPv4 entry needs IPv4 tunnel addresses at both
//! ends, since the legs run between them).

use mpt_accel::Selector;
use toml::Spanned;

use super::validate::Invalid;
use super::{ConnectionConfig, TunnelConfig};

/// `[tunnel]`'s acceleration settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccelSettings {
    /// The far end's leg listener on the tunnel addresses and the near
    /// end's transparent listener on loopback (0: acceleration off, no
    /// listener, no rules, no threads).
    pub port: u16,
    /// The legs' congestion control.
    pub congestion: String,
    /// Idle legs (or leg sets) kept per peer.
    pub pool: usize,
    /// Pinned leg sets or single legs.
    pub legs: LegMode,
    /// The legs' initial congestion and receive window in packets, set
    /// on the routes to the peers' tunnel addresses (0: the kernel's).
    pub initial_window: u32,
    /// `accel_source = "client"`: the far end opens a flow's connection
    /// from the client's address, not its own.
    pub client_source: bool,
}

/// `[tunnel]`'s acceleration keys as the file gives them.
pub(super) struct RawAccel {
    pub(super) port: u16,
    pub(super) congestion: Option<String>,
    pub(super) pool: Option<usize>,
    pub(super) legs: Option<String>,
    pub(super) initial_window: Option<u32>,
    pub(super) source: Option<String>,
}

/// `accel_legs`: how a flow crosses the middle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegMode {
    /// `"pinned"`: a set of legs, one pinned to each path of the
    /// connection, the flow striped across them (a connection with one
    /// path uses single legs).
    Pinned,
    /// `"single"`: one leg per flow, striped by the tunnel like any flow.
    Single,
    /// `"direct"`: a set of legs, one per path, each a TCP connection over
    /// the path's own uplink to the path's remote address, beside the
    /// tunnel and protected by the connection's keys (`mpt_accel::direct`).
    /// Both ends must say so.
    Direct,
}

/// `accel_legs` when not given: pinned sets. A single leg over unlike
/// paths learns its minimum round trip from the fast path while the tunnel
/// spills onto the slow one, and BBR then keeps its window at the fast
/// path's size for ten seconds (GEO + DSL on a quiet machine: 4.2 and 4.8
/// Mbit/s single against 22.4 pinned; docs/ACCELERATION.md).
pub const DEFAULT_LEGS: LegMode = LegMode::Pinned;

/// `accel_congestion` when not given: `"auto"`, BBR on legs inside the
/// tunnel; on a direct leg CUBIC while its path is clean and BBR once it
/// loses more than 0.5 % of its segments in two windows in a row
/// (`mpt_accel::congestion`). Direct BBR legs stayed at 0.99-1.00 of
/// kernel MPTCP where MPTCP's CUBIC subflows fill clean paths
/// (docs/ACCELERATION.md).
pub const DEFAULT_CONGESTION: &str = mpt_accel::congestion::AUTO;
/// `accel_pool` when not given: enough for a page's first parallel
/// fetches without a handshake over the middle.
pub const DEFAULT_POOL: usize = 4;
/// Largest `accel_pool`.
pub const MAX_POOL: usize = 64;
/// `accel_initial_window` when not given, in packets. A leg over a
/// 600 ms satellite starts at the kernel's 10 packets and doubles once
/// per round trip; 48 saves more than two of those round trips (1.3 s).
/// Larger buys little: the far end's first advertised window is 64 KiB
/// (about 48 packets of a leg), so the first round trip cannot carry
/// more. GEO + DSL, CUBIC at the end hosts, quiet machine (2026-11-28,
/// two interleaved rounds of 3 runs): 26.66-26.85 Mbit/s against
/// 26.02-26.18 with the kernel's 10; 100 gave 26.76-26.87.
pub const DEFAULT_INITIAL_WINDOW: u32 = 48;
/// Largest `accel_initial_window` (the kernel takes any value; a larger
/// burst into a path's queue only turns into loss).
pub const MAX_INITIAL_WINDOW: u32 = 1000;

/// Checks `[tunnel]`'s acceleration keys (`span`: the table's position).
pub(super) fn settings(raw: RawAccel, span: usize) -> Result<AccelSettings, Invalid> {
    let RawAccel {
        port,
        congestion,
        pool,
        legs,
        initial_window,
        source,
    } = raw;
    let client_source = match source.as_deref() {
        None | Some("gateway") => false,
        Some("client") => true,
        Some(other) => {
            return Err((
                span,
                format!(
                    "[tunnel] key `accel_source`: `{other}` is neither \"gateway\" nor \"client\""
                ),
            ))
        }
    };
    let legs = match legs.as_deref() {
        None => DEFAULT_LEGS,
        Some("pinned") => LegMode::Pinned,
        Some("single") => LegMode::Single,
        Some("direct") => LegMode::Direct,
        Some(other) => {
            return Err((
                span,
                format!(
                "[tunnel] key `accel_legs`: `{other}` is not \"pinned\", \"single\" or \"direct\""
            ),
            ))
        }
    };
    let congestion = congestion.unwrap_or_else(|| DEFAULT_CONGESTION.into());
    if !is_congestion_name(&congestion) {
        return Err((span, format!("[tunnel] key `accel_congestion`: `{congestion}` is not a congestion control name (like bbr or cubic)")));
    }
    let pool = pool.unwrap_or(DEFAULT_POOL);
    if pool > MAX_POOL {
        return Err((
            span,
            format!("[tunnel] key `accel_pool`: {pool} is more than {MAX_POOL}"),
        ));
    }
    let initial_window = initial_window.unwrap_or(DEFAULT_INITIAL_WINDOW);
    if initial_window > MAX_INITIAL_WINDOW {
        return Err((
            span,
            format!("[tunnel] key `accel_initial_window`: {initial_window} packets is more than {MAX_INITIAL_WINDOW}"),
        ));
    }
    Ok(AccelSettings {
        port,
        congestion,
        pool,
        legs,
        initial_window,
        client_source,
    })
}

/// Whether `name` can be a kernel congestion control's name (what
/// `TCP_CONGESTION` takes: at most 15 characters, lower case, digits, `_`).
pub(super) fn is_congestion_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Parses a connection's `accelerate` and checks it against the tunnel
/// and the connection's peer addresses. `here` names the connection.
pub(super) fn selectors(
    raw: Vec<Spanned<String>>,
    tunnel: &TunnelConfig,
    peer: (Option<std::net::IpAddr>, Option<std::net::IpAddr>),
    name: &str,
) -> Result<Vec<Selector>, Invalid> {
    let mut out = Vec::new();
    for entry in raw {
        let at = entry.span().start;
        let key = |m: String| (at, format!("connection `{name}`: key `accelerate`: {m}"));
        let s: Selector = entry.get_ref().parse().map_err(|e| key(format!("{e}")))?;
        if tunnel.accel.port == 0 {
            return Err(key("needs `[tunnel] accel_port` (the port of the legs between the tunnel addresses; the same at both ends)".into()));
        }
        let (v4, fam, peer_addr, tun_addr) = if s.addr.is_ipv4() {
            (true, "IPv4", peer.0, tunnel.ipv4)
        } else {
            (false, "IPv6", peer.1, tunnel.ipv6)
        };
        if peer_addr.is_none() || tun_addr.is_none() {
            let (pk, tk) = if v4 {
                ("peer_ipv4", "ipv4")
            } else {
                ("peer_ipv6", "ipv6")
            };
            return Err(key(format!("`{s}` is {fam}: needs the connection's `{pk}` and `[tunnel] {tk}` (the legs run between the tunnel addresses)")));
        }
        out.push(s);
    }
    Ok(out)
}

/// With `accel_legs = "direct"`, an accelerating connection's paths need
/// an address to send their legs to (`remote` as an address: a host
/// name is resolved later, by the tunnel; a learnt remote is unknown).
pub(super) fn direct_paths(paths: &[super::PathConfig]) -> Result<(), String> {
    match paths.iter().find(|p| p.remote.is_none()) {
        None => Ok(()),
        Some(p) => Err(format!(
            "path `{}`: `accel_legs = \"direct\"` sends each path's leg to its `remote`, which must be an address here (not a host name, not learnt)",
            p.name
        )),
    }
}

/// Whether any connection accelerates (the near end runs).
pub fn any_near(conns: &[ConnectionConfig]) -> bool {
    conns.iter().any(|c| !c.accelerate.is_empty())
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    const BASE: &str = "[tunnel]\nipv4 = \"10.99.0.1/24\"\nTUNNEL\n[[connection]]\nname = \"hub\"\npeer_ipv4 = \"10.99.0.2\"\nCONN\n[[connection.path]]\nname = \"p\"\nlocal = \"10.0.0.1\"\nremote = \"10.0.0.2\"\n";

    fn with(tunnel: &str, conn: &str) -> Result<crate::config::Config, String> {
        parse(
            &BASE.replace("TUNNEL", tunnel).replace("CONN", conn),
            "a.toml",
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn off_by_default_and_parsed_when_set() {
        let c = with("", "").unwrap();
        assert_eq!(c.tunnel.accel.port, 0);
        assert!(c.connections[0].accelerate.is_empty());
        let c = with(
            "accel_port = 7411\naccel_pool = 2",
            "accelerate = [\"0.0.0.0/0\", \"10.9.0.0/16:80,443\"]",
        )
        .unwrap();
        assert_eq!(c.tunnel.accel.port, 7411);
        assert_eq!(c.tunnel.accel.congestion, "auto");
        assert_eq!(c.tunnel.accel.pool, 2);
        assert_eq!(c.tunnel.accel.legs, super::DEFAULT_LEGS);
        assert_eq!(c.tunnel.accel.initial_window, 48);
        assert_eq!(c.connections[0].accelerate[1].ports, vec![80, 443]);
        assert!(!c.tunnel.accel.client_source);
        let c = with(
            "accel_port = 7411\naccel_initial_window = 0\naccel_source = \"client\"",
            "",
        )
        .unwrap();
        assert_eq!(c.tunnel.accel.initial_window, 0);
        assert!(c.tunnel.accel.client_source);
        let c = with("accel_port = 7411\naccel_legs = \"single\"", "").unwrap();
        assert_eq!(c.tunnel.accel.legs, super::LegMode::Single);
        let direct = "accel_port = 7411\naccel_legs = \"direct\"";
        let c = with(direct, "accelerate = [\"0.0.0.0/0\"]").unwrap();
        assert_eq!(c.tunnel.accel.legs, super::LegMode::Direct);
        // A direct leg goes to the path's remote: a host name is refused
        // where the connection accelerates, taken where it does not.
        let named = |conn: &str| {
            parse(
                &BASE
                    .replace("TUNNEL", direct)
                    .replace("CONN", conn)
                    .replace("remote = \"10.0.0.2\"", "remote = \"hub.example.net\""),
                "a.toml",
            )
            .map_err(|e| e.to_string())
        };
        let e = named("accelerate = [\"0.0.0.0/0\"]").unwrap_err();
        assert!(
            e.contains("path `p`: `accel_legs = \"direct\"` sends each path's leg to its `remote`"),
            "{e}"
        );
        named("").unwrap();
        assert_eq!(c.connections[0].paths[0].accel_congestion, None);
        let c = parse(
            &format!(
                "{}accel_congestion = \"cubic\"\n",
                BASE.replace("TUNNEL", "accel_port = 1").replace("CONN", "")
            ),
            "a.toml",
        )
        .unwrap();
        assert_eq!(
            c.connections[0].paths[0].accel_congestion.as_deref(),
            Some("cubic")
        );
    }

    #[test]
    fn a_bad_path_congestion_control_is_named() {
        let e = parse(
            &format!(
                "{}accel_congestion = \"Cubic \"\n",
                BASE.replace("TUNNEL", "").replace("CONN", "")
            ),
            "a.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "path `p`: key `accel_congestion`: `Cubic ` is not a congestion control name"
            ),
            "{e}"
        );
    }

    #[test]
    fn bad_settings_are_named() {
        for (tunnel, conn, want) in [
            (
                "",
                "accelerate = [\"0.0.0.0/0\"]",
                "needs `[tunnel] accel_port`",
            ),
            (
                "accel_port = 1",
                "accelerate = [\"10.0.0.0\"]",
                "prefix length is required",
            ),
            (
                "accel_port = 1",
                "accelerate = [\"10.0.0.0/8:0\"]",
                "bad port",
            ),
            (
                "accel_port = 1",
                "accelerate = [\"fd00::/8\"]",
                "needs the connection's `peer_ipv6`",
            ),
            (
                "accel_port = 1\naccel_congestion = \"BBR!\"",
                "",
                "not a congestion control name",
            ),
            ("accel_port = 1\naccel_pool = 65", "", "more than 64"),
            (
                "accel_port = 1\naccel_initial_window = 1001",
                "",
                "`accel_initial_window`: 1001 packets is more than 1000",
            ),
            (
                "accel_port = 1\naccel_source = \"host\"",
                "",
                "`accel_source`: `host` is neither \"gateway\" nor \"client\"",
            ),
            (
                "accel_port = 1\naccel_initial_window = -1",
                "",
                "accel_initial_window",
            ),
            (
                "accel_port = 1\naccel_legs = \"many\"",
                "",
                "is not \"pinned\", \"single\" or \"direct\"",
            ),
            ("accel_port = 70000", "", "accel_port"),
        ] {
            let e = with(tunnel, conn).unwrap_err();
            assert!(e.contains(want), "{tunnel} / {conn}: {e}");
            assert!(e.starts_with("a.toml:"), "{e}");
        }
    }
}
