//! The `[unlike]` table of a scenario file: congestion controls, ramp-up,
//! repeats and the named cases with their paths and targets, and the
//! resolved settings ([`UnlikeParams`]) a run uses.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bench::link_trace::load_trace;
use crate::bench::scenario::error::{invalid, ScenarioError};
use crate::bench::scenario::link::{resolve_link, Link, LinkDef, Shaper};
use mpt_emu::profile::LinkSpec;
use mpt_emu::trace::{Trace, TraceFormat};

/// Most tunnel runs per case and congestion control (`[unlike] repeat`).
pub const MAX_REPEAT: i64 = 9;

/// What the tunnel's goodput is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// The best raw path alone.
    Best,
    /// The sum of the raw paths.
    Sum,
}

impl TargetKind {
    pub fn label(self) -> &'static str {
        match self {
            TargetKind::Best => "best",
            TargetKind::Sum => "sum",
        }
    }
}

/// The tunnel must reach `ratio` x (best | sum of) the raw paths.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub of: TargetKind,
    pub ratio: f64,
}

impl Target {
    pub fn label(&self) -> String {
        format!(">= {:.2} x {}", self.ratio, self.of.label())
    }
}

/// One path of a case as written in the scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathDef {
    pub name: String,
    /// Link profile preset or file, under `emu`.
    pub profile: Option<String>,
    /// Link settings (keys of a profile's `[link]`), both directions.
    #[serde(default)]
    pub emu: LinkSpec,
    /// Capacity trace of both directions: a file (relative to the working
    /// directory or conf/links/) or the name of the shipped one.
    pub trace: Option<String>,
    /// How `trace` is read: "mpt" (default) or "mahimahi".
    pub trace_format: Option<TraceFormat>,
    /// The congestion control of this path's pinned acceleration leg in
    /// the accelerated variant (mptd's path key `accel_congestion`;
    /// absent: the legs' default, BBR).
    pub accel_congestion: Option<String>,
}

/// `[[unlike.case]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseDef {
    pub name: String,
    pub target: TargetKind,
    pub ratio: f64,
    /// Fetch `[unlike] objects` 1 MB objects one after another in this
    /// case (short flows: tunnel, accelerated, MPTCP).
    #[serde(default)]
    pub objects: bool,
    #[serde(rename = "path")]
    pub paths: Vec<PathDef>,
}

/// `[unlike.quick]`: what `--quick` changes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnlikeQuick {
    /// Names of the cases to run.
    pub cases: Option<Vec<String>>,
    pub cc: Option<Vec<String>>,
    pub omit: Option<f64>,
    pub repeat: Option<i64>,
    pub objects: Option<i64>,
}

/// The `[unlike]` table of a scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnlikeDef {
    /// TCP congestion controls, each measured in every case.
    pub cc: Vec<String>,
    /// Seconds of ramp-up left out at the start of each measurement.
    #[serde(default)]
    pub omit: f64,
    /// Tunnel runs per case and congestion control (1..=9); the run with
    /// the median goodput is the one judged.
    #[serde(default = "one")]
    pub repeat: i64,
    /// 1 MB objects per variant and round in cases with `objects = true`
    /// (0..=100; 0: none).
    #[serde(default)]
    pub objects: i64,
    #[serde(rename = "case")]
    pub cases: Vec<CaseDef>,
    #[serde(default)]
    pub quick: UnlikeQuick,
}

fn one() -> i64 {
    1
}

/// A path as reported.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PathInfo {
    pub name: String,
    /// Configured rate A -> B (the direction of the TCP data), Mbit/s.
    pub rate_mbps: Option<f64>,
    /// With a trace: its mean rate A -> B over the measured part of a
    /// measurement (after `omit`), Mbit/s; otherwise the configured rate.
    pub mean_rate_mbps: Option<f64>,
    pub rtt_ms: f64,
    pub loss: f64,
    pub queue_bytes: u64,
    pub trace: Option<String>,
    /// Outage windows (`emu.outage`): the link goes silent both ways from
    /// `.0` for `.1` seconds after the start of every measurement.
    pub outage_s: Vec<(f64, f64)>,
    /// The congestion control of the path's acceleration leg, when the
    /// scenario sets one.
    pub accel_congestion: Option<String>,
}

impl PathInfo {
    /// " silent 4 s+3 s" per outage window, or "".
    pub fn outage_label(&self) -> String {
        self.outage_s
            .iter()
            .map(|(at, len)| format!(" silent at {at:.0} s for {len:.0} s"))
            .collect()
    }
}

/// A resolved case.
#[derive(Debug, Clone)]
pub struct UnlikeCase {
    pub name: String,
    pub target: Target,
    pub paths: Vec<PathInfo>,
    /// Run the short-flow workload here.
    pub objects: bool,
}

