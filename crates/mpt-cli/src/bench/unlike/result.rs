//! What one `unlike` case measured (results.json `rows[].unlike`): per
//! congestion control the raw paths, the tunnel runs and the verdict.

use serde::{Deserialize, Serialize};

use super::accel::AccelResult;
use super::baseline::MptcpBaseline;
use super::def::{PathInfo, Target};
use super::objects::ObjectsResult;
use super::verdict::Verdict;
use crate::bench::hold::HoldCheck;
use crate::bench::iperf::Measurement;

/// One congestion control's measurements in one case.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CcRun {
    pub cc: String,
    /// Raw TCP over each path alone, in path order.
    pub raw: Vec<Measurement>,
    /// The tunnel run with the median goodput (for an even number of runs
    /// the lower middle): the one judged.
    pub tunnel: Measurement,
    /// Which run `tunnel` is, 1-based (0: no run recorded).
    pub tunnel_run: usize,
    /// Goodput of every tunnel run in the order run, Mbit/s.
    pub tunnel_runs_mbps: Vec<f64>,
    pub verdict: Verdict,
    /// CPU use of mptd A and B during the kept tunnel run, % of a core.
    pub cpu_a_pct: Option<f64>,
    pub cpu_b_pct: Option<f64>,
    /// Resequencing delay at mptd B over the kept run's measured window.
    pub hold: Option<HoldCheck>,
    /// Kernel MPTCP over the same paths (`--baseline mptcp`).
    pub mptcp: Option<MptcpBaseline>,
    /// TCP acceleration: end host C -> S split at A (`--accel`).
    pub accel: Option<AccelResult>,
}

impl CcRun {
    /// Lowest and highest goodput over the tunnel runs, if more than one.
    pub fn tunnel_range(&self) -> Option<(f64, f64)> {
        if self.tunnel_runs_mbps.len() < 2 {
            return None;
        }
        let lo = self
            .tunnel_runs_mbps
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let hi = self
            .tunnel_runs_mbps
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        Some((lo, hi))
    }
}

/// Results of one `unlike` case.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UnlikeResult {
    pub case: String,
    pub paths: Vec<PathInfo>,
    pub target: Option<Target>,
    pub omit_s: f64,
    pub runs: Vec<CcRun>,
    /// 1 MB objects fetched one after another (`objects = true` cases).
    pub objects: Option<ObjectsResult>,
}
