//! What one `dtn-relay` case measured (results.json `rows[].dtn`).

use serde::Serialize;

use super::goodput::{Delivery, GapOutcome};

/// The contact-gap phase of a case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GapResult {
    /// How long the GEO hop was down, and when (seconds from the phase
    /// start, which is the restarted wire's epoch).
    pub gap_s: f64,
    pub gap_start_s: f64,
    /// Submission time of each bundle (id, seconds from the phase start).
    pub submitted: Vec<(u64, f64)>,
    pub outcome: GapOutcome,
}

/// Results of one `dtn-relay` case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DtnResult {
    /// GEO hop RTT (the tunnel's path) and terrestrial hop RTT, ms.
    pub sat_rtt_ms: f64,
    pub terr_rtt_ms: f64,
    pub per: f64,
    pub bundle_bytes: usize,
    pub window: u32,
    pub competing_flows: u32,
    /// Congestion control of the TCP flows (S's default as set for the
    /// case: the end-to-end flow, the competing flows, TCPCL).
    pub cc: Option<String>,
    /// Congestion control of the relay's GEO hop (None: kernel default).
    pub sat_cc: Option<String>,
    /// Measurement window of both flows, and the ramp-up left out before it.
    pub duration_s: f64,
    pub omit_s: f64,
    /// Which flow ran first (the order alternates between cases).
    pub tcp_first: bool,
    /// End-to-end TCP source -> destination through the tunnel, Mbit/s.
    pub tcp_mbps: Option<f64>,
    pub tcp_retransmits: Option<u64>,
    /// Competing flows' sum during the TCP and the bundle measurement.
    pub competing_tcp_phase_mbps: Option<f64>,
    pub competing_bundle_phase_mbps: Option<f64>,
    /// Bundles through the relay: steady goodput (between the first and
    /// the last delivery in the window) and delivered / window length.
    pub bundle_mbps: Option<f64>,
    pub bundle_window_mbps: f64,
    pub bundles_submitted: usize,
    /// Distinct bundles delivered intact, and second copies of them.
    pub bundles_delivered: usize,
    pub bundles_duplicate: usize,
    pub bundles_corrupt: usize,
    pub deliveries: Vec<Delivery>,
    /// Seconds after the bundle phase until its last submitted bundle
    /// was delivered (the next phase starts then); `None`: not within
    /// a minute and ten RTTs.
    pub backlog_drain_s: Option<f64>,
    pub gap: Option<GapResult>,
    /// /proc/loadavg (1 min) before and after the case.
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
}

/// The 1-minute load average.
pub fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
