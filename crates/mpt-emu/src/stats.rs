//! Statistics: running mean/variance and the per-direction report.
//!
//! The report is the emulator's Table 1 (paper 001): for each direction the
//! requested and achieved rate, and the error of every departure (actual
//! minus requested time) as sample mean and variance. Rates count whole
//! Ethernet frames as the packet socket sees them (14-byte header + IP
//! packet; no preamble, FCS or inter-frame gap).

use serde::Serialize;

use super::units::format_rate;

/// Below this many back-to-back frames the achieved rate is dominated by
/// the error of two send instants and is not printed (it stays in JSON).
pub const MIN_RATE_SAMPLES: u64 = 10;

/// Welford's running mean and sample variance (numerically stable).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Welford {
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Welford {
    pub fn push(&mut self, x: f64) {
        if self.n == 0 {
            self.min = x;
            self.max = x;
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }
    pub fn count(&self) -> u64 {
        self.n
    }
    pub fn mean(&self) -> f64 {
        self.mean
    }
    /// Sample variance (n - 1), as in the paper; 0 below two samples.
    pub fn variance(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            self.m2 / (self.n - 1) as f64
        }
    }
    pub fn summary(&self) -> ErrorSummary {
        ErrorSummary {
            count: self.n,
            mean: self.mean,
            variance: self.variance(),
            min: if self.n > 0 { self.min } else { 0.0 },
            max: if self.n > 0 { self.max } else { 0.0 },
        }
    }
}

/// Mean, sample variance and range of a per-packet error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ErrorSummary {
    pub count: u64,
    pub mean: f64,
    pub variance: f64,
    pub min: f64,
    pub max: f64,
}

/// Frames dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DropCounts {
    pub queue: u64,
    pub loss: u64,
    pub outage: u64,
    pub relay_full: u64,
    /// The driver's hard cap on held frames (memory guard) was hit.
    pub overflow: u64,
    /// The egress socket refused the frame.
    pub send_error: u64,
    /// Frame larger than the driver's buffer (cannot be forwarded whole).
    pub oversize: u64,
}

impl DropCounts {
    pub fn total(&self) -> u64 {
        self.queue
            + self.loss
            + self.outage
            + self.relay_full
            + self.overflow
            + self.send_error
            + self.oversize
    }
}

/// Rate while the link was busy: summed over consecutive back-to-back
/// frames, so idle time does not dilute it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RateReport {
    /// Configured rate, bit/s (`None`: unlimited or traced).
    pub configured_bps: Option<u64>,
    /// Frames and bytes that left back-to-back with their predecessor.
    pub busy_frames: u64,
    pub busy_bytes: u64,
    /// Rate implied by the scheduled departures, bit/s.
    pub requested_bps: Option<f64>,
    /// Rate implied by the actual departures, bit/s.
    pub achieved_bps: Option<f64>,
    /// (achieved / requested - 1) in percent.
    pub error_pct: Option<f64>,
}

/// One direction of a wire, after the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DirectionReport {
    /// "a->b" or "b->a".
    pub direction: String,
    pub ingress: String,
    pub egress: String,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub relayed_frames: u64,
    /// Frames read that were GSO/GRO aggregates (counted once in `rx_frames`).
    pub gso_frames: u64,
    /// Segments cut from them in software, each queued, paced and lost as
    /// a packet of its own (see `gso`).
    pub gso_segments: u64,
    /// Aggregates that could not be cut (e.g. VLAN-tagged, UFO), forwarded
    /// whole and paced as one frame.
    pub gso_whole: u64,
    pub drops: DropCounts,
    pub rate: RateReport,
    /// Requested one-way holding time (departure - arrival), milliseconds.
    pub requested_delay_ms: ErrorSummary,
    /// Actual minus requested departure per frame, microseconds.
    pub delay_error_us: ErrorSummary,
    /// How long frames waited in the ingress socket before the driver read
    /// them (kernel receive timestamp to read), microseconds. Arrival times
    /// are corrected by it, so it costs accuracy only when frames are due
    /// before they are read.
    pub read_latency_us: ErrorSummary,
    /// Frames without a kernel timestamp (their read time was used).
    pub rx_without_timestamp: u64,
    /// Frames the kernel dropped before the driver could read them (the
    /// receive ring or socket buffer was full; `PACKET_STATISTICS`). Not
    /// in `rx_frames` nor in `drops`: the link model never saw them.
    pub kernel_drops: u64,
    /// Mean throughput over the whole run, bit/s.
    pub mean_throughput_bps: f64,
    pub duration_s: f64,
}

