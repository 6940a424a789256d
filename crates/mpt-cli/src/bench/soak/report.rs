//! What `mpt bench soak` writes: results.json (every fault with its
//! recovery time, the concentrator's samples and trends, the data
//! checks, the verdict), the summary printed at the end, and two charts
//! drawn with the bench's chart module: the fault timeline with each
//! recovery time (plot.svg) and the concentrator's RSS and fds over time
//! (resources.svg).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use super::plan::FaultKind;
use super::verdict::{median, Limits, Sample, Streak, Trend};
use crate::bench::chart::line::{Chart, Series};

/// One fault as it ran.
#[derive(Debug, Clone, Serialize)]
pub struct FaultResult {
    pub n: usize,
    pub kind: FaultKind,
    pub client: Option<String>,
    /// Start and end since the run's start, s.
    pub at_s: f64,
    pub end_s: f64,
    /// From the end until every client was up and answered (`None`: not
    /// within twice the limit).
    pub recovery_s: Option<f64>,
    /// Clients not back at the deadline.
    pub missing: Vec<String>,
    /// The client back last among those that made it (the one to read
    /// the logs of when a fault is slow).
    pub slowest: Option<Slowest>,
    /// Clients whose first recovery probe failed.
    pub probe_retried: usize,
    /// Flood: datagrams per second sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood_pps: Option<f64>,
}

/// The client that came back last after a fault.
#[derive(Debug, Clone, Serialize)]
pub struct Slowest {
    pub client: String,
    /// Since the fault's end: when it was back (first seen up if its
    /// first probe verified, else when a probe did), s.
    pub back_s: f64,
    /// ... when the concentrator's status first showed it up, s.
    pub up_s: f64,
    /// ... when its probe verified, s.
    pub probed_s: Option<f64>,
    /// Probes through its tunnel that failed before one verified.
    pub failed_probes: u32,
    /// The last failure, in words (which step timed out).
    pub last_error: Option<String>,
}

impl Slowest {
    /// One line for the progress output and the summary.
    pub fn line(&self) -> String {
        format!(
            "slowest {} back after {:.2} s (status up {:.2} s, probe {}{})",
            self.client,
            self.back_s,
            self.up_s,
            self.probed_s
                .map_or("-".to_string(), |p| format!("{p:.2} s")),
            match (&self.last_error, self.failed_probes) {
                (Some(e), n) if n > 0 => format!(" after {n} failed: {e}"),
                _ => String::new(),
            }
        )
    }
}

/// Recovery times of one kind of fault (or all).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryStats {
    pub faults: usize,
    pub recovered: usize,
    pub median_s: Option<f64>,
    pub max_s: Option<f64>,
}

impl RecoveryStats {
    pub fn of<'a>(faults: impl Iterator<Item = &'a FaultResult>) -> RecoveryStats {
        let mut n = 0;
        let mut times = Vec::new();
        for f in faults {
            n += 1;
            times.extend(f.recovery_s);
        }
        RecoveryStats {
            faults: n,
            recovered: times.len(),
            median_s: median(&times),
            max_s: times.iter().copied().reduce(f64::max),
        }
    }
}

/// Background transfers, byte-exact.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Traffic {
    pub senders: Vec<String>,
    pub transfer_bytes: usize,
    pub verified: u64,
    pub mismatches: u64,
    /// Cut by a fault (expected during one).
    pub failed: u64,
    pub mib_verified: f64,
    /// Recovery probes that came back altered.
    pub probe_mismatches: u64,
}

