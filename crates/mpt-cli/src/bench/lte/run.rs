//! One `lte-gateway` case: the testbed with WiFi and LTE paths, the VoIP
//! flow and bulk traffic, the handover at `handover_at`, and the figures.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::def::{Bulk, LteEvent, LteParams};
use super::mptcp;
use super::result::LteResult;
use super::target::{check_target, summary};
use super::voip_log::voip_log;
use super::wifi::{wait_wifi_back, wifi_counters};
use crate::bench::iperf::{self, Measurement};
use crate::bench::options::Options;
use crate::bench::process::cpu_time;
use crate::bench::progress::progress;
use crate::bench::report::row::{mean_path_rtt, self_cpu_pct, Row};
use crate::bench::scenario::case::Case;
use crate::bench::scenario::expanded::Scenario;
use crate::bench::scenario::link::Link;
use crate::bench::stall::{self, StallStats, Transport};
use crate::bench::stop::{check_stop, sleep};
use crate::bench::testbed::{self, Testbed};
use crate::bench::voip;
use mpt_emu::schedule::{Schedule, Window};
use mpt_emu::trace::Trace;

/// Time from the wires' start to the start of the measurement, so that the
/// outage (scheduled on the wire's clock) lands at `handover_at`.
pub const SETUP_ALLOWANCE: Duration = Duration::from_secs(4);
/// UDP port of the VoIP receiver in B.
pub const VOIP_PORT: u16 = 5004;
/// Frame of a full-size tunnel packet: 1400 inner + 20 IP + 8 UDP + 24 mpt
/// + 14 Ethernet.
const FULL_FRAME: f64 = 1466.0;
/// TCP port of our own bulk stream in B.
const STALL_PORT: u16 = 5005;

