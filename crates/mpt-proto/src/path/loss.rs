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
//!
//! The estimate is of the link's own (random) loss, so what a full buffer
//! drops must stay out of it. The path tells the two apart by the queue it
//! sees, but the drops of a short overload (TCP's slow start overshooting
//! a 64 kB DSL buffer) can be reported before the feedback that shows the
//! queue, or never be seen as a queue at all: the feedback carries the
//! *lowest* one-way delay of its interval, and a slow-start burst fills
//! and drains the buffer within one. Such reports are therefore *held*
//! for a grace period ([`LossEstimator::hold_report`]): a queue seen
//! meanwhile discards them ([`LossEstimator::drop_held`]), and so does a
//! loss too dense to be random ([`BURST_LOSS`] of at least
//! [`BURST_MIN_PACKETS`]: a buffer overflowing drops a run of packets;
//! measured over GEO + DSL, slow start lost 10-16 % of DSL's packets within
//! half a second, with no queue in any feedback). Otherwise they count.

use std::time::Instant;

use crate::seq::seq_before;
use crate::wire::PathReport;

/// Weight kept from the past per report at least (3/4).
const MAX_KEEP_PER_REPORT: f64 = 0.75;

/// Half-life of old reports on a busy path, in seconds.
const HALF_LIFE_S: f64 = 1.0;

/// Share of a held grace's datagrams lost above which the loss is a
/// buffer overflowing, not the link's own (see the module docs). A link
/// losing 1 % at random loses more than 5 % of 50 datagrams with a
/// probability below 0.2 %.
pub const BURST_LOSS: f64 = 0.05;

/// Fewest datagrams in a held grace for [`BURST_LOSS`] to apply.
pub const BURST_MIN_PACKETS: f64 = 50.0;

/// How a report is taken in.
#[derive(Debug, Clone, Copy)]
enum Fold {
    Count,
    Skip,
    Hold(std::time::Duration),
}

/// Decaying loss estimate for the direction we send in on one path.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LossEstimator {
    last: Option<(u32, u32, Instant)>,
    expected: f64,
    received: f64,
    /// Reported but not yet counted (see [`LossEstimator::hold_report`]),
    /// in two buckets of about one grace each: the older one counts when
    /// the newer one is a grace old, so every report waits one to two
    /// graces.
    held: [Option<Held>; 2],
}

/// Datagrams reported but not yet counted.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Held {
    expected: f64,
    received: f64,
    /// Start of the interval the first of them covers.
    since: Instant,
}

impl LossEstimator {
    /// Folds a report received at `now` in.
    pub fn on_report(&mut self, report: &PathReport, now: Instant) {
        self.fold(report, now, Fold::Count);
    }

    /// Moves past a report without counting its interval (it covered
    /// loss of another kind, e.g. a queue overflowing).
    pub fn skip_report(&mut self, report: &PathReport, now: Instant) {
        self.fold(report, now, Fold::Skip);
    }

    /// Takes a report in but counts its interval only after at least
    /// `grace` (at most twice that), unless [`Self::drop_held`] discards
    /// it first.
    pub fn hold_report(&mut self, report: &PathReport, now: Instant, grace: std::time::Duration) {
        self.fold(report, now, Fold::Hold(grace));
    }

    /// Discards the held reports: their loss was of another kind.
    pub fn drop_held(&mut self) {
        self.held = [None, None];
    }

