//! Extra delay from resequencing over a measurement (issue 12 target: p99
//! at most the paths' delay spread + 10 ms).
//!
//! The receiving mptd counts, per connection, the packets its resequencer
//! delivered in order on arrival (`in_order`), ahead of a gap their flow
//! did not wait for (`flow_bypass`), after their gap was given up (`late`)
//! and after being held (`held`), and how long the held ones waited, in a
//! histogram of power-of-two millisecond buckets (`reorder.hold` in
//! `mpt status --json`, [`mpt_proto::reorder::HoldHistogram`]). Two
//! snapshots, at the start and the end of the measured window, give the
//! window's packets by difference. The 99th percentile is taken twice:
//!
//! - over all delivered packets, those not held counting as 0: the extra
//!   delay a packet of the flow sees, which is what the target is about;
//! - over the held packets only: what waiting costs when it happens.
//!
//! A bucket tells only that a hold lay between its limits, so a percentile
//! is a range: `lo` is the lower limit of the bucket the rank falls in, `hi`
//! its upper limit, capped by the longest hold the daemon has seen. The
//! check passes when `hi` is within the limit and fails when `lo` is over
//! it; in between it cannot tell.
//!
//! Not included: the receiver's delay equalisation (mptd's `equalize`)
//! holds a faster path's datagrams before they reach the resequencer; that
//! wait is by design at most the spread, and it is not in this histogram.

use mpt_api::Status;
use serde::Serialize;

/// Margin over the delay spread that the target allows.
pub const MARGIN_MS: f64 = 10.0;

/// Number of histogram buckets mptd reports.
const BUCKETS: usize = mpt_proto::reorder::HOLD_BUCKETS;

/// The resequencer's counters summed over a daemon's connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Delivered without being held (in order, flow bypass, late).
    pub not_held: u64,
    /// Delivered after being held; the histogram counts these.
    pub held: u64,
    pub counts: [u64; BUCKETS],
    /// Longest hold the daemon has seen so far, µs.
    pub max_us: u64,
    /// All holds added up, µs.
    pub sum_us: u64,
}

impl Snapshot {
    /// Reads `mpt status --json` (the `status` object). `None` when the
    /// daemon reports no hold histogram.
    pub fn from_status(status: &Status) -> Option<Snapshot> {
        let mut s = Snapshot::default();
        let conns = status.connections.as_deref()?;
        if conns.is_empty() {
            return None;
        }
        for c in conns {
            let r = c.reorder.as_ref()?;
            let n = |k: Option<u64>| k.unwrap_or(0);
            s.not_held += n(r.in_order) + n(r.flow_bypass) + n(r.late);
            s.held += n(r.held);
            let h = r.hold.as_ref()?;
            let counts = h.counts.as_deref()?;
            if counts.len() != BUCKETS {
                return None;
            }
            for (k, c) in counts.iter().enumerate() {
                s.counts[k] += c;
            }
            let us = |ms: Option<f64>| ms.map(|ms| (ms * 1e3).round() as u64);
            s.max_us = s.max_us.max(us(h.max_ms)?);
            s.sum_us += us(h.sum_ms).unwrap_or(0);
        }
        Some(s)
    }

    /// What happened between `self` (earlier) and `end`: `None` when a
    /// counter went backwards (the daemon restarted).
    pub fn until(&self, end: &Snapshot) -> Option<Snapshot> {
        let mut d = Snapshot {
            not_held: end.not_held.checked_sub(self.not_held)?,
            held: end.held.checked_sub(self.held)?,
            counts: [0; BUCKETS],
            // The longest hold of the window is unknown; the longest ever
            // is an upper bound of it.
            max_us: end.max_us,
            sum_us: end.sum_us.checked_sub(self.sum_us)?,
        };
        for k in 0..BUCKETS {
            d.counts[k] = end.counts[k].checked_sub(self.counts[k])?;
        }
        Some(d)
    }

    /// Held packets the histogram counted.
    pub fn histogram_total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Limits of bucket `k` in ms: `[lo, hi)`, `hi` = `None` for the last one.
fn bucket_ms(k: usize) -> (f64, Option<f64>) {
    let lo = if k == 0 {
        0.0
    } else {
        (1u64 << (k - 1)) as f64
    };
    let hi = (k + 1 < BUCKETS).then(|| (1u64 << k) as f64);
    (lo, hi)
}

/// Where a quantile lies, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantile {
    /// Lower limit of the bucket it falls in.
    pub lo: f64,
    /// Upper limit of that bucket, capped by the longest hold seen.
    pub hi: f64,
    /// Linear interpolation inside the bucket by rank (as Prometheus's
    /// `histogram_quantile`): an estimate, assuming holds spread evenly
    /// over the bucket.
    pub est: f64,
}

