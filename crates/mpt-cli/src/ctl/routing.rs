//! The `routing` section of `mpt status`: where each path leaves (uplink,
//! gateway, table) and the daemon's routing warnings, which say when two
//! paths of a connection share an uplink or IPv6 is not tunnelled.

use mpt_api::status::Routing;

/// The lines of the routing section; none when the daemon installed no
/// routing and has nothing to say about it.
pub fn routing_lines(r: &Routing) -> Vec<String> {
    let rules = r.rules.unwrap_or(0);
    let routes = r.routes.unwrap_or(0);
    let warnings = r.warnings.as_deref().unwrap_or_default();
    let conflicts = r.conflicts.as_deref().unwrap_or_default();
    if rules == 0 && warnings.is_empty() && conflicts.is_empty() {
        return Vec::new();
    }
    let mut full = Vec::new();
    if r.full_tunnel_ipv4 == Some(true) {
        full.push("IPv4");
    }
    if r.full_tunnel_ipv6 == Some(true) {
        full.push("IPv6");
    }
    let mut head = format!("routing: {rules} rules, {routes} routes");
    if !full.is_empty() {
        head.push_str(&format!("; full tunnel of {}", full.join(" and ")));
    }
    if r.ipv6_not_tunnelled == Some(true) {
        head.push_str("; IPv6 NOT tunnelled");
    }
    let mut out = vec![head];
    for p in r.paths.as_deref().unwrap_or_default() {
        out.push(format!(
            "  {}/{}: uplink {}, gateway {}, table {}",
            p.conn.as_deref().unwrap_or("-"),
            p.path.as_deref().unwrap_or("-"),
            p.uplink.clone().flatten().as_deref().unwrap_or("?"),
            p.gateway.as_deref().unwrap_or("-"),
            p.table.map_or("-".to_string(), |t| t.to_string()),
        ));
    }
    for w in warnings {
        out.push(format!("  warning: {w}"));
    }
    for c in conflicts {
        out.push(format!("  not routed: {c}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_api::status::PathRouting;

    #[test]
    fn paths_and_warnings_are_listed() {
        let r = Routing {
            rules: Some(4),
            routes: Some(5),
            full_tunnel_ipv4: Some(true),
            ipv6_not_tunnelled: Some(true),
            paths: Some(vec![PathRouting {
                conn: Some("hub".into()),
                path: Some("lte".into()),
                uplink: Some(Some("u2".into())),
                gateway: Some("10.2.2.1".into()),
                table: Some(28018),
                ..Default::default()
            }]),
            warnings: Some(vec!["two paths".into()]),
            ..Default::default()
        };
        let lines = routing_lines(&r);
        assert_eq!(
            lines,
            vec![
                "routing: 4 rules, 5 routes; full tunnel of IPv4; IPv6 NOT tunnelled",
                "  hub/lte: uplink u2, gateway 10.2.2.1, table 28018",
                "  warning: two paths",
            ]
        );
        assert!(routing_lines(&Routing::default()).is_empty());
    }
}
