//! Stage 1 of the data plane: read tun → route → schedule → send.
//!
//! Each transmit worker owns one tun queue and its own schedulers, so the
//! only shared writes per batch are a handful of atomic adds (sequence
//! ranges and counters). A batch is one tun read (a TCP super-packet split
//! into up to [`tun_rs::IDEAL_BATCH_SIZE`] segments, or a single packet);
//! its packets are headed, grouped by path in their original order and
//! sent with one `sendmmsg` per path.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use mpt_proto::sched::{SchedPath, Scheduler, Weighted};
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};
use tun_rs::{InterruptEvent, SyncDevice, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

use crate::route::Router;
use crate::state::{ConnShared, Counter};

/// Where the IP packet starts in a transmit buffer: our header goes in
/// front of it, so the datagram is built in place without a copy.
const PACKET_OFFSET: usize = HEADER_LEN;

/// Daemon-wide counters of the transmit stage.
#[derive(Debug, Default)]
pub struct TxStats {
    /// Tun packets whose destination matches no connection.
    pub no_route: Counter,
    /// Tun read errors.
    pub tun_errors: Counter,
}

/// Everything a transmit worker needs.
pub struct TxWorker {
    /// The tun queue this worker reads.
    pub tun: Arc<SyncDevice>,
    /// All connections, by index.
    pub conns: Arc<Vec<Arc<ConnShared>>>,
    /// Destination → connection.
    pub router: Arc<Router>,
    /// Daemon-wide counters.
    pub stats: Arc<TxStats>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// Triggered on shutdown to wake the blocking read.
    pub wake: Arc<InterruptEvent>,
    /// Tun MTU, to size buffers.
    pub mtu: usize,
}

impl TxWorker {
    /// Runs until shutdown.
    pub fn run(self) {
        let seg_len = PACKET_OFFSET + self.mtu + 64;
        let mut original = vec![0u8; VIRTIO_NET_HDR_LEN + 65535];
        let mut bufs: Vec<Vec<u8>> = (0..IDEAL_BATCH_SIZE).map(|_| vec![0u8; seg_len]).collect();
        let mut sizes = vec![0usize; IDEAL_BATCH_SIZE];
        let mut scheds: Vec<Weighted> = self.conns.iter().map(|_| Weighted::new()).collect();
        let mut sched_params: Vec<Vec<SchedPath>> = self
            .conns
            .iter()
            .map(|c| Vec::with_capacity(c.paths.len()))
            .collect();
        let mut masks: Vec<u64> = vec![0; self.conns.len()];
        let mut plan: Vec<u64> = Vec::with_capacity(IDEAL_BATCH_SIZE);
        while !self.shutdown.load(Relaxed) {
            let n = match self.tun.recv_multiple_intr(
                &mut original,
                &mut bufs,
                &mut sizes,
                PACKET_OFFSET,
                &self.wake,
            ) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    self.stats.tun_errors.add(1);
                    tracing::debug!(error = %e, "tun read failed");
                    continue;
                }
            };
            // Per batch: a fresh view of weights and live paths.
            for (c, conn) in self.conns.iter().enumerate() {
                sched_params[c].clear();
                sched_params[c].extend(conn.paths.iter().map(|p| p.sched()));
                masks[c] = conn.eligible.load(Relaxed);
            }
            plan.clear();
            for (i, &size) in sizes.iter().enumerate().take(n) {
                let packet = &bufs[i][PACKET_OFFSET..PACKET_OFFSET + size];
                let Some(c) = self.router.lookup(packet) else {
                    self.stats.no_route.add(1);
                    continue;
                };
                match scheds[c].pick(&sched_params[c], masks[c]) {
                    // conn < 2^16, path < 64, i < 2^16: sorting the packed
                    // key groups by connection and path, keeping order.
                    Some(p) => plan.push(((c as u64) << 40) | ((p as u64) << 32) | i as u64),
                    None => self.conns[c].drops.no_path.add(1),
                }
            }
            plan.sort_unstable();
            let now = Instant::now();
            let mut at = 0;
            while at < plan.len() {
                let key = plan[at] >> 32;
                let end = plan[at..]
                    .iter()
                    .position(|k| k >> 32 != key)
                    .map_or(plan.len(), |off| at + off);
                self.send_group(&plan[at..end], &mut bufs, &sizes, now);
                at = end;
            }
        }
    }

    /// Heads and sends one group of packets bound for the same path.
    fn send_group(&self, group: &[u64], bufs: &mut [Vec<u8>], sizes: &[usize], now: Instant) {
        let c = (group[0] >> 40) as usize;
        let p = ((group[0] >> 32) & 0xff) as usize;
        let conn = &self.conns[c];
        let path = &conn.paths[p];
        let count = group.len() as u64;
        let Some((_, remote)) = path.remote() else {
            conn.drops.no_remote.add(count);
            return;
        };
        let seq0 = conn.seq.fetch_add(count, Relaxed);
        let pseq0 = path.path_seq.fetch_add(group.len() as u32, Relaxed);
        let ts = mpt_proto::timestamp_us(conn.epoch, now);
        let mut bytes = 0u64;
        for (k, &entry) in group.iter().enumerate() {
            let i = (entry & 0xffff_ffff) as usize;
            let header = Header {
                msg_type: MsgType::Data,
                flags: Flags::NONE,
                path_id: p as u16,
                conn_id: conn.conn_id,
                seq: seq0 + k as u64,
                path_seq: pseq0.wrapping_add(k as u32),
                timestamp_us: ts,
            };
            // The buffer always has PACKET_OFFSET bytes in front of the packet.
            if header.emit(&mut bufs[i][..PACKET_OFFSET]).is_err() {
                continue;
            }
            bytes += (PACKET_OFFSET + sizes[i]) as u64;
        }
        let mut sent_total = 0;
        for chunk in group.chunks(crate::udp::BATCH) {
            let (sent, failed) = path.socket.send_batch(
                &remote,
                chunk.iter().map(|&e| {
                    let i = (e & 0xffff_ffff) as usize;
                    &bufs[i][..PACKET_OFFSET + sizes[i]]
                }),
            );
            sent_total += sent;
            if failed > 0 {
                conn.drops.send_error.add(failed as u64);
                tracing::trace!(conn = %conn.name, path = %path.name, failed, "sendmmsg failures");
            }
        }
        path.tx_packets.add(sent_total as u64);
        path.tx_data_packets.add(sent_total as u64);
        path.tx_bytes.add(bytes);
    }
}
