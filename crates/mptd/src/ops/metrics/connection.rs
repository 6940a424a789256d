//! The connection families (label `conn`): drops by reason, loss repair,
//! redundancy, delay equalisation, handovers, TCP segments rewritten (MSS
//! clamping). The drop, repair and TCP families iterate their counter
//! groups (`crate::plane::counters`), so
//! their label values are the status document's keys.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;

use crate::ops::metrics::families::{counters, gauges, Labels};
use crate::plane::{ConnShared, TxStats};

/// The connection families of the connections `live`; `tx` counts what
/// no connection owns (conn="").
pub fn encode(encoder: &mut DescriptorEncoder, live: &[&ConnShared], tx: &TxStats) -> fmt::Result {
    drops(encoder, live, tx)?;
    repair_and_redundancy(encoder, live)?;
    tcp(encoder, live)?;
    equalize(encoder, live)?;
    handovers(encoder, live)
}

/// `mpt_drops_total`: per connection and reason, and (conn="") packets
/// the tun gave that route to no connection, and tun read errors.
fn drops(encoder: &mut DescriptorEncoder, live: &[&ConnShared], tx: &TxStats) -> fmt::Result {
    let per_conn = live.iter().flat_map(|c| {
        c.drops
            .each()
            .into_iter()
            .map(|(reason, n)| (Labels::conn(&c.name).with("reason", reason), n))
    });
    let no_conn = tx
        .each()
        .into_iter()
        .map(|(reason, n)| (Labels::conn("").with("reason", reason), n));
    counters(
        encoder,
        "mpt_drops_total",
        "Datagrams or packets dropped, by connection and reason (conn=\"\": before any connection is known).",
        per_conn.chain(no_conn),
    )
}

/// `mpt_repair_total`, `mpt_redundancy_copies_total`,
/// `mpt_redundancy_bytes_total`.
fn repair_and_redundancy(encoder: &mut DescriptorEncoder, live: &[&ConnShared]) -> fmt::Result {
    counters(
        encoder,
        "mpt_repair_total",
        "Loss repair: requests sent (requested, requested_datagrams), holes left to TCP (congestion_holes), not asked for (unrequested) or filled within the reorder window (reordered_holes), datagrams that came after their repair was asked for (needless), copies received and duplicates; the peer's requests answered (peer_requests, sent) or not (missed).",
        live.iter().flat_map(|c| {
            c.repairs
                .each()
                .into_iter()
                .map(|(event, n)| (Labels::conn(&c.name).with("event", event), n))
        }),
    )?;
    // The copied bytes have a family of their own.
    counters(
        encoder,
        "mpt_redundancy_copies_total",
        "Redundancy copies of real-time packets: sent, arrived before their original (first), second arrivals dropped (duplicates).",
        live.iter().flat_map(|c| {
            let k = &c.copies;
            [
                ("sent", k.sent.get()),
                ("first", k.first.get()),
                ("duplicates", k.duplicates.get()),
            ]
            .map(|(event, n)| (Labels::conn(&c.name).with("event", event), n))
        }),
    )?;
    counters(
        encoder,
        "mpt_redundancy_bytes_total",
        "Bytes sent as redundancy copies (UDP payload).",
        live.iter()
            .map(|c| (Labels::conn(&c.name), c.copies.sent_bytes.get())),
    )
}

/// `mpt_tcp_total`: what the transmit stage did to TCP segments, per
/// connection and event (`mss_clamped`).
fn tcp(encoder: &mut DescriptorEncoder, live: &[&ConnShared]) -> fmt::Result {
    counters(
        encoder,
        "mpt_tcp_total",
        "TCP segments read from tun and rewritten: SYNs whose MSS option was lowered to fit the tunnel MTU (mss_clamped).",
        live.iter().flat_map(|c| {
            c.tcp
                .each()
                .into_iter()
                .map(|(event, n)| (Labels::conn(&c.name).with("event", event), n))
        }),
    )
}

/// The `mpt_equalize_*` families.
fn equalize(encoder: &mut DescriptorEncoder, live: &[&ConnShared]) -> fmt::Result {
    gauges(
        encoder,
        "mpt_equalize_hold_seconds",
        "How long delay equalisation holds data from the fastest path now: the slowest counted path's delay above the fastest's (0: no hold).",
        live.iter().map(|c| {
            let hold = c.timing.load().equalize_spread_us() as f64 / 1e6;
            (Labels::conn(&c.name), hold)
        }),
    )?;
    counters(
        encoder,
        "mpt_equalize_held_packets_total",
        "Data packets delay equalisation held before the resequencer.",
        live.iter()
            .map(|c| (Labels::conn(&c.name), c.equalized.held.get())),
    )?;
    counters(
        encoder,
        "mpt_equalize_held_seconds_total",
        "The holds of those packets, summed.",
        live.iter().map(|c| {
            let held = c.equalized.held_us.get() as f64 / 1e6;
            (Labels::conn(&c.name), held)
        }),
    )
}

/// `mpt_handovers_total`, `mpt_handover_gap_seconds`.
fn handovers(encoder: &mut DescriptorEncoder, live: &[&ConnShared]) -> fmt::Result {
    counters(
        encoder,
        "mpt_handovers_total",
        "Times our traffic moved off a path that left service (suspect, down or link gone).",
        live.iter()
            .map(|c| (Labels::conn(&c.name), c.handovers.count.get())),
    )?;
    let last: Vec<_> = live
        .iter()
        .filter_map(|c| c.handovers.last().map(|h| (c.name.as_str(), h)))
        .collect();
    gauges(
        encoder,
        "mpt_handover_gap_seconds",
        "The latest handover's gap: from the last packet heard on the old path to the first data sent on the new one.",
        last.iter().map(|(conn, h)| {
            let labels = Labels::conn(conn).with("from", &h.from).with("to", &h.to);
            (labels, h.gap.as_secs_f64())
        }),
    )
}
