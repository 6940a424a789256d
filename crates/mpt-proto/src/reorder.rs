//! Resequencing of a connection's datagrams, released by timeout.
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
//! Memory is fixed at construction: `slots × slot_len` bytes. A sequence
//! number more than `slots` ahead forces the oldest held packets out. A
//! sequence number far behind (the peer restarted and counts from 1 again)
//! resets the window.
//!
//! Every operation costs at most one pass over the ring, whatever the
//! sequence number: a datagram numbered 2^62 ahead gives up the whole
//! window in one pass (nothing can be held beyond it) and moves on, rather
//! than stepping through the numbers in between. The receive worker holds
//! the connection's lock while it calls in here, so a loop over the jump
//! would stop the connection.

use std::time::{Duration, Instant};

use crate::sched::MAX_PATHS;

/// What happened to an inserted packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Delivered at once (it was next in order).
    InOrder,
    /// Stored until the gap before it fills or times out.
    Held,
    /// Its gap was already given up; delivered at once.
    Late,
    /// Already held or delivered (a duplicate); dropped.
    Duplicate,
    /// Larger than a slot; delivered at once, out of order.
    Oversized,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Empty,
    Skip,
    Packet { len: usize },
}

/// Counters for status output and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReorderStats {
    /// Packets delivered in order on arrival.
    pub in_order: u64,
    /// Packets held and delivered later.
    pub held: u64,
    /// Packets that came after their gap was given up.
    pub late: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Gaps given up by timeout or window overflow.
    pub gaps_skipped: u64,
    /// Window resets (peer restart).
    pub resets: u64,
}

/// A fixed-size resequencing buffer for one connection.
#[derive(Debug, Clone)]
pub struct Resequencer {
    /// Next sequence number to deliver; `None` before the first packet.
    next: Option<u64>,
    slots: Vec<Slot>,
    arrived: Vec<Option<Instant>>,
    storage: Vec<u8>,
    slot_len: usize,
    held: usize,
    /// Slots not empty (held packets and skip marks): when none is, moving
    /// the window costs nothing.
    occupied: usize,
    timeout: Duration,
    stats: ReorderStats,
    /// Per path: highest sequence number delivered on it and when.
    paths: [Option<(u64, Instant)>; MAX_PATHS],
}

impl Resequencer {
    /// A buffer of `slots` slots (rounded up to a power of two, at least 2)
    /// of `slot_len` bytes each; gaps are given up after `timeout`.
    pub fn new(slots: usize, slot_len: usize, timeout: Duration) -> Resequencer {
        let slots = slots.max(2).next_power_of_two();
        Resequencer {
            next: None,
            slots: vec![Slot::Empty; slots],
            arrived: vec![None; slots],
            storage: vec![0; slots * slot_len],
            slot_len,
            held: 0,
            occupied: 0,
            timeout,
            stats: ReorderStats::default(),
            paths: [None; MAX_PATHS],
        }
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
        self.paths
            .iter()
            .flatten()
            .filter(|(_, at)| now.saturating_duration_since(*at) <= active)
            .map(|(high, _)| *high)
            .min()
    }

