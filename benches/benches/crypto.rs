//! Per-packet cost of the crypto layer, with session keys from a real
//! handshake:
//!
//! * `aead/seal/<size>` and `aead/open/<size>`: one data datagram whose
//!   inner packet is 64, 512, 1400 or 8192 bytes. `seal` is the sender's
//!   header emit (fresh sequence number) plus the in-place seal; `open` is
//!   the receiver's in-place open of a copy of one sealed datagram made
//!   outside the timed section;
//! * `aead/seal_open/1400`: the two in turn on one buffer, what one
//!   tunnel packet costs end to end (the open leaves the plaintext in
//!   place for the next round);
//! * `replay`: one [`ReplayWindow`] check+update, in order and with two
//!   paths interleaved (half the numbers arrive below the highest);
//! * `handshake`: Init, Response and both sides' keys.
//!
//! Seal and open report bytes of inner packet (`Throughput::Bytes(size)`),
//! so criterion prints GB/s next to the per-packet time and the sizes can
//! be compared: the fixed cost per packet is what the small sizes show.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use mpt_benches::{
    bench_psk, bench_responder, handshake, ipv4_packet, sealed_data_header, session_keys,
    Interleaved, PACKET_LEN,
};
use mpt_proto::crypto::{ReplayWindow, TAG_LEN};
use mpt_proto::wire::HEADER_LEN;

/// Inner packet sizes of the seal and open benches: a small control-sized
/// packet, a mid-size one, a full tunnel MTU payload and a GSO-sized
/// aggregate.
const SIZES: [usize; 4] = [64, 512, PACKET_LEN, 8192];

/// A datagram buffer with an inner packet of `len` bytes after a sealed
/// header, and room for the tag.
fn plain_datagram(seq: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; HEADER_LEN + len + TAG_LEN];
    sealed_data_header(seq, 0)
        .emit(&mut buf)
        .expect("buffer fits a header");
    buf[HEADER_LEN..HEADER_LEN + len].copy_from_slice(&ipv4_packet(len));
    buf
}

fn aead(c: &mut Criterion) {
    let (sender, receiver) = session_keys();
    let mut g = c.benchmark_group("aead");

    for len in SIZES {
        g.throughput(Throughput::Bytes(len as u64));

        // Sealing again in place encrypts the previous ciphertext: same
        // cost, and the nonce (the sequence number) is fresh every time.
        let mut buf = plain_datagram(0, len);
        let mut seq = 0u64;
        g.bench_with_input(BenchmarkId::new("seal", len), &len, |b, &len| {
            b.iter(|| {
                seq += 1;
                sealed_data_header(seq, (seq & 1) as u16)
                    .emit(&mut buf[..])
                    .expect("buffer fits a header");
                black_box(
                    sender
                        .seal_datagram(black_box(&mut buf[..]), len)
                        .expect("seal"),
                )
            })
        });

        let mut sealed = plain_datagram(1, len);
        sender.seal_datagram(&mut sealed, len).expect("seal");
        g.bench_with_input(BenchmarkId::new("open", len), &len, |b, _| {
            b.iter_batched_ref(
                || sealed.clone(),
                |d| {
                    let plain = receiver.open_datagram(black_box(&mut d[..])).expect("open");
                    black_box(plain.len())
                },
                BatchSize::SmallInput,
            )
        });
    }

    g.throughput(Throughput::Bytes(PACKET_LEN as u64));
    let packet = ipv4_packet(PACKET_LEN);
    let mut buf = plain_datagram(0, PACKET_LEN);
    let mut seq = 0u64;
    g.bench_with_input(
        BenchmarkId::new("seal_open", PACKET_LEN),
        &PACKET_LEN,
        |b, &len| {
            b.iter(|| {
                seq += 1;
                sealed_data_header(seq, (seq & 1) as u16)
                    .emit(&mut buf[..])
                    .expect("buffer fits a header");
                let n = sender
                    .seal_datagram(black_box(&mut buf[..]), len)
                    .expect("seal");
                let plain = receiver
                    .open_datagram(black_box(&mut buf[..n]))
                    .expect("open");
                black_box(plain.len())
            })
        },
    );
    // Every round trip gave the packet back.
    assert_eq!(&buf[HEADER_LEN..HEADER_LEN + PACKET_LEN], &packet[..]);
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

/// The two AEADs ring offers, bare (no header, no session): what choosing
/// the data cipher is worth on this CPU. ChaCha20-Poly1305 needs no
/// special instructions; AES-256-GCM needs AES-NI and carry-less multiply,
/// which every x86-64 server of the last decade and ARMv8 with the crypto
/// extension have.
fn cipher_choice(c: &mut Criterion) {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305};
    let mut g = c.benchmark_group("cipher");
    for (name, alg) in [
        ("chacha20poly1305", &CHACHA20_POLY1305),
        ("aes256gcm", &AES_256_GCM),
    ] {
        let Ok(unbound) = UnboundKey::new(alg, &[7u8; 32]) else {
            continue;
        };
        let key = LessSafeKey::new(unbound);
        for len in [PACKET_LEN, 8192] {
            g.throughput(Throughput::Bytes(len as u64));
            let mut buf = vec![0u8; len];
            let mut seq = 0u64;
            g.bench_with_input(
                BenchmarkId::new(format!("{name}/seal"), len),
                &len,
                |b, _| {
                    b.iter(|| {
                        seq += 1;
                        let mut nonce = [0u8; 12];
                        nonce[4..].copy_from_slice(&seq.to_be_bytes());
                        key.seal_in_place_separate_tag(
                            Nonce::assume_unique_for_key(nonce),
                            Aad::from([0u8; HEADER_LEN]),
                            black_box(&mut buf[..]),
                        )
                        .expect("seal")
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = mpt_benches::criterion_config();
    targets = aead, replay, full_handshake, cipher_choice
}
criterion_main!(benches);
