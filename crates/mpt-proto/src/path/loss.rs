//! Loss estimation from the peer's receive reports.
//!
//! The peer tells us, for a path, how many of our datagrams it received and
//! the highest path sequence number it saw. Between two reports the number
//! we must have sent is the advance of the highest sequence number, so the
//! loss in that interval is `1 - received / advance`. Intervals are folded
//! into decaying sums so a burst fades out: by a half per second of
//! reports, but never by more than a quarter per report. On a busy path
//! (feedback every few milliseconds) the estimate thus covers about the last
//! second and a half; on an idle one (a probe reply per keepalive) the last
//! four reports. Floating-point sums, not integers: with reports a few
//! datagrams apart, integer truncation would bias the estimate.

use std::time::Instant;

use crate::wire::PathReport;

/// Weight kept from the past per report at least (3/4).
const MAX_KEEP_PER_REPORT: f64 = 0.75;

/// Half-life of old reports on a busy path, in seconds.
const HALF_LIFE_S: f64 = 1.0;

/// Decaying loss estimate for the direction we send in on one path.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LossEstimator {
    last: Option<(u32, u32, Instant)>,
    expected: f64,
    received: f64,
}

impl LossEstimator {
    /// Folds a report received at `now` in.
    pub fn on_report(&mut self, report: &PathReport, now: Instant) {
        self.fold(report, now, true);
    }

    /// Moves past a report without counting its interval (it covered
    /// loss of another kind, e.g. a queue overflowing).
    pub fn skip_report(&mut self, report: &PathReport, now: Instant) {
        self.fold(report, now, false);
    }

    fn fold(&mut self, report: &PathReport, now: Instant, count: bool) {
        let cur = (report.rx_packets, report.rx_highest_path_seq, now);
        let Some((prev_rx, prev_high, prev_at)) = self.last.replace(cur) else {
            return;
        };
        let advance = report.rx_highest_path_seq.wrapping_sub(prev_high);
        let got = report.rx_packets.wrapping_sub(prev_rx);
        if advance > u32::MAX / 2 || got > u32::MAX / 2 {
            // Counters went backwards: the peer restarted. Start over.
            *self = LossEstimator {
                last: Some(cur),
                ..Default::default()
            };
            return;
        }
        if !count {
            return;
        }
        // Reordering can deliver more than the advance in one interval.
        let got = got.min(advance);
        let dt = now.saturating_duration_since(prev_at).as_secs_f64();
        let keep = (0.5f64).powf(dt / HALF_LIFE_S).max(MAX_KEEP_PER_REPORT);
        self.expected = self.expected * keep + f64::from(advance);
        self.received = self.received * keep + f64::from(got);
    }

    /// Datagrams the estimate covers (decayed).
    pub fn expected(&self) -> f64 {
        self.expected
    }

    /// Loss in percent (0..=100), or `None` before two reports arrived.
    pub fn loss_pct(&self) -> Option<f64> {
        if self.expected <= 0.0 {
            return None;
        }
        let lost = (self.expected - self.received).max(0.0);
        Some(lost * 100.0 / self.expected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports two seconds apart (a keepalive period), from a fixed start.
    struct Feed {
        l: LossEstimator,
        t: Instant,
    }

    impl Feed {
        fn new() -> Feed {
            Feed {
                l: LossEstimator::default(),
                t: crate::path::tests::t0(),
            }
        }
        fn on_report(&mut self, r: &PathReport) {
            self.t += std::time::Duration::from_secs(2);
            self.l.on_report(r, self.t);
        }
        fn loss_pct(&self) -> Option<f64> {
            self.l.loss_pct()
        }
    }

    fn report(rx: u32, high: u32) -> PathReport {
        PathReport {
            rx_packets: rx,
            rx_highest_path_seq: high,
            ..Default::default()
        }
    }

    #[test]
    fn no_estimate_before_two_reports() {
        let mut l = Feed::new();
        assert_eq!(l.loss_pct(), None);
        l.on_report(&report(10, 10));
        assert_eq!(l.loss_pct(), None);
    }

    #[test]
    fn ten_percent_loss() {
        let mut l = Feed::new();
        l.on_report(&report(0, 0));
        l.on_report(&report(90, 100));
        let pct = l.loss_pct().expect("estimate");
        assert!((pct - 10.0).abs() < 1e-9, "{pct}");
    }

    #[test]
    fn wraps_around_u32() {
        let mut l = Feed::new();
        l.on_report(&report(u32::MAX - 10, u32::MAX - 10));
        l.on_report(&report(9, 9));
        assert_eq!(l.loss_pct(), Some(0.0));
    }

    #[test]
    fn peer_restart_resets() {
        let mut l = Feed::new();
        l.on_report(&report(0, 0));
        l.on_report(&report(50, 100));
        l.on_report(&report(3, 3));
        assert_eq!(l.loss_pct(), None);
    }

    #[test]
    fn frequent_reports_cover_about_a_second() {
        let mut l = LossEstimator::default();
        let mut t = crate::path::tests::t0();
        l.on_report(&report(0, 0), t);
        // 2 s of 10 % loss, 10 datagrams per 10 ms report: no truncation
        // bias however small the steps.
        let (mut rx, mut high) = (0, 0);
        for i in 0..200 {
            t += std::time::Duration::from_millis(10);
            high += 10;
            rx += if i % 10 == 0 { 9 } else { 10 };
            l.on_report(&report(rx, high), t);
        }
        let pct = l.loss_pct().expect("estimate");
        assert!((pct - 1.0).abs() < 0.2, "{pct}");
        // Then 3 s without loss: the old loss has mostly faded.
        for _ in 0..300 {
            t += std::time::Duration::from_millis(10);
            high += 10;
            rx += 10;
            l.on_report(&report(rx, high), t);
        }
        assert!(l.loss_pct().expect("estimate") < 0.15);
    }

    #[test]
    fn old_loss_decays() {
        let mut l = Feed::new();
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
