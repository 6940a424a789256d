use super::*;
use crate::io::netlink::{AddrInfo, NetEvent};

/// The branch office of issue 32: u1 (DSL, static default, metric 0)
/// and u2 (LTE, DHCP default, metric 200), tun mpt0.
const U1: u32 = 2;
const U2: u32 = 3;
const TUN: u32 = 9;

fn cfg(networks: &str, paths: &str) -> Config {
    let text = format!(
        r#"
[tunnel]
name = "mpt0"
ipv4 = "192.168.200.1/24"

[[connection]]
name = "hub"
peer_ipv4 = "192.168.200.2"
networks = [{networks}]
key_file = "/nonexistent.key"
{paths}
"#
    );
    crate::config::parse(&text, "test.toml").expect("config")
}

const TWO_UPLINKS: &str = r#"
[[connection.path]]
name = "dsl"
interface = "u1"
remote = "203.0.113.10"

[[connection.path]]
name = "lte"
interface = "u2"
remote = "203.0.113.10"
"#;

fn link(index: u32, name: &str) -> NetEvent {
    NetEvent::Link {
        index,
        name: Some(name.into()),
        up: true,
        p2p: false,
    }
}

fn addr(index: u32, a: &str, len: u8) -> NetEvent {
    NetEvent::Addr(AddrInfo {
        index,
        addr: a.parse().unwrap(),
        prefix_len: len,
        scope: 0,
        usable: true,
        deprecated: false,
    })
}

fn default_route(table: u32, oif: u32, gw: Option<&str>, metric: u32) -> NetEvent {
    let v6 = gw.is_some_and(|g| g.contains(':'));
    NetEvent::Route(RouteInfo {
        table,
        dst: unspecified(v6),
        len: 0,
        oif: Some(oif),
        gateway: gw.map(|g| g.parse().unwrap()),
        metric,
        protocol: 4,
    })
}

