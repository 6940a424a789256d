//! Token buckets for handshake answers, with time passed in.
//!
//! Answering a `HandshakeInit` costs a key derivation and a datagram; the
//! daemon keeps one [`RateLimiter`] per source address (a bounded
//! [`SourceLimiter`] table) and one per connection, and answers only when
//! both allow. Only messages whose MAC verified reach the buckets: forged
//! datagrams cost one HMAC each and never spend a token, so junk cannot
//! keep a genuine peer out. An answer is never larger than the Init, so
//! even an unlimited responder amplifies nothing; the limiters bound the
//! work an authentic-but-replayed flood can cause, and the per-source
//! table keeps one replaying source from using up the per-connection
//! budget alone.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Instant;

/// Units of one token: token counts are kept in billionths so that refill
/// per nanosecond stays an integer.
const UNIT: u128 = 1_000_000_000;

/// A token bucket: `burst` tokens at most, refilled at `per_sec` tokens per
/// second; each allowed event takes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimiter {
    per_sec: u128,
    capacity: u128,
    /// Tokens in billionths.
    tokens: u128,
    last: Option<Instant>,
}

impl RateLimiter {
    /// A full bucket of `burst` tokens refilled at `per_sec` per second.
    /// `burst == 0` never allows anything; `per_sec == 0` allows `burst`
    /// events and then nothing.
    pub fn new(per_sec: u32, burst: u32) -> RateLimiter {
        let capacity = u128::from(burst) * UNIT;
        RateLimiter {
            per_sec: u128::from(per_sec),
            capacity,
            tokens: capacity,
            last: None,
        }
    }

    /// Whether one more event may happen at `now`; takes a token if so.
    /// `now` going backwards refills nothing.
    pub fn allow(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= UNIT {
            self.tokens -= UNIT;
            true
        } else {
            false
        }
    }

    /// Whether [`RateLimiter::allow`] would succeed at `now`, without
    /// taking a token.
    pub fn would_allow(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= UNIT
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last {
            if now > last {
                let elapsed = now.duration_since(last).as_nanos();
                // `per_sec` tokens per 10^9 ns = `per_sec` units per ns.
                let add = elapsed.saturating_mul(self.per_sec);
                self.tokens = self.tokens.saturating_add(add).min(self.capacity);
                self.last = Some(now);
            }
        } else {
            self.last = Some(now);
        }
    }
}

/// One token bucket per key (a source address), at most `capacity` keys.
///
/// When the table is full, a new key takes the place of the oldest one
/// (in insertion order) that has not been used since it was last passed
/// over: a FIFO with a second chance (the "clock" policy), at most
/// [`SECOND_CHANCES`] keys looked at, so a new key costs O(1) however
/// many distinct sources arrive, and memory stays at `capacity` entries
/// under a flood of a million sources.
#[derive(Debug, Clone)]
pub struct SourceLimiter<K> {
    per_sec: u32,
    burst: u32,
    capacity: usize,
    table: HashMap<K, (RateLimiter, bool)>,
    order: VecDeque<K>,
}

/// How many used keys an insertion passes over before it evicts the
/// oldest anyway (bounds the work per new key).
pub const SECOND_CHANCES: usize = 8;

