//! `lte-gateway` (spec section 6; Masek et al., papers/002; handover,
//! papers/004): a WiFi path and an LTE path, a VoIP-like flow (160 B every
//! 20 ms) beside bulk TCP (iperf3), and a handover: the WiFi link goes dark
//! for `handover_len` in the middle of the run.
//!
//! Mapping onto the testbed: path 0 is the WiFi link (`[link]`), path 1 the
//! LTE link (`[extra_link]`), both through emulator wires in M; mptd weights
//! are proportional to the nominal link rates. The LTE link's capacity
//! follows a trace (`trace`, rate steps over time), scaled by
//! L / (L + gtp_overhead) with L = 1466 B, the Ethernet frame of a full-size
//! tunnel packet: the emulator charges whole frames at the link rate, so the
//! 40 B of GTP-U/UDP/IP encapsulation per packet become a lower effective
//! rate (exact for full-size packets; small VoIP packets pay 40 B each in a
//! real network, about 16 % more than modelled here). The handover is an
//! outage window on both directions of the WiFi wire, so mptd only learns of
//! it from missing keepalives (as with a radio that silently disappears):
//! `event = "silent"`, the default. With `event = "link-down"` the wire
//! stays as it is and A's WiFi interface itself goes down for the same
//! window (`ip link set va0 down`, then up): mptd in A learns of it from
//! netlink at once; B, whose own interface stays up, learns nothing. With
//! `event = "addr-change"` A's WiFi path names only its interface (no
//! `local`; both sides get a key and B learns A's address), and at the
//! handover A's WiFi interface trades its address for another of the same
//! subnet for good (a DHCP renew, a new network): A's path moves to it and
//! B learns it from A's authenticated datagrams.
//!
//! Timeline: the wires start (epoch), the testbed comes up, the measurement
//! starts at epoch + [`SETUP_ALLOWANCE`] (or at once if setup took longer),
//! and the WiFi outage begins `handover_at` after that.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::iperf::{self, Measurement};
use super::plot::{Chart, Series};
use super::report::{Report, Row};
use super::scenario::{invalid, Case, Link, Scenario, ScenarioError, TestKind};
use super::testbed::{self, check_stop, Testbed};
use super::voip::{self, VoipStats};
use super::{progress, Options};
use mpt_emu::schedule::{Schedule, Window};
use mpt_emu::trace::{Trace, TracePoint};
use mpt_emu::units;

/// Time from the wires' start to the start of the measurement, so that the
/// outage (scheduled on the wire's clock) lands at `handover_at`.
pub const SETUP_ALLOWANCE: Duration = Duration::from_secs(4);
/// UDP port of the VoIP receiver in B.
pub const VOIP_PORT: u16 = 5004;
/// Frame of a full-size tunnel packet: 1400 inner + 20 IP + 8 UDP + 24 mpt
/// + 14 Ethernet.
const FULL_FRAME: f64 = 1466.0;
/// The shipped LTE capacity trace, compiled in for the preset.
const BUILTIN_TRACE: (&str, &str) = (
    "lte-capacity.trace",
    include_str!("../../../../conf/links/lte-capacity.trace"),
);

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LteQuick {
    pub handover_at: Option<f64>,
    pub handover_len: Option<f64>,
}

/// The `[lte]` table of a scenario file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LteDef {
    /// Seconds from the start of the measurement to the WiFi outage.
    pub handover_at: f64,
    /// Seconds the WiFi link stays dark.
    pub handover_len: f64,
    /// VoIP packet interval, e.g. "20ms".
    pub voip_interval: Option<String>,
    /// VoIP UDP payload bytes.
    pub voip_size: Option<usize>,
    /// Per-packet GTP-U overhead on the LTE link, bytes.
    pub gtp_overhead: Option<u32>,
    /// LTE capacity trace: a file (relative to the working directory or
    /// conf/links/), or the name of the shipped one.
    pub trace: Option<String>,
    /// How the WiFi link fails: "silent" (the emulated link goes dark;
    /// the default) or "link-down" (A's WiFi interface goes down).
    pub event: Option<String>,
    #[serde(default)]
    pub quick: LteQuick,
}