/// u1 10.1.1.2/24 with `default via 10.1.1.1` (metric 0), u2 10.2.2.2/24
/// with `default via 10.2.2.1 metric 200`, both in main; tun up.
fn branch(extra: &[NetEvent]) -> NetTable {
    let mut events = vec![
        link(U1, "u1"),
        link(U2, "u2"),
        link(TUN, "mpt0"),
        addr(U1, "10.1.1.2", 24),
        addr(U2, "10.2.2.2", 24),
        addr(TUN, "192.168.200.1", 24),
        default_route(TABLE_MAIN, U1, Some("10.1.1.1"), 0),
        default_route(TABLE_MAIN, U2, Some("10.2.2.1"), 200),
    ];
    events.extend_from_slice(extra);
    let mut t = NetTable::default();
    t.watch([("10.20.0.0".parse().unwrap(), 16)]);
    for e in &events {
        t.apply(e);
    }
    t
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const B: u32 = crate::config::DEFAULT_ROUTE_TABLE_BASE;
const M: u32 = crate::config::DEFAULT_FWMARK_BASE;
const P: u32 = crate::config::DEFAULT_RULE_PRIORITY_BASE;

fn defaults(plan: &Plan) -> Vec<(u32, u32, Option<IpAddr>)> {
    plan.routes
        .iter()
        .filter(|r| r.len == 0)
        .map(|r| (r.table, r.oif, r.gateway))
        .collect()
}

#[test]
fn each_uplink_gets_a_mark_a_rule_and_a_table_with_its_own_default() {
    let c = cfg("", TWO_UPLINKS);
    let plan = plan(&c, Some(TUN), &branch(&[]));
    assert_eq!(
        plan.rules,
        vec![
            RuleSpec {
                v6: false,
                priority: P,
                table: B + 1,
                fwmark: Some((M + 1, u32::MAX)),
                invert: false,
                suppress_prefixlen: None,
            },
            RuleSpec {
                v6: false,
                priority: P,
                table: B + 2,
                fwmark: Some((M + 2, u32::MAX)),
                invert: false,
                suppress_prefixlen: None,
            },
        ]
    );
    // The metric-200 default of u2 is u2's gateway, though main prefers u1.
    assert_eq!(
        defaults(&plan),
        vec![
            (B + 1, U1, Some(ip("10.1.1.1"))),
            (B + 2, U2, Some(ip("10.2.2.1")))
        ]
    );
    // Connected prefixes, before the defaults, with their source.
    let first_default = plan.routes.iter().position(|r| r.len == 0).unwrap();
    let connected: Vec<_> = plan.routes[..first_default]
        .iter()
        .map(|r| (r.table, r.dst, r.len, r.src))
        .collect();
    assert_eq!(
        connected,
        vec![
            (B + 1, ip("10.1.1.0"), 24, Some(ip("10.1.1.2"))),
            (B + 2, ip("10.2.2.0"), 24, Some(ip("10.2.2.2")))
        ]
    );
    assert!(plan.main_routes.is_empty() && !plan.full_v4);
    assert_eq!(plan.paths[0].mark, M + 1);
    assert_eq!(plan.paths[1].mark, M + 2);
    assert_eq!(plan.paths[1].uplink.as_deref(), Some("u2"));
    assert_eq!(plan.paths[1].gateway, "10.2.2.1");
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
}

#[test]
fn a_gateway_in_another_table_counts_and_our_own_tables_never_do() {
    // u2's only default is in table 100 (a DHCP client's own table);
    // one of mptd's tables also has one (left from before): not a source.
    let own = NetEvent::Route(RouteInfo {
        protocol: RTPROT_MPT,
        ..match default_route(B + 2, U2, Some("10.2.2.99"), 0) {
            NetEvent::Route(r) => r,
            _ => unreachable!(),
        }
    });
    let mut t = branch(&[default_route(100, U2, Some("10.2.2.254"), 0), own]);
    t.apply(&NetEvent::RouteGone(
        match default_route(TABLE_MAIN, U2, Some("10.2.2.1"), 200) {
            NetEvent::Route(r) => r,
            _ => unreachable!(),
        },
    ));
    let plan = plan(&cfg("", TWO_UPLINKS), Some(TUN), &t);
    assert_eq!(defaults(&plan)[1], (B + 2, U2, Some(ip("10.2.2.254"))));
}

#[test]
fn no_default_on_an_uplink_is_a_warning_and_a_configured_gateway_fills_it() {
    let mut t = branch(&[]);
    t.apply(&NetEvent::RouteGone(
        match default_route(TABLE_MAIN, U2, Some("10.2.2.1"), 200) {
            NetEvent::Route(r) => r,
            _ => unreachable!(),
        },
    ));
    let plan1 = plan(&cfg("", TWO_UPLINKS), Some(TUN), &t);
    assert_eq!(defaults(&plan1).len(), 1);
    assert!(
        plan1.warnings[0].contains("no IPv4 default route on u2"),
        "{:?}",
        plan1.warnings
    );
    assert!(plan1.paths[1].gateway.starts_with("none"));

    let paths = TWO_UPLINKS.replace(
        "interface = \"u2\"",
        "interface = \"u2\"\ngateway = \"10.2.2.7\"",
    );
    let plan2 = plan(&cfg("", &paths), Some(TUN), &t);
    assert_eq!(defaults(&plan2)[1], (B + 2, U2, Some(ip("10.2.2.7"))));
    assert_eq!(plan2.paths[1].gateway, "10.2.2.7 (configured)");
    assert!(!plan2.routes.iter().any(|r| r.onlink), "inside u2's prefix");
    // A gateway outside the interface's prefixes is on-link.
    let paths = paths.replace("10.2.2.7", "100.64.0.1");
    let plan3 = plan(&cfg("", &paths), Some(TUN), &t);
    assert!(plan3.routes.iter().any(|r| r.len == 0 && r.onlink));
}

#[test]
fn point_to_point_uplink_without_gateway_gets_default_dev() {
    let t = branch(&[
        NetEvent::Link {
            index: 4,
            name: Some("ppp0".into()),
            up: true,
            p2p: true,
        },
        addr(4, "100.70.1.2", 32),
    ]);
    let paths =
        "[[connection.path]]\nname = \"lte\"\ninterface = \"ppp0\"\nremote = \"203.0.113.10\"\n";
    let plan = plan(&cfg("", paths), Some(TUN), &t);
    assert_eq!(defaults(&plan), vec![(B + 1, 4, None)]);
    assert_eq!(plan.paths[0].gateway, "none (point-to-point)");
}

#[test]
fn a_local_only_path_uses_the_interface_holding_its_address() {
    let paths = r#"
[[connection.path]]
name = "lte"
local = "10.2.2.2"
remote = "203.0.113.10"
"#;
    let plan = plan(&cfg("", paths), Some(TUN), &branch(&[]));
    assert_eq!(defaults(&plan), vec![(B + 1, U2, Some(ip("10.2.2.1")))]);
    assert_eq!(plan.paths[0].uplink.as_deref(), Some("u2"));
    assert_eq!(plan.paths[0].mark, M + 1);
}

#[test]
fn full_tunnel_v4_the_wg_quick_way() {
    let plan = plan(&cfg("\"0.0.0.0/0\"", TWO_UPLINKS), Some(TUN), &branch(&[]));
    assert!(plan.full_v4 && !plan.full_v6);
    let tail: Vec<_> = plan.rules[2..].to_vec();
    assert_eq!(
        tail,
        vec![
            RuleSpec {
                v6: false,
                priority: P + 1,
                table: TABLE_MAIN,
                fwmark: None,
                invert: false,
                suppress_prefixlen: Some(0),
            },
            RuleSpec {
                v6: false,
                priority: P + 2,
                table: B,
                fwmark: Some((M, FWMARK_MASK)),
                invert: true,
                suppress_prefixlen: None,
            },
        ]
    );
    assert!(plan.routes.contains(&RouteSpec {
        table: B,
        dst: ip("0.0.0.0"),
        len: 0,
        oif: TUN,
        gateway: None,
        onlink: false,
        src: None,
    }));
    // Nothing into the main table: its defaults stay as they are.
    assert!(plan.main_routes.is_empty());
    assert!(!plan.ipv6_not_tunnelled);
    // Every mark of this daemon matches the `not fwmark` rule's mask.
    for p in &plan.paths {
        assert_eq!(p.mark & FWMARK_MASK, M);
    }
}

#[test]
fn full_v4_tunnel_on_a_dual_stack_host_says_ipv6_is_not_tunnelled() {
    let t = branch(&[default_route(TABLE_MAIN, U1, Some("fe80::1"), 1024)]);
    let plan1 = plan(&cfg("\"0.0.0.0/0\"", TWO_UPLINKS), Some(TUN), &t);
    assert!(plan1.ipv6_not_tunnelled);
    assert!(plan1
        .warnings
        .iter()
        .any(|w| w.contains("IPv6 traffic does NOT")));
    let plan2 = plan(&cfg("\"0.0.0.0/0\", \"::/0\"", TWO_UPLINKS), Some(TUN), &t);
    assert!(!plan2.ipv6_not_tunnelled && plan2.full_v6);
    let v6_rules: Vec<_> = plan2.rules.iter().filter(|r| r.v6).collect();
    assert_eq!(v6_rules.len(), 2);
    assert!(plan2
        .routes
        .iter()
        .any(|r| r.table == B && r.dst == ip("::") && r.oif == TUN));
}

#[test]
fn ipv6_uplinks_copy_the_router_advertised_default() {
    let paths = r#"
[[connection.path]]
name = "v6"
interface = "u1"
remote = "2001:db8::10"
"#;
    let t = branch(&[
        addr(U1, "2001:db8:1::2", 64),
        addr(U1, "fe80::2", 64),
        default_route(TABLE_MAIN, U1, Some("fe80::1"), 1024),
    ]);
    let plan = plan(&cfg("", paths), Some(TUN), &t);
    assert_eq!(defaults(&plan), vec![(B + 1, U1, Some(ip("fe80::1")))]);
    assert!(plan.rules.iter().all(|r| r.v6));
    let connected: Vec<_> = plan
        .routes
        .iter()
        .filter(|r| r.len > 0)
        .map(|r| r.dst)
        .collect();
    assert_eq!(connected, vec![ip("2001:db8:1::")], "no link-local prefix");
}

#[test]
fn two_paths_on_one_uplink_are_warned_about() {
    let paths = r#"
[[connection.path]]
name = "a"
interface = "u1"
remote = "203.0.113.10"

[[connection.path]]
name = "b"
local = "10.1.1.2"
remote = "203.0.113.10"
"#;
    let plan = plan(&cfg("", paths), Some(TUN), &branch(&[]));
    assert_eq!(plan.paths[0].uplink, plan.paths[1].uplink);
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.contains("paths a, b all leave by uplink u1")),
        "{:?}",
        plan.warnings
    );
    // Two uplink keys, two tables, both on u1.
    assert_eq!(defaults(&plan).len(), 2);
}

