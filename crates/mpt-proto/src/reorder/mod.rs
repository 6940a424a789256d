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
//!
//! # Files
//!
//! This file holds the types and the state; each other file adds the
//! methods of one concern to [`Resequencer`]: `insert.rs` (packets and
//! skip marks coming in), `release.rs` (the window moving on, waiters
//! woken), `loss_proof.rs` (gaps the paths' order proves lost),
//! `repairs.rs` (holes exempt while a repair is on its way), `timeout.rs`
//! (the timeout and what is held), `ring.rs` (the slot ring and its
//! storage), `hold.rs` (the hold-time histogram).

use std::time::{Duration, Instant};

use crate::sched::MAX_PATHS;

mod hold;
mod insert;
mod loss_proof;
mod release;
mod repairs;
mod ring;
mod timeout;

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
/// of microseconds. Without a grace such a swap reads as a loss, which TCP
/// answers with a retransmission (measured:
/// docs/results/2026-11-26-like-paths-transmit-order.md). A real loss
/// costs this much more hold. This is the
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
}

#[cfg(test)]
mod tests;
