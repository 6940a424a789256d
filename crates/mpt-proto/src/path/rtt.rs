//! Round-trip time estimation from probe replies (RFC 6298 smoothing).
//!
//! RFC 6298's gains (1/8 for the mean, 1/4 for the deviation) assume a
//! sample every round trip. Here samples come from probe replies, one per
//! `keepalive` (2 s by default) on a path that carries no data, so one
//! inflated sample takes tens of seconds to fade: the first probe on a
//! path pays the neighbour resolution (a second per lost ARP request), a
//! NAT binding, a radio waking up or a peer still starting, and a busy
//! host can answer a probe late at any time. The resequencer's timeout is
//! built from the smoothed RTT and its deviation, so a backup path whose
//! first reply took a second held the receiver's data for 1.5 s at the
//! next failover (issue 32). A round trip can be inflated without bound
//! but never comes out shorter than the path allows, so a sample below
//! half the smoothed RTT proves the estimate stale: the estimator starts
//! over from it ([`RESEED_BELOW`]).

use std::time::Duration;

/// Samples above this are treated as garbage (a reply echoing a bogus or
/// very old timestamp) and ignored.
const MAX_PLAUSIBLE_RTT: Duration = Duration::from_secs(60);

/// A sample below the smoothed RTT divided by this restarts the estimate
/// from that sample, as if it were the first (see the module docs).
pub const RESEED_BELOW: u32 = 2;

/// Smoothed, minimum and latest RTT of one path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    smoothed: Option<Duration>,
    var: Duration,
    min: Option<Duration>,
    latest: Option<Duration>,
}

impl RttEstimator {
    /// Folds one sample in. Returns false if it was rejected as implausible.
    pub fn on_sample(&mut self, sample: Duration) -> bool {
        if sample > MAX_PLAUSIBLE_RTT {
            return false;
        }
        self.latest = Some(sample);
        self.min = Some(self.min.map_or(sample, |m| m.min(sample)));
        match self.smoothed {
            None => {
                self.smoothed = Some(sample);
                self.var = sample / 2;
            }
            // The estimate rests on inflated samples: start over.
            Some(srtt) if sample < srtt / RESEED_BELOW => {
                self.smoothed = Some(sample);
                self.var = sample / 2;
            }
            Some(srtt) => {
                let diff = srtt.abs_diff(sample);
                self.var = (self.var * 3 + diff) / 4;
                self.smoothed = Some((srtt * 7 + sample) / 8);
            }
        }
        true
    }
    /// Smoothed RTT, if any sample arrived.
    pub fn smoothed(&self) -> Option<Duration> {
        self.smoothed
    }
    /// Smallest sample seen.
    pub fn min(&self) -> Option<Duration> {
        self.min
    }
    /// Most recent sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }
    /// Mean deviation (RTTVAR).
    pub fn variation(&self) -> Duration {
        self.var
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_sets_everything() {
        let mut r = RttEstimator::default();
        assert!(r.on_sample(Duration::from_millis(100)));
        assert_eq!(r.smoothed(), Some(Duration::from_millis(100)));
        assert_eq!(r.min(), Some(Duration::from_millis(100)));
        assert_eq!(r.variation(), Duration::from_millis(50));
    }

    #[test]
    fn smoothing_moves_an_eighth_towards_sample() {
        let mut r = RttEstimator::default();
        r.on_sample(Duration::from_millis(80));
        r.on_sample(Duration::from_millis(160));
        assert_eq!(r.smoothed(), Some(Duration::from_millis(90)));
        assert_eq!(r.min(), Some(Duration::from_millis(80)));
        assert_eq!(r.latest(), Some(Duration::from_millis(160)));
    }

    #[test]
    fn a_sample_below_half_the_smoothed_rtt_starts_the_estimate_over() {
        // The first probe paid for a second of neighbour resolution; the
        // path's real RTT is 60 ms.
        let mut r = RttEstimator::default();
        r.on_sample(Duration::from_millis(1_060));
        r.on_sample(Duration::from_millis(60));
        assert_eq!(r.smoothed(), Some(Duration::from_millis(60)));
        assert_eq!(r.variation(), Duration::from_millis(30));
        assert_eq!(r.min(), Some(Duration::from_millis(60)));
        assert_eq!(r.latest(), Some(Duration::from_millis(60)));
        // Exactly half is still smoothed in.
        let mut r = RttEstimator::default();
        r.on_sample(Duration::from_millis(120));
        r.on_sample(Duration::from_millis(60));
        assert_eq!(r.smoothed(), Some(Duration::from_micros(112_500)));
    }

    #[test]
    fn implausible_sample_is_ignored() {
        let mut r = RttEstimator::default();
        assert!(!r.on_sample(Duration::from_secs(61)));
        assert_eq!(r.smoothed(), None);
    }
}
