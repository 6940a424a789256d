//! One `dtn-relay` case: the testbed (A = relay, B = destination, the GEO
//! path(s) between them), the terrestrial hop with S, the three agents, a
//! first bundle end to end, then the measurements of [`super::phases`].

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::agent::{self, Node};
use super::def::DtnParams;
use super::flow::{self, Collector, Plan};
use super::goodput;
use super::phases::{self, Nodes};
use super::result::{loadavg, DtnResult};
use super::topo::{self, Terrestrial, RELAY_ADDR, SUBNET, S_ADDR};
use crate::bench::options::Options;
use crate::bench::process::Proc;
use crate::bench::progress::progress;
use crate::bench::report::row::{mean_path_rtt, Row};
use crate::bench::scenario::case::Case;
use crate::bench::scenario::expanded::Scenario;
use crate::bench::scenario::link::Link;
use crate::bench::stop::check_stop;
use crate::bench::testbed::{self, Testbed};

/// Ids: the first bundle, the goodput phase's, the gap phase's.
const WARMUP_ID: u64 = 0;
const GOODPUT_IDS: u64 = 1;
const GAP_IDS: u64 = 1_000_000;

fn rtt_of(link: &Link) -> Duration {
    match link {
        Link::Emu { rtt, .. } => *rtt,
        Link::Tbf { .. } => Duration::ZERO,
    }
}

/// Starts the three agents: src (S) -> relay (A) -> dst (B), static routes.
fn start_agents(
    dtnd: &Path,
    tb: &Testbed,
    s_ns: &str,
    work: &Path,
    k: usize,
) -> anyhow::Result<Vec<Proc>> {
    let (a_inner, b_inner) = (tb.plan.inner(1), tb.plan.inner(2));
    let nodes = [
        Node {
            name: "src",
            ns: s_ns,
            peers: vec![(RELAY_ADDR.into(), "relay")],
            routes: vec![("dst", "relay")],
        },
        Node {
            name: "relay",
            ns: tb.a.name(),
            peers: vec![(b_inner, "dst"), (S_ADDR.into(), "src")],
            routes: vec![("dst", "dst"), ("src", "src")],
        },
        Node {
            name: "dst",
            ns: tb.b.name(),
            peers: vec![(a_inner, "relay")],
            routes: vec![("src", "relay")],
        },
    ];
    let mut procs = Vec::new();
    for n in &nodes {
        procs.push(agent::spawn(dtnd, n, work, k)?);
    }
    for n in &nodes {
        flow::agent_ready(n.ns, Duration::from_secs(20))?;
    }
    Ok(procs)
}

