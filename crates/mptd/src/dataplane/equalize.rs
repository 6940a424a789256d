//! Delay equalisation: a connection's data leaves at one steady delay.
//!
//! Over paths of unlike delay (a satellite beside DSL) a flow's packets
//! arrive early or late depending on the path they took, and whether a
//! packet on the fast path must wait in the resequencer depends on whether
//! a predecessor happens to be on the slow path. A TCP sender then sees
//! RTTs from 25 ms to 600 ms within one flow. BBR sizes its window by the
//! shortest RTT it saw and starves; CUBIC's HyStart leaves slow start at
//! the first jump. So the receiver holds each data datagram until the
//! one-way delay of the slowest primary path that is up and either near
//! the fastest or carrying data (a far path counts for full-size datagrams
//! and TCP SYNs whether it carries data or not; see
//! `mpt_proto::session::timing::equalize_target` for which and why): every packet leaves
//! about `timestamp + slowest delay`, and the tunnel looks like one path of
//! the summed capacity and the slowest path's delay. (On like paths the
//! holds are below a millisecond and skipped.)
//!
//! Datagrams wait here before the resequencer, in one FIFO per path: on a
//! path, later datagrams are due later, so a FIFO per path keeps them in
//! order, and releasing the earliest head across paths merges them in
//! send order. Memory is fixed per path (allocated when the path first
//! holds something); a full FIFO releases its head early. A datagram is
//! copied into the lowest free buffer of its path (a free stack), not into
//! the buffer of its place in the ring, and the storage grows by doubling
//! only when a higher buffer is needed: it is as large as the most
//! datagrams the path ever held at once, at most the FIFO.

use std::time::{Duration, Instant};

/// Holds shorter than this are not worth it (like paths, jitter); the
/// timing policy sets no target below it.
pub use mpt_proto::session::timing::MIN_HOLD;

/// Longest hold.
pub const MAX_HOLD: Duration = Duration::from_secs(1);

/// What the receive worker needs of a held datagram besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Connection sequence number.
    pub seq: u64,
    /// With the FLOW flag: the flow predecessor (`Some(None)`: none).
    pub flow: Option<Option<u64>>,
    /// Path it arrived on.
    pub path: usize,
    /// What it is for the resequencer.
    pub kind: Kind,
}

/// What a queued entry is for the resequencer. Sequence numbers without
/// data (probes, feedback, a repair's own number) queue behind their
/// path's held data too: marking one done moves the path's mark in the
/// resequencer's loss proof, which must not pass data still held here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Data to deliver.
    Data,
    /// A repair's copy of lost data (the resequencer is told).
    Repair,
    /// A sequence number without data.
    Skip,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    meta: Meta,
    release: Instant,
    len: usize,
    /// The storage buffer holding it.
    buf: u32,
}

#[derive(Debug)]
struct Fifo {
    slots: Vec<Option<Slot>>,
    storage: Vec<u8>,
    /// Buffers of `storage` not holding a datagram, lowest on top.
    free: Vec<u32>,
    head: usize,
    count: usize,
}

/// Per-path FIFOs of datagrams waiting for their release time.
#[derive(Debug)]
pub struct DelayLine {
    fifos: Vec<Option<Fifo>>,
    slots_per_path: usize,
    slot_len: usize,
    /// Datagrams released before their time because a FIFO was full.
    pub overflows: u64,
    /// When a datagram was last queued (for [`DelayLine::release_idle`]).
    last_push: Option<Instant>,
}

impl DelayLine {
    /// A delay line holding up to `slots_per_path` datagrams of at most
    /// `slot_len` bytes per path.
    pub fn new(slots_per_path: usize, slot_len: usize) -> DelayLine {
        DelayLine {
            fifos: Vec::new(),
            slots_per_path: slots_per_path.max(1),
            slot_len,
            overflows: 0,
            last_push: None,
        }
    }

    /// Gives the FIFOs' storage back when nothing is held and nothing was
    /// for `STORAGE_IDLE_RELEASE` (as the resequencer does).
    pub fn release_idle(&mut self, now: Instant) {
        let idle = self.last_push.is_none_or(|t| {
            now.saturating_duration_since(t) >= mpt_proto::reorder::STORAGE_IDLE_RELEASE
        });
        if idle {
            for f in self.fifos.iter_mut().flatten() {
                if f.count == 0 && !f.storage.is_empty() {
                    f.storage = Vec::new();
                    // Every buffer is free: lowest on top again.
                    let n = f.free.len();
                    for (i, b) in f.free.iter_mut().enumerate() {
                        *b = (n - 1 - i) as u32;
                    }
                }
            }
        }
    }

