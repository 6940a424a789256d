//! `mpt emu selftest`: measures the emulator against its accuracy bounds on
//! this machine, end to end.
//!
//! It builds three namespaces (endpoints `a`, `b`, wire in `m`; see
//! [`Testbed`]), runs the real wire in-process for each case, sends UDP
//! traffic from `a` to `b` and measures at the receiver with kernel
//! timestamps. Every case checks one figure against its bound:
//!
//! | case | bound |
//! |---|---|
//! | capacity: full-size frames flat out, nothing shaped | reported; sets the top rate |
//! | rate 1, 10, 100 Mbit/s, ... up to the top rate | achieved within +-1 % up to 100 Mbit/s, +-5 % above |
//! | Mahimahi trace, 1000 packets/s mean with gaps | achieved mean within +-2 %, no outage drops |
//! | delay 300 ms, >= 1000 packets | mean error (one-way minus 300 ms) < 0.1 ms |
//! | loss, PER 5 % | lost count inside the exact 99 % binomial interval |
//! | outage windows | every edge within 5 ms of schedule |
//! | relay custody | every packet sent during the outage delivered, in order, after it |
//!
//! Why the top rate is measured, not fixed: what a machine can verify is
//! what its own path (sender, wire, receiver, all on the same cores) can
//! carry while other work runs. A fixed 3 Gbit/s check sat near that limit
//! on the 2-core CI VM and failed two runs in three under a parallel build
//! (2.888 Gbit/s, most frames never read). So the self-test first measures
//! the capacity of the path with the shaper off, then checks the decades
//! from 1 Mbit/s up to [`TOP_FRACTION`] of it, rounded down to one
//! significant digit. Every rate is offered at [`OFFERED_FACTOR`] times
//! itself, so a shaper that ignored the rate would pass the excess through
//! (+10 %, measured: a wire with its rate disabled gave +10.0 % at every
//! rate and +20 % on the Mahimahi trace) and fail every bound.
//!
//! At 1 Gbit/s and more the wire's thread polls without ever sleeping, so
//! the kernel's real-time throttling (95 % of each second by default) can
//! stop it for up to 50 ms a second, and the far end's receive path runs on
//! its CPU too; the absolute timeline catches up only as fast as the spare
//! capacity allows (see [`rate_bound_pct`]). The receiver may fall behind
//! at these rates; the socket's drop counter (`SO_RXQ_OVFL`) tells how many
//! datagrams arrived between two it read.
//!
//! The delay error is measured end to end, so it includes the veth and
//! socket path (tens of microseconds), not only the wire's own departure
//! error, which is reported beside it as the paper's Table 1 figure.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use tracing::{info, warn};

use super::loss::{GeParams, LossConfig};
use super::model::LinkConfig;
use super::netns::{self, Testbed, M_A_IF, M_B_IF};
use super::schedule::{Schedule, Window};
use super::stats::{DirectionReport, Welford};
use super::sys;
use super::traffic::{self, Flow, Record, SendLog};
use super::units::format_rate;
use super::wire::{Wire, WireConfig, WireError, DEFAULT_RT_PRIORITY};

/// Seed of every case, so a failing run can be repeated exactly.
pub const SEED: u64 = 0x6d70_7465_6d75;

/// Real-time priorities of the test traffic: below the wire's threads,
/// above everything else on the machine. The sender stamps each datagram
/// just before sending, so a preemption in between would show up as link
/// error; and at 1 Gbit/s and more an ordinary sender loses its CPU to any
/// other busy process for milliseconds, then catches up in a burst that
/// overflows the link's queue (measured on the 2-core CI VM under a
/// parallel build: half the frames dropped at 1 Gbit/s, the link idle half
/// the time). The receiver is real-time too, just below the sender, so a
/// saturated sender cannot starve it: it runs whenever the sender sleeps.
const RT_SENDER: i32 = DEFAULT_RT_PRIORITY - 5;
const RT_RECEIVER: i32 = DEFAULT_RT_PRIORITY - 6;

/// Full-size frame: 1472-byte UDP payload = 1500-byte IP packet.
const FULL_PAYLOAD: usize = 1472;

#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    #[error("interrupted")]
    Interrupted,
    #[error("testbed: {0}")]
    Testbed(io::Error),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("traffic: {0}")]
    Traffic(io::Error),
}

/// One line of the result table.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub requested: String,
    pub measured: String,
    pub bound: String,
    /// `None`: informational, no bound.
    pub pass: Option<bool>,
    /// The figures behind `measured`, for scripts.
    pub values: serde_json::Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct SelftestReport {
    pub passed: bool,
    pub wall_s: f64,
    pub seed: u64,
    pub accounting: &'static str,
    pub checks: Vec<Check>,
}

