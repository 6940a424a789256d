//! Scenarios: TOML presets (conf/scenarios/) and files, expanded into the
//! list of testbed cases a run measures.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use mpt_emu::model::LinkConfig;
use mpt_emu::profile::{self, LinkSpec, Profile};
use mpt_emu::units;

/// Built-in scenarios, the same text as the files under conf/scenarios/.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "ethernet",
        include_str!("../../../../conf/scenarios/ethernet.toml"),
    ),
    (
        "satellite",
        include_str!("../../../../conf/scenarios/satellite.toml"),
    ),
    (
        "lte-gateway",
        include_str!("../../../../conf/scenarios/lte-gateway.toml"),
    ),
    (
        "handover",
        include_str!("../../../../conf/scenarios/handover.toml"),
    ),
    (
        "dtn-relay",
        include_str!("../../../../conf/scenarios/dtn-relay.toml"),
    ),
    (
        "unlike",
        include_str!("../../../../conf/scenarios/unlike.toml"),
    ),
];

/// Most paths a case may have (address plan 10.77.<i>.0/24, one veth pair
/// per path; the MPT article went to 32 at most).
pub const MAX_PATHS: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("unknown scenario {name:?}: not a preset ({presets}) nor a file")]
    Unknown { name: String, presets: String },
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{origin}: {error}")]
    Toml {
        origin: String,
        error: toml::de::Error,
    },
    #[error("{origin}: {msg}")]
    Invalid { origin: String, msg: String },
}

/// How a path is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shaper {
    /// Kernel tbf on both veth ends (rate only).
    Tbf,
    /// The user-space emulator in a middle namespace.
    Emu,
}

/// One path's link as written in a scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDef {
    pub shaper: Shaper,
    /// tbf: rate, e.g. "100mbit".
    pub rate: Option<String>,
    /// tbf: bucket size in tc syntax (default "32kbit").
    pub burst: Option<String>,
    /// tbf: queueing latency bound in tc syntax (default "50ms").
    pub latency: Option<String>,
    /// emu: link profile preset or file.
    pub profile: Option<String>,
    /// emu: settings over the profile (keys of a profile's [link]).
    #[serde(default)]
    pub emu: LinkSpec,
}

/// Tests run in every case, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum TestKind {
    #[serde(rename = "raw-udp")]
    RawUdp,
    #[serde(rename = "raw-tcp")]
    RawTcp,
    #[serde(rename = "udp")]
    Udp,
    #[serde(rename = "tcp")]
    Tcp,
    /// HTTP download of a large file through the tunnel (as with wget).
    #[serde(rename = "http")]
    Http,
}

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
    /// `lte-gateway`: VoIP beside bulk TCP, WiFi handover (see [`super::lte`]).
    pub lte: Option<super::lte::LteDef>,
    /// `dtn-relay`: bundles over two hops through a relay (see [`super::dtn`]).
    pub dtn: Option<super::dtn::DtnDef>,
    /// `unlike`: named cases of heterogeneous paths (see [`super::unlike`]).
    pub unlike: Option<super::unlike::UnlikeDef>,
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

/// Longest `omit` of a scenario, seconds.
pub const MAX_OMIT_S: f64 = 60.0;

/// Most parallel TCP streams per measurement (iperf3 allows 128).
pub const MAX_STREAMS: u32 = 32;

/// Inner (tunnelled) and outer (path) IP versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Combo {
    pub inner: u8,
    pub outer: u8,
}

impl Combo {
    pub const ALL: [Combo; 4] = [
        Combo { inner: 4, outer: 4 },
        Combo { inner: 6, outer: 4 },
        Combo { inner: 4, outer: 6 },
        Combo { inner: 6, outer: 6 },
    ];

    pub fn parse(s: &str) -> Option<Combo> {
        Combo::ALL.into_iter().find(|c| c.label() == s.trim())
    }

    pub fn label(&self) -> String {
        format!("{}in{}", self.inner, self.outer)
    }
}

