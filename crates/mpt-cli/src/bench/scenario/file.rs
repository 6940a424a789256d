//! A scenario file as written (TOML): the generic sweep's keys and the
//! tables of the scenario families (`[lte]`, `[dtn]`, `[unlike]`).

use serde::Deserialize;

use super::case::TestKind;
use super::link::LinkDef;
use crate::bench::dtn::def::DtnDef;
use crate::bench::lte::def::LteDef;
use crate::bench::unlike::def::UnlikeDef;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickDef {
    pub paths: Option<Vec<usize>>,
    pub duration: Option<f64>,
    pub rtt: Option<Vec<String>>,
    pub loss: Option<Vec<f64>>,
    pub extra: Option<Vec<bool>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub description: Option<String>,
    #[serde(default = "default_paths")]
    pub paths: Vec<usize>,
    #[serde(default = "default_duration")]
    pub duration: f64,
    /// Seconds left out at the start of each iperf3 measurement (`iperf3
    /// -O`, whole seconds): slow start and the tunnel's first rate
    /// estimates, so the figure is the steady rate. Raw baselines and the
    /// tunnel alike. `unlike` sets its own in `[unlike]`.
    #[serde(default)]
    pub omit: f64,
    #[serde(default = "default_combos")]
    pub combos: Vec<String>,
    /// Not used by `unlike` (raw TCP per path, then TCP through the tunnel).
    #[serde(default)]
    pub tests: Vec<TestKind>,
    #[serde(default = "default_overload")]
    pub udp_overload: f64,
    /// Parallel TCP streams in the raw-tcp and tcp tests (`iperf3 -P`).
    #[serde(default = "default_streams")]
    pub streams: u32,
    /// Round-trip times to sweep on the emulated links (delay = RTT / 2).
    #[serde(default)]
    pub rtt: Vec<String>,
    /// Packet error rates to sweep on the emulated links.
    #[serde(default)]
    pub loss: Vec<f64>,
    /// Without (false) and/or with (true) `extra_link`.
    #[serde(default)]
    pub extra: Vec<bool>,
    /// The swept link; every scenario but `unlike` (whose cases list their
    /// own links) needs it.
    pub link: Option<LinkDef>,
    pub extra_link: Option<LinkDef>,
    #[serde(default)]
    pub quick: QuickDef,
    /// `lte-gateway`: VoIP beside bulk TCP, WiFi handover (see [`crate::bench::lte`]).
    pub lte: Option<LteDef>,
    /// `dtn-relay`: bundles over two hops through a relay (see [`crate::bench::dtn`]).
    pub dtn: Option<DtnDef>,
    /// `unlike`: named cases of heterogeneous paths (see [`crate::bench::unlike`]).
    pub unlike: Option<UnlikeDef>,
}

fn default_paths() -> Vec<usize> {
    vec![1]
}
fn default_duration() -> f64 {
    10.0
}
fn default_combos() -> Vec<String> {
    vec!["4in4".into()]
}
fn default_overload() -> f64 {
    1.05
}
fn default_streams() -> u32 {
    1
}