/// How the WiFi link fails in the handover window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LteEvent {
    /// The emulated link goes dark: only missing packets tell.
    Silent,
    /// A's WiFi interface goes down (a netlink event in A).
    LinkDown,
    /// A's WiFi interface gets a new address (netlink events in A, roaming
    /// for B).
    AddrChange,
}

impl LteEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            LteEvent::Silent => "silent",
            LteEvent::LinkDown => "link-down",
            LteEvent::AddrChange => "addr-change",
        }
    }
}

/// Resolved `[lte]` settings.
#[derive(Debug, Clone)]
pub struct LteParams {
    pub handover_at: Duration,
    pub handover_len: Duration,
    pub voip_interval: Duration,
    pub voip_size: usize,
    pub gtp_overhead: u32,
    pub trace: Option<(String, Trace)>,
    pub event: LteEvent,
}

impl LteDef {
    pub fn resolve(&self, origin: &str, quick: bool) -> Result<LteParams, ScenarioError> {
        let (mut at, mut len) = (self.handover_at, self.handover_len);
        if quick {
            at = self.quick.handover_at.unwrap_or(at);
            len = self.quick.handover_len.unwrap_or(len);
        }
        if !(at.is_finite() && at >= 0.0 && len.is_finite() && len > 0.0) {
            return Err(invalid(
                origin,
                "lte: handover_at >= 0 and handover_len > 0",
            ));
        }
        let voip_interval = match &self.voip_interval {
            Some(s) => units::parse_duration(s)
                .map_err(|e| invalid(origin, format!("lte.voip_interval: {e}")))?,
            None => Duration::from_millis(20),
        };
        if voip_interval < Duration::from_millis(1) {
            return Err(invalid(origin, "lte.voip_interval must be >= 1ms"));
        }
        let voip_size = self.voip_size.unwrap_or(160);
        if !(12..=1200).contains(&voip_size) {
            return Err(invalid(origin, "lte.voip_size must be 12..=1200 bytes"));
        }
        let trace = self
            .trace
            .as_deref()
            .map(|t| load_trace(t).map(|tr| (t.to_string(), tr)))
            .transpose()
            .map_err(|e| invalid(origin, e))?;
        Ok(LteParams {
            handover_at: Duration::from_secs_f64(at),
            handover_len: Duration::from_secs_f64(len),
            voip_interval,
            voip_size,
            gtp_overhead: self.gtp_overhead.unwrap_or(40),
            trace,
            event: match self.event.as_deref() {
                None | Some("silent") => LteEvent::Silent,
                Some("link-down") => LteEvent::LinkDown,
                Some("addr-change") => LteEvent::AddrChange,
                Some(other) => {
                    return Err(invalid(
                        origin,
                        format!(
                        "lte.event: `{other}` is not \"silent\", \"link-down\" or \"addr-change\""
                    ),
                    ))
                }
            },
        })
    }
}

pub(crate) fn load_trace(name: &str) -> Result<Trace, String> {
    for p in [PathBuf::from(name), Path::new("conf/links").join(name)] {
        if p.is_file() {
            return Trace::load(&p);
        }
    }
    if name == BUILTIN_TRACE.0 {
        return Trace::parse(BUILTIN_TRACE.1).map_err(|e| format!("{name}: {e}"));
    }
    Err(format!("trace {name:?}: no such file"))
}

/// Scales a trace's rates by `f` (GTP overhead as a lower effective rate).
fn scale_trace(t: &Trace, f: f64) -> Trace {
    let pts = t
        .points()
        .iter()
        .map(|p| TracePoint {
            rate: p.rate.map(|r| (r as f64 * f) as u64),
            ..*p
        })
        .collect();
    Trace::from_points(pts).unwrap_or_else(|_| t.clone())
}

/// Results of one `lte-gateway` case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LteResult {
    pub voip: VoipStats,
    /// Bulk TCP (iperf3) through the tunnel over the same time.
    pub bulk: Option<Measurement>,
    /// Seconds from the measurement start to the WiFi outage (as it happened).
    pub handover_at_s: f64,
    pub handover_len_s: f64,
    pub wifi_mbps: f64,
    pub lte_mbps: f64,
    pub gtp_factor: f64,
    /// How the WiFi link failed: "silent", "link-down" or "addr-change".
    pub event: &'static str,
    /// VoIP per-packet timeline: (s since start, one-way delay ms; null = lost).
    pub timeline: Vec<(f64, Option<f64>)>,
}

