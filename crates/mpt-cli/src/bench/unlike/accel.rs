//! The accelerated variant of an `unlike` case (issue 36): one TCP stream
//! from end host C behind A to end host S behind B
//! ([`crate::bench::endhosts`]), which mptd A intercepts and carries over
//! its warm legs inside the tunnel, mptd B opening the real connection to
//! S. It runs after each tunnel run and its MPTCP run, on the same paths
//! and under the same load, `repeat` times; the median run is kept as for
//! the tunnel and MPTCP.
//!
//! That the flow was split, not just forwarded, is checked: mptd A's
//! `accel.bytes_up` must grow by at least [`MIN_SPLIT_SHARE`] of what
//! iperf3 carried, else the run is flagged and its ratios left out.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::baseline::MptcpBaseline;
use super::def::UnlikeParams;
use crate::bench::endhosts::S_ADDR;
use crate::bench::iperf::{self, Measurement};
use crate::bench::scenario::expanded::Scenario;
use crate::bench::stats::median_run;
use crate::bench::testbed::{self, Testbed};

/// A run counts as accelerated when mptd A's legs carried at least this
/// share of the bytes iperf3 counted (the ramp-up left out by `-O` makes
/// the legs' figure the larger one).
pub const MIN_SPLIT_SHARE: f64 = 0.9;

/// One accelerated run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AccelRun {
    pub m: Measurement,
    /// mptd A's `accel.bytes_up` over the run.
    pub split_bytes: u64,
    /// mptd A's `accel.flows` over the run (iperf3's control and data
    /// connections: 2).
    pub split_flows: u64,
    /// Did the legs carry the stream ([`MIN_SPLIT_SHARE`])?
    pub split: bool,
    /// mptd A's pinned legs' data bytes over the run, by path id (the
    /// case's path order; empty with single legs or an older mptd).
    pub split_by_path: Vec<u64>,
}

impl AccelRun {
    /// "geo 48 MB, dsl 21 MB": where the leg set put the stream.
    pub fn by_path_label(&self, names: &[String]) -> String {
        self.split_by_path
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let name = names
                    .get(i)
                    .map_or_else(|| format!("path {i}"), Clone::clone);
                format!("{name} {} MB", b / 1_000_000)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The accelerated variant in one case and congestion control
/// (results.json `rows[].unlike.runs[].accel`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AccelResult {
    /// The run with the median goodput (lower middle for an even count).
    pub kept: AccelRun,
    /// Which run `kept` is, 1-based.
    pub run: usize,
    /// Goodput of every run in the order run, Mbit/s.
    pub runs_mbps: Vec<f64>,
    /// Was every run split at A?
    pub all_split: bool,
    /// Kept accelerated run / kept MPTCP run (when MPTCP used every path).
    pub over_mptcp: Option<f64>,
    /// Kept accelerated run / the sum of the raw paths.
    pub over_sum: Option<f64>,
    /// Kept accelerated run / kept plain tunnel run.
    pub over_tunnel: Option<f64>,
    /// `accel_legs` of the gateways ("pinned" or "direct"; "" in results
    /// written before it was recorded: pinned).
    pub legs: String,
}

impl AccelResult {
    /// Keeps the median of `runs` and relates it to the MPTCP baseline,
    /// the raw paths' sum and the plain tunnel. A kept run that was not
    /// split gets no ratios.
    pub fn from_runs(
        runs: Vec<AccelRun>,
        mptcp: Option<&MptcpBaseline>,
        sum_raw_mbps: f64,
        tunnel_mbps: f64,
    ) -> Option<AccelResult> {
        let mbps: Vec<f64> = runs.iter().map(|r| r.m.mbps).collect();
        let k = median_run(&mbps)?;
        let all_split = runs.iter().all(|r| r.split);
        let kept = runs.into_iter().nth(k)?;
        let a = kept.m.mbps;
        let ok = kept.split;
        let div = |d: f64| (ok && d > 0.0).then(|| a / d);
        let over_mptcp = mptcp
            .filter(|b| b.kept.paths.all_paths_used)
            .and_then(|b| div(b.kept.m.mbps));
        Some(AccelResult {
            over_mptcp,
            over_sum: div(sum_raw_mbps),
            over_tunnel: div(tunnel_mbps),
            kept,
            run: k + 1,
            runs_mbps: mbps,
            all_split,
            legs: String::new(),
        })
    }
}

/// mptd A's acceleration counters at one moment (zero when it does not
/// say).
#[derive(Default)]
struct SplitCounters {
    bytes_up: u64,
    flows: u64,
    /// Pinned legs' bytes, indexed by path id.
    by_path: Vec<u64>,
}

impl SplitCounters {
    fn read(control: &Path) -> SplitCounters {
        let Some(a) = testbed::mptd_status(control).ok().and_then(|st| st.accel) else {
            return SplitCounters::default();
        };
        let mut by_path = Vec::new();
        for p in &a.path_bytes {
            let i = usize::from(p.path);
            if by_path.len() <= i {
                by_path.resize(i + 1, 0);
            }
            by_path[i] = p.bytes;
        }
        SplitCounters {
            bytes_up: a.bytes_up,
            flows: a.flows,
            by_path,
        }
    }