    /// Gives up the gaps that no path can fill any more.
    fn release_proven(&mut self, now: Instant, deliver: &mut impl FnMut(&[u8])) {
        if self.held == 0 {
            return;
        }
        if let (Some(bound), Some(next)) = (self.proven_lost_below(now), self.next) {
            if bound > next {
                self.advance_to(bound, deliver);
            }
        }
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

    /// Counters.
    pub fn stats(&self) -> ReorderStats {
        self.stats
    }

    /// Packets currently held.
    pub fn held(&self) -> usize {
        self.held
    }

    fn index(&self, seq: u64) -> usize {
        (seq as usize) & (self.slots.len() - 1)
    }

    fn window(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Where `seq` stands relative to the window; resets or slides the
    /// window as needed. Returns the next sequence number to deliver.
    fn prepare(&mut self, seq: u64, deliver: &mut impl FnMut(&[u8])) -> u64 {
        let next = match self.next {
            None => {
                self.next = Some(seq);
                seq
            }
            Some(n) => n,
        };
        if seq < next && next - seq > 4 * self.window() {
            // Far behind: the peer restarted its counter. Flush and restart.
            self.flush_all(deliver);
            self.stats.resets += 1;
            self.next = Some(seq);
            return seq;
        }
        if seq - next.min(seq) >= self.window() {
            // Too far ahead for the ring: give up the oldest gaps until it fits.
            let new_next = seq - self.window() + 1;
            self.advance_to(new_next, deliver);
        }
        self.next.unwrap_or(seq)
    }

    /// Inserts the data packet with sequence number `seq` received on
    /// `path`; everything that becomes deliverable is passed to `deliver`
    /// in sequence order.
    pub fn insert(
        &mut self,
        seq: u64,
        path: usize,
        packet: &[u8],
        now: Instant,
        mut deliver: impl FnMut(&[u8]),
    ) -> Outcome {
        let outcome = self.insert_inner(seq, packet, now, &mut deliver);
        self.note_path(path, seq, now);
        self.release_proven(now, &mut deliver);
        outcome
    }

    fn insert_inner(
        &mut self,
        seq: u64,
        packet: &[u8],
        now: Instant,
        mut deliver: impl FnMut(&[u8]),
    ) -> Outcome {
        let next = self.prepare(seq, &mut deliver);
        if seq < next {
            self.stats.late += 1;
            deliver(packet);
            return Outcome::Late;
        }
        let i = self.index(seq);
        if self.slots[i] != Slot::Empty {
            self.stats.duplicates += 1;
            return Outcome::Duplicate;
        }
        if seq == next {
            self.stats.in_order += 1;
            deliver(packet);
            self.next = Some(next.saturating_add(1));
            self.drain(&mut deliver);
            return Outcome::InOrder;
        }
        if packet.len() > self.slot_len {
            deliver(packet);
            return Outcome::Oversized;
        }
        let off = i * self.slot_len;
        self.storage[off..off + packet.len()].copy_from_slice(packet);
        self.slots[i] = Slot::Packet { len: packet.len() };
        self.arrived[i] = Some(now);
        self.held += 1;
        self.occupied += 1;
        Outcome::Held
    }

    /// Marks `seq`, received on `path`, as consumed by a datagram without
    /// data.
    pub fn skip(&mut self, seq: u64, path: usize, now: Instant, mut deliver: impl FnMut(&[u8])) {
        let next = self.prepare(seq, &mut deliver);
        if seq == next {
            self.next = Some(next.saturating_add(1));
            self.drain(&mut deliver);
        } else if seq > next {
            let i = self.index(seq);
            if self.slots[i] == Slot::Empty {
                self.slots[i] = Slot::Skip;
                self.arrived[i] = Some(now);
                self.occupied += 1;
            }
        }
        self.note_path(path, seq, now);
        self.release_proven(now, &mut deliver);
    }

    /// Empties slot `i`, delivering its packet if it holds one; returns
    /// what the slot held.
    fn release(&mut self, i: usize, deliver: &mut impl FnMut(&[u8])) -> Slot {
        let slot = self.slots[i];
        if let Slot::Packet { len } = slot {
            let off = i * self.slot_len;
            deliver(&self.storage[off..off + len]);
            self.held -= 1;
            self.stats.held += 1;
        }
        if slot != Slot::Empty {
            self.occupied -= 1;
        }
        self.slots[i] = Slot::Empty;
        self.arrived[i] = None;
        slot
    }

    /// Delivers the contiguous run at the head of the window.
    fn drain(&mut self, deliver: &mut impl FnMut(&[u8])) {
        let Some(mut next) = self.next else { return };
        // At most one pass: every slot released here was occupied.
        while self.occupied > 0 && self.slots[self.index(next)] != Slot::Empty {
            self.release(self.index(next), deliver);
            next = next.saturating_add(1);
        }
        self.next = Some(next);
    }

    /// Gives up every gap before `target`, delivering what is held there.
    ///
    /// Only the first window's worth of numbers can hold anything, so at
    /// most one pass over the ring is made; the rest of a longer jump is
    /// counted as skipped gaps in one step.
    fn advance_to(&mut self, target: u64, deliver: &mut impl FnMut(&[u8])) {
        let Some(next) = self.next else { return };
        if target <= next {
            return;
        }
        let span = target - next;
        let visited = span.min(self.window());
        let mut released = 0u64;
        if self.occupied > 0 {
            for k in 0..visited {
                if self.release(self.index(next.wrapping_add(k)), deliver) != Slot::Empty {
                    released += 1;
                }
                if self.occupied == 0 {
                    break;
                }
            }
        }
        self.stats.gaps_skipped = self.stats.gaps_skipped.saturating_add(span - released);
        self.next = Some(target);
        self.drain(deliver);
    }

    fn flush_all(&mut self, deliver: &mut impl FnMut(&[u8])) {
        if let Some(next) = self.next {
            self.advance_to(next.saturating_add(self.window()), deliver);
        }
    }

    /// When the oldest held packet's wait ends, if anything is held.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.held == 0 {
            return None;
        }
        let next = self.next?;
        // The oldest held packet is the first non-empty slot after `next`.
        (0..self.window())
            .map(|k| self.index(next.wrapping_add(k)))
            .find(|&i| matches!(self.slots[i], Slot::Packet { .. }))
            .and_then(|i| self.arrived[i])
            .map(|t| t + self.timeout)
    }

