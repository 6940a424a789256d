//! `unlike` (issue 12): one TCP stream through the tunnel over paths that
//! differ in rate, delay and loss (GEO + DSL, WiFi + LTE, lossy WiFi + LTE,
//! LTE on a capacity trace beside WiFi) and over two like paths, next to
//! raw TCP over each path alone, measured in the same run with the same
//! congestion control (CUBIC and BBR, `iperf3 -C`).
//!
//! A case is a named list of emulated links (`[[unlike.case]]` with
//! `[[unlike.case.path]]` tables) and a target: the tunnel's goodput must
//! reach `ratio` x the best raw path (`target = "best"`) or `ratio` x the
//! sum of the raw paths (`target = "sum"`). Per case the testbed is built
//! once; per congestion control the raw paths are measured one after the
//! other (iperf3 between the path's outer addresses, the tunnel idle), then
//! the tunnel (iperf3 between the tunnel addresses). mptd runs with its
//! default scheduler and equal weights (the bench leaves `scheduler` out of
//! its configs for this scenario).
//!
//! One TCP run over a long-RTT path varies a lot from run to run (CUBIC
//! over the 600 ms GEO path: 0.5 to 1.3 of the best path alone), so the
//! tunnel is measured `[unlike] repeat` times (1..=9, default 1; also in
//! `[unlike.quick]`) in the same testbed, one run after the other. The run
//! whose goodput is the median (for an even count the lower middle one,
//! [`median_run`]) is kept as the tunnel's figure, with its resequencing
//! hold and CPU use, and judged against the target; every run's goodput is
//! reported beside it (results.json/csv, and min..max in the table). The
//! raw paths are measured once each.
//!
//! Each measurement leaves out its first `omit` seconds (`iperf3 -O`): a
//! 600 ms path needs several seconds of slow start, and the raw baselines
//! and the tunnel are measured alike. A link on a trace has its emulator
//! wire restarted before every measurement, so each sees the same capacity
//! over time from the start of the trace.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::hold::{self, HoldCheck, Snapshot};
use super::iperf::{self, Measurement};
use super::plot::{BarChart, BarGroup};
use super::report::{Report, Row};
use super::scenario::{
    invalid, parse_combos, resolve_link, Case, Link, LinkDef, Scenario, ScenarioError,
    ScenarioFile, Shaper, MAX_OMIT_S, MAX_PATHS,
};
use super::testbed::{self, check_stop, Testbed};
use super::{progress, Options};
use mpt_emu::profile::LinkSpec;
use mpt_emu::trace::Trace;

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
    fn label(self) -> &'static str {
        match self {
            TargetKind::Best => "best",
            TargetKind::Sum => "sum",
        }
    }
}

/// The tunnel must reach `ratio` x (best | sum of) the raw paths.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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
}

/// `[[unlike.case]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseDef {
    pub name: String,
    pub target: TargetKind,
    pub ratio: f64,
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
    #[serde(rename = "case")]
    pub cases: Vec<CaseDef>,
    #[serde(default)]
    pub quick: UnlikeQuick,
}

fn one() -> i64 {
    1
}

/// A path as reported.
#[derive(Debug, Clone, Default, Serialize)]
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
}

/// A resolved case.
#[derive(Debug, Clone)]
pub struct UnlikeCase {
    pub name: String,
    pub target: Target,
    pub paths: Vec<PathInfo>,
}

/// Resolved `[unlike]` settings; `cases[k]` goes with the scenario's case k.
#[derive(Debug, Clone)]
pub struct UnlikeParams {
    pub cc: Vec<String>,
    pub omit: Duration,
    /// Tunnel runs per case and congestion control (1..=[`MAX_REPEAT`]).
    pub repeat: usize,
    pub cases: Vec<UnlikeCase>,
}

fn check_cc(origin: &str, cc: &[String]) -> Result<(), ScenarioError> {
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
fn check_repeat(origin: &str, repeat: i64, key: &str) -> Result<usize, ScenarioError> {
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
    let Some(trace) = trace else {
        return configured.map(|r| r as f64);
    };
    if to <= from {
        return trace.rate_at(from).or(configured).map(|r| r as f64);
    }
    // Step boundaries inside the window.
    let mut edges = vec![from];
    edges.extend(
        trace
            .points()
            .iter()
            .map(|p| p.at)
            .filter(|&t| t > from && t < to),
    );
    edges.push(to);
    let mut bits = 0.0;
    for w in edges.windows(2) {
        let rate = trace.rate_at(w[0]).or(configured)?;
        bits += rate as f64 * (w[1] - w[0]).as_secs_f64();
    }
    Some(bits / (to - from).as_secs_f64())
}

fn resolve_path(
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
            let tr = super::lte::load_trace(t).map_err(|e| invalid(&where_, e))?;
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
    };
    Ok((link, info))
}