/// Parses a combo list: "all" or comma-separated labels.
pub fn parse_combos(items: &[String]) -> Result<Vec<Combo>, String> {
    let mut out = Vec::new();
    for item in items.iter().flat_map(|s| s.split(',')) {
        if item.trim() == "all" {
            for c in Combo::ALL {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
            continue;
        }
        let c = Combo::parse(item).ok_or_else(|| {
            format!("unknown IP combination {item:?}: expected 4in4, 6in4, 4in6, 6in6 or all")
        })?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err("no IP combination given".into());
    }
    Ok(out)
}

/// A resolved link of one path.
#[derive(Debug, Clone)]
pub enum Link {
    Tbf {
        rate: String,
        burst: String,
        latency: String,
        rate_bps: u64,
    },
    Emu {
        a_to_b: Box<LinkConfig>,
        b_to_a: Box<LinkConfig>,
        /// Round-trip propagation delay, for reports.
        rtt: Duration,
        loss: f64,
    },
}

impl Link {
    /// The link's nominal rate (bit/s on whole frames), if limited.
    pub fn rate_bps(&self) -> Option<u64> {
        match self {
            Link::Tbf { rate_bps, .. } => Some(*rate_bps),
            Link::Emu { a_to_b, .. } => a_to_b.rate,
        }
    }
}

/// One testbed: a fixed set of paths, measured with every test.
#[derive(Debug, Clone)]
pub struct Case {
    pub combo: Combo,
    /// Paths, the swept ones first, then the extra link if any.
    pub links: Vec<Link>,
    /// Count of the swept (identical) paths.
    pub n: usize,
    pub rtt_ms: Option<f64>,
    pub loss: Option<f64>,
    pub extra: bool,
    /// mptd path weights (default 100 each), e.g. proportional to link rates.
    pub weights: Vec<u32>,
    /// A hop in series before path 0's link (A -> relay -> B), for `dtn-relay`.
    pub series: Option<Box<(LinkConfig, LinkConfig)>>,
    /// A name for progress lines instead of the swept parameters (`unlike`).
    pub label: Option<String>,
    /// Leave `scheduler` out of the mptd configs (mptd's default applies);
    /// otherwise the bench asks for `weighted`.
    pub daemon_scheduler: bool,
    /// `--scheduler`: asked of mptd in every case, whatever the scenario.
    pub scheduler: Option<String>,
    /// A's path 0 names only its interface (follows its address), B learns
    /// A's address on it, and both sides share a fresh key (roaming needs
    /// one): `lte-gateway` with `event = "addr-change"`.
    pub roaming_path0: bool,
    /// mptd's own keepalive and dead timer (not the bench's faster ones).
    pub default_timers: bool,
    /// Paths configured `status = "backup"`.
    pub backup_paths: Vec<usize>,
    /// `lte-gateway`: which of the scenario's variants this case runs.
    pub lte_variant: usize,
}

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
    pub lte: Option<super::lte::LteParams>,
    /// Set for `dtn-relay`-style scenarios (bundles through a relay).
    pub dtn: Option<super::dtn::DtnParams>,
    /// Set for `unlike`-style scenarios; its cases match `cases` one to one.
    pub unlike: Option<super::unlike::UnlikeParams>,
}

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

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// Loads a preset or file and expands it with `ov`.
pub fn load(name_or_path: &str, ov: &Overrides) -> Result<Scenario, ScenarioError> {
    let (name, text, origin) =
        if let Some((name, text)) = PRESETS.iter().find(|(n, _)| *n == name_or_path) {
            (name.to_string(), text.to_string(), format!("preset {name}"))
        } else {
            let path = Path::new(name_or_path);
            if !path.is_file() {
                return Err(ScenarioError::Unknown {
                    name: name_or_path.to_string(),
                    presets: preset_names().join(", "),
                });
            }
            let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::Io {
                path: path.display().to_string(),
                error,
            })?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "scenario".into());
            (name, text, path.display().to_string())
        };
    let file: ScenarioFile = toml::from_str(&text).map_err(|error| ScenarioError::Toml {
        origin: origin.clone(),
        error,
    })?;
    let mut scenario = expand(&name, &origin, file, ov)?;
    if let Some(sched) = &ov.scheduler {
        for case in &mut scenario.cases {
            case.scheduler = Some(sched.clone());
        }
    }
    Ok(scenario)
}