impl Quantile {
    #[cfg(test)]
    fn range(self) -> (f64, f64) {
        (self.lo, self.hi)
    }
}

/// The `per_mille`/1000 quantile of `zeros` holds of 0 and the holds in
/// `counts`: the range in ms of the bucket it falls in (its upper limit
/// capped by `max_ms`) and an estimate inside it. `None` when there is
/// nothing.
pub fn quantile_ms(
    zeros: u64,
    counts: &[u64; BUCKETS],
    max_ms: f64,
    per_mille: u64,
) -> Option<Quantile> {
    let total = zeros + counts.iter().sum::<u64>();
    if total == 0 {
        return None;
    }
    let per_mille = per_mille.min(1000);
    // Rank of the quantile: ceil(total × q), at least 1.
    let rank = ((u128::from(total) * u128::from(per_mille)).div_ceil(1000) as u64).max(1);
    if rank <= zeros {
        return Some(Quantile {
            lo: 0.0,
            hi: 0.0,
            est: 0.0,
        });
    }
    let mut seen = zeros;
    for (k, &c) in counts.iter().enumerate() {
        if seen + c >= rank {
            let (lo, hi) = bucket_ms(k);
            let hi = hi.map_or(max_ms, |h| h.min(max_ms)).max(lo);
            let at = (rank - seen) as f64 / c as f64;
            return Some(Quantile {
                lo,
                hi,
                est: lo + (hi - lo) * at,
            });
        }
        seen += c;
    }
    None
}

/// Resequencing delay of one measurement against the target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct HoldCheck {
    /// Packets the receiving resequencer delivered in the window.
    pub delivered: u64,
    /// Of them, delivered after being held.
    pub held: u64,
    /// p99 of the hold over all delivered packets (not held = 0), ms: the
    /// bucket range it falls in.
    pub p99_all_lo_ms: Option<f64>,
    pub p99_all_ms: Option<f64>,
    /// The same interpolated inside the bucket (an estimate).
    pub p99_all_est_ms: Option<f64>,
    /// p99 over the held packets only, ms (upper limit of its bucket).
    pub p99_held_ms: Option<f64>,
    /// Mean hold of the held packets, ms.
    pub mean_held_ms: Option<f64>,
    /// Spread of the paths' configured one-way delays (slowest − fastest), ms.
    pub spread_ms: f64,
    /// The spread the receiving daemon measured during the window
    /// (queueing included; p99 of samples, see [`spread_p99`]), ms.
    pub measured_spread_ms: Option<f64>,
    /// The limit: the measured spread (the configured one when
    /// nothing was measured) + [`MARGIN_MS`].
    pub limit_ms: f64,
    /// p99 over all packets within the limit: `Some(true)` when its bucket's
    /// upper limit is, `Some(false)` when its lower limit is over, `None`
    /// when the bucket straddles the limit or nothing was delivered.
    pub pass: Option<bool>,
    /// By the interpolated estimate (the same as `pass` when that is
    /// known; otherwise a best guess).
    pub pass_estimate: Option<bool>,
    /// The window's hold histogram (power-of-two ms buckets, as
    /// [`quantile_ms`] reads them) and the longest hold seen, ms: the
    /// hold-time CDF of the report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hold_counts: Vec<u64>,
    pub max_hold_ms: Option<f64>,
}

impl HoldCheck {
    /// Judges the window between two snapshots of the receiver.
    pub fn new(window: &Snapshot, spread_ms: f64, measured_spread_ms: Option<f64>) -> HoldCheck {
        let max_ms = window.max_us as f64 / 1e3;
        let all = quantile_ms(window.not_held, &window.counts, max_ms, 990);
        let held_only = quantile_ms(0, &window.counts, max_ms, 990);
        let n = window.histogram_total();
        let limit = measured_spread_ms.unwrap_or(spread_ms) + MARGIN_MS;
        HoldCheck {
            delivered: window.not_held + window.held,
            held: window.held,
            p99_all_lo_ms: all.map(|q| q.lo),
            p99_all_ms: all.map(|q| q.hi),
            p99_all_est_ms: all.map(|q| q.est),
            p99_held_ms: held_only.map(|q| q.hi),
            mean_held_ms: (n > 0).then(|| window.sum_us as f64 / 1e3 / n as f64),
            spread_ms,
            measured_spread_ms,
            limit_ms: limit,
            pass: all.and_then(|q| {
                if q.hi <= limit {
                    Some(true)
                } else if q.lo > limit {
                    Some(false)
                } else {
                    None
                }
            }),
            pass_estimate: all.map(|q| q.est <= limit),
            hold_counts: window.counts.to_vec(),
            max_hold_ms: Some(max_ms),
        }
    }

