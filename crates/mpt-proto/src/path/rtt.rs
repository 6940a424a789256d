//! Round-trip time estimation from probe replies (RFC 6298 smoothing).

use std::time::Duration;

/// Samples above this are treated as garbage (a reply echoing a bogus or
/// very old timestamp) and ignored.
const MAX_PLAUSIBLE_RTT: Duration = Duration::from_secs(60);

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
    fn implausible_sample_is_ignored() {
        let mut r = RttEstimator::default();
        assert!(!r.on_sample(Duration::from_secs(61)));
        assert_eq!(r.smoothed(), None);
    }
}