const ACCOUNTING: &str = "rates count whole Ethernet frames as the packet socket sees them \
     (14-byte header + IP packet; no preamble, FCS or inter-frame gap)";

impl SelftestReport {
    pub fn render(&self) -> String {
        let header = ["check", "requested", "measured", "bound", "result"];
        let rows: Vec<[String; 5]> = self
            .checks
            .iter()
            .map(|c| {
                [
                    c.name.clone(),
                    c.requested.clone(),
                    c.measured.clone(),
                    c.bound.clone(),
                    match c.pass {
                        Some(true) => "ok".into(),
                        Some(false) => "FAIL".into(),
                        None => "info".into(),
                    },
                ]
            })
            .collect();
        let mut width = header.map(str::len);
        for r in &rows {
            for (w, cell) in width.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 5]| {
            let mut s = String::new();
            for (i, (cell, w)) in cells.iter().zip(width).enumerate() {
                if i + 1 == cells.len() {
                    s += cell;
                } else {
                    s += &format!("{cell:<w$}  ");
                }
            }
            s + "\n"
        };
        let mut out = format!("mpt emu selftest: {ACCOUNTING}\n\n");
        out += &line(header);
        for r in &rows {
            out += &line([&r[0], &r[1], &r[2], &r[3], &r[4]]);
        }
        out += &format!(
            "\n{} in {:.1} s (seed {:#x})\n",
            if self.passed { "PASS" } else { "FAIL" },
            self.wall_s,
            self.seed
        );
        out
    }
}

/// What one case produced.
pub struct CaseOutcome {
    pub log: SendLog,
    pub records: Vec<Record>,
    pub wire: DirectionReport,
    pub epoch: Instant,
    /// CLOCK_REALTIME at the wire's epoch, ns.
    pub epoch_rt_ns: u64,
}

fn sleep_checked(d: Duration, stop: &AtomicBool) -> Result<(), SelftestError> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return Err(SelftestError::Interrupted);
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(10)));
    }
    Ok(())
}

/// Runs `flow` from `a` to `b` through a wire configured with `link` in the
/// a -> b direction, then waits `linger` for the tail to arrive.
pub fn run_case(
    bed: &Testbed,
    link: LinkConfig,
    flow: Flow,
    linger: Duration,
    stop: &AtomicBool,
) -> Result<CaseOutcome, SelftestError> {
    let (tx, rx) = traffic::open_pair(bed).map_err(SelftestError::Traffic)?;
    let collector = traffic::spawn_receiver(rx, Some(RT_RECEIVER));
    let wire = Wire::start(WireConfig {
        a: M_A_IF.into(),
        b: M_B_IF.into(),
        netns: Some(bed.m.name().to_string()),
        a_to_b: link,
        b_to_a: LinkConfig::default(),
        seed: SEED,
        disable_offloads: false,
        realtime_priority: Some(DEFAULT_RT_PRIORITY),
    })?;
    let epoch = wire.epoch();
    let epoch_rt_ns = traffic::realtime_ns().saturating_sub(epoch.elapsed().as_nanos() as u64);
    let sent = std::thread::scope(|s| {
        s.spawn(|| {
            if let Err(e) = sys::set_realtime(RT_SENDER) {
                warn!(error = %e, "sender cannot use SCHED_FIFO; timing may suffer");
            }
            traffic::send_flow(&tx, &flow, stop)
        })
        .join()
    })
    .map_err(|_| SelftestError::Traffic(io::Error::other("sender thread panicked")))?;
    let log = match sent {
        Ok(log) => log,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(SelftestError::Interrupted),
        Err(e) => return Err(SelftestError::Traffic(e)),
    };
    sleep_checked(linger, stop)?;
    let records = collector.finish().map_err(SelftestError::Traffic)?;
    let report = wire.stop()?;
    Ok(CaseOutcome {
        log,
        records,
        wire: report.a_to_b,
        epoch,
        epoch_rt_ns,
    })
}

/// Exact central 99 % interval of a Binomial(n, p) count.
pub fn binomial_interval_99(n: u64, p: f64) -> (u64, u64) {
    if p <= 0.0 {
        return (0, 0);
    }
    if p >= 1.0 {
        return (n, n);
    }
    // pmf in log space: pmf(0) = (1-p)^n underflows for large n otherwise.
    let mut log_pmf = n as f64 * (1.0 - p).ln();
    let ratio = (p / (1.0 - p)).ln();
    let (mut cdf, mut lo) = (0.0, None);
    for k in 0..=n {
        if k > 0 {
            log_pmf += ((n - k + 1) as f64 / k as f64).ln() + ratio;
        }
        cdf += log_pmf.exp();
        if lo.is_none() && cdf >= 0.005 {
            lo = Some(k);
        }
        if cdf >= 0.995 {
            return (lo.unwrap_or(k), k);
        }
    }
    (lo.unwrap_or(n), n)
}

