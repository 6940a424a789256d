//! The kernel MPTCP baseline of a `handover` variant with a bulk stream
//! (issue 35): the same stream, the same emulated WiFi and LTE paths and
//! the same WiFi outage at the same second, with kernel MPTCP instead of
//! the tunnel, right after the tunnel's run on the same testbed (so both
//! see the same load).
//!
//! How it is set up is [`crate::bench::mptcp`]'s (B announces its LTE
//! address, A's in-kernel path manager opens one subflow per path; the
//! connection starts on WiFi, path 0); that both subflows carried data is
//! proven by B's per-path receive counters ([`PathUse`]). The stream is
//! the suite's own ([`crate::bench::stall`] over `IPPROTO_MPTCP` sockets),
//! so MPTCP's longest stall and its goodput before, during and after the
//! outage are read the same way as mpt's. Only the `silent` event has a
//! baseline: the outage is on the emulated wire for both; link-down and
//! addr-change act on mptd's own interface handling.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::def::{Bulk, LteEvent, LteParams, LteVariant};
use crate::bench::mptcp::{self, PathUse};
use crate::bench::report::meta::LoadAvg;
use crate::bench::stall::{self, StallStats, Transport};
use crate::bench::stop::sleep;
use crate::bench::testbed::Testbed;

/// TCP port of the MPTCP stream's sink in B (beside the tunnel's 5005).
const MPTCP_PORT: u16 = 5006;

/// Kernel MPTCP across the same outage (results.json `rows[].lte.mptcp`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HandoverMptcp {
    /// The stream over MPTCP: goodput, longest stall, per second, around
    /// the outage.
    pub stall: StallStats,
    /// Bytes B received per path over the run.
    pub paths: PathUse,
    /// mpt's goodput / MPTCP's; `None` when MPTCP left a path idle (not
    /// a multipath baseline) or carried nothing.
    pub mpt_over_mptcp: Option<f64>,
    /// The 1-minute load average when the tunnel's run ended and when
    /// MPTCP's ended (the machine is shared: the figures' context).
    pub load_mpt: Option<f64>,
    pub load_mptcp: Option<f64>,
}

/// Does variant `v` get a baseline: a bulk stream across a silent outage.
pub fn applies(v: &LteVariant) -> bool {
    v.event == LteEvent::Silent && matches!(v.bulk, Bulk::Stream(_))
}

/// Does any variant of `p` get one (so `--baseline auto` looks for MPTCP).
pub fn any_applies(p: &LteParams) -> bool {
    p.variants.iter().any(applies)
}

/// Runs the stream over kernel MPTCP on `tb` (the tunnel idle): the WiFi
/// wire restarted, the measurement started `setup` after its new epoch so
/// that the outage lands `handover_at` after the start, as in the tunnel's
/// run; `mpt_mbps` is the tunnel stream's goodput for the ratio.
pub fn measure(
    tb: &mut Testbed,
    p: &LteParams,
    setup: Duration,
    duration: Duration,
    cc: &str,
    mpt_mbps: f64,
    stop: &AtomicBool,
) -> anyhow::Result<HandoverMptcp> {
    let loadavg = || LoadAvg::now().map(|l| l.m1);
    let load_mpt = loadavg();
    let n = tb.wire_epochs().len();
    if n < 2 {
        bail!("the MPTCP baseline needs the WiFi and the LTE path");
    }
    mptcp::configure(tb.a.name(), tb.b.name(), &tb.plan, n)
        .context("setting up the in-kernel path manager")?;
    // The outage schedule starts again from the wire's (new) epoch.
    tb.restart_traced_wires()?;
    let epoch = *tb.wire_epochs().first().context("no WiFi wire")?;
    let outage_start = epoch + setup + p.handover_at;
    let outage = (outage_start, outage_start + p.handover_len);
    sleep(
        (epoch + setup).saturating_duration_since(Instant::now()),
        stop,
    )?;
    let b_addr: IpAddr = tb.plan.outer(0, 2).parse().context("B's WiFi address")?;
    let bind = SocketAddr::new(
        if b_addr.is_ipv4() {
            IpAddr::from([0u8; 4])
        } else {
            IpAddr::from([0u8; 16])
        },
        MPTCP_PORT,
    );
    let before = mptcp::rx_bytes(tb.b.name(), n)?;
    let until = Instant::now() + duration;
    let sink = stall::Sink::start_on(tb.b.name(), bind, Transport::Mptcp)
        .context("MPTCP sink (is net.mptcp.enabled = 1 in B?)")?;
    let source = stall::spawn_source(
        tb.a.name(),
        SocketAddr::new(b_addr, MPTCP_PORT),
        Transport::Mptcp,
        cc,
        until,
        Arc::new(AtomicBool::new(false)),
    );
    let sent = match source.join() {
        Ok(r) => r.context("MPTCP stream source")?,
        Err(_) => bail!("MPTCP stream source panicked"),
    };
    let st = sink.finish(if cc.is_empty() { "default" } else { cc }, Some(outage))?;
    if sent == 0 {
        bail!("the MPTCP stream sent nothing");
    }
    let after = mptcp::rx_bytes(tb.b.name(), n).context("reading path counters")?;
    let paths = PathUse::between(&before, &after);
    Ok(HandoverMptcp {
        mpt_over_mptcp: mptcp::ratio(mpt_mbps, st.mbps, &paths),
        stall: st,
        paths,
        load_mpt,
        load_mptcp: loadavg(),
    })
}
