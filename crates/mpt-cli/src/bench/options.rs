//! What `mpt bench` runs and where: the scenario, the output directory and
//! the mptd binary.

use std::path::PathBuf;

use super::scenario::expanded::Scenario;

/// What to run and where.
pub struct Options {
    pub scenario: Scenario,
    pub out: PathBuf,
    pub mptd: PathBuf,
}
