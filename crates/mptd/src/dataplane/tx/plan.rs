//! The plan stage: each packet of a batch routed to its connection, given
//! a path by the connection's scheduler (and a second path for a
//! redundancy copy), then numbered: connection and path sequence numbers
//! and a ticket in the connection's send order, taken at once per
//! connection; flow predecessors in tun order; the batch's transmission
//! time charged to the paths' shared clocks. Before a packet is routed,
//! a TCP SYN gets its MSS option lowered to what fits the tunnel
//! (`[tunnel] mss_clamp`, see [`mpt_proto::mss`]), so both ends of every
//! TCP connection through the tunnel send segments that fit whether or
//! not path-MTU discovery works.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use mpt_proto::flow::flow_hash;
use mpt_proto::mss::{clamp_mss, Checksum, Clamp};
use mpt_proto::sched::PathModel;

use super::batch::{PlanEntry, TxBatch, NO_COPY, PACKET_OFFSET};
use super::conn::TxConn;
use super::stages::TxStages;

impl TxStages {
    /// Routes and schedules the batch's `n` packets into `batch.plan`
    /// (dropped and counted: no route, no path).
    pub(super) fn plan_batch(
        &self,
        batch: &mut TxBatch,
        txc: &mut [TxConn],
        n: usize,
        now: Instant,
    ) {
        batch.batch_no = batch.batch_no.wrapping_add(1);
        batch.touched.clear();
        batch.plan.clear();
        for i in 0..n {
            let size = batch.sizes[i];
            let packet = &mut batch.bufs[i][PACKET_OFFSET..PACKET_OFFSET + size];
            let Some(c) = self.router.lookup(packet) else {
                self.stats.no_route.add(1);
                continue;
            };
            let conn = &self.conns[c];
            if self.mss_clamp {
                self.clamp(packet, conn);
            }
            let packet = &*packet;
            let t = &mut txc[c];
            if t.stamp != batch.batch_no {
                t.begin_batch(conn, batch.batch_no, now);
                batch.touched.push(c);
            }
            let hash = flow_hash(packet);
            batch.hashes[i] = hash;
            let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
            let pick = match conn.leg_pin.path(packet) {
                Some(p) if t.mask & (1u64 << (p & 63)) != 0 => Some(t.pin(conn, p, size)),
                _ => t.pick(conn, hash, packet, size, conn_ns),
            };
            batch.copy_to[i] = NO_COPY;
            if let Some(p) = pick {
                if t.wants_copy(hash, packet, conn_ns) {
                    batch.copy_to[i] = second_path(&t.models, t.mask, p);
                }
            }
            match pick {
                Some(p) => {
                    // Key: connection, path, then the packet's rank among
                    // its connection's packets in tun order, then its
                    // buffer. Sorting groups by path while keeping tun
                    // order; the rank becomes the connection sequence
                    // number, so the peer's resequencer restores tun
                    // order, not path order.
                    batch.plan.push(PlanEntry::new(c, p, t.count, i));
                    t.count += 1;
                    if let Some(n) = t.path_counts.get_mut(p) {
                        *n += 1;
                    }
                }
                None => conn.drops.no_path.add(1),
            }
        }
    }

    /// Numbers the batch: connection and path sequence numbers and a
    /// ticket in the connection's send order, at once (see
    /// `crate::plane::tx_order`). In ascending connection order, as the
    /// sends.
    pub(super) fn number(&self, batch: &mut TxBatch, txc: &mut [TxConn]) {
        batch.touched.sort_unstable();
        for &c in &batch.touched {
            let t = &mut txc[c];
            let count = t.count;
            if count == 0 {
                t.base = 0;
                continue;
            }
            let conn = &self.conns[c];
            let (table, per_path, firsts) = (&t.table, &t.path_counts, &mut t.path_bases);
            let (ticket, base) = conn.tx_order.allocate(|| {
                firsts.clear();
                firsts.extend(
                    per_path
                        .iter()
                        .enumerate()
                        .map(|(p, &n)| match table.get(p) {
                            Some(path) if n > 0 => path.path_seq.fetch_add(n, Relaxed),
                            _ => 0,
                        }),
                );
                conn.seq.fetch_add(u64::from(count), Relaxed)
            });
            t.ticket = ticket;
            t.base = base;
        }
        // Flow predecessors, in tun (= sequence) order.
        for e in &batch.plan {
            let t = &mut txc[e.conn()];
            let seq = t.base + u64::from(e.rank());
            batch.gaps[e.buf()] = t.flows().order.gap(batch.hashes[e.buf()], seq);
        }
    }

    /// Lowers the MSS option of `packet` when it is a TCP SYN announcing
    /// more than fits the tunnel, counted on `conn`.
    ///
    /// The checksum is complete here: tun-rs's offload read finishes a
    /// partial one (`VIRTIO_NET_HDR_F_NEEDS_CSUM`) before handing the
    /// packet over, and computes each segment's when it splits a TCP
    /// super-packet, so the incremental update applies.
    #[inline]
    fn clamp(&self, packet: &mut [u8], conn: &crate::plane::ConnShared) {
        let mtu = u16::try_from(self.mtu).unwrap_or(u16::MAX);
        if let Clamp::Lowered { from, to } = clamp_mss(packet, mtu, Checksum::Complete) {
            conn.tcp.mss_clamped.add(1);
            tracing::trace!(conn = %conn.name, from, to, "MSS clamped");
        }
    }

    /// Adds what this batch charged to the paths' shared clocks.
    pub(super) fn charge(&self, batch: &TxBatch, txc: &[TxConn], now: Instant) {
        for &c in &batch.touched {
            let t = &txc[c];
            if t.charged.iter().all(|&ns| ns == 0) {
                continue;
            }
            let conn = &self.conns[c];
            let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
            for p in t.table.iter() {
                if let Some(&ns) = t.charged.get(p.id).filter(|&&ns| ns > 0) {
                    let cap = t.models.get(p.id).map_or(0, |m| m.cap_ns);
                    p.model.charge(conn_ns, ns, cap.saturating_mul(2));
                }
            }
        }
    }
}
/// The path for a redundancy copy of a packet going on `picked`: the
/// eligible other path with the least one-way delay (the lowest id when
/// there is no model, under `weighted`), or [`NO_COPY`].
pub(super) fn second_path(models: &[PathModel], mask: u64, picked: usize) -> u8 {
    let mut best: Option<(u64, usize)> = None;
    for id in 0..64usize {
        if id == picked || mask & (1u64 << id) == 0 {
            continue;
        }
        let owd = models.get(id).map_or(0, |m| m.owd_ns);
        if best.is_none_or(|(b, _)| owd < b) {
            best = Some((owd, id));
        }
    }
    best.and_then(|(_, id)| u8::try_from(id).ok())
        .unwrap_or(NO_COPY)
}
