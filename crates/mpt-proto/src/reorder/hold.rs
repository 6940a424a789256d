//! How long held packets waited: a fixed histogram with power-of-two
//! millisecond buckets and the maximum.
//!
//! Why a histogram and not a mean: the hold time is what resequencing costs
//! a flow in latency, and what matters is its tail (a few packets held for
//! the full timeout behind a loss), which a mean hides. Powers of two from
//! 1 ms to 1 s cover everything from a same-host reorder to the longest
//! timeout the daemon sets, in twelve counters: recording is one leading-zero
//! count, no allocation, and the whole thing is `Copy` so it travels inside
//! `ReorderStats`.

use std::time::Duration;

/// Number of buckets: `< 1 ms`, `< 2 ms`, `< 4 ms`, …, `< 1024 ms`, and
/// everything longer in the last one.
pub const HOLD_BUCKETS: usize = 12;

/// Hold durations of released packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HoldHistogram {
    /// `counts[0]`: held less than 1 ms; `counts[k]` for `1 ≤ k < 11`:
    /// at least `2^(k-1)` and less than `2^k` ms; `counts[11]`: 1024 ms or
    /// more.
    pub counts: [u64; HOLD_BUCKETS],
    /// The longest hold seen, in microseconds.
    pub max_us: u64,
    /// All holds added up, in microseconds (a Prometheus histogram's
    /// `_sum`; with [`HoldHistogram::total`] it gives the mean).
    pub sum_us: u64,
}

impl HoldHistogram {
    /// Counts one hold of `held`.
    pub fn record(&mut self, held: Duration) {
        let us = u64::try_from(held.as_micros()).unwrap_or(u64::MAX);
        self.max_us = self.max_us.max(us);
        self.sum_us = self.sum_us.saturating_add(us);
        let ms = us / 1000;
        // ms = 0 → bucket 0; ms in [2^(k-1), 2^k) → bucket k.
        let k = (u64::BITS - ms.leading_zeros()) as usize;
        let k = k.min(HOLD_BUCKETS - 1);
        self.counts[k] = self.counts[k].saturating_add(1);
    }

    /// Holds recorded.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &c| a.saturating_add(c))
    }

    /// The exclusive upper bound of bucket `k` (`None` for the last,
    /// unbounded one).
    pub fn bucket_limit(k: usize) -> Option<Duration> {
        if k + 1 >= HOLD_BUCKETS {
            return None;
        }
        Some(Duration::from_millis(1u64 << k))
    }

    /// An upper bound of the hold time that `per_mille`/1000 of the holds
    /// did not exceed (`990` for the 99th percentile): the limit of the
    /// bucket that quantile falls in, or the maximum seen when it falls in
    /// the last bucket. `None` when nothing was recorded.
    pub fn quantile_upper(&self, per_mille: u32) -> Option<Duration> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let per_mille = u64::from(per_mille.min(1000));
        // The rank of the quantile, at least 1 (ceil without overflow).
        let rank = (total / 1000)
            .saturating_mul(per_mille)
            .saturating_add(((total % 1000) * per_mille).div_ceil(1000))
            .max(1);
        let mut seen = 0u64;
        for (k, &c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(c);
            if seen >= rank {
                let max = Duration::from_micros(self.max_us);
                return Some(Self::bucket_limit(k).map_or(max, |l| l.min(max)));
            }
        }
        Some(Duration::from_micros(self.max_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_milliseconds() {
        let mut h = HoldHistogram::default();
        for ms in [0u64, 1, 2, 3, 4, 1023, 1024, 100_000] {
            h.record(Duration::from_millis(ms));
        }
        h.record(Duration::from_micros(999));
        assert_eq!(h.counts, [2, 1, 2, 1, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(h.max_us, 100_000_000);
        assert_eq!(
            h.sum_us,
            (1 + 2 + 3 + 4 + 1023 + 1024 + 100_000) * 1000 + 999
        );
        assert_eq!(h.total(), 8 + 1);
        assert_eq!(
            HoldHistogram::bucket_limit(0),
            Some(Duration::from_millis(1))
        );
        assert_eq!(
            HoldHistogram::bucket_limit(10),
            Some(Duration::from_millis(1024))
        );
        assert_eq!(HoldHistogram::bucket_limit(11), None);
    }

    #[test]
    fn quantiles_are_bucket_limits_capped_by_the_maximum() {
        let mut h = HoldHistogram::default();
        assert_eq!(h.quantile_upper(990), None);
        for _ in 0..99 {
            h.record(Duration::from_micros(300));
        }
        h.record(Duration::from_millis(30));
        assert_eq!(h.quantile_upper(500), Some(Duration::from_millis(1)));
        assert_eq!(h.quantile_upper(990), Some(Duration::from_millis(1)));
        assert_eq!(h.quantile_upper(1000), Some(Duration::from_millis(30)));
        // Beyond 1000 per mille is the maximum, not a panic.
        assert_eq!(h.quantile_upper(5000), Some(Duration::from_millis(30)));
        h.record(Duration::MAX);
        assert_eq!(h.max_us, u64::MAX);
        assert_eq!(h.sum_us, u64::MAX, "the sum saturates");
        assert_eq!(
            h.quantile_upper(1000),
            Some(Duration::from_micros(u64::MAX))
        );
    }
}
