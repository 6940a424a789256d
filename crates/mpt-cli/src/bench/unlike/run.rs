//! One `unlike` case: per congestion control each raw path alone, then the
//! tunnel `repeat` times with mptd B's resequencing hold read around the
//! measured window, each followed by a kernel MPTCP run when asked
//! ([`super::baseline`]); the median runs are kept and judged.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::accel::{self, AccelResult, AccelRun};
use super::baseline::{self, MptcpBaseline, MptcpRun};
use super::def::{PathInfo, UnlikeParams};
use super::result::{CcRun, UnlikeResult};
use super::text::{fmt_measurement, fmt_p99, hold_label, pass_label};
use super::verdict::verdict;
use crate::bench::hold::{self, HoldCheck, Snapshot};
use crate::bench::iperf::{self, Measurement};
use crate::bench::mptcp;
use crate::bench::options::Options;
use crate::bench::process::cpu_time;
use crate::bench::progress::progress;
use crate::bench::report::row::{mean_path_rtt, self_cpu_pct, Row};
use crate::bench::scenario::case::Case;
use crate::bench::scenario::expanded::Scenario;
use crate::bench::stats::median_run;
use crate::bench::stop::check_stop;
use crate::bench::testbed::{self, Testbed};
use crate::bench::text::opt;

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
            d += &pi.outage_label();
            d
        })
        .collect();
    progress(
        k,
        total,
        case,
        &format!("building testbed ({})", desc.join(" + ")),
    );
    // End hosts and acceleration need IPv4 inside the tunnel.
    let with_accel = opts.accel && case.combo.inner == 4;
    let extras = testbed::Extras {
        accel: with_accel,
        accel_legs: opts.accel_legs.clone(),
        accel_congestion: uc
            .paths
            .iter()
            .map(|p| p.accel_congestion.clone())
            .collect(),
    };
    let mut tb = Testbed::build_with(k, case, work, &opts.mptd, stop, extras)
        .with_context(|| format!("case {}: building the testbed", k + 1))?;
    let plan = tb.plan.clone();
    let tun_target = plan.inner(2);
    if opts.mptcp {
        mptcp::configure(tb.a.name(), tb.b.name(), &plan, uc.paths.len())
            .with_context(|| format!("case {}: kernel MPTCP endpoints", k + 1))?;
    }
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
                    mptcp: false,
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
        let mut mptcp_runs: Vec<MptcpRun> = Vec::new();
        let mut accel_runs: Vec<AccelRun> = Vec::new();
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
            let self0 = cpu_time(me);
            let t = measure_tunnel(&tb, &tun_target, &json, cc, s, p, &uc.paths, stop)
                .with_context(|| {
                    format!(
                        "case {} ({}): {cc} TCP through the tunnel{of}",
                        k + 1,
                        uc.name
                    )
                })?;
            if let (Some(a), Some(b)) = (self0, cpu_time(me)) {
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
            let names: Vec<String> = uc.paths.iter().map(|pi| pi.name.clone()).collect();
            if opts.mptcp {
                // Right after the tunnel run, under the same load.
                check_stop(stop)?;
                tb.restart_traced_wires()?;
                progress(
                    k,
                    total,
                    case,
                    &format!(
                        "{cc}: kernel MPTCP over {} paths ({secs}){of}",
                        uc.paths.len()
                    ),
                );
                let json = work.join(format!("iperf3-{k}-{cc}-mptcp-run{i}.json"));
                let r = baseline::measure(&tb, uc.paths.len(), &json, cc, s, p, stop)
                    .with_context(|| {
                        format!("case {} ({}): {cc} kernel MPTCP{of}", k + 1, uc.name)
                    })?;
                println!(
                    "    {prefix}MPTCP {}; bytes per path: {}{}",
                    fmt_measurement(&r.m),
                    r.paths.label(&names),
                    if r.paths.all_paths_used {
                        ""
                    } else {
                        " (FLAG: a path carried < 1 %, not a multipath baseline)"
                    }
                );
                mptcp_runs.push(r);
            }
            if with_accel {
                check_stop(stop)?;
                tb.restart_traced_wires()?;
                progress(
                    k,
                    total,
                    case,
                    &format!("{cc}: TCP end host to end host, accelerated ({secs}){of}"),
                );
                let json = work.join(format!("iperf3-{k}-{cc}-accel-run{i}.json"));
                let r = accel::measure(&tb, &json, cc, s, p, stop).with_context(|| {
                    format!("case {} ({}): {cc} accelerated TCP{of}", k + 1, uc.name)
                })?;
                let by_path = if r.split_by_path.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", r.by_path_label(&names))
                };
                println!(
                    "    {prefix}accelerated {}; legs carried {} MB{by_path} in {} flows{}",
                    fmt_measurement(&r.m),
                    r.split_bytes / 1_000_000,
                    r.split_flows,
                    if r.split {
                        ""
                    } else {
                        " (FLAG: not split at A, no ratios)"
                    }
                );
                accel_runs.push(r);
            }
        }
        let tunnel_mbps: Vec<f64> = tunnel_runs.iter().map(|t| t.m.mbps).collect();
        let kept = median_run(&tunnel_mbps).context("unlike: no tunnel run")?;
        let t = tunnel_runs.swap_remove(kept);
        let raw_mbps: Vec<f64> = raw.iter().map(|m| m.mbps).collect();
        let v = verdict(&raw_mbps, t.m.mbps, uc.target);
        let mptcp = MptcpBaseline::from_runs(mptcp_runs, t.m.mbps, v.sum_raw_mbps);
        let accel = AccelResult::from_runs(accel_runs, mptcp.as_ref(), v.sum_raw_mbps, t.m.mbps)
            .map(|a| AccelResult {
                legs: opts.accel_legs.clone(),
                ..a
            });
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
            mptcp,
            accel,
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
        if let Some(b) = &run.mptcp {
            println!(
                "    kernel MPTCP {:.2} Mbit/s (run {}/{n}), / sum of raw {}; mpt / MPTCP {}{}",
                b.kept.m.mbps,
                b.run,
                opt(b.frac_sum, 2),
                opt(b.mpt_over_mptcp, 2),
                if b.kept.paths.all_paths_used {
                    ""
                } else {
                    " (flagged: MPTCP used one path)"
                }
            );
        }
        if let Some(a) = &run.accel {
            println!(
                "    accelerated {:.2} Mbit/s (run {}/{n}); accel / MPTCP {}, accel / sum of raw {}, \
                 accel / tunnel {}",
                a.kept.m.mbps,
                a.run,
                opt(a.over_mptcp, 2),
                opt(a.over_sum, 2),
                opt(a.over_tunnel, 2)
            );
        }
        runs.push(run);
    }
    let objects = if uc.objects && p.objects > 0 && case.combo.inner == 4 {
        check_stop(stop)?;
        let mptcp = opts.mptcp && case.combo.outer == 4;
        let say = |what: &str| progress(k, total, case, what);
        Some(
            super::objects::measure(&tb, p.objects, p.repeat, mptcp, &say, stop)
                .with_context(|| format!("case {} ({}): 1 MB objects", k + 1, uc.name))?,
        )
    } else {
        None
    };
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
        emu_cpu_pct: self_cpu_pct(Some(Duration::ZERO), Some(emu_cpu), emu_wall),
        ..Row::default()
    };
    row.mptd_status_a = match testbed::mptd_status(&tb.control_a) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(error = %e, "no status from mptd A");
            None
        }
    };
    row.tunnel_rtt_ms = mean_path_rtt(row.mptd_status_a.as_ref());
    row.wires = tb.stop_wires();
    row.unlike = Some(UnlikeResult {
        case: uc.name.clone(),
        paths: uc.paths.clone(),
        target: Some(uc.target),
        omit_s: p.omit.as_secs_f64(),
        runs,
        objects,
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
                mptcp: false,
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
