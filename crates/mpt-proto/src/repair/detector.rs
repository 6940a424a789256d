//! The receiver's side of loss repair: a [`LossDetector`] per path finds
//! the holes in the path's sequence, waits out the path's reorder window,
//! and asks for what is still missing then.
//!
//! # Why wait before asking
//!
//! A path is first-in first-out on the wire, but not always on its way into
//! the receiver: datagrams that two CPUs put on one veth or NIC queue are
//! taken in by the two CPUs' backlogs in parallel and may swap places, by
//! tens of microseconds on a quiet machine and by milliseconds on a loaded
//! one (a backlog waits for its CPU's softirq). Asking at once for every
//! hole then asks again for datagrams that are merely late, many times more
//! than the real drops, each copy sent and delivered twice, and the gaps
//! given up under them (measured:
//! docs/results/2026-11-26-like-paths-transmit-order.md).
//!
//! So a hole is not asked for at once. It is tracked ([`MAX_OPEN_HOLES`] at
//! a time) and decided when it has been open for the path's reorder
//! window: asked for if some of it is still missing, forgotten if all of it
//! arrived. Until then the caller keeps the resequencer from giving the gap
//! up ([`HoleEvent::Opened`] says until when). This is what RACK does for
//! TCP (RFC 8985): time, not a count of later arrivals, decides a loss.
//!
//! # How long to wait
//!
//! The window is measured, not configured: every datagram that fills a
//! tracked hole tells how long after the hole was seen it came (its
//! reorder extent). The window is the largest extent of the last 5 to
//! 10 s, plus a quarter, between [`MIN_REORDER_WINDOW`] and a cap the
//! caller sets from the path's RTT (a window near the RTT would make repair
//! no faster than TCP's own). A quiet LAN keeps the minimum; a loaded host
//! grows the window within one swap, and it shrinks again 5-10 s after the
//! swaps stop. Holes filled after they were asked for (the repair was
//! needless) are counted, so the cost is visible.
//!
//! # Which holes are asked for
//!
//! * **Only random losses.** A hole found while the path's queue is empty
//!   (the datagram after it came with a one-way delay near the path's
//!   floor) is the link's own loss: TCP must not hear of it. A hole while a
//!   queue stands is most likely a queue that overflowed: TCP must hear of
//!   it, or it would never slow down, so it is left alone.
//! * **Bounded cost.** Requests are rate-limited per received datagram
//!   (one per [`NACK_EVERY`] on average), and a run longer than
//!   [`crate::wire::MAX_NACK_RUN`] is an outage and not asked for.

use std::time::{Duration, Instant};

use crate::seq::{seq_before, seq_excess};
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

/// The shortest reorder window: how long a hole waits before it is asked
/// for when the path never swapped datagrams. Swaps on a quiet host last
/// tens to hundreds of microseconds.
pub const MIN_REORDER_WINDOW: Duration = Duration::from_millis(1);

/// The longest reorder window whatever the caller's cap.
pub const MAX_REORDER_WINDOW: Duration = Duration::from_millis(50);

/// Holes tracked at once per path. A new hole when all are taken
/// replaces the oldest one already decided, or, if none is, is decided at
/// once (as without a window).
pub const MAX_OPEN_HOLES: usize = 8;

/// How long a hole that was asked for stays tracked, so that its
/// datagrams arriving after all are recognised (needless repair, and a
/// reorder extent longer than the window).
const ASKED_MEMORY: Duration = Duration::from_secs(1);

/// Length of each of the two windows over which the delay floor, the
/// highest queueing delay and the longest reorder extent are kept (so they
/// cover 5 to 10 s).
const WINDOW: Duration = Duration::from_secs(5);

/// A hole to ask the sender to repair, from [`LossDetector::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    /// What to ask the sender for.
    pub nack: Nack,
    /// The connection sequence number of the datagram before the hole on
    /// this path: the lost ones lie strictly between this and `before`.
    pub after_seq: u64,
    /// The connection sequence number of the datagram after the hole.
    pub before_seq: u64,
    /// Datagrams still missing in the hole (the nack may name some that
    /// arrived: it is one run).
    pub missing: u16,
}

/// A hole just found, from [`LossDetector::on_data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    /// The connection sequence number of the datagram before the hole on
    /// this path.
    pub after_seq: u64,
    /// The connection sequence number of the datagram after it.
    pub before_seq: u64,
    /// Datagrams missing on the path.
    pub missing: u16,
    /// When it is decided (see [`LossDetector::poll`]): until then the gap
    /// is not a proven loss.
    pub decide_at: Instant,
    /// Whether it will be asked for if still open then (a random loss);
    /// if not, the gap may be given up from `decide_at` on.
    pub repairable: bool,
}

/// What a datagram told about the path's holes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoleEvent {
    /// A hole opened in the path's sequence.
    Opened(Hole),
    /// A datagram of a tracked hole arrived after all: it was overtaken on
    /// its way in.
    Filled {
        /// Its connection sequence number.
        seq: u64,
        /// The hole's `after_seq` and `before_seq`, as opened.
        after_seq: u64,
        /// See `after_seq`.
        before_seq: u64,
        /// Its repair was asked for already (needless).
        asked: bool,
    },
}

