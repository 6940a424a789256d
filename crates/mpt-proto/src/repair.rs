//! Loss repair: which holes in a path's sequence the receiver asks for
//! again ([`LossDetector`]), and the copies the sender answers from
//! ([`RepairHistory`]).
//!
//! The messages are described in [`crate::wire::Nack`]; why the tunnel
//! repairs at all is told there. This module holds the two decisions that
//! make repair safe:
//!
//! * **Only random losses.** A hole found while the path's queue is empty
//!   (the datagram after it came with a one-way delay near the path's
//!   floor) is the link's own loss: TCP must not hear of it. A hole while a
//!   queue stands is most likely a queue that overflowed: TCP must hear of
//!   it, or it would never slow down, so it is left alone.
//! * **Bounded cost.** Requests are rate-limited per received datagram
//!   (one per [`NACK_EVERY`] on average), a run longer than
//!   [`crate::wire::MAX_NACK_RUN`] is an outage and not asked for, and the
//!   sender keeps a fixed ring of copies per path, each answered at most
//!   once, so a request never makes it send more than it was asked.

use std::time::{Duration, Instant};

use crate::wire::{Nack, MAX_NACK_RUN};

/// One request may be sent per this many datagrams received (averaged; a
/// burst of [`NACK_BURST`] is allowed).
pub const NACK_EVERY: u32 = 16;

/// Requests that may be sent back to back.
pub const NACK_BURST: u32 = 8;

/// A hole counts as random when the queueing delay of the datagram after
/// it is at most this, or at most half the highest queueing delay seen
/// recently, whichever is more.
pub const RANDOM_QUEUE_US: u32 = 3000;

/// Length of each of the two windows over which the delay floor and the
/// highest queueing delay are kept (so they cover 5 to 10 s).
const WINDOW: Duration = Duration::from_secs(5);

/// A hole worth repairing, found by [`LossDetector::on_data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    /// What to ask the sender for.
    pub nack: Nack,
    /// The connection sequence number of the datagram before the hole on
    /// this path: the lost ones lie strictly between this and `before`.
    pub after_seq: u64,
    /// The connection sequence number of the datagram after the hole.
    pub before_seq: u64,
}

/// Whether wrapping µs value `a` is below `b` (their difference is small
/// next to the wrap).
fn wrapping_below(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// The lowest one-way delay and the highest queueing delay over two
/// consecutive windows.
#[derive(Debug, Clone, Copy)]
struct TwoWindows {
    start: Option<Instant>,
    /// Lowest delay (wrapping µs) of the current window and the previous.
    floor: [Option<u32>; 2],
    /// Highest queueing delay (µs) of the current window and the previous.
    peak: [u32; 2],
}

impl TwoWindows {
    fn new() -> TwoWindows {
        TwoWindows {
            start: None,
            floor: [None; 2],
            peak: [0; 2],
        }
    }

    fn rotate(&mut self, now: Instant) {
        match self.start {
            Some(s) if now.saturating_duration_since(s) < WINDOW => {}
            Some(s) => {
                // A window ended; after a long silence the old one is stale.
                if now.saturating_duration_since(s) < 2 * WINDOW {
                    self.floor = [None, self.floor[0]];
                    self.peak = [0, self.peak[0]];
                } else {
                    *self = TwoWindows::new();
                }
                self.start = Some(now);
            }
            None => self.start = Some(now),
        }
    }

    fn floor(&self) -> Option<u32> {
        match self.floor {
            [Some(a), Some(b)] => Some(if wrapping_below(a, b) { a } else { b }),
            [a, b] => a.or(b),
        }
    }

    fn note_delay(&mut self, owd_us: u32) {
        match self.floor[0] {
            Some(f) if !wrapping_below(owd_us, f) => {}
            _ => self.floor[0] = Some(owd_us),
        }
    }

    fn peak(&self) -> u32 {
        self.peak[0].max(self.peak[1])
    }

    fn note_queue(&mut self, queue_us: u32) {
        self.peak[0] = self.peak[0].max(queue_us);
    }
}

/// Receiver side, one per path: watches the path's sequence numbers and
/// one-way delays and says which holes to ask for again.
#[derive(Debug, Clone)]
pub struct LossDetector {
    /// Path and connection sequence number of the newest datagram.
    last: Option<(u32, u64)>,
    /// The path's one-way delay floor (µs, the receiver's clock minus the
    /// sender's, so with an unknown offset) and its recent queueing peak.
    delay: TwoWindows,
    /// Request budget, in 1/NACK_EVERY units.
    tokens: u32,
    stats: DetectorStats,
}

/// What a [`LossDetector`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DetectorStats {
    /// Holes judged random and asked for.
    pub requested: u64,
    /// Datagrams in those holes.
    pub requested_datagrams: u64,
    /// Holes while a queue stood (congestion): left to TCP.
    pub congestion: u64,
    /// Holes not asked for for lack of budget, or too long.
    pub unrequested: u64,
}

impl Default for LossDetector {
    fn default() -> Self {
        LossDetector::new()
    }
}

impl LossDetector {
    /// A detector that has seen nothing.
    pub fn new() -> LossDetector {
        LossDetector {
            last: None,
            delay: TwoWindows::new(),
            tokens: NACK_BURST * NACK_EVERY,
            stats: DetectorStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> DetectorStats {
        self.stats
    }

    /// Takes in a data-carrying datagram (`path_seq`, connection `seq`,
    /// `owd_us` = receiver clock − sender timestamp, wrapping) that arrived
    /// on this path at `now`; returns the hole it reveals if that hole is
    /// worth repairing.
    pub fn on_data(&mut self, path_seq: u32, seq: u64, owd_us: u32, now: Instant) -> Option<Loss> {
        self.tokens = (self.tokens + 1).min(NACK_BURST * NACK_EVERY);
        self.delay.rotate(now);
        // Queueing delay: above the floor; the wrapping difference stays
        // small whatever the clocks' offset.
        let queue_us = self
            .delay
            .floor()
            .map_or(0, |f| (owd_us.wrapping_sub(f) as i32).max(0) as u32);
        let peak = self.delay.peak();
        self.delay.note_delay(owd_us);
        self.delay.note_queue(queue_us);
        let Some((last_pseq, last_seq)) = self.last else {
            self.last = Some((path_seq, seq));
            return None;
        };
        let advance = path_seq.wrapping_sub(last_pseq);
        if advance == 0 || advance > u32::MAX / 2 {
            // A duplicate or a datagram overtaken on the path: not news.
            return None;
        }
        self.last = Some((path_seq, seq));
        if advance == 1 {
            return None;
        }
        let missing = advance - 1;
        if seq <= last_seq.saturating_add(u64::from(missing)) {
            // The connection sequence did not leave room for the hole:
            // not the same sender's order (restart); ask nothing.
            return None;
        }
        if missing > u32::from(MAX_NACK_RUN) {
            self.stats.unrequested += 1;
            return None;
        }
        if queue_us > RANDOM_QUEUE_US.max(peak / 2) {
            self.stats.congestion += 1;
            return None;
        }
        if self.tokens < NACK_EVERY {
            self.stats.unrequested += 1;
            return None;
        }
        self.tokens -= NACK_EVERY;
        self.stats.requested += 1;
        self.stats.requested_datagrams += u64::from(missing);
        Some(Loss {
            nack: Nack {
                first_path_seq: last_pseq.wrapping_add(1),
                count: missing as u16,
            },
            after_seq: last_seq,
            before_seq: seq,
        })
    }
}

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