/// Expands an `unlike` scenario: one testbed case per (combo, case).
pub fn expand(
    name: &str,
    origin: &str,
    f: ScenarioFile,
    u: &UnlikeDef,
    ov: &super::scenario::Overrides,
) -> Result<Scenario, ScenarioError> {
    let mut cc = u.cc.clone();
    let mut omit = u.omit;
    let mut repeat = (u.repeat, "unlike.repeat");
    let mut wanted: Option<Vec<String>> = None;
    if ov.quick {
        cc = u.quick.cc.clone().unwrap_or(cc);
        omit = u.quick.omit.unwrap_or(omit);
        if let Some(r) = u.quick.repeat {
            repeat = (r, "unlike.quick.repeat");
        }
        wanted = u.quick.cases.clone();
    }
    check_cc(origin, &cc)?;
    let repeat = check_repeat(origin, repeat.0, repeat.1)?;
    if !(omit.is_finite() && (0.0..=MAX_OMIT_S).contains(&omit)) || omit.fract() != 0.0 {
        return Err(invalid(
            origin,
            format!("unlike.omit: whole seconds, 0..={MAX_OMIT_S}"),
        ));
    }
    if !(f.duration.is_finite() && (1.0..=3600.0).contains(&f.duration)) {
        return Err(invalid(origin, "duration: must be 1..3600 seconds"));
    }
    if ov.paths.is_some() {
        return Err(invalid(
            origin,
            "--paths does not apply: each case lists its own paths",
        ));
    }
    let combos = match &ov.combos {
        Some(c) => c.clone(),
        None => parse_combos(&f.combos).map_err(|m| invalid(origin, m))?,
    };
    if u.cases.is_empty() {
        return Err(invalid(origin, "unlike: at least one [[unlike.case]]"));
    }
    for (i, c) in u.cases.iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err(invalid(origin, "unlike.case: empty name"));
        }
        if u.cases[..i].iter().any(|d| d.name == c.name) {
            return Err(invalid(origin, format!("unlike.case {:?} twice", c.name)));
        }
        if !(c.ratio.is_finite() && c.ratio > 0.0 && c.ratio <= 10.0) {
            return Err(invalid(
                origin,
                format!("case {:?}: ratio must be in (0, 10]", c.name),
            ));
        }
        if c.paths.is_empty() || c.paths.len() > MAX_PATHS {
            return Err(invalid(
                origin,
                format!("case {:?}: 1..={MAX_PATHS} paths", c.name),
            ));
        }
        for (j, p) in c.paths.iter().enumerate() {
            if c.paths[..j].iter().any(|q| q.name == p.name) {
                return Err(invalid(
                    origin,
                    format!("case {:?}: path {:?} twice", c.name, p.name),
                ));
            }
        }
    }
    let defs: Vec<&CaseDef> = match &wanted {
        Some(names) => names
            .iter()
            .map(|n| {
                u.cases
                    .iter()
                    .find(|c| &c.name == n)
                    .ok_or_else(|| invalid(origin, format!("unlike.quick.cases: no case {n:?}")))
            })
            .collect::<Result<_, _>>()?,
        None => u.cases.iter().collect(),
    };
    let omit = Duration::from_secs_f64(omit);
    let duration = Duration::from_secs_f64(f.duration);
    let window = (omit, omit + duration);
    let mut cases = Vec::new();
    let mut ucases = Vec::new();
    for &combo in &combos {
        for d in &defs {
            let mut links = Vec::new();
            let mut infos = Vec::new();
            for p in &d.paths {
                let (l, i) = resolve_path(origin, &d.name, p, window)?;
                links.push(l);
                infos.push(i);
            }
            let label = if combos.len() > 1 {
                format!("{} {}", d.name, combo.label())
            } else {
                d.name.clone()
            };
            cases.push(Case {
                combo,
                n: links.len(),
                links,
                rtt_ms: None,
                loss: None,
                extra: false,
                weights: Vec::new(),
                series: None,
                label: Some(label.clone()),
                daemon_scheduler: true,
                scheduler: None,
                roaming_path0: false,
                default_timers: false,
                backup_paths: Vec::new(),
                lte_variant: 0,
            });
            ucases.push(UnlikeCase {
                name: label,
                target: Target {
                    of: d.target,
                    ratio: d.ratio,
                },
                paths: infos,
            });
        }
    }
    Ok(Scenario {
        name: name.to_string(),
        description: f.description.unwrap_or_default(),
        duration,
        // Per measurement, in `UnlikeParams` (raw paths and tunnel runs).
        omit: Duration::ZERO,
        tests: vec![
            super::scenario::TestKind::RawTcp,
            super::scenario::TestKind::Tcp,
        ],
        udp_overload: f.udp_overload,
        streams: 1,
        cases,
        lte: None,
        dtn: None,
        unlike: Some(UnlikeParams {
            cc,
            omit,
            repeat,
            cases: ucases,
        }),
    })
}

/// The tunnel against the raw paths.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Verdict {
    pub best_raw_mbps: f64,
    /// Index of the best raw path.
    pub best_path: Option<usize>,
    pub sum_raw_mbps: f64,
    /// Tunnel / best raw path, tunnel / sum of raw paths.
    pub frac_best: Option<f64>,
    pub frac_sum: Option<f64>,
    /// Goodput the target asks for, Mbit/s.
    pub required_mbps: f64,
    /// `None` when no raw path carried anything (no baseline to judge by).
    pub pass: Option<bool>,
}