fn check_alive(procs: &mut [Proc], tb: &mut Testbed) -> anyhow::Result<()> {
    for p in procs.iter_mut().chain([&mut tb.mptd_a, &mut tb.mptd_b]) {
        if let Some(st) = p.exited() {
            bail!(
                "{} died ({st}); log {}:\n{}",
                p.name,
                p.log.display(),
                p.log_tail()
            );
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub fn run_case(
    k: usize,
    case: &Case,
    s: &Scenario,
    p: &DtnParams,
    opts: &Options,
    dtnd: &Path,
    work: &Path,
    stop: &AtomicBool,
) -> anyhow::Result<Row> {
    let total = s.cases.len();
    check_stop(stop)?;
    if case.combo.inner != 4 {
        bail!("dtn-relay: the source's subnet is IPv4; use an inner IPv4 combo (4in4, 4in6)");
    }
    let Some(sat) = case.links.first() else {
        bail!("dtn-relay: no GEO path");
    };
    let (sat_rtt, terr_rtt) = (rtt_of(sat), rtt_of(&p.terrestrial));
    let load_before = loadavg();
    let mut case = case.clone();
    case.networks_b = vec![SUBNET.into()];
    progress(
        k,
        total,
        &case,
        &format!(
            "building testbed (S -terrestrial {:.0} ms- relay A =tunnel, GEO {:.0} ms= B)",
            terr_rtt.as_secs_f64() * 1e3,
            sat_rtt.as_secs_f64() * 1e3
        ),
    );
    let mut tb = Testbed::build(k, &case, work, &opts.mptd, stop)
        .with_context(|| format!("case {}: building the testbed", k + 1))?;
    let Some(m) = tb.m_name().map(str::to_string) else {
        bail!("dtn-relay: the GEO [link] must use shaper = \"emu\"");
    };
    let tunnel_subnet = format!("{}/24", tb.plan.inner(0));
    let mut terr = Terrestrial::build(k, &p.terrestrial, tb.a.name(), &m, &tunnel_subnet)
        .context("building the terrestrial hop")?;
    // Every TCP flow of the case with the scenario's congestion control
    // (senders are S and A; B too, for symmetry), the GEO leg's after.
    if let Some(cc) = &p.cc {
        for ns in [terr.s.name(), tb.a.name(), tb.b.name()] {
            topo::set_cc(ns, cc)?;
        }
    }
    if let Some(cc) = &p.sat_cc {
        topo::set_cc(tb.a.name(), cc)?;
    }
    let cc = topo::get_cc(terr.s.name()).ok();
    progress(
        k,
        total,
        &case,
        "starting dtnd at src (S), relay (A), dst (B)",
    );
    let mut agents = start_agents(dtnd, &tb, terr.s.name(), work, k)?;
    let b_inner = tb.plan.inner(2);
    let s_name = terr.s.name().to_string();
    let (a_name, b_name) = (tb.a.name().to_string(), tb.b.name().to_string());
    let nodes = Nodes {
        s: &s_name,
        a: &a_name,
        b: &b_name,
        b_inner: &b_inner,
        dst: "dst",
    };
    let col = Collector::start(nodes.b);
    let t0 = Instant::now();
    col.reset(t0);
    flow::run_source(
        nodes.s,
        "dst",
        1024,
        Plan::Batches(vec![(t0, vec![WARMUP_ID])]),
        &col.seen,
        t0,
        stop,
    )?;
    let first_within = Duration::from_secs(30) + 6 * (sat_rtt + terr_rtt);
    if !col.wait_for(&[WARMUP_ID], t0 + first_within, stop) {
        check_stop(stop)?;
        bail!(
            "a first bundle src -> relay -> dst did not arrive within {} s; logs in {}",
            first_within.as_secs(),
            work.display()
        );
    }
    progress(
        k,
        total,
        &case,
        &format!(
            "first bundle through the relay in {:.2} s",
            t0.elapsed().as_secs_f64()
        ),
    );
    let (dur, omit) = (s.duration, s.omit);
    let bg_secs = omit + dur + Duration::from_secs(3);
    let tcp_first = k % 2 == 0;
    let mut r = DtnResult {
        sat_rtt_ms: sat_rtt.as_secs_f64() * 1e3,
        terr_rtt_ms: terr_rtt.as_secs_f64() * 1e3,
        per: case.loss.unwrap_or(0.0),
        bundle_bytes: p.bundle_size,
        window: p.window,
        competing_flows: p.competing_flows,
        cc,
        sat_cc: p.sat_cc.clone(),
        duration_s: dur.as_secs_f64(),
        omit_s: omit.as_secs_f64(),
        tcp_first,
        load_before,
        ..DtnResult::default()
    };
    for step in if tcp_first { [0, 1] } else { [1, 0] } {
        check_stop(stop)?;
        if terr.failed() || tb.wire_failed() {
            bail!("an emulator wire stopped; see the log");
        }
        if step == 0 {
            progress(
                k,
                total,
                &case,
                &format!(
                    "end-to-end TCP S -> B ({} s after {} s ramp-up) beside {} competing flows",
                    dur.as_secs(),
                    omit.as_secs(),
                    p.competing_flows
                ),
            );
            let (m, bg) = phases::beside_competing(
                &nodes,
                p.competing_flows,
                bg_secs,
                &work.join(format!("iperf3-{k}-competing-tcp.json")),
                stop,
                || {
                    phases::tcp(
                        &nodes,
                        dur,
                        omit,
                        &work.join(format!("iperf3-{k}-e2e.json")),
                        stop,
                    )
                },
            )?;
            println!(
                "    end-to-end TCP {:.2} Mbit/s ({} retransmits); competing flows {:.2} Mbit/s",
                m.mbps,
                m.retransmits.unwrap_or(0),
                bg.as_ref().map_or(0.0, |b| b.mbps)
            );
            r.tcp_mbps = Some(m.mbps);
            r.tcp_retransmits = m.retransmits;
            r.competing_tcp_phase_mbps = bg.map(|b| b.mbps);
        } else {
            progress(
                k,
                total,
                &case,
                &format!(
                    "bundles src -> relay -> dst, {} B, window {} ({} s after {} s ramp-up) beside {} competing flows",
                    p.bundle_size,
                    p.window,
                    dur.as_secs(),
                    omit.as_secs(),
                    p.competing_flows
                ),
            );
            let (b, bg) = phases::beside_competing(
                &nodes,
                p.competing_flows,
                bg_secs,
                &work.join(format!("iperf3-{k}-competing-bundles.json")),
                stop,
                || {
                    phases::bundles(
                        &nodes,
                        &col,
                        GOODPUT_IDS,
                        p.bundle_size,
                        p.window,
                        dur,
                        omit,
                        stop,
                    )
                },
            )?;
            println!(
                "    bundles {} Mbit/s steady ({:.2} delivered / window); {} submitted, {} delivered ({} second copies); competing flows {:.2} Mbit/s",
                b.steady_mbps.map_or("-".into(), |g| format!("{g:.2}")),
                b.window_mbps,
                b.submitted,
                goodput::first_deliveries(&b.deliveries).len(),
                goodput::duplicates(&b.deliveries),
                bg.as_ref().map_or(0.0, |b| b.mbps)
            );
            // Let the relay deliver what the phase left on its way, so
            // that the next phase (end-to-end TCP over the same GEO hop,
            // or the contact gap's account) does not share the hop with
            // this phase's backlog.
            let ids: Vec<u64> = (GOODPUT_IDS..GOODPUT_IDS + b.submitted as u64).collect();
            let t = Instant::now();
            let drained = col.wait_for(&ids, t + Duration::from_secs(60) + 10 * sat_rtt, stop);
            r.backlog_drain_s = drained.then(|| t.elapsed().as_secs_f64());
            println!(
                "    the phase's last bundles delivered {} later",
                r.backlog_drain_s
                    .map_or("not within the limit".into(), |s| format!("{s:.1} s"))
            );
            r.bundle_mbps = b.steady_mbps;
            r.bundle_window_mbps = b.window_mbps;
            r.bundles_submitted = b.submitted;
            r.bundles_delivered = goodput::first_deliveries(&b.deliveries).len();
            r.bundles_duplicate = goodput::duplicates(&b.deliveries);
            r.bundles_corrupt = b.deliveries.iter().filter(|d| !d.intact).count();
            r.deliveries = b.deliveries;
            r.competing_bundle_phase_mbps = bg.map(|b| b.mbps);
        }
        check_alive(&mut agents, &mut tb)?;
    }
    if !p.gap.is_zero() {
        check_stop(stop)?;
        progress(
            k,
            total,
            &case,
            &format!(
                "contact gap: GEO hop down {} s; {} bundles before it, {} during it",
                p.gap.as_secs_f64(),
                p.gap_bundles,
                p.gap_bundles
            ),
        );
        // After the gap the relay has 2 x gap_bundles to move, after its
        // TCPCL session is back (dtnd retries from its 10 s janitor, the
        // SYNs back off through the outage): a minute, ten RTTs and the
        // bundles at 1 Mbit/s before a bundle counts as missing.
        let backlog_s = 2.0 * f64::from(p.gap_bundles) * p.bundle_size as f64 * 8.0 / 1e6;
        let patience = Duration::from_secs(60) + 10 * sat_rtt + Duration::from_secs_f64(backlog_s);
        let g = phases::gap(
            &mut tb,
            &nodes,
            &col,
            GAP_IDS,
            p.bundle_size,
            p.gap_bundles,
            p.gap,
            patience,
            stop,
        )?;
        let o = &g.outcome;
        println!(
            "    {} of {} delivered intact ({} after the gap), missing {:?}, corrupt {:?}, duplicates {}; last {} s after the gap",
            o.delivered,
            o.sent,
            o.after_gap,
            o.missing,
            o.corrupt,
            o.duplicates,
            o.last_after_gap_s.map_or("-".into(), |t| format!("{t:.2}"))
        );
        r.gap = Some(g);
        check_alive(&mut agents, &mut tb)?;
    }
    drop(col);
    r.load_after = loadavg();
    let mut row = Row {
        combo: case.combo.label(),
        n: case.n,
        paths: case.links.len(),
        rtt_ms: case.rtt_ms,
        loss: case.loss,
        ideal_mbps: sat.rate_bps().unwrap_or(0) as f64 / 1e6,
        ..Row::default()
    };
    row.mptd_status_a = testbed::mptd_status(&tb.control_a).ok();
    row.tunnel_rtt_ms = mean_path_rtt(row.mptd_status_a.as_ref());
    row.wires = tb.stop_wires();
    row.wires.extend(terr.stop());
    row.dtn = Some(r);
    row.finish();
    progress(k, total, &case, "tearing down");
    drop(agents);
    drop(terr);
    drop(tb);
    Ok(row)
}