    /// Gives up the gaps whose packets waited `timeout` by `now`.
    pub fn handle_timeout(&mut self, now: Instant, mut deliver: impl FnMut(&[u8])) {
        while let Some(deadline) = self.poll_timeout() {
            if deadline > now {
                break;
            }
            // Skip up to the oldest held packet; drain delivers it and
            // everything contiguous after it.
            let Some(next) = self.next else { return };
            let first_held = (0..self.window())
                .map(|k| next.wrapping_add(k))
                .find(|&s| self.slots[self.index(s)] != Slot::Empty)
                .unwrap_or(next);
            self.advance_to(first_held, &mut deliver);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[allow(clippy::disallowed_methods)]
    fn t0() -> Instant {
        Instant::now()
    }

    fn pkt(seq: u64) -> Vec<u8> {
        seq.to_be_bytes().to_vec()
    }

    fn seq_of(p: &[u8]) -> u64 {
        u64::from_be_bytes(p.try_into().expect("8 bytes"))
    }

    struct Out(Vec<u64>);
    impl Out {
        fn sink(&mut self) -> impl FnMut(&[u8]) + '_ {
            |p| self.0.push(seq_of(p))
        }
    }

    #[test]
    fn in_order_passes_straight_through() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, 10 * MS);
        let mut out = Out(vec![]);
        for s in 100..110 {
            assert_eq!(r.insert(s, 0, &pkt(s), t, out.sink()), Outcome::InOrder);
        }
        assert_eq!(out.0, (100..110).collect::<Vec<_>>());
        assert_eq!(r.held(), 0);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn two_interleaved_paths_are_resequenced() {
        let t = t0();
        let mut r = Resequencer::new(64, 64, 10 * MS);
        let mut out = Out(vec![]);
        // Path 0 carries even, path 1 odd sequence numbers; path 1's batch
        // arrives first except for the very first packet.
        r.insert(0, 0, &pkt(0), t, out.sink());
        for s in (1..20).step_by(2) {
            r.insert(s, 1, &pkt(s), t, out.sink());
        }
        for s in (2..20).step_by(2) {
            r.insert(s, 0, &pkt(s), t, out.sink());
        }
        assert_eq!(out.0, (0..20).collect::<Vec<_>>());
        assert_eq!(r.stats().held, 9);
        assert_eq!(r.stats().gaps_skipped, 0);
    }