impl<K: Eq + Hash + Copy> SourceLimiter<K> {
    /// Buckets of `burst` tokens refilled at `per_sec` per second, for at
    /// most `capacity` keys (at least one).
    pub fn new(per_sec: u32, burst: u32, capacity: usize) -> SourceLimiter<K> {
        SourceLimiter {
            per_sec,
            burst,
            capacity: capacity.max(1),
            table: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Whether `key` may have one more event at `now`; takes a token of its
    /// bucket if so. An unknown key starts with a full bucket.
    pub fn allow(&mut self, key: K, now: Instant) -> bool {
        if let Some((bucket, used)) = self.table.get_mut(&key) {
            *used = true;
            return bucket.allow(now);
        }
        if self.table.len() >= self.capacity {
            self.evict();
        }
        let mut bucket = RateLimiter::new(self.per_sec, self.burst);
        let allowed = bucket.allow(now);
        self.table.insert(key, (bucket, false));
        self.order.push_back(key);
        allowed
    }

    /// Removes one key: the oldest not used since it was last passed over.
    fn evict(&mut self) {
        for _ in 0..SECOND_CHANCES {
            let Some(k) = self.order.pop_front() else {
                return;
            };
            match self.table.get_mut(&k) {
                Some((_, used)) if *used => {
                    *used = false;
                    self.order.push_back(k);
                }
                _ => {
                    self.table.remove(&k);
                    return;
                }
            }
        }
        if let Some(k) = self.order.pop_front() {
            self.table.remove(&k);
        }
    }

    /// How many keys the table holds.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::test_clock::t0;

    #[test]
    fn burst_then_refill_rate() {
        let t = t0();
        let mut r = RateLimiter::new(10, 3);
        assert!(r.allow(t));
        assert!(r.allow(t));
        assert!(r.allow(t));
        assert!(!r.allow(t), "burst exhausted");
        // 10/s: one token per 100 ms.
        assert!(!r.allow(t + Duration::from_millis(99)));
        assert!(r.allow(t + Duration::from_millis(100)));
        assert!(!r.allow(t + Duration::from_millis(100)));
        // A long pause refills only up to the burst.
        let later = t + Duration::from_secs(60);
        assert!(r.would_allow(later));
        for _ in 0..3 {
            assert!(r.allow(later));
        }
        assert!(!r.allow(later));
    }

    #[test]
    fn fractional_refill_accumulates() {
        let t = t0();
        let mut r = RateLimiter::new(3, 1);
        assert!(r.allow(t));
        // 1/3 s per token, reached in three steps of 111.2 ms.
        let step = Duration::from_micros(111_200);
        assert!(!r.allow(t + step));
        assert!(!r.allow(t + step * 2));
        assert!(r.allow(t + step * 3));
    }

    #[test]
    fn time_going_backwards_refills_nothing() {
        let t = t0() + Duration::from_secs(10);
        let mut r = RateLimiter::new(1, 1);
        assert!(r.allow(t));
        assert!(!r.allow(t - Duration::from_secs(5)));
        assert!(!r.allow(t + Duration::from_millis(999)));
        assert!(r.allow(t + Duration::from_secs(1)));
    }

    #[test]
    fn per_source_buckets_are_independent_and_bounded() {
        let t = t0();
        let mut s = SourceLimiter::new(5, 3, 4);
        for _ in 0..3 {
            assert!(s.allow(1u32, t));
        }
        assert!(!s.allow(1, t), "source 1 spent its burst");
        // Another source is not affected.
        for _ in 0..3 {
            assert!(s.allow(2, t));
        }
        assert!(!s.allow(2, t));
        // Refill: 5/s is one token per 200 ms.
        assert!(s.allow(1, t + Duration::from_millis(200)));
        // The table never grows beyond its capacity.
        for k in 10..20u32 {
            assert!(s.allow(k, t + Duration::from_millis(300 + u64::from(k))));
            assert!(s.len() <= 4);
        }
        assert_eq!(s.len(), 4);
        // Source 2 was evicted and comes back with a full bucket.
        assert!(s.allow(2, t + Duration::from_millis(400)));
    }

    #[test]
    fn a_million_sources_stay_within_the_table() {
        let t = t0();
        let mut s = SourceLimiter::new(1, 1, 4096);
        // A source in steady use keeps its (empty) bucket through the
        // flood: its second chances keep it in the table.
        assert!(s.allow(u32::MAX, t));
        for k in 0..1_000_000u32 {
            assert!(s.allow(k, t), "a new source starts full");
            if k % 512 == 0 {
                assert!(!s.allow(u32::MAX, t), "still known, still empty");
            }
        }
        assert_eq!(s.len(), 4096);
        assert!(s.order.len() <= 4096);
    }

    #[test]
    fn degenerate_limits() {
        let t = t0();
        let mut none = RateLimiter::new(1000, 0);
        assert!(!none.allow(t));
        assert!(!none.allow(t + Duration::from_secs(10)));
        let mut once = RateLimiter::new(0, 2);
        assert!(once.allow(t));
        assert!(once.allow(t));
        assert!(!once.allow(t + Duration::from_secs(1000)));
    }
}
