//! What `mpt bench` runs and where: the scenario, the output directory, the
//! mptd binary (and dtnd's, for dtn-relay) and whether kernel MPTCP runs as
//! a baseline.

use std::path::PathBuf;

use super::scenario::expanded::Scenario;

/// What to run and where.
pub struct Options {
    pub scenario: Scenario,
    pub out: PathBuf,
    pub mptd: PathBuf,
    /// Measure kernel MPTCP beside the tunnel where the suite supports it
    /// (`unlike`; `handover`'s bulk streams across a silent WiFi), resolved
    /// from `--baseline` by [`super::mptcp::resolve`].
    pub mptcp: bool,
    /// Measure TCP acceleration (end hosts behind the gateways, flows split
    /// at A) beside the tunnel where the suite supports it (`unlike`,
    /// `satellite`), resolved from `--accel`.
    pub accel: bool,
    /// `--accel-legs`: the accelerated variant's `accel_legs`.
    pub accel_legs: String,
    /// `--dtnd`: the BPv7 agent for dtn-relay (default: found or installed).
    pub dtnd: Option<PathBuf>,
}
