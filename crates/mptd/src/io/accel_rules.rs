//! The kernel side of TCP acceleration's near end: the nftables table
//! that steers selected forwarded TCP flows to the transparent listener
//! (`tproxy`), and the policy routing that delivers those packets
//! locally (a mark, a rule, a `local default dev lo` table). The far end
//! needs the same table without the `tproxy` rules when it connects from
//! clients' addresses (`accel_source = "client"`): the destination's
//! answers to a client's address are then the far end's own, delivered
//! to its transparent socket by the `socket transparent 1` rule.
//!
//! ```text
//! table inet mptd_accel_<tun>
//!   chain prerouting (filter, hook prerouting, priority mangle)
//!     iifname <tun> return                      legs and replies from the peer
//!     fib daddr type local return               the gateway's own addresses
//!     meta l4proto tcp socket transparent 1 meta mark set MARK accept
//!     tcp, ip daddr PREFIX [tcp dport {PORTS}], fib daddr oifname <tun>
//!         tproxy ip to 127.0.0.1:PORT meta mark set MARK accept
//!     (and the same for ip6, to [::1]:PORT)
//! ip rule  pref PRIORITY fwmark MARK lookup TABLE     (IPv4 and IPv6)
//! ip route local default dev lo table TABLE           (IPv4 and IPv6)
//! ```
//!
//! `fib daddr oifname <tun>` keeps the interception to what the tunnel would
//! carry: a selected prefix that routes elsewhere is left alone. The
//! numbers sit beside the routing feature's, never on them
//! ([`AccelNumbers`]). These are set with the `nft` and `ip` programs:
//! nftables has no stable netlink library for Rust, and a handful of
//! commands at start and stop cost nothing; the rules are removed by
//! [`RulesGuard`] on every way out and, at start, whatever a killed
//! earlier run left.

use std::io::Write;
use std::process::{Command, Stdio};

use mpt_accel::Selector;

use crate::config::RoutingNumbers;

/// The mark, routing table and rule priority of the acceleration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccelNumbers {
    /// `fwmark_base | 0xacce` (0x6d70acce by default): in the daemon's
    /// mark space, far above the uplinks' `fwmark_base + 1 + i`.
    pub mark: u32,
    /// `route_table_base - 1` (28015 by default): just below the
    /// routing feature's tables.
    pub table: u32,
    /// `rule_priority_base - 1` (27999 by default): before the routing
    /// feature's rules, so a steered packet is delivered locally first.
    pub priority: u32,
}

impl AccelNumbers {
    /// The numbers for a daemon with `routing`'s numbers.
    pub fn new(routing: RoutingNumbers) -> Self {
        AccelNumbers {
            mark: routing.fwmark_base | 0xacce,
            table: routing.table_base - 1,
            priority: routing.priority_base - 1,
        }
    }
}

/// Why the rules could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum AccelRulesError {
    /// A program could not be run.
    #[error("running {0}: {1}")]
    Spawn(&'static str, std::io::Error),
    /// A program failed.
    #[error("{0} failed: {1}")]
    Failed(String, String),
}

/// The nftables table's name for tun `tun`.
pub fn table_name(tun: &str) -> String {
    format!(
        "mptd_accel_{}",
        tun.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    )
}

/// The nftables script that creates the table.
pub fn ruleset(tun: &str, port: u16, n: AccelNumbers, selectors: &[Selector]) -> String {
    let mut s = format!(
        "table inet {t} {{\n  chain prerouting {{\n    type filter hook prerouting priority mangle; policy accept;\n    iifname \"{tun}\" return\n    fib daddr type local return\n    meta l4proto tcp socket transparent 1 meta mark set {m:#x} accept\n",
        t = table_name(tun),
        m = n.mark
    );
    for sel in selectors {
        let (fam, to) = if sel.addr.is_ipv4() {
            ("ip", format!("127.0.0.1:{port}"))
        } else {
            ("ip6", format!("[::1]:{port}"))
        };
        let ports = if sel.ports.is_empty() {
            String::new()
        } else {
            let p: Vec<String> = sel.ports.iter().map(|p| p.to_string()).collect();
            format!(" tcp dport {{ {} }}", p.join(", "))
        };
        s.push_str(&format!(
            "    meta l4proto tcp {fam} daddr {}/{}{ports} fib daddr oifname \"{tun}\" tproxy {fam} to {to} meta mark set {:#x} accept\n",
            sel.addr, sel.len, n.mark
        ));
    }
    s.push_str("  }\n}\n");
    s
}

