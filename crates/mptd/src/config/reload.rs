//! What a reload cannot apply, said precisely.
//!
//! A reload (SIGHUP, `mpt reload`) applies what can change under a running
//! tunnel: paths, their weights and status, timers, `allow_peer_paths`.
//! The rest is wired into sockets, the tun device, routes or threads at
//! start-up: the tun name, MTU and addresses, the control socket, the
//! worker count, the routing prefixes, the key. A reload must never answer
//! "ok" while it silently kept the old value of such a key, so this module
//! lists every such difference between the running config and the file,
//! naming the key, for the operator to restart.

use super::{Config, ConnectionConfig};

/// One line per setting that differs between `running` and `new` and needs
/// a restart. Connections are matched by name (a new or removed
/// connection is reported by the caller).
pub fn needs_restart(running: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let d = (&running.daemon, &new.daemon);
    let daemon_keys = [
        ("control", d.0.control != d.1.control),
        ("cmd_port", d.0.cmd_port != d.1.cmd_port),
        ("cmd_port_admin", d.0.cmd_port_admin != d.1.cmd_port_admin),
        ("threads", d.0.threads != d.1.threads),
        ("metrics", d.0.metrics != d.1.metrics),
        ("log", d.0.log != d.1.log),
        ("cipher", d.0.cipher != d.1.cipher),
        (
            "hook",
            (&d.0.hook, d.0.hook_timeout) != (&d.1.hook, d.1.hook_timeout),
        ),
        (
            "resolve_interval",
            d.0.resolve_interval != d.1.resolve_interval,
        ),
        (
            "private_key_file",
            (&d.0.private_key_file, d.0.public_key) != (&d.1.private_key_file, d.1.public_key),
        ),
        (
            "route_table_base, fwmark_base or rule_priority_base",
            d.0.routing != d.1.routing,
        ),
        (
            "handshake_source_rate, handshake_source_burst, handshake_rate or handshake_queue",
            d.0.handshake != d.1.handshake,
        ),
    ];
    for (key, changed) in daemon_keys {
        if changed {
            out.push(format!("[daemon] {key} changed (restart to apply)"));
        }
    }
    let t = (&running.tunnel, &new.tunnel);
    let tunnel_keys = [
        ("name", t.0.name != t.1.name),
        ("mtu", t.0.mtu != t.1.mtu),
        ("ipv4", t.0.ipv4 != t.1.ipv4),
        ("ipv6", t.0.ipv6 != t.1.ipv6),
        ("mss_clamp", t.0.mss_clamp != t.1.mss_clamp),
        (
            "accel_port, accel_congestion, accel_pool or accel_legs",
            t.0.accel != t.1.accel,
        ),
    ];
    for (key, changed) in tunnel_keys {
        if changed {
            out.push(format!("[tunnel] {key} changed (restart to apply)"));
        }
    }
    for new_conn in &new.connections {
        if let Some(old) = running.connections.iter().find(|c| c.name == new_conn.name) {
            connection(old, new_conn, &mut out);
        }
    }
    out
}

fn connection(old: &ConnectionConfig, new: &ConnectionConfig, out: &mut Vec<String>) {
    let keys = [
        ("id", old.id != new.id),
        ("peer_ipv4", old.peer_ipv4 != new.peer_ipv4),
        ("peer_ipv6", old.peer_ipv6 != new.peer_ipv6),
        ("networks", old.networks != new.networks),
        ("accelerate", old.accelerate != new.accelerate),
        (
            "port or remote_port",
            (old.port, old.remote_port) != (new.port, new.remote_port),
        ),
        ("scheduler", old.scheduler != new.scheduler),
        ("repair", old.repair != new.repair),
        ("redundancy", old.redundancy != new.redundancy),
        ("rekey_after", old.rekey_after != new.rekey_after),
        ("key_file", old.key_file != new.key_file),
        ("public_key", old.public_key != new.public_key),
        (
            "[[connection.path]] (a client connection has none, others some)",
            old.is_client() != new.is_client(),
        ),
    ];
    for (key, changed) in keys {
        if changed {
            out.push(format!(
                "connection {}: {key} changed (restart to apply)",
                new.name
            ));
        }
    }
    // A path's uplink table is planned at start (docs/DEPLOY.md).
    for p in &new.paths {
        if let Some(o) = old.paths.iter().find(|o| o.name == p.name) {
            if o.gateway != p.gateway {
                out.push(format!(
                    "connection {}: path {}: gateway changed (restart to apply)",
                    new.name, p.name
                ));
            }
        }
    }
}

