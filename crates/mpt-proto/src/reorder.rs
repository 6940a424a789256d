//! Resequencing of a connection's datagrams, per flow or in global order,
//! released by timeout.
//!
//! Striping packet by packet over paths of different speed (or merely
//! received by different threads) reorders them. TCP reads reordering as
//! loss, so the receiver puts data back into connection-sequence order
//! before writing it to tun. A packet that arrives in order is delivered at
//! once without being stored. One that arrives early is copied into a slot
//! of a fixed ring and waits until the gap before it fills.
//!
//! When is a gap a loss rather than a packet still on its way? Each path
//! is first-in first-out, so once every path that is carrying traffic has
//! delivered a sequence number above the gap, nothing can fill it any more:
//! it is given up at once. That detects loss in about one packet time, with
//! no timer, however different the paths' delays. Only when a path goes
//! quiet does a gap wait for `timeout`, the safety net (a path counts as
//! carrying traffic while it delivered something within two timeouts). A
//! packet that arrives after its gap was given up is delivered at once:
//! TCP would rather have it late than never.
//!
//! Sequence numbers consumed by datagrams that carry no data (probes,
//! replies, dropped ones) are marked with [`Resequencer::skip`] so they do
//! not hold anything up.
//!
//! # Per flow
//!
//! Global order is more than TCP needs: it needs the order of its own
//! connection, not of the whole tunnel. Restoring global order makes a gap
//! in one flow (a packet on a slow path, or lost) hold every later packet
//! of every flow. A sender that sets [`crate::wire::Flags::FLOW`] tells,
//! for each data datagram, the sequence number of the previous datagram of
//! the same flow bucket (see [`crate::flow`]); [`Resequencer::insert_after`]
//! then holds the packet only until that one predecessor is done, where
//! done means delivered, skipped, or given up. A packet with no
//! predecessor is delivered at once.
//!
//! Each slot can record one waiter: the held packet whose predecessor is
//! the slot's sequence number. When a sequence number becomes done, its
//! waiter is delivered, then the waiter's waiter, and so on, in a loop (not
//! recursion: a chain as long as the window costs one pass, not stack).
//! Since flows are hashed into buckets and the sender links a packet to
//! the previous one of its bucket, each predecessor has at most one
//! successor; should a second one show up (a hostile or confused sender),
//! it falls back to waiting for global order: it is never lost, it only
//! waits longer.
//!
//! The window base (the lowest sequence number not yet done) moves as
//! before, over held, skipped and already delivered slots alike; loss is
//! proven and gaps time out exactly as in global order. So a held packet
//! waits at most `timeout`: [`Resequencer::handle_timeout`] gives up every
//! gap below the highest packet whose wait has ended, which releases it
//! whichever way it waits. Packets inserted with [`Resequencer::insert`]
//! (peers without `FLOW`) wait for global order as they always did; both
//! kinds can share one window.
//!
//! How long packets were held is recorded in a small fixed histogram
//! ([`HoldHistogram`]) so the daemon can show what resequencing costs in
//! latency, and [`Resequencer::oldest_held`] tells how long the current
//! longest wait is.
//!
//! The timeout counts from each held packet's arrival: the deadline is
//! that of the packet held longest, whatever its place in the window, so
//! a younger packet lower in the window never extends an older one's wait.
//! To find it without a pass over the ring per call, the buffer keeps a
//! lower bound of the oldest arrival: [`Resequencer::poll_timeout`] may
//! then be early (after the oldest packet left another way), and the call
//! it prompts only brings the bound up to date.
//!
//! # Repairs
//!
//! A receiver that asked the sender to repair a hole (see
//! [`crate::repair`]) knows a gap will fill although every path has moved
//! past it: [`Resequencer::expect_repair`] exempts the gaps between two
//! sequence numbers from the loss proof until a deadline, so they wait for
//! the copy (or the timeout) instead of being given up at once;
//! [`Resequencer::repair_arrived`] tells it a copy came. A few
//! such holes are tracked at a time, in fixed memory.
//!
//! Memory is bounded at construction: at most `slots × slot_len` bytes,
//! plus a few words of bookkeeping per slot. A held packet is copied into
//! a buffer taken from a free stack rather than into its slot's own, and
//! the stack hands out the lowest buffers again and again; the storage
//! grows (by doubling, up to the bound) only when a buffer beyond it is
//! needed. So it is as large as the most packets ever held at once: a
//! connection striped at gigabits over like paths holds a few dozen and
//! keeps well under a megabyte instead of the whole ring, which a server
//! with hundreds of clients counts per client. A sequence number more than `slots`
//! ahead forces the oldest held packets out. A sequence number far behind
//! (the peer restarted and counts from 1 again) resets the window.
//!
//! Every operation costs at most one pass over the ring, whatever the
//! sequence number: a datagram numbered 2^62 ahead gives up the whole
//! window in one pass (nothing can be held beyond it) and moves on, rather
//! than stepping through the numbers in between. The receive worker holds
//! the connection's lock while it calls in here, so a loop over the jump
//! would stop the connection.

