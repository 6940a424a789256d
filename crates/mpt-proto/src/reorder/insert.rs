//! Packets and skip marks coming in: where a sequence number stands
//! against the window (restart, overflow), and whether a data packet is
//! delivered at once, held for global order or for its flow predecessor,
//! or dropped as a duplicate.

use std::time::Instant;

use super::ring::grow_to;
use super::{Outcome, Resequencer, Slot, Wait};

impl Resequencer {
    /// Where `seq` stands relative to the window; resets or slides the
    /// window as needed. Returns the next sequence number to deliver.
    fn prepare(&mut self, seq: u64, now: Instant, deliver: &mut impl FnMut(&[u8])) -> u64 {
        let next = match self.next {
            None => {
                self.next = Some(seq);
                seq
            }
            Some(n) => n,
        };
        if seq < next && next - seq > 4 * self.window() {
            // Far behind: the peer restarted its counter. Flush and restart.
            self.flush_all(now, deliver);
            self.stats.resets += 1;
            self.next = Some(seq);
            return seq;
        }
        if seq - next.min(seq) >= self.window() {
            // Too far ahead for the ring: give up the oldest gaps until it fits.
            let new_next = seq - self.window() + 1;
            self.advance_to(new_next, now, deliver);
        }
        self.next.unwrap_or(seq)
    }

    /// Inserts the data packet with sequence number `seq` received on
    /// `path`, to be delivered in global order: after every lower sequence
    /// number is done. Everything that becomes deliverable is passed to
    /// `deliver`.
    pub fn insert(
        &mut self,
        seq: u64,
        path: usize,
        packet: &[u8],
        now: Instant,
        mut deliver: impl FnMut(&[u8]),
    ) -> Outcome {
        let outcome = self.insert_inner(seq, Some(Wait::All), packet, now, &mut deliver);
        self.note_path(path, seq, now);
        self.release_proven(now, &mut deliver);
        outcome
    }

    /// Inserts the data packet with sequence number `seq` received on
    /// `path`, to be delivered as soon as `prev` is done: `Some(p)` is its
    /// flow predecessor (see [`crate::wire::flow_predecessor`]), `None`
    /// means it depends on nothing and is delivered at once. Everything
    /// that becomes deliverable is passed to `deliver`.
    ///
    /// A `prev` that is not below `seq`, or whose slot already has a
    /// waiter, makes the packet wait for global order as with
    /// [`Resequencer::insert`].
    pub fn insert_after(
        &mut self,
        seq: u64,
        prev: Option<u64>,
        path: usize,
        packet: &[u8],
        now: Instant,
        mut deliver: impl FnMut(&[u8]),
    ) -> Outcome {
        let wait = prev.map(Wait::Seq);
        let outcome = self.insert_inner(seq, wait, packet, now, &mut deliver);
        self.note_path(path, seq, now);
        self.release_proven(now, &mut deliver);
        outcome
    }

    /// `wait`: `None` for nothing, else what the packet must wait for.
    fn insert_inner(
        &mut self,
        seq: u64,
        wait: Option<Wait>,
        packet: &[u8],
        now: Instant,
        deliver: &mut impl FnMut(&[u8]),
    ) -> Outcome {
        let next = self.prepare(seq, now, deliver);
        if seq < next {
            self.stats.late += 1;
            deliver(packet);
            return Outcome::Late;
        }
        let i = self.index(seq);
        if self.slot(i) != Slot::Empty {
            self.stats.duplicates += 1;
            return Outcome::Duplicate;
        }
        if seq == next {
            self.stats.in_order += 1;
            deliver(packet);
            self.next = Some(next.saturating_add(1));
            self.wake(seq, now, deliver);
            self.drain(now, deliver);
            return Outcome::InOrder;
        }
        // Ahead of the window base: decide what it waits for.
        self.ensure_ring();
        let wait = match wait {
            None => None,
            Some(Wait::All) => Some(Wait::All),
            Some(Wait::Seq(p)) if p >= seq => {
                self.stats.flow_fallback += 1;
                Some(Wait::All)
            }
            Some(Wait::Seq(p)) if p < next => None,
            Some(Wait::Seq(p)) => {
                let pi = self.index(p);
                match self.slot(pi) {
                    Slot::Skip | Slot::Delivered => None,
                    Slot::Empty | Slot::Packet { .. } if self.waiter[pi].is_none() => {
                        Some(Wait::Seq(p))
                    }
                    Slot::Empty | Slot::Packet { .. } => {
                        self.stats.flow_fallback += 1;
                        Some(Wait::All)
                    }
                }
            }
        };
        let Some(wait) = wait else {
            self.stats.flow_bypass += 1;
            deliver(packet);
            self.mark_delivered(i);
            self.wake(seq, now, deliver);
            return Outcome::Bypass;
        };
        if packet.len() > self.slot_len {
            deliver(packet);
            self.mark_delivered(i);
            self.wake(seq, now, deliver);
            return Outcome::Oversized;
        }
        // Never empty: every held packet has a slot of its own, and there
        // are as many buffers as slots.
        let Some(buf) = self.free.pop() else {
            deliver(packet);
            self.mark_delivered(i);
            self.wake(seq, now, deliver);
            return Outcome::Oversized;
        };
        let off = buf as usize * self.slot_len;
        grow_to(
            &mut self.storage,
            off + self.slot_len,
            self.slots.len() * self.slot_len,
        );
        self.storage[off..off + packet.len()].copy_from_slice(packet);
        self.last_held = Some(now);
        self.slots[i] = Slot::Packet {
            len: packet.len(),
            wait,
            buf,
        };
        if let Wait::Seq(p) = wait {
            let pi = self.index(p);
            self.waiter[pi] = Some(seq);
        }
        self.arrived[i] = Some(now);
        self.oldest_hint = Some(self.oldest_hint.map_or(now, |t| t.min(now)));
        self.held += 1;
        self.occupied += 1;
        Outcome::Held
    }

    /// Marks `seq`, received on `path`, as consumed by a datagram without
    /// data.
    pub fn skip(&mut self, seq: u64, path: usize, now: Instant, mut deliver: impl FnMut(&[u8])) {
        let next = self.prepare(seq, now, &mut deliver);
        if seq == next {
            self.next = Some(next.saturating_add(1));
            self.wake(seq, now, &mut deliver);
            self.drain(now, &mut deliver);
        } else if seq > next {
            let i = self.index(seq);
            self.ensure_ring();
            if self.slots[i] == Slot::Empty {
                self.slots[i] = Slot::Skip;
                self.occupied += 1;
                self.wake(seq, now, &mut deliver);
            }
        }
        self.note_path(path, seq, now);
        self.release_proven(now, &mut deliver);
    }
}