pub fn run_case(
    k: usize,
    case: &Case,
    s: &Scenario,
    p: &LteParams,
    opts: &Options,
    work: &Path,
    stop: &AtomicBool,
) -> anyhow::Result<Row> {
    let total = s.cases.len();
    check_stop(stop)?;
    if case.links.len() < 2 {
        bail!("lte-gateway needs a WiFi [link] and an LTE [extra_link] (extra = [true])");
    }
    let mut case = case.clone();
    case.roaming_path0 = p.event == LteEvent::AddrChange;
    let start_at = SETUP_ALLOWANCE + p.handover_at;
    // WiFi (path 0): dark in both directions for handover_len (silent), or
    // left alone while A's interface goes down (link-down, below).
    if let Some(Link::Emu { a_to_b, b_to_a, .. }) = case.links.first_mut() {
        let dark = if p.event == LteEvent::Silent {
            vec![a_to_b, b_to_a]
        } else {
            Vec::new()
        };
        for d in dark {
            let mut w = d.schedule.windows().to_vec();
            w.push(Window {
                start: start_at,
                len: p.handover_len,
            });
            d.schedule = Schedule::new(w, d.schedule.periodic());
        }
    } else {
        bail!("lte-gateway: the WiFi [link] must use shaper = \"emu\"");
    }
    let factor = FULL_FRAME / (FULL_FRAME + f64::from(p.gtp_overhead));
    let last = case.links.len() - 1;
    if let Some(Link::Emu { a_to_b, b_to_a, .. }) = case.links.get_mut(last) {
        for d in [a_to_b, b_to_a] {
            d.rate = d.rate.map(|r| (r as f64 * factor) as u64);
            if let Some((_, t)) = &p.trace {
                d.trace = Some(scale_trace(t, factor));
            }
        }
    } else {
        bail!("lte-gateway: the LTE [extra_link] must use shaper = \"emu\"");
    }
    let rates: Vec<u64> = case
        .links
        .iter()
        .map(|l| l.rate_bps().unwrap_or(100_000_000))
        .collect();
    case.weights = rates
        .iter()
        .map(|r| ((r / 1_000_000) as u32).clamp(1, 1000))
        .collect();
    progress(
        k,
        total,
        &case,
        &format!(
            "building testbed (WiFi {:.0} Mbit/s + LTE {:.1} Mbit/s after GTP overhead{})",
            rates[0] as f64 / 1e6,
            rates[last] as f64 / 1e6,
            p.trace
                .as_ref()
                .map_or(String::new(), |(n, _)| format!(", capacity trace {n}"))
        ),
    );
    let mut tb = Testbed::build(k, &case, work, &opts.mptd, stop)
        .with_context(|| format!("case {}: building the testbed", k + 1))?;
    let epoch = *tb
        .wire_epochs()
        .first()
        .context("lte-gateway: no emulator wire")?;
    let outage_start = epoch + start_at;
    let now = Instant::now();
    if now + Duration::from_secs(1) > outage_start {
        bail!(
            "the testbed took {:.1} s to come up; the handover at {:.1} s is too early \
             (raise handover_at)",
            (now - epoch).as_secs_f64(),
            start_at.as_secs_f64()
        );
    }
    testbed::sleep(
        (epoch + SETUP_ALLOWANCE).saturating_duration_since(now),
        stop,
    )?;
    let t_start = Instant::now();
    let until = t_start + s.duration;
    let handover_at_s = (outage_start - t_start).as_secs_f64();
    let bulk = s.tests.contains(&TestKind::Tcp);
    progress(
        k,
        total,
        &case,
        &format!(
            "VoIP {} B every {} ms{} for {} s; WiFi outage at {:.1} s for {} s",
            p.voip_size,
            p.voip_interval.as_millis(),
            if bulk { " + bulk TCP (iperf3)" } else { "" },
            s.duration.as_secs(),
            handover_at_s,
            p.handover_len.as_secs_f64()
        ),
    );
    let plan = tb.plan.clone();
    let target = plan.inner_sockaddr(VOIP_PORT)?;
    let bind: SocketAddr = if target.is_ipv4() {
        format!("0.0.0.0:{VOIP_PORT}").parse()?
    } else {
        format!("[::]:{VOIP_PORT}").parse()?
    };
    let receiver = voip::Receiver::start(tb.b.name(), bind)?;
    // link-down: A's WiFi interface (path 0's veth in A) down for the
    // outage window, then up again. addr-change: its address replaced by
    // another of the same subnet at the start of the window, for good.
    let link_flap = (p.event != LteEvent::Silent).then(|| {
        let ns = tb.a.name().to_string();
        let len = p.handover_len;
        let event = p.event;
        let len_bits = plan.outer_prefix();
        let (old, new) = (plan.outer(0, 1), plan.outer(0, 111));
        std::thread::spawn(move || -> anyhow::Result<()> {
            let ip = |args: &[&str]| mpt_emu::netns::ip(args);
            std::thread::sleep(outage_start.saturating_duration_since(Instant::now()));
            if event == LteEvent::AddrChange {
                let (old, new) = (format!("{old}/{len_bits}"), format!("{new}/{len_bits}"));
                ip(&["-n", &ns, "addr", "del", &old, "dev", "va0"])
                    .context("removing A's WiFi address")?;
                // nodad: an IPv6 address usable at once, like the testbed's.
                let mut add = vec!["-n", &ns, "addr", "add", &new, "dev", "va0"];
                if new.contains(':') {
                    add.push("nodad");
                }
                ip(&add).context("giving A's WiFi interface a new address")?;
                return Ok(());
            }
            ip(&["-n", &ns, "link", "set", "dev", "va0", "down"])
                .context("taking A's WiFi interface down")?;
            std::thread::sleep(len);
            ip(&["-n", &ns, "link", "set", "dev", "va0", "up"])
                .context("bringing A's WiFi interface up")?;
            Ok(())
        })
    });
    let sender_stop = Arc::new(AtomicBool::new(false));
    let sender = voip::spawn_sender(
        tb.a.name(),
        target,
        p.voip_size,
        p.voip_interval,
        until,
        sender_stop.clone(),
    );
    let c0 = (tb.mptd_a.cpu_time(), tb.mptd_b.cpu_time(), Instant::now());
    let self0 = testbed::cpu_time(std::process::id());
    let tun_target = plan.inner(2);
    let bulk_m = if bulk {
        let json = work.join(format!("iperf3-{k}-bulk.json"));
        let r = iperf::run(
            &iperf::Run {
                ns: tb.a.name(),
                server_ns: tb.b.name(),
                target: &tun_target,
                duration: s.duration,
                udp: None,
                json_out: &json,
                cc: None,
                omit: Duration::ZERO,
                streams: 1,
            },
            stop,
        );
        match r {
            Ok(m) => Some(m),
            Err(e) => {
                sender_stop.store(true, Ordering::Relaxed);
                let _ = sender.join();
                return Err(e.context(format!("case {}: bulk TCP", k + 1)));
            }
        }
    } else {
        while Instant::now() < until {
            if let Err(e) = testbed::sleep(Duration::from_millis(200), stop) {
                sender_stop.store(true, Ordering::Relaxed);
                let _ = sender.join();
                return Err(e);
            }
        }
        None
    };
    // Wait for the sender, then for late packets (queues drain).
    while !sender.is_finished() {
        if stop.load(Ordering::Relaxed) {
            sender_stop.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = match sender.join() {
        Ok(r) => r.context("VoIP sender")?,
        Err(_) => bail!("VoIP sender thread panicked"),
    };
    testbed::sleep(Duration::from_secs(1), stop)?;
    let rx = receiver.finish()?;
    if let Some(h) = link_flap {
        match h.join() {
            Ok(r) => r?,
            Err(_) => bail!("the link-down thread panicked"),
        }
    }
    let (cpu_a, cpu_b) = {
        let wall = c0.2.elapsed().as_secs_f64().max(1e-9);
        let pct = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
            (Some(a), Some(b)) => Some(100.0 * (b - a).as_secs_f64() / wall),
            _ => None,
        };
        (
            pct(c0.0, tb.mptd_a.cpu_time()),
            pct(c0.1, tb.mptd_b.cpu_time()),
        )
    };
    let o0 = voip::instant_to_mono_ns(outage_start);
    let o1 = o0 + p.handover_len.as_nanos() as u64;
    let (st, timeline) = voip::analyse(&sent, &rx, Some((o0, o1)));
    // The per-packet log, for plots of one's own.
    let mut log = String::from("seq,send_s,delay_ms\n");
    let t0 = sent.first().copied().unwrap_or(0);
    for (i, (t, d)) in sent.iter().zip(timeline.iter().map(|x| x.1)).enumerate() {
        log += &format!(
            "{i},{:.4},{}\n",
            t.saturating_sub(t0) as f64 / 1e9,
            d.map_or(String::new(), |d| format!("{d:.3}"))
        );
    }
    let log_path = work.join(format!("voip-{k}.csv"));
    std::fs::write(&log_path, log).with_context(|| format!("writing {}", log_path.display()))?;
    println!(
        "    WiFi {}: VoIP delay p50 {} ms, p99 {} ms, loss {:.2} % ({} of {}), switch-over {} ms, longest gap {:.0} ms; bulk {}",
        p.event.as_str(),
        fmt(st.delay_p50_ms, 1),
        fmt(st.delay_p99_ms, 1),
        st.loss_pct,
        st.sent - st.received,
        st.sent,
        fmt(st.switch_ms, 0),
        st.longest_gap_ms,
        bulk_m
            .as_ref()
            .map_or("-".into(), |m| format!("{:.2} Mbit/s", m.mbps))
    );
    for p in [&mut tb.mptd_a, &mut tb.mptd_b] {
        if let Some(st) = p.exited() {
            bail!(
                "{} died during the measurements ({st}):\n{}",
                p.name,
                p.log_tail()
            );
        }
    }
    let mut row = Row {
        combo: case.combo.label(),
        n: case.n,
        paths: case.links.len(),
        extra: case.extra,
        ideal_mbps: rates.iter().sum::<u64>() as f64 / 1e6,
        tcp: bulk_m.clone(),
        cpu_a_pct: cpu_a,
        cpu_b_pct: cpu_b,
        emu_cpu_pct: super::report::self_cpu_pct(
            self0,
            testbed::cpu_time(std::process::id()),
            c0.2.elapsed(),
        ),
        ..Row::default()
    };
    row.mptd_status_a = testbed::mptd_status(&tb.control_a).ok();
    row.tunnel_rtt_ms = super::report::mean_path_rtt(row.mptd_status_a.as_ref());
    row.wires = tb.stop_wires();
    row.lte = Some(LteResult {
        voip: st,
        bulk: bulk_m,
        handover_at_s,
        handover_len_s: p.handover_len.as_secs_f64(),
        wifi_mbps: rates[0] as f64 / 1e6,
        lte_mbps: rates[last] as f64 / 1e6,
        gtp_factor: factor,
        event: p.event.as_str(),
        timeline,
    });
    row.finish();
    progress(k, total, &case, "tearing down");
    drop(tb);
    Ok(row)
}

fn fmt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}"))
}