/// The top rate checked is this fraction of the measured capacity, rounded
/// down to one significant digit: the shaped flow (offered at
/// [`OFFERED_FACTOR`] times the rate) then stays well inside what the path
/// can carry, so a shortfall is the shaper's and not the machine's.
pub const TOP_FRACTION: f64 = 0.5;

/// Each rate is offered at this multiple of itself so that the link never
/// idles; a shaper that ignored the rate would deliver this excess.
pub const OFFERED_FACTOR: f64 = 1.1;

/// Rate bounds: within +-1 % up to 100 Mbit/s; above, +-5 %. On two cores
/// shared with other work a gigabit flow loses its sender or receiver for
/// milliseconds (the wire's own pacing stays exact, see its figure), so
/// the receiver-side rate falls 2-3 % short; 5 % holds that and still
/// fails a shaper that ignores the rate (+10 %, the excess offered) or
/// misses it by more than 5 %.
pub fn rate_bound_pct(rate: u64) -> f64 {
    if rate <= 100_000_000 {
        1.0
    } else {
        5.0
    }
}

/// `x` rounded down to one significant digit: 3.7e9 -> 3e9, 640e6 -> 600e6.
pub fn round_down_1sig(x: f64) -> u64 {
    if !x.is_finite() || x < 1.0 {
        return 0;
    }
    let unit = 10f64.powi(x.log10().floor() as i32);
    ((x / unit).floor() * unit) as u64
}

/// The rates checked on a path of `capacity` bit/s: the decades from
/// 1 Mbit/s up to the top rate, and the top rate.
pub fn rates_to_check(capacity: f64) -> Vec<u64> {
    let top = round_down_1sig(capacity * TOP_FRACTION);
    let mut rates: Vec<u64> = [
        1_000_000,
        10_000_000,
        100_000_000,
        1_000_000_000,
        10_000_000_000,
    ]
    .into_iter()
    .filter(|&r| r <= top)
    .collect();
    if top >= 1_000_000 && rates.last() != Some(&top) {
        rates.push(top);
    }
    rates
}

/// Did a shaped run pass: achieved within `bound_pct` of `requested`.
pub fn rate_passes(requested: u64, achieved: Option<f64>, bound_pct: f64) -> bool {
    achieved.is_some_and(|a| ((a / requested as f64 - 1.0) * 100.0).abs() <= bound_pct)
}

/// What reached `b` in a case with full-size frames: the rate (frames read
/// plus those its socket dropped, between the first and last read) and the
/// socket's drops.
fn receiver_rate(recs: &[Record], frame: usize) -> (Option<f64>, usize) {
    match (recs.first(), recs.last()) {
        (Some(f), Some(l)) if recs.len() > 10 && l.rx_ns > f.rx_ns => {
            let dropped = l.socket_drops.wrapping_sub(f.socket_drops) as usize;
            let frames = recs.len() - 1 + dropped;
            (
                Some((frames * frame * 8) as f64 / ((l.rx_ns - f.rx_ns) as f64 * 1e-9)),
                dropped,
            )
        }
        _ => (None, 0),
    }
}

/// The capacity of the emulator path itself: full-size frames sent flat out
/// for 1 s through a wire that shapes nothing.
fn capacity_check(bed: &Testbed, stop: &AtomicBool) -> Result<(Check, f64), SelftestError> {
    let frame = traffic::frame_len(FULL_PAYLOAD);
    let flow = Flow {
        until: Some(Duration::from_secs(1)),
        payload: FULL_PAYLOAD,
        gap: Duration::from_nanos(1),
        count: 4_000_000,
    };
    let link = LinkConfig::default();
    let out = run_case(bed, link, flow, Duration::from_millis(200), stop)?;
    let (achieved, socket_drops) = receiver_rate(&out.records, frame);
    let capacity = achieved.unwrap_or(0.0);
    let top = round_down_1sig(capacity * TOP_FRACTION);
    Ok((
        Check {
            name: "capacity (unshaped)".into(),
            requested: "flat out, 1 s".into(),
            measured: format!(
                "{} over {} frames ({socket_drops} not read); top rate checked {}",
                format_rate(capacity),
                out.records.len() + socket_drops,
                format_rate(top as f64)
            ),
            bound: format!(">= 2 Mbit/s; top = {TOP_FRACTION} x, rounded down"),
            pass: Some(top >= 1_000_000),
            values: json!({
                "capacity_bps": achieved, "top_rate_bps": top, "fraction": TOP_FRACTION,
                "frames": out.records.len(), "socket_drops": socket_drops,
                "sent": out.log.sent_ok(), "wire_rx": out.wire.rx_frames, "wire_tx": out.wire.tx_frames,
            }),
        },
        capacity,
    ))
}

