//! Command-line overrides of a scenario (`--paths`, `--duration`,
//! `--combos`, `--quick`, `--scheduler`).

use super::case::Combo;

/// Command-line overrides of a scenario.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub paths: Option<Vec<usize>>,
    pub duration: Option<f64>,
    pub combos: Option<Vec<Combo>>,
    pub quick: bool,
    /// mptd's `scheduler` in every case (`adaptive` or `weighted`).
    pub scheduler: Option<String>,
}
