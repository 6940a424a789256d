//! Kernel MPTCP as a baseline beside the tunnel (issue 35 item 2): the
//! multipath peer a user could pick instead of mpt is already in their
//! kernel, so a reviewer asks how mpt does against it on the same paths.
//!
//! The testbed's namespaces are reused as they are: A and B joined by the
//! case's emulated paths, path i with addresses `plan.outer(i, 1|2)` on
//! `va<i>`/`vb<i>`. B announces every further path address with an
//! in-kernel path manager endpoint (`ip mptcp endpoint add ADDR dev vb<i>
//! signal`), A accepts the announcements (`ip mptcp limits`), and A's
//! kernel opens one subflow to each announced address from the address
//! routing picks: the one on the same path. iperf3 runs under `mptcpize
//! run`, which makes its TCP sockets MPTCP ones. The data then crosses
//! path 0 (the initial subflow) and one subflow per further path.
//!
//! That both subflows carried data is checked, not assumed: the bytes B
//! received on each `vb<i>` over the run (interface counters, `ip -s -j
//! link`) are compared, and a run where a path carried less than
//! [`MIN_SHARE`] of the bytes is flagged: its mpt / MPTCP ratio is not
//! reported (a single-path MPTCP run is a TCP run, not the baseline).

use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::testbed::Plan;
use mpt_emu::netns::ip;

/// The command that installs `mptcpize` on Debian and Ubuntu.
pub const INSTALL_COMMAND: &str = "apt-get install -y mptcpize";

/// A path "carried" the MPTCP connection if it delivered at least this
/// share of the bytes received over all paths.
pub const MIN_SHARE: f64 = 0.01;

/// Most subflows and accepted announcements per connection (the kernel
/// caps both at 8).
const MAX_SUBFLOWS: usize = 8;

/// Whether to measure the kernel MPTCP baseline (`--baseline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// On when `mptcpize` is installed and the kernel has MPTCP on.
    Auto,
    /// On; `mptcpize` is installed when missing.
    Mptcp,
    /// Off.
    None,
}

/// Why the baseline cannot run here, if it cannot.
pub fn unavailable() -> Option<String> {
    let enabled = std::fs::read_to_string("/proc/sys/net/mptcp/enabled");
    match enabled.as_deref().map(str::trim) {
        Ok("1") => {}
        Ok(v) => {
            return Some(format!(
                "kernel MPTCP is off (net.mptcp.enabled = {v}; sysctl -w net.mptcp.enabled=1)"
            ))
        }
        Err(_) => return Some("this kernel has no MPTCP (no /proc/sys/net/mptcp)".into()),
    }
    let found = Command::new("mptcpize")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    (!found).then(|| format!("mptcpize is not installed ({INSTALL_COMMAND})"))
}

/// Decides whether the baseline runs: `Auto` runs it when it can (and says
/// why not otherwise), `Mptcp` installs `mptcpize` with apt-get when it is
/// missing and fails with the exact command if that does not work.
pub fn resolve(choice: Choice) -> anyhow::Result<bool> {
    match choice {
        Choice::None => Ok(false),
        Choice::Auto => match unavailable() {
            None => Ok(true),
            Some(why) => {
                println!("==> no kernel MPTCP baseline: {why}");
                Ok(false)
            }
        },
        Choice::Mptcp => {
            let Some(why) = unavailable() else {
                return Ok(true);
            };
            if why.contains("mptcpize") {
                println!("==> installing mptcpize for the MPTCP baseline: {INSTALL_COMMAND}");
                let ok = Command::new("apt-get")
                    .args(["install", "-y", "-qq", "mptcpize"])
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if ok && unavailable().is_none() {
                    return Ok(true);
                }
                bail!(
                    "--baseline mptcp: mptcpize is missing and could not be installed; \
                     run `{INSTALL_COMMAND}` (after `apt-get update`) and try again"
                );
            }
            bail!("--baseline mptcp: {why}")
        }
    }
}

/// Sets up the in-kernel path manager for `n` paths: limits on both
/// sides, and B's addresses on paths 1.. announced as `signal` endpoints
/// (the connection starts on path 0).
pub fn configure(a: &str, b: &str, plan: &Plan, n: usize) -> anyhow::Result<()> {
    let extra = n.saturating_sub(1).min(MAX_SUBFLOWS).to_string();
    for ns in [a, b] {
        ip(&[
            "-n",
            ns,
            "mptcp",
            "limits",
            "set",
            "subflows",
            &extra,
            "add_addr_accepted",
            &extra,
        ])
        .with_context(|| format!("ip mptcp limits in {ns}"))?;
    }
    for i in 1..n.min(MAX_SUBFLOWS + 1) {
        let addr = plan.outer(i, 2);
        let dev = format!("vb{i}");
        ip(&[
            "-n", b, "mptcp", "endpoint", "add", &addr, "dev", &dev, "signal",
        ])
        .with_context(|| format!("ip mptcp endpoint add {addr} dev {dev} signal in {b}"))?;
    }
    Ok(())
}

