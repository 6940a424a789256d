//! `dtn-relay` (spec section 6; Caini et al., papers/000): two hops through
//! a store-and-forward relay and a bundle workload with window W = 1.
//!
//! Mapping onto the testbed: mptd runs at the two ends only (A = bundle
//! source, B = destination), so the tunnel is the end-to-end convergence
//! layer and its single path crosses both hops. The middle namespace M is
//! the relay: two emulator wires in series, `ma0 <-> ra0` (hop 1, the wired
//! hop A-relay, `[dtn.wired]`, RTT 25 ms) and `rb0 <-> mb0` (hop 2, the
//! satellite hop relay-B, `[link]`, RTT and PER swept, intermittent
//! contacts from `contacts`, custody store `relay`) joined by the veth pair
//! ra0/rb0 inside M. During a contact gap the satellite wire keeps what
//! arrives (custody) and forwards it at link rate when the contact returns;
//! mptd and TCP see a long delay instead of a loss.
//!
//! Workload ([`super::bundle`]): 1 MB bundles, one at a time, each waiting
//! for its 1-byte delivery acknowledgment. Reported: goodput (acknowledged
//! bytes / elapsed time) against the satellite RTT, and the delivery ratio
//! (acknowledged / sent within the bundle lifetime).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::bundle::{self, Outcome};
use super::plot::{Chart, Series};
use super::report::{Report, Row};
use super::scenario::{invalid, resolve_link, Case, Link, LinkDef, Scenario, ScenarioError};
use super::testbed::{self, check_stop, Testbed};
use super::{progress, Options};
use mpt_emu::schedule::{Periodic, Schedule};
use mpt_emu::units;

/// TCP port of the bundle receiver in B.
pub const BUNDLE_PORT: u16 = 4556;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DtnQuick {
    pub contacts: Option<String>,
    pub lifetime: Option<String>,
    pub bundle_size: Option<String>,
}

/// The `[dtn]` table of a scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DtnDef {
    /// Bundle size, e.g. "1MB".
    pub bundle_size: Option<String>,
    /// A bundle not acknowledged within this time is not delivered.
    pub lifetime: Option<String>,
    /// Satellite-hop contact plan UP/DOWN (e.g. "20s/10s"), or "always".
    pub contacts: Option<String>,
    /// The wired hop A - relay.
    pub wired: LinkDef,
    #[serde(default)]
    pub quick: DtnQuick,
}

#[derive(Debug, Clone)]
pub struct DtnParams {
    pub bundle_size: usize,
    pub lifetime: Duration,
    pub contacts: Option<Periodic>,
    pub wired: Link,
}

impl DtnDef {
    pub fn resolve(&self, origin: &str, quick: bool) -> Result<DtnParams, ScenarioError> {
        let pick = |q: &Option<String>, f: &Option<String>| {
            if quick && q.is_some() {
                q.clone()
            } else {
                f.clone()
            }
        };
        let size = match pick(&self.quick.bundle_size, &self.bundle_size) {
            Some(s) => units::parse_bytes(&s)
                .map_err(|e| invalid(origin, format!("dtn.bundle_size: {e}")))?,
            None => 1_000_000,
        };
        if !(1..=1 << 30).contains(&size) {
            return Err(invalid(origin, "dtn.bundle_size must be 1 B..1 GB"));
        }
        let lifetime = match pick(&self.quick.lifetime, &self.lifetime) {
            Some(s) => units::parse_duration(&s)
                .map_err(|e| invalid(origin, format!("dtn.lifetime: {e}")))?,
            None => Duration::from_secs(60),
        };
        let contacts = match pick(&self.quick.contacts, &self.contacts).as_deref() {
            None | Some("always") => None,
            Some(s) => Some(
                Periodic::parse(s).map_err(|e| invalid(origin, format!("dtn.contacts: {e}")))?,
            ),
        };
        let wired = resolve_link(origin, &self.wired, None, None)?;
        if !matches!(wired, Link::Emu { .. }) {
            return Err(invalid(origin, "dtn.wired must use shaper = \"emu\""));
        }
        Ok(DtnParams {
            bundle_size: size as usize,
            lifetime,
            contacts,
            wired,
        })
    }
}

