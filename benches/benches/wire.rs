//! Per-packet cost of the wire format: a data datagram's header emitted
//! into a caller-owned buffer, parsed back and its inner packet checked
//! (what the send and receive paths do for every packet), each step alone
//! (`data_header_emit`, `data_header_parse`, `inner_packet_check`) and the
//! three in turn; and a keepalive body's emit and parse.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpt_benches::{data_header, ipv4_packet, PACKET_LEN};
use mpt_proto::wire::{check_ip_packet, Header, Keepalive, PathReport, HEADER_LEN};

fn wire(c: &mut Criterion) {
    let mut g = c.benchmark_group("wire");
    g.throughput(Throughput::Elements(1));

    // The datagram buffer the data plane owns: the inner packet sits after
    // the header, as if read from tun straight into place.
    let mut buf = vec![0u8; HEADER_LEN + PACKET_LEN];
    buf[HEADER_LEN..].copy_from_slice(&ipv4_packet(PACKET_LEN));
    let mut seq = 0u64;
    g.bench_function("data_header_emit_parse_check_1400", |b| {
        b.iter(|| {
            seq += 1;
            let header = data_header(seq, (seq & 1) as u16);
            header
                .emit(black_box(&mut buf[..]))
                .expect("buffer fits a header");
            let (parsed, payload) = Header::parse(black_box(&buf[..])).expect("valid header");
            check_ip_packet(payload).expect("valid inner packet");
            black_box((parsed, payload.len()))
        })
    });

    // The three steps alone, on the same buffer.
    let mut seq = 0u64;
    g.bench_function("data_header_emit", |b| {
        b.iter(|| {
            seq += 1;
            data_header(black_box(seq), (seq & 1) as u16)
                .emit(black_box(&mut buf[..]))
                .expect("buffer fits a header");
        })
    });
    g.bench_function("data_header_parse", |b| {
        b.iter(|| {
            let (parsed, payload) = Header::parse(black_box(&buf[..])).expect("valid header");
            black_box((parsed, payload.len()))
        })
    });
    let inner = &buf[HEADER_LEN..];
    g.bench_function("inner_packet_check_1400", |b| {
        b.iter(|| check_ip_packet(black_box(inner)).expect("valid inner packet"))
    });

    let mut kbuf = [0u8; Keepalive::LEN];
    let mut n = 0u32;
    g.bench_function("keepalive_emit_parse", |b| {
        b.iter(|| {
            n = n.wrapping_add(1);
            let k = Keepalive {
                echo_timestamp_us: n,
                echo_path_seq: n ^ 0x55,
                report: PathReport {
                    rx_packets: n,
                    rx_highest_path_seq: n.wrapping_add(3),
                    weight_in: 1,
                    hears_you: n & 1 == 0,
                },
            };
            k.emit(black_box(&mut kbuf[..]))
                .expect("buffer fits a keepalive");
            black_box(Keepalive::parse(black_box(&kbuf[..])).expect("valid keepalive"))
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = mpt_benches::criterion_config();
    targets = wire
}
criterion_main!(benches);