/// The whole result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub scenario: String,
    pub clients: usize,
    pub paths_per_client: usize,
    pub duration_s: f64,
    pub hold_s: f64,
    pub gap_s: f64,
    pub rekey_after_s: u64,
    pub nofile: Option<u64>,
    pub limits: Option<Limits>,
    pub started_unix: u64,
    pub cores: usize,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
    /// Seconds until every client was first up.
    pub up_s: Option<f64>,
    pub faults: Vec<FaultResult>,
    pub recovery: RecoveryStats,
    pub recovery_by_kind: BTreeMap<&'static str, RecoveryStats>,
    /// RSS per server process after 10 s (reported).
    pub rss_mib: Vec<Trend>,
    /// RSS per server process after 60 s (judged where watched 120 s).
    pub rss_mib_judged: Vec<Trend>,
    pub fds: Vec<Trend>,
    pub fds_max: Option<u64>,
    pub unknown_session_streak: Option<Streak>,
    pub traffic: Traffic,
    /// Daemons that exited on their own.
    pub exits: Vec<String>,
    /// Rekeys the clients made (sum over the clients' status at the end).
    pub rekeys: u64,
    pub samples: Vec<Sample>,
    pub failures: Vec<String>,
    pub pass: bool,
    pub complete: bool,
    pub wall_s: f64,
}

