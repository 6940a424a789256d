//! Per-packet cost of MSS clamping (`mpt_proto::mss::clamp_mss`), which
//! the transmit stage runs on every packet it reads from tun: a SYN whose
//! MSS is lowered (the template copied back in each time, so every
//! iteration rewrites; `syn_copy_only` is that copy alone), a SYN that
//! already fits, and the early-outs that every other packet takes: a
//! full-size TCP data segment and a UDP packet; beside them, for scale,
//! `mpt_proto::flow::is_tcp_syn` on the UDP packet (which the adaptive
//! scheduler already runs per packet).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpt_benches::{ipv4_packet, PACKET_LEN};
use mpt_proto::mss::{clamp_mss, Checksum, Clamp};

const MTU: u16 = 1400;

/// An IPv4 TCP segment of `len` bytes with `flags` and Linux's SYN
/// options (MSS 1460, SACK permitted, timestamps, NOP, window scale).
fn tcp_packet(len: usize, flags: u8) -> Vec<u8> {
    let mut p = ipv4_packet(len);
    p[9] = 6;
    let opts = [
        2u8, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
    ];
    p[20..40].fill(0);
    p[32] = ((20 + opts.len()) / 4) as u8 * 16;
    p[33] = flags;
    p[40..40 + opts.len()].copy_from_slice(&opts);
    p
}

/// The outcome as one byte for `black_box`: the 6-byte [`Clamp`], stored
/// in two parts and read back whole, costs a store-forwarding stall
/// (10 ns here) that has nothing to do with clamping.
fn lowered(c: Clamp) -> bool {
    matches!(c, Clamp::Lowered { .. })
}

fn mss(c: &mut Criterion) {
    let mut g = c.benchmark_group("mss");
    g.throughput(Throughput::Elements(1));

    let template = tcp_packet(60, 0x02);
    let mut syn = template.clone();
    g.bench_function("syn_lowered", |b| {
        b.iter(|| {
            syn.copy_from_slice(black_box(&template));
            black_box(lowered(clamp_mss(
                black_box(&mut syn[..]),
                MTU,
                Checksum::Complete,
            )))
        })
    });
    g.bench_function("syn_copy_only", |b| {
        b.iter(|| {
            syn.copy_from_slice(black_box(&template));
            black_box(&mut syn[..]);
        })
    });
    let mut fits = template.clone();
    clamp_mss(&mut fits, MTU, Checksum::Complete);
    g.bench_function("syn_fits", |b| {
        b.iter(|| {
            black_box(lowered(clamp_mss(
                black_box(&mut fits[..]),
                MTU,
                Checksum::Complete,
            )))
        })
    });
    let mut data = tcp_packet(PACKET_LEN, 0x18);
    g.bench_function("tcp_data_1400", |b| {
        b.iter(|| {
            black_box(lowered(clamp_mss(
                black_box(&mut data[..]),
                MTU,
                Checksum::Complete,
            )))
        })
    });
    let mut udp = ipv4_packet(PACKET_LEN);
    g.bench_function("udp_1400", |b| {
        b.iter(|| {
            black_box(lowered(clamp_mss(
                black_box(&mut udp[..]),
                MTU,
                Checksum::Complete,
            )))
        })
    });
    // Reference: the flow module's SYN test on the same packet.
    g.bench_function("ref_is_tcp_syn_udp_1400", |b| {
        b.iter(|| black_box(mpt_proto::flow::is_tcp_syn(black_box(&udp[..]))))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = mpt_benches::criterion_config();
    targets = mss
}
criterion_main!(benches);