pub fn table(r: &Report) -> String {
    let mut s = format!(
        "{:<8} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9}\n",
        "combo",
        "WiFi",
        "LTE",
        "VoIP p50",
        "VoIP p99",
        "VoIP max",
        "loss %",
        "lost/out",
        "switch ms",
        "back ms",
        "bulk TCP",
        "CPU A/B/emu %"
    );
    for row in &r.rows {
        let Some(l) = &row.lte else { continue };
        s += &format!(
            "{:<8} {:>6.1} {:>6.1} {:>9} {:>9} {:>9} {:>7.2} {:>8} {:>9} {:>9} {:>9} {:>9}\n",
            row.combo,
            l.wifi_mbps,
            l.lte_mbps,
            fmt(l.voip.delay_p50_ms, 1),
            fmt(l.voip.delay_p99_ms, 1),
            fmt(l.voip.delay_max_ms, 1),
            l.voip.loss_pct,
            l.voip.lost_in_outage,
            fmt(l.voip.switch_ms, 0),
            fmt(l.voip.switch_back_ms, 0),
            fmt(l.bulk.as_ref().map(|m| m.mbps), 2),
            format!(
                "{}/{}/{}",
                fmt(row.cpu_a_pct, 0),
                fmt(row.cpu_b_pct, 0),
                fmt(row.emu_cpu_pct, 0)
            ),
        );
        s += &format!(
            "WiFi outage ({}) at {:.1} s for {:.1} s; VoIP {} packets sent, {} received; longest loss gap {:.0} ms\n",
            l.event,
            l.handover_at_s, l.handover_len_s, l.voip.sent, l.voip.received, l.voip.longest_gap_ms
        );
    }
    s += "link rates Mbit/s (LTE after GTP overhead, start of trace aside); VoIP one-way delay ms; \
          lost/out = VoIP packets lost in the outage; switch = outage start until a loss-free second of VoIP begins; \
          back = the same after WiFi returns; bulk = iperf3 TCP goodput Mbit/s\n";
    s
}

