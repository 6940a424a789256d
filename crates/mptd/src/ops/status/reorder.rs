//! The resequencer's part of a connection's status: its counters, what it
//! holds now, its timings and the histogram of how long it held packets.

use std::time::Instant;

use mpt_api::status::{HoldTimes, Reorder};
use mpt_proto::reorder::{HoldHistogram, HOLD_BUCKETS};

use crate::ops::status::fields::{ms, us_as_ms};
use crate::plane::ConnShared;

/// The resequencer of connection `c` as of `now`.
pub(super) fn reorder(c: &ConnShared, now: Instant) -> Reorder {
    let (r, held_now, longest, grace) = {
        let g = c.lock_reseq();
        (g.stats(), g.held(), g.longest_hold(now), g.reorder_grace())
    };
    let timing = c.timing.load();
    Reorder {
        duplicates: Some(r.duplicates),
        flow_bypass: Some(r.flow_bypass),
        gaps_skipped: Some(r.gaps_skipped),
        grace_ms: Some(ms(grace)),
        held: Some(r.held),
        held_now: Some(held_now as u64),
        hold: Some(hold_times(&r.hold)),
        in_order: Some(r.in_order),
        late: Some(r.late),
        longest_hold_ms: Some(longest.map_or(0.0, ms)),
        resets: Some(r.resets),
        // Fewer than two paths bring data: no spread.
        spread_ms: Some(timing.rx_spread_us().map(us_as_ms)),
        timeout_ms: Some(us_as_ms(timing.reorder_timeout_us())),
        other: Default::default(),
    }
}

/// The resequencer's hold histogram: `counts[k]` packets were held less
/// than `le_ms[k]` (and at least the previous limit); the last count has no
/// limit (`null`). Times in ms, the sum and maximum to the microsecond.
fn hold_times(h: &HoldHistogram) -> HoldTimes {
    let le_ms: Vec<Option<u64>> = (0..HOLD_BUCKETS)
        .map(|k| HoldHistogram::bucket_limit(k).map(|d| d.as_millis() as u64))
        .collect();
    HoldTimes {
        counts: Some(h.counts.to_vec()),
        le_ms: Some(le_ms),
        max_ms: Some(us_as_ms(h.max_us)),
        sum_ms: Some(us_as_ms(h.sum_us)),
        other: Default::default(),
    }
}