#[test]
fn networks_routes_never_replace_a_route_mptd_did_not_create() {
    let theirs = NetEvent::Route(RouteInfo {
        table: TABLE_MAIN,
        dst: ip("10.20.0.0"),
        len: 16,
        oif: Some(U1),
        gateway: Some(ip("10.1.1.1")),
        metric: 0,
        protocol: 4,
    });
    let c = cfg("\"10.20.0.0/16\"", TWO_UPLINKS);
    let clean = plan(&c, Some(TUN), &branch(&[]));
    assert_eq!(clean.main_routes.len(), 1);
    assert_eq!(clean.main_routes[0].oif, TUN);
    let taken = plan(&c, Some(TUN), &branch(&[theirs]));
    assert!(taken.main_routes.is_empty());
    assert!(taken.conflicts[0].contains("10.20.0.0/16 is not routed into the tunnel"));
}

#[test]
fn a_path_without_uplink_keeps_the_main_table() {
    let paths = r#"
[[connection.path]]
name = "any"
local = "0.0.0.0"
remote = "203.0.113.10"
"#;
    let c = cfg("", paths);
    assert!(!active(&c));
    let p1 = plan(&c, Some(TUN), &branch(&[]));
    assert!(p1.rules.is_empty() && p1.routes.is_empty());
    assert_eq!(p1.paths[0].mark, 0);
    assert_eq!(p1.paths[0].uplink.as_deref(), Some("u1"));
    assert_eq!(p1.paths[0].gateway, "10.1.1.1 (main table)");
    // With a full tunnel it is marked (out of the tunnel) but has no table.
    let c = cfg("\"0.0.0.0/0\"", paths);
    let plan = plan(&c, Some(TUN), &branch(&[]));
    assert_eq!((plan.paths[0].mark, plan.paths[0].table), (M, None));
}

#[test]
fn a_missing_interface_is_a_warning_and_keeps_its_rule() {
    let plan = plan(&cfg("", TWO_UPLINKS), Some(TUN), &NetTable::default());
    assert_eq!(
        plan.rules.len(),
        2,
        "marks and rules come from the config alone"
    );
    assert!(plan.routes.is_empty());
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.contains("interface u1 does not exist")));
}
