//! Stage 2 of the data plane: receive on a path → check → resequence →
//! write tun.
//!
//! One receive worker per connection, reading all of the connection's path
//! sockets in turn (a poll over them when all are empty). One worker per
//! connection, not per path: a connection's data must leave in sequence
//! order, and two workers sharing one resequencer starved each other on a
//! 2-core machine (gaps timed out while the other worker waited for the
//! lock). Connections scale across cores; see docs/ARCHITECTURE.md for
//! how a single connection's receive side will be split later.
//!
//! A batch is one `recvmmsg` on one socket. Each
//! datagram is checked (header, connection, inner IP packet) without
//! copying; probes and replies (a few per second) go to the control loop
//! through a bounded queue; everything else that fails is dropped and
//! counted by reason. Then, under the connection's resequencer lock (once
//! per batch), data is put back in connection-sequence order and written to
//! tun with `send_multiple`, which coalesces a flow's TCP segments into few
//! writes. Nothing received from the network can make this loop panic or
//! allocate.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::reorder::Resequencer;
use mpt_proto::wire::{check_ip_packet, Flags, Header, MsgType, HEADER_LEN};
use mpt_proto::{DecodeError, Transmit};
use tun_rs::{GROTable, SyncDevice, VIRTIO_NET_HDR_LEN};

use crate::state::{ConnShared, Counter};
use crate::udp::{RecvMeta, RECV_TIMEOUT};

/// Length of a receive buffer: with UDP GRO the kernel coalesces up to
/// 64 KB of datagrams into one message.
const RECV_LEN: usize = 65536;

/// Messages per `recvmmsg`: 32 coalesced messages of up to 64 KB (2 MB of
/// buffers per connection) drain a busy socket in one call.
const RECV_MESSAGES: usize = 32;

/// Room in front of a packet in a staging buffer for the virtio header the
/// tun writer puts there.
const STAGE_OFFSET: usize = VIRTIO_NET_HDR_LEN;

/// Capacity of a staging buffer: a coalesced TCP super-packet of up to
/// 64 KB is built in place in the first buffer of a flow.
const STAGE_CAPACITY: usize = STAGE_OFFSET + 65536;

/// Packets gathered for one tun write: tun-rs's ideal batch.
const STAGE_SLOTS: usize = tun_rs::IDEAL_BATCH_SIZE;

/// A probe or reply handed to the control loop.
#[derive(Debug, Clone, Copy)]
pub struct ControlDatagram {
    /// Connection index.
    pub conn: usize,
    /// Path index.
    pub path: usize,
    /// When it arrived.
    pub at: Instant,
    /// The datagram (probes and replies have a fixed size).
    pub bytes: [u8; Transmit::LEN],
}

/// Everything a receive worker needs.
pub struct RxWorker {
    /// The connection.
    pub conn: Arc<ConnShared>,
    /// Tun queue to write to.
    pub tun: Arc<SyncDevice>,
    /// Queue to the control loop.
    pub control: SyncSender<ControlDatagram>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
}

/// What one datagram of a batch turned out to be.
#[derive(Debug, Clone, Copy)]
enum Verdict {
    /// Data for tun with this connection sequence number.
    Data(u64),
    /// A valid sequence number without data for tun (probe, reply, bad
    /// inner packet): the resequencer must not wait for it.
    Skip(u64),
    /// Nothing to do with the sequence (dropped before trusting it).
    Drop,
}

/// Packets released in order, waiting to be written to tun.
struct Staging {
    bufs: Vec<Vec<u8>>,
    used: usize,
    gro: GROTable,
    errors_logged: u32,
}

impl Staging {
    fn new() -> Staging {
        Staging {
            bufs: (0..STAGE_SLOTS)
                .map(|_| Vec::with_capacity(STAGE_CAPACITY))
                .collect(),
            used: 0,
            gro: GROTable::default(),
            errors_logged: 0,
        }
    }

    fn push(&mut self, packet: &[u8], tun: &SyncDevice, errors: &Counter) {
        if self.used == self.bufs.len() {
            self.flush(tun, errors);
        }
        let b = &mut self.bufs[self.used];
        b.clear();
        b.resize(STAGE_OFFSET, 0);
        b.extend_from_slice(packet);
        self.used += 1;
    }