fn rate_check(bed: &Testbed, rate: u64, stop: &AtomicBool) -> Result<Check, SelftestError> {
    let bound_pct = rate_bound_pct(rate);
    let frame = traffic::frame_len(FULL_PAYLOAD);
    // Offer 10 % more than the link takes so it never idles; the wire's
    // queue absorbs the excess (and tail-drops once full).
    let offered = rate as f64 * OFFERED_FACTOR;
    let gap = Duration::from_secs_f64(frame as f64 * 8.0 / offered);
    let secs = if rate <= 1_000_000 { 2.5 } else { 1.5 };
    // 64 frames, or 20 ms at the rate if more: the queue is full in steady
    // state (10 % too much offered), so the link idles only if the sender
    // stalls for longer than the queue holds; at 1 Gbit/s 64 frames are
    // under 1 ms, shorter than a scheduling hiccup of a busy machine.
    let queue = (64 * frame as u64).max(rate / 8 / 50);
    let link = LinkConfig {
        rate: Some(rate),
        queue,
        ..LinkConfig::default()
    };
    let flow = Flow {
        until: None,
        payload: FULL_PAYLOAD,
        gap,
        count: (secs / gap.as_secs_f64()) as u64,
    };
    // Long enough for a receiver that fell behind to drain its socket.
    let out = run_case(bed, link, flow, Duration::from_millis(200), stop)?;
    let recs = &out.records;
    let (achieved, socket_drops) = receiver_rate(recs, frame);
    let err_pct = achieved.map(|a| (a / rate as f64 - 1.0) * 100.0);
    let wire_err = out.wire.rate.error_pct;
    Ok(Check {
        name: format!("rate {}", format_rate(rate as f64)),
        requested: format_rate(rate as f64),
        measured: match (achieved, err_pct) {
            (Some(a), Some(e)) => format!(
                "{} ({e:+.3} %) over {} frames{}; wire {}",
                format_rate(a),
                recs.len() + socket_drops,
                if socket_drops > 0 {
                    format!(" ({socket_drops} not read)")
                } else {
                    String::new()
                },
                wire_err.map_or("-".into(), |w| format!("{w:+.3} %"))
            ),
            _ => format!("too few frames received ({})", recs.len()),
        },
        bound: format!("+-{bound_pct} %"),
        pass: Some(rate_passes(rate, achieved, bound_pct)),
        values: json!({
            "requested_bps": rate,
            "achieved_bps": achieved,
            "error_pct": err_pct,
            "bound_pct": bound_pct,
            "frames": recs.len(),
            "socket_drops": socket_drops,
            "wire_achieved_bps": out.wire.rate.achieved_bps,
            "wire_error_pct": wire_err,
            "sent": out.log.sent_ok(),
            "wire_drops_queue": out.wire.drops.queue, "wire_rx": out.wire.rx_frames, "wire_tx": out.wire.tx_frames, "wire_delay_err_us": out.wire.delay_error_us.mean, "wire_read_latency_us": out.wire.read_latency_us.mean,
        }),
    })
}

/// The Mahimahi trace of [`mahimahi_check`]: a 40 ms loop with 2
/// opportunities a millisecond for 10 ms, a 10 ms gap, then 1 a
/// millisecond for 20 ms: 40 opportunities in 40 ms, 1000 full-size
/// packets a second (12.112 Mbit/s of frames), gaps and bursts included.
pub fn mahimahi_test_trace() -> String {
    let mut lines = Vec::new();
    for ms in 1..=40u32 {
        let n = match ms {
            1..=10 => 2,
            11..=20 => 0,
            _ => 1,
        };
        lines.extend(std::iter::repeat_n(ms.to_string(), n));
    }
    lines.join("\n") + "\n"
}