/// Copies what a reload applied (timers, paths, `allow_peer_paths`) from
/// `new` into `running`, leaving what needs a restart as it runs.
pub fn record_applied(running: &mut Config, new: &Config) {
    for c in &new.connections {
        if let Some(r) = running.connections.iter_mut().find(|r| r.name == c.name) {
            r.keepalive = c.keepalive;
            r.dead_timer = c.dead_timer;
            r.allow_peer_paths = c.allow_peer_paths.clone();
            // Paths are applied, but not their gateway (see above).
            let gateways: Vec<_> = r
                .paths
                .iter()
                .map(|p| (p.name.clone(), p.gateway))
                .collect();
            r.paths = c.paths.clone();
            for p in &mut r.paths {
                if let Some((_, g)) = gateways.iter().find(|(n, _)| *n == p.name) {
                    p.gateway = *g;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    const BASE: &str = r#"
[daemon]
log = "info"
[tunnel]
name = "mpt0"
ipv4 = "192.168.1.1/24"
[[connection]]
name = "a"
peer_ipv4 = "192.168.1.2"
networks = ["10.0.0.0/8"]
key_file = "/etc/mpt/a.key"
[[connection.path]]
name = "p"
local = "127.0.0.1"
remote = "127.0.0.2"
"#;

    #[test]
    fn every_restart_only_key_is_named() {
        let running = parse(BASE, "old").unwrap();
        assert!(needs_restart(&running, &running).is_empty());
        let changed = BASE
            .replace("log = \"info\"", "log = \"debug\"\nthreads = 3")
            .replace(
                "name = \"mpt0\"",
                "name = \"mpt1\"\nmtu = 1300\nmss_clamp = false",
            )
            .replace("10.0.0.0/8", "10.1.0.0/16")
            .replace(
                "192.168.1.2\"",
                "192.168.1.9\"\nport = 7000\nrepair = false\nredundancy = \"off\"",
            )
            .replace("a.key", "b.key")
            .replace(
                "remote = \"127.0.0.2\"",
                "remote = \"127.0.0.2\"\ngateway = \"127.0.0.9\"",
            )
            .replace("[tunnel]", "route_table_base = 5000\n[tunnel]");
        let new = parse(&changed, "new").unwrap();
        let lines = needs_restart(&running, &new);
        for want in [
            "[daemon] log changed",
            "[daemon] threads changed",
            "[tunnel] name changed",
            "[tunnel] mtu changed",
            "[tunnel] mss_clamp changed",
            "connection a: networks changed",
            "connection a: peer_ipv4 changed",
            "connection a: port or remote_port changed",
            "connection a: key_file changed",
            "connection a: repair changed",
            "connection a: redundancy changed",
            "connection a: path p: gateway changed",
            "[daemon] route_table_base, fwmark_base or rule_priority_base changed",
        ] {
            assert!(
                lines.iter().any(|l| l.starts_with(want)),
                "{want:?} missing from {lines:#?}"
            );
        }
        assert_eq!(lines.len(), 13, "{lines:#?}");
        // Paths are recorded as applied, their gateway is not.
        let mut running = running;
        record_applied(&mut running, &new);
        assert!(needs_restart(&running, &new)
            .iter()
            .any(|l| l.contains("path p: gateway changed")));
    }

    #[test]
    fn applied_settings_are_recorded_and_the_rest_kept() {
        let mut running = parse(BASE, "old").unwrap();
        let changed = BASE
            .replace(
                "10.0.0.0/8\"]",
                "10.0.0.0/8\"]\nkeepalive = \"1s\"\nallow_peer_paths = [\"10.9.0.0/16\"]",
            )
            .replace("a.key", "b.key");
        let new = parse(&changed, "new").unwrap();
        record_applied(&mut running, &new);
        let c = &running.connections[0];
        assert_eq!(c.keepalive, std::time::Duration::from_secs(1));
        assert_eq!(c.allow_peer_paths.len(), 1);
        // The key was not applied: a second reload still reports it.
        assert_eq!(
            needs_restart(&running, &new),
            ["connection a: key_file changed (restart to apply)"]
        );
    }
}
