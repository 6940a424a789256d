//! Scenarios: TOML presets (conf/scenarios/) and files, expanded into the
//! list of testbed cases a run measures.
//!
//! Layout: [`file`](mod@file) is the TOML as written, [`link`] and [`case`] what it
//! resolves to, [`expanded`] the result; [`error`] and [`limits`] are
//! leaves every part uses. The scenario families (`lte`, `dtn`, `unlike`)
//! keep their own tables beside their runners and build on these modules;
//! this one only dispatches to them.

pub mod case;
pub mod error;
pub mod expanded;
pub mod file;
pub mod limits;
pub mod link;
pub mod overrides;

use std::path::Path;
use std::time::Duration;

use mpt_emu::units;

pub use case::{parse_combos, Case, Combo, TestKind};
pub use error::ScenarioError;
pub use expanded::Scenario;
pub use file::{QuickDef, ScenarioFile};
pub use limits::{MAX_OMIT_S, MAX_PATHS, MAX_STREAMS};
pub use link::{Link, LinkDef, Shaper};
pub use overrides::Overrides;

use crate::bench::unlike::expand::expand as unlike_expand;
use error::invalid;
use link::resolve_link;

/// Built-in scenarios, the same text as the files under conf/scenarios/.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "ethernet",
        include_str!("../../../../../conf/scenarios/ethernet.toml"),
    ),
    (
        "satellite",
        include_str!("../../../../../conf/scenarios/satellite.toml"),
    ),
    (
        "lte-gateway",
        include_str!("../../../../../conf/scenarios/lte-gateway.toml"),
    ),
    (
        "handover",
        include_str!("../../../../../conf/scenarios/handover.toml"),
    ),
    (
        "dtn-relay",
        include_str!("../../../../../conf/scenarios/dtn-relay.toml"),
    ),
    (
        "unlike",
        include_str!("../../../../../conf/scenarios/unlike.toml"),
    ),
    (
        "demo",
        include_str!("../../../../../conf/scenarios/demo.toml"),
    ),
];

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// Loads a preset or file and expands it with `ov`.
pub fn load(name_or_path: &str, ov: &Overrides) -> Result<Scenario, ScenarioError> {
    // `dtn` is the old name of the DTN suite, kept as an alias.
    let name_or_path = match name_or_path {
        "dtn" => "dtn-relay",
        other => other,
    };
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
    scenario.source_sha256 = crate::bench::report::meta::sha256_hex(text.as_bytes());
    scenario.source = origin;
    scenario.overrides = ov.flags();
    if let Some(sched) = &ov.scheduler {
        for case in &mut scenario.cases {
            case.scheduler = Some(sched.clone());
        }
    }
    Ok(scenario)
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
        return unlike_expand(name, origin, f, &u, ov);
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
                            networks_b: Vec::new(),
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
        source: String::new(),
        source_sha256: String::new(),
        overrides: String::new(),
    })
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
