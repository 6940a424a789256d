//! What `mpt bench clients` measured: results.json, results.csv (key,
//! value lines) and the text summary.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use mpt_api::status::HandshakeStats;
use serde::Serialize;

use crate::bench::csv_rows::{self, CsvError};
use crate::bench::iperf::Measurement;

/// Threads and memory of a process, from /proc/PID/status.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ProcMem {
    pub threads: u64,
    /// Resident set, KiB.
    pub rss_kib: u64,
    /// Peak resident set, KiB.
    pub hwm_kib: u64,
    /// Open file descriptors (entries of /proc/PID/fd); 0 when unknown.
    pub fds: u64,
}

/// Reads [`ProcMem`] of `pid`.
pub fn proc_mem(pid: u32) -> Option<ProcMem> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    parse_proc_status(&text).map(|m| ProcMem { fds, ..m })
}

pub(crate) fn parse_proc_status(text: &str) -> Option<ProcMem> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    Some(ProcMem {
        threads: field("Threads:")?,
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
        fds: 0,
    })
}

/// K clients at once.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Aggregate {
    /// The clients that sent.
    pub clients: Vec<String>,
    /// Each sender's TCP goodput.
    pub per_sender: Vec<Measurement>,
    /// Their sum, Mbit/s.
    pub mbps: f64,
    /// Sum of the senders' retransmits.
    pub retransmits: u64,
    /// CPU of the server mptd over the measurement, percent of one core.
    pub server_cpu_pct: Option<f64>,
}

/// The same senders under a flood of forged initiations (see
/// `flood::measure_flood` for the runs and why).
#[derive(Debug, Clone, Default, Serialize)]
pub struct FloodResult {
    /// The flooded run with the median throughput.
    pub senders: Aggregate,
    pub rounds: usize,
    /// Each round's aggregate, Mbit/s: quiet, under the flood, under the
    /// flood aimed at a closed port (the control), paced quiet and paced
    /// under the flood.
    pub quiet_mbps: Vec<f64>,
    pub flooded_mbps: Vec<f64>,
    pub control_mbps: Vec<f64>,
    pub paced_quiet_mbps: Vec<f64>,
    pub paced_flooded_mbps: Vec<f64>,
    /// iperf3 -b of each sender in the paced runs: half the first quiet
    /// aggregate, shared out.
    pub paced_mbps_per_sender: u64,
    /// Forged initiations sent to the server ports, and their rate.
    pub datagrams: u64,
    pub per_second: f64,
    /// Rate of the control flood.
    pub control_per_second: f64,
    /// CPU of this process (the flooding thread, mostly) over the floods
    /// at the server, percent of one core: it competes with the tunnels
    /// for the cores.
    pub flood_cpu_pct: Option<f64>,
    /// Medians: 1 - flooded / quiet, percent.
    pub drop_pct: f64,
    /// 1 - control / quiet: what the flooding process and the kernel
    /// cost the senders with mptd out of it.
    pub control_drop_pct: f64,
    /// 1 - flooded / control: what the server's handling of the flood
    /// costs them (target < 20 %).
    pub server_drop_pct: f64,
    /// 1 - paced flooded / paced quiet (target < 20 %).
    pub paced_drop_pct: f64,
    /// Datagrams the server namespace's kernel dropped on full socket
    /// queues over the rounds (`Udp: RcvbufErrors`).
    pub udp_rcvbuf_errors: Option<u64>,
    /// Server memory before and after the rounds.
    pub server_before: ProcMem,
    pub server_after: ProcMem,
    /// The same flood with no traffic, before the rounds (after every
    /// traffic phase, so the buffers traffic grows have grown already):
    /// server memory before and after it, and its rate. What the flood
    /// alone does to memory.
    pub alone_before: ProcMem,
    pub alone_after: ProcMem,
    pub alone_per_second: f64,
    /// The server mptd's CPU over the flood alone, percent of one core:
    /// what handling the forged datagrams costs it.
    pub alone_server_cpu_pct: Option<f64>,
    /// Server connections still up after the flood.
    pub up_after: usize,
    /// The server's `noise` status counters after the flood (`null`
    /// when the server did not answer or has no public-key responder).
    pub server_noise: Option<HandshakeStats>,
}

/// One client alone with rekeys against one client alone without.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RekeyResult {
    pub client: String,
    pub rekey_after_s: u64,
    /// Rekeys the client made during its measurement.
    pub rekeys: u64,
    /// Pacing of both runs (iperf3 -b), half the single client's rate.
    pub paced_mbps: u64,
    pub with_rekeys: Measurement,
    /// The baseline: client 0 alone, no rekeys, paced the same.
    pub without_rekeys: Measurement,
}