    /// Bytes of storage allocated now.
    pub fn storage_bytes(&self) -> usize {
        self.fifos.iter().flatten().map(|f| f.storage.len()).sum()
    }

    /// Whether path `path` has datagrams waiting.
    pub fn holds(&self, path: usize) -> bool {
        self.fifos
            .get(path)
            .and_then(Option::as_ref)
            .is_some_and(|f| f.count > 0)
    }

    /// Queues `payload` on `path` until `release`. A datagram that needs
    /// no hold and finds its path's FIFO empty, or does not fit a slot, is
    /// handed straight to `deliver` (after, in the latter case, what its
    /// path holds). A full FIFO first releases its head.
    pub fn push(
        &mut self,
        release: Instant,
        meta: Meta,
        payload: &[u8],
        now: Instant,
        mut deliver: impl FnMut(Meta, &[u8]),
    ) {
        let path = meta.path;
        if release <= now && !self.holds(path) {
            deliver(meta, payload);
            return;
        }
        if payload.len() > self.slot_len {
            self.drain_path(path, &mut deliver);
            deliver(meta, payload);
            return;
        }
        if self.fifos.len() <= path {
            self.fifos.resize_with(path + 1, || None);
        }
        let (n, len) = (self.slots_per_path, self.slot_len);
        let fifo = self.fifos[path].get_or_insert_with(|| Fifo {
            slots: vec![None; n],
            storage: Vec::new(),
            free: (0..n as u32).rev().collect(),
            head: 0,
            count: 0,
        });
        if fifo.count == n {
            self.overflows += 1;
            if let Some((m, bytes)) = pop(fifo, self.slot_len) {
                deliver(m, bytes);
            }
        }
        let at = (fifo.head + fifo.count) % n;
        // As many buffers as slots, and the FIFO has a free slot now.
        let Some(buf) = fifo.free.pop() else {
            deliver(meta, payload);
            return;
        };
        let start = buf as usize * len;
        if fifo.storage.len() < start + len {
            let grown = (start + len).max(2 * fifo.storage.len()).min(n * len);
            fifo.storage.resize(grown, 0);
        }
        fifo.storage[start..start + payload.len()].copy_from_slice(payload);
        self.last_push = Some(now);
        fifo.slots[at] = Some(Slot {
            meta,
            // Never before the datagram ahead of it on the path.
            release,
            len: payload.len(),
            buf,
        });
        fifo.count += 1;
    }

    fn drain_path(&mut self, path: usize, deliver: &mut impl FnMut(Meta, &[u8])) {
        let slot_len = self.slot_len;
        if let Some(Some(fifo)) = self.fifos.get_mut(path) {
            while let Some((m, bytes)) = pop(fifo, slot_len) {
                deliver(m, bytes);
            }
        }
    }

    /// Hands every datagram due at `now` to `deliver`, earliest first.
    pub fn release_due(&mut self, now: Instant, mut deliver: impl FnMut(Meta, &[u8])) {
        loop {
            let mut best: Option<(Instant, usize)> = None;
            for (i, f) in self.fifos.iter().enumerate() {
                if let Some(t) = f.as_ref().and_then(head_release) {
                    if t <= now && best.is_none_or(|(b, _)| t < b) {
                        best = Some((t, i));
                    }
                }
            }
            let Some((_, i)) = best else { return };
            let slot_len = self.slot_len;
            let Some(Some(fifo)) = self.fifos.get_mut(i) else {
                return;
            };
            match pop(fifo, slot_len) {
                Some((m, bytes)) => deliver(m, bytes),
                None => return,
            }
        }
    }

    /// When the next datagram is due, if any is held.
    pub fn next_release(&self) -> Option<Instant> {
        self.fifos
            .iter()
            .filter_map(|f| f.as_ref().and_then(head_release))
            .min()
    }

    /// Datagrams held.
    pub fn held(&self) -> usize {
        self.fifos.iter().flatten().map(|f| f.count).sum()
    }
}

fn head_release(f: &Fifo) -> Option<Instant> {
    if f.count == 0 {
        return None;
    }
    f.slots[f.head].map(|s| s.release)
}

