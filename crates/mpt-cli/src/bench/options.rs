//! What `mpt bench` runs and where: the scenario, the output directory and
//! the mptd binary (and dtnd's, for dtn-relay).

use std::path::PathBuf;

use super::scenario::expanded::Scenario;

/// What to run and where.
pub struct Options {
    pub scenario: Scenario,
    pub out: PathBuf,
    pub mptd: PathBuf,
    /// `--dtnd`: the BPv7 agent for dtn-relay (default: found or installed).
    pub dtnd: Option<PathBuf>,
}