/// The lowest one-way delay, the highest queueing delay and the longest
/// reorder extent over two consecutive windows.
#[derive(Debug, Clone, Copy)]
struct TwoWindows {
    start: Option<Instant>,
    /// Lowest delay (wrapping µs) of the current window and the previous.
    floor: [Option<u32>; 2],
    /// Highest queueing delay (µs) of the current window and the previous.
    peak: [u32; 2],
    /// Longest reorder extent of the current window and the previous.
    extent: [Duration; 2],
}

impl TwoWindows {
    fn new() -> TwoWindows {
        TwoWindows {
            start: None,
            floor: [None; 2],
            peak: [0; 2],
            extent: [Duration::ZERO; 2],
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
                    self.extent = [Duration::ZERO, self.extent[0]];
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
            [Some(a), Some(b)] => Some(if seq_before(a, b) { a } else { b }),
            [a, b] => a.or(b),
        }
    }

    fn note_delay(&mut self, owd_us: u32) {
        match self.floor[0] {
            Some(f) if !seq_before(owd_us, f) => {}
            _ => self.floor[0] = Some(owd_us),
        }
    }

    fn peak(&self) -> u32 {
        self.peak[0].max(self.peak[1])
    }

    fn note_queue(&mut self, queue_us: u32) {
        self.peak[0] = self.peak[0].max(queue_us);
    }

    fn extent(&self) -> Duration {
        self.extent[0].max(self.extent[1])
    }

    fn note_extent(&mut self, extent: Duration) {
        self.extent[0] = self.extent[0].max(extent);
    }
}

/// A hole being tracked.
#[derive(Debug, Clone, Copy)]
struct OpenHole {
    /// Its first path sequence number; it spans `count`.
    first: u32,
    count: u16,
    /// Bit i: `first + i` still missing.
    missing: u32,
    after_seq: u64,
    before_seq: u64,
    found_at: Instant,
    decide_at: Instant,
    repairable: bool,
    /// Decided (asked for, or left alone); kept only to recognise late
    /// arrivals.
    decided: bool,
    asked: bool,
}

impl OpenHole {
    /// Index of `path_seq` in the hole, if it falls in it.
    fn index(&self, path_seq: u32) -> Option<u32> {
        let i = path_seq.wrapping_sub(self.first);
        (i < u32::from(self.count)).then_some(i)
    }
}

/// Receiver side, one per path: watches the path's sequence numbers and
/// one-way delays and says which holes to ask for again, and when.
#[derive(Debug, Clone)]
pub struct LossDetector {
    /// Path and connection sequence number of the newest datagram.
    last: Option<(u32, u64)>,
    /// The path's one-way delay floor (µs, the receiver's clock minus the
    /// sender's, so with an unknown offset), its recent queueing peak and
    /// its recent longest reorder extent.
    history: TwoWindows,
    holes: [Option<OpenHole>; MAX_OPEN_HOLES],
    /// The longest window allowed (from the path's RTT).
    cap: Duration,
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
    /// Holes that filled completely within the reorder window (nothing
    /// was lost: the datagrams were overtaken on their way in).
    pub reordered: u64,
    /// Datagrams that arrived after their repair was asked for.
    pub needless: u64,
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
            history: TwoWindows::new(),
            holes: [None; MAX_OPEN_HOLES],
            cap: MAX_REORDER_WINDOW,
            tokens: NACK_BURST * NACK_EVERY,
            stats: DetectorStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> DetectorStats {
        self.stats
    }

    /// Caps the reorder window (the caller passes about the path's RTT:
    /// waiting longer would make a repair no faster than TCP's own
    /// recovery). Never below [`MIN_REORDER_WINDOW`] nor above
    /// [`MAX_REORDER_WINDOW`].
    pub fn set_window_cap(&mut self, cap: Duration) {
        self.cap = cap.clamp(MIN_REORDER_WINDOW, MAX_REORDER_WINDOW);
    }

    /// How long a hole waits before it is decided: the longest reorder
    /// extent seen lately plus a quarter, within the bounds.
    pub fn reorder_window(&self) -> Duration {
        let e = self.history.extent();
        (e + e / 4).clamp(MIN_REORDER_WINDOW, self.cap)
    }

    /// When [`LossDetector::poll`] has a hole to decide, if any.
    pub fn next_decision(&self) -> Option<Instant> {
        self.holes
            .iter()
            .flatten()
            .filter(|h| !h.decided)
            .map(|h| h.decide_at)
            .min()
    }

