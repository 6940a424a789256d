//! `mpt config check [--resolve] FILE`: the daemon's own validation of a
//! config file, its warnings and a summary; with `--resolve`, the host
//! names of the paths' remotes looked up as the daemon would at start.

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