/// A Mahimahi trace of known mean rate shapes a real flow: full-size frames
/// offered at 1.2 times the mean for 2 s arrive at the mean within 2 %, and
/// nothing is dropped as an outage (the gaps queue).
pub fn mahimahi_check(bed: &Testbed, stop: &AtomicBool) -> Result<Check, SelftestError> {
    let trace = super::mahimahi::parse(&mahimahi_test_trace())
        .map_err(|e| SelftestError::Traffic(io::Error::other(e.to_string())))?;
    let want = trace
        .mean_rate(None, Duration::ZERO, Duration::from_secs(1))
        .unwrap_or(0.0);
    let frame = traffic::frame_len(FULL_PAYLOAD);
    let link = LinkConfig {
        trace: Some(trace),
        queue: 200 * frame as u64,
        ..LinkConfig::default()
    };
    let gap = Duration::from_secs_f64(frame as f64 * 8.0 / (want * 1.2));
    let flow = Flow {
        until: None,
        payload: FULL_PAYLOAD,
        gap,
        count: (2.0 / gap.as_secs_f64()) as u64,
    };
    let out = run_case(bed, link, flow, Duration::from_millis(200), stop)?;
    let (achieved, socket_drops) = receiver_rate(&out.records, frame);
    let err_pct = achieved.map(|a| (a / want - 1.0) * 100.0);
    let bound_pct = 2.0;
    let ok = achieved.is_some_and(|a| ((a / want - 1.0) * 100.0).abs() <= bound_pct)
        && out.wire.drops.outage == 0;
    Ok(Check {
        name: "Mahimahi trace".into(),
        requested: format!("mean {} (40 ms loop, gaps)", format_rate(want)),
        measured: format!(
            "{} ({:+.3} %) over {} frames; drops: queue {}, outage {}",
            achieved.map_or("-".into(), format_rate),
            err_pct.unwrap_or(f64::NAN),
            out.records.len() + socket_drops,
            out.wire.drops.queue,
            out.wire.drops.outage
        ),
        bound: format!("+-{bound_pct} %, no outage drops"),
        pass: Some(ok),
        values: json!({"mean_bps": want, "achieved_bps": achieved, "error_pct": err_pct,
                       "frames": out.records.len(), "socket_drops": socket_drops,
                       "queue_drops": out.wire.drops.queue, "outage_drops": out.wire.drops.outage}),
    })
}

/// One-way delay statistics of a case, in ms: (error summary vs `want`).
fn delay_errors(recs: &[Record], want: Duration) -> Welford {
    let mut w = Welford::default();
    for r in recs {
        let one_way_ms = (r.rx_ns as f64 - r.tx_ns as f64) * 1e-6;
        w.push(one_way_ms - want.as_secs_f64() * 1e3);
    }
    w
}

fn delay_checks(bed: &Testbed, stop: &AtomicBool) -> Result<Vec<Check>, SelftestError> {
    let flow = |count| Flow {
        until: None,
        payload: 64,
        gap: Duration::from_millis(1),
        count,
    };
    // Baseline: the path without any delay, to show what the stack adds.
    let base = run_case(
        bed,
        LinkConfig::default(),
        flow(300),
        Duration::from_millis(30),
        stop,
    )?;
    let b = delay_errors(&base.records, Duration::ZERO);
    let want = Duration::from_millis(300);
    let link = LinkConfig {
        delay: want,
        ..LinkConfig::default()
    };
    let out = run_case(
        bed,
        link,
        flow(1100),
        want + Duration::from_millis(50),
        stop,
    )?;
    let e = delay_errors(&out.records, want);
    let wd = out.wire.delay_error_us;
    let enough = e.count() >= 1000;
    Ok(vec![
        Check {
            name: "latency, no delay set".into(),
            requested: "0 ms".into(),
            measured: format!(
                "one-way mean {:.3} ms, variance {:.5} ms^2 (n={})",
                b.mean(),
                b.variance(),
                b.count()
            ),
            bound: "none".into(),
            pass: None,
            values: json!({"mean_ms": b.mean(), "variance_ms2": b.variance(), "n": b.count()}),
        },
        Check {
            name: "delay 300 ms".into(),
            requested: "300 ms".into(),
            measured: format!(
                "error mean {:+.4} ms, variance {:.5} ms^2, max {:.3} ms (n={})",
                e.mean(),
                e.variance(),
                e.summary().max,
                e.count()
            ),
            bound: "|mean| < 0.1 ms, n >= 1000".into(),
            pass: Some(enough && e.mean().abs() < 0.1),
            values: json!({"mean_ms": e.mean(), "variance_ms2": e.variance(), "min_ms": e.summary().min,
                           "max_ms": e.summary().max, "n": e.count()}),
        },
        Check {
            name: "wire departure error".into(),
            requested: "actual - scheduled".into(),
            measured: format!(
                "mean {:.2} us, variance {:.2} us^2, max {:.1} us (n={})",
                wd.mean, wd.variance, wd.max, wd.count
            ),
            bound: "none".into(),
            pass: None,
            values: json!({"mean_us": wd.mean, "variance_us2": wd.variance, "max_us": wd.max, "n": wd.count}),
        },
    ])
}

