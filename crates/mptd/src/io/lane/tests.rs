//! The steering program on real sockets: a SO_REUSEPORT group on
//! loopback, datagrams from a real client socket, and where each landed.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use super::*;
use crate::io::udp::RecvMeta;

const WORKERS: usize = 3;

/// A group of `WORKERS` worker sockets and the lane, on one loopback port.
fn group() -> (Vec<PathSocket>, PathSocket) {
    let first = PathSocket::bind_shared("127.0.0.1:0".parse().unwrap()).unwrap();
    let at = first.local_addr();
    let mut workers = vec![first];
    for _ in 1..WORKERS {
        workers.push(PathSocket::bind_shared(at).unwrap());
    }
    let lane = PathSocket::bind_shared(at).unwrap();
    attach(&lane, WORKERS as u32).expect("attach the steering program");
    (workers, lane)
}

/// A datagram of `len` bytes with the given first byte, path id and
/// connection id at their header offsets.
fn datagram(byte0: u8, path_id: u16, conn_id: u32, len: usize) -> Vec<u8> {
    let mut d = vec![0u8; len.max(8)];
    d[0] = byte0;
    d[2..4].copy_from_slice(&path_id.to_be_bytes());
    d[4..8].copy_from_slice(&conn_id.to_be_bytes());
    d.truncate(len);
    d
}

/// Every datagram queued at `s` now (waits a little for the first).
fn drain(s: &PathSocket) -> Vec<Vec<u8>> {
    let mut bufs = vec![vec![0u8; 2048]; 64];
    let mut meta = [RecvMeta::default(); 64];
    let mut out = Vec::new();
    let _ = s.wait_readable(Duration::from_millis(200));
    while let Ok(n) = s.recv_batch(&mut bufs, &mut meta) {
        for (b, m) in bufs.iter().zip(&meta).take(n) {
            out.extend(m.datagrams(b).map(<[u8]>::to_vec));
        }
        if n == 0 {
            break;
        }
    }
    out
}

fn send_all(to: SocketAddr, datagrams: &[Vec<u8>]) {
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in datagrams {
        client.send_to(d, to).unwrap();
    }
}

#[test]
fn initiations_go_to_the_lane_and_sessions_to_their_worker() {
    let (workers, lane) = group();
    let to = lane.local_addr();
    let mut sent = Vec::new();
    for conn in [7u32, 0x8000_0001, 0xdead_beef, 12345] {
        for path in 0..4u16 {
            // Data (type 1), probe (2) and feedback (8), version 1.
            for byte0 in [0x11, 0x12, 0x18] {
                sent.push(datagram(byte0, path, conn, 64));
            }
        }
    }
    let initiations: Vec<Vec<u8>> = (0..5u32).map(|k| datagram(0x1b, 0, k, 168)).collect();
    // One sender socket: without the program all of this would hash to
    // a single socket of the group.
    let mut all = sent.clone();
    all.extend(initiations.iter().cloned());
    send_all(to, &all);

    let got_lane = drain(&lane);
    assert_eq!(
        got_lane, initiations,
        "the lane holds exactly the initiations"
    );
    for (w, socket) in workers.iter().enumerate() {
        let want: Vec<Vec<u8>> = sent
            .iter()
            .filter(|d| {
                let path = u32::from(u16::from_be_bytes([d[2], d[3]]));
                let conn = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
                ((conn ^ path) as usize) % WORKERS == w
            })
            .cloned()
            .collect();
        assert!(!want.is_empty(), "the test spreads over every worker");
        assert_eq!(drain(socket), want, "worker {w}");
    }
}

#[test]
fn a_datagram_too_short_to_steer_goes_to_worker_zero() {
    let (workers, lane) = group();
    send_all(lane.local_addr(), &[vec![0x11, 0, 5], vec![0x1b]]);
    // The initiation's type byte alone is enough to steer it.
    assert_eq!(drain(&lane), vec![vec![0x1b]]);
    assert_eq!(drain(&workers[0]), vec![vec![0x11, 0, 5]]);
}

#[test]
fn a_full_lane_drops_and_counts_while_workers_still_get_their_datagrams() {
    let (workers, lane) = group();
    let before = kernel_drops(&lane).expect("SO_MEMINFO");
    let flood: Vec<Vec<u8>> = (0..20_000u32).map(|k| datagram(0x1b, 0, k, 168)).collect();
    let mut all = flood;
    all.push(datagram(0x11, 1, 0, 100));
    send_all(lane.local_addr(), &all);
    let drops = kernel_drops(&lane).expect("SO_MEMINFO") - before;
    assert!(
        drops > 0,
        "20 000 initiations unread overflow the lane's queue"
    );
    // conn 0 ^ path 1 = 1: worker 1, untouched by the flood.
    assert_eq!(drain(&workers[1]), vec![datagram(0x11, 1, 0, 100)]);
    assert_eq!(kernel_drops(&workers[1]), Some(0));
}

#[test]
fn the_program_is_ten_instructions_ending_in_returns() {
    let p = steering_program(4);
    assert_eq!(p.len(), 10);
    assert_eq!(p[9].k, 4, "the lane's index is the worker count");
    assert_eq!(p[7].k, 4, "sessions modulo the worker count");
    // A worker count of 0 is treated as 1 (never a division by zero).
    assert_eq!(steering_program(0)[7].k, 1);
}