    #[test]
    fn skips_fill_gaps() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, 10 * MS);
        let mut out = Out(vec![]);
        r.insert(1, 0, &pkt(1), t, out.sink());
        assert_eq!(r.insert(3, 1, &pkt(3), t, out.sink()), Outcome::Held);
        r.skip(2, 0, t, out.sink());
        assert_eq!(out.0, [1, 3]);
        // A skip ahead of time also works.
        r.skip(5, 1, t, out.sink());
        r.insert(6, 1, &pkt(6), t, out.sink());
        r.insert(4, 0, &pkt(4), t, out.sink());
        assert_eq!(out.0, [1, 3, 4, 6]);
    }

    #[test]
    fn loss_is_proven_when_every_active_path_has_moved_past_the_gap() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
        let mut out = Out(vec![]);
        r.insert(0, 1, &pkt(0), t, out.sink());
        r.insert(1, 0, &pkt(1), t, out.sink());
        // 2 was sent on path 1 and lost.
        r.insert(3, 0, &pkt(3), t, out.sink());
        assert_eq!(out.0, [0, 1], "path 1 may still bring 2");
        r.insert(4, 1, &pkt(4), t, out.sink());
        assert_eq!(out.0, [0, 1, 3, 4], "path 1 moved past 2: it is lost");
        assert_eq!(r.stats().gaps_skipped, 1);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn a_forgotten_path_no_longer_holds_up_loss_proofs() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
        let mut out = Out(vec![]);
        r.insert(0, 1, &pkt(0), t, out.sink());
        r.insert(1, 0, &pkt(1), t, out.sink());
        r.insert(3, 0, &pkt(3), t, out.sink());
        assert_eq!(out.0, [0, 1], "path 1 may still bring 2");
        // Path 1 is removed: only path 0 is left, and it moved past 2.
        r.forget_path(1);
        r.insert(4, 0, &pkt(4), t, out.sink());
        assert_eq!(out.0, [0, 1, 3, 4]);
        r.forget_path(99);
    }

    #[test]
    fn single_path_loss_released_by_next_packet() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
        let mut out = Out(vec![]);
        r.insert(1, 0, &pkt(1), t, out.sink());
        r.insert(3, 0, &pkt(3), t, out.sink());
        assert_eq!(out.0, [1, 3]);
    }

    #[test]
    fn quiet_path_stops_counting_after_two_timeouts() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, 10 * MS);
        let mut out = Out(vec![]);
        r.insert(1, 1, &pkt(1), t, out.sink());
        // Path 1 goes quiet; path 0 carries on past a gap.
        let later = t + 25 * MS;
        r.insert(3, 0, &pkt(3), later, out.sink());
        assert_eq!(out.0, [1, 3]);
    }

    #[test]
    fn lost_packet_is_given_up_after_timeout_and_late_arrival_delivered() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, 10 * MS);
        let mut out = Out(vec![]);
        r.insert(1, 0, &pkt(1), t, out.sink());
        r.insert(3, 1, &pkt(3), t + MS, out.sink());
        r.insert(4, 1, &pkt(4), t + 2 * MS, out.sink());
        assert_eq!(r.poll_timeout(), Some(t + 11 * MS));
        r.handle_timeout(t + 10 * MS, out.sink());
        assert_eq!(out.0, [1], "not yet");
        r.handle_timeout(t + 11 * MS, out.sink());
        assert_eq!(out.0, [1, 3, 4]);
        assert_eq!(r.stats().gaps_skipped, 1);
        assert_eq!(
            r.insert(2, 0, &pkt(2), t + 12 * MS, out.sink()),
            Outcome::Late
        );
        assert_eq!(out.0, [1, 3, 4, 2]);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn several_gaps_time_out_one_after_another() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, 10 * MS);
        let mut out = Out(vec![]);
        r.insert(1, 0, &pkt(1), t, out.sink());
        r.insert(3, 1, &pkt(3), t, out.sink());
        r.insert(6, 1, &pkt(6), t + 5 * MS, out.sink());
        r.handle_timeout(t + 10 * MS, out.sink());
        assert_eq!(out.0, [1, 3]);
        assert_eq!(r.poll_timeout(), Some(t + 15 * MS));
        r.handle_timeout(t + 15 * MS, out.sink());
        assert_eq!(out.0, [1, 3, 6]);
    }

    #[test]
    fn duplicates_dropped() {
        let t = t0();
        let mut r = Resequencer::new(16, 64, 10 * MS);
        let mut out = Out(vec![]);
        r.insert(1, 0, &pkt(1), t, out.sink());
        r.insert(3, 1, &pkt(3), t, out.sink());
        assert_eq!(r.insert(3, 1, &pkt(3), t, out.sink()), Outcome::Duplicate);
        r.insert(2, 0, &pkt(2), t, out.sink());
        assert_eq!(out.0, [1, 2, 3]);
        assert_eq!(r.stats().duplicates, 1);
    }

    #[test]
    fn far_ahead_sequence_forces_window_forward() {
        let t = t0();
        let mut r = Resequencer::new(8, 64, Duration::from_secs(10));
        let mut out = Out(vec![]);
        r.insert(0, 0, &pkt(0), t, out.sink());
        r.insert(2, 1, &pkt(2), t, out.sink());
        r.insert(20, 1, &pkt(20), t, out.sink());
        // 2 was forced out; 20 now waits at the end of the window.
        assert_eq!(out.0, [0, 2]);
        assert_eq!(r.held(), 1);
        for s in 13..20 {
            r.insert(s, 0, &pkt(s), t, out.sink());
        }
        assert_eq!(out.0, [0, 2, 13, 14, 15, 16, 17, 18, 19, 20]);
    }

    #[test]
    fn peer_restart_resets_window() {
        let t = t0();
        let mut r = Resequencer::new(8, 64, 10 * MS);
        let mut out = Out(vec![]);
        r.insert(1000, 0, &pkt(1000), t, out.sink());
        r.insert(1002, 0, &pkt(1002), t, out.sink());
        r.insert(1, 0, &pkt(1), t, out.sink());
        r.insert(2, 0, &pkt(2), t, out.sink());
        assert_eq!(out.0, [1000, 1002, 1, 2]);
        assert_eq!(r.stats().resets, 1);
    }

    #[test]
    fn a_jump_of_2_pow_62_costs_one_pass_and_keeps_order_after_it() {
        let t = t0();
        let mut r = Resequencer::new(4096, 16, Duration::from_secs(1));
        let mut out = Out(vec![]);
        r.insert(1, 0, &pkt(1), t, out.sink());
        r.insert(3, 1, &pkt(3), t, out.sink());
        let far = 1u64 << 62;
        // Both kinds of datagram that can carry a sequence number: a skip
        // (probe) and data. Each must return at once, not step through
        // 2^62 numbers.
        r.skip(far, 0, t, out.sink());
        assert_eq!(out.0, [1, 3], "the held packet is given up, in order");
        assert_eq!(r.held(), 0);
        assert!(r.stats().gaps_skipped >= far - 2 * 4096);
        r.insert(far + 2, 0, &pkt(far + 2), t, out.sink());
        r.insert(far + 1, 1, &pkt(far + 1), t, out.sink());
        assert_eq!(out.0, [1, 3, far + 1, far + 2]);
        // Back from the top of the range (the peer restarted): a reset.
        r.insert(u64::MAX - 1, 0, &pkt(u64::MAX - 1), t, out.sink());
        r.insert(u64::MAX, 0, &pkt(u64::MAX), t, out.sink());
        r.insert(7, 0, &pkt(7), t, out.sink());
        r.insert(8, 0, &pkt(8), t, out.sink());
        assert_eq!(out.0[4..], [u64::MAX - 1, u64::MAX, 7, 8]);
        assert_eq!(r.stats().resets, 1);
    }

    #[test]
    fn alternating_huge_jumps_stay_bounded_and_lose_nothing_held() {
        let t = t0();
        let mut r = Resequencer::new(64, 16, Duration::from_secs(1));
        let mut out = Out(vec![]);
        let mut expect = vec![];
        let mut base = 0u64;
        for round in 0..200u64 {
            // A gap and a held packet, then a jump far ahead or far back.
            r.insert(base, 0, &pkt(base), t, out.sink());
            r.insert(base + 2, 1, &pkt(base + 2), t, out.sink());
            expect.extend([base, base + 2]);
            base = if round % 2 == 0 {
                u64::MAX / 2 + round
            } else {
                round
            };
        }
        r.handle_timeout(t + Duration::from_secs(2), out.sink());
        assert_eq!(out.0, expect);
        assert_eq!(r.held(), 0);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn oversized_packet_is_not_stored() {
        let t = t0();
        let mut r = Resequencer::new(8, 4, 10 * MS);
        let mut n = 0;
        r.insert(0, 0, &[0; 4], t, |_| n += 1);
        assert_eq!(r.insert(2, 1, &[0; 5], t, |_| n += 1), Outcome::Oversized);
        assert_eq!(n, 2);
    }

    #[test]
    fn random_merges_of_fifo_paths_come_out_in_order_exactly_once() {
        let t = t0();
        let mut rng = 0x1234_5678_9abc_def0_u64;
        let mut next_rand = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..50 {
            let mut r = Resequencer::new(256, 16, Duration::from_secs(1));
            // Three FIFO paths, sequence numbers dealt at random, arrivals
            // merged at random. Each path first brings a probe (as paths do
            // before they carry data), so the resequencer knows all three.
            let mut out = Out(vec![]);
            for p in 0..3u64 {
                r.skip(p, p as usize, t, out.sink());
            }
            let mut per_path: Vec<Vec<u64>> = vec![vec![]; 3];
            for s in 3..300u64 {
                per_path[(next_rand() % 3) as usize].push(s);
            }
            let mut cursors = [0usize; 3];
            while cursors.iter().zip(&per_path).any(|(c, p)| *c < p.len()) {
                let p = (next_rand() % 3) as usize;
                if let Some(&s) = per_path[p].get(cursors[p]) {
                    cursors[p] += 1;
                    r.insert(s, p, &pkt(s), t, out.sink());
                }
            }
            assert_eq!(out.0, (3..300).collect::<Vec<_>>());
            assert_eq!(r.stats().gaps_skipped, 0);
        }
    }
}