use std::time::{Duration, Instant};

use crate::sched::MAX_PATHS;

mod hold;

pub use hold::{HoldHistogram, HOLD_BUCKETS};

/// What happened to an inserted packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Delivered at once (it was next in order).
    InOrder,
    /// Delivered at once ahead of lower sequence numbers still missing:
    /// its flow predecessor was done already, or it had none.
    Bypass,
    /// Stored until what it waits for is done or times out.
    Held,
    /// Its gap was already given up; delivered at once.
    Late,
    /// Already held or delivered (a duplicate); dropped.
    Duplicate,
    /// Larger than a slot; delivered at once, out of order (its sequence
    /// number counts as done, so a duplicate is recognised and its flow
    /// successor need not wait).
    Oversized,
}

/// What a held packet waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Every lower sequence number (global order).
    All,
    /// Only this sequence number, its flow predecessor; the packet is
    /// registered as that slot's waiter.
    Seq(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Empty,
    /// Consumed by a datagram without data.
    Skip,
    /// Delivered ahead of the window base; kept so that a duplicate is
    /// recognised and the base can move over it.
    Delivered,
    Packet {
        len: usize,
        wait: Wait,
        /// Index of the storage buffer that holds it.
        buf: u32,
    },
}

/// Counters for status output and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReorderStats {
    /// Packets delivered in order on arrival.
    pub in_order: u64,
    /// Packets held and delivered later (in order, by their flow, or when
    /// their gap was given up).
    pub held: u64,
    /// Packets that came after their gap was given up.
    pub late: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Gaps given up by timeout or window overflow.
    pub gaps_skipped: u64,
    /// Window resets (peer restart).
    pub resets: u64,
    /// Packets delivered on arrival ahead of missing lower sequence
    /// numbers, because their flow did not wait for those.
    pub flow_bypass: u64,
    /// Held packets released by their flow predecessor becoming done
    /// (also counted in `held`).
    pub flow_released: u64,
    /// Packets that named a predecessor which already had a waiter (or a
    /// predecessor not below themselves) and so waited for global order.
    pub flow_fallback: u64,
    /// How long the packets counted in `held` were held.
    pub hold: HoldHistogram,
}

/// Grows `storage` (zero-filled) to at least `need` bytes: to twice its
/// length when that is more, never beyond `bound`.
fn grow_to(storage: &mut Vec<u8>, need: usize, bound: usize) {
    if storage.len() < need {
        storage.resize(need.max(storage.len() * 2).min(bound.max(need)), 0);
    }
}

/// How long a resequencer must have held nothing before it gives its
/// packet storage back (see [`Resequencer::handle_timeout`]): long enough
/// that a connection reordering now and then does not grow it again and
/// again, short enough that a server whose clients stopped sending returns
/// to its idle size within seconds.
pub const STORAGE_IDLE_RELEASE: Duration = Duration::from_secs(2);