/// Compares the tunnel's goodput with the raw paths' under `t`.
pub fn verdict(raw_mbps: &[f64], tunnel_mbps: f64, t: Target) -> Verdict {
    let mut best_path = None;
    let mut best = 0.0;
    for (i, &m) in raw_mbps.iter().enumerate() {
        if m > best {
            best = m;
            best_path = Some(i);
        }
    }
    let sum: f64 = raw_mbps.iter().filter(|m| m.is_finite()).sum();
    let frac = |d: f64| (d > 0.0).then(|| tunnel_mbps / d);
    let base = match t.of {
        TargetKind::Best => best,
        TargetKind::Sum => sum,
    };
    let required = t.ratio * base;
    Verdict {
        best_raw_mbps: best,
        best_path,
        sum_raw_mbps: sum,
        frac_best: frac(best),
        frac_sum: frac(sum),
        required_mbps: required,
        pass: (base > 0.0).then_some(tunnel_mbps >= required),
    }
}

/// One congestion control's measurements in one case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CcRun {
    pub cc: String,
    /// Raw TCP over each path alone, in path order.
    pub raw: Vec<Measurement>,
    /// The tunnel run with the median goodput (for an even number of runs
    /// the lower middle): the one judged.
    pub tunnel: Measurement,
    /// Which run `tunnel` is, 1-based (0: no run recorded).
    pub tunnel_run: usize,
    /// Goodput of every tunnel run in the order run, Mbit/s.
    pub tunnel_runs_mbps: Vec<f64>,
    pub verdict: Verdict,
    /// CPU use of mptd A and B during the kept tunnel run, % of a core.
    pub cpu_a_pct: Option<f64>,
    pub cpu_b_pct: Option<f64>,
    /// Resequencing delay at mptd B over the kept run's measured window.
    pub hold: Option<HoldCheck>,
}

impl CcRun {
    /// Lowest and highest goodput over the tunnel runs, if more than one.
    pub fn tunnel_range(&self) -> Option<(f64, f64)> {
        if self.tunnel_runs_mbps.len() < 2 {
            return None;
        }
        let lo = self
            .tunnel_runs_mbps
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let hi = self
            .tunnel_runs_mbps
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        Some((lo, hi))
    }
}

/// Index of the run whose goodput is the median of `mbps`: the middle one
/// in ascending order, for an even count the lower of the two middle ones
/// (runs with equal goodputs keep their order). `None` for no runs.
pub fn median_run(mbps: &[f64]) -> Option<usize> {
    let mut order: Vec<usize> = (0..mbps.len()).collect();
    // Stable: equal goodputs keep their run order.
    order.sort_by(|&a, &b| mbps[a].total_cmp(&mbps[b]));
    order.get(mbps.len().checked_sub(1)? / 2).copied()
}

/// Results of one `unlike` case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UnlikeResult {
    pub case: String,
    pub paths: Vec<PathInfo>,
    pub target: Option<Target>,
    pub omit_s: f64,
    pub runs: Vec<CcRun>,
}

fn pct(a: Option<Duration>, b: Option<Duration>, wall: Duration) -> Option<f64> {
    let (a, b) = (a?, b?);
    (wall > Duration::ZERO).then(|| 100.0 * b.saturating_sub(a).as_secs_f64() / wall.as_secs_f64())
}