/// results.json of `mpt bench clients`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub scenario: String,
    pub mode: String,
    pub clients: usize,
    pub paths_per_client: usize,
    pub senders: usize,
    pub duration_s: f64,
    pub started_unix: u64,
    pub wall_s: f64,
    pub cores: usize,
    pub kernel: String,
    /// The build, machine, settings and load of the run.
    pub meta: crate::bench::report::meta::RunMeta,
    /// Every step done.
    pub complete: bool,
    /// Every client up (session established, every path up) in time.
    pub all_up: bool,
    /// Seconds from the first client start until all were up.
    pub up_s: Option<f64>,
    /// Clients up at the end of the wait.
    pub up_count: usize,
    /// Server mptd once all were up (idle), and at the end.
    pub server_idle: Option<ProcMem>,
    pub server_end: Option<ProcMem>,
    /// One client alone (client 0).
    pub single: Option<Measurement>,
    /// K clients at once.
    pub aggregate: Option<Aggregate>,
    /// aggregate / single (target >= 0.8).
    pub aggregate_ratio: Option<f64>,
    pub flood: Option<FloodResult>,
    pub rekey: Option<RekeyResult>,
}

/// One line of results.csv.
#[derive(Debug, Default, Serialize)]
struct KeyValue {
    key: String,
    value: String,
}

impl Report {
    /// The figures as `key,value` lines.
    pub fn csv(&self) -> Result<String, CsvError> {
        let mut rows = Vec::new();
        let mut put = |k: &str, v: String| {
            rows.push(KeyValue {
                key: k.to_string(),
                value: v,
            });
        };
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        put("mode", self.mode.clone());
        put("clients", self.clients.to_string());
        put("paths_per_client", self.paths_per_client.to_string());
        put("senders", self.senders.to_string());
        put("duration_s", format!("{}", self.duration_s));
        put("complete", self.complete.to_string());
        put("all_up", self.all_up.to_string());
        put("up_count", self.up_count.to_string());
        put("up_s", opt(self.up_s));
        for (tag, m) in [("idle", self.server_idle), ("end", self.server_end)] {
            if let Some(m) = m {
                put(&format!("server_threads_{tag}"), m.threads.to_string());
                put(&format!("server_rss_kib_{tag}"), m.rss_kib.to_string());
                put(&format!("server_hwm_kib_{tag}"), m.hwm_kib.to_string());
                put(&format!("server_fds_{tag}"), m.fds.to_string());
            }
        }
        put("single_mbps", opt(self.single.as_ref().map(|m| m.mbps)));
        put(
            "aggregate_mbps",
            opt(self.aggregate.as_ref().map(|a| a.mbps)),
        );
        put("aggregate_ratio", opt(self.aggregate_ratio));
        if let Some(f) = &self.flood {
            put("flood_mbps", format!("{:.3}", f.senders.mbps));
            put("flood_drop_pct", format!("{:.3}", f.drop_pct));
            put(
                "flood_control_drop_pct",
                format!("{:.3}", f.control_drop_pct),
            );
            put("flood_server_drop_pct", format!("{:.3}", f.server_drop_pct));
            put("flood_paced_drop_pct", format!("{:.3}", f.paced_drop_pct));
            put(
                "flood_paced_mbps_per_sender",
                f.paced_mbps_per_sender.to_string(),
            );
            put(
                "flood_udp_rcvbuf_errors",
                f.udp_rcvbuf_errors.map_or(String::new(), |n| n.to_string()),
            );
            put("flood_datagrams_per_s", format!("{:.0}", f.per_second));
            put(
                "flood_cpu_pct",
                f.flood_cpu_pct.map_or(String::new(), |p| format!("{p:.1}")),
            );
            put("flood_rss_kib_before", f.server_before.rss_kib.to_string());
            put("flood_rss_kib_after", f.server_after.rss_kib.to_string());
            put(
                "flood_alone_rss_kib_before",
                f.alone_before.rss_kib.to_string(),
            );
            put(
                "flood_alone_rss_kib_after",
                f.alone_after.rss_kib.to_string(),
            );
            put(
                "flood_alone_per_second",
                format!("{:.0}", f.alone_per_second),
            );
            put(
                "flood_alone_server_cpu_pct",
                f.alone_server_cpu_pct
                    .map_or(String::new(), |p| format!("{p:.1}")),
            );
            put("flood_up_after", f.up_after.to_string());
        }
        if let Some(r) = &self.rekey {
            put("rekey_after_s", r.rekey_after_s.to_string());
            put("rekeys", r.rekeys.to_string());
            put("rekey_paced_mbps", r.paced_mbps.to_string());
            put("rekey_mbps", format!("{:.3}", r.with_rekeys.mbps));
            put(
                "rekey_retransmits",
                r.with_rekeys.retransmits.unwrap_or(0).to_string(),
            );
            put(
                "norekey_retransmits",
                r.without_rekeys.retransmits.unwrap_or(0).to_string(),
            );
        }
        csv_rows::to_string(&rows)
    }

