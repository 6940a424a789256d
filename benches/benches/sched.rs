//! Per-packet cost of choosing a path, through the `Scheduler` trait: one
//! `Weighted` pick over 2, 4, 12
//! and 32 eligible paths with mixed weights, window 1 (a new choice every
//! packet) and window 8 (mostly the cheap "keep the turn" branch); and one
//! `Adaptive` pick over as many paths of unlike rate and delay, for a
//! full-size datagram (ranked by departure) and a small one (by arrival),
//! with the clock advancing 1 µs per packet so the paths fill and drain;
//! and the whole per-packet decision of a transmit worker under
//! `adaptive` (flowlet lookup, pick, record, redundancy check).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpt_benches::{all_paths_mask, mixed_paths};
use mpt_proto::sched::{
    ps_per_byte, Adaptive, Flowlets, PathModel, PickInput, RealtimeFlows, Redundancy, Scheduler,
    Weighted,
};

fn sched(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched_weighted_pick");
    g.throughput(Throughput::Elements(1));
    for window in [1u32, 8] {
        for n in [2usize, 4, 12, 32] {
            let paths = mixed_paths(n, window);
            let mask = all_paths_mask(n);
            let mut s = Weighted::new();
            g.bench_with_input(
                BenchmarkId::new(format!("window{window}"), format!("{n}paths")),
                &n,
                |b, _| {
                    b.iter(|| {
                        let input = PickInput::weighted(black_box(&paths), black_box(mask));
                        black_box(s.pick(&input))
                    })
                },
            );
        }
    }
    g.finish();
}

/// `n` paths from 10 Mbit/s to 1 Gbit/s and 0 to 31 ms of extra delay.
fn unlike_models(n: usize) -> Vec<PathModel> {
    (0..n)
        .map(|i| PathModel {
            ps_per_byte: ps_per_byte(10_000_000 * (1 + (i as u64 * 37) % 100)),
            owd_ns: (i as u64 % 32) * 1_000_000,
            cap_ns: 20_000_000,
            lossy: i % 7 == 6,
            lower_bound: i % 5 == 4,
        })
        .collect()
}

fn adaptive(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched_adaptive_pick");
    g.throughput(Throughput::Elements(1));
    for (label, bytes) in [("bulk1400", 1400usize), ("small100", 100)] {
        for n in [2usize, 4, 12, 32] {
            let paths = unlike_models(n);
            let mask = all_paths_mask(n);
            let mut s = Adaptive::new();
            let mut now = 1_000_000_000u64;
            g.bench_with_input(BenchmarkId::new(label, format!("{n}paths")), &n, |b, _| {
                b.iter(|| {
                    now += 1_000;
                    black_box(s.pick(&PickInput {
                        models: black_box(&paths),
                        mask: black_box(mask),
                        bytes,
                        now_ns: now,
                        hold_ns: 200_000_000,
                        ..PickInput::default()
                    }))
                })
            });
        }
    }
    g.finish();
}

/// The whole per-packet decision of a transmit worker under `adaptive`:
/// the flowlet lookup, the pick, the flowlet record and the redundancy
/// check, for 16 flows in turn (bulk packets).
fn adaptive_per_packet(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched_adaptive_packet");
    g.throughput(Throughput::Elements(1));
    let mut packet = vec![0u8; 1400];
    packet[0] = 0x45;
    packet[9] = 6;
    for n in [2usize, 4, 12, 32] {
        let paths = unlike_models(n);
        let mask = all_paths_mask(n);
        let gap = Flowlets::gap_for(paths.iter().map(|p| p.owd_ns));
        let mut s = Adaptive::new();
        let mut flowlets = Flowlets::new();
        let mut realtime = RealtimeFlows::new();
        let mut now = 1_000_000_000u64;
        let mut k = 0u32;
        g.bench_with_input(
            BenchmarkId::new("bulk1400", format!("{n}paths")),
            &n,
            |b, _| {
                b.iter(|| {
                    now += 1_000;
                    k = k.wrapping_add(1);
                    let hash = (k % 16).wrapping_mul(0x9e37_79b9);
                    let current = flowlets.current(hash, now, gap);
                    let p = s.pick(&PickInput {
                        models: black_box(&paths),
                        mask: black_box(mask),
                        bytes: 1400,
                        now_ns: now,
                        hold_ns: 200_000_000,
                        flowlet: current,
                        ..PickInput::default()
                    });
                    if let Some(p) = p {
                        flowlets.record(hash, p, now);
                    }
                    let copy = realtime.wants_copy(Redundancy::Auto, hash, black_box(&packet), now);
                    black_box((p, copy))
                })
            },
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = mpt_benches::criterion_config();
    targets = sched, adaptive, adaptive_per_packet
}
criterion_main!(benches);
