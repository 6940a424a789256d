//! The kernel MPTCP baseline of an `unlike` case: iperf3 under `mptcpize
//! run` between the paths' outer addresses of the same testbed (the tunnel
//! idle), one run after each tunnel run so both see the same load, the
//! median run kept as the tunnel's is. See [`crate::bench::mptcp`] for the
//! path manager setup and the per-path byte check.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::bench::iperf::{self, Measurement};
use crate::bench::mptcp::{self, PathUse};
use crate::bench::scenario::expanded::Scenario;
use crate::bench::stats::median_run;
use crate::bench::testbed::Testbed;

use super::def::UnlikeParams;

/// One MPTCP run: goodput and how the bytes spread over the paths.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MptcpRun {
    pub m: Measurement,
    pub paths: PathUse,
}

/// Kernel MPTCP in one case and congestion control (results.json
/// `rows[].unlike.runs[].mptcp`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MptcpBaseline {
    /// The run with the median goodput (lower middle for an even count).
    pub kept: MptcpRun,
    /// Which run `kept` is, 1-based.
    pub run: usize,
    /// Goodput of every run in the order run, Mbit/s.
    pub runs_mbps: Vec<f64>,
    /// Did every run use every path ([`mptcp::MIN_SHARE`] of the bytes)?
    pub all_runs_used_all_paths: bool,
    /// The kept tunnel run / the kept MPTCP run; `None` if the kept MPTCP
    /// run left a path idle (flagged: not a multipath baseline) or carried
    /// nothing.
    pub mpt_over_mptcp: Option<f64>,
    /// MPTCP / the sum of the raw paths.
    pub frac_sum: Option<f64>,
}

impl MptcpBaseline {
    /// Keeps the median of `runs` and relates it to the tunnel's kept
    /// goodput and the raw paths' sum.
    pub fn from_runs(runs: Vec<MptcpRun>, tunnel_mbps: f64, sum_raw_mbps: f64) -> Option<Self> {
        let mbps: Vec<f64> = runs.iter().map(|r| r.m.mbps).collect();
        let k = median_run(&mbps)?;
        let all = runs.iter().all(|r| r.paths.all_paths_used);
        let kept = runs.into_iter().nth(k)?;
        Some(MptcpBaseline {
            mpt_over_mptcp: mptcp::ratio(tunnel_mbps, kept.m.mbps, &kept.paths),
            frac_sum: (sum_raw_mbps > 0.0).then(|| kept.m.mbps / sum_raw_mbps),
            kept,
            run: k + 1,
            runs_mbps: mbps,
            all_runs_used_all_paths: all,
        })
    }

    /// "wifi 61 % + lte 39 %", with "ONE PATH" when the kept run left a
    /// path idle.
    pub fn use_label(&self, names: &[String]) -> String {
        let l = self.kept.paths.label(names);
        if self.kept.paths.all_paths_used {
            l
        } else {
            format!("{l} ONE PATH")
        }
    }
}

/// One MPTCP iperf3 run from A to B's address on path 0, with B's per-path
/// receive counters read around it.
pub fn measure(
    tb: &Testbed,
    n_paths: usize,
    json: &Path,
    cc: &str,
    s: &Scenario,
    p: &UnlikeParams,
    stop: &AtomicBool,
) -> anyhow::Result<MptcpRun> {
    let before = mptcp::rx_bytes(tb.b.name(), n_paths)?;
    let target = tb.plan.outer(0, 2);
    let m = iperf::run(
        &iperf::Run {
            ns: tb.a.name(),
            server_ns: tb.b.name(),
            target: &target,
            duration: s.duration,
            udp: None,
            json_out: json,
            cc: Some(cc),
            omit: p.omit,
            streams: 1,
            mptcp: true,
        },
        stop,
    )?;
    let after = mptcp::rx_bytes(tb.b.name(), n_paths).context("reading path counters")?;
    Ok(MptcpRun {
        m,
        paths: PathUse::between(&before, &after),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mbps: f64, bytes: [u64; 2]) -> MptcpRun {
        MptcpRun {
            m: Measurement {
                mbps,
                ..Measurement::default()
            },
            paths: PathUse::between(&[0, 0], &bytes),
        }
    }

    #[test]
    fn keeps_the_median_run_and_flags_one_path() {
        let b = MptcpBaseline::from_runs(
            vec![run(60.0, [6, 4]), run(40.0, [6, 4]), run(50.0, [5, 5])],
            45.0,
            100.0,
        );
        let b = b.expect("three runs");
        assert_eq!((b.run, b.kept.m.mbps), (3, 50.0));
        assert_eq!(b.mpt_over_mptcp, Some(0.9));
        assert_eq!(b.frac_sum, Some(0.5));
        assert!(b.all_runs_used_all_paths);
        let names = ["a".to_string(), "b".to_string()];
        assert_eq!(b.use_label(&names), "a 50 % + b 50 %");
        // The kept run used one path: no ratio, flagged.
        let b = MptcpBaseline::from_runs(vec![run(30.0, [1000, 0])], 45.0, 0.0);
        let b = b.expect("one run");
        assert_eq!((b.mpt_over_mptcp, b.frac_sum), (None, None));
        assert!(!b.all_runs_used_all_paths);
        assert_eq!(b.use_label(&names), "a 100 % + b 0 % ONE PATH");
        assert!(MptcpBaseline::from_runs(Vec::new(), 1.0, 1.0).is_none());
    }
}
