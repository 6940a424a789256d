//! What a batch tells its path: the data it brought (counters and the
//! receive summary the control loop reports to the peer's scheduler) and
//! where it came from.
//!
//! Tallied per datagram in plain integers and published once per batch
//! (a few relaxed atomic adds and stores), after the resequencer lock is
//! released.

use mpt_proto::seq::{seq_after, seq_before};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use mpt_proto::wire::Header;

use crate::io::source::Source;
use crate::io::udp::RecvMeta;
use crate::plane::{ConnShared, PathShared};

/// A batch's tally.
#[derive(Debug, Default)]
pub struct Tally {
    /// Data (and repair) datagrams, and their wire bytes.
    packets: u64,
    bytes: u64,
    /// Highest path sequence number among them.
    highest: Option<u32>,
    /// Sender timestamp of the newest data datagram.
    newest_ts: Option<u32>,
    /// Lowest one-way delay of the data (from when the kernel took each
    /// message in).
    owd_min: Option<u32>,
    /// The source (and our address) of the last message with an
    /// authentic sequence number.
    heard_from: Option<(SocketAddr, Option<Source>)>,
}

impl Tally {
    /// A data datagram of `wire_len` bytes with `header`, in message `m`,
    /// which the kernel took in at `arrived_us` (wire clock).
    #[inline]
    pub fn data(&mut self, wire_len: usize, header: &Header, m: &RecvMeta, arrived_us: u32) {
        self.packets += 1;
        self.bytes += wire_len as u64;
        let ts = header.timestamp_us;
        self.newest_ts = Some(ts);
        let path_owd = arrived_us.wrapping_sub(ts);
        self.owd_min = Some(match self.owd_min {
            Some(m) if seq_before(m, path_owd) => m,
            _ => path_owd,
        });
        self.highest(header.path_seq);
        self.heard(m);
    }

    /// A repair of `wire_len` bytes with `header`, in message `m`.
    #[inline]
    pub fn repair(&mut self, wire_len: usize, header: &Header, m: &RecvMeta) {
        self.packets += 1;
        self.bytes += wire_len as u64;
        self.highest(header.path_seq);
        self.heard(m);
    }

    /// Any datagram with an authentic sequence number, in message `m`.
    #[inline]
    pub fn heard(&mut self, m: &RecvMeta) {
        self.heard_from = m.from.map(|f| (f, m.to)).or(self.heard_from);
    }

    fn highest(&mut self, path_seq: u32) {
        self.highest = Some(match self.highest {
            Some(h) if seq_after(h, path_seq) => h,
            _ => path_seq,
        });
    }

    /// Where the batch's authentic datagrams came from, if any said.
    pub fn heard_from(&self) -> Option<(SocketAddr, Option<Source>)> {
        self.heard_from
    }

    /// Adds the tally to `path`'s counters and receive summary (nothing
    /// if the batch brought no data).
    pub fn publish(&self, conn: &ConnShared, path: Option<&PathShared>, now: Instant) {
        let Some(path) = path.filter(|_| self.packets > 0) else {
            return;
        };
        path.rx_data_packets.add(self.packets);
        path.rx_packets.add(self.packets);
        path.rx_bytes.add(self.bytes);
        path.rx_data_bytes.add(self.bytes);
        if let Some(h) = self.highest {
            path.rx_summary_highest.store(h, Relaxed);
        }
        if let Some(ts) = self.newest_ts {
            path.rx_summary_timestamp.store(ts, Relaxed);
        }
        if let Some(owd) = self.owd_min {
            path.note_owd(owd);
        }
        path.rx_summary_bytes.fetch_add(self.bytes, Relaxed);
        path.rx_summary_packets
            .fetch_add(self.packets as u32, Relaxed);
        let ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
        path.rx_summary_last_ns.store(ns, Relaxed);
    }
}