    /// The CDF of the hold over all delivered packets (not held = 0), at
    /// the upper limit of every bucket (capped by the longest hold): (ms,
    /// fraction delivered within). Empty without a histogram.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let held: u64 = self.hold_counts.iter().sum();
        let not_held = self.delivered.saturating_sub(held);
        let total = not_held + held;
        if total == 0 || self.hold_counts.is_empty() {
            return Vec::new();
        }
        let max = self.max_hold_ms.unwrap_or(f64::INFINITY);
        let mut seen = not_held;
        let mut out = vec![(0.0, seen as f64 / total as f64)];
        for (k, c) in self.hold_counts.iter().enumerate() {
            if *c == 0 {
                continue;
            }
            seen += c;
            let hi = bucket_ms(k).1.map_or(max, |h| h.min(max));
            out.push((hi.max(bucket_ms(k).0), seen as f64 / total as f64));
        }
        out
    }
}

/// Slowest − fastest of one-way delays, ms (`None` for no delays).
pub fn spread(owd_ms: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for d in owd_ms.into_iter().filter(|d| d.is_finite()) {
        lo = lo.min(d);
        hi = hi.max(d);
    }
    (hi >= lo).then_some(hi - lo)
}

/// The delay spread the receiving daemon measures now (`reorder.spread_ms`
/// of its status: slowest − fastest one-way delay of the paths bringing
/// data, queueing included), the largest over its connections. `None`
/// when no connection has two such paths.
pub fn rx_spread(status: &Status) -> Option<f64> {
    status
        .connections
        .as_deref()?
        .iter()
        .filter_map(|c| c.reorder.as_ref()?.spread_ms.flatten())
        .filter(|d| d.is_finite())
        .reduce(f64::max)
}

