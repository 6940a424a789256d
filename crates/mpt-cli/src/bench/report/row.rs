//! One case's measurements ([`Row`]), whatever the scenario: the generic
//! throughput figures, and the result of a scenario family (`lte`, `dtn`,
//! `unlike`) where it has one. The rows depend on the families' result
//! types, never the other way round.

use mpt_api::Status;
use serde::{Deserialize, Serialize};

use crate::bench::dtn::result::DtnResult;
use crate::bench::iperf::Measurement;
use crate::bench::lte::result::LteResult;
use crate::bench::unlike::result::UnlikeResult;

/// Measurements of one case.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Row {
    /// Inner-in-outer IP versions, e.g. "4in4".
    pub combo: String,
    /// Swept (identical) paths.
    pub n: usize,
    /// All paths, including an extra link.
    pub paths: usize,
    pub rtt_ms: Option<f64>,
    pub loss: Option<f64>,
    pub extra: bool,
    /// Sum of the paths' nominal rates (on whole frames), Mbit/s.
    pub ideal_mbps: f64,
    pub raw_udp: Option<Measurement>,
    pub raw_tcp: Option<Measurement>,
    pub udp: Option<Measurement>,
    pub tcp: Option<Measurement>,
    /// HTTP download through the tunnel.
    pub http: Option<Measurement>,
    /// `accel-tcp`: TCP from an end host behind A to one behind B, split
    /// at A (TCP acceleration); absent in results of older builds.
    pub accel_tcp: Option<Measurement>,
    /// Tunnel goodput / ideal.
    pub udp_frac_ideal: Option<f64>,
    pub tcp_frac_ideal: Option<f64>,
    /// Tunnel goodput / (n x raw goodput of one path).
    pub udp_frac_raw: Option<f64>,
    pub tcp_frac_raw: Option<f64>,
    /// CPU use of mptd A and B over the tunnel tests, percent of one core.
    pub cpu_a_pct: Option<f64>,
    pub cpu_b_pct: Option<f64>,
    /// CPU % of this `mpt` process during the tunnel measurements: the
    /// in-process link emulator (plus light traffic-generator threads in
    /// lte-gateway and dtn-relay; the HTTP test is excluded).
    pub emu_cpu_pct: Option<f64>,
    /// Mean smoothed RTT over the paths as mptd A measured it (probes).
    pub tunnel_rtt_ms: Option<f64>,
    /// mptd A's status after the tunnel tests (per-path counters).
    pub mptd_status_a: Option<Status>,
    /// mptd B's status after the tunnel tests: the receiving side of the
    /// TCP tests (resequencing, loss repair requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mptd_status_b: Option<Status>,
    /// Emulator reports of the emulated paths.
    pub wires: Vec<serde_json::Value>,
    /// `lte-gateway`: VoIP, bulk and handover figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lte: Option<LteResult>,
    /// `dtn-relay`: bundle figures (not read back by `mpt bench replot`:
    /// the dtn suite's result types are its own).
    #[serde(skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub dtn: Option<DtnResult>,
    /// `unlike`: raw per-path baselines and the tunnel, per congestion control.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unlike: Option<UnlikeResult>,
}

/// Mean of the paths' smoothed RTT in an mptd status document.
pub fn mean_path_rtt(status: Option<&Status>) -> Option<f64> {
    let conns = status?.connections.as_deref()?;
    let rtts: Vec<f64> = conns
        .iter()
        .filter_map(|c| c.paths.as_deref())
        .flatten()
        .filter_map(|p| p.rtt_ms.flatten())
        .collect();
    (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64)
}

/// CPU % of this process between two readings taken `wall` apart.
pub fn self_cpu_pct(
    before: Option<std::time::Duration>,
    after: Option<std::time::Duration>,
    wall: std::time::Duration,
) -> Option<f64> {
    let (b, a) = (before?, after?);
    (wall.as_secs_f64() > 0.0)
        .then(|| 100.0 * a.saturating_sub(b).as_secs_f64() / wall.as_secs_f64())
}

impl Row {
    pub fn finish(&mut self) {
        let ideal = self.ideal_mbps;
        let frac = |m: &Option<Measurement>, d: f64| {
            m.as_ref().and_then(|m| (d > 0.0).then(|| m.mbps / d))
        };
        self.udp_frac_ideal = frac(&self.udp, ideal);
        self.tcp_frac_ideal = frac(&self.tcp, ideal);
        let n = self.n as f64;
        self.udp_frac_raw = frac(&self.udp, self.raw_udp.as_ref().map_or(0.0, |m| m.mbps * n));
        self.tcp_frac_raw = frac(&self.tcp, self.raw_tcp.as_ref().map_or(0.0, |m| m.mbps * n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_is_written_to_results_as_the_daemon_sent_it() {
        let doc = json!({
            "connections": [{
                "name": "c",
                "handover": {"count": 0, "last": null},
                "paths": [
                    {"name": "p0", "remote": null, "rtt_ms": 10.0, "state": "up", "tx_packets": 5},
                    {"name": "p1", "remote": "10.0.1.2:1", "rtt_ms": 30.5, "state": "down"},
                    {"name": "p2", "rtt_ms": null},
                ],
                "reorder": {"spread_ms": null, "hold": {"le_ms": [1, null]}},
            }],
            "netlink": null,
            "uptime_s": 3,
        });
        let status: Status = serde_json::from_value(doc.clone()).expect("status");
        assert_eq!(mean_path_rtt(Some(&status)), Some(20.25));
        let row = Row {
            mptd_status_a: Some(status.clone()),
            mptd_status_b: Some(status),
            ..Row::default()
        };
        let written = serde_json::to_value(&row).expect("row");
        assert_eq!(written["mptd_status_a"], doc);
        assert_eq!(written["mptd_status_b"], doc);
        // No status: `null` for A, nothing for B, as before.
        let written = serde_json::to_value(Row::default()).expect("row");
        assert_eq!(written["mptd_status_a"], serde_json::Value::Null);
        assert!(written.get("mptd_status_b").is_none());
        assert_eq!(mean_path_rtt(None), None);
        assert_eq!(mean_path_rtt(Some(&Status::default())), None);
    }
}