/// Resolved `[unlike]` settings; `cases[k]` goes with the scenario's case k.
#[derive(Debug, Clone)]
pub struct UnlikeParams {
    pub cc: Vec<String>,
    pub omit: Duration,
    /// Tunnel runs per case and congestion control (1..=[`MAX_REPEAT`]).
    pub repeat: usize,
    /// 1 MB objects per variant and round (`objects = true` cases).
    pub objects: usize,
    pub cases: Vec<UnlikeCase>,
}

pub(super) fn check_cc(origin: &str, cc: &[String]) -> Result<(), ScenarioError> {
    if cc.is_empty() {
        return Err(invalid(
            origin,
            "unlike.cc: at least one congestion control",
        ));
    }
    for (i, c) in cc.iter().enumerate() {
        let ok = !c.is_empty()
            && c.len() <= 15
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_');
        if !ok {
            return Err(invalid(
                origin,
                format!(
                    "unlike.cc: {c:?} is not a congestion control name (e.g. \"cubic\", \"bbr\")"
                ),
            ));
        }
        if cc[..i].contains(c) {
            return Err(invalid(origin, format!("unlike.cc: {c:?} twice")));
        }
    }
    Ok(())
}

/// `repeat` (from the scenario key `key`) as a run count, 1..=[`MAX_REPEAT`].
pub(super) fn check_repeat(origin: &str, repeat: i64, key: &str) -> Result<usize, ScenarioError> {
    match usize::try_from(repeat) {
        Ok(n) if (1..=MAX_REPEAT).contains(&repeat) => Ok(n),
        _ => Err(invalid(
            origin,
            format!(
                "{key}: tunnel runs per case and congestion control, 1..={MAX_REPEAT} (got {repeat})"
            ),
        )),
    }
}

/// Mean rate (bit/s) of a link over `[from, to)` after its start, with the
/// trace's steps over the configured rate; `None` if unlimited somewhere.
pub fn mean_rate(
    trace: Option<&Trace>,
    configured: Option<u64>,
    from: Duration,
    to: Duration,
) -> Option<f64> {
    match trace {
        Some(trace) => trace.mean_rate(configured, from, to),
        None => configured.map(|r| r as f64),
    }
}

pub(super) fn resolve_path(
    origin: &str,
    case: &str,
    p: &PathDef,
    window: (Duration, Duration),
) -> Result<(Link, PathInfo), ScenarioError> {
    let def = LinkDef {
        shaper: Shaper::Emu,
        rate: None,
        burst: None,
        latency: None,
        profile: p.profile.clone(),
        emu: p.emu.clone(),
    };
    let where_ = format!("{origin}: case {case:?}, path {:?}", p.name);
    let mut link = resolve_link(&where_, &def, None, None)?;
    let Link::Emu {
        a_to_b,
        b_to_a,
        rtt,
        loss,
    } = &mut link
    else {
        return Err(invalid(&where_, "not an emulated link"));
    };
    let trace = match &p.trace {
        Some(t) => {
            let tr = load_trace(t, p.trace_format).map_err(|e| invalid(&where_, e))?;
            a_to_b.trace = Some(tr.clone());
            b_to_a.trace = Some(tr);
            Some(t.clone())
        }
        None => None,
    };
    *loss = a_to_b.loss.per;
    let info = PathInfo {
        name: p.name.clone(),
        rate_mbps: a_to_b.rate.map(|r| r as f64 / 1e6),
        mean_rate_mbps: mean_rate(a_to_b.trace.as_ref(), a_to_b.rate, window.0, window.1)
            .map(|r| r / 1e6),
        rtt_ms: rtt.as_secs_f64() * 1e3,
        loss: a_to_b.loss.per,
        queue_bytes: a_to_b.queue,
        trace,
        outage_s: p
            .emu
            .outage
            .iter()
            .flatten()
            .map(|w| (w.start.as_secs_f64(), w.len.as_secs_f64()))
            .collect(),
        accel_congestion: p.accel_congestion.clone(),
    };
    if let Some(cc) = &p.accel_congestion {
        let ok = (1..=15).contains(&cc.len())
            && cc
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(invalid(
                &where_,
                format!(
                    "accel_congestion: `{cc}` is not a congestion control name (like bbr or cubic)"
                ),
            ));
        }
    }
    Ok((link, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_rate_follows_the_trace() {
        let t = Trace::parse("0s 10mbit\n2s 20mbit\n4s 0\n").ok();
        let s = Duration::from_secs;
        assert_eq!(mean_rate(t.as_ref(), None, s(0), s(4)), Some(15e6));
        assert_eq!(mean_rate(t.as_ref(), None, s(1), s(3)), Some(15e6));
        assert_eq!(mean_rate(t.as_ref(), None, s(2), s(6)), Some(10e6));
        let late = Trace::parse("2s 20mbit\n").ok();
        // Before the first step the configured rate applies.
        assert_eq!(
            mean_rate(late.as_ref(), Some(10_000_000), s(0), s(4)),
            Some(15e6)
        );
        assert_eq!(mean_rate(late.as_ref(), None, s(0), s(4)), None);
        assert_eq!(mean_rate(None, Some(5), s(0), s(4)), Some(5.0));
    }
}
