//! One `dtn-relay` case: the relayed testbed, the bundle workload with
//! window 1 for the scenario's duration, and the figures.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::def::DtnParams;
use super::result::DtnResult;
use crate::bench::bundle;
use crate::bench::options::Options;
use crate::bench::process::cpu_time;
use crate::bench::progress::progress;
use crate::bench::report::row::{mean_path_rtt, self_cpu_pct, Row};
use crate::bench::scenario::case::Case;
use crate::bench::scenario::expanded::Scenario;
use crate::bench::scenario::link::Link;
use crate::bench::stats::quantile;
use crate::bench::stop::check_stop;
use crate::bench::testbed::{self, Testbed};
use crate::bench::text::opt;
use mpt_emu::schedule::Schedule;

/// TCP port of the bundle receiver in B.
pub const BUNDLE_PORT: u16 = 4556;

pub fn run_case(
    k: usize,
    case: &Case,
    s: &Scenario,
    p: &DtnParams,
    opts: &Options,
    work: &Path,
    stop: &AtomicBool,
) -> anyhow::Result<Row> {
    let total = s.cases.len();
    check_stop(stop)?;
    let mut case = case.clone();
    let (sat_rtt, wired_rtt) = match (case.links.first_mut(), &p.wired) {
        (
            Some(Link::Emu {
                a_to_b,
                b_to_a,
                rtt,
                ..
            }),
            Link::Emu {
                a_to_b: wa,
                b_to_a: wb,
                rtt: wrtt,
                ..
            },
        ) => {
            for d in [a_to_b, b_to_a] {
                d.schedule = Schedule::new(d.schedule.windows().to_vec(), p.contacts);
            }
            case.series = Some(Box::new(((**wa).clone(), (**wb).clone())));
            (*rtt, *wrtt)
        }
        _ => bail!("dtn-relay: the satellite [link] must use shaper = \"emu\""),
    };
    case.links.truncate(1);
    let contacts = p
        .contacts
        .map(|c| format!("{}s/{}s", c.up.as_secs_f64(), c.down.as_secs_f64()));
    progress(
        k,
        total,
        &case,
        &format!(
            "building testbed (wired hop RTT {:.0} ms -> relay -> satellite hop RTT {:.0} ms, contacts {})",
            wired_rtt.as_secs_f64() * 1e3,
            sat_rtt.as_secs_f64() * 1e3,
            contacts.as_deref().unwrap_or("always")
        ),
    );
    let mut tb = Testbed::build(k, &case, work, &opts.mptd, stop)
        .with_context(|| format!("case {}: building the testbed", k + 1))?;
    progress(
        k,
        total,
        &case,
        &format!(
            "{} B bundles, W = 1, for {} s (lifetime {} s)",
            p.bundle_size,
            s.duration.as_secs(),
            p.lifetime.as_secs()
        ),
    );
    let target = tb.plan.inner_sockaddr(BUNDLE_PORT)?;
    let bind: SocketAddr = if target.is_ipv4() {
        format!("0.0.0.0:{BUNDLE_PORT}").parse()?
    } else {
        format!("[::]:{BUNDLE_PORT}").parse()?
    };
    let rx_stop = Arc::new(AtomicBool::new(false));
    let receiver = bundle::spawn_receiver(tb.b.name(), bind, p.bundle_size, rx_stop.clone())
        .context("starting the bundle receiver")?;
    let tx_stop = Arc::new(AtomicBool::new(false));
    let c0 = (tb.mptd_a.cpu_time(), tb.mptd_b.cpu_time(), Instant::now());
    let self0 = cpu_time(std::process::id());
    let sender = bundle::spawn_sender(
        tb.a.name(),
        target,
        p.bundle_size,
        s.duration,
        p.lifetime,
        tx_stop.clone(),
    );
    let mut last_report = Instant::now();
    while !sender.is_finished() {
        if stop.load(Ordering::Relaxed) {
            tx_stop.store(true, Ordering::Relaxed);
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            last_report = Instant::now();
            progress(
                k,
                total,
                &case,
                &format!("{:.0} s elapsed", c0.2.elapsed().as_secs_f64()),
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let res = sender.join();
    rx_stop.store(true, Ordering::Relaxed);
    let _ = receiver.join();
    check_stop(stop)?;
    let (outcomes, elapsed) = match res {
        Ok(r) => r.context("bundle sender")?,
        Err(_) => bail!("bundle sender thread panicked"),
    };
    let wall = c0.2.elapsed().as_secs_f64().max(1e-9);
    let pct = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
        (Some(a), Some(b)) => Some(100.0 * (b - a).as_secs_f64() / wall),
        _ => None,
    };
    let (cpu_a, cpu_b) = (
        pct(c0.0, tb.mptd_a.cpu_time()),
        pct(c0.1, tb.mptd_b.cpu_time()),
    );
    let sent = outcomes.len() as u64;
    let mut times: Vec<f64> = outcomes.iter().filter_map(|o| o.delivered_s).collect();
    times.sort_by(f64::total_cmp);
    let delivered = times.len() as u64;
    let el = elapsed.as_secs_f64().max(1e-9);
    let r = DtnResult {
        sat_rtt_ms: sat_rtt.as_secs_f64() * 1e3,
        total_rtt_ms: (sat_rtt + wired_rtt).as_secs_f64() * 1e3,
        per: case.loss.unwrap_or(0.0),
        contacts,
        bundle_bytes: p.bundle_size,
        sent,
        delivered,
        delivery_ratio: if sent > 0 {
            delivered as f64 / sent as f64
        } else {
            0.0
        },
        goodput_mbps: delivered as f64 * p.bundle_size as f64 * 8.0 / el / 1e6,
        elapsed_s: el,
        delivery_p50_s: quantile(&times, 0.5),
        delivery_max_s: times.last().copied(),
        bundles: outcomes,
    };
    println!(
        "    {} of {} bundles delivered (ratio {:.2}), goodput {:.2} Mbit/s, delivery time p50 {} s",
        r.delivered,
        r.sent,
        r.delivery_ratio,
        r.goodput_mbps,
        opt(r.delivery_p50_s, 2)
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
        paths: 1,
        rtt_ms: case.rtt_ms,
        loss: case.loss,
        ideal_mbps: case.links[0].rate_bps().unwrap_or(0) as f64 / 1e6,
        cpu_a_pct: cpu_a,
        cpu_b_pct: cpu_b,
        emu_cpu_pct: self_cpu_pct(self0, cpu_time(std::process::id()), c0.2.elapsed()),
        ..Row::default()
    };
    row.mptd_status_a = testbed::mptd_status(&tb.control_a).ok();
    row.tunnel_rtt_ms = mean_path_rtt(row.mptd_status_a.as_ref());
    row.wires = tb.stop_wires();
    row.dtn = Some(r);
    row.finish();
    progress(k, total, &case, "tearing down");
    drop(tb);
    Ok(row)
}
