//! The three measurements of a case, on a running testbed with its agents:
//! end-to-end TCP and bundle goodput, each beside the competing flows on
//! the terrestrial hop, and the contact gap (the GEO hop down for a while,
//! bundles submitted before and during it).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::flow::{self, Collector, Plan};
use super::goodput::{self, Delivery};
use super::result::GapResult;
use super::topo::RELAY_ADDR;
use crate::bench::iperf::{self, Measurement};
use crate::bench::testbed::Testbed;
use mpt_emu::schedule::{Schedule, Window};

/// Namespaces and names of one case's nodes.
pub struct Nodes<'a> {
    pub s: &'a str,
    pub a: &'a str,
    pub b: &'a str,
    /// B's tunnel address (the end-to-end TCP target).
    pub b_inner: &'a str,
    pub dst: &'a str,
}

/// Runs `measure` while `flows` competing TCP flows S -> A load the
/// terrestrial hop for `secs` (iperf3 -P in a scoped thread); returns both.
pub fn beside_competing<T>(
    nodes: &Nodes<'_>,
    flows: u32,
    secs: Duration,
    json: &Path,
    stop: &AtomicBool,
    measure: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, Option<Measurement>)> {
    if flows == 0 {
        return Ok((measure()?, None));
    }
    std::thread::scope(|sc| {
        let bg = sc.spawn(|| {
            iperf::run(
                &iperf::Run {
                    ns: nodes.s,
                    server_ns: nodes.a,
                    target: RELAY_ADDR,
                    duration: secs,
                    udp: None,
                    json_out: json,
                    cc: None,
                    omit: Duration::ZERO,
                    streams: flows,
                    mptcp: false,
                },
                stop,
            )
        });
        // Let the competing flows take their share first.
        std::thread::sleep(Duration::from_secs(1));
        let m = measure();
        let b = match bg.join() {
            Ok(r) => r.context("competing flows on the terrestrial hop"),
            Err(_) => Err(anyhow::anyhow!("the competing flows' thread panicked")),
        };
        Ok((m?, Some(b?)))
    })
}

/// End-to-end TCP S -> B through the tunnel: `omit` ramp-up, then `dur`.
pub fn tcp(
    nodes: &Nodes<'_>,
    dur: Duration,
    omit: Duration,
    json: &Path,
    stop: &AtomicBool,
) -> anyhow::Result<Measurement> {
    iperf::run(
        &iperf::Run {
            ns: nodes.s,
            server_ns: nodes.b,
            target: nodes.b_inner,
            duration: dur,
            udp: None,
            json_out: json,
            cc: None,
            omit,
            streams: 1,
            mptcp: false,
        },
        stop,
    )
    .context("end-to-end TCP through the tunnel")
}

/// What the bundle goodput phase saw.
pub struct BundleRun {
    pub submitted: usize,
    pub deliveries: Vec<Delivery>,
    pub steady_mbps: Option<f64>,
    pub window_mbps: f64,
}

/// Bundles kept at `window` undelivered for `omit + dur`; goodput over
/// the last `dur`.
#[allow(clippy::too_many_arguments)]
pub fn bundles(
    nodes: &Nodes<'_>,
    col: &Collector,
    first_id: u64,
    size: usize,
    window: u32,
    dur: Duration,
    omit: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<BundleRun> {
    let t0 = Instant::now();
    col.reset(t0);
    let submitted = flow::run_source(
        nodes.s,
        nodes.dst,
        size,
        Plan::Window {
            first: first_id,
            window: window as usize,
            until: t0 + omit + dur,
        },
        &col.seen,
        t0,
        stop,
    )
    .context("bundle source")?;
    let deliveries = col.deliveries();
    let (from, to) = (omit.as_secs_f64(), (omit + dur).as_secs_f64());
    Ok(BundleRun {
        submitted: submitted.len(),
        steady_mbps: goodput::steady_mbps(&deliveries, from, to),
        window_mbps: goodput::window_mbps(&deliveries, from, to),
        deliveries,
    })
}

/// The contact gap: every GEO wire restarted with an outage of `gap`
/// starting `lead` after its restart; `n` bundles submitted at the restart
/// (before the gap) and `n` more in the middle of the gap; waits for all of
/// them up to `patience` after the gap.
#[allow(clippy::too_many_arguments)]
pub fn gap(
    tb: &mut Testbed,
    nodes: &Nodes<'_>,
    col: &Collector,
    first_id: u64,
    size: usize,
    n: u32,
    gap: Duration,
    patience: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<GapResult> {
    let lead = Duration::from_millis(300);
    let outage = Schedule::new(
        vec![Window {
            start: lead,
            len: gap,
        }],
        None,
    );
    for i in 0..tb.wire_epochs().len() {
        let o = outage.clone();
        tb.restart_wire_with(i, move |c| {
            c.a_to_b.schedule = o.clone();
            c.b_to_a.schedule = o;
        })?;
    }
    let t0 = tb
        .wire_epochs()
        .first()
        .copied()
        .unwrap_or_else(Instant::now);
    col.reset(t0);
    let before: Vec<u64> = (first_id..first_id + u64::from(n)).collect();
    let during: Vec<u64> = (first_id + u64::from(n)..first_id + 2 * u64::from(n)).collect();
    let ids: Vec<u64> = before.iter().chain(&during).copied().collect();
    let submitted = flow::run_source(
        nodes.s,
        nodes.dst,
        size,
        Plan::Batches(vec![(t0, before), (t0 + lead + gap / 2, during)]),
        &col.seen,
        t0,
        stop,
    )
    .context("bundle source (contact gap)")?;
    col.wait_for(&ids, t0 + lead + gap + patience, stop);
    let gap_end = (lead + gap).as_secs_f64();
    Ok(GapResult {
        gap_s: gap.as_secs_f64(),
        gap_start_s: lead.as_secs_f64(),
        submitted,
        outcome: goodput::gap_outcome(&ids, &col.deliveries(), gap_end),
    })
}
