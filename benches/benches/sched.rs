//! Per-packet cost of choosing a path: one `Weighted::pick` over 2, 4, 12
//! and 32 eligible paths with mixed weights, window 1 (a new choice every
//! packet) and window 8 (mostly the cheap "keep the turn" branch).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpt_benches::{all_paths_mask, mixed_paths};
use mpt_proto::sched::{Scheduler, Weighted};

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
                |b, _| b.iter(|| black_box(s.pick(black_box(&paths), black_box(mask)))),
            );
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = mpt_benches::criterion_config();
    targets = sched
}
criterion_main!(benches);
