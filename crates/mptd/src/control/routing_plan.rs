//! The routing plan: which rules and routes make every path leave by its
//! own uplink, and a full tunnel that never loops, from the config and the
//! kernel's links, addresses and routes. Pure: no system call, so every
//! case is a unit test.
//!
//! Why policy routing: a path socket bound with `SO_BINDTODEVICE` still
//! looks its route up in the main table, so a path whose interface has no
//! default route there, or a path with only `local`, leaves by the main
//! default (two paths silently become one). wg-quick solved the other
//! half for one path: mark the daemon's own sockets and send everything
//! unmarked into the tunnel from a table of its own. Together:
//!
//! - **Uplinks.** Each distinct `interface` (or, for a path with only
//!   `local`, the address and so the interface that holds it) is an
//!   uplink `i`, numbered in config order (so marks are known before any
//!   socket is bound and stay the same across kernel changes). Its
//!   sockets carry mark `fwmark_base + 1 + i`; rule `fwmark M lookup T` at
//!   `rule_priority_base` sends them to table `T = route_table_base + 1 +
//!   i`, which holds the uplink's own routes: its connected prefixes and a
//!   default route via its gateway. The gateway is the `gateway` path key
//!   if set, else the interface's default route found in any table (the
//!   main table's first, lowest metric first; never one of mptd's own),
//!   else, on a point-to-point link, `default dev IF`. Without any, the
//!   table holds the connected prefixes only and other destinations fall
//!   through to the next rules (said in a warning).
//! - **Paths without an uplink** (neither `interface` nor a specific
//!   `local`) carry `fwmark_base`: no uplink rule matches, the main table
//!   decides as before.
//! - **Full tunnel** (`networks` has `0.0.0.0/0` and/or `::/0`): the
//!   tunnel's default route goes to table `route_table_base`; rule `lookup
//!   main suppress_prefixlength 0` (priority base + 1) lets the main
//!   table's more specific routes win, and `not fwmark
//!   fwmark_base/0xffff0000 lookup route_table_base` (base + 2) sends the
//!   rest, except mptd's own marked sockets, into the tunnel. The main
//!   table's default routes are never touched.
//! - **Other `networks` prefixes** go into the main table through the tun
//!   device, unless a route to the same prefix that mptd did not create
//!   is there: then it is left alone and reported (a conflict).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::{Config, Prefix, RoutingNumbers, FWMARK_MASK};
use crate::control::net_table::NetTable;
use crate::io::policy::{RouteInfo, RouteSpec, RuleSpec, RTPROT_MPT, TABLE_MAIN};
use crate::plane::routing::PathUplink;

/// What makes a path an uplink's: its interface, or the local address of
/// a path that names no interface.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum UplinkKey {
    /// `interface = "NAME"`.
    Interface(String),
    /// `local = "ADDRESS"` (the interface holding it).
    Local(IpAddr),
}

impl UplinkKey {
    /// The key of a path with `interface` and `local`, if it has one.
    pub fn of(interface: Option<&str>, local: Option<IpAddr>) -> Option<UplinkKey> {
        match (interface, local) {
            (Some(i), _) => Some(UplinkKey::Interface(i.to_owned())),
            (None, Some(l)) if !l.is_unspecified() => Some(UplinkKey::Local(l)),
            _ => None,
        }
    }
}

