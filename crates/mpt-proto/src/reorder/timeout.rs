//! The safety net: a held packet waits at most the timeout, counted from
//! its own arrival; and what is held now, for status output.

use std::time::{Duration, Instant};

use super::{Resequencer, Slot};

impl Resequencer {
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