    /// What grew from `before` to `self`, per path.
    fn by_path_since(&self, before: &SplitCounters) -> Vec<u64> {
        self.by_path
            .iter()
            .enumerate()
            .map(|(i, b)| b.saturating_sub(before.by_path.get(i).copied().unwrap_or(0)))
            .collect()
    }
}

/// One TCP stream C -> S with `cc` at both end hosts, split at A.
pub fn measure(
    tb: &Testbed,
    json: &Path,
    cc: &str,
    s: &Scenario,
    p: &UnlikeParams,
    stop: &AtomicBool,
) -> anyhow::Result<AccelRun> {
    let hosts = tb
        .hosts
        .as_ref()
        .context("the testbed has no end hosts for the accelerated variant")?;
    let before = SplitCounters::read(&tb.control_a);
    let m = iperf::run(
        &iperf::Run {
            ns: hosts.c.name(),
            server_ns: hosts.s.name(),
            target: S_ADDR,
            duration: s.duration,
            udp: None,
            json_out: json,
            cc: Some(cc),
            omit: p.omit,
            streams: 1,
            mptcp: false,
        },
        stop,
    )?;
    let after = SplitCounters::read(&tb.control_a);
    let split_bytes = after.bytes_up.saturating_sub(before.bytes_up);
    let counted = m.mbps * 1e6 / 8.0 * m.seconds;
    Ok(AccelRun {
        split: split_bytes as f64 >= MIN_SPLIT_SHARE * counted && split_bytes > 0,
        split_bytes,
        split_flows: after.flows.saturating_sub(before.flows),
        split_by_path: after.by_path_since(&before),
        m,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::mptcp::PathUse;
    use crate::bench::unlike::baseline::MptcpRun;

    fn run(mbps: f64, split: bool) -> AccelRun {
        AccelRun {
            m: Measurement {
                mbps,
                ..Measurement::default()
            },
            split,
            ..AccelRun::default()
        }
    }

    #[test]
    fn bytes_by_path_are_what_grew_during_the_run_and_named() {
        let before = SplitCounters {
            by_path: vec![5_000_000, 1_000_000],
            ..SplitCounters::default()
        };
        let after = SplitCounters {
            by_path: vec![53_000_000, 22_500_000, 7_000_000],
            ..SplitCounters::default()
        };
        let r = AccelRun {
            split_by_path: after.by_path_since(&before),
            ..AccelRun::default()
        };
        assert_eq!(r.split_by_path, [48_000_000, 21_500_000, 7_000_000]);
        let names = ["geo".to_string(), "dsl".to_string()];
        assert_eq!(r.by_path_label(&names), "geo 48 MB, dsl 21 MB, path 2 7 MB");
    }

    #[test]
    fn keeps_the_median_and_relates_it() {
        let mptcp = MptcpBaseline::from_runs(
            vec![MptcpRun {
                m: Measurement {
                    mbps: 20.0,
                    ..Measurement::default()
                },
                paths: PathUse::between(&[0, 0], &[6, 4]),
            }],
            10.0,
            25.0,
        );
        let r = AccelResult::from_runs(
            vec![run(30.0, true), run(10.0, true), run(25.0, true)],
            mptcp.as_ref(),
            25.0,
            12.5,
        )
        .expect("runs");
        assert_eq!((r.run, r.kept.m.mbps), (3, 25.0));
        assert_eq!(r.over_mptcp, Some(1.25));
        assert_eq!(r.over_sum, Some(1.0));
        assert_eq!(r.over_tunnel, Some(2.0));
        assert!(r.all_split);
        // Not split: no ratios.
        let r = AccelResult::from_runs(vec![run(30.0, false)], None, 25.0, 12.5).expect("run");
        assert_eq!(
            (r.over_mptcp, r.over_sum, r.over_tunnel),
            (None, None, None)
        );
        assert!(!r.all_split);
        assert!(AccelResult::from_runs(Vec::new(), None, 1.0, 1.0).is_none());
    }

    #[test]
    fn old_results_without_accel_still_load() {
        let run: super::super::result::CcRun =
            serde_json::from_str(r#"{"cc":"cubic","tunnel":{"mbps":5.0}}"#).expect("old run");
        assert!(run.accel.is_none());
    }
}