/// The 99th percentile (nearest rank) of spreads sampled over a window:
/// the spread the window's tail holds are set against.
pub fn spread_p99(samples: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|d| d.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = (v.len() * 99).div_ceil(100).max(1);
    Some(v[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn counts(pairs: &[(usize, u64)]) -> [u64; BUCKETS] {
        let mut c = [0; BUCKETS];
        for &(k, n) in pairs {
            c[k] = n;
        }
        c
    }

    #[test]
    fn quantile_counts_packets_not_held_as_zero() {
        // 990 in order, 10 held 20-30 ms: the 99th percentile is the
        // 990th packet, still one not held.
        let c = counts(&[(5, 10)]);
        assert_eq!(
            quantile_ms(990, &c, 30.0, 990).map(Quantile::range),
            Some((0.0, 0.0))
        );
        // One fewer in order: the 990th packet is a held one, in the
        // 16..32 ms bucket, capped by the longest hold seen.
        assert_eq!(
            quantile_ms(989, &c, 30.0, 990).map(Quantile::range),
            Some((16.0, 30.0))
        );
        assert_eq!(
            quantile_ms(989, &c, 100.0, 990).map(Quantile::range),
            Some((16.0, 32.0))
        );
        // Over the held packets alone.
        assert_eq!(
            quantile_ms(0, &c, 30.0, 990).map(Quantile::range),
            Some((16.0, 30.0))
        );
        assert_eq!(quantile_ms(0, &[0; BUCKETS], 0.0, 990), None);
        // The estimate interpolates by rank: the 990th of 1000 with 989
        // not held is the first of ten in 16..30 ms.
        let q = quantile_ms(989, &c, 30.0, 990).expect("q");
        assert!((q.est - 17.4).abs() < 1e-9, "{q:?}");
    }

    #[test]
    fn quantile_rank_rounds_up_and_uses_bucket_limits() {
        // 100 packets: p99 is the 99th. 98 below 1 ms, 1 in 1..2, 1 in
        // 512..1024: the 99th is in 1..2.
        let c = counts(&[(0, 98), (1, 1), (10, 1)]);
        assert_eq!(
            quantile_ms(0, &c, 700.0, 990).map(Quantile::range),
            Some((1.0, 2.0))
        );
        // p100 is the longest, capped by the maximum.
        assert_eq!(
            quantile_ms(0, &c, 700.0, 1000).map(Quantile::range),
            Some((512.0, 700.0))
        );
        // 101 packets: rank ceil(99.99) = 100, here the one in 1..2 ms,
        let c = counts(&[(0, 99), (1, 1), (10, 1)]);
        assert_eq!(
            quantile_ms(0, &c, 700.0, 990).map(Quantile::range),
            Some((1.0, 2.0))
        );
        // and here one in 512..1024 ms.
        let c = counts(&[(0, 98), (1, 1), (10, 2)]);
        assert_eq!(
            quantile_ms(0, &c, 700.0, 990).map(Quantile::range),
            Some((512.0, 700.0))
        );
        // The last bucket has no upper limit but the maximum.
        let c = counts(&[(11, 5)]);
        assert_eq!(
            quantile_ms(0, &c, 2500.0, 990).map(Quantile::range),
            Some((1024.0, 2500.0))
        );
    }

    /// Parses a status document written by hand.
    fn parse(v: serde_json::Value) -> Status {
        serde_json::from_value(v).expect("a status document")
    }

    fn status(in_order: u64, held: u64, c: [u64; BUCKETS], max_ms: f64, sum_ms: f64) -> Status {
        let zeros = [0u64; BUCKETS];
        parse(json!({"connections": [{
            "reorder": {"in_order": in_order, "flow_bypass": 1, "late": 0, "held": held,
                        "hold": {"counts": c, "max_ms": max_ms, "sum_ms": sum_ms}},
        }, {
            "reorder": {"in_order": 0, "flow_bypass": 0, "late": 0, "held": 0,
                        "spread_ms": 287.5, "hold": {"counts": zeros, "max_ms": 0.0, "sum_ms": 0.0}},
        }]}))
    }

    #[test]
    fn spread_p99_is_the_nearest_rank() {
        assert_eq!(spread_p99(&[]), None);
        assert_eq!(spread_p99(&[f64::NAN]), None);
        assert_eq!(spread_p99(&[3.0]), Some(3.0));
        // 100 samples 1..=100: the 99th.
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(spread_p99(&v), Some(99.0));
        // 20 samples: rank ceil(19.8) = 20, the largest.
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(spread_p99(&v), Some(20.0));
    }

    #[test]
    fn window_is_the_difference_of_two_snapshots() {
        let a = Snapshot::from_status(&status(
            1000,
            50,
            counts(&[(0, 40), (9, 10)]),
            300.0,
            3000.0,
        ));
        let b = Snapshot::from_status(&status(
            3000,
            80,
            counts(&[(0, 40), (3, 20), (9, 20)]),
            310.0,
            6200.0,
        ));
        let (a, b) = (a.expect("a"), b.expect("b"));
        let w = a.until(&b).expect("window");
        assert_eq!(w.not_held, 2000);
        assert_eq!(w.held, 30);
        assert_eq!(w.counts, counts(&[(3, 20), (9, 10)]));
        assert_eq!(w.sum_us, 3_200_000);
        // Backwards (restart): no window.
        assert_eq!(b.until(&a), None);
        // 2030 packets, rank 2010: in order ones and the 20 in 4..8 ms
        // take it to 2020.
        let measured = rx_spread(&status(0, 0, [0; BUCKETS], 0.0, 0.0));
        assert_eq!(measured, Some(287.5), "the connection with two paths");
        let h = HoldCheck::new(&w, 200.0, measured);
        assert_eq!((h.p99_all_lo_ms, h.p99_all_ms), (Some(4.0), Some(8.0)));
        // Rank 2010 is the 10th of the 20 in 4..8 ms: half way.
        assert_eq!(h.p99_all_est_ms, Some(6.0));
        assert_eq!(h.p99_held_ms, Some(310.0));
        assert_eq!(h.mean_held_ms, Some(3200.0 / 30.0));
        assert_eq!(h.delivered, 2030);
        assert_eq!(h.limit_ms, 297.5, "measured spread + margin");
        assert_eq!(h.pass, Some(true));
        // Tight spread: p99 in 4..8 ms against 1 + 10 passes, against a
        // limit inside the bucket it cannot tell, below it fails.
        assert_eq!(HoldCheck::new(&w, 1.0, None).pass, Some(true));
        // (the estimate, 6 ms, decides a best guess).
        let straddles = HoldCheck::new(&w, -3.5, None);
        assert_eq!(
            (straddles.pass, straddles.pass_estimate),
            (None, Some(true))
        );
        let straddles = HoldCheck::new(&w, -5.0, None);
        assert_eq!(
            (straddles.pass, straddles.pass_estimate),
            (None, Some(false))
        );
        assert_eq!(HoldCheck::new(&w, -7.0, None).pass, Some(false));
        // The measured spread, not the configured one, sets the limit.
        assert_eq!(HoldCheck::new(&w, 100.0, Some(-7.0)).pass, Some(false));
        // Nothing delivered: nothing to judge.
        let none = a.until(&a).expect("empty window");
        let none = HoldCheck::new(&none, 1.0, None);
        assert_eq!((none.pass, none.pass_estimate), (None, None));
    }

    #[test]
    fn status_without_histogram_gives_nothing() {
        assert_eq!(
            Snapshot::from_status(&parse(json!({"connections": []}))),
            None
        );
        assert_eq!(
            Snapshot::from_status(&parse(
                json!({"connections": [{"reorder": {"in_order": 3}}]})
            )),
            None
        );
        assert_eq!(Snapshot::from_status(&Status::default()), None);
        assert_eq!(spread([]), None);
        assert_eq!(spread([25.0 / 2.0, 600.0 / 2.0]), Some(287.5));
    }
}