pub fn run_case(
    k: usize,
    case: &Case,
    s: &Scenario,
    p: &UnlikeParams,
    opts: &Options,
    work: &Path,
    stop: &AtomicBool,
) -> anyhow::Result<Row> {
    let total = s.cases.len();
    let uc = p
        .cases
        .get(k)
        .context("unlike: a case without its settings")?;
    check_stop(stop)?;
    let desc: Vec<String> = uc
        .paths
        .iter()
        .map(|pi| {
            let mut d = format!(
                "{} {} RTT {:.0} ms",
                pi.name,
                pi.rate_mbps
                    .map_or("unlimited".into(), |r| format!("{r:.0} Mbit/s")),
                pi.rtt_ms
            );
            if pi.loss > 0.0 {
                let _ = write!(d, " loss {:.1} %", pi.loss * 100.0);
            }
            if let Some(t) = &pi.trace {
                let _ = write!(d, " trace {t}");
            }
            d
        })
        .collect();
    progress(
        k,
        total,
        case,
        &format!("building testbed ({})", desc.join(" + ")),
    );
    let mut tb = Testbed::build(k, case, work, &opts.mptd, stop)
        .with_context(|| format!("case {}: building the testbed", k + 1))?;
    let plan = tb.plan.clone();
    let tun_target = plan.inner(2);
    let secs = format!(
        "{} s{}",
        s.duration.as_secs(),
        if p.omit > Duration::ZERO {
            format!(" after {} s ramp-up", p.omit.as_secs())
        } else {
            String::new()
        }
    );
    let mut runs = Vec::new();
    let me = std::process::id();
    let (mut emu_cpu, mut emu_wall) = (Duration::ZERO, Duration::ZERO);
    for cc in &p.cc {
        let mut raw = Vec::new();
        for (i, pi) in uc.paths.iter().enumerate() {
            check_stop(stop)?;
            if tb.wire_failed() {
                bail!("an emulator wire stopped; see the log");
            }
            tb.restart_traced_wires()?;
            progress(
                k,
                total,
                case,
                &format!("{cc}: raw TCP over {} alone ({secs})", pi.name),
            );
            let json = work.join(format!("iperf3-{k}-{cc}-raw{i}.json"));
            let target = plan.outer(i, 2);
            let m = iperf::run(
                &iperf::Run {
                    ns: tb.a.name(),
                    server_ns: tb.b.name(),
                    target: &target,
                    duration: s.duration,
                    udp: None,
                    json_out: &json,
                    cc: Some(cc),
                    omit: p.omit,
                    streams: 1,
                },
                stop,
            )
            .with_context(|| {
                format!(
                    "case {} ({}): {cc} raw TCP over {}",
                    k + 1,
                    uc.name,
                    pi.name
                )
            })?;
            println!("    {}", fmt_measurement(&m));
            raw.push(m);
        }
        let n = p.repeat;
        let mut tunnel_runs: Vec<TunnelRun> = Vec::with_capacity(n);
        for i in 1..=n {
            check_stop(stop)?;
            if tb.wire_failed() {
                bail!("an emulator wire stopped; see the log");
            }
            tb.restart_traced_wires()?;
            let (of, prefix, json) = if n > 1 {
                (
                    format!(", run {i}/{n}"),
                    format!("run {i}/{n}: "),
                    work.join(format!("iperf3-{k}-{cc}-tunnel-run{i}.json")),
                )
            } else {
                (
                    String::new(),
                    String::new(),
                    work.join(format!("iperf3-{k}-{cc}-tunnel.json")),
                )
            };
            progress(
                k,
                total,
                case,
                &format!(
                    "{cc}: TCP through the tunnel over {} paths ({secs}){of}",
                    uc.paths.len()
                ),
            );
            let self0 = testbed::cpu_time(me);
            let t = measure_tunnel(&tb, &tun_target, &json, cc, s, p, &uc.paths, stop)
                .with_context(|| {
                    format!(
                        "case {} ({}): {cc} TCP through the tunnel{of}",
                        k + 1,
                        uc.name
                    )
                })?;
            if let (Some(a), Some(b)) = (self0, testbed::cpu_time(me)) {
                emu_cpu += b.saturating_sub(a);
                emu_wall += t.wall;
            }
            println!("    {prefix}{}", fmt_measurement(&t.m));
            if let Some(h) = &t.hold {
                println!(
                    "    {prefix}resequencing hold p99 {} ms over all {} packets ({} held: p99 {} ms); \
                     delay spread configured {:.1} ms, measured p99 {} ms; <= measured + {:.0} ms: {}",
                    fmt_p99(h),
                    h.delivered,
                    h.held,
                    opt(h.p99_held_ms, 1),
                    h.spread_ms,
                    opt(h.measured_spread_ms, 1),
                    hold::MARGIN_MS,
                    hold_label(h)
                );
            }
            tunnel_runs.push(t);
        }
        let tunnel_mbps: Vec<f64> = tunnel_runs.iter().map(|t| t.m.mbps).collect();
        let kept = median_run(&tunnel_mbps).context("unlike: no tunnel run")?;
        let t = tunnel_runs.swap_remove(kept);
        let raw_mbps: Vec<f64> = raw.iter().map(|m| m.mbps).collect();
        let v = verdict(&raw_mbps, t.m.mbps, uc.target);
        let run = CcRun {
            cc: cc.clone(),
            raw,
            tunnel: t.m,
            tunnel_run: kept + 1,
            tunnel_runs_mbps: tunnel_mbps,
            verdict: v,
            cpu_a_pct: t.cpu_a_pct,
            cpu_b_pct: t.cpu_b_pct,
            hold: t.hold,
        };
        if let Some((lo, hi)) = run.tunnel_range() {
            println!(
                "    median of {n} runs: run {}/{n}, {:.2} Mbit/s (runs {lo:.2}..{hi:.2})",
                run.tunnel_run, run.tunnel.mbps
            );
        }
        println!(
            "    tunnel / best raw {} , tunnel / sum of raw {} ; target {}: {}",
            opt(run.verdict.frac_best, 2),
            opt(run.verdict.frac_sum, 2),
            uc.target.label(),
            pass_label(run.verdict.pass)
        );
        runs.push(run);
    }
    for proc_ in [&mut tb.mptd_a, &mut tb.mptd_b] {
        if let Some(st) = proc_.exited() {
            bail!(
                "{} died during the measurements ({st}):\n{}",
                proc_.name,
                proc_.log_tail()
            );
        }
    }
    let ideal: f64 = uc.paths.iter().filter_map(|pi| pi.mean_rate_mbps).sum();
    let mean = |f: fn(&CcRun) -> Option<f64>| {
        let v: Vec<f64> = runs.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let mut row = Row {
        combo: case.combo.label(),
        n: case.n,
        paths: case.links.len(),
        ideal_mbps: ideal,
        cpu_a_pct: mean(|r| r.cpu_a_pct),
        cpu_b_pct: mean(|r| r.cpu_b_pct),
        emu_cpu_pct: super::report::self_cpu_pct(Some(Duration::ZERO), Some(emu_cpu), emu_wall),
        ..Row::default()
    };
    row.mptd_status_a = match testbed::mptd_status(&tb.control_a) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(error = %e, "no status from mptd A");
            None
        }
    };
    row.tunnel_rtt_ms = super::report::mean_path_rtt(row.mptd_status_a.as_ref());
    row.wires = tb.stop_wires();
    row.unlike = Some(UnlikeResult {
        case: uc.name.clone(),
        paths: uc.paths.clone(),
        target: Some(uc.target),
        omit_s: p.omit.as_secs_f64(),
        runs,
    });
    row.finish();
    progress(k, total, case, "tearing down");
    drop(tb);
    Ok(row)
}

