//! The resequencer families (label `conn`): packets held now, the
//! longest wait so far, and how long released packets were held, as a
//! histogram at the [`HoldHistogram`] limits (1 ms to 1.024 s, then
//! `+Inf`). The resequencer is locked once per connection and scrape.

use std::fmt;
use std::time::{Duration, Instant};

use mpt_proto::reorder::HoldHistogram;
use prometheus_client::encoding::DescriptorEncoder;

use crate::ops::metrics::families::{gauges, histograms, Labels};
use crate::plane::ConnShared;

/// One connection's resequencer, read under one lock.
struct Row<'a> {
    conn: &'a str,
    held: usize,
    longest: Duration,
    holds: HoldHistogram,
}

/// The resequencer families of the connections `live`.
pub fn encode(encoder: &mut DescriptorEncoder, live: &[&ConnShared], now: Instant) -> fmt::Result {
    let rows: Vec<Row> = live
        .iter()
        .map(|c| {
            let reseq = c.lock_reseq();
            Row {
                conn: &c.name,
                held: reseq.held(),
                longest: reseq.longest_hold(now).unwrap_or(Duration::ZERO),
                holds: reseq.stats().hold,
            }
        })
        .collect();
    gauges(
        encoder,
        "mpt_reorder_held_packets",
        "Packets the resequencer holds now.",
        rows.iter().map(|r| {
            (
                Labels::conn(r.conn),
                i64::try_from(r.held).unwrap_or(i64::MAX),
            )
        }),
    )?;
    gauges(
        encoder,
        "mpt_reorder_longest_hold_seconds",
        "How long the packet held longest has waited so far (0 when none is held).",
        rows.iter()
            .map(|r| (Labels::conn(r.conn), r.longest.as_secs_f64())),
    )?;
    hold_histogram(
        encoder,
        rows.iter().map(|r| (Labels::conn(r.conn), &r.holds)),
    )
}

/// `mpt_reorder_hold_seconds`.
pub fn hold_histogram<'a>(
    encoder: &mut DescriptorEncoder,
    holds: impl IntoIterator<Item = (Labels<'a>, &'a HoldHistogram)>,
) -> fmt::Result {
    histograms(
        encoder,
        "mpt_reorder_hold_seconds",
        "Time packets waited in the resequencer before delivery (packets delivered in order on arrival are not counted).",
        holds
            .into_iter()
            .map(|(labels, h)| (labels, h.sum_us as f64 / 1e6, buckets(h))),
    )
}

/// The histogram's buckets with their upper limits in seconds, the last
/// one `+Inf` (`f64::MAX`).
fn buckets(h: &HoldHistogram) -> Vec<(f64, u64)> {
    let mut buckets: Vec<(f64, u64)> = h
        .counts
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let limit = HoldHistogram::bucket_limit(k).map_or(f64::MAX, |d| d.as_secs_f64());
            (limit, n)
        })
        .collect();
    if buckets.last().is_none_or(|&(limit, _)| limit != f64::MAX) {
        buckets.push((f64::MAX, 0));
    }
    buckets
}
