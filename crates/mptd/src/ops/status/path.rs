//! A path's part of the status document: addresses, weights, what the
//! control loop last published about it ([`crate::plane::PathView`]) and
//! its traffic counters.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use mpt_api::status::PathStatus;

use crate::ops::status::fields::ms;
use crate::plane::PathShared;

/// A share (0 to 1) to three decimals.
fn share(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// Path `p` as of `now`.
pub(super) fn path_status(p: &PathShared, now: Instant) -> PathStatus {
    let v = p.view();
    // A learnt path of a shared port: the address its client sends to,
    // rather than the wildcard bound.
    let local = p
        .via()
        .map_or(p.local, |s| SocketAddr::new(s.addr, p.local.port()));
    PathStatus {
        id: Some(p.id as u64),
        last_change_ms_ago: Some(ms(now.saturating_duration_since(v.last_change))),
        last_rx_ms_ago: Some(v.last_rx.map(|t| ms(now.saturating_duration_since(t)))),
        local: Some(local.to_string()),
        loss_pct: Some(v.loss_pct),
        lossy: Some(v.lossy),
        name: Some(p.name.clone()),
        owd_ms: Some(v.owd_ms),
        peer_weight_in: Some(v.peer_weight_in),
        queue_ms: Some(v.queue_ms),
        rate_bps: Some(v.rate_bps),
        rate_confirmed: Some(v.rate_confirmed),
        remote: Some(p.remote().map(|(a, _)| a.to_string())),
        remote_name: p.remote_name.clone(),
        resolve_error: p.resolve_error(),
        rtt_min_ms: Some(v.rtt_min_ms),
        rtt_ms: Some(v.rtt_ms),
        rx_bytes: Some(p.rx_bytes.get()),
        rx_data_bytes: Some(p.rx_data_bytes.get()),
        rx_data_packets: Some(p.rx_data_packets.get()),
        rx_owd_ms: Some(v.rx_owd_ms),
        rx_packets: Some(p.rx_packets.get()),
        rx_share: Some(share(v.rx_share)),
        share: Some(share(v.share)),
        state: Some(v.state.to_string()),
        state_changes: Some(p.state_changes.get()),
        tx_bytes: Some(p.tx_bytes.get()),
        tx_data_bytes: Some(p.tx_data_bytes.get()),
        tx_data_packets: Some(p.tx_data_packets.get()),
        tx_packets: Some(p.tx_packets.get()),
        weight_in: Some(p.weight_in.load(Relaxed)),
        weight_out: Some(p.weight_out.load(Relaxed)),
        window: Some(p.window.load(Relaxed)),
        other: Default::default(),
    }
}