/// One TCP run through the tunnel.
struct TunnelRun {
    m: Measurement,
    /// Resequencing delay at mptd B over the measured window.
    hold: Option<HoldCheck>,
    /// CPU use of mptd A and B over the run, % of a core.
    cpu_a_pct: Option<f64>,
    cpu_b_pct: Option<f64>,
    /// How long the run took.
    wall: Duration,
}

/// Runs iperf3 through the tunnel once with `cc`, reading mptd B's
/// resequencer at the start of the measured window (after the ramp-up
/// iperf3 leaves out) and at its end, and the delay spread it measures,
/// sampled through the window.
#[allow(clippy::too_many_arguments)]
fn measure_tunnel(
    tb: &Testbed,
    target: &str,
    json: &Path,
    cc: &str,
    s: &Scenario,
    p: &UnlikeParams,
    paths: &[PathInfo],
    stop: &AtomicBool,
) -> anyhow::Result<TunnelRun> {
    let c0 = (tb.mptd_a.cpu_time(), tb.mptd_b.cpu_time(), Instant::now());
    let iperf_done = AtomicBool::new(false);
    let (m, sampled) = std::thread::scope(|sc| {
        let control_b = &tb.control_b;
        let iperf_done = &iperf_done;
        let snap = sc.spawn(move || {
            let until = Instant::now() + p.omit;
            while Instant::now() < until && check_stop(stop).is_ok() {
                std::thread::sleep(Duration::from_millis(50));
            }
            let start = receiver_snapshot(control_b);
            let mut spreads = Vec::new();
            while !iperf_done.load(std::sync::atomic::Ordering::Relaxed) && check_stop(stop).is_ok()
            {
                if let Some(d) = testbed::mptd_status(control_b)
                    .ok()
                    .and_then(|st| hold::rx_spread(&st))
                {
                    spreads.push(d);
                }
                std::thread::sleep(SPREAD_SAMPLE_EVERY);
            }
            (start, spreads)
        });
        let m = iperf::run(
            &iperf::Run {
                ns: tb.a.name(),
                server_ns: tb.b.name(),
                target,
                duration: s.duration,
                udp: None,
                json_out: json,
                cc: Some(cc),
                omit: p.omit,
                streams: 1,
            },
            stop,
        );
        iperf_done.store(true, std::sync::atomic::Ordering::Relaxed);
        (m, snap.join().ok())
    });
    let m = m?;
    let hold_end = receiver_snapshot(&tb.control_b);
    let (hold_start, spreads) = sampled.unwrap_or((None, Vec::new()));
    let measured_spread = hold::spread_p99(&spreads);
    let hold = match (hold_start, hold_end) {
        (Some(a), Some(b)) => a
            .until(&b)
            .map(|w| HoldCheck::new(&w, configured_spread(paths), measured_spread)),
        _ => None,
    };
    let wall = c0.2.elapsed();
    Ok(TunnelRun {
        m,
        hold,
        cpu_a_pct: pct(c0.0, tb.mptd_a.cpu_time(), wall),
        cpu_b_pct: pct(c0.1, tb.mptd_b.cpu_time(), wall),
        wall,
    })
}

/// The receiving daemon's resequencer counters, if it answers.
fn receiver_snapshot(control: &Path) -> Option<Snapshot> {
    match testbed::mptd_status(control) {
        Ok(st) => Snapshot::from_status(&st),
        Err(e) => {
            tracing::warn!(error = %e, "no status from mptd B");
            None
        }
    }
}

/// How often the receiver's measured delay spread is sampled during a
/// tunnel measurement (a status request costs mptd well under a
/// millisecond).
const SPREAD_SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Spread of the paths' configured one-way delays (RTT / 2 each way), ms.
fn configured_spread(paths: &[PathInfo]) -> f64 {
    hold::spread(paths.iter().map(|p| p.rtt_ms / 2.0)).unwrap_or(0.0)
}

/// p99 over all packets: its bucket's upper limit, or `lo..hi`.
fn fmt_p99(h: &HoldCheck) -> String {
    match (h.p99_all_lo_ms, h.p99_all_ms) {
        (Some(lo), Some(hi)) if hi > 0.0 => format!(
            "{}..{} (~{})",
            ms_label(lo),
            ms_label(hi),
            opt(h.p99_all_est_ms, 1)
        ),
        (_, Some(hi)) => ms_label(hi),
        _ => "-".into(),
    }
}

/// Whole milliseconds without decimals (bucket limits), others to 0.1 ms.
fn ms_label(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// PASS/FAIL when the bucket decides, ~PASS/~FAIL by the estimate inside
/// a bucket that straddles the limit.
fn hold_label(h: &HoldCheck) -> &'static str {
    match (h.pass, h.pass_estimate) {
        (Some(true), _) => "PASS",
        (Some(false), _) => "FAIL",
        (None, Some(true)) => "~PASS",
        (None, Some(false)) => "~FAIL",
        (None, None) => "n/a",
    }
}

fn fmt_measurement(m: &Measurement) -> String {
    format!(
        "{:.2} Mbit/s{}",
        m.mbps,
        m.retransmits
            .map_or(String::new(), |r| format!(", {r} retransmits"))
    )
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}"))
}

fn pass_label(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "PASS",
        Some(false) => "FAIL",
        None => "n/a",
    }
}

/// Lays out rows of cells in columns (the first `left` columns left-aligned).
fn columns(rows: &[Vec<String>], left: usize) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c < left {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}

