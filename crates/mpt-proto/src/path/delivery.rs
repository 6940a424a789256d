//! Capacity and one-way delay of one path, from the receiver's feedback.
//!
//! The adaptive scheduler sends each packet where it is expected to arrive
//! first. For that it needs, per path, how fast the path drains (capacity)
//! and how long a packet travels once it leaves the queue (one-way delay,
//! compared between paths). This module estimates both from consecutive
//! [`Feedback`] messages:
//!
//! * **Delivery rate**: bytes received over the receiver's own clock
//!   between two feedbacks. A delivery sample says what the path carried,
//!   which is its capacity only if the sender kept it busy. We tell the
//!   two cases apart by the one-way delay: if it stood above its minimum
//!   by more than the jitter throughout the interval (the feedback carries
//!   the interval's *lowest* one-way delay), a queue stood at the bottleneck
//!   and the sample is the capacity, so the estimate takes it, up or down.
//!   Without a standing queue the sample is only a lower bound, so the
//!   estimate only rises. A capacity drop thus shows within one feedback
//!   of the queue it causes; a rise is found by the scheduler's probing
//!   (it offers an unconfirmed path twice its estimate, a confirmed one a
//!   quarter more now and then).
//! * **One-way delay**: the receiver's clock minus the sender's timestamp.
//!   The clocks are not synchronised, so the value carries an unknown
//!   offset, the same for every path of the connection: differences
//!   between paths are exact. The minimum over the last 5-10 s is the
//!   propagation delay; the rest is queueing.

use std::time::{Duration, Instant};

use crate::wire::Feedback;

use crate::seq::seq_before;

/// Shortest receiver-clock interval a delivery sample is taken over; a
/// feedback closer to the previous one is folded into the next sample.
const MIN_SAMPLE_SPAN_US: u32 = 2_000;

/// Length of one bucket of the windowed minimum of the one-way delay: the
/// minimum covers the last one to two buckets.
const OWD_MIN_BUCKET: Duration = Duration::from_secs(5);

/// Queueing delay above the jitter margin that counts as a standing queue.
const QUEUE_MARGIN: Duration = Duration::from_millis(2);

/// A delivery rate estimate falls no further than this (bit/s). Below it
/// a few packets would fill the modelled queue, and a false reading (a
/// path carrying only ACKs whose one-way delay jumps with the receiver's
/// scheduling noise) would push a flow's ACKs onto a slow path. A real
/// path slower than this is only overloaded a little by the model.
pub const MIN_RATE_BPS: u64 = 1_000_000;

/// How long a queueing delay measurement stays current (a feedback comes
/// at least every 100 ms while data arrives).
pub const QUEUE_FRESH: Duration = Duration::from_millis(250);

/// Most queueing delay required to call a queue standing (see
/// [`DeliveryEstimator::on_feedback`]).
const QUEUE_THRESHOLD_MAX: Duration = Duration::from_millis(25);

/// What the estimator concluded from one feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliverySample {
    /// Bits per second delivered over the interval.
    pub rate_bps: u64,
    /// A queue stood at the bottleneck: the rate is the capacity.
    pub queued: bool,
}

/// Delivery rate and one-way delay of the direction we send in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryEstimator {
    /// Receiver's byte counter and clock at the start of the next sample.
    anchor: Option<(u64, u32)>,
    /// The latest feedback found a standing queue.
    queue_standing: bool,
    rate_bps: Option<u64>,
    /// The estimate was last set by a sample taken with a standing queue.
    confirmed: bool,
    /// Latest interval-minimum one-way delay (µs, wrapping, with offset).
    owd_latest: Option<u32>,
    /// When it arrived.
    owd_latest_at: Option<Instant>,
    /// Windowed minimum: (current bucket min, its start), previous min.
    owd_bucket: Option<(u32, Instant)>,
    owd_prev: Option<u32>,
    last_sample: Option<DeliverySample>,
}

fn wrapping_min(a: u32, b: u32) -> u32 {
    if seq_before(a, b) {
        a
    } else {
        b
    }
}

