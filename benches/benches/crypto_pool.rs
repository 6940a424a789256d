//! The crypto stage (`mptd::dataplane::crypto_pool`): sealing a batch of full-size
//! datagrams (1424 bytes: a 1400-byte inner packet, header and tag) on the
//! calling thread alone (`inline`) and cut into chunks shared with the
//! pool's helpers (`pool`), for batch sizes around the inline threshold
//! (`DEFAULT_MIN_CHUNK`), with either data cipher. Reported per datagram
//! (`Throughput::Elements(batch)`).
//!
//! What it tells: from which batch size handing chunks to helpers pays
//! for its wake-ups, and how that moves with the cipher's cost per
//! datagram. On 2 cores the pool has one helper, so `pool` can at best
//! halve `inline`; the machine's other load shows up as noise here.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mptd::dataplane::crypto_pool::{CryptoPool, DEFAULT_MIN_CHUNK, DEFAULT_SPIN};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305};

/// Datagram length and the part of it that is sealed.
const DATAGRAM: usize = 1424;
const SEALED: usize = DATAGRAM - 16;

fn crypto_pool(c: &mut Criterion) {
    let helpers = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let mut g = c.benchmark_group("crypto_pool");
    for (name, alg) in [
        ("aes256gcm", &AES_256_GCM),
        ("chacha20poly1305", &CHACHA20_POLY1305),
    ] {
        let Ok(unbound) = UnboundKey::new(alg, &[7u8; 32]) else {
            continue;
        };
        let key = LessSafeKey::new(unbound);
        let seal = |chunk: &mut [Vec<u8>], _: &mut Vec<u8>| {
            for (i, b) in chunk.iter_mut().enumerate() {
                let mut n = [0u8; 12];
                n[4..].copy_from_slice(&(i as u64).to_be_bytes());
                if let Ok(tag) = key.seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(n),
                    Aad::empty(),
                    &mut b[..SEALED],
                ) {
                    b[SEALED..].copy_from_slice(tag.as_ref());
                }
            }
        };
        for batch in [16usize, 32, 64, 128] {
            g.throughput(Throughput::Elements(batch as u64));
            let mut items = vec![vec![0u8; DATAGRAM]; batch];
            for (mode, min_chunk) in [("inline", usize::MAX), ("pool", DEFAULT_MIN_CHUNK)] {
                let pool = Arc::new(
                    CryptoPool::start(helpers.max(1), min_chunk, DEFAULT_SPIN)
                        .expect("crypto pool threads"),
                );
                let mut sub = pool.submitter();
                g.bench_with_input(
                    BenchmarkId::new(format!("{name}/{mode}"), batch),
                    &batch,
                    |b, _| b.iter(|| sub.run(black_box(&mut items), &seal)),
                );
                drop(sub);
                pool.stop();
            }
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = mpt_benches::criterion_config();
    targets = crypto_pool
}
criterion_main!(benches);