/// How long a packet above a gap must have waited before the gap counts as
/// proven lost by the paths' order (see the module docs). A path is FIFO
/// on the wire, but not always on its way into the receiver: datagrams
/// that two CPUs put on one veth or NIC queue are taken in by the two
/// CPUs' backlogs in parallel and may swap places by some tens to hundreds
/// of microseconds. Without a grace such a swap read as a loss: measured
/// with 4 TCP streams over 12 paths of 100 Mbit/s, 47 k datagrams in 20 s
/// arrived after their gap had been given up (TCP saw them as losses and
/// retransmitted). A real loss costs this much more hold. This is the
/// default and the floor: on a loaded host swaps last milliseconds, so the
/// daemon raises the grace to the longest reorder window its loss
/// detectors measure (see [`crate::repair::LossDetector::reorder_window`]).
pub const REORDER_GRACE: Duration = Duration::from_millis(1);

/// Holes tracked at once by [`Resequencer::expect_repair`].
pub const MAX_PENDING_REPAIRS: usize = 32;

/// A hole whose repair was asked for.
#[derive(Debug, Clone, Copy)]
struct PendingRepair {
    /// The gaps strictly between `after` and `before` are exempt.
    after: u64,
    before: u64,
    /// Copies (or, before it is asked for, late originals) still
    /// expected.
    missing: u16,
    until: Instant,
    /// Its repair was asked for: copies count against it.
    asked: bool,
}

/// A fixed-size resequencing buffer for one connection.
#[derive(Debug, Clone)]
pub struct Resequencer {
    /// Next sequence number to deliver; `None` before the first packet.
    next: Option<u64>,
    /// Slots in the ring (a power of two). The three per-slot arrays are
    /// made when a packet first arrives out of order and dropped again
    /// when the storage is (see [`Resequencer::release_idle_storage`]):
    /// a connection that delivers in order never writes them, so a server
    /// with hundreds of idle clients does not keep a ring for each.
    ring: usize,
    slots: Vec<Slot>,
    arrived: Vec<Option<Instant>>,
    /// Per slot: the held packet waiting for this slot's sequence number.
    waiter: Vec<Option<u64>>,
    storage: Vec<u8>,
    /// Storage buffers not holding a packet, lowest on top.
    free: Vec<u32>,
    /// When a packet was last held (for [`STORAGE_IDLE_RELEASE`]).
    last_held: Option<Instant>,
    slot_len: usize,
    held: usize,
    /// Slots not empty (held packets, skip marks, early deliveries): when
    /// none is, moving the window costs nothing.
    occupied: usize,
    /// No held packet arrived before this: a lower bound that lets
    /// [`Resequencer::handle_timeout`] return without a pass over the ring
    /// when nothing can have waited long enough. `None` when nothing is
    /// held.
    oldest_hint: Option<Instant>,
    timeout: Duration,
    stats: ReorderStats,
    /// Per path: highest sequence number delivered on it and when.
    paths: [Option<(u64, Instant)>; MAX_PATHS],
    /// Per path that may carry data: how much later than on the fastest
    /// path a packet sent on it arrives (see [`Resequencer::set_path_wait`]).
    waits: [Option<Duration>; MAX_PATHS],
    /// Holes waiting for a repair, exempt from the loss proof.
    repairs: [Option<PendingRepair>; MAX_PENDING_REPAIRS],
    /// How long a packet above a gap waits before the paths' order proves
    /// the gap lost ([`REORDER_GRACE`] unless set).
    grace: Duration,
    /// When a gap the paths' order proves lost will have waited out its
    /// grace (or the idle paths' wait), so [`Resequencer::poll_timeout`]
    /// wakes the caller then even if nothing else arrives. `None` when no
    /// such gap is waiting.
    aging_until: Option<Instant>,
}

