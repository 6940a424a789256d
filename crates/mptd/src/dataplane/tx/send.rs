//! The send stage: each connection's groups when its turn in the send
//! order has come (so every path stays FIFO across workers), each group in
//! runs of equal-sized datagrams, one GSO send per run.

use std::io;
use std::sync::atomic::Ordering::Relaxed;

use mpt_proto::crypto::TAG_LEN;

use super::batch::{PlanEntry, Prepared, TxBatch, MAX_GSO_BYTES, MAX_GSO_SEGMENTS, PACKET_OFFSET};
use super::conn::TxConn;
use super::stages::TxStages;

impl TxStages {
    /// Sends, connection by connection in ascending order, each when its
    /// turn has come to this batch's ticket; every ticket taken is ended,
    /// whether anything was sent or not.
    pub(super) fn send_batch(&self, batch: &mut TxBatch, txc: &[TxConn]) {
        let mut next = 0;
        for &c in &batch.touched {
            let t = &txc[c];
            if t.count == 0 {
                continue;
            }
            let order = &self.conns[c].tx_order;
            order.wait_turn(t.ticket);
            while let Some(p) = batch
                .prepared
                .get(next)
                .filter(|p| batch.plan[p.start].conn() == c)
            {
                self.send_group(p, batch);
                next += 1;
            }
            order.done(t.ticket);
        }
        debug_assert_eq!(
            next,
            batch.prepared.len(),
            "a group outside the batch's connections"
        );
        batch.prepared.clear();
    }

    /// Sends one headed (and sealed) group of packets bound for the same
    /// path, in GSO runs.
    fn send_group(&self, prepared: &Prepared, batch: &TxBatch) {
        let (bufs, sizes, counted) = (&batch.bufs, &batch.sizes, &batch.counted);
        let group = &batch.plan[prepared.start..prepared.end];
        let conn = &self.conns[group[0].conn()];
        let path = &*prepared.path;
        let remote = &prepared.remote;
        let conn_ns = prepared.conn_ns;
        let tag = if prepared.keys.is_some() { TAG_LEN } else { 0 };
        let bytes: u64 = group
            .iter()
            .filter(|e| counted[e.buf()])
            .map(|e| (PACKET_OFFSET + sizes[e.buf()] + tag) as u64)
            .sum();
        // Send runs of equal-sized datagrams (the last of a run may be
        // shorter) as one GSO send each; the segments of one TCP
        // super-packet all have the same size, so a run is usually the
        // whole group.
        let mut sent_total = 0;
        let mut at = 0;
        while at < group.len() {
            let len_of = |e: PlanEntry| PACKET_OFFSET + sizes[e.buf()] + tag;
            let segment = len_of(group[at]);
            let mut end = at + 1;
            let mut total = segment;
            while end < group.len() && end - at < MAX_GSO_SEGMENTS {
                let l = len_of(group[end]);
                if l > segment || total + l > MAX_GSO_BYTES {
                    break;
                }
                total += l;
                end += 1;
                if l < segment {
                    break;
                }
            }
            // The datagrams stay in their own buffers: the kernel gathers
            // them (one copy fewer per byte than assembling them first).
            let mut parts = [io::IoSlice::new(&[]); MAX_GSO_SEGMENTS];
            for (part, e) in parts.iter_mut().zip(&group[at..end]) {
                let i = e.buf();
                *part = io::IoSlice::new(&bufs[i][..PACKET_OFFSET + sizes[i] + tag]);
            }
            match path
                .socket
                .send_datagrams(&remote.sock, remote.via.as_ref(), &parts[..end - at])
            {
                Ok(n) => {
                    sent_total += n;
                    conn.drops
                        .send_error
                        .add((end - at - n.min(end - at)) as u64);
                }
                Err(e) => {
                    conn.drops.send_error.add((end - at) as u64);
                    tracing::trace!(conn = %conn.name, path = %path.name, error = %e, "send failed");
                }
            }
            at = end;
        }
        path.tx_packets.add(sent_total as u64);
        path.tx_data_packets.add(sent_total as u64);
        if sent_total > 0 {
            path.tx_data_last_ns.store(conn_ns.max(1), Relaxed);
        }
        path.tx_bytes.add(bytes);
        path.tx_data_bytes.add(bytes);
    }
}