pub fn csv(r: &Report) -> String {
    let mut s = String::from(
        "combo,wifi_mbps,lte_mbps,gtp_factor,voip_sent,voip_received,voip_loss_pct,voip_p50_ms,\
         voip_p99_ms,voip_max_ms,lost_in_outage,longest_gap_ms,switch_ms,switch_back_ms,\
         handover_at_s,handover_len_s,bulk_mbps,bulk_retransmits,cpu_a_pct,cpu_b_pct,event\n",
    );
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
    for row in &r.rows {
        let Some(l) = &row.lte else { continue };
        s += &format!(
            "{},{:.3},{:.3},{:.4},{},{},{:.3},{},{},{},{},{:.1},{},{},{:.3},{:.3},{},{},{},{},{}\n",
            row.combo,
            l.wifi_mbps,
            l.lte_mbps,
            l.gtp_factor,
            l.voip.sent,
            l.voip.received,
            l.voip.loss_pct,
            o(l.voip.delay_p50_ms),
            o(l.voip.delay_p99_ms),
            o(l.voip.delay_max_ms),
            l.voip.lost_in_outage,
            l.voip.longest_gap_ms,
            o(l.voip.switch_ms),
            o(l.voip.switch_back_ms),
            l.handover_at_s,
            l.handover_len_s,
            o(l.bulk.as_ref().map(|m| m.mbps)),
            l.bulk
                .as_ref()
                .and_then(|m| m.retransmits)
                .map_or(String::new(), |v| v.to_string()),
            o(row.cpu_a_pct),
            o(row.cpu_b_pct),
            l.event,
        );
    }
    s
}

