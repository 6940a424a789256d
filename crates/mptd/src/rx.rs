//! Stage 2 of the data plane: receive on a path → check → write tun.
//!
//! One receive worker per path socket. A batch is one `recvmmsg`; data
//! datagrams are checked (header, connection, inner IP packet), moved to
//! the front of the batch and written to tun with one `send_multiple`,
//! which coalesces the TCP segments of a flow into few writes. Probes and
//! replies (a few per second) go to the control loop through a bounded
//! queue; everything else is dropped and counted by reason. Nothing
//! received from the network can make this loop panic or allocate.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Instant;

use mpt_proto::wire::{check_ip_packet, Header, MsgType, HEADER_LEN, MAX_DATAGRAM};
use mpt_proto::{DecodeError, Transmit};
use tun_rs::{GROTable, SyncDevice};

use crate::state::ConnShared;
use crate::udp::{RecvMeta, BATCH};

/// Capacity of a receive buffer: the largest datagram, or a coalesced TCP
/// super-packet of up to 64 KB built in place by the tun writer.
const BUF_CAPACITY: usize = 65536 + HEADER_LEN;

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
    /// Path index.
    pub path: usize,
    /// Tun queue to write to.
    pub tun: Arc<SyncDevice>,
    /// Queue to the control loop.
    pub control: SyncSender<ControlDatagram>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
}

impl RxWorker {
    /// Runs until shutdown.
    pub fn run(self) {
        let conn = &*self.conn;
        let path = &conn.paths[self.path];
        let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; BUF_CAPACITY]).collect();
        let mut meta = [RecvMeta::default(); BATCH];
        let mut gro = GROTable::default();
        let mut tun_errors_logged = 0u32;
        while !self.shutdown.load(Relaxed) {
            for b in bufs.iter_mut() {
                restore_len(b);
            }
            let n = match path.socket.recv_batch(&mut bufs, &mut meta) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => {
                    // ICMP errors surface here (port unreachable from a
                    // peer that is not up yet); they are not fatal.
                    tracing::trace!(conn = %conn.name, path = %path.name, error = %e, "recv error");
                    continue;
                }
            };
            let now = Instant::now();
            let mut data = 0usize;
            let (mut rx_packets, mut rx_bytes) = (0u64, 0u64);
            let mut highest: Option<u32> = None;
            let mut learnt_from = None;
            for i in 0..n {
                let m = meta[i];
                if m.truncated || m.len > MAX_DATAGRAM {
                    conn.drops.malformed.add(1);
                    continue;
                }
                let dgram = &bufs[i][..m.len];
                let header = match Header::parse(dgram) {
                    Ok((h, _)) => h,
                    Err(DecodeError::TooShort { .. }) => {
                        conn.drops.too_short.add(1);
                        continue;
                    }
                    Err(DecodeError::BadVersion { .. }) => {
                        conn.drops.bad_version.add(1);
                        continue;
                    }
                    Err(_) => {
                        conn.drops.malformed.add(1);
                        continue;
                    }
                };
                if header.conn_id != conn.conn_id {
                    conn.drops.unknown_connection.add(1);
                    continue;
                }
                if header.flags.contains(mpt_proto::wire::Flags::SEALED) {
                    conn.drops.auth.add(1);
                    continue;
                }
                match header.msg_type {
                    MsgType::Data => {
                        if check_ip_packet(&dgram[HEADER_LEN..]).is_err() {
                            conn.drops.malformed.add(1);
                            continue;
                        }
                        rx_packets += 1;
                        rx_bytes += m.len as u64;
                        highest = Some(match highest {
                            Some(h) if seq_after(h, header.path_seq) => h,
                            _ => header.path_seq,
                        });
                        bufs[i].truncate(m.len);
                        bufs.swap(i, data);
                        data += 1;
                    }
                    MsgType::Probe | MsgType::ProbeReply => {
                        let Ok(bytes) = <[u8; Transmit::LEN]>::try_from(dgram) else {
                            conn.drops.malformed.add(1);
                            continue;
                        };
                        let msg = ControlDatagram {
                            conn: conn.index,
                            path: self.path,
                            at: now,
                            bytes,
                        };
                        match self.control.try_send(msg) {
                            Ok(()) => {}
                            Err(TrySendError::Full(_)) => conn.drops.control_queue_full.add(1),
                            Err(TrySendError::Disconnected(_)) => return,
                        }
                    }
                    MsgType::Control | MsgType::HandshakeInit | MsgType::HandshakeResponse => {
                        conn.drops.unsupported.add(1);
                        continue;
                    }
                }
                learnt_from = m.from.or(learnt_from);
            }
            if let Some(from) = learnt_from {
                if path.learn_remote(from) {
                    tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address");
                }
            }
            if data > 0 {
                if let Err(e) = self.tun.send_multiple(&mut gro, &mut bufs[..data], HEADER_LEN) {
                    if tun_errors_logged < 10 {
                        tun_errors_logged += 1;
                        tracing::warn!(conn = %conn.name, path = %path.name, error = %e, "tun write failed");
                    }
                }
                path.rx_data_packets.add(rx_packets);
                path.rx_packets.add(rx_packets);
                path.rx_bytes.add(rx_bytes);
                if let Some(h) = highest {
                    path.rx_summary_highest.store(h, Relaxed);
                }
                path.rx_summary_packets.fetch_add(rx_packets as u32, Relaxed);
                let ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
                path.rx_summary_last_ns.store(ns, Relaxed);
            }
        }
    }
}

/// Length a buffer is given for `recvmmsg`: one byte more than the largest
/// datagram we accept, so an oversized one shows up as truncated.
const RECV_LEN: usize = MAX_DATAGRAM + 1;

/// Gives a buffer its receive length back after a batch shortened it.
fn restore_len(b: &mut Vec<u8>) {
    debug_assert!(b.capacity() >= BUF_CAPACITY);
    if b.len() != RECV_LEN {
        // SAFETY: every buffer is created as `vec![0; BUF_CAPACITY]`, so all
        // BUF_CAPACITY bytes were initialised once; since then it is only
        // truncated (which leaves the bytes in place) or grown in place by
        // the tun writer (which writes what it adds). RECV_LEN <=
        // BUF_CAPACITY <= capacity, so the bytes up to RECV_LEN are
        // initialised `u8`s. This avoids a memset of up to 8 KB per
        // datagram that `resize` would cost.
        unsafe { b.set_len(RECV_LEN) };
    }
}

fn seq_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && d < u32::MAX / 2
}