/// Sequence numbers sent but not received.
fn lost_seqs(log: &SendLog, recs: &[Record]) -> Vec<bool> {
    let mut got = vec![false; log.sent.len()];
    for r in recs {
        if let Some(g) = got.get_mut(r.seq as usize) {
            *g = true;
        }
    }
    log.sent
        .iter()
        .zip(&got)
        .map(|(s, g)| s.is_some() && !g)
        .collect()
}

fn loss_checks(bed: &Testbed, stop: &AtomicBool) -> Result<Vec<Check>, SelftestError> {
    let flow = Flow {
        until: None,
        payload: 64,
        gap: Duration::from_micros(200),
        count: 4000,
    };
    let per = 0.05;
    let link = LinkConfig {
        loss: LossConfig {
            per,
            gilbert_elliott: None,
        },
        ..LinkConfig::default()
    };
    let out = run_case(bed, link, flow, Duration::from_millis(30), stop)?;
    let n = out.log.sent_ok() as u64;
    let lost = lost_seqs(&out.log, &out.records)
        .iter()
        .filter(|&&l| l)
        .count() as u64;
    let (lo, hi) = binomial_interval_99(n, per);
    let other = out.wire.drops.total() - out.wire.drops.loss;
    let per_check = Check {
        name: "loss PER 5 %".into(),
        requested: "5.000 %".into(),
        measured: format!(
            "{:.3} % ({lost} of {n}; wire counted {}, other drops {other})",
            lost as f64 * 100.0 / n.max(1) as f64,
            out.wire.drops.loss
        ),
        bound: format!("99 % binomial [{lo}, {hi}]"),
        pass: Some((lo..=hi).contains(&lost) && other == 0),
        values: json!({"per": per, "sent": n, "lost": lost, "interval": [lo, hi],
                       "wire_loss": out.wire.drops.loss, "other_drops": other}),
    };

    let ge = GeParams {
        p: 0.01,
        r: 0.25,
        h: 0.0,
        k: 1.0,
    };
    let link = LinkConfig {
        loss: LossConfig {
            per: 0.0,
            gilbert_elliott: Some(ge),
        },
        ..LinkConfig::default()
    };
    let out = run_case(bed, link, flow, Duration::from_millis(30), stop)?;
    let lost = lost_seqs(&out.log, &out.records);
    let n = out.log.sent_ok();
    let lost_n = lost.iter().filter(|&&l| l).count();
    let bursts = lost
        .split(|&l| !l)
        .filter(|run| !run.is_empty())
        .map(<[bool]>::len)
        .collect::<Vec<_>>();
    let mean_burst = bursts.iter().sum::<usize>() as f64 / bursts.len().max(1) as f64;
    let ge_check = Check {
        name: "loss Gilbert-Elliott".into(),
        requested: format!(
            "p={} r={}: {:.2} %, bursts {:.1}",
            ge.p,
            ge.r,
            ge.stationary_loss() * 100.0,
            1.0 / ge.r
        ),
        measured: format!(
            "{:.2} % ({lost_n} of {n}), mean burst {mean_burst:.2} over {} bursts",
            lost_n as f64 * 100.0 / n.max(1) as f64,
            bursts.len()
        ),
        bound: "none (model unit-tested)".into(),
        pass: None,
        values: json!({"expected_loss": ge.stationary_loss(), "lost": lost_n, "sent": n,
                       "mean_burst": mean_burst, "expected_mean_burst": 1.0 / ge.r}),
    };
    Ok(vec![per_check, ge_check])
}

