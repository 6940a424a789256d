//! Loss estimation from the peer's receive reports.
//!
//! The peer tells us, for a path, how many of our datagrams it received and
//! the highest path sequence number it saw. Between two reports the number
//! we must have sent is the advance of the highest sequence number, so the
//! loss in that interval is `1 - received / advance`. Intervals are folded
//! into decaying sums so a burst fades out over a few keepalive periods.

use crate::wire::PathReport;

/// Weight kept from the past at each new report (3/4): the estimate covers
/// roughly the last four reports.
const DECAY_NUM: u64 = 3;
const DECAY_DEN: u64 = 4;

/// Decaying loss estimate for the direction we send in on one path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossEstimator {
    last: Option<(u32, u32)>,
    expected: u64,
    received: u64,
}

impl LossEstimator {
    /// Folds a report in.
    pub fn on_report(&mut self, report: &PathReport) {
        let now = (report.rx_packets, report.rx_highest_path_seq);
        let Some((prev_rx, prev_high)) = self.last.replace(now) else {
            return;
        };
        let advance = report.rx_highest_path_seq.wrapping_sub(prev_high);
        let got = report.rx_packets.wrapping_sub(prev_rx);
        if advance > u32::MAX / 2 || got > u32::MAX / 2 {
            // Counters went backwards: the peer restarted. Start over.
            *self = LossEstimator {
                last: Some(now),
                ..Default::default()
            };
            return;
        }
        // Reordering can deliver more than the advance in one interval.
        let got = got.min(advance);
        self.expected = self.expected * DECAY_NUM / DECAY_DEN + u64::from(advance);
        self.received = self.received * DECAY_NUM / DECAY_DEN + u64::from(got);
    }

    /// Loss in percent (0..=100), or `None` before two reports arrived.
    pub fn loss_pct(&self) -> Option<f64> {
        if self.expected == 0 {
            return None;
        }
        let lost = self.expected.saturating_sub(self.received);
        Some(lost as f64 * 100.0 / self.expected as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rx: u32, high: u32) -> PathReport {
        PathReport {
            rx_packets: rx,
            rx_highest_path_seq: high,
            ..Default::default()
        }
    }

    #[test]
    fn no_estimate_before_two_reports() {
        let mut l = LossEstimator::default();
        assert_eq!(l.loss_pct(), None);
        l.on_report(&report(10, 10));
        assert_eq!(l.loss_pct(), None);
    }

    #[test]
    fn ten_percent_loss() {
        let mut l = LossEstimator::default();
        l.on_report(&report(0, 0));
        l.on_report(&report(90, 100));
        let pct = l.loss_pct().expect("estimate");
        assert!((pct - 10.0).abs() < 1e-9, "{pct}");
    }

    #[test]
    fn wraps_around_u32() {
        let mut l = LossEstimator::default();
        l.on_report(&report(u32::MAX - 10, u32::MAX - 10));
        l.on_report(&report(9, 9));
        assert_eq!(l.loss_pct(), Some(0.0));
    }

    #[test]
    fn peer_restart_resets() {
        let mut l = LossEstimator::default();
        l.on_report(&report(0, 0));
        l.on_report(&report(50, 100));
        l.on_report(&report(3, 3));
        assert_eq!(l.loss_pct(), None);
    }

    #[test]
    fn old_loss_decays() {
        let mut l = LossEstimator::default();
        l.on_report(&report(0, 0));
        l.on_report(&report(0, 100));
        assert_eq!(l.loss_pct(), Some(100.0));
        let mut rx = 0;
        let mut high = 100;
        for _ in 0..20 {
            rx += 100;
            high += 100;
            l.on_report(&report(rx, high));
        }
        assert!(l.loss_pct().expect("estimate") < 1.0);
    }
}
