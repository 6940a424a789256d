//! `mpt config check FILE`: the daemon's own validation of a config
//! file, its warnings and a summary, and where each path would leave on
//! this host now (the daemon's routing plan against the kernel's current
//! links, addresses and routes).

use crate::exit::{Failure, EXIT_USAGE};

/// `mpt config check FILE`: the daemon's own validation.
pub(crate) fn config_check(file: &std::path::Path) -> Result<u8, Failure> {
    match mptd::config::load(file) {
        Ok(c) => {
            for w in c.identity_warnings() {
                eprintln!("warning: {w}");
            }
            println!("{}", c.check_report(file));
            routing_report(&c);
            Ok(0)
        }
        Err(e) => Err(Failure {
            code: EXIT_USAGE,
            err: e.into(),
        }),
    }
}

/// Where each path would leave, by the daemon's own routing plan
/// (`mptd::control::routing_plan`) on this host's current links,
/// addresses and routes; its warnings (two paths of a connection on one
/// uplink, an uplink without gateway, IPv6 outside a full tunnel) on
/// stderr. Without netlink (another host's config checked in a
/// container) it says so and checks nothing more.
fn routing_report(c: &mptd::config::Config) {
    use mptd::control::{links::NetTable, routing_plan};
    let events = match mptd::io::netlink::snapshot() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("note: cannot read this host's links and routes ({e}); uplinks not checked");
            return;
        }
    };
    let mut table = NetTable::default();
    table.watch(routing_plan::watched(c));
    for e in &events {
        table.apply(e);
    }
    let tun = table.link_by_name(&c.tunnel.name).map(|(i, _)| i);
    let plan = routing_plan::plan(c, tun, &table);
    for p in &plan.paths {
        println!(
            "  path {}/{}: uplink {}, gateway {}{}",
            p.conn,
            p.path,
            p.uplink.as_deref().unwrap_or("?"),
            p.gateway,
            p.table.map(|t| format!(", table {t}")).unwrap_or_default()
        );
    }
    for w in &plan.warnings {
        eprintln!("warning: {w}");
    }
    for w in &plan.conflicts {
        eprintln!("warning: {w}");
    }
}