    /// Takes in a data-carrying datagram (`path_seq`, connection `seq`,
    /// `owd_us` = receiver clock − sender timestamp, wrapping) that arrived
    /// on this path at `now`; tells whether it opened a hole or filled one.
    pub fn on_data(
        &mut self,
        path_seq: u32,
        seq: u64,
        owd_us: u32,
        now: Instant,
    ) -> Option<HoleEvent> {
        self.tokens = (self.tokens + 1).min(NACK_BURST * NACK_EVERY);
        self.history.rotate(now);
        // Queueing delay: above the floor; the wrapping difference stays
        // small whatever the clocks' offset.
        let queue_us = self.history.floor().map_or(0, |f| seq_excess(owd_us, f));
        let peak = self.history.peak();
        self.history.note_delay(owd_us);
        self.history.note_queue(queue_us);
        let Some((last_pseq, last_seq)) = self.last else {
            self.last = Some((path_seq, seq));
            return None;
        };
        let advance = path_seq.wrapping_sub(last_pseq);
        if advance == 0 {
            return None;
        }
        if seq_before(path_seq, last_pseq) {
            // Overtaken on the way in: a hole it belongs to fills.
            return self.fill(path_seq, seq, now);
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
        let count = missing as u16;
        let repairable = queue_us <= RANDOM_QUEUE_US.max(peak / 2);
        let hole = OpenHole {
            first: last_pseq.wrapping_add(1),
            count,
            missing: if count >= 32 {
                u32::MAX
            } else {
                (1u32 << count) - 1
            },
            after_seq: last_seq,
            before_seq: seq,
            found_at: now,
            decide_at: now + self.reorder_window(),
            repairable,
            decided: false,
            asked: false,
        };
        let free = self.holes.iter().position(Option::is_none);
        // All taken: the oldest hole already decided makes room.
        let decided = || {
            self.holes
                .iter()
                .enumerate()
                .filter_map(|(i, h)| h.filter(|h| h.decided).map(|h| (i, h.found_at)))
                .min_by_key(|&(_, at)| at)
                .map(|(i, _)| i)
        };
        let Some(slot) = free.or_else(decided) else {
            // Every slot holds a hole still in its window (rare: eight on
            // one path at once): this one is not tracked nor asked for,
            // and its gap may be given up at once.
            self.stats.unrequested += 1;
            return Some(HoleEvent::Opened(Hole {
                after_seq: last_seq,
                before_seq: seq,
                missing: count,
                decide_at: now,
                repairable: false,
            }));
        };
        self.holes[slot] = Some(hole);
        Some(HoleEvent::Opened(Hole {
            after_seq: hole.after_seq,
            before_seq: hole.before_seq,
            missing: count,
            decide_at: hole.decide_at,
            repairable,
        }))
    }

    /// A datagram below the newest arrived: fills its hole if tracked.
    fn fill(&mut self, path_seq: u32, seq: u64, now: Instant) -> Option<HoleEvent> {
        let (slot, bit) = self
            .holes
            .iter()
            .enumerate()
            .find_map(|(s, h)| h.and_then(|h| h.index(path_seq)).map(|i| (s, i)))?;
        let h = self.holes[slot].as_mut()?;
        if h.missing & (1 << bit) == 0 {
            return None; // a duplicate
        }
        h.missing &= !(1 << bit);
        let (asked, found_at) = (h.asked, h.found_at);
        let (after_seq, before_seq) = (h.after_seq, h.before_seq);
        if h.missing == 0 {
            if !h.decided {
                self.stats.reordered += 1;
            }
            self.holes[slot] = None;
        }
        if asked {
            self.stats.needless += 1;
        }
        self.history
            .note_extent(now.saturating_duration_since(found_at));
        Some(HoleEvent::Filled {
            seq,
            after_seq,
            before_seq,
            asked,
        })
    }

    /// Decides the holes whose window ended by `now`: returns the next one
    /// to ask the sender for (call again until `None`). Holes not worth
    /// asking for are counted and forgotten; all of a hole that arrived
    /// meanwhile was forgotten when it did.
    pub fn poll(&mut self, now: Instant) -> Option<Loss> {
        for slot in 0..MAX_OPEN_HOLES {
            let Some(h) = self.holes[slot] else { continue };
            if h.decided {
                if now.saturating_duration_since(h.found_at) >= ASKED_MEMORY {
                    self.holes[slot] = None;
                }
                continue;
            }
            if h.decide_at > now {
                continue;
            }
            if !h.repairable {
                self.stats.congestion += 1;
                self.holes[slot] = None;
                continue;
            }
            if self.tokens < NACK_EVERY {
                self.stats.unrequested += 1;
                self.holes[slot] = None;
                continue;
            }
            self.tokens -= NACK_EVERY;
            // The run from the first to the last datagram still missing.
            let lo = h.missing.trailing_zeros();
            let hi = 31 - h.missing.leading_zeros();
            let missing = h.missing.count_ones() as u16;
            self.stats.requested += 1;
            self.stats.requested_datagrams += u64::from(missing);
            if let Some(h) = self.holes[slot].as_mut() {
                h.decided = true;
                h.asked = true;
            }
            return Some(Loss {
                nack: Nack {
                    first_path_seq: h.first.wrapping_add(lo),
                    count: (hi - lo + 1) as u16,
                },
                after_seq: h.after_seq,
                before_seq: h.before_seq,
                missing,
            });
        }
        None
    }
}