fn outage_check(bed: &Testbed, stop: &AtomicBool) -> Result<Check, SelftestError> {
    let windows = vec![
        Window {
            start: Duration::from_millis(300),
            len: Duration::from_millis(200),
        },
        Window {
            start: Duration::from_millis(700),
            len: Duration::from_millis(100),
        },
    ];
    let link = LinkConfig {
        schedule: Schedule::new(windows.clone(), None),
        ..LinkConfig::default()
    };
    let flow = Flow {
        until: None,
        payload: 64,
        gap: Duration::from_micros(500),
        count: 2000,
    };
    let out = run_case(bed, link, flow, Duration::from_millis(30), stop)?;
    let lost = lost_seqs(&out.log, &out.records);
    // Send offsets from the wire's epoch, ms; edges are midpoints between
    // the last packet on one side and the first on the other.
    let offset = |i: usize| {
        out.log.sent[i].map(|t| t.saturating_duration_since(out.epoch).as_secs_f64() * 1e3)
    };
    let mut edges = Vec::new(); // (measured_start, measured_end)
    let mut i = 0;
    while i < lost.len() {
        if lost[i] {
            let start = i;
            while i < lost.len() && lost[i] {
                i += 1;
            }
            let mid = |a: usize, b: usize| match (offset(a), offset(b)) {
                (Some(x), Some(y)) => Some((x + y) / 2.0),
                _ => None,
            };
            let down = if start > 0 {
                mid(start - 1, start)
            } else {
                offset(start)
            };
            let up = if i < lost.len() { mid(i - 1, i) } else { None };
            edges.push((down, up));
        } else {
            i += 1;
        }
    }
    let mut worst: f64 = 0.0;
    let mut ok = edges.len() == windows.len();
    let mut measured = Vec::new();
    for (w, (down, up)) in windows.iter().zip(&edges) {
        let want = (w.start.as_secs_f64() * 1e3, w.end().as_secs_f64() * 1e3);
        match (down, up) {
            (Some(d), Some(u)) => {
                worst = worst.max((d - want.0).abs()).max((u - want.1).abs());
                measured.push(format!("{d:.1}-{u:.1}"));
            }
            _ => ok = false,
        }
    }
    ok &= worst <= 5.0;
    Ok(Check {
        name: "outage edges".into(),
        requested: "down 300-500, 700-800 ms".into(),
        measured: format!(
            "down {} ms; max edge error {worst:.2} ms ({} gaps)",
            measured.join(", "),
            edges.len()
        ),
        bound: "<= 5 ms".into(),
        pass: Some(ok),
        values: json!({"gaps": edges.len(), "max_edge_error_ms": worst,
                       "measured_ms": edges.iter().map(|(d, u)| [*d, *u]).collect::<Vec<_>>()}),
    })
}

fn relay_check(bed: &Testbed, stop: &AtomicBool) -> Result<Check, SelftestError> {
    let window = Window {
        start: Duration::from_millis(300),
        len: Duration::from_millis(400),
    };
    let rate = 20_000_000;
    let link = LinkConfig {
        rate: Some(rate),
        schedule: Schedule::new(vec![window], None),
        relay: Some(10_000_000),
        ..LinkConfig::default()
    };
    let flow = Flow {
        until: None,
        payload: 1000,
        gap: Duration::from_millis(1),
        count: 1000,
    };
    let out = run_case(bed, link, flow, Duration::from_millis(600), stop)?;
    let sent = out.log.sent_ok();
    let in_order = out.records.windows(2).all(|p| p[1].seq > p[0].seq);
    let end_rt = out.epoch_rt_ns + window.end().as_nanos() as u64;
    let during: Vec<&Record> = out
        .records
        .iter()
        .filter(|r| {
            out.log
                .sent
                .get(r.seq as usize)
                .copied()
                .flatten()
                .is_some_and(|t| {
                    let off = t.saturating_duration_since(out.epoch);
                    off >= window.start && off < window.end()
                })
        })
        .collect();
    // 1 ms tolerance for the epoch's realtime conversion.
    let after = during.iter().all(|r| r.rx_ns + 1_000_000 >= end_rt);
    let ok = out.records.len() == sent && in_order && after && !during.is_empty();
    Ok(Check {
        name: "relay custody".into(),
        requested: "outage 300-700 ms, 20 Mbit/s, 10 MB store".into(),
        measured: format!(
            "{}/{sent} delivered, {}in order, {} held and released after the outage{}; drain {}",
            out.records.len(),
            if in_order { "" } else { "NOT " },
            during.len(),
            if after { "" } else { " (SOME EARLY)" },
            out.wire.rate.achieved_bps.map_or("-".into(), format_rate)
        ),
        bound: "all, in order".into(),
        pass: Some(ok),
        values: json!({"sent": sent, "received": out.records.len(), "in_order": in_order,
                       "held": during.len(), "released_after_outage": after,
                       "wire_relayed": out.wire.relayed_frames,
                       "drain_achieved_bps": out.wire.rate.achieved_bps}),
    })
}