    /// A short text summary for stdout.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "mpt bench clients ({} mode): {} clients x {} paths, {} senders, {} s per measurement",
            self.mode, self.clients, self.paths_per_client, self.senders, self.duration_s
        );
        let _ = writeln!(
            s,
            "  all up:            {} ({} of {}{})",
            if self.all_up { "yes" } else { "NO" },
            self.up_count,
            self.clients,
            self.up_s
                .map_or(String::new(), |t| format!(", after {t:.1} s"))
        );
        for (tag, m) in [("idle", self.server_idle), ("end", self.server_end)] {
            if let Some(m) = m {
                let _ = writeln!(
                    s,
                    "  server ({tag:<4}):   {} threads, RSS {:.1} MiB, peak {:.1} MiB, {} fds",
                    m.threads,
                    m.rss_kib as f64 / 1024.0,
                    m.hwm_kib as f64 / 1024.0,
                    m.fds
                );
            }
        }
        if let Some(m) = &self.single {
            let _ = writeln!(s, "  one client:        {:.1} Mbit/s TCP", m.mbps);
        }
        if let Some(a) = &self.aggregate {
            let _ = writeln!(
                s,
                "  {:<18} {:.1} Mbit/s TCP in all (ratio to one client {})",
                format!("{} at once:", a.clients.len()),
                a.mbps,
                self.aggregate_ratio
                    .map_or("-".to_string(), |r| format!("{r:.2}, target >= 0.8"))
            );
        }
        if let Some(f) = &self.flood {
            let list = |v: &[f64]| {
                v.iter()
                    .map(|x| format!("{x:.0}"))
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            let verdict = |d: f64| if d < 20.0 { "PASS" } else { "FAIL" };
            let _ = writeln!(
                s,
                "  under flood:       {:.0} forged initiations/s (the flooding thread used {} of a core); \
                 medians of {} rounds, Mbit/s in all:",
                f.per_second,
                f.flood_cpu_pct
                    .map_or("-".to_string(), |p| format!("{p:.0} %")),
                f.rounds
            );
            let _ = writeln!(
                s,
                "    quiet {} | flooded {} | flood at a closed port {}",
                list(&f.quiet_mbps),
                list(&f.flooded_mbps),
                list(&f.control_mbps)
            );
            let _ = writeln!(
                s,
                "    flooded vs quiet {:.1} % less (flood at a closed port vs quiet: {:.1} %: the testbed's share)",
                f.drop_pct, f.control_drop_pct
            );
            let _ = writeln!(
                s,
                "    flooded vs flood at a closed port {:.1} % less (the server's handling; target < 20 %): {}",
                f.server_drop_pct,
                verdict(f.server_drop_pct)
            );
            let _ = writeln!(
                s,
                "    paced at {} Mbit/s each: quiet {} | flooded {}: {:.1} % less (target < 20 %): {}",
                f.paced_mbps_per_sender,
                list(&f.paced_quiet_mbps),
                list(&f.paced_flooded_mbps),
                f.paced_drop_pct,
                verdict(f.paced_drop_pct)
            );
            let _ = writeln!(
                s,
                "    server RSS {:.1} -> {:.1} MiB, {} up after, {} datagrams dropped on full socket queues",
                f.server_before.rss_kib as f64 / 1024.0,
                f.server_after.rss_kib as f64 / 1024.0,
                f.up_after,
                f.udp_rcvbuf_errors
                    .map_or("-".to_string(), |n| n.to_string())
            );
            let _ = writeln!(
                s,
                "  flood alone:       {:.0} forged initiations/s, no traffic: server RSS {:.1} -> {:.1} MiB, server CPU {}",
                f.alone_per_second,
                f.alone_before.rss_kib as f64 / 1024.0,
                f.alone_after.rss_kib as f64 / 1024.0,
                f.alone_server_cpu_pct
                    .map_or("-".to_string(), |p| format!("{p:.1} % of a core")),
            );
        }
        if let Some(r) = &self.rekey {
            let _ = writeln!(
                s,
                "  rekeys:            {} in {} s (every {} s, paced at {} Mbit/s): {:.1} Mbit/s, {} retransmits; client 0 without: {:.1} Mbit/s, {} retransmits",
                r.rekeys,
                self.duration_s,
                r.rekey_after_s,
                r.paced_mbps,
                r.with_rekeys.mbps,
                r.with_rekeys.retransmits.unwrap_or(0),
                r.without_rekeys.mbps,
                r.without_rekeys.retransmits.unwrap_or(0)
            );
        }
        s
    }

    pub(crate) fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self).context("serializing results")?;
        for (name, text) in [
            ("results.json", json + "\n"),
            ("results.csv", self.csv().context("writing results.csv")?),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_fields() {
        let text = "Name:\tmptd\nVmHWM:\t   12345 kB\nVmRSS:\t   10000 kB\nThreads:\t7\n";
        let m = parse_proc_status(text).unwrap();
        assert_eq!((m.threads, m.rss_kib, m.hwm_kib), (7, 10000, 12345));
        assert!(parse_proc_status("Name: x\n").is_none());
        let me = proc_mem(std::process::id()).expect("own status");
        assert!(me.threads >= 1 && me.rss_kib > 0);
    }
}
