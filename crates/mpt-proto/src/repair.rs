//! Loss repair: which holes in a path's sequence the receiver asks for
//! again ([`LossDetector`], module `detector`), and the copies the sender
//! answers from ([`RepairHistory`]).
//!
//! The messages are described in [`crate::wire::Nack`]; why the tunnel
//! repairs at all is told there. Three decisions make repair safe:
//!
//! * **Only real losses.** A hole is asked for only once it has stayed
//!   open for the path's measured reorder window: datagrams merely
//!   overtaken on their way into the receiver fill it first.
//! * **Only random losses.** A hole found while the path's queue stands is
//!   most likely an overflow, which TCP must hear of: left alone.
//! * **Bounded cost.** Requests are rate-limited per received datagram, a
//!   long run is an outage and not asked for, and the sender keeps a fixed
//!   ring of copies per path, each answered at most once, so a request
//!   never makes it send more than it was asked.

mod detector;

pub use detector::{
    DetectorStats, Hole, HoleEvent, Loss, LossDetector, MAX_OPEN_HOLES, MAX_REORDER_WINDOW,
    MIN_REORDER_WINDOW, NACK_BURST, NACK_EVERY, RANDOM_QUEUE_US,
};

/// A copy kept by [`RepairHistory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copy<'a> {
    /// The connection sequence number it was sent with.
    pub seq: u64,
    /// Whether its payload starts with a flow prefix.
    pub flow: bool,
    /// Its payload as sent, before sealing.
    pub payload: &'a [u8],
}

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    path_seq: u32,
    seq: u64,
    len: u16,
    flow: bool,
    /// Holds a copy not yet used for a repair.
    live: bool,
}

/// Sender side, one per path: the payloads of the last datagrams sent on
/// it, by path sequence number, in fixed memory.
#[derive(Debug, Clone)]
pub struct RepairHistory {
    entries: Vec<Entry>,
    storage: Vec<u8>,
    slot_len: usize,
}

impl RepairHistory {
    /// A ring of `slots` copies (rounded up to a power of two) of up to
    /// `slot_len` bytes each.
    pub fn new(slots: usize, slot_len: usize) -> RepairHistory {
        let slots = slots.max(2).next_power_of_two();
        let slot_len = slot_len.min(usize::from(u16::MAX));
        RepairHistory {
            entries: vec![Entry::default(); slots],
            storage: vec![0; slots * slot_len],
            slot_len,
        }
    }

    fn index(&self, path_seq: u32) -> usize {
        path_seq as usize & (self.entries.len() - 1)
    }

    /// Keeps a copy of the payload sent as `path_seq`/`seq`; one larger
    /// than a slot is not kept.
    pub fn record(&mut self, path_seq: u32, seq: u64, flow: bool, payload: &[u8]) {
        let i = self.index(path_seq);
        if payload.len() > self.slot_len {
            self.entries[i].live = false;
            return;
        }
        let off = i * self.slot_len;
        self.storage[off..off + payload.len()].copy_from_slice(payload);
        self.entries[i] = Entry {
            path_seq,
            seq,
            len: payload.len() as u16,
            flow,
            live: true,
        };
    }

    /// The copy of `path_seq`, if still kept and not used before; it is
    /// used up by this call.
    pub fn take(&mut self, path_seq: u32) -> Option<Copy<'_>> {
        let i = self.index(path_seq);
        let e = self.entries[i];
        if !e.live || e.path_seq != path_seq {
            return None;
        }
        self.entries[i].live = false;
        let off = i * self.slot_len;
        Some(Copy {
            seq: e.seq,
            flow: e.flow,
            payload: &self.storage[off..off + usize::from(e.len)],
        })
    }
}

#[cfg(test)]
mod tests;