/// Scales a trace's rates by `f` (GTP overhead as a lower effective rate).
fn scale_trace(t: &Trace, f: f64) -> Trace {
    t.scaled(f)
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
    let v = p
        .variants
        .get(case.lte_variant)
        .context("lte-gateway: no such variant")?
        .clone();
    let mut case = case.clone();
    case.roaming_path0 = v.event == LteEvent::AddrChange;
    let start_at = SETUP_ALLOWANCE + p.handover_at;
    // WiFi (path 0): dark in both directions for handover_len (silent), or
    // left alone while A's interface goes down (link-down, below).
    if let Some(Link::Emu { a_to_b, b_to_a, .. }) = case.links.first_mut() {
        let dark = if v.event == LteEvent::Silent {
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
    let lte_owd_ms = if let Some(Link::Emu { a_to_b, b_to_a, .. }) = case.links.get_mut(last) {
        let owd = a_to_b.delay.as_secs_f64() * 1e3;
        for d in [a_to_b, b_to_a] {
            d.rate = d.rate.map(|r| (r as f64 * factor) as u64);
            if let Some((_, t)) = &p.trace {
                d.trace = Some(scale_trace(t, factor));
            }
        }
        owd
    } else {
        bail!("lte-gateway: the LTE [extra_link] must use shaper = \"emu\"");
    };
    let rates: Vec<u64> = case
        .links
        .iter()
        .map(|l| l.rate_bps().unwrap_or(100_000_000))
        .collect();
    if p.mptd_defaults {
        case.default_timers = true;
        case.daemon_scheduler = true;
        case.weights = Vec::new();
    } else {
        case.weights = rates
            .iter()
            .map(|r| ((r / 1_000_000) as u32).clamp(1, 1000))
            .collect();
    }
    if v.lte_backup {
        case.backup_paths = vec![last];
    }
    progress(
        k,
        total,
        &case,
        &format!(
            "building testbed (WiFi {:.0} Mbit/s + LTE {:.1} Mbit/s after GTP overhead{}; mptd {})",
            rates[0] as f64 / 1e6,
            rates[last] as f64 / 1e6,
            p.trace
                .as_ref()
                .map_or(String::new(), |(n, _)| format!(", capacity trace {n}")),
            if p.mptd_defaults {
                "defaults"
            } else {
                "weighted, keepalive 500 ms, dead timer 3 s"
            }
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
    sleep(
        (epoch + SETUP_ALLOWANCE).saturating_duration_since(now),
        stop,
    )?;
    let t_start = Instant::now();
    let until = t_start + s.duration;
    let handover_at_s = (outage_start - t_start).as_secs_f64();
    let bulk_label = match &v.bulk {
        Bulk::None => String::new(),
        Bulk::Iperf3 => " + bulk TCP (iperf3)".into(),
        Bulk::Stream(cc) => format!(
            " + bulk TCP ({})",
            if cc.is_empty() { "default cc" } else { cc }
        ),
    };
    progress(
        k,
        total,
        &case,
        &format!(
            "VoIP {} B every {} ms{bulk_label} for {} s; WiFi {} at {:.1} s{}",
            p.voip_size,
            p.voip_interval.as_millis(),
            s.duration.as_secs(),
            v.event.as_str(),
            handover_at_s,
            if v.event == LteEvent::AddrChange {
                String::new()
            } else {
                format!(" for {} s", p.handover_len.as_secs_f64())
            }
        ),
    );
    let plan = tb.plan.clone();
    let target = plan.inner_sockaddr(VOIP_PORT)?;
    let any = |port: u16| -> anyhow::Result<SocketAddr> {
        Ok(if target.is_ipv4() {
            format!("0.0.0.0:{port}").parse()?
        } else {
            format!("[::]:{port}").parse()?
        })
    };
    let receiver = voip::Receiver::start(tb.b.name(), any(VOIP_PORT)?)?;
    // link-down: A's WiFi interface (path 0's veth in A) down for the
    // outage window, then up again. addr-change: its address replaced by
    // another of the same subnet at the start of the window, for good.
    // Either way, then watch for the path to carry data again.
    let link_flap = (v.event != LteEvent::Silent).then(|| {
        let ns = tb.a.name().to_string();
        let len = p.handover_len;
        let event = v.event;
        let len_bits = plan.outer_prefix();
        let (old, new) = (plan.outer(0, 1), plan.outer(0, 111));
        let (control_a, control_b) = (tb.control_a.clone(), tb.control_b.clone());
        std::thread::spawn(move || -> anyhow::Result<Option<Duration>> {
            let ip = |args: &[&str]| mpt_emu::netns::ip(args);
            std::thread::sleep(outage_start.saturating_duration_since(Instant::now()));
            if event == LteEvent::AddrChange {
                let (old, new_cidr) = (format!("{old}/{len_bits}"), format!("{new}/{len_bits}"));
                let base = wifi_counters(&control_a, &control_b);
                ip(&["-n", &ns, "addr", "del", &old, "dev", "va0"])
                    .context("removing A's WiFi address")?;
                let changed = Instant::now();
                // nodad: an IPv6 address usable at once, like the testbed's.
                let mut add = vec!["-n", &ns, "addr", "add", &new_cidr, "dev", "va0"];
                if new_cidr.contains(':') {
                    add.push("nodad");
                }
                ip(&add).context("giving A's WiFi interface a new address")?;
                return Ok(wait_wifi_back(
                    &control_a,
                    &control_b,
                    base,
                    Some(&new),
                    changed,
                ));
            }
            ip(&["-n", &ns, "link", "set", "dev", "va0", "down"])
                .context("taking A's WiFi interface down")?;
            std::thread::sleep(len);
            let base = wifi_counters(&control_a, &control_b);
            ip(&["-n", &ns, "link", "set", "dev", "va0", "up"])
                .context("bringing A's WiFi interface up")?;
            Ok(wait_wifi_back(
                &control_a,
                &control_b,
                base,
                None,
                Instant::now(),
            ))
        })
    });
    let sender_stop = Arc::new(AtomicBool::new(false));
    let sender = voip::spawn_sender(
        tb.a.name(),
        target,
        p.voip_size,
        p.voip_interval,
        v.dscp,
        until,
        sender_stop.clone(),
    );
    let stop_sender = |sender: std::thread::JoinHandle<_>| {
        sender_stop.store(true, Ordering::Relaxed);
        let _ = sender.join();
    };
    let c0 = (tb.mptd_a.cpu_time(), tb.mptd_b.cpu_time(), Instant::now());
    let self0 = cpu_time(std::process::id());
    let tun_target = plan.inner(2);
    let mut stall = None;
    let bulk_m = match &v.bulk {
        Bulk::Iperf3 => {
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
                    mptcp: false,
                },
                stop,
            );
            match r {
                Ok(m) => Some(m),
                Err(e) => {
                    stop_sender(sender);
                    return Err(e.context(format!("case {}: bulk TCP", k + 1)));
                }
            }
        }
        Bulk::Stream(cc) => {
            let r = (|| -> anyhow::Result<StallStats> {
                let sink = stall::Sink::start(tb.b.name(), any(STALL_PORT)?)?;
                let to = plan.inner_sockaddr(STALL_PORT)?;
                let source = stall::spawn_source(
                    tb.a.name(),
                    to,
                    Transport::Tcp,
                    cc,
                    until,
                    sender_stop.clone(),
                );
                let sent = match source.join() {
                    Ok(r) => r.context("bulk TCP source")?,
                    Err(_) => bail!("bulk TCP source panicked"),
                };
                // The window the WiFi path was out (an address change has none).
                let window = (v.event != LteEvent::AddrChange)
                    .then(|| (outage_start, outage_start + p.handover_len));
                let st = sink.finish(if cc.is_empty() { "default" } else { cc }, window)?;
                if sent == 0 {
                    bail!("bulk TCP source sent nothing");
                }
                Ok(st)
            })();
            match r {
                Ok(st) => {
                    let m = Measurement {
                        mbps: st.mbps,
                        seconds: s.duration.as_secs_f64(),
                        ..Measurement::default()
                    };
                    stall = Some(st);
                    Some(m)
                }
                Err(e) => {
                    stop_sender(sender);
                    return Err(e.context(format!("case {}: bulk TCP", k + 1)));
                }
            }
        }
        Bulk::None => {
            while Instant::now() < until {
                if let Err(e) = sleep(Duration::from_millis(200), stop) {
                    stop_sender(sender);
                    return Err(e);
                }
            }
            None
        }
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
    sleep(Duration::from_secs(1), stop)?;
    let rx = receiver.finish()?;
    let path_back = match link_flap.map(std::thread::JoinHandle::join) {
        None => None,
        Some(Ok(r)) => r?,
        Some(Err(_)) => bail!("the link-down thread panicked"),
    };
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
    let log = voip_log(&sent, &timeline).context("the VoIP log")?;
    let log_path = work.join(format!("voip-{k}.csv"));
    std::fs::write(&log_path, log).with_context(|| format!("writing {}", log_path.display()))?;
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
        emu_cpu_pct: self_cpu_pct(self0, cpu_time(std::process::id()), c0.2.elapsed()),
        ..Row::default()
    };
    row.mptd_status_a = testbed::mptd_status(&tb.control_a).ok();
    row.tunnel_rtt_ms = mean_path_rtt(row.mptd_status_a.as_ref());
    let handover = row
        .mptd_status_a
        .as_ref()
        .and_then(|s| s.connections.as_deref()?.first()?.handover.clone())
        .unwrap_or_default();
    // Kernel MPTCP over the same paths and outage, after mptd's status
    // was read (its second WiFi outage must not count as mpt's).
    let baseline = match (&v.bulk, &stall) {
        (Bulk::Stream(cc), Some(st)) if opts.mptcp && mptcp::applies(&v) => {
            progress(
                k,
                total,
                &case,
                &format!(
                    "kernel MPTCP baseline: the same stream over MPTCP, WiFi silent at {:.1} s",
                    handover_at_s
                ),
            );
            let b = mptcp::measure(&mut tb, p, SETUP_ALLOWANCE, s.duration, cc, st.mbps, stop)
                .with_context(|| format!("case {}: kernel MPTCP baseline", k + 1))?;
            println!("    {}", mptcp_summary(&b, st));
            Some(b)
        }
        _ => None,
    };
    row.wires = tb.stop_wires();
    let mut result = LteResult {
        variant: v.label(),
        excess_max_ms: st.delay_max_ms.map(|d| (d - lte_owd_ms).max(0.0)),
        voip: st,
        dscp: v.dscp,
        lte_backup: v.lte_backup,
        bulk: bulk_m,
        stall,
        handover_at_s,
        handover_len_s: p.handover_len.as_secs_f64(),
        wifi_mbps: rates[0] as f64 / 1e6,
        lte_mbps: rates[last] as f64 / 1e6,
        gtp_factor: factor,
        lte_owd_ms,
        handovers: handover.count.unwrap_or(0),
        handover_gap_ms: handover.last.flatten().and_then(|l| l.gap_ms),
        path_back_ms: path_back.map(|d| d.as_secs_f64() * 1e3),
        event: v.event.as_str(),
        target: None,
        pass: None,
        timeline,
        mptcp: baseline,
    };
    if let Some((target, pass)) = check_target(&v, &result) {
        result.target = Some(target);
        result.pass = Some(pass);
    }
    println!("    {}", summary(&result));
    row.lte = Some(result);
    row.finish();
    progress(k, total, &case, "tearing down");
    drop(tb);
    Ok(row)
}

/// One line comparing the tunnel's stream with MPTCP's.
fn mptcp_summary(b: &mptcp::HandoverMptcp, mpt: &StallStats) -> String {
    use crate::bench::text::opt;
    let around = |st: &StallStats| {
        st.around.map_or("-".into(), |a| {
            format!(
                "{}/{}/{}",
                opt(a.before_mbps, 2),
                opt(a.during_mbps, 2),
                opt(a.after_mbps, 2)
            )
        })
    };
    format!(
        "MPTCP {:.2} Mbit/s, longest stall {:.0} ms, before/during/after {} Mbit/s ({}); \
         mpt {:.2} Mbit/s, {:.0} ms, {}; mpt / MPTCP {}; load {}/{}",
        b.stall.mbps,
        b.stall.longest_stall_ms,
        around(&b.stall),
        b.paths.label(&["wifi".into(), "lte".into()]),
        mpt.mbps,
        mpt.longest_stall_ms,
        around(mpt),
        opt(b.mpt_over_mptcp, 2),
        opt(b.load_mpt, 1),
        opt(b.load_mptcp, 1)
    )
}
