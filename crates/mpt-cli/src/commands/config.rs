//! `mpt config check [--resolve] FILE`: the daemon's own validation of a
//! config file, its warnings and a summary, and where each path would
//! leave on this host now (the daemon's routing plan against the kernel's
//! current links, addresses and routes); with `--resolve`, the host names
//! of the paths' remotes looked up as the daemon would at start.

use anyhow::anyhow;

use crate::exit::{Failure, EXIT_USAGE};

/// `mpt config check FILE`: the daemon's own validation.
pub(crate) fn config_check(file: &std::path::Path, resolve: bool) -> Result<u8, Failure> {
    let usage = |err: anyhow::Error| Failure {
        code: EXIT_USAGE,
        err,
    };
    let c = mptd::config::load(file).map_err(|e| usage(e.into()))?;
    for w in c.identity_warnings() {
        eprintln!("warning: {w}");
    }
    println!("{}", c.check_report(file));
    routing_report(&c);
    if resolve {
        let mut failed = Vec::new();
        for (conn, path, line) in resolve_names(&c) {
            match line {
                Ok(text) => println!("  connection {conn} path {path}: {text}"),
                Err(e) => failed.push(format!("connection {conn} path {path}: {e}")),
            }
        }
        if !failed.is_empty() {
            return Err(usage(anyhow!(
                "{}: {} remote name(s) do not resolve:\n  {}",
                file.display(),
                failed.len(),
                failed.join("\n  ")
            )));
        }
    }
    Ok(0)
}

/// Every path with a `remote` host name: (connection, path, what it
/// resolves to or why it does not), picked as the daemon picks (the
/// family of the path's `local`, else the resolver's first address).
fn resolve_names(c: &mptd::config::Config) -> Vec<(String, String, Result<String, String>)> {
    let mut out = Vec::new();
    for conn in &c.connections {
        for p in &conn.paths {
            let Some(name) = &p.remote_name else { continue };
            let v6 = p.local.map(|l| l.is_ipv6());
            let result = mptd::io::resolve::lookup(name)
                .map_err(|e| format!("name {name}: {e}"))
                .and_then(|addrs| {
                    mptd::control::names::pick(&addrs, v6, None)
                        .map(|ip| format!("{name} -> {ip}"))
                        .ok_or_else(|| {
                            let family = if v6 == Some(true) { "IPv6" } else { "IPv4" };
                            format!("name {name}: no {family} address (has {addrs:?})")
                        })
                });
            out.push((conn.name.clone(), p.name.clone(), result));
        }
    }
    out
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
