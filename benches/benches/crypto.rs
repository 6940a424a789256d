//! Per-packet cost of the crypto layer on 1400-byte data packets, with
//! session keys from a real handshake:
//!
//! * `seal_open`: what one packet costs end to end: the sender emits the
//!   header with a fresh sequence number and seals in place, the receiver
//!   opens the same buffer in place (which leaves the plaintext there for
//!   the next round);
//! * `seal`: header emit plus seal alone;
//! * `open`: open alone, of a copy of one sealed datagram made outside the
//!   timed section;
//! * `replay`: one [`ReplayWindow`] check+update, in order and with two
//!   paths interleaved (half the numbers arrive below the highest);
//! * `handshake`: Init, Response and both sides' keys.
//!
//! Seal and open report bytes of inner packet (`Throughput::Bytes(1400)`),
//! so criterion prints GB/s next to the per-packet time.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mpt_benches::{
    bench_psk, bench_responder, handshake, ipv4_packet, sealed_data_header, session_keys,
    Interleaved, PACKET_LEN,
};
use mpt_proto::crypto::{ReplayWindow, TAG_LEN};
use mpt_proto::wire::HEADER_LEN;

const DATAGRAM_LEN: usize = HEADER_LEN + PACKET_LEN + TAG_LEN;

/// A datagram buffer with the inner packet after a sealed header.
fn plain_datagram(seq: u64) -> Vec<u8> {
    let mut buf = vec![0u8; DATAGRAM_LEN];
    sealed_data_header(seq, 0)
        .emit(&mut buf)
        .expect("buffer fits a header");
    buf[HEADER_LEN..HEADER_LEN + PACKET_LEN].copy_from_slice(&ipv4_packet(PACKET_LEN));
    buf
}

fn aead(c: &mut Criterion) {
    let (sender, receiver) = session_keys();
    let packet = ipv4_packet(PACKET_LEN);

    let mut g = c.benchmark_group("crypto_1400");
    g.throughput(Throughput::Bytes(PACKET_LEN as u64));

    let mut buf = plain_datagram(0);
    let mut seq = 0u64;
    g.bench_function("seal_open", |b| {
        b.iter(|| {
            seq += 1;
            sealed_data_header(seq, (seq & 1) as u16)
                .emit(&mut buf[..])
                .expect("buffer fits a header");
            let n = sender
                .seal_datagram(black_box(&mut buf[..]), PACKET_LEN)
                .expect("seal");
            let plain = receiver
                .open_datagram(black_box(&mut buf[..n]))
                .expect("open");
            black_box(plain.len())
        })
    });
    // Every round trip gave the packet back.
    assert_eq!(&buf[HEADER_LEN..HEADER_LEN + PACKET_LEN], &packet[..]);

    // Sealing again in place encrypts the previous ciphertext: same cost,
    // and the nonce (the sequence number) is still fresh every time.
    let mut buf = plain_datagram(0);
    let mut seq = 0u64;
    g.bench_function("seal", |b| {
        b.iter(|| {
            seq += 1;
            sealed_data_header(seq, (seq & 1) as u16)
                .emit(&mut buf[..])
                .expect("buffer fits a header");
            black_box(
                sender
                    .seal_datagram(black_box(&mut buf[..]), PACKET_LEN)
                    .expect("seal"),
            )
        })
    });

    let mut sealed = plain_datagram(1);
    sender.seal_datagram(&mut sealed, PACKET_LEN).expect("seal");
    g.bench_function("open", |b| {
        b.iter_batched_ref(
            || sealed.clone(),
            |d| {
                let plain = receiver.open_datagram(black_box(&mut d[..])).expect("open");
                black_box(plain.len())
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn replay(c: &mut Criterion) {
    let mut g = c.benchmark_group("replay_check_update");
    g.throughput(Throughput::Elements(1));

    let mut w = ReplayWindow::new();
    let mut seq = 0u64;
    g.bench_function("in_order", |b| {
        b.iter(|| {
            w.check(black_box(seq)).expect("fresh in-order seq");
            w.update(seq).expect("fresh in-order seq");
            seq += 1;
        })
    });

    let mut w = ReplayWindow::new();
    let mut stream = Interleaved::new();
    g.bench_function("two_paths_interleaved", |b| {
        b.iter(|| {
            let (seq, _) = stream.next().unwrap_or_default();
            w.check(black_box(seq)).expect("fresh interleaved seq");
            w.update(seq).expect("fresh interleaved seq");
        })
    });
    g.finish();
}

fn full_handshake(c: &mut Criterion) {
    let mut g = c.benchmark_group("handshake");
    g.throughput(Throughput::Elements(1));
    let psk = bench_psk();
    // One responder for the whole run, as in the daemon: each Init carries
    // a larger timestamp than the last, so after the first (which takes the
    // Challenge round) every handshake is one Init and one Response.
    let mut responder = bench_responder(&psk).expect("responder");
    let now = std::time::Instant::now();
    let mut counter = 0u64;
    g.bench_function("init_response_keys", |b| {
        b.iter(|| {
            counter += 2;
            black_box(handshake(black_box(&psk), &mut responder, counter, now).expect("handshake"))
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = mpt_benches::criterion_config();
    targets = aead, replay, full_handshake
}
criterion_main!(benches);
