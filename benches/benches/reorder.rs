//! Per-packet cost of resequencing 1400-byte data packets: an in-order
//! stream (delivered without being stored); two paths interleaved
//! even/odd with each odd packet overtaking its even predecessor, so half
//! the packets are copied into a slot and released by the next one; and
//! two paths where one lags the other by 8 packets and 1 % of the
//! sequence numbers are lost, so about 8 packets are held at any time and
//! every loss is a gap skipped once both paths have passed it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpt_benches::{ipv4_packet, Interleaved, LossyReordered, PACKET_LEN};
use mpt_proto::reorder::Resequencer;

/// Ring slots: the daemon's default order of magnitude; the streams here
/// never hold more than one packet, so only memory footprint depends on it.
const SLOTS: usize = 1024;
/// Slot size: one tunnel packet.
const SLOT_LEN: usize = 1500;
const TIMEOUT: Duration = Duration::from_millis(10);

fn reorder(c: &mut Criterion) {
    let mut g = c.benchmark_group("reorder_insert_1400");
    g.throughput(Throughput::Elements(1));
    let packet = ipv4_packet(PACKET_LEN);
    // Time stands still: no gap ever times out, as at line rate.
    let now = Instant::now();

    let mut r = Resequencer::new(SLOTS, SLOT_LEN, TIMEOUT);
    let mut seq = 0u64;
    g.bench_function("in_order", |b| {
        b.iter(|| {
            r.insert(seq, 0, black_box(&packet), now, |p| {
                black_box(p.len());
            });
            seq += 1;
        })
    });
    assert_eq!(r.stats().held, 0, "in-order stream must not hold packets");

    let mut r = Resequencer::new(SLOTS, SLOT_LEN, TIMEOUT);
    let mut stream = Interleaved::new();
    g.bench_function("two_paths_interleaved", |b| {
        b.iter(|| {
            let (seq, path) = stream.next().unwrap_or_default();
            r.insert(seq, path, black_box(&packet), now, |p| {
                black_box(p.len());
            });
        })
    });
    let stats = r.stats();
    assert_eq!(
        stats.gaps_skipped, 0,
        "interleaved stream lost packets: {stats:?}"
    );
    assert!(
        stats.held * 2 + 2 >= stats.in_order,
        "interleaved stream held too few: {stats:?}"
    );

    let mut r = Resequencer::new(SLOTS, SLOT_LEN, TIMEOUT);
    // Every insert at one instant: the paths' order alone proves loss (a
    // reorder grace would never pass), which is the cost measured here.
    r.set_reorder_grace(Duration::ZERO);
    let mut stream = LossyReordered::new(8, 100);
    g.bench_function("lag8_loss1pct", |b| {
        b.iter(|| {
            let (seq, path) = stream.next().unwrap_or_default();
            r.insert(seq, path, black_box(&packet), now, |p| {
                black_box(p.len());
            });
        })
    });
    let stats = r.stats();
    assert_eq!(stats.late, 0, "lossy stream delivered late: {stats:?}");
    assert!(
        stats.gaps_skipped > 0,
        "lossy stream skipped no gap: {stats:?}"
    );
    g.finish();
}

criterion_group! {
    name = benches;
    config = mpt_benches::criterion_config();
    targets = reorder
}
criterion_main!(benches);