fn results(r: &Report) -> impl Iterator<Item = (&Row, &UnlikeResult)> {
    r.rows
        .iter()
        .filter_map(|row| row.unlike.as_ref().map(|u| (row, u)))
}

pub fn table(r: &Report) -> String {
    let mut rows = vec![vec![
        "case".to_string(),
        "cc".into(),
        "raw per path alone".into(),
        "best".into(),
        "sum".into(),
        "tunnel".into(),
        "runs min..max".into(),
        "/best".into(),
        "/sum".into(),
        "target".into(),
        "result".into(),
        "hold p99 ms".into(),
        "spread ms".into(),
        "measured".into(),
        "hold".into(),
        "CPU A/B %".into(),
    ]];
    let mut omit = 0.0;
    let mut repeats: Vec<usize> = Vec::new();
    for (_, u) in results(r) {
        omit = u.omit_s;
        for run in &u.runs {
            let n = run.tunnel_runs_mbps.len().max(1);
            if !repeats.contains(&n) {
                repeats.push(n);
            }
            let raw: Vec<String> = u
                .paths
                .iter()
                .zip(&run.raw)
                .map(|(p, m)| format!("{} {:.2}", p.name, m.mbps))
                .collect();
            rows.push(vec![
                u.case.clone(),
                run.cc.clone(),
                raw.join(" + "),
                format!("{:.2}", run.verdict.best_raw_mbps),
                format!("{:.2}", run.verdict.sum_raw_mbps),
                format!("{:.2}", run.tunnel.mbps),
                run.tunnel_range().map_or("-".into(), |(lo, hi)| {
                    format!("{}: {lo:.2}..{hi:.2}", run.tunnel_runs_mbps.len())
                }),
                opt(run.verdict.frac_best, 2),
                opt(run.verdict.frac_sum, 2),
                u.target.map_or("-".into(), |t| t.label()),
                pass_label(run.verdict.pass).into(),
                run.hold.as_ref().map_or("-".into(), fmt_p99),
                run.hold
                    .as_ref()
                    .map_or("-".into(), |h| format!("{:.1}", h.spread_ms)),
                run.hold
                    .as_ref()
                    .map_or("-".into(), |h| opt(h.measured_spread_ms, 1)),
                run.hold.as_ref().map_or("-", hold_label).into(),
                format!("{}/{}", opt(run.cpu_a_pct, 0), opt(run.cpu_b_pct, 0)),
            ]);
        }
    }
    let mut s = columns(&rows, 3);
    repeats.sort_unstable();
    let counts: Vec<String> = repeats.iter().map(usize::to_string).collect();
    let _ = writeln!(
        s,
        "Mbit/s: iperf3 TCP goodput at the receiver, one stream, over {:.0} s after leaving out the \
         first {omit:.0} s; raw = each path alone without the tunnel, same congestion control, one run \
         each; tunnel = the median of {} run(s) through the tunnel (the lower middle one for an even \
         count), the run judged, with its hold and CPU; runs min..max = count: lowest..highest tunnel \
         run; /best, /sum = tunnel / best raw path, / sum of raw paths; mptd's default scheduler \
         unless --scheduler, equal weights",
        r.duration_s,
        if counts.is_empty() { "1".into() } else { counts.join(" or ") }
    );
    let _ = writeln!(
        s,
        "hold p99: 99th percentile of the time mptd B's resequencer held a packet, over all packets it \
         delivered in the measured window (not held = 0), as the range of its histogram bucket (ms); \
         ~ = interpolated in the bucket; spread = slowest - fastest configured one-way delay; \
         measured = the spread mptd B measured on the paths bringing data, queueing included \
         (p99 of samples every 250 ms); hold: p99 <= measured (else configured) spread + {:.0} ms \
         (~PASS/~FAIL: the bucket straddles the limit, judged by the estimate); p99 over held \
         packets only in results.csv",
        hold::MARGIN_MS
    );
    for (_, u) in results(r) {
        let paths: Vec<String> = u
            .paths
            .iter()
            .map(|p| {
                let mut d = format!(
                    "{} {} Mbit/s RTT {:.0} ms queue {} kB",
                    p.name,
                    opt(p.mean_rate_mbps, 1),
                    p.rtt_ms,
                    p.queue_bytes / 1000
                );
                if p.loss > 0.0 {
                    let _ = write!(d, " loss {:.1} %", p.loss * 100.0);
                }
                if let Some(t) = &p.trace {
                    let _ = write!(d, " (mean of trace {t})");
                }
                d
            })
            .collect();
        let _ = writeln!(s, "  {}: {}", u.case, paths.join("; "));
    }
    s
}

