//! GSO aggregates through the real wire: with TSO/GSO on at the sending
//! endpoint, the wire receives TCP aggregates of many segments, cuts them
//! in software (module `gso`) and paces every segment as a packet. The
//! transfer must arrive intact (a wrong length or sequence number corrupts
//! or stalls it), no faster than the link's rate, and no frame may leave
//! whole. (veth trusts a partial checksum without looking at it, so the
//! checksums are checked by `gso`'s unit tests, which complete them the
//! way a NIC would.)
//!
//! Needs root (namespaces, packet sockets); CI runs as root. About 1 s.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mpt_emu::model::LinkConfig;
use mpt_emu::netns::{Testbed, A_IF, B_IP, M_A_IF, M_B_IF};
use mpt_emu::sys;
use mpt_emu::wire::{Wire, WireConfig};

const PORT: u16 = 47_100;
const BYTES: usize = 8 << 20;
const RATE: u64 = 200_000_000;

fn pattern(i: usize) -> u8 {
    (i * 131 + i / 4093) as u8
}

#[test]
fn gso_aggregates_are_cut_and_paced_per_segment() {
    if !sys::is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let bed = Testbed::build("gso").unwrap_or_else(|e| panic!("testbed: {e}"));
    // The sender's offloads back on: its TCP hands the veth 64 KiB lumps.
    bed.a
        .run(|| sys::set_offloads(A_IF, true))
        .unwrap_or_else(|e| panic!("offloads on: {e}"));
    let wire = Wire::start(WireConfig {
        a: M_A_IF.into(),
        b: M_B_IF.into(),
        netns: Some(bed.m.name().to_string()),
        a_to_b: LinkConfig {
            rate: Some(RATE),
            ..LinkConfig::default()
        },
        b_to_a: LinkConfig::default(),
        seed: 1,
        disable_offloads: false,
        realtime_priority: None,
    })
    .unwrap_or_else(|e| panic!("wire: {e}"));

    let listener = bed
        .b
        .run(|| TcpListener::bind((B_IP, PORT)))
        .unwrap_or_else(|e| panic!("listen: {e}"));
    let reader = std::thread::spawn(move || -> std::io::Result<(usize, Option<usize>)> {
        let (mut s, _) = listener.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let (mut n, mut bad) = (0usize, None);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let got = match s.read(&mut buf) {
                // A timed read is not restarted after a signal.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                got => got?,
            };
            if got == 0 {
                return Ok((n, bad));
            }
            for (k, b) in buf[..got].iter().enumerate() {
                if bad.is_none() && *b != pattern(n + k) {
                    bad = Some(n + k);
                }
            }
            n += got;
        }
    });
    let to: SocketAddr = format!("{B_IP}:{PORT}")
        .parse()
        .unwrap_or_else(|e| panic!("address: {e}"));
    let mut tx = bed
        .a
        .run(move || TcpStream::connect_timeout(&to, Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let data: Vec<u8> = (0..BYTES).map(pattern).collect();
    let t0 = Instant::now();
    tx.write_all(&data).unwrap_or_else(|e| panic!("send: {e}"));
    tx.shutdown(Shutdown::Write)
        .unwrap_or_else(|e| panic!("shutdown: {e}"));
    let (n, bad) = reader
        .join()
        .unwrap_or_else(|_| panic!("reader panicked"))
        .unwrap_or_else(|e| panic!("receive: {e}"));
    let took = t0.elapsed();
    let report = wire.stop().unwrap_or_else(|e| panic!("wire: {e}"));
    let d = &report.a_to_b;
    assert_eq!(n, BYTES, "bytes received");
    assert_eq!(bad, None, "first corrupt byte");
    assert!(d.gso_frames > 0, "no aggregate reached the wire: {d:?}");
    assert_eq!(d.gso_whole, 0, "aggregates forwarded whole: {d:?}");
    assert!(
        d.gso_segments >= 2 * d.gso_frames,
        "segments per aggregate: {d:?}"
    );
    // Every frame that left is at most one MTU-sized packet.
    assert!(
        d.tx_frames as f64 >= BYTES as f64 / 1500.0,
        "{} frames for {BYTES} B",
        d.tx_frames
    );
    assert!(
        d.tx_bytes <= d.tx_frames * 1514,
        "an aggregate left whole: {d:?}"
    );
    // Paced per segment: the transfer cannot beat the link rate.
    let floor = Duration::from_secs_f64(BYTES as f64 * 8.0 / RATE as f64 * 0.95);
    assert!(
        took >= floor,
        "{BYTES} B in {took:?}, faster than {RATE} bit/s"
    );
    drop(bed);
}
