//! A scenario expanded and ready to run: its cases and, for the scenario
//! families, their resolved settings.

use std::time::Duration;

use super::case::{Case, TestKind};
use crate::bench::dtn::def::DtnParams;
use crate::bench::lte::def::LteParams;
use crate::bench::unlike::def::UnlikeParams;

/// A scenario ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub duration: Duration,
    /// Left out at the start of each iperf3 measurement (`iperf3 -O`).
    pub omit: Duration,
    pub tests: Vec<TestKind>,
    pub udp_overload: f64,
    /// Parallel TCP streams in the raw-tcp and tcp tests.
    pub streams: u32,
    pub cases: Vec<Case>,
    /// Set for `lte-gateway`-style scenarios (VoIP + bulk + handover).
    pub lte: Option<LteParams>,
    /// Set for `dtn-relay`-style scenarios (bundles through a relay).
    pub dtn: Option<DtnParams>,
    /// Set for `unlike`-style scenarios; its cases match `cases` one to one.
    pub unlike: Option<UnlikeParams>,
    /// Where it came from (a file path or `preset NAME`) and the SHA-256
    /// of its TOML text (set by [`super::load`]; empty otherwise).
    pub source: String,
    pub source_sha256: String,
    /// The command-line overrides it was loaded with, as flags.
    pub overrides: String,
}