/// The uplinks of `config`, in config order, each once.
pub fn uplinks(config: &Config) -> Vec<UplinkKey> {
    let mut out: Vec<UplinkKey> = Vec::new();
    for p in config.connections.iter().flat_map(|c| &c.paths) {
        if let Some(k) = UplinkKey::of(p.interface.as_deref(), p.local) {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// Whether `config` asks for a full tunnel of IPv4 and of IPv6.
pub fn full_tunnel(config: &Config) -> (bool, bool) {
    let nets = config.connections.iter().flat_map(|c| &c.networks);
    let mut v4 = false;
    let mut v6 = false;
    for n in nets.filter(|n| n.len == 0) {
        if n.addr.is_ipv4() {
            v4 = true;
        } else {
            v6 = true;
        }
    }
    (v4, v6)
}

/// Whether mptd installs any policy routing for `config` (and so marks its
/// sockets): some path has an uplink, or the tunnel is full.
pub fn active(config: &Config) -> bool {
    let (v4, v6) = full_tunnel(config);
    v4 || v6 || !uplinks(config).is_empty()
}

/// The mark of the sockets of the path with uplink `key` (`None`: no
/// uplink of its own), or 0 when `config` needs no policy routing.
pub fn mark(config: &Config, key: Option<&UplinkKey>) -> u32 {
    if !active(config) {
        return 0;
    }
    let base = config.daemon.routing.fwmark_base;
    match key.and_then(|k| uplinks(config).iter().position(|u| u == k)) {
        Some(i) => base + 1 + i as u32,
        None => base,
    }
}

/// The prefixes whose main-table routes the plan must see (to leave
/// routes it did not create alone): every `networks` prefix but `/0`.
pub fn watched(config: &Config) -> Vec<(IpAddr, u8)> {
    config
        .connections
        .iter()
        .flat_map(|c| &c.networks)
        .filter(|n| n.len > 0)
        .map(|n| {
            let n = n.network();
            (n.addr, n.len)
        })
        .collect()
}

/// What to install, and what the operator should know about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Rules, in the order they are added.
    pub rules: Vec<RuleSpec>,
    /// Routes of mptd's own tables, connected prefixes before the default
    /// routes that may need them.
    pub routes: Vec<RouteSpec>,
    /// `networks` prefixes into the tunnel (main table).
    pub main_routes: Vec<RouteSpec>,
    /// Per path, where it leaves.
    pub paths: Vec<PathUplink>,
    /// Things the operator should know (logged, shown by `mpt config
    /// check` and `mpt status`).
    pub warnings: Vec<String>,
    /// `networks` prefixes not routed into the tunnel because a route to
    /// them exists that mptd did not create.
    pub conflicts: Vec<String>,
    /// `0.0.0.0/0` is tunnelled.
    pub full_v4: bool,
    /// `::/0` is tunnelled.
    pub full_v6: bool,
    /// A full IPv4 tunnel on a host with an IPv6 default route, and `::/0`
    /// not tunnelled: IPv6 traffic leaves outside the tunnel.
    pub ipv6_not_tunnelled: bool,
}

/// One uplink as the kernel has it now.
struct Resolved {
    index: Option<u32>,
    name: Option<String>,
}

fn resolve(key: &UplinkKey, kernel: &NetTable) -> Resolved {
    let found = match key {
        UplinkKey::Interface(n) => kernel.link_by_name(n),
        UplinkKey::Local(ip) => kernel.link_of(*ip),
    };
    match found {
        Some((i, l)) => Resolved {
            index: Some(i),
            name: Some(l.name.clone()),
        },
        None => Resolved {
            index: None,
            name: match key {
                UplinkKey::Interface(n) => Some(n.clone()),
                UplinkKey::Local(_) => None,
            },
        },
    }
}

fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

/// Whether table `t` is one of mptd's (with `uplinks` uplink tables).
fn own_table(n: &RoutingNumbers, uplinks: usize, t: u32) -> bool {
    t >= n.table_base && t <= n.table_base + uplinks as u32
}

/// The default route of family `v6` the kernel has through link `index`,
/// in any table but mptd's own: the main table's first, then by metric.
fn kernel_default(
    kernel: &NetTable,
    index: u32,
    v6: bool,
    own: impl Fn(&RouteInfo) -> bool,
) -> Option<&RouteInfo> {
    kernel
        .routes()
        .iter()
        .filter(|r| r.len == 0 && r.dst.is_ipv6() == v6 && r.oif == Some(index) && !own(r))
        .min_by_key(|r| (r.table != TABLE_MAIN, r.metric, r.table))
}

/// The families an uplink's paths use: the remote's, else the local
/// address's, else both.
fn families(config: &Config, key: &UplinkKey) -> BTreeSet<bool> {
    let mut out = BTreeSet::new();
    for p in config.connections.iter().flat_map(|c| &c.paths) {
        if UplinkKey::of(p.interface.as_deref(), p.local).as_ref() != Some(key) {
            continue;
        }
        match p.remote.or(p.local.filter(|l| !l.is_unspecified())) {
            Some(a) => {
                out.insert(a.is_ipv6());
            }
            None => {
                out.insert(false);
                out.insert(true);
            }
        }
    }
    out
}

/// The plan for `config` on a kernel whose state is `kernel`; `tun` is the
/// tunnel's interface index (none before it exists, e.g. for `mpt config
/// check`: then the tunnel's own routes are left out).
pub fn plan(config: &Config, tun: Option<u32>, kernel: &NetTable) -> Plan {
    let n = &config.daemon.routing;
    let keys = uplinks(config);
    let (full_v4, full_v6) = full_tunnel(config);
    let mut plan = Plan {
        full_v4,
        full_v6,
        ..Plan::default()
    };
    if !active(config) {
        plan_main_routes(config, tun, kernel, &mut plan);
        plan_paths(config, kernel, &[], &mut plan);
        return plan;
    }
    let own = |r: &RouteInfo| r.protocol == RTPROT_MPT || own_table(n, keys.len(), r.table);
    let mut gateways: Vec<(Option<String>, String)> = Vec::new();
    let mut defaults = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let table = n.table_base + 1 + i as u32;
        let mark = n.fwmark_base + 1 + i as u32;
        let fams = families(config, key);
        for &v6 in &fams {
            plan.rules.push(RuleSpec {
                v6,
                priority: n.priority_base,
                table,
                fwmark: Some((mark, u32::MAX)),
                invert: false,
                suppress_prefixlen: None,
            });
        }
        let r = resolve(key, kernel);
        let Some(index) = r.index else {
            let what = match key {
                UplinkKey::Interface(n) => format!("interface {n} does not exist"),
                UplinkKey::Local(a) => format!("no interface holds {a}"),
            };
            plan.warnings.push(format!(
                "uplink {}: {what} (yet); its table {table} stays empty until it appears",
                key_name(key)
            ));
            gateways.push((r.name, "none (no interface)".into()));
            continue;
        };
        let p2p = kernel.links().get(&index).is_some_and(|l| l.p2p);
        let configured = configured_gateway(config, key, &mut plan.warnings);
        let mut words = Vec::new();
        for &v6 in &fams {
            let connected = connected(kernel, index, v6, table);
            let gw = configured
                .filter(|g| g.is_ipv6() == v6)
                .map(|g| (Some(g), "configured"))
                .or_else(|| kernel_default(kernel, index, v6, own).map(|d| (d.gateway, "kernel")))
                .or_else(|| p2p.then_some((None, "point-to-point")));
            match gw {
                Some((gateway, source)) => {
                    let onlink = match gateway {
                        Some(g @ IpAddr::V4(_)) => !connected.iter().any(|c| {
                            Prefix {
                                addr: c.dst,
                                len: c.len,
                            }
                            .contains(g)
                        }),
                        _ => false,
                    };
                    defaults.push(RouteSpec {
                        table,
                        dst: unspecified(v6),
                        len: 0,
                        oif: index,
                        gateway,
                        onlink,
                        src: None,
                    });
                    words.push(match (gateway, source) {
                        (Some(g), "configured") => format!("{g} (configured)"),
                        (Some(g), _) => g.to_string(),
                        (None, _) => "none (point-to-point)".to_string(),
                    });
                }
                None => {
                    plan.warnings.push(format!(
                        "uplink {}: no IPv{} default route on {} in any table and no `gateway` set: its paths reach only its own networks; other destinations fall through to the main table",
                        key_name(key),
                        if v6 { 6 } else { 4 },
                        r.name.as_deref().unwrap_or("?"),
                    ));
                    words.push("none (no default route, no `gateway`)".into());
                }
            }
            plan.routes.extend(connected);
        }
        gateways.push((r.name, words.join(", ")));
    }
    plan.routes.extend(defaults);
    plan_full_tunnel(config, tun, kernel, &own, &mut plan);
    plan_main_routes(config, tun, kernel, &mut plan);
    plan_paths(config, kernel, &gateways, &mut plan);
    plan
}

fn key_name(key: &UplinkKey) -> String {
    match key {
        UplinkKey::Interface(n) => n.clone(),
        UplinkKey::Local(a) => format!("of {a}"),
    }
}

/// The `gateway` the paths of uplink `key` set (the first; a different
/// one on another path of the same uplink is warned about).
fn configured_gateway(
    config: &Config,
    key: &UplinkKey,
    warnings: &mut Vec<String>,
) -> Option<IpAddr> {
    let mut found: Option<IpAddr> = None;
    for p in config.connections.iter().flat_map(|c| &c.paths) {
        if UplinkKey::of(p.interface.as_deref(), p.local).as_ref() != Some(key) {
            continue;
        }
        if let Some(g) = p.gateway {
            match found {
                Some(f) if f != g && f.is_ipv4() == g.is_ipv4() => warnings.push(format!(
                    "path {}: `gateway` {g} differs from {f}, set on another path of uplink {}; {f} is used",
                    p.name,
                    key_name(key)
                )),
                Some(_) => {}
                None => found = Some(g),
            }
        }
    }
    found
}

/// The connected prefixes of link `index` of family `v6`, as routes of
/// `table` (IPv6 link-local left out: nothing is routed there).
fn connected(kernel: &NetTable, index: u32, v6: bool, table: u32) -> Vec<RouteSpec> {
    let mut out: Vec<RouteSpec> = Vec::new();
    for a in kernel.addrs().iter().filter(|a| a.index == index) {
        if a.addr.is_ipv6() != v6 || !a.usable {
            continue;
        }
        if matches!(a.addr, IpAddr::V6(v) if v.is_unicast_link_local()) {
            continue;
        }
        let max = if v6 { 128 } else { 32 };
        let net = Prefix {
            addr: a.addr,
            len: a.prefix_len.min(max),
        }
        .network();
        let r = RouteSpec {
            table,
            dst: net.addr,
            len: net.len,
            oif: index,
            gateway: None,
            onlink: false,
            src: Some(a.addr),
        };
        if !out.iter().any(|o| (o.dst, o.len) == (r.dst, r.len)) {
            out.push(r);
        }
    }
    out
}

fn plan_full_tunnel(
    config: &Config,
    tun: Option<u32>,
    kernel: &NetTable,
    own: &impl Fn(&RouteInfo) -> bool,
    plan: &mut Plan,
) {
    let n = &config.daemon.routing;
    for (v6, on) in [(false, plan.full_v4), (true, plan.full_v6)] {
        if !on {
            continue;
        }
        plan.rules.push(RuleSpec {
            v6,
            priority: n.priority_base + 1,
            table: TABLE_MAIN,
            fwmark: None,
            invert: false,
            suppress_prefixlen: Some(0),
        });
        plan.rules.push(RuleSpec {
            v6,
            priority: n.priority_base + 2,
            table: n.table_base,
            fwmark: Some((n.fwmark_base, FWMARK_MASK)),
            invert: true,
            suppress_prefixlen: None,
        });
        if let Some(tun) = tun {
            plan.routes.push(RouteSpec {
                table: n.table_base,
                dst: unspecified(v6),
                len: 0,
                oif: tun,
                gateway: None,
                onlink: false,
                src: None,
            });
        }
    }
    if plan.full_v4 && !plan.full_v6 {
        let v6_default = kernel
            .routes()
            .iter()
            .any(|r| r.len == 0 && r.dst.is_ipv6() && !own(r) && r.oif != tun);
        if v6_default {
            plan.ipv6_not_tunnelled = true;
            plan.warnings.push("full IPv4 tunnel (0.0.0.0/0), but this host has an IPv6 default route and ::/0 is not in `networks`: IPv6 traffic does NOT go through the tunnel (add \"::/0\" to `networks` to tunnel it)".into());
        }
    }
}

/// The `networks` prefixes other than `/0` into the tunnel, in the main
/// table; a prefix with a route mptd did not create is left alone.
fn plan_main_routes(config: &Config, tun: Option<u32>, kernel: &NetTable, plan: &mut Plan) {
    for c in &config.connections {
        for net in c.networks.iter().filter(|n| n.len > 0) {
            let net = net.network();
            let theirs = kernel.routes().iter().find(|r| {
                r.table == TABLE_MAIN
                    && (r.dst, r.len) == (net.addr, net.len)
                    && r.protocol != RTPROT_MPT
            });
            if let Some(r) = theirs {
                if tun.is_some() && r.oif == tun {
                    // The tun device's own prefix: it goes there already.
                    continue;
                }
                let dev = r
                    .oif
                    .and_then(|i| kernel.links().get(&i))
                    .map_or("?".to_string(), |l| l.name.clone());
                plan.conflicts.push(format!(
                    "connection {}: {net} is not routed into the tunnel: the main table has a route to it that mptd did not create (dev {dev}, proto {}, metric {}); mptd never replaces it. Delete that route, or take {net} out of `networks`",
                    c.name, r.protocol, r.metric
                ));
                continue;
            }
            if let Some(tun) = tun {
                let r = RouteSpec {
                    table: TABLE_MAIN,
                    dst: net.addr,
                    len: net.len,
                    oif: tun,
                    gateway: None,
                    onlink: false,
                    src: None,
                };
                if !plan.main_routes.contains(&r) {
                    plan.main_routes.push(r);
                }
            }
        }
    }
}

/// Where each path leaves, and a warning for every connection with two
/// paths on one uplink. `gateways`: per uplink, its interface name and
/// gateway in words.
fn plan_paths(
    config: &Config,
    kernel: &NetTable,
    gateways: &[(Option<String>, String)],
    plan: &mut Plan,
) {
    let keys = uplinks(config);
    let main_default = |v6: bool| {
        kernel
            .routes()
            .iter()
            .filter(|r| r.table == TABLE_MAIN && r.len == 0 && r.dst.is_ipv6() == v6)
            .min_by_key(|r| r.metric)
    };
    for c in &config.connections {
        let first = plan.paths.len();
        for p in &c.paths {
            let key = UplinkKey::of(p.interface.as_deref(), p.local);
            let at = key.as_ref().and_then(|k| keys.iter().position(|u| u == k));
            let (uplink, gateway, table) = match (at, gateways.get(at.unwrap_or(usize::MAX))) {
                (Some(i), Some((name, gw))) => (
                    name.clone(),
                    gw.clone(),
                    Some(config.daemon.routing.table_base + 1 + i as u32),
                ),
                _ => {
                    let v6 = p.remote.is_some_and(|r| r.is_ipv6());
                    match main_default(v6) {
                        Some(d) => (
                            d.oif
                                .and_then(|i| kernel.links().get(&i))
                                .map(|l| l.name.clone()),
                            d.gateway.map_or("none (main table, on-link)".into(), |g| {
                                format!("{g} (main table)")
                            }),
                            None,
                        ),
                        None => (None, "none (main table has no default)".into(), None),
                    }
                }
            };
            plan.paths.push(PathUplink {
                conn: c.name.clone(),
                path: p.name.clone(),
                mark: mark(config, key.as_ref()),
                table,
                uplink,
                gateway,
            });
        }
        let mine = &plan.paths[first..];
        let mut seen: Vec<&str> = Vec::new();
        for (i, a) in mine.iter().enumerate() {
            let Some(up) = a.uplink.as_deref() else {
                continue;
            };
            if seen.contains(&up) {
                continue;
            }
            let same: Vec<&str> = mine[i..]
                .iter()
                .filter(|b| b.uplink.as_deref() == Some(up))
                .map(|b| b.path.as_str())
                .collect();
            if same.len() > 1 {
                seen.push(up);
                plan.warnings.push(format!(
                    "connection {}: paths {} all leave by uplink {up}: they share its capacity and fail together",
                    c.name,
                    same.join(", ")
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