    fn fold(&mut self, report: &PathReport, now: Instant, how: Fold) {
        let cur = (report.rx_packets, report.rx_highest_path_seq, now);
        let Some((prev_rx, prev_high, prev_at)) = self.last.replace(cur) else {
            return;
        };
        let advance = report.rx_highest_path_seq.wrapping_sub(prev_high);
        let got = report.rx_packets.wrapping_sub(prev_rx);
        if seq_before(report.rx_highest_path_seq, prev_high)
            || seq_before(report.rx_packets, prev_rx)
        {
            // Counters went backwards: the peer restarted. Start over.
            *self = LossEstimator {
                last: Some(cur),
                ..Default::default()
            };
            return;
        }
        // Reordering can deliver more than the advance in one interval.
        let got = got.min(advance);
        let (advance, got) = (f64::from(advance), f64::from(got));
        match how {
            Fold::Skip => {}
            Fold::Count => self.count(advance, got, now, prev_at),
            Fold::Hold(grace) => {
                let [old, new] = &mut self.held;
                let bucket = new.get_or_insert(Held {
                    expected: 0.0,
                    received: 0.0,
                    since: prev_at,
                });
                bucket.expected += advance;
                bucket.received += got;
                if now.saturating_duration_since(bucket.since) >= grace {
                    let ready = old.replace(*bucket);
                    *new = None;
                    let burst = |h: &Held| {
                        h.expected >= BURST_MIN_PACKETS
                            && h.expected - h.received > h.expected * BURST_LOSS
                    };
                    if let Some(h) = ready.filter(|h| !burst(h)) {
                        let until = self.held[0].map_or(now, |b| b.since);
                        self.count(h.expected, h.received, until, h.since);
                    }
                }
            }
        }
    }

    /// Counts `got` of `advance` datagrams sent since `since`.
    fn count(&mut self, advance: f64, got: f64, now: Instant, since: Instant) {
        let dt = now.saturating_duration_since(since).as_secs_f64();
        let keep = (0.5f64).powf(dt / HALF_LIFE_S).max(MAX_KEEP_PER_REPORT);
        self.expected = self.expected * keep + advance;
        self.received = self.received * keep + got;
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
                t: crate::test_clock::t0(),
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
        let mut t = crate::test_clock::t0();
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
    fn held_reports_count_after_the_grace_unless_dropped() {
        let grace = std::time::Duration::from_millis(200);
        let ms = std::time::Duration::from_millis;
        let t = crate::test_clock::t0();
        let mut l = LossEstimator::default();
        l.hold_report(&report(0, 0), t, grace);
        // 50 of 100 lost, then a queue is seen: none of it counts.
        l.hold_report(&report(50, 100), t + ms(50), grace);
        assert_eq!(l.loss_pct(), None);
        l.drop_held();
        l.hold_report(&report(150, 200), t + ms(100), grace);
        l.hold_report(&report(240, 300), t + ms(200), grace);
        l.hold_report(&report(340, 400), t + ms(300), grace);
        assert_eq!(l.loss_pct(), None, "held for less than a grace");
        // No queue within the grace: the held 10 % count, once the
        // reports after them are a grace old.
        l.hold_report(&report(440, 500), t + ms(400), grace);
        l.hold_report(&report(540, 600), t + ms(500), grace);
        let pct = l.loss_pct().expect("estimate");
        assert!((pct - 10.0 / 3.0).abs() < 1e-9, "{pct}");
    }

    #[test]
    fn a_dense_run_of_losses_is_an_overflow_not_the_link() {
        let grace = std::time::Duration::from_millis(200);
        let ms = std::time::Duration::from_millis;
        let t = crate::test_clock::t0();
        let mut l = LossEstimator::default();
        l.hold_report(&report(0, 0), t, grace);
        // 1 % at random over 100 ms reports: counted.
        let (mut rx, mut high) = (0, 0);
        for k in 1..=10 {
            high += 100;
            rx += 99;
            l.hold_report(&report(rx, high), t + ms(100 * k), grace);
        }
        let pct = l.loss_pct().expect("estimate");
        assert!((pct - 1.0).abs() < 0.01, "{pct}");
        // 12 % lost within 200 ms (a buffer overflowing): not counted.
        for k in 11..=20 {
            high += 100;
            rx += if k == 11 || k == 12 { 88 } else { 99 };
            l.hold_report(&report(rx, high), t + ms(100 * k), grace);
        }
        let pct = l.loss_pct().expect("estimate");
        assert!((pct - 1.0).abs() < 0.01, "{pct}");
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