/// Bytes received so far on B's `vb0..vb<n-1>`, in path order.
pub fn rx_bytes(b: &str, n: usize) -> anyhow::Result<Vec<u64>> {
    let out = Command::new("ip")
        .args(["-n", b, "-s", "-j", "link", "show"])
        .output()
        .context("running ip -s -j link show")?;
    if !out.status.success() {
        bail!(
            "ip -n {b} -s -j link show: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_rx_bytes(&String::from_utf8_lossy(&out.stdout), "vb", n)
}

/// One interface of `ip -s -j link show`, the fields read.
#[derive(Debug, Deserialize)]
struct LinkJson {
    ifname: String,
    stats64: Option<Stats64>,
}

#[derive(Debug, Deserialize)]
struct Stats64 {
    rx: Counters,
}

#[derive(Debug, Deserialize)]
struct Counters {
    bytes: u64,
}

/// Received bytes of `<prefix>0..<prefix><n-1>` from `ip -s -j link show`.
pub fn parse_rx_bytes(json: &str, prefix: &str, n: usize) -> anyhow::Result<Vec<u64>> {
    let links: Vec<LinkJson> = serde_json::from_str(json).context("parsing ip -s -j link")?;
    (0..n)
        .map(|i| {
            let name = format!("{prefix}{i}");
            links
                .iter()
                .find(|l| l.ifname == name)
                .and_then(|l| l.stats64.as_ref())
                .map(|s| s.rx.bytes)
                .with_context(|| format!("no counters for {name}"))
        })
        .collect()
}

/// How the bytes of one MPTCP run spread over the paths.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathUse {
    /// Bytes received per path over the run (all traffic on the path:
    /// the subflows, and mptd's few keepalives).
    pub bytes: Vec<u64>,
    /// Each path's share of the bytes, 0..1.
    pub share: Vec<f64>,
    /// Did every path carry at least [`MIN_SHARE`]?
    pub all_paths_used: bool,
}

impl PathUse {
    /// From the counters before and after the run (wrapped or reset
    /// counters count as 0).
    pub fn between(before: &[u64], after: &[u64]) -> PathUse {
        let bytes: Vec<u64> = before
            .iter()
            .zip(after)
            .map(|(b, a)| a.saturating_sub(*b))
            .collect();
        let total: u64 = bytes.iter().sum();
        let share: Vec<f64> = bytes
            .iter()
            .map(|&b| {
                if total > 0 {
                    b as f64 / total as f64
                } else {
                    0.0
                }
            })
            .collect();
        let all_paths_used = total > 0 && share.iter().all(|&s| s >= MIN_SHARE);
        PathUse {
            bytes,
            share,
            all_paths_used,
        }
    }

    /// Paths below [`MIN_SHARE`], 0-based.
    pub fn unused(&self) -> Vec<usize> {
        (0..self.share.len())
            .filter(|&i| self.share[i] < MIN_SHARE)
            .collect()
    }

    /// "wifi 61 % + lte 39 %".
    pub fn label(&self, names: &[String]) -> String {
        self.share
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let name = names.get(i).map_or("?", String::as_str);
                format!("{name} {:.0} %", s * 100.0)
            })
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// mpt / MPTCP when the MPTCP run used every path and carried anything.
pub fn ratio(mpt_mbps: f64, mptcp_mbps: f64, used: &PathUse) -> Option<f64> {
    (used.all_paths_used && mptcp_mbps > 0.0).then(|| mpt_mbps / mptcp_mbps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rx_bytes_of_the_path_interfaces() {
        let json = r#"[{"ifindex":1,"ifname":"lo","stats64":{"rx":{"bytes":5},"tx":{"bytes":5}}},
            {"ifname":"vb1","stats64":{"rx":{"bytes":2000,"packets":2},"tx":{"bytes":1}}},
            {"ifname":"vb0","stats64":{"rx":{"bytes":1000},"tx":{"bytes":1}}},
            {"ifname":"mpt0"}]"#;
        let v = parse_rx_bytes(json, "vb", 2).ok();
        assert_eq!(v, Some(vec![1000, 2000]));
        assert!(parse_rx_bytes(json, "vb", 3).is_err());
        assert!(parse_rx_bytes(json, "mpt", 1).is_err());
        assert!(parse_rx_bytes("not json", "vb", 1).is_err());
    }

    #[test]
    fn flags_a_run_that_left_a_path_idle() {
        let u = PathUse::between(&[100, 100], &[60_100, 40_100]);
        assert_eq!(u.bytes, vec![60_000, 40_000]);
        assert!(u.all_paths_used);
        assert_eq!(u.share, vec![0.6, 0.4]);
        assert_eq!(
            u.label(&["wifi".into(), "lte".into()]),
            "wifi 60 % + lte 40 %"
        );
        assert_eq!(ratio(30.0, 40.0, &u), Some(0.75));
        // Keepalives only on path 1: one subflow.
        let u = PathUse::between(&[0, 0], &[1_000_000, 500]);
        assert!(!u.all_paths_used);
        assert_eq!(u.unused(), vec![1]);
        assert_eq!(ratio(30.0, 40.0, &u), None);
        // Nothing at all, or a counter that went back.
        assert!(!PathUse::between(&[5, 5], &[5, 1]).all_paths_used);
        let ok = PathUse::between(&[0], &[10]);
        assert_eq!(ratio(1.0, 0.0, &ok), None);
    }
}
