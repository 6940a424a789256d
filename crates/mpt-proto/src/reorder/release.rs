//! The window moving on: a sequence number becoming done delivers what
//! was held for it (its flow waiter, then that one's waiter), and giving
//! up gaps releases what was held behind them, in at most one pass over
//! the ring however far the window jumps.

use std::time::Instant;

use super::{Resequencer, Slot, Wait};

impl Resequencer {
    /// Marks the empty slot `i` as delivered ahead of the window base.
    pub(super) fn mark_delivered(&mut self, i: usize) {
        self.ensure_ring();
        self.slots[i] = Slot::Delivered;
        self.occupied += 1;
    }

    /// `seq` just became done: delivers its waiter, then the waiter's
    /// waiter, and so on. A loop over distinct held packets: at most one
    /// pass over the ring.
    pub(super) fn wake(&mut self, seq: u64, now: Instant, deliver: &mut impl FnMut(&[u8])) {
        let mut done = seq;
        while self.held > 0 {
            let di = self.index(done);
            let Some(w) = self.waiter[di].take() else {
                return;
            };
            let wi = self.index(w);
            let Slot::Packet {
                len,
                wait: Wait::Seq(p),
                buf,
            } = self.slots[wi]
            else {
                return;
            };
            if p != done {
                return;
            }
            self.deliver_held(wi, len, buf, now, deliver);
            self.stats.flow_released += 1;
            self.slots[wi] = Slot::Delivered;
            done = w;
        }
    }

    /// Delivers the packet held in slot `i` (of length `len`, in buffer
    /// `buf`), counts it and frees its buffer; the caller sets the slot's
    /// new state.
    fn deliver_held(
        &mut self,
        i: usize,
        len: usize,
        buf: u32,
        now: Instant,
        deliver: &mut impl FnMut(&[u8]),
    ) {
        let off = buf as usize * self.slot_len;
        deliver(&self.storage[off..off + len]);
        self.free.push(buf);
        self.held -= 1;
        if self.held == 0 {
            self.oldest_hint = None;
            self.aging_until = None;
        }
        self.stats.held += 1;
        if let Some(at) = self.arrived[i].take() {
            self.stats.hold.record(now.saturating_duration_since(at));
        }
    }

    /// The window base passes `seq` (delivered, skipped or given up):
    /// empties its slot, delivering a packet held there, and wakes its
    /// waiter. Returns what the slot held.
    fn finish(&mut self, seq: u64, now: Instant, deliver: &mut impl FnMut(&[u8])) -> Slot {
        if self.slots.is_empty() {
            // Nothing was ever out of order: nothing held, no waiter.
            return Slot::Empty;
        }
        let i = self.index(seq);
        let slot = self.slots[i];
        if let Slot::Packet { len, buf, .. } = slot {
            self.deliver_held(i, len, buf, now, deliver);
        }
        if slot != Slot::Empty {
            self.occupied -= 1;
        }
        self.slots[i] = Slot::Empty;
        self.arrived[i] = None;
        self.wake(seq, now, deliver);
        slot
    }

    /// Delivers the contiguous run at the head of the window.
    pub(super) fn drain(&mut self, now: Instant, deliver: &mut impl FnMut(&[u8])) {
        let Some(mut next) = self.next else { return };
        // At most one pass: every slot released here was occupied.
        while self.occupied > 0 && self.slot(self.index(next)) != Slot::Empty {
            self.finish(next, now, deliver);
            next = next.saturating_add(1);
        }
        self.next = Some(next);
    }

    /// Gives up every gap before `target`, delivering what is held there.
    ///
    /// Only the first window's worth of numbers can hold anything, so at
    /// most one pass over the ring is made; the rest of a longer jump is
    /// counted as skipped gaps in one step.
    pub(super) fn advance_to(
        &mut self,
        target: u64,
        now: Instant,
        deliver: &mut impl FnMut(&[u8]),
    ) {
        let Some(next) = self.next else { return };
        if target <= next {
            return;
        }
        let span = target - next;
        let visited = span.min(self.window());
        let mut released = 0u64;
        // A waiter is a held packet, so with nothing occupied there is no
        // waiter to wake either.
        if self.occupied > 0 {
            for k in 0..visited {
                if self.finish(next.wrapping_add(k), now, deliver) != Slot::Empty {
                    released += 1;
                }
                if self.occupied == 0 {
                    break;
                }
            }
        }
        self.stats.gaps_skipped = self.stats.gaps_skipped.saturating_add(span - released);
        self.next = Some(target);
        self.drain(now, deliver);
    }

    pub(super) fn flush_all(&mut self, now: Instant, deliver: &mut impl FnMut(&[u8])) {
        if let Some(next) = self.next {
            self.advance_to(next.saturating_add(self.window()), now, deliver);
        }
    }
}
