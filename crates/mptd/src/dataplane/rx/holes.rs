//! Stage 3 of the receive path: holes. Every datagram with a trusted
//! sequence number moves its path's loss detector on; a hole in a path's
//! sequence is a loss or a datagram overtaken on the way in.
//!
//! A new hole is exempted from the resequencer's loss proof until the
//! detector decides it (after the path's reorder window) and, if it is
//! worth a repair, until the copy could arrive: otherwise the paths' order
//! would give it up at once. Decided holes become requests, sent after the
//! batch outside the resequencer lock, on the path that lost them
//! (`crate::dataplane::repair` builds and sends them); the peer's requests
//! received in the batch are answered there too. The decisions themselves
//! live in `mpt_proto::repair`.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use mpt_proto::reorder::{Resequencer, REORDER_GRACE};
use mpt_proto::repair::{DetectorStats, HoleEvent, LossDetector};
use mpt_proto::wire::{Header, Nack, MAX_DATAGRAM};

use crate::plane::{ConnShared, PathShared, PathTable};
use crate::sync::lock_unpoisoned;

/// Requests or answers queued per batch at most (more are dropped: the
/// detector's budget keeps ours far below).
const REPAIR_QUEUE: usize = 32;

/// Extra time a hole waits for its copy beyond 1.5 RTT of its path.
const REPAIR_MARGIN: Duration = Duration::from_millis(5);

/// How often the resequencer's reorder grace is brought down to the
/// detectors' windows when they shrink.
const GRACE_REFRESH: Duration = Duration::from_secs(1);

/// The receive side of loss repair of a connection: a detector per path,
/// and the messages to send once the batch is done.
pub struct Holes {
    detectors: Vec<LossDetector>,
    /// Per path: how long a hole asked for may wait for its copy (set
    /// from the path's RTT with each of its batches).
    waits: Vec<Duration>,
    /// The earliest hole decision of any detector (none: nothing to decide).
    due: Option<Instant>,
    /// When the resequencer's reorder grace was last set from the
    /// detectors' windows.
    grace_set: Option<Instant>,
    /// Requests to send: on which path, for what.
    requests: Vec<(usize, Nack)>,
    /// The peer's requests to answer: received on which path.
    answers: Vec<(usize, Nack)>,
    /// Buffer to build a message in.
    out: Vec<u8>,
}

/// How long a new hole's gap is kept from being given up beyond its
/// decision: the delay line's hold of the datagram that revealed it, and
/// (if it may be asked for) the time its copy takes.
#[derive(Debug, Clone, Copy)]
pub struct HoleWait {
    /// The delay line's hold of the datagram.
    pub equalized: Duration,
    /// How long a copy takes on this path.
    pub repair: Duration,
}

impl Holes {
    /// Nothing seen on any path.
    pub fn new() -> Holes {
        Holes {
            detectors: vec![LossDetector::new(); mpt_proto::sched::MAX_PATHS],
            waits: vec![Duration::ZERO; mpt_proto::sched::MAX_PATHS],
            due: None,
            grace_set: None,
            requests: Vec::with_capacity(REPAIR_QUEUE),
            answers: Vec::with_capacity(REPAIR_QUEUE),
            out: vec![0; MAX_DATAGRAM],
        }
    }

    /// Before a batch of path `pi`: whether its holes are watched (loss
    /// repair is on), and then how long a hole asked for may wait for its
    /// copy (the request goes back on this path, the copy comes on the
    /// fastest: within about this path's RTT).
    pub fn prepare(
        &mut self,
        conn: &ConnShared,
        pi: usize,
        path: Option<&PathShared>,
    ) -> Option<Duration> {
        if !(conn.repair.load(Relaxed) && pi < self.detectors.len()) {
            return None;
        }
        let rtt_ms = path.and_then(|path| lock_unpoisoned(&path.view).rtt_ms);
        let rtt = Duration::from_secs_f64(rtt_ms.unwrap_or(50.0).clamp(1.0, 2_000.0) * 1e-3);
        // Waiting for a hole longer than the path's RTT would make the
        // repair no faster than TCP's own recovery.
        self.detectors[pi].set_window_cap(rtt);
        let wait = rtt + rtt / 2 + REPAIR_MARGIN;
        self.waits[pi] = wait;
        Some(wait)
    }

    /// When the next hole is due to be decided, if any.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Forgets the pending decisions (loss repair was turned off).
    pub fn clear_due(&mut self) {
        self.due = None;
    }

    /// Path `pi` left the table: its detector starts afresh (the slot may
    /// be reused by a new path).
    pub fn forget_path(&mut self, pi: usize) {
        if let Some(d) = self.detectors.get_mut(pi) {
            *d = LossDetector::new();
        }
    }

    /// Queues the peer's request `nack`, received on path `pi`, to be
    /// answered after the batch. False if the queue is full.
    pub fn answer_later(&mut self, pi: usize, nack: Nack) -> bool {
        if self.answers.len() < REPAIR_QUEUE {
            self.answers.push((pi, nack));
            true
        } else {
            false
        }
    }

