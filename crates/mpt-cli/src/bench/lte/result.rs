//! What one `lte-gateway` case measured (results.json `rows[].lte`).

use serde::{Deserialize, Deserializer, Serialize};

use super::mptcp::HandoverMptcp;
use crate::bench::iperf::Measurement;
use crate::bench::stall::StallStats;
use crate::bench::voip::VoipStats;

/// Results of one `lte-gateway` case.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LteResult {
    /// The variant, as in the progress lines.
    pub variant: String,
    pub voip: VoipStats,
    /// DSCP the VoIP packets carried (0: unmarked).
    pub dscp: u8,
    /// The LTE path was a backup.
    pub lte_backup: bool,
    /// Bulk TCP through the tunnel over the same time.
    pub bulk: Option<Measurement>,
    /// Bulk TCP of our own: goodput and the longest stall.
    pub stall: Option<StallStats>,
    /// Seconds from the measurement start to the WiFi outage (as it happened).
    pub handover_at_s: f64,
    pub handover_len_s: f64,
    pub wifi_mbps: f64,
    pub lte_mbps: f64,
    pub gtp_factor: f64,
    /// The LTE link's configured one-way delay (A to B), ms.
    pub lte_owd_ms: f64,
    /// Highest VoIP one-way delay above the LTE link's, ms: the longest
    /// any packet waited beyond the slower path.
    pub excess_max_ms: Option<f64>,
    /// mptd A's handovers and the latest one's gap (its status).
    pub handovers: u64,
    pub handover_gap_ms: Option<f64>,
    /// link-down: from the link coming back, addr-change: from the new
    /// address, until the WiFi path carries data again (A sends on it and
    /// B receives; addr-change: B from A's new address), ms.
    pub path_back_ms: Option<f64>,
    /// How the WiFi link failed: "silent", "link-down" or "addr-change".
    #[serde(deserialize_with = "event")]
    pub event: EventName,
    /// The target for this variant and whether it was met.
    pub target: Option<String>,
    pub pass: Option<bool>,
    /// VoIP per-packet timeline: (s since start, one-way delay ms; null = lost).
    pub timeline: Vec<(f64, Option<f64>)>,
    /// Kernel MPTCP with the same stream across the same outage (the
    /// `--baseline`; older results have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<HandoverMptcp>,
}

/// An event's name; an alias, so that serde reads it with [`event`]
/// instead of borrowing from the input.
pub type EventName = &'static str;

/// Reads `event` back (`mpt bench replot`): one of the known names, ""
/// for anything else.
fn event<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let s = String::deserialize(d)?;
    Ok(["silent", "link-down", "addr-change"]
        .into_iter()
        .find(|e| *e == s)
        .unwrap_or(""))
}