impl DeliveryEstimator {
    /// Folds in a feedback received at `now`. `jitter` is the path's RTT
    /// variation and `min_rtt` its minimum RTT: a queue counts as standing
    /// when the one-way delay stood above its minimum by more than
    /// `max(2 ms + jitter / 4, min(min_rtt / 2, 25 ms))` all interval.
    /// (Scheduling noise on a loaded 2-core machine reaches several ms;
    /// a bottleneck buffer worth its name holds more than half an RTT.)
    pub fn on_feedback(
        &mut self,
        fb: &Feedback,
        jitter: Duration,
        min_rtt: Duration,
        now: Instant,
    ) -> Option<DeliverySample> {
        if let Some(owd) = fb.owd_us {
            self.on_owd(owd, now);
        }
        let threshold = (QUEUE_MARGIN + jitter / 4).max((min_rtt / 2).min(QUEUE_THRESHOLD_MAX));
        self.queue_standing =
            fb.owd_us.is_some() && self.queueing_delay().is_some_and(|q| q > threshold);
        let Some((bytes0, at0)) = self.anchor else {
            self.anchor = Some((fb.rx_bytes, fb.last_rx_us));
            return None;
        };
        let span_us = fb.last_rx_us.wrapping_sub(at0);
        let bytes = fb.rx_bytes.wrapping_sub(bytes0);
        if seq_before(fb.last_rx_us, at0) || bytes > u64::MAX / 2 {
            // Counters went backwards: the peer restarted.
            *self = DeliveryEstimator {
                anchor: Some((fb.rx_bytes, fb.last_rx_us)),
                ..Default::default()
            };
            return None;
        }
        if span_us < MIN_SAMPLE_SPAN_US {
            return None;
        }
        self.anchor = Some((fb.rx_bytes, fb.last_rx_us));
        let rate_bps = (u128::from(bytes) * 8 * 1_000_000 / u128::from(span_us))
            .min(u128::from(u64::MAX)) as u64;
        let queued = self.queue_standing;
        let sample = DeliverySample { rate_bps, queued };
        self.fold(sample);
        self.last_sample = Some(sample);
        Some(sample)
    }

    fn fold(&mut self, s: DeliverySample) {
        let prev = self.rate_bps.unwrap_or(0);
        if s.queued {
            // The bottleneck was busy all along: this is its capacity.
            // Half-way steps smooth the noise of one short interval.
            // At most halved per sample: one noisy reading cannot make a
            // path look useless.
            let rate = if self.confirmed {
                (prev + s.rate_bps) / 2
            } else {
                s.rate_bps.max(prev / 2)
            };
            self.rate_bps = Some(rate.max(MIN_RATE_BPS));
            self.confirmed = true;
        } else if s.rate_bps >= prev {
            // Delivered all we offered without a queue: the path may
            // carry more than we believe (clearly more: it is no longer
            // the capacity).
            self.rate_bps = Some(s.rate_bps.max(MIN_RATE_BPS));
            if s.rate_bps > prev + prev / 8 {
                self.confirmed = false;
            }
        }
    }

    fn on_owd(&mut self, owd: u32, now: Instant) {
        self.owd_latest = Some(owd);
        self.owd_latest_at = Some(now);
        match self.owd_bucket {
            Some((min, start)) if now.saturating_duration_since(start) < OWD_MIN_BUCKET => {
                self.owd_bucket = Some((wrapping_min(min, owd), start));
            }
            Some((min, _)) => {
                self.owd_prev = Some(min);
                self.owd_bucket = Some((owd, now));
            }
            None => self.owd_bucket = Some((owd, now)),
        }
    }

    /// Estimated capacity in bit/s, once a delivery sample arrived.
    pub fn rate_bps(&self) -> Option<u64> {
        self.rate_bps
    }

    /// Whether the estimate was set with a standing queue (it is the
    /// capacity) rather than being a lower bound.
    pub fn confirmed(&self) -> bool {
        self.confirmed
    }

    /// Whether the latest feedback found a standing queue.
    pub fn queue_standing(&self) -> bool {
        self.queue_standing
    }

    /// The latest sample.
    pub fn last_sample(&self) -> Option<DeliverySample> {
        self.last_sample
    }