/// Runs every case; `Err` only when the self-test could not run.
pub fn run(stop: &AtomicBool) -> Result<SelftestReport, SelftestError> {
    let t0 = Instant::now();
    netns::remove_stale();
    let bed = Testbed::build("st").map_err(SelftestError::Testbed)?;
    info!(
        a = bed.a.name(),
        b = bed.b.name(),
        m = bed.m.name(),
        "testbed up"
    );
    let mut checks = Vec::new();
    // What this machine can verify: the path's own capacity first, then
    // the rates up to a fraction of it.
    let (cap, capacity) = capacity_check(&bed, stop)?;
    info!(check = %cap.name, measured = %cap.measured, "done");
    checks.push(cap);
    for rate in rates_to_check(capacity) {
        let c = rate_check(&bed, rate, stop)?;
        info!(check = %c.name, measured = %c.measured, "done");
        checks.push(c);
    }
    checks.push(mahimahi_check(&bed, stop)?);
    checks.extend(delay_checks(&bed, stop)?);
    checks.extend(loss_checks(&bed, stop)?);
    checks.push(outage_check(&bed, stop)?);
    checks.push(relay_check(&bed, stop)?);
    drop(bed);
    Ok(SelftestReport {
        passed: checks.iter().all(|c| c.pass != Some(false)),
        wall_s: t0.elapsed().as_secs_f64(),
        seed: SEED,
        accounting: ACCOUNTING,
        checks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_interval_brackets_the_mean_and_narrows_with_n() {
        for (n, p) in [(4000u64, 0.05), (1000, 0.01), (100, 0.5)] {
            let (lo, hi) = binomial_interval_99(n, p);
            let mean = n as f64 * p;
            let sd = (mean * (1.0 - p)).sqrt();
            assert!((lo as f64) < mean && (hi as f64) > mean);
            // Close to the normal approximation +-2.576 sd (within 2 counts
            // for these well-populated cases).
            assert!(
                (mean - 2.576 * sd - lo as f64).abs() <= 2.0,
                "n={n} p={p} lo={lo}"
            );
            assert!(
                (mean + 2.576 * sd - hi as f64).abs() <= 2.0,
                "n={n} p={p} hi={hi}"
            );
        }
        assert_eq!(binomial_interval_99(100, 0.0), (0, 0));
    }

    #[test]
    fn top_rate_is_a_round_fraction_of_capacity() {
        assert_eq!(round_down_1sig(3.7e9), 3_000_000_000);
        assert_eq!(round_down_1sig(640e6), 600_000_000);
        assert_eq!(round_down_1sig(1e9), 1_000_000_000);
        assert_eq!(round_down_1sig(0.5), 0);
        assert_eq!(
            rates_to_check(5.2e9),
            [
                1_000_000,
                10_000_000,
                100_000_000,
                1_000_000_000,
                2_000_000_000
            ]
        );
        assert_eq!(
            rates_to_check(2.0e9),
            [1_000_000, 10_000_000, 100_000_000, 1_000_000_000]
        );
        assert_eq!(
            rates_to_check(500e6),
            [1_000_000, 10_000_000, 100_000_000, 200_000_000]
        );
        assert!(rates_to_check(1e6).is_empty());
    }

    #[test]
    fn a_shaper_that_ignores_the_rate_fails_every_rate_check() {
        // Ignoring the rate, a flow arrives as offered: OFFERED_FACTOR times
        // the rate (the top rate leaves the path room for that). Capacities
        // measured under load anywhere from 20 Mbit/s to 20 Gbit/s.
        for capacity in [20e6, 150e6, 999e6, 1.9e9, 4.4e9, 7.9e9, 20e9] {
            let rates = rates_to_check(capacity);
            let Some(&top) = rates.last() else {
                panic!("no rate for {capacity}")
            };
            assert!(top as f64 * OFFERED_FACTOR <= capacity * 0.6);
            for &r in &rates {
                let unshaped = Some(r as f64 * OFFERED_FACTOR);
                assert!(
                    !rate_passes(r, unshaped, rate_bound_pct(r)),
                    "capacity {capacity}: {r} passes unshaped"
                );
            }
            // An exact shaper, and one 3 % short at gigabit rates, pass.
            assert!(rate_passes(top, Some(top as f64), rate_bound_pct(top)));
            if top > 100_000_000 {
                assert!(rate_passes(
                    top,
                    Some(top as f64 * 0.97),
                    rate_bound_pct(top)
                ));
            }
            assert!(!rate_passes(
                top,
                Some(top as f64 * 0.9),
                rate_bound_pct(top)
            ));
            assert!(!rate_passes(top, None, rate_bound_pct(top)));
        }
    }

    #[test]
    fn the_mahimahi_test_trace_means_1000_packets_a_second() {
        let t = super::super::mahimahi::parse(&mahimahi_test_trace());
        let mean = t
            .ok()
            .and_then(|t| t.mean_rate(None, Duration::ZERO, Duration::from_secs(1)));
        assert_eq!(mean.map(|m| m.round()), Some(1000.0 * 1514.0 * 8.0));
    }
}