pub(crate) fn invalid(origin: &str, msg: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        origin: origin.to_string(),
        msg: msg.into(),
    }
}

/// Expands a parsed scenario into cases (combo x paths x rtt x loss x extra).
pub fn expand(
    name: &str,
    origin: &str,
    mut f: ScenarioFile,
    ov: &Overrides,
) -> Result<Scenario, ScenarioError> {
    if ov.quick {
        let q = f.quick.clone();
        f.paths = q.paths.unwrap_or(f.paths);
        f.duration = q.duration.unwrap_or(f.duration);
        f.rtt = q.rtt.unwrap_or(f.rtt);
        f.loss = q.loss.unwrap_or(f.loss);
        f.extra = q.extra.unwrap_or(f.extra);
    }
    if let Some(p) = &ov.paths {
        f.paths = p.clone();
    }
    if f.lte.is_some() || f.dtn.is_some() {
        // One path per link role (WiFi + LTE; the relayed path).
        f.paths = vec![1];
    }
    let tcp_test = f.tests.contains(&TestKind::Tcp);
    let lte = f
        .lte
        .as_ref()
        .map(|d| d.resolve(origin, ov.quick, tcp_test))
        .transpose()?;
    let dtn = f
        .dtn
        .as_ref()
        .map(|d| d.resolve(origin, ov.quick))
        .transpose()?;
    if let Some(d) = ov.duration {
        f.duration = d;
    }
    if let Some(u) = f.unlike.take() {
        if f.omit != 0.0 {
            return Err(invalid(
                origin,
                "omit: an unlike scenario sets it in [unlike]",
            ));
        }
        return super::unlike::expand(name, origin, f, &u, ov);
    }
    if !(f.omit.is_finite() && (0.0..=MAX_OMIT_S).contains(&f.omit)) || f.omit.fract() != 0.0 {
        return Err(invalid(
            origin,
            format!("omit: must be whole seconds, 0..={MAX_OMIT_S}"),
        ));
    }
    let combos = match &ov.combos {
        Some(c) => c.clone(),
        None => parse_combos(&f.combos).map_err(|m| invalid(origin, m))?,
    };
    if f.paths.is_empty() || f.paths.iter().any(|&n| n == 0 || n > MAX_PATHS) {
        return Err(invalid(
            origin,
            format!("paths: each count must be 1..={MAX_PATHS}"),
        ));
    }
    if !(f.duration.is_finite() && (1.0..=3600.0).contains(&f.duration)) {
        return Err(invalid(origin, "duration: must be 1..3600 seconds"));
    }
    // lte-gateway: the VoIP flow is the test; bulk traffic is optional.
    if f.tests.is_empty() && lte.is_none() {
        return Err(invalid(origin, "tests: at least one test"));
    }
    if !(f.udp_overload.is_finite() && (0.1..=10.0).contains(&f.udp_overload)) {
        return Err(invalid(origin, "udp_overload: must be 0.1..10"));
    }
    let rtts: Vec<Option<Duration>> = if f.rtt.is_empty() {
        vec![None]
    } else {
        f.rtt
            .iter()
            .map(|s| {
                units::parse_duration(s)
                    .map(Some)
                    .map_err(|e| invalid(origin, format!("rtt {s:?}: {e}")))
            })
            .collect::<Result<_, _>>()?
    };
    let losses: Vec<Option<f64>> = if f.loss.is_empty() {
        vec![None]
    } else {
        if f.loss.iter().any(|l| !(0.0..1.0).contains(l)) {
            return Err(invalid(origin, "loss: each PER must be in [0, 1)"));
        }
        f.loss.iter().copied().map(Some).collect()
    };
    let extras = if f.extra.is_empty() {
        vec![false]
    } else {
        f.extra.clone()
    };
    if extras.contains(&true) && f.extra_link.is_none() {
        return Err(invalid(origin, "extra = [true] needs an [extra_link]"));
    }
    if !(1..=MAX_STREAMS).contains(&f.streams) {
        return Err(invalid(
            origin,
            format!("streams: 1..={MAX_STREAMS} parallel TCP streams"),
        ));
    }
    let link = f
        .link
        .as_ref()
        .ok_or_else(|| invalid(origin, "missing [link]"))?;
    if link.shaper == Shaper::Tbf && (!f.rtt.is_empty() || !f.loss.is_empty()) {
        return Err(invalid(
            origin,
            "rtt/loss sweeps need shaper = \"emu\" (tbf shapes rate only)",
        ));
    }
    let mut cases = Vec::new();
    for &combo in &combos {
        for &n in &f.paths {
            for &rtt in &rtts {
                for &loss in &losses {
                    for &extra in &extras {
                        let main = resolve_link(origin, link, rtt, loss)?;
                        let mut links = vec![main; n];
                        if extra {
                            if let Some(x) = &f.extra_link {
                                links.push(resolve_link(origin, x, None, None)?);
                            }
                        }
                        if links.len() > MAX_PATHS {
                            return Err(invalid(origin, format!("more than {MAX_PATHS} paths")));
                        }
                        cases.push(Case {
                            combo,
                            links,
                            n,
                            rtt_ms: rtt.map(|d| d.as_secs_f64() * 1e3),
                            loss,
                            extra,
                            weights: Vec::new(),
                            series: None,
                            label: None,
                            daemon_scheduler: false,
                            scheduler: None,
                            roaming_path0: false,
                            default_timers: false,
                            backup_paths: Vec::new(),
                            lte_variant: 0,
                        });
                    }
                }
            }
        }
    }
    if let Some(l) = &lte {
        // One case per variant (how WiFi fails, VoIP marking, LTE's role).
        cases = cases
            .into_iter()
            .flat_map(|c| {
                l.variants.iter().enumerate().map(move |(i, v)| Case {
                    lte_variant: i,
                    label: Some(v.label()),
                    ..c.clone()
                })
            })
            .collect();
    }
    Ok(Scenario {
        name: name.to_string(),
        description: f.description.unwrap_or_default(),
        duration: Duration::from_secs_f64(f.duration),
        omit: Duration::from_secs_f64(f.omit),
        tests: f.tests,
        udp_overload: f.udp_overload,
        streams: f.streams,
        cases,
        lte,
        dtn,
        unlike: None,
    })
}