    fn flush(&mut self, tun: &SyncDevice, errors: &Counter) {
        if self.used == 0 {
            return;
        }
        if let Err(e) = tun.send_multiple(&mut self.gro, &mut self.bufs[..self.used], STAGE_OFFSET)
        {
            errors.add(1);
            if self.errors_logged < 10 {
                self.errors_logged += 1;
                tracing::warn!(error = %e, "tun write failed");
            }
        }
        self.used = 0;
    }
}

impl RxWorker {
    /// Runs until shutdown.
    pub fn run(self) {
        let conn = &*self.conn;
        let mut bufs: Vec<Vec<u8>> = (0..RECV_MESSAGES).map(|_| vec![0u8; RECV_LEN]).collect();
        let mut meta = [RecvMeta::default(); RECV_MESSAGES];
        let mut staging = Staging::new();
        let mut start = 0usize;
        while !self.shutdown.load(Relaxed) {
            let mut busy = false;
            // Read every path once per round, starting one further each
            // round so no path is always first.
            for k in 0..conn.paths.len() {
                let pi = (start + k) % conn.paths.len();
                let n = match conn.paths[pi].socket.recv_batch(&mut bufs, &mut meta) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        // ICMP errors surface here (port unreachable from a
                        // peer that is not up yet); they are not fatal.
                        tracing::trace!(conn = %conn.name, path = %conn.paths[pi].name, error = %e, "recv error");
                        continue;
                    }
                };
                busy = true;
                self.handle_batch(pi, &bufs[..n], &meta[..n], &mut staging);
            }
            start = start.wrapping_add(1);
            // One tun write per round over all paths: the larger the run of
            // in-order segments, the more the tun writer can coalesce.
            staging.flush(&self.tun, &conn.paths[0].tun_write_errors);
            if !busy {
                self.idle(&mut staging);
            }
        }
    }

    /// Checks, counts and resequences one batch received on path `pi`.
    fn handle_batch(&self, pi: usize, bufs: &[Vec<u8>], meta: &[RecvMeta], staging: &mut Staging) {
        let conn = &*self.conn;
        let path = &conn.paths[pi];
        let now = Instant::now();
        let (mut rx_packets, mut rx_bytes) = (0u64, 0u64);
        let mut highest: Option<u32> = None;
        let mut learnt_from = None;
        let errors = &path.tun_write_errors;
        let mut reseq = conn.lock_reseq();
        self.apply_timeout(&mut reseq);
        for (buf, m) in bufs.iter().zip(meta) {
            if m.truncated {
                conn.drops.malformed.add(1);
                continue;
            }
            for dgram in m.datagrams(buf) {
                match self.check(pi, dgram, now) {
                    Verdict::Data(seq) => {
                        rx_packets += 1;
                        rx_bytes += dgram.len() as u64;
                        let pseq = path_seq_of(dgram);
                        highest = Some(match highest {
                            Some(h) if seq_after(h, pseq) => h,
                            _ => pseq,
                        });
                        learnt_from = m.from.or(learnt_from);
                        reseq.insert(seq, pi, &dgram[HEADER_LEN..], now, |p| {
                            staging.push(p, &self.tun, errors)
                        });
                    }
                    Verdict::Skip(seq) => {
                        learnt_from = m.from.or(learnt_from);
                        reseq.skip(seq, pi, now, |p| staging.push(p, &self.tun, errors));
                    }
                    Verdict::Drop => {}
                }
            }
        }
        reseq.handle_timeout(now, |p| staging.push(p, &self.tun, errors));
        self.publish_deadline(&reseq);
        drop(reseq);
        if let Some(from) = learnt_from {
            if path.learn_remote(from) {
                tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address");
            }
        }
        if rx_packets > 0 {
            path.rx_data_packets.add(rx_packets);
            path.rx_packets.add(rx_packets);
            path.rx_bytes.add(rx_bytes);
            if let Some(h) = highest {
                path.rx_summary_highest.store(h, Relaxed);
            }
            path.rx_summary_packets
                .fetch_add(rx_packets as u32, Relaxed);
            let ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
            path.rx_summary_last_ns.store(ns, Relaxed);
        }
    }

    /// Checks one datagram; hands probes and replies to the control loop.
    fn check(&self, pi: usize, dgram: &[u8], now: Instant) -> Verdict {
        let conn = &*self.conn;
        let header = match Header::parse(dgram) {
            Ok((h, _)) => h,
            Err(DecodeError::TooShort { .. }) => {
                conn.drops.too_short.add(1);
                return Verdict::Drop;
            }
            Err(DecodeError::BadVersion { .. }) => {
                conn.drops.bad_version.add(1);
                return Verdict::Drop;
            }
            Err(_) => {
                conn.drops.malformed.add(1);
                return Verdict::Drop;
            }
        };
        if header.conn_id != conn.conn_id {
            conn.drops.unknown_connection.add(1);
            return Verdict::Drop;
        }
        if header.flags.contains(Flags::SEALED) {
            conn.drops.auth.add(1);
            return Verdict::Drop;
        }
        match header.msg_type {
            MsgType::Data => {
                if check_ip_packet(&dgram[HEADER_LEN..]).is_err() {
                    conn.drops.malformed.add(1);
                    return Verdict::Skip(header.seq);
                }
                Verdict::Data(header.seq)
            }
            MsgType::Probe | MsgType::ProbeReply => {
                let Ok(bytes) = <[u8; Transmit::LEN]>::try_from(dgram) else {
                    conn.drops.malformed.add(1);
                    return Verdict::Skip(header.seq);
                };
                let msg = ControlDatagram {
                    conn: conn.index,
                    path: pi,
                    at: now,
                    bytes,
                };
                match self.control.try_send(msg) {
                    Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                    Err(TrySendError::Full(_)) => conn.drops.control_queue_full.add(1),
                }
                Verdict::Skip(header.seq)
            }
            MsgType::Control | MsgType::HandshakeInit | MsgType::HandshakeResponse => {
                conn.drops.unsupported.add(1);
                Verdict::Drop
            }
        }
    }

    fn apply_timeout(&self, reseq: &mut Resequencer) {
        let t = Duration::from_micros(self.conn.reseq_timeout_us.load(Relaxed));
        if reseq.timeout() != t {
            reseq.set_timeout(t);
        }
    }

    fn publish_deadline(&self, reseq: &Resequencer) {
        let ns = reseq.poll_timeout().map_or(0, |t| {
            (t.saturating_duration_since(self.conn.epoch).as_nanos() as u64).max(1)
        });
        self.conn.reseq_deadline_ns.store(ns, Relaxed);
    }

    /// No datagram queued: release timed-out gaps, then sleep until data
    /// arrives, the next gap times out, or it is time to check shutdown.
    fn idle(&self, staging: &mut Staging) {
        let conn = &*self.conn;
        let errors = &conn.paths[0].tun_write_errors;
        let mut wait = RECV_TIMEOUT;
        let deadline_ns = conn.reseq_deadline_ns.load(Relaxed);
        if deadline_ns != 0 {
            let deadline = conn.epoch + Duration::from_nanos(deadline_ns);
            let now = Instant::now();
            if deadline <= now {
                let mut reseq = conn.lock_reseq();
                reseq.handle_timeout(now, |p| staging.push(p, &self.tun, errors));
                staging.flush(&self.tun, errors);
                self.publish_deadline(&reseq);
                return;
            }
            wait = wait.min(deadline - now);
        }
        if let Err(e) = crate::udp::wait_any_readable(conn.paths.iter().map(|p| &p.socket), wait) {
            tracing::debug!(conn = %conn.name, error = %e, "poll failed");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The path sequence number of a datagram already checked to have a header.
fn path_seq_of(dgram: &[u8]) -> u32 {
    match dgram.get(16..20).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
        Some(b) => u32::from_be_bytes(b),
        None => 0,
    }
}

fn seq_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && d < u32::MAX / 2
}
