//! What one `dtn-relay` case measured (results.json `rows[].dtn`).

use serde::Serialize;

use crate::bench::bundle::Outcome;

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
