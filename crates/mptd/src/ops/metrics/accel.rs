//! The TCP acceleration families (`mpt_accel_*`, conn=""): flows, bytes
//! each way, legs by state, bytes by path, refusals. Absent when acceleration is off.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;

use crate::ops::metrics::families::{counters, gauges, Labels};

/// Encodes `stats` (nothing when `None`).
pub fn encode(encoder: &mut DescriptorEncoder, stats: Option<&mpt_accel::Stats>) -> fmt::Result {
    let Some(stats) = stats else {
        return Ok(());
    };
    let s = stats.snapshot();
    let one = |v: u64| [(Labels::conn(""), v)];
    counters(
        encoder,
        "mpt_accel_flows_total",
        "Accelerated TCP flows (intercepted here, or opened for a peer).",
        one(s.flows),
    )?;
    gauges(
        encoder,
        "mpt_accel_flows_active",
        "Accelerated TCP flows in progress.",
        one(s.flows_active),
    )?;
    counters(
        encoder,
        "mpt_accel_bytes_total",
        "Bytes of accelerated flows, by direction (up: client to destination).",
        [
            (Labels::conn("").with("direction", "up"), s.bytes_up),
            (Labels::conn("").with("direction", "down"), s.bytes_down),
        ],
    )?;
    gauges(
        encoder,
        "mpt_accel_legs",
        "Legs between the gateways, by state.",
        [
            (Labels::conn("").with("state", "idle"), s.legs_idle),
            (Labels::conn("").with("state", "busy"), s.legs_busy),
        ],
    )?;
    let path_ids: Vec<String> = s.path_bytes.iter().map(|p| p.0.to_string()).collect();
    counters(
        encoder,
        "mpt_accel_path_bytes_total",
        "Data bytes sent on pinned acceleration legs, by path id (the path's place in its connection's config).",
        s.path_bytes
            .iter()
            .zip(&path_ids)
            .map(|(&(_, n), id)| (Labels::conn("").with("path", id), n)),
    )?;
    counters(
        encoder,
        "mpt_accel_events_total",
        "Acceleration events: legs opened and failed, flows refused by the destination, reset, dropped, bad frames.",
        [
            ("legs_opened", s.legs_opened),
            ("leg_failures", s.leg_failures),
            ("refused", s.refused),
            ("resets", s.resets),
            ("dropped", s.dropped),
            ("bad_frames", s.bad_frames),
        ]
        .map(|(e, v)| (Labels::conn("").with("event", e), v)),
    )
}