/// Takes the head of `fifo`; the bytes stay valid until the next push.
fn pop(fifo: &mut Fifo, slot_len: usize) -> Option<(Meta, &[u8])> {
    if fifo.count == 0 {
        return None;
    }
    let at = fifo.head;
    let slot = fifo.slots[at].take()?;
    fifo.head = (at + 1) % fifo.slots.len();
    fifo.count -= 1;
    fifo.free.push(slot.buf);
    let start = slot.buf as usize * slot_len;
    Some((slot.meta, &fifo.storage[start..start + slot.len]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seq: u64, path: usize) -> Meta {
        Meta {
            seq,
            flow: None,
            path,
            kind: Kind::Data,
        }
    }

    #[test]
    fn datagrams_leave_in_release_order_across_paths() {
        let t = Instant::now();
        let ms = Duration::from_millis(1);
        let mut d = DelayLine::new(4, 16);
        let mut out = Vec::new();
        // Fast path 1 datagrams held 100 ms, the slow path's not at all.
        d.push(t + 100 * ms, meta(1, 1), b"a", t, |m, _| out.push(m.seq));
        d.push(t + 101 * ms, meta(3, 1), b"c", t, |m, _| out.push(m.seq));
        d.push(t + 2 * ms, meta(0, 0), b"z", t + 2 * ms, |m, _| {
            out.push(m.seq)
        });
        assert_eq!(out, [0], "no hold and nothing ahead: at once");
        assert_eq!(d.next_release(), Some(t + 100 * ms));
        d.release_due(t + 50 * ms, |m, _| out.push(m.seq));
        assert_eq!(out, [0]);
        d.release_due(t + 101 * ms, |m, b| {
            out.push(m.seq);
            assert_eq!(b.len(), 1);
        });
        assert_eq!(out, [0, 1, 3]);
        assert_eq!(d.held(), 0);
        assert_eq!(d.next_release(), None);
    }

    #[test]
    fn a_path_keeps_its_order_and_a_full_fifo_releases_early() {
        let t = Instant::now();
        let ms = Duration::from_millis(1);
        let mut d = DelayLine::new(2, 8);
        let mut out = Vec::new();
        d.push(t + 10 * ms, meta(1, 0), b"1", t, |m, _| out.push(m.seq));
        // Due already, but behind a held one on its path: waits.
        d.push(t, meta(2, 0), b"2", t, |m, _| out.push(m.seq));
        assert!(out.is_empty());
        d.push(t + 10 * ms, meta(3, 0), b"3", t, |m, _| out.push(m.seq));
        assert_eq!(out, [1]);
        assert_eq!(d.overflows, 1);
        // Too long for a slot: what the path holds goes first.
        d.push(t, meta(4, 0), &[0u8; 9], t, |m, _| out.push(m.seq));
        assert_eq!(out, [1, 2, 3, 4]);
    }

    #[test]
    fn storage_is_given_back_after_holding_nothing_for_a_while() {
        let t = Instant::now();
        let ms = Duration::from_millis(1);
        let idle = mpt_proto::reorder::STORAGE_IDLE_RELEASE;
        let mut d = DelayLine::new(8, 4);
        let mut out = Vec::new();
        d.push(t + ms, meta(1, 0), &[1; 4], t, |m, _| out.push(m.seq));
        d.release_idle(t + idle);
        assert_eq!(d.storage_bytes(), 4, "held: kept");
        d.release_due(t + ms, |m, _| out.push(m.seq));
        d.release_idle(t + idle - ms);
        assert_eq!(d.storage_bytes(), 4, "held lately: kept");
        d.release_idle(t + idle);
        assert_eq!(d.storage_bytes(), 0, "given back");
        d.push(t + idle + ms, meta(2, 0), &[2; 4], t + idle, |m, _| {
            out.push(m.seq)
        });
        d.release_due(t + idle + ms, |m, b| {
            assert_eq!(b, [2; 4]);
            out.push(m.seq)
        });
        assert_eq!(out, [1, 2]);
    }

    #[test]
    fn a_fifo_turning_round_its_ring_reuses_the_first_buffer() {
        let t = Instant::now();
        let ms = Duration::from_millis(1);
        let mut d = DelayLine::new(8, 4);
        let mut out = Vec::new();
        // One datagram held at a time, 50 times round an 8-slot ring.
        for k in 0..50u64 {
            d.push(t + ms, meta(k, 0), &[0xab; 4], t, |m, _| out.push(m.seq));
            d.release_due(t + ms, |m, b| {
                assert_eq!(b, [0xab; 4]);
                out.push(m.seq)
            });
        }
        assert_eq!(out, (0..50).collect::<Vec<_>>());
        let fifo = d.fifos[0].as_ref().expect("path 0 held something");
        assert_eq!(fifo.storage.len(), 4, "one buffer allocated");
        assert_eq!(fifo.free.len(), 8);
    }
}