impl Report {
    /// Writes results.json, plot.svg and resources.svg into `out`.
    pub fn write(&self, out: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let json = serde_json::to_string_pretty(self).context("serializing the results")?;
        let files = [
            ("results.json", json + "\n"),
            ("plot.svg", self.timeline_chart().render()),
            ("resources.svg", self.resources_chart().render()),
        ];
        for (name, text) in files {
            let p = out.join(name);
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }

    /// Faults shaded over time, each fault's recovery time a dot at its end.
    pub fn timeline_chart(&self) -> Chart {
        let mut c = Chart {
            title: format!(
                "mpt bench soak: {} clients, recovery after each fault",
                self.clients
            ),
            xlabel: "time since start (s)".into(),
            ylabel: "recovery time (s)".into(),
            ..Chart::default()
        };
        let mut by_kind: BTreeMap<&'static str, Vec<(f64, f64)>> = BTreeMap::new();
        for f in &self.faults {
            by_kind
                .entry(f.kind.name())
                .or_default()
                .push((f.end_s, f.recovery_s.unwrap_or(0.0)));
            let end = if f.end_s - f.at_s < 0.5 {
                f.at_s + 0.5
            } else {
                f.end_s
            };
            c.shade.push((f.at_s, end, f.kind.name().to_string()));
        }
        for (kind, points) in by_kind {
            c.series.push(Series {
                label: kind.to_string(),
                points,
                dots: true,
                ..Series::default()
            });
        }
        if let Some(l) = &self.limits {
            let end = self.samples.last().map_or(self.duration_s, |s| s.t);
            c.series.push(Series {
                label: "limit".into(),
                points: vec![(0.0, l.recover_within_s), (end, l.recover_within_s)],
                dashed: true,
                color: Some("#888888"),
                ..Series::default()
            });
        }
        c
    }

    /// The concentrator's RSS (MiB) and open fds over time.
    pub fn resources_chart(&self) -> Chart {
        let pts = |f: &dyn Fn(&Sample) -> Option<f64>| {
            self.samples
                .iter()
                .filter_map(|s| Some((s.t, f(s)?)))
                .collect::<Vec<_>>()
        };
        Chart {
            title: "mpt bench soak: the concentrator's memory and descriptors".into(),
            xlabel: "time since start (s)".into(),
            ylabel: "RSS (MiB) / open fds".into(),
            series: vec![
                Series {
                    label: "RSS (MiB)".into(),
                    points: pts(&|s| s.rss_kib.map(|k| k as f64 / 1024.0)),
                    ..Series::default()
                },
                Series {
                    label: "open fds".into(),
                    points: pts(&|s| s.fds.map(|n| n as f64)),
                    ..Series::default()
                },
            ],
            shade: self
                .faults
                .iter()
                .filter(|f| f.kind == FaultKind::ServerRestart)
                .map(|f| (f.at_s, f.at_s + 0.5, "server restart".into()))
                .collect(),
            ..Chart::default()
        }
    }

    /// The summary printed at the end.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let _ = writeln!(
            s,
            "soak: {} clients x {} paths, {:.0} s, {} faults, rekey every {} s",
            self.clients,
            self.paths_per_client,
            self.duration_s,
            self.faults.len(),
            self.rekey_after_s
        );
        let _ = writeln!(
            s,
            "{:<16} {:>6} {:>9} {:>10} {:>8}",
            "fault", "count", "recovered", "median s", "max s"
        );
        for (kind, r) in &self.recovery_by_kind {
            let _ = writeln!(
                s,
                "{kind:<16} {:>6} {:>9} {:>10} {:>8}",
                r.faults,
                r.recovered,
                opt(r.median_s),
                opt(r.max_s)
            );
        }
        let r = &self.recovery;
        let _ = writeln!(
            s,
            "{:<16} {:>6} {:>9} {:>10} {:>8}",
            "all",
            r.faults,
            r.recovered,
            opt(r.median_s),
            opt(r.max_s)
        );
        for kind in self.recovery_by_kind.keys() {
            let worst = self
                .faults
                .iter()
                .filter(|f| f.kind.name() == *kind)
                .filter_map(|f| Some((f, f.slowest.as_ref()?)))
                .max_by(|a, b| a.1.back_s.total_cmp(&b.1.back_s));
            if let Some((f, w)) = worst {
                let _ = writeln!(s, "{kind}: fault {} {}", f.n, w.line());
            }
        }
        for t in &self.rss_mib {
            let _ = writeln!(
                s,
                "server process {}: RSS {:.1}..{:.1} MiB, slope {:+.2} MiB/min, growth {:+.1} MiB over {:.0} s",
                t.incarnation, t.min, t.max, t.slope_per_min, t.growth, t.span_s
            );
        }
        for t in &self.rss_mib_judged {
            let _ = writeln!(
                s,
                "server process {} after 60 s: RSS {:.1}..{:.1} MiB, slope {:+.2} MiB/min, growth {:+.1} MiB over {:.0} s",
                t.incarnation, t.min, t.max, t.slope_per_min, t.growth, t.span_s
            );
        }
        for t in &self.fds {
            let _ = writeln!(
                s,
                "server process {}: fds {:.0}..{:.0}, slope {:+.2}/min",
                t.incarnation, t.min, t.max, t.slope_per_min
            );
        }
        let tr = &self.traffic;
        let _ = writeln!(
            s,
            "data: {} transfers verified ({:.0} MiB), {} altered, {} cut by faults; probes altered: {}",
            tr.verified, tr.mib_verified, tr.mismatches, tr.failed, tr.probe_mismatches
        );
        let _ = writeln!(
            s,
            "unknown_session: longest growth {}; rekeys {}; daemon exits {}",
            self.unknown_session_streak
                .map_or("none".to_string(), |st| format!(
                    "{:.1} s ({} datagrams)",
                    st.len_s, st.count
                )),
            self.rekeys,
            self.exits.len()
        );
        if self.pass {
            let _ = writeln!(s, "PASS");
        } else {
            let _ = writeln!(s, "FAIL:");
            for f in &self.failures {
                let _ = writeln!(s, "  - {f}");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(n: usize, kind: FaultKind, r: Option<f64>) -> FaultResult {
        FaultResult {
            n,
            kind,
            client: None,
            at_s: n as f64 * 10.0,
            end_s: n as f64 * 10.0 + 3.0,
            recovery_s: r,
            missing: vec![],
            slowest: None,
            probe_retried: 0,
            flood_pps: None,
        }
    }

    #[test]
    fn recovery_stats_and_charts() {
        let faults = vec![
            fault(0, FaultKind::PathSilent, Some(1.0)),
            fault(1, FaultKind::PathSilent, Some(3.0)),
            fault(2, FaultKind::ServerRestart, None),
        ];
        let r = RecoveryStats::of(faults.iter());
        assert_eq!((r.faults, r.recovered), (3, 2));
        assert_eq!(r.median_s, Some(3.0));
        assert_eq!(r.max_s, Some(3.0));
        let rep = Report {
            clients: 3,
            faults,
            samples: vec![Sample {
                t: 1.0,
                rss_kib: Some(2048),
                fds: Some(20),
                ..Sample::default()
            }],
            ..Report::default()
        };
        let svg = rep.timeline_chart().render();
        assert!(svg.contains("path_silent") && svg.contains("server_restart"));
        let svg = rep.resources_chart().render();
        assert!(svg.contains("open fds"));
        assert!(rep.summary().contains("FAIL"));
    }
}