pub fn csv(r: &Report) -> String {
    let maxp = results(r).map(|(_, u)| u.paths.len()).max().unwrap_or(0);
    let mut s = String::from("case,cc,paths");
    for i in 1..=maxp {
        let _ = write!(
            s,
            ",path{i}_name,path{i}_rate_mbps,path{i}_rtt_ms,path{i}_loss,path{i}_queue_bytes,\
             path{i}_raw_mbps,path{i}_raw_retransmits"
        );
    }
    s += ",best_raw_mbps,sum_raw_mbps,tunnel_mbps,tunnel_retransmits,tunnel_run,tunnel_runs_mbps,\
          frac_best,frac_sum,\
          target_of,target_ratio,required_mbps,pass,cpu_a_pct,cpu_b_pct,duration_s,omit_s,\
          hold_delivered,hold_held,hold_p99_all_lo_ms,hold_p99_all_ms,hold_p99_all_est_ms,hold_p99_held_ms,\
          hold_mean_held_ms,spread_ms,measured_spread_ms,hold_limit_ms,hold_pass,hold_pass_estimate\n";
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.4}"));
    let retr = |m: &Measurement| m.retransmits.map_or(String::new(), |v| v.to_string());
    for (_, u) in results(r) {
        for run in &u.runs {
            let _ = write!(s, "{},{},{}", u.case, run.cc, u.paths.len());
            for i in 0..maxp {
                match (u.paths.get(i), run.raw.get(i)) {
                    (Some(p), Some(m)) => {
                        let _ = write!(
                            s,
                            ",{},{},{:.1},{},{},{:.4},{}",
                            p.name,
                            o(p.mean_rate_mbps),
                            p.rtt_ms,
                            p.loss,
                            p.queue_bytes,
                            m.mbps,
                            retr(m)
                        );
                    }
                    _ => s += ",,,,,,,",
                }
            }
            let v = &run.verdict;
            let _ = writeln!(
                s,
                ",{:.4},{:.4},{:.4},{},{},{},{},{},{},{},{:.4},{},{},{},{},{}",
                v.best_raw_mbps,
                v.sum_raw_mbps,
                run.tunnel.mbps,
                retr(&run.tunnel),
                run.tunnel_run,
                run.tunnel_runs_mbps
                    .iter()
                    .map(|m| format!("{m:.4}"))
                    .collect::<Vec<_>>()
                    .join("/"),
                o(v.frac_best),
                o(v.frac_sum),
                u.target.map_or("", |t| t.of.label()),
                u.target.map_or(String::new(), |t| t.ratio.to_string()),
                v.required_mbps,
                v.pass.map_or(String::new(), |p| p.to_string()),
                o(run.cpu_a_pct),
                o(run.cpu_b_pct),
                r.duration_s,
                u.omit_s
            );
            s.pop();
            match &run.hold {
                Some(h) => {
                    let _ = writeln!(
                        s,
                        ",{},{},{},{},{},{},{},{:.2},{},{:.2},{},{}",
                        h.delivered,
                        h.held,
                        o(h.p99_all_lo_ms),
                        o(h.p99_all_ms),
                        o(h.p99_all_est_ms),
                        o(h.p99_held_ms),
                        o(h.mean_held_ms),
                        h.spread_ms,
                        o(h.measured_spread_ms),
                        h.limit_ms,
                        h.pass.map_or(String::new(), |p| p.to_string()),
                        h.pass_estimate.map_or(String::new(), |p| p.to_string())
                    );
                }
                None => s += ",,,,,,,,,,,,\n",
            }
        }
    }
    s
}

