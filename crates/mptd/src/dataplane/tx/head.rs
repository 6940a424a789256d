//! The head stage: each group of a batch (one connection, one path) gets
//! its headers written in front of the packets in place, is recorded for
//! repair while the peer asks for it, sends its redundancy copies, and is
//! queued for sealing.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use mpt_proto::repair::RepairHistory;
use mpt_proto::wire::{emit_flow_prefix, Flags, Header, MsgType, FLOW_PREFIX_LEN, HEADER_LEN};

use super::batch::{Prepared, TxBatch, NO_COPY, PACKET_OFFSET};
use super::conn::TxConn;
use super::seal::SealItem;
use super::stages::TxStages;
use crate::sync::lock_unpoisoned;

impl TxStages {
    /// Heads every group of the sorted plan into `batch.prepared` and
    /// `batch.seals`.
    pub(super) fn head_batch(&self, batch: &mut TxBatch, txc: &[TxConn], now: Instant) {
        batch.prepared.clear();
        batch.seals.clear();
        let mut at = 0;
        while at < batch.plan.len() {
            let key = batch.plan[at].group();
            let end = batch.plan[at..]
                .iter()
                .position(|e| e.group() != key)
                .map_or(batch.plan.len(), |off| at + off);
            let t = &txc[batch.plan[at].conn()];
            if let Some(p) = self.head_group(t, batch, (at, end), now) {
                batch.prepared.push(p);
            }
            at = end;
        }
    }

    /// Heads one group of packets bound for the same path (records them for
    /// repair, sends their redundancy copies) and queues them for sealing.
    /// Returns what sending the group needs, or `None` if it cannot be
    /// sent (counted).
    pub(super) fn head_group(
        &self,
        t: &TxConn,
        batch: &mut TxBatch,
        (start, end): (usize, usize),
        now: Instant,
    ) -> Option<Prepared> {
        let table = &*t.table;
        let group = &batch.plan[start..end];
        let seq_base = t.base;
        let pseq0 = t.path_bases.get(group[0].path()).copied().unwrap_or(0);
        let c = group[0].conn();
        let p = group[0].path();
        let conn = &self.conns[c];
        let count = group.len() as u64;
        let Some(path) = table.get(p) else {
            conn.drops.no_path.add(count);
            return None;
        };
        let Some(remote) = path.remote_via() else {
            conn.drops.no_remote.add(count);
            return None;
        };
        // The header names the connection, or (public-key sessions) the
        // peer's session index of the keys that seal.
        let (keys, conn_id) = match &conn.crypto {
            None => (None, conn.conn_id),
            Some(crypto) => match crypto.sealing(conn.conn_id) {
                Some((k, id)) => (Some(k), id),
                None => {
                    conn.drops.no_session.add(count);
                    return None;
                }
            },
        };
        let flags = if keys.is_some() {
            Flags::SEALED.with(Flags::FLOW)
        } else {
            Flags::FLOW
        };
        let ts = mpt_proto::timestamp_us(conn.epoch, now);
        // While the peer asks for repairs on this path, keep a copy of
        // each payload before it is sealed (one lock per group).
        let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
        let mut history = if path.repair_until_ns.load(Relaxed) > conn_ns {
            let mut g = lock_unpoisoned(&path.repair_history);
            if g.is_none() {
                *g = Some(RepairHistory::new(
                    crate::dataplane::repair::HISTORY_SLOTS,
                    FLOW_PREFIX_LEN + self.mtu,
                ));
            }
            Some(g)
        } else {
            // The peer stopped asking KEEP_COPIES ago: give the copies'
            // memory back (1.4 MiB per path at MTU 1400). Once per episode:
            // the first worker to clear the deadline does it; a request
            // meanwhile sets a new deadline and the exchange fails.
            let until = path.repair_until_ns.load(Relaxed);
            if until != 0
                && path
                    .repair_until_ns
                    .compare_exchange(until, 0, Relaxed, Relaxed)
                    .is_ok()
            {
                *lock_unpoisoned(&path.repair_history) = None;
            }
            None
        };
        for (k, entry) in group.iter().enumerate() {
            let i = entry.buf();
            let copy_via = match batch.copy_to[i] {
                NO_COPY => None,
                q => table.get(usize::from(q)),
            };
            let header = Header {
                msg_type: MsgType::Data,
                flags: if copy_via.is_some() {
                    flags.with(Flags::COPY)
                } else {
                    flags
                },
                path_id: p as u16,
                conn_id,
                seq: seq_base + u64::from(entry.rank()),
                path_seq: pseq0.wrapping_add(k as u32),
                timestamp_us: ts,
            };
            batch.counted[i] = false;
            // The buffer always has PACKET_OFFSET bytes in front of the packet.
            if header.emit(&mut batch.bufs[i][..HEADER_LEN]).is_err()
                || emit_flow_prefix(batch.gaps[i], &mut batch.bufs[i][HEADER_LEN..PACKET_OFFSET])
                    .is_err()
            {
                continue;
            }
            if let Some(h) = history.as_mut().and_then(|g| g.as_mut()) {
                h.record(
                    header.path_seq,
                    header.seq,
                    true,
                    &batch.bufs[i][HEADER_LEN..PACKET_OFFSET + batch.sizes[i]],
                );
            }
            if let Some(via) = copy_via {
                crate::dataplane::repair::send_copy(
                    conn,
                    via,
                    header.seq,
                    &batch.bufs[i][HEADER_LEN..PACKET_OFFSET + batch.sizes[i]],
                    keys.as_deref(),
                    now,
                    &mut batch.copy_buf,
                );
            }
            batch.counted[i] = true;
            if let Some(k) = &keys {
                // Each buffer has room for the tag after the packet.
                let b = &mut batch.bufs[i];
                batch.seals.push(SealItem {
                    buf: b.as_mut_ptr(),
                    cap: b.len(),
                    payload_len: FLOW_PREFIX_LEN + batch.sizes[i],
                    keys: Arc::as_ptr(k),
                    index: i,
                    ok: false,
                });
            }
        }
        drop(history);
        Some(Prepared {
            start,
            end,
            path: path.clone(),
            remote,
            keys,
            conn_ns,
        })
    }
}