/// Results of one `dtn-relay` case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DtnResult {
    /// Satellite hop RTT and end-to-end RTT (both hops), ms.
    pub sat_rtt_ms: f64,
    pub total_rtt_ms: f64,
    pub per: f64,
    pub contacts: Option<String>,
    pub bundle_bytes: usize,
    pub sent: u64,
    pub delivered: u64,
    pub delivery_ratio: f64,
    pub goodput_mbps: f64,
    pub elapsed_s: f64,
    pub delivery_p50_s: Option<f64>,
    pub delivery_max_s: Option<f64>,
    pub bundles: Vec<Outcome>,
}

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
    let self0 = testbed::cpu_time(std::process::id());
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
        delivery_p50_s: super::plot::quantile(&times, 0.5),
        delivery_max_s: times.last().copied(),
        bundles: outcomes,
    };
    println!(
        "    {} of {} bundles delivered (ratio {:.2}), goodput {:.2} Mbit/s, delivery time p50 {} s",
        r.delivered,
        r.sent,
        r.delivery_ratio,
        r.goodput_mbps,
        fmt(r.delivery_p50_s, 2)
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
    row.dtn = Some(r);
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
        "{:<8} {:>8} {:>9} {:>5} {:>9} {:>6} {:>6} {:>6} {:>9} {:>8} {:>8} {:>9}\n",
        "combo",
        "sat RTT",
        "e2e RTT",
        "PER%",
        "contacts",
        "sent",
        "acked",
        "ratio",
        "goodput",
        "t p50 s",
        "t max s",
        "CPU A/B/emu %"
    );
    for row in &r.rows {
        let Some(d) = &row.dtn else { continue };
        s += &format!(
            "{:<8} {:>8.0} {:>9.0} {:>5.1} {:>9} {:>6} {:>6} {:>6.2} {:>9.2} {:>8} {:>8} {:>9}\n",
            row.combo,
            d.sat_rtt_ms,
            d.total_rtt_ms,
            d.per * 100.0,
            d.contacts.as_deref().unwrap_or("always"),
            d.sent,
            d.delivered,
            d.delivery_ratio,
            d.goodput_mbps,
            fmt(d.delivery_p50_s, 2),
            fmt(d.delivery_max_s, 2),
            format!(
                "{}/{}/{}",
                fmt(row.cpu_a_pct, 0),
                fmt(row.cpu_b_pct, 0),
                fmt(row.emu_cpu_pct, 0)
            ),
        );
    }
    s += "RTT ms (e2e = wired + satellite hop); contacts UP/DOWN of the satellite hop; bundles of \
          the given size with window 1; ratio = acknowledged / sent; goodput Mbit/s of acknowledged bundles; \
          t = bundle delivery (ack) time\n";
    s
}

pub fn csv(r: &Report) -> String {
    let mut s = String::from(
        "combo,sat_rtt_ms,total_rtt_ms,per,contacts,bundle_bytes,sent,delivered,delivery_ratio,\
         goodput_mbps,elapsed_s,delivery_p50_s,delivery_max_s,cpu_a_pct,cpu_b_pct\n",
    );
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
    for row in &r.rows {
        let Some(d) = &row.dtn else { continue };
        s += &format!(
            "{},{:.1},{:.1},{},{},{},{},{},{:.4},{:.4},{:.2},{},{},{},{}\n",
            row.combo,
            d.sat_rtt_ms,
            d.total_rtt_ms,
            d.per,
            d.contacts.as_deref().unwrap_or("always"),
            d.bundle_bytes,
            d.sent,
            d.delivered,
            d.delivery_ratio,
            d.goodput_mbps,
            d.elapsed_s,
            o(d.delivery_p50_s),
            o(d.delivery_max_s),
            o(row.cpu_a_pct),
            o(row.cpu_b_pct),
        );
    }
    s
}

/// Goodput against the satellite RTT, one line per PER.
pub fn svg(r: &Report) -> String {
    let mut c = Chart {
        title: format!(
            "mpt bench {}: bundle goodput vs satellite RTT (W = 1)",
            r.scenario
        ),
        xlabel: "satellite hop RTT (ms)".into(),
        ylabel: "goodput (Mbit/s)".into(),
        ..Chart::default()
    };
    for row in &r.rows {
        let Some(d) = &row.dtn else { continue };
        let label = format!("{} PER {:.0}%", row.combo, d.per * 100.0);
        match c.series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((d.sat_rtt_ms, d.goodput_mbps)),
            None => c.series.push(Series {
                label,
                points: vec![(d.sat_rtt_ms, d.goodput_mbps)],
                ..Series::default()
            }),
        }
    }
    c.render()
}