    /// Feeds a datagram's path and connection sequence numbers (`header`,
    /// received on path `pi` with one-way delay `owd_us`) to its path's
    /// loss detector. A new hole is exempted from the resequencer's loss
    /// proof until it is decided (and its copy could arrive); a datagram
    /// that fills one takes its part of the exemption back.
    pub fn watch(
        &mut self,
        conn: &ConnShared,
        reseq: &mut Resequencer,
        sighting: Sighting,
        now: Instant,
    ) {
        let Some(detector) = self.detectors.get_mut(sighting.pi) else {
            return;
        };
        let before = detector.stats();
        let event = detector.on_data(sighting.path_seq, sighting.seq, sighting.owd_us, now);
        let after = detector.stats();
        if after != before {
            count_holes(conn, before, after);
        }
        match event {
            None => {}
            Some(HoleEvent::Opened(hole)) => {
                let mut until = hole.decide_at + sighting.wait.equalized;
                if hole.repairable {
                    until += sighting.wait.repair;
                }
                reseq.expect_hole(hole.after_seq, hole.before_seq, hole.missing, until);
                self.due = Some(self.due.map_or(hole.decide_at, |d| d.min(hole.decide_at)));
            }
            Some(HoleEvent::Filled {
                after_seq,
                before_seq,
                ..
            }) => {
                reseq.hole_filled(after_seq, before_seq);
                // The path's window may have grown: so does the grace of gaps
                // no detector tracks.
                let window = detector.reorder_window();
                if window > reseq.reorder_grace() {
                    reseq.set_reorder_grace(window);
                }
            }
        }
    }

    /// Decides the holes whose reorder window ended: queues a request for
    /// each still missing and worth it, and keeps its gap exempt until the
    /// copy can arrive. Brings the resequencer's grace to the longest
    /// window.
    pub fn decide(&mut self, conn: &ConnShared, reseq: &mut Resequencer, now: Instant) {
        if self
            .grace_set
            .is_none_or(|t| now.saturating_duration_since(t) >= GRACE_REFRESH)
        {
            self.grace_set = Some(now);
            let longest = self
                .detectors
                .iter()
                .map(LossDetector::reorder_window)
                .max()
                .unwrap_or(REORDER_GRACE);
            reseq.set_reorder_grace(longest.max(REORDER_GRACE));
        }
        if self.due.is_none_or(|d| d > now) {
            return;
        }
        self.due = None;
        for (pi, detector) in self.detectors.iter_mut().enumerate() {
            if detector.next_decision().is_none_or(|d| d > now) {
                self.due = min_instant(self.due, detector.next_decision());
                continue;
            }
            let before = detector.stats();
            while let Some(loss) = detector.poll(now) {
                let until = now + self.waits[pi];
                if self.requests.len() < REPAIR_QUEUE
                    && reseq.expect_repair(loss.after_seq, loss.before_seq, loss.missing, until)
                {
                    self.requests.push((pi, loss.nack));
                }
            }
            let after = detector.stats();
            if after != before {
                count_holes(conn, before, after);
            }
            self.due = min_instant(self.due, detector.next_decision());
        }
    }

    /// Sends the batch's repair requests and answers the peer's.
    pub fn send(&mut self, conn: &ConnShared, table: &PathTable) {
        if self.requests.is_empty() && self.answers.is_empty() {
            return;
        }
        let now = Instant::now();
        let Holes {
            requests,
            answers,
            out,
            ..
        } = self;
        for (pi, nack) in requests.drain(..) {
            if let Some(path) = table.get(pi) {
                crate::dataplane::repair::request(conn, path, nack, now, out);
            }
        }
        for (pi, nack) in answers.drain(..) {
            if let Some(path) = table.get(pi) {
                crate::dataplane::repair::answer(conn, table, path, nack, now, out);
            }
        }
    }
}

/// A datagram with a trusted sequence number, as its path's loss
/// detector sees it.
#[derive(Debug, Clone, Copy)]
pub struct Sighting {
    /// The path it came on.
    pub pi: usize,
    /// Its path sequence number.
    pub path_seq: u32,
    /// Its connection sequence number.
    pub seq: u64,
    /// Receive clock − sender timestamp, µs, wrapping.
    pub owd_us: u32,
    /// How long a hole it reveals may wait.
    pub wait: HoleWait,
}

impl Sighting {
    /// The sighting of a datagram with `header` on path `pi`, received at
    /// `now_us` (the connection's wire clock).
    #[inline]
    pub fn of(header: &Header, pi: usize, now_us: u32, wait: HoleWait) -> Sighting {
        Sighting {
            pi,
            path_seq: header.path_seq,
            seq: header.seq,
            owd_us: now_us.wrapping_sub(header.timestamp_us),
            wait,
        }
    }
}

/// The earlier of two optional instants.
pub fn min_instant(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Adds what a detector newly counted to the connection's counters
/// (requests are counted when sent).
fn count_holes(conn: &ConnShared, before: DetectorStats, after: DetectorStats) {
    conn.repairs
        .congestion_holes
        .add(after.congestion.saturating_sub(before.congestion));
    conn.repairs
        .unrequested
        .add(after.unrequested.saturating_sub(before.unrequested));
    conn.repairs
        .reordered_holes
        .add(after.reordered.saturating_sub(before.reordered));
    conn.repairs
        .needless
        .add(after.needless.saturating_sub(before.needless));
}