impl DirectionReport {
    /// Human-readable block for stdout.
    pub fn render(&self) -> String {
        let d = &self.drops;
        let mut s = format!(
            "{} ({} -> {}), {:.1} s\n  frames   rx {}  tx {}  relayed {}  dropped {} (queue {}, loss {}, outage {}, relay_full {}, overflow {}, send_error {}, oversize {})\n",
            self.direction,
            self.ingress,
            self.egress,
            self.duration_s,
            self.rx_frames,
            self.tx_frames,
            self.relayed_frames,
            d.total(),
            d.queue,
            d.loss,
            d.outage,
            d.relay_full,
            d.overflow,
            d.send_error,
            d.oversize
        );
        let r = &self.rate;
        match (r.requested_bps, r.achieved_bps) {
            (Some(req), Some(ach)) if r.busy_frames >= MIN_RATE_SAMPLES => s += &format!(
                "  rate     requested {}  achieved {}  ({:+.3} %) over {} back-to-back frames (whole Ethernet frames)\n",
                format_rate(req),
                format_rate(ach),
                r.error_pct.unwrap_or(0.0),
                r.busy_frames
            ),
            _ => s += &format!(
                "  rate     configured {}; link busy for only {} back-to-back frames, too few for an achieved-rate figure\n",
                r.configured_bps.map_or("unlimited".to_string(), |b| format_rate(b as f64)),
                r.busy_frames
            ),
        }
        s += &format!(
            "  delay    requested mean {:.3} ms; error (actual - requested) mean {:.2} us, variance {:.2} us^2, max {:.1} us over {} frames\n",
            self.requested_delay_ms.mean,
            self.delay_error_us.mean,
            self.delay_error_us.variance,
            self.delay_error_us.max,
            self.delay_error_us.count
        );
        s += &format!(
            "  ingress  read latency mean {:.1} us, max {:.1} us; {} frames without kernel timestamp; {} dropped by the kernel before they were read\n",
            self.read_latency_us.mean, self.read_latency_us.max, self.rx_without_timestamp, self.kernel_drops
        );
        if self.gso_frames > 0 {
            s += &format!(
                "  gso      {} frames were GSO/GRO aggregates, cut into {} segments in software\n",
                self.gso_frames, self.gso_segments
            );
        }
        if self.gso_whole > 0 {
            s += &format!(
                "  note     {} aggregates could not be cut and went whole; disable TSO/GSO on the endpoints for per-packet accuracy\n",
                self.gso_whole
            );
        }
        s
    }
}

/// Both directions of a wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WireReport {
    pub a_to_b: DirectionReport,
    pub b_to_a: DirectionReport,
}

impl WireReport {
    pub fn render(&self) -> String {
        format!("{}{}", self.a_to_b.render(), self.b_to_a.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welford_matches_two_pass() {
        let xs: Vec<f64> = (0..1000)
            .map(|i| ((i * 7919) % 1000) as f64 * 0.37 - 40.0)
            .collect();
        let mut w = Welford::default();
        xs.iter().for_each(|&x| w.push(x));
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        assert!((w.mean() - mean).abs() < 1e-9);
        assert!((w.variance() - var).abs() < 1e-6 * var);
        assert_eq!(w.count(), 1000);
        let s = w.summary();
        assert_eq!(s.min, xs.iter().cloned().fold(f64::INFINITY, f64::min));
    }
}