    /// Lowest one-way delay of the last 5-10 s, with the clock offset (µs,
    /// wrapping): compare it with other paths' by wrapping subtraction.
    pub fn owd_min_us(&self) -> Option<u32> {
        let (bucket, _) = self.owd_bucket?;
        Some(match self.owd_prev {
            Some(prev) => wrapping_min(prev, bucket),
            None => bucket,
        })
    }

    /// The latest interval's lowest one-way delay (µs, wrapping, offset).
    pub fn owd_latest_us(&self) -> Option<u32> {
        self.owd_latest
    }

    /// How far the latest one-way delay stands above the minimum.
    pub fn queueing_delay(&self) -> Option<Duration> {
        let (latest, min) = (self.owd_latest?, self.owd_min_us()?);
        let d = latest.wrapping_sub(min);
        (!seq_before(latest, min)).then(|| Duration::from_micros(u64::from(d)))
    }

    /// [`DeliveryEstimator::queueing_delay`] if its one-way delay was
    /// measured less than [`QUEUE_FRESH`] before `now` (a path that stopped
    /// carrying data sends no feedback, and its last queue is long gone).
    pub fn recent_queueing_delay(&self, now: Instant) -> Option<Duration> {
        let at = self.owd_latest_at?;
        if now.saturating_duration_since(at) > QUEUE_FRESH {
            return None;
        }
        self.queueing_delay()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::PathReport;

    /// Feedbacks as a receiver would send them every `every` while a path
    /// delivers `rate_bps` and one-way delays `owd(i)`.
    struct Receiver {
        bytes: u64,
        clock_us: u32,
    }

    /// An estimator with nothing learnt, a receiver that has counted
    /// nothing, and the test clock's start.
    fn fresh() -> (DeliveryEstimator, Receiver, Instant) {
        let rx = Receiver {
            bytes: 0,
            clock_us: 0,
        };
        (DeliveryEstimator::default(), rx, crate::test_clock::t0())
    }

    impl Receiver {
        fn feedback(&mut self, rate_bps: u64, every: Duration, owd_us: u32) -> Feedback {
            let us = every.as_micros() as u64;
            self.bytes += rate_bps * us / 8 / 1_000_000;
            self.clock_us = self.clock_us.wrapping_add(us as u32);
            Feedback {
                report: PathReport::default(),
                rx_bytes: self.bytes,
                last_rx_us: self.clock_us,
                echo_timestamp_us: 0,
                echo_delay_us: 0,
                owd_us: Some(owd_us),
            }
        }
    }

    fn run(
        est: &mut DeliveryEstimator,
        rx: &mut Receiver,
        t: &mut Instant,
        n: usize,
        rate: u64,
        owd: u32,
    ) {
        let every = Duration::from_millis(20);
        for _ in 0..n {
            *t += every;
            let fb = rx.feedback(rate, every, owd);
            est.on_feedback(&fb, Duration::from_millis(1), Duration::from_millis(2), *t);
        }
    }

    #[test]
    fn a_queued_sample_sets_the_capacity_both_ways() {
        let mut est = DeliveryEstimator::default();
        let mut rx = Receiver {
            bytes: 0,
            clock_us: u32::MAX - 30_000, // the receiver clock wraps on the way
        };
        let mut t = crate::test_clock::t0();
        // Unloaded: 5 Mbit/s at the base delay, a lower bound.
        run(&mut est, &mut rx, &mut t, 5, 5_000_000, 1_000_000);
        assert_eq!(est.rate_bps(), Some(5_000_000));
        assert!(!est.confirmed());
        // Loaded: 20 Mbit/s with 30 ms of queue. Taken at once.
        run(&mut est, &mut rx, &mut t, 1, 20_000_000, 1_030_000);
        assert_eq!(est.rate_bps(), Some(20_000_000));
        assert!(est.confirmed());
        // The capacity halves and the queue stands: followed within a few
        // feedbacks (each halves the distance).
        run(&mut est, &mut rx, &mut t, 6, 10_000_000, 1_040_000);
        let r = est.rate_bps().unwrap();
        assert!((10_000_000..10_200_000).contains(&r), "{r}");
        assert_eq!(est.queueing_delay(), Some(Duration::from_millis(40)));
    }

    #[test]
    fn without_a_queue_a_low_sample_does_not_lower_the_estimate() {
        let (mut est, mut rx, mut t) = fresh();
        run(&mut est, &mut rx, &mut t, 3, 30_000_000, 500);
        run(&mut est, &mut rx, &mut t, 10, 1_000_000, 500);
        assert_eq!(est.rate_bps(), Some(30_000_000));
    }

    #[test]
    fn jitter_is_not_a_queue() {
        let (mut est, mut rx, mut t) = fresh();
        run(&mut est, &mut rx, &mut t, 3, 8_000_000, 10_000);
        let every = Duration::from_millis(20);
        t += every;
        // 6 ms above the minimum on a path whose RTT varies by 20 ms.
        let fb = rx.feedback(4_000_000, every, 16_000);
        let s = est
            .on_feedback(&fb, Duration::from_millis(20), Duration::from_millis(2), t)
            .expect("sample");
        assert!(!s.queued);
        assert_eq!(est.rate_bps(), Some(8_000_000));
    }

    #[test]
    fn a_queue_reading_goes_stale() {
        let (mut est, mut rx, mut t) = fresh();
        assert_eq!(est.recent_queueing_delay(t), None);
        run(&mut est, &mut rx, &mut t, 3, 8_000_000, 10_000);
        t += Duration::from_millis(20);
        let fb = rx.feedback(8_000_000, Duration::from_millis(20), 14_000);
        est.on_feedback(&fb, Duration::ZERO, Duration::from_millis(2), t);
        assert_eq!(est.recent_queueing_delay(t), Some(Duration::from_millis(4)));
        assert_eq!(
            est.recent_queueing_delay(t + QUEUE_FRESH),
            Some(Duration::from_millis(4))
        );
        // No feedback since: the path stopped carrying data.
        assert_eq!(
            est.recent_queueing_delay(t + QUEUE_FRESH + Duration::from_millis(1)),
            None
        );
        assert_eq!(est.queueing_delay(), Some(Duration::from_millis(4)));
    }

    #[test]
    fn the_delay_minimum_forgets_an_old_route() {
        let (mut est, mut rx, mut t) = fresh();
        run(&mut est, &mut rx, &mut t, 1, 1_000_000, 100);
        assert_eq!(est.owd_min_us(), Some(100));
        // The path now takes 50 ms longer, for good: within two buckets
        // the minimum is the new delay.
        run(&mut est, &mut rx, &mut t, 600, 1_000_000, 50_100);
        assert_eq!(est.owd_min_us(), Some(50_100));
        assert_eq!(est.queueing_delay(), Some(Duration::ZERO));
    }

    #[test]
    fn close_feedbacks_are_folded_and_restarts_reset() {
        let mut est = DeliveryEstimator::default();
        let mut rx = Receiver {
            bytes: 0,
            clock_us: 0,
        };
        let t = crate::test_clock::t0();
        let fb = rx.feedback(1_000_000, Duration::from_millis(1), 0);
        assert_eq!(
            est.on_feedback(&fb, Duration::ZERO, Duration::ZERO, t),
            None
        );
        let fb = rx.feedback(1_000_000, Duration::from_millis(1), 0);
        assert_eq!(
            est.on_feedback(&fb, Duration::ZERO, Duration::ZERO, t),
            None
        );
        let fb = rx.feedback(1_000_000, Duration::from_millis(1), 0);
        let s = est
            .on_feedback(&fb, Duration::ZERO, Duration::ZERO, t)
            .expect("2 ms span");
        assert_eq!(s.rate_bps, 1_000_000);
        // Counters behind: the peer restarted; the next feedback anchors.
        let mut restarted = fb;
        restarted.rx_bytes = 10;
        restarted.last_rx_us = 5;
        assert_eq!(
            est.on_feedback(&restarted, Duration::ZERO, Duration::ZERO, t),
            None
        );
        assert_eq!(est.rate_bps(), None);
    }
}