impl Resequencer {
    /// A buffer of `slots` slots (rounded up to a power of two, at least 2)
    /// of `slot_len` bytes each; gaps are given up after `timeout`.
    pub fn new(slots: usize, slot_len: usize, timeout: Duration) -> Resequencer {
        let slots = slots.max(2).next_power_of_two();
        Resequencer {
            next: None,
            ring: slots,
            slots: Vec::new(),
            arrived: Vec::new(),
            waiter: Vec::new(),
            storage: Vec::new(),
            free: (0..slots as u32).rev().collect(),
            last_held: None,
            slot_len,
            held: 0,
            occupied: 0,
            oldest_hint: None,
            timeout,
            stats: ReorderStats::default(),
            paths: [None; MAX_PATHS],
            waits: [None; MAX_PATHS],
            repairs: [None; MAX_PENDING_REPAIRS],
            grace: REORDER_GRACE,
            aging_until: None,
        }
    }

    /// Sets how long a packet above a gap waits before the paths' order
    /// proves the gap lost (default [`REORDER_GRACE`]; zero trusts every
    /// path to be FIFO all the way in).
    pub fn set_reorder_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    /// The reorder grace in use.
    pub fn reorder_grace(&self) -> Duration {
        self.grace
    }

    /// Tells how much later than on the fastest path a packet sent on
    /// `path` arrives (its extra one-way delay, with a margin for jitter),
    /// or `None` when the path cannot carry data now (down, suspect).
    ///
    /// A path that delivered nothing lately is left out of the loss proof
    /// (it would block it forever), but the sender may start using it at
    /// any moment: its first packets are then still on their way while the
    /// fast path delivers beyond them. So a gap is proven lost through such
    /// an idle path only once a packet above the gap has waited this long:
    /// the missing one was sent before it and would have arrived by then.
    /// Without this, a satellite path joining a DSL path made the receiver
    /// give up hundreds of packets still in flight (measured: 334 gaps
    /// skipped in one start of a CUBIC flow over GEO + DSL, which then
    /// crawled at 0.45 of the best path).
    pub fn set_path_wait(&mut self, path: usize, wait: Option<Duration>) {
        if let Some(w) = self.waits.get_mut(path) {
            *w = wait;
        }
    }

