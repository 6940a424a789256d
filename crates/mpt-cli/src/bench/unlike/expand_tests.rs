//! Tests of the `unlike` expansion through the scenario loader (presets,
//! `--quick`, `repeat`, files with bad cases). Beside [`super::expand`]
//! rather than inside it: they load scenarios through
//! [`crate::bench::scenario`], which itself calls the expansion.

use std::time::Duration;

use crate::bench::scenario::error::ScenarioError;
use crate::bench::scenario::expanded::Scenario;
use crate::bench::scenario::file::ScenarioFile;
use crate::bench::scenario::link::Link;
use crate::bench::scenario::overrides::Overrides;
use crate::bench::scenario::{expand, load};
use crate::bench::unlike::def::{Target, TargetKind};

fn target(of: TargetKind, ratio: f64) -> Target {
    Target { of, ratio }
}

#[test]
fn preset_expands_to_the_issue_cases() {
    let s = load("unlike", &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
    let u = s.unlike.as_ref().unwrap_or_else(|| panic!("no [unlike]"));
    let names: Vec<&str> = u.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "geo+dsl",
            "wifi+lte",
            "lossy-wifi+lte",
            "wifi+lte-trace",
            "like-20+20"
        ]
    );
    assert_eq!(u.cc, ["cubic", "bbr"]);
    assert_eq!(s.cases.len(), 5);
    assert!(s.cases.iter().all(|c| c.daemon_scheduler
        && c.weights.is_empty()
        && c.links.len() == 2
        && c.label.is_some()));
    let rates: Vec<Vec<Option<u64>>> = s
        .cases
        .iter()
        .map(|c| c.links.iter().map(Link::rate_bps).collect())
        .collect();
    assert_eq!(rates[0], [Some(20_000_000), Some(10_000_000)]);
    assert_eq!(rates[1], [Some(50_000_000), Some(20_000_000)]);
    assert_eq!(rates[4], [Some(20_000_000), Some(20_000_000)]);
    let geo = &u.cases[0].paths[0];
    assert_eq!(geo.rtt_ms.round(), 600.0);
    assert_eq!(u.cases[1].paths[1].rtt_ms.round(), 60.0);
    assert_eq!(u.cases[2].paths[0].loss, 0.01);
    assert_eq!(u.cases[0].target, target(TargetKind::Best, 1.0));
    assert_eq!(u.cases[1].target, target(TargetKind::Sum, 0.9));
    assert_eq!(u.cases[2].target, target(TargetKind::Best, 1.0));
    assert_eq!(u.cases[3].target, target(TargetKind::Sum, 0.85));
    assert_eq!(u.cases[4].target, target(TargetKind::Sum, 0.9));
    // The traced LTE link: trace on both directions, mean in 6..12 Mbit/s.
    let lte = &u.cases[3].paths[1];
    assert!(lte.trace.is_some());
    let mean = lte.mean_rate_mbps.unwrap_or(0.0);
    assert!((6.0..=12.0).contains(&mean), "{mean}");
    assert!(matches!(&s.cases[3].links[1],
        Link::Emu { a_to_b, b_to_a, .. } if a_to_b.trace.is_some() && b_to_a.trace.is_some()));
    assert!(s.duration >= Duration::from_secs(10));
    assert!(u.omit >= Duration::from_secs(1));
}

#[test]
fn quick_is_short() {
    let ov = Overrides {
        quick: true,
        ..Overrides::default()
    };
    let s = load("unlike", &ov).unwrap_or_else(|e| panic!("{e}"));
    let full = load("unlike", &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(s.cases.len() < full.cases.len());
    assert!(s.duration < full.duration);
    let u = s.unlike.as_ref().map(|u| u.cases.len());
    assert_eq!(u, Some(s.cases.len()));
    // --duration wins over the file.
    let ov = Overrides {
        duration: Some(4.0),
        ..Overrides::default()
    };
    let s = load("unlike", &ov).ok();
    assert_eq!(s.map(|s| s.duration), Some(Duration::from_secs(4)));
}

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    parse_with(text, &Overrides::default())
}