/// VoIP one-way delay over time (dots), lost packets at the bottom, the
/// WiFi outage shaded.
pub fn svg(r: &Report) -> String {
    let mut c = Chart {
        title: format!("mpt bench {}: VoIP one-way delay over time", r.scenario),
        xlabel: "time since start (s)".into(),
        ylabel: "one-way delay (ms)".into(),
        ..Chart::default()
    };
    for row in &r.rows {
        let Some(l) = &row.lte else { continue };
        c.series.push(Series {
            label: format!("{} VoIP delay", row.combo),
            points: l
                .timeline
                .iter()
                .filter_map(|(t, d)| d.map(|d| (*t, d)))
                .collect(),
            dots: true,
            ..Series::default()
        });
        c.series.push(Series {
            label: format!("{} VoIP lost", row.combo),
            points: l
                .timeline
                .iter()
                .filter(|(_, d)| d.is_none())
                .map(|(t, _)| (*t, 0.0))
                .collect(),
            dots: true,
            ..Series::default()
        });
        c.shade.push((
            l.handover_at_s,
            l.handover_at_s + l.handover_len_s,
            "WiFi outage".into(),
        ));
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_defaults_to_silent_and_rejects_unknown_values() {
        let def = |event: Option<&str>| LteDef {
            handover_at: 3.0,
            handover_len: 4.0,
            event: event.map(str::to_owned),
            ..LteDef::default()
        };
        let ev = |e| def(e).resolve("test", false).map(|p| p.event);
        assert_eq!(ev(None).ok(), Some(LteEvent::Silent));
        assert_eq!(ev(Some("silent")).ok(), Some(LteEvent::Silent));
        assert_eq!(ev(Some("link-down")).ok(), Some(LteEvent::LinkDown));
        assert_eq!(ev(Some("addr-change")).ok(), Some(LteEvent::AddrChange));
        let e = ev(Some("unplugged")).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|m| m.contains("lte.event")),
            "{e:?}"
        );
    }
}