/// Bars per case and congestion control: each raw path alone, the tunnel,
/// and the target as a dashed mark.
pub fn svg(r: &Report) -> String {
    let mut c = BarChart {
        title: format!(
            "mpt bench {}: one TCP stream, raw paths alone vs the tunnel",
            r.scenario
        ),
        ylabel: "goodput (Mbit/s)".into(),
        groups: Vec::new(),
    };
    for (_, u) in results(r) {
        for run in &u.runs {
            let mut bars: Vec<(String, f64)> = run
                .raw
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("raw path {} alone", i + 1), m.mbps))
                .collect();
            // The median tunnel run (the one judged).
            bars.push(("tunnel".into(), run.tunnel.mbps));
            c.groups.push(BarGroup {
                label: format!("{}\n{}", u.case, run.cc),
                bars,
                mark: u
                    .target
                    .map(|t| (run.verdict.required_mbps, format!("target {}", t.label()))),
            });
        }
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::scenario::{load, Overrides};

    fn target(of: TargetKind, ratio: f64) -> Target {
        Target { of, ratio }
    }

    #[test]
    fn verdict_against_best_and_sum() {
        let v = verdict(&[20.0, 10.0], 21.0, target(TargetKind::Best, 1.0));
        assert_eq!(v.best_path, Some(0));
        assert_eq!(v.best_raw_mbps, 20.0);
        assert_eq!(v.sum_raw_mbps, 30.0);
        assert_eq!(v.frac_best, Some(1.05));
        assert_eq!(v.frac_sum, Some(0.7));
        assert_eq!(v.required_mbps, 20.0);
        assert_eq!(v.pass, Some(true));
        let v = verdict(&[20.0, 10.0], 21.0, target(TargetKind::Sum, 0.9));
        assert_eq!(v.required_mbps, 27.0);
        assert_eq!(v.pass, Some(false));
        // Exactly on the target passes.
        let v = verdict(&[10.0, 30.0], 36.0, target(TargetKind::Sum, 0.9));
        assert_eq!(v.best_path, Some(1));
        assert_eq!(v.pass, Some(true));
        // No baseline: no verdict.
        let v = verdict(&[0.0, 0.0], 5.0, target(TargetKind::Best, 1.0));
        assert_eq!((v.pass, v.frac_best, v.best_path), (None, None, None));
        assert_eq!(verdict(&[], 5.0, target(TargetKind::Sum, 1.0)).pass, None);
    }

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
        super::super::scenario::expand("t", "t", f, ov)
    }

    #[test]
    fn median_run_is_the_middle_or_lower_middle() {
        assert_eq!(median_run(&[]), None);
        assert_eq!(median_run(&[7.0]), Some(0));
        // Odd: the middle value wherever it ran.
        assert_eq!(median_run(&[30.0, 10.0, 20.0]), Some(2));
        assert_eq!(median_run(&[10.0, 20.0, 30.0]), Some(1));
        assert_eq!(median_run(&[5.0, 1.0, 4.0, 2.0, 3.0]), Some(4));
        // Even: the lower of the two middle ones.
        assert_eq!(median_run(&[20.0, 10.0]), Some(1));
        assert_eq!(median_run(&[10.0, 20.0]), Some(0));
        assert_eq!(median_run(&[40.0, 10.0, 30.0, 20.0]), Some(3));
        // Equal goodputs keep their run order.
        assert_eq!(median_run(&[15.0, 15.0, 15.0]), Some(1));
        assert_eq!(median_run(&[15.0, 15.0]), Some(0));
        assert_eq!(median_run(&[9.0, 15.0, 1.0, 15.0]), Some(0));
        assert_eq!(median_run(&[15.0, 9.0, 15.0, 20.0]), Some(0));
        // A run that carried nothing is the lowest.
        assert_eq!(median_run(&[0.0, 12.0, 11.0]), Some(2));
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

    #[test]
    fn report_formats() {
        let m = |v| Measurement {
            mbps: v,
            retransmits: Some(3),
            ..Measurement::default()
        };
        let t = target(TargetKind::Sum, 0.9);
        let run = CcRun {
            cc: "bbr".into(),
            raw: vec![m(45.0), m(18.0)],
            tunnel: m(50.0),
            tunnel_run: 3,
            tunnel_runs_mbps: vec![60.0, 40.0, 50.0],
            verdict: verdict(&[45.0, 18.0], 50.0, t),
            cpu_a_pct: Some(30.0),
            cpu_b_pct: None,
            hold: Some(HoldCheck::new(
                &Snapshot {
                    not_held: 990,
                    held: 10,
                    counts: [0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0],
                    max_us: 25_000,
                    sum_us: 220_000,
                },
                25.0,
                Some(24.0),
            )),
        };
        let row = Row {
            unlike: Some(UnlikeResult {
                case: "wifi+lte".into(),
                paths: vec![
                    PathInfo {
                        name: "wifi".into(),
                        mean_rate_mbps: Some(50.0),
                        ..PathInfo::default()
                    },
                    PathInfo {
                        name: "lte".into(),
                        mean_rate_mbps: Some(20.0),
                        ..PathInfo::default()
                    },
                ],
                target: Some(t),
                omit_s: 3.0,
                // A second run without the daemon's status: empty cells.
                runs: vec![
                    run.clone(),
                    CcRun {
                        cc: "cubic".into(),
                        hold: None,
                        tunnel_run: 1,
                        tunnel_runs_mbps: vec![50.0],
                        ..run
                    },
                ],
            }),
            ..Row::default()
        };
        let rep = Report {
            scenario: "unlike".into(),
            description: String::new(),
            duration_s: 20.0,
            omit_s: 0.0,
            streams: 1,
            started_unix: 0,
            wall_s: 1.0,
            cores: 2,
            kernel: String::new(),
            complete: true,
            rows: vec![row],
        };
        let table = rep.table();
        assert!(table.contains("wifi 45.00 + lte 18.00"), "{table}");
        assert!(
            table.contains(">= 0.90 x sum") && table.contains("FAIL"),
            "{table}"
        );
        assert!(table.contains("0.79"), "{table}");
        // Three tunnel runs: the median (50) and the range; one run: no range.
        assert!(table.contains("50.00  3: 40.00..60.00"), "{table}");
        let cubic: Vec<&str> = table
            .lines()
            .find(|l| l.contains(" cubic "))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        assert!(cubic.windows(2).any(|w| w == ["50.00", "-"]), "{table}");
        assert!(table.contains("the median of 1 or 3 run(s)"), "{table}");
        let csv = rep.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        let cols = |l: &str| l.split(',').count();
        assert_eq!(cols(lines[0]), cols(lines[1]));
        assert_eq!(cols(lines[0]), cols(lines[2]));
        assert!(lines[2].ends_with(",,,,,,,,,,,,"), "{}", lines[2]);
        assert!(lines[1].starts_with("wifi+lte,bbr,2,wifi,"));
        assert!(lines[1].contains(",sum,0.9,56.7000,false,"));
        assert!(
            lines[0].contains(",tunnel_mbps,tunnel_retransmits,tunnel_run,tunnel_runs_mbps,"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains(",50.0000,3,3,60.0000/40.0000/50.0000,"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains(",50.0000,3,1,50.0000,"), "{}", lines[2]);
        // 990 of 1000 packets not held: p99 over all is 0, over the held
        // ones the 16..32 ms bucket capped by the 25 ms maximum; the limit
        // is the measured spread (24 ms) + 10.
        assert!(
            lines[1].ends_with(
                ",1000,10,0.0000,0.0000,0.0000,25.0000,22.0000,25.00,24.0000,34.00,true,true"
            ),
            "{}",
            lines[1]
        );
        assert!(
            table.contains("hold p99 ms") && table.contains("PASS"),
            "{table}"
        );
        let svg = rep.svg();
        assert!(svg.contains("<rect") && svg.contains("wifi+lte"));
    }
}