fn parse_with(text: &str, ov: &Overrides) -> Result<Scenario, ScenarioError> {
    let f: ScenarioFile = toml::from_str(text).map_err(|error| ScenarioError::Toml {
        origin: "t".into(),
        error,
    })?;
    expand("t", "t", f, ov)
}

#[test]
fn repeat_is_validated() {
    let repeat = |s: &Scenario| s.unlike.as_ref().map(|u| u.repeat);
    // Default 1.
    let s = parse(GOOD).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(repeat(&s), Some(1));
    let with = |n: &str| GOOD.replace("omit = 2", &format!("omit = 2\n        repeat = {n}"));
    for n in [1, 2, 9] {
        let s = parse(&with(&n.to_string())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(repeat(&s), Some(n));
    }
    for bad in ["0", "10", "-1", "2.5", "\"3\""] {
        let e = parse(&with(bad)).err();
        assert!(e.is_some(), "accepted repeat = {bad}");
    }
    let e = parse(&with("0")).err().map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("unlike.repeat") && e.contains("1..=9")),
        "{e:?}"
    );
    // [unlike.quick] repeat applies with --quick only, and is checked.
    let quick = Overrides {
        quick: true,
        ..Overrides::default()
    };
    let q = |n: &str| {
        format!(
            "{}\n        [unlike.quick]\n        repeat = {n}\n",
            with("3")
        )
    };
    let s = parse_with(&q("2"), &quick).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(repeat(&s), Some(2));
    let s = parse(&q("2")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(repeat(&s), Some(3));
    let s = parse_with(&with("3"), &quick).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(repeat(&s), Some(3));
    let e = parse_with(&q("12"), &quick).err().map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("unlike.quick.repeat")),
        "{e:?}"
    );
    // The preset: 3 tunnel runs, 1 with --quick.
    let full = load("unlike", &Overrides::default()).ok();
    assert_eq!(full.as_ref().and_then(repeat), Some(3));
    let short = load("unlike", &quick).ok();
    assert_eq!(short.as_ref().and_then(repeat), Some(1));
}

const GOOD: &str = r#"
    tests = ["tcp"]
    [unlike]
    cc = ["cubic"]
    omit = 2
    [[unlike.case]]
    name = "a+b"
    target = "best"
    ratio = 1.0
    [[unlike.case.path]]
    name = "a"
    emu = { rate = "10mbit", delay = "5ms", queue = "64kB" }
    [[unlike.case.path]]
    name = "b"
    emu = { rate = "5mbit", delay = "50ms", loss = 0.01 }
"#;

#[test]
fn file_cases_parse_and_bad_ones_fail() {
    let s = parse(GOOD).unwrap_or_else(|e| panic!("{e}"));
    let u = s
        .unlike
        .as_ref()
        .map(|u| u.cases[0].paths.clone())
        .unwrap_or_default();
    assert_eq!(u.len(), 2);
    assert_eq!(u[0].queue_bytes, 64_000);
    assert_eq!(u[1].loss, 0.01);
    assert_eq!(u[1].rtt_ms.round(), 100.0);
    for (from, to) in [
        ("target = \"best\"", "target = \"worst\""),
        ("ratio = 1.0", "ratio = 0.0"),
        ("cc = [\"cubic\"]", "cc = []"),
        ("cc = [\"cubic\"]", "cc = [\"Cubic; rm\"]"),
        ("cc = [\"cubic\"]", "cc = [\"bbr\", \"bbr\"]"),
        ("omit = 2", "omit = 1.5"),
        ("name = \"b\"", "name = \"a\""),
        ("rate = \"5mbit\"", "speed = \"5mbit\""),
    ] {
        let bad = GOOD.replace(from, to);
        assert!(parse(&bad).is_err(), "accepted {to}");
    }
    let no_paths = GOOD.split("[[unlike.case.path]]").next().unwrap_or("");
    assert!(parse(no_paths).is_err());
    let trace = GOOD.replace(
        "name = \"b\"",
        "name = \"b\"\n        trace = \"no-such.trace\"",
    );
    assert!(parse(&trace).is_err());
    let ov = Overrides {
        paths: Some(vec![2]),
        ..Overrides::default()
    };
    assert!(load("unlike", &ov).is_err());
}