pub(crate) fn resolve_link(
    origin: &str,
    def: &LinkDef,
    rtt: Option<Duration>,
    loss: Option<f64>,
) -> Result<Link, ScenarioError> {
    match def.shaper {
        Shaper::Tbf => {
            let rate = def
                .rate
                .clone()
                .ok_or_else(|| invalid(origin, "tbf link needs rate"))?;
            let rate_bps = units::parse_rate(&rate)
                .map_err(|e| invalid(origin, format!("rate {rate:?}: {e}")))?;
            if rate_bps == 0 {
                return Err(invalid(origin, "tbf rate must be > 0"));
            }
            Ok(Link::Tbf {
                rate,
                burst: def.burst.clone().unwrap_or_else(|| "32kbit".into()),
                latency: def.latency.clone().unwrap_or_else(|| "50ms".into()),
                rate_bps,
            })
        }
        Shaper::Emu => {
            let prof = def
                .profile
                .as_deref()
                .map(Profile::load)
                .transpose()
                .map_err(|e| invalid(origin, e.to_string()))?;
            let mut both = def.emu.clone();
            if let Some(r) = rtt {
                both.delay = Some(r / 2);
            }
            if let Some(l) = loss {
                both.loss = Some(l);
            }
            let (a_to_b, b_to_a) = profile::resolve(
                prof.as_ref(),
                &both,
                &LinkSpec::default(),
                &LinkSpec::default(),
            )
            .map_err(|e| invalid(origin, e.to_string()))?;
            let rtt = a_to_b.delay + b_to_a.delay;
            Ok(Link::Emu {
                a_to_b: Box::new(a_to_b),
                b_to_a: Box::new(b_to_a),
                rtt,
                loss: loss.unwrap_or(0.0),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_expand() {
        for (name, _) in PRESETS {
            let s = load(name, &Overrides::default());
            assert!(s.is_ok(), "{name}: {:?}", s.err());
            let q = load(
                name,
                &Overrides {
                    quick: true,
                    ..Overrides::default()
                },
            );
            assert!(q.is_ok(), "{name}: {:?}", q.err());
        }
    }

    #[test]
    fn ethernet_defaults_and_overrides() {
        let s = load("ethernet", &Overrides::default()).ok();
        let ns: Vec<usize> = s.iter().flat_map(|s| s.cases.iter().map(|c| c.n)).collect();
        assert_eq!(ns, vec![1, 2, 4, 8, 12]);
        let ov = Overrides {
            quick: true,
            combos: parse_combos(&["all".into()]).ok(),
            ..Overrides::default()
        };
        let s = load("ethernet", &ov).ok();
        assert_eq!(s.as_ref().map(|s| s.cases.len()), Some(4));
        assert_eq!(s.map(|s| s.duration), Some(Duration::from_secs(3)));
    }

    #[test]
    fn like_paths_file_runs_twelve_paths_with_four_streams() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../conf/scenarios/like-paths.toml"
        );
        let s = load(file, &Overrides::default()).expect("like-paths.toml");
        assert_eq!(s.streams, 4);
        assert_eq!(s.tests, vec![TestKind::RawTcp, TestKind::Tcp]);
        let ns: Vec<usize> = s.cases.iter().map(|c| c.links.len()).collect();
        assert_eq!(ns, vec![12]);
        assert!(s.cases[0]
            .links
            .iter()
            .all(|l| l.rate_bps() == Some(100_000_000)));
        // Presets without the key keep one stream.
        assert_eq!(
            load("ethernet", &Overrides::default())
                .map(|s| s.streams)
                .ok(),
            Some(1)
        );
        let text = std::fs::read_to_string(file).expect("read");
        for bad in ["streams = 0", "streams = 33"] {
            let f: ScenarioFile = toml::from_str(&text.replace("streams = 4", bad)).expect("toml");
            assert!(
                expand("x", "x", f, &Overrides::default()).is_err(),
                "{bad} accepted"
            );
        }
        // Slow start is left out, raw and tunnel alike.
        assert_eq!(s.omit, Duration::from_secs(2));
        assert_eq!(
            load("ethernet", &Overrides::default()).map(|s| s.omit).ok(),
            Some(Duration::ZERO)
        );
        for bad in ["omit = 1.5", "omit = -1", "omit = 61", "omit = nan"] {
            let f: ScenarioFile = toml::from_str(&text.replace("omit = 2", bad)).expect("toml");
            assert!(
                expand("x", "x", f, &Overrides::default()).is_err(),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn satellite_sweeps() {
        let s = load("satellite", &Overrides::default()).ok();
        assert_eq!(s.as_ref().map(|s| s.cases.len()), Some(16));
        let c = s.and_then(|s| s.cases.into_iter().last());
        assert_eq!(c.as_ref().map(|c| c.links.len()), Some(2));
        assert_eq!(c.as_ref().and_then(|c| c.rtt_ms), Some(800.0));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(parse_combos(&["5in4".into()]).is_err());
        assert!(load("no-such-scenario", &Overrides::default()).is_err());
        let ov = Overrides {
            paths: Some(vec![33]),
            ..Overrides::default()
        };
        assert!(load("ethernet", &ov).is_err());
        let ov = Overrides {
            duration: Some(0.0),
            ..Overrides::default()
        };
        assert!(load("ethernet", &ov).is_err());
    }
}