/// Removes the table, rules and routes on drop.
#[derive(Debug)]
pub struct RulesGuard {
    tun: String,
    numbers: AccelNumbers,
}

impl Drop for RulesGuard {
    fn drop(&mut self) {
        remove(&self.tun, self.numbers);
    }
}

/// Installs the interception for `selectors` (after removing leftovers),
/// with the local delivery of transparent sockets' packets for their
/// families and for those of `also` (IPv4, IPv6): the far end's
/// connections from a client's address (`accel_source = "client"`) need
/// that rule and no interception.
pub fn install(
    tun: &str,
    port: u16,
    n: AccelNumbers,
    selectors: &[Selector],
    also: (bool, bool),
) -> Result<RulesGuard, AccelRulesError> {
    remove(tun, n);
    let guard = RulesGuard {
        tun: tun.into(),
        numbers: n,
    };
    let (pref, table, mark) = (
        n.priority.to_string(),
        n.table.to_string(),
        n.mark.to_string(),
    );
    let v4 = also.0 || selectors.iter().any(|s| s.addr.is_ipv4());
    let v6 = also.1 || selectors.iter().any(|s| s.addr.is_ipv6());
    let families = [("-4", v4), ("-6", v6)];
    for fam in families.iter().filter(|f| f.1).map(|f| f.0) {
        run(
            "ip",
            &[
                fam, "rule", "add", "pref", &pref, "fwmark", &mark, "lookup", &table, "proto",
                "109",
            ],
        )?;
        run(
            "ip",
            &[
                fam, "route", "add", "local", "default", "dev", "lo", "table", &table, "proto",
                "109",
            ],
        )?;
    }
    let script = ruleset(tun, port, n, selectors);
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| AccelRulesError::Spawn("nft", e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| AccelRulesError::Spawn("nft", e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| AccelRulesError::Spawn("nft", e))?;
    if !out.status.success() {
        return Err(AccelRulesError::Failed(
            "nft -f (acceleration table)".into(),
            String::from_utf8_lossy(&out.stderr).trim().into(),
        ));
    }
    Ok(guard)
}

/// Removes what [`install`] added (whatever of it exists).
pub fn remove(tun: &str, n: AccelNumbers) {
    let _ = quiet("nft", &["delete", "table", "inet", &table_name(tun)]);
    let (pref, table) = (n.priority.to_string(), n.table.to_string());
    for fam in ["-4", "-6"] {
        // One rule per family was added; a second is someone else's.
        let _ = quiet("ip", &[fam, "rule", "del", "pref", &pref, "lookup", &table]);
        let _ = quiet(
            "ip",
            &[fam, "route", "flush", "table", &table, "proto", "109"],
        );
    }
}

fn run(prog: &'static str, args: &[&str]) -> Result<(), AccelRulesError> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| AccelRulesError::Spawn(prog, e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(AccelRulesError::Failed(
            format!("{prog} {}", args.join(" ")),
            String::from_utf8_lossy(&out.stderr).trim().into(),
        ))
    }
}

fn quiet(prog: &'static str, args: &[&str]) -> bool {
    Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_sit_beside_the_routing_features() {
        let n = AccelNumbers::new(RoutingNumbers::default());
        assert_eq!((n.mark, n.table, n.priority), (0x6d70_acce, 28015, 27999));
    }

    #[test]
    fn ruleset_names_prefixes_ports_and_families() {
        let sel: Vec<Selector> = ["10.9.0.0/16:80,443", "fd00::/8"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let r = ruleset(
            "mpt0",
            7411,
            AccelNumbers::new(RoutingNumbers::default()),
            &sel,
        );
        assert!(r.contains("table inet mptd_accel_mpt0 {"));
        assert!(r.contains("ip daddr 10.9.0.0/16 tcp dport { 80, 443 } fib daddr oifname \"mpt0\" tproxy ip to 127.0.0.1:7411 meta mark set 0x6d70acce accept"));
        assert!(
            r.contains("ip6 daddr fd00::/8 fib daddr oifname \"mpt0\" tproxy ip6 to [::1]:7411")
        );
    }
}
