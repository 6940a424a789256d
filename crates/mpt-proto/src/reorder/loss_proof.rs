//! Gaps the paths' order proves lost: each path is first-in first-out, so
//! once every path carrying traffic delivered a sequence number above a
//! gap, nothing can fill it. What the proof waits for first: the reorder
//! grace, and the extra delay of idle paths that may start carrying data
//! (see [`Resequencer::set_path_wait`]).

use std::time::{Duration, Instant};

use super::{Resequencer, Slot};

impl Resequencer {
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
    /// Without this, a satellite path joining a DSL path makes the receiver
    /// give up hundreds of packets still in flight, which TCP takes as loss
    /// (measured: docs/results/2026-11-25-unlike-paths.md).
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

    /// Records that `path` delivered `seq` at `now`.
    pub(super) fn note_path(&mut self, path: usize, seq: u64, now: Instant) {
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
    pub(super) fn release_proven(&mut self, now: Instant, deliver: &mut impl FnMut(&[u8])) {
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
}