    /// The longest wait ([`Resequencer::set_path_wait`]) of the paths that
    /// may carry data but are left out of the loss proof as idle.
    fn idle_wait(&self, now: Instant) -> Duration {
        let active = self.timeout * 2;
        self.waits
            .iter()
            .zip(&self.paths)
            .filter_map(|(w, p)| match p {
                Some((_, at)) if now.saturating_duration_since(*at) <= active => None,
                _ => *w,
            })
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// A repair was asked for the datagrams lost strictly between `after`
    /// and `before` (`missing` of them): until `until`, those gaps are not
    /// given up as proven lost (the timeout still applies), and copies
    /// that arrive ([`Resequencer::repair_arrived`]) count against it.
    /// Asked again for the same hole (or for one given to
    /// [`Resequencer::expect_hole`]), it updates the count and the
    /// deadline. Returns false when [`MAX_PENDING_REPAIRS`] holes are
    /// tracked already.
    pub fn expect_repair(&mut self, after: u64, before: u64, missing: u16, until: Instant) -> bool {
        self.exempt(after, before, missing, until, true)
    }

    /// A path's loss detector saw a hole strictly between `after` and
    /// `before` (`missing` datagrams) that may still fill, its datagrams
    /// overtaken on their way in: until `until` (the end of the path's
    /// reorder window), those gaps are not given up as proven lost. Late
    /// originals count against it ([`Resequencer::hole_filled`]); copies
    /// do not, none was asked for yet.
    pub fn expect_hole(&mut self, after: u64, before: u64, missing: u16, until: Instant) -> bool {
        self.exempt(after, before, missing, until, false)
    }

    fn exempt(
        &mut self,
        after: u64,
        before: u64,
        missing: u16,
        until: Instant,
        asked: bool,
    ) -> bool {
        if before <= after.saturating_add(1) || missing == 0 {
            return true;
        }
        let same = self
            .repairs
            .iter()
            .position(|r| r.is_some_and(|r| r.after == after && r.before == before));
        let slot = same.or_else(|| self.repairs.iter().position(Option::is_none));
        match slot {
            Some(i) => {
                self.repairs[i] = Some(PendingRepair {
                    after,
                    before,
                    missing,
                    until,
                    asked,
                });
                true
            }
            None => false,
        }
    }

    /// A datagram of the hole between `after` and `before` (as given to
    /// [`Resequencer::expect_repair`]) arrived after all, overtaken on its
    /// way in: the hole expects one datagram less, and is forgotten when
    /// it expects none. Call before inserting it.
    pub fn hole_filled(&mut self, after: u64, before: u64) {
        for slot in &mut self.repairs {
            if let Some(r) = slot {
                if r.after == after && r.before == before {
                    r.missing = r.missing.saturating_sub(1);
                    if r.missing == 0 {
                        *slot = None;
                    }
                }
            }
        }
    }

    /// Holes still waiting for a repair.
    pub fn pending_repairs(&self) -> usize {
        self.repairs.iter().flatten().count()
    }

    /// A repair copy of `seq` arrived (call before inserting it): the hole
    /// it falls in expects one copy less. (Other paths' datagrams fall in
    /// the same range, so only the caller can tell a copy.) Holes not
    /// asked for yet are left alone: the copy is not theirs.
    pub fn repair_arrived(&mut self, seq: u64) {
        for slot in &mut self.repairs {
            if let Some(r) = slot {
                if r.asked && r.after < seq && seq < r.before {
                    r.missing = r.missing.saturating_sub(1);
                    if r.missing == 0 {
                        *slot = None;
                    }
                }
            }
        }
    }

    /// Forgets the holes whose deadline passed; true if one did.
    fn expire_repairs(&mut self, now: Instant) -> bool {
        let mut any = false;
        for slot in &mut self.repairs {
            if slot.is_some_and(|r| r.until <= now) {
                *slot = None;
                any = true;
            }
        }
        any
    }

    /// Records that `path` delivered `seq` at `now`.
    fn note_path(&mut self, path: usize, seq: u64, now: Instant) {
        if let Some(slot) = self.paths.get_mut(path) {
            match slot {
                Some((high, at)) => {
                    if seq > *high {
                        *high = seq;
                    }
                    *at = now;
                }
                None => *slot = Some((seq, now)),
            }
        }
    }

    /// Forgets what path `path` delivered: it was removed, and its id may
    /// soon name a new path that starts from nothing.
    pub fn forget_path(&mut self, path: usize) {
        if let Some(slot) = self.paths.get_mut(path) {
            *slot = None;
        }
    }

    /// The lowest "highest delivered" over the paths carrying traffic:
    /// every gap below it is a loss.
    fn proven_lost_below(&self, now: Instant) -> Option<u64> {
        let active = self.timeout * 2;
        let proven = self
            .paths
            .iter()
            .flatten()
            .filter(|(_, at)| now.saturating_duration_since(*at) <= active)
            .map(|(high, _)| *high)
            .min()?;
        // A hole whose repair is on its way is not proven lost.
        let exempt = self
            .repairs
            .iter()
            .flatten()
            .filter(|r| r.until > now)
            .map(|r| r.after.saturating_add(1))
            .min();
        Some(exempt.map_or(proven, |e| e.min(proven)))
    }

    /// Gives up the gaps that no path can fill any more.
    fn release_proven(&mut self, now: Instant, deliver: &mut impl FnMut(&[u8])) {
        self.aging_until = None;
        if self.held == 0 {
            return;
        }
        if let (Some(bound), Some(next)) = (self.proven_lost_below(now), self.next) {
            if bound > next {
                let (aged, young) = self.aged_below(next, bound, now);
                if aged > next {
                    self.advance_to(aged, now, deliver);
                }
                // A held packet above a proven gap still too young: wake
                // up when it is not (if it is still held then).
                self.aging_until = young.filter(|_| self.held > 0);
            }
        }
    }

    /// How far up to `bound` the gaps are proven lost once the held packet
    /// above each has waited out the reorder grace and the idle paths'
    /// longest wait. Returns the number after the last held packet (at
    /// most `bound`) up to which that holds, and when the first packet
    /// still too young will have waited enough (`None` if none is); the
    /// pass ends at that packet, so it covers little more than what is
    /// released anyway.
    fn aged_below(&self, next: u64, bound: u64, now: Instant) -> (u64, Option<Instant>) {
        let wait = self.idle_wait(now).max(self.grace);
        if wait.is_zero() {
            return (bound, None);
        }
        let mut proven = next;
        let span = (bound - next).min(self.window() - 1);
        for k in 0..=span {
            let seq = next.wrapping_add(k);
            let i = self.index(seq);
            if let (Slot::Packet { .. }, Some(at)) = (self.slot(i), self.arrived_at(i)) {
                if now.saturating_duration_since(at) < wait {
                    return (proven, Some(at + wait));
                }
                proven = seq.saturating_add(1).min(bound);
            }
        }
        (proven, None)
    }

    /// Changes the gap timeout (the daemon adapts it to the paths' RTT
    /// spread).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The gap timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Longest packet a slot holds.
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// Counters.
    pub fn stats(&self) -> ReorderStats {
        self.stats
    }

    /// Packets currently held.
    pub fn held(&self) -> usize {
        self.held
    }

    fn index(&self, seq: u64) -> usize {
        (seq as usize) & (self.ring - 1)
    }

    fn window(&self) -> u64 {
        self.ring as u64
    }

    /// Slot `i` (`Empty` while the ring is not made).
    fn slot(&self, i: usize) -> Slot {
        self.slots.get(i).copied().unwrap_or(Slot::Empty)
    }

    /// When the packet held in slot `i` arrived.
    fn arrived_at(&self, i: usize) -> Option<Instant> {
        self.arrived.get(i).copied().flatten()
    }

    /// Makes the per-slot arrays, before anything is written to them.
    fn ensure_ring(&mut self) {
        if self.slots.is_empty() {
            self.slots = vec![Slot::Empty; self.ring];
            self.arrived = vec![None; self.ring];
            self.waiter = vec![None; self.ring];
        }
    }

    /// Whether the per-slot arrays are made (tests).
    #[cfg(test)]
    pub(crate) fn ring_made(&self) -> bool {
        !self.slots.is_empty()
    }

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

    /// Marks the empty slot `i` as delivered ahead of the window base.
    fn mark_delivered(&mut self, i: usize) {
        self.ensure_ring();
        self.slots[i] = Slot::Delivered;
        self.occupied += 1;
    }

    /// `seq` just became done: delivers its waiter, then the waiter's
    /// waiter, and so on. A loop over distinct held packets: at most one
    /// pass over the ring.
    fn wake(&mut self, seq: u64, now: Instant, deliver: &mut impl FnMut(&[u8])) {
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
    fn drain(&mut self, now: Instant, deliver: &mut impl FnMut(&[u8])) {
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
    fn advance_to(&mut self, target: u64, now: Instant, deliver: &mut impl FnMut(&[u8])) {
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

    fn flush_all(&mut self, now: Instant, deliver: &mut impl FnMut(&[u8])) {
        if let Some(next) = self.next {
            self.advance_to(next.saturating_add(self.window()), now, deliver);
        }
    }

    /// Calls `f(seq, arrived)` for every held packet, in sequence order;
    /// one pass, ending at the last held packet.
    fn for_each_held(&self, mut f: impl FnMut(u64, Instant)) {
        let (Some(next), true) = (self.next, self.held > 0) else {
            return;
        };
        let mut seen = 0;
        for k in 0..self.window() {
            let seq = next.wrapping_add(k);
            let i = self.index(seq);
            if let (Slot::Packet { .. }, Some(at)) = (self.slot(i), self.arrived_at(i)) {
                f(seq, at);
                seen += 1;
                if seen == self.held {
                    return;
                }
            }
        }
    }

    /// When the packet held longest arrived, if anything is held (one pass
    /// over the held part of the ring; for status output).
    pub fn oldest_held(&self) -> Option<Instant> {
        let mut oldest: Option<Instant> = None;
        self.for_each_held(|_, at| oldest = Some(oldest.map_or(at, |o| o.min(at))));
        oldest
    }

    /// How long the packet held longest has waited by `now`.
    pub fn longest_hold(&self, now: Instant) -> Option<Duration> {
        self.oldest_held()
            .map(|at| now.saturating_duration_since(at))
    }

    /// When [`Resequencer::handle_timeout`] should next be called, if
    /// anything is held: when the longest wait reaches `timeout`. It may be
    /// early after the packet that waited longest was delivered another
    /// way; the call then releases nothing and brings the time up to date.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let gap = self.oldest_hint.map(|t| t + self.timeout)?;
        // A held packet may be waiting for an exempt hole: when the
        // exemption ends, the loss proof applies again.
        let repair = self.repairs.iter().flatten().map(|r| r.until).min();
        // A gap proven lost by the paths' order waits out the grace (and
        // the idle paths' wait, see `aged_below`).
        let aging = self.aging_until;
        Some(
            [repair, aging]
                .into_iter()
                .flatten()
                .fold(gap, Instant::min),
        )
    }

    /// Gives the packet storage back when nothing is held and nothing
    /// was for [`STORAGE_IDLE_RELEASE`] (every buffer is then on the free
    /// stack, so none is in use), and the per-slot arrays too when every
    /// slot is empty.
    fn release_idle_storage(&mut self, now: Instant) {
        if self.held == 0
            && (!self.storage.is_empty() || !self.slots.is_empty())
            && self
                .last_held
                .is_none_or(|t| now.saturating_duration_since(t) >= STORAGE_IDLE_RELEASE)
        {
            self.storage = Vec::new();
            if self.occupied == 0 {
                // Every slot empty: the ring is made again when needed.
                self.slots = Vec::new();
                self.arrived = Vec::new();
                self.waiter = Vec::new();
            }
            // Every buffer is free: lowest on top again, so the storage
            // grows from the start when it is needed next.
            let n = self.free.len();
            for (i, b) in self.free.iter_mut().enumerate() {
                *b = (n - 1 - i) as u32;
            }
        }
    }

    /// Bytes of packet storage allocated now.
    pub fn storage_bytes(&self) -> usize {
        self.storage.len()
    }

    /// Delivers every packet that has been held for `timeout` by `now`,
    /// giving up the gaps it waits for, and with it every gap below it: one
    /// pass to find the highest such packet, one to move the window.
    pub fn handle_timeout(&mut self, now: Instant, mut deliver: impl FnMut(&[u8])) {
        self.release_idle_storage(now);
        self.expire_repairs(now);
        // Gaps proven lost by the active paths whose wait for the idle
        // ones ended, and holes whose repair exemption ended.
        self.release_proven(now, &mut deliver);
        match self.oldest_hint {
            Some(t) if t + self.timeout <= now => {}
            _ => return,
        }
        let timeout = self.timeout;
        let mut expired: Option<u64> = None;
        // Held packets above the highest expired one, oldest first: what
        // stays held afterwards arrived no earlier than this.
        let mut oldest_left: Option<Instant> = None;
        self.for_each_held(|seq, at| {
            if at + timeout <= now {
                expired = Some(seq);
                oldest_left = None;
            } else {
                oldest_left = Some(oldest_left.map_or(at, |o| o.min(at)));
            }
        });
        if let Some(seq) = expired {
            // Gives up every gap below `seq`: the packet at `seq` then has
            // nothing left to wait for, whether it waits for global order
            // or for its flow predecessor, and is delivered with the rest.
            self.advance_to(seq, now, &mut deliver);
            // Should the packet sit at the base itself (it cannot: it would
            // have been delivered), this delivers it rather than leave it
            // held without a deadline.
            self.drain(now, &mut deliver);
        }
        self.oldest_hint = match (self.held, oldest_left) {
            (0, _) => None,
            (_, Some(t)) => Some(t),
            // Unreachable (every held packet has an arrival time); keep a
            // deadline rather than none.
            (_, None) => Some(now),
        };
    }
}

#[cfg(test)]
mod tests;
