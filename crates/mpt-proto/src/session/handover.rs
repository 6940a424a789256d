//! Handover gaps: how long this side's traffic had no working path when a
//! path it was using failed.
//!
//! A handover starts when a path that carried data leaves service (suspect,
//! down, or its local link gone) and ends with the first data sent on
//! another path after that. Its gap runs from the last packet heard on the
//! old path to that first send: the time during which what we sent went
//! into a path that no longer delivered, plus the time to move over. It is
//! measured on the sending side, with one clock, so it needs nothing from
//! the peer; what an application sees at the far end is this gap plus the
//! difference of the two paths' one-way delays.
//!
//! With striping the other path is already carrying data, so the gap is
//! the detection time; with a backup it also includes the backup's start.
//! A path that comes back before anything moved ends the handover without
//! one. Only the oldest open handover is followed: when a second path fails
//! meanwhile, the traffic's outage began with the first.

use std::time::{Duration, Instant};

/// One completed handover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handover {
    /// The path that left service.
    pub from: usize,
    /// The path that carried the first data after it.
    pub to: usize,
    /// From the last packet heard on `from` to the first data sent on `to`.
    pub gap: Duration,
    /// When it completed (the first data sent on `to`).
    pub at: Instant,
}

/// A path left service; no data has moved yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Open {
    from: usize,
    last_heard: Instant,
    left_at: Instant,
}

/// Follows handovers of one session.
#[derive(Debug, Clone, Default)]
pub struct HandoverTracker {
    open: Option<Open>,
    last: Option<Handover>,
    count: u64,
}

impl HandoverTracker {
    /// Path `from`, which carried data, left service at `left_at`; the
    /// last thing heard on it arrived at `last_heard`.
    pub fn path_left(&mut self, from: usize, last_heard: Instant, left_at: Instant) {
        if self.open.is_none() {
            self.open = Some(Open {
                from,
                last_heard: last_heard.min(left_at),
                left_at,
            });
        }
    }

    /// Path `path` is usable again: a handover still open from it ends
    /// without moving anything.
    pub fn path_back(&mut self, path: usize) {
        if self.open.is_some_and(|o| o.from == path) {
            self.open = None;
        }
    }

    /// Path `path` was removed: nothing will come back on it, and it will
    /// carry nothing.
    pub fn path_removed(&mut self, path: usize) {
        self.path_back(path);
    }

    /// Data was sent on `path` at `at`. Completes an open handover from
    /// another path if `at` is after it left; returns the handover then.
    pub fn data_sent(&mut self, path: usize, at: Instant) -> Option<Handover> {
        let open = self.open?;
        if open.from == path || at < open.left_at {
            return None;
        }
        self.open = None;
        let done = Handover {
            from: open.from,
            to: path,
            gap: at.saturating_duration_since(open.last_heard),
            at,
        };
        self.last = Some(done);
        self.count += 1;
        Some(done)
    }

    /// The latest completed handover.
    pub fn last(&self) -> Option<Handover> {
        self.last
    }

    /// Handovers completed so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether a path left service and no data has moved yet.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Virtual time starts at an arbitrary instant; only differences count.
    #[allow(clippy::disallowed_methods)]
    fn start() -> Instant {
        Instant::now()
    }

    #[test]
    fn gap_runs_from_last_heard_on_the_old_path_to_first_send_on_the_new() {
        let t0 = start();
        let mut h = HandoverTracker::default();
        h.path_left(0, t0 + ms(100), t0 + ms(180));
        assert!(h.is_open());
        // Data on the failed path itself, or before it left, moves nothing.
        assert_eq!(h.data_sent(0, t0 + ms(200)), None);
        assert_eq!(h.data_sent(1, t0 + ms(170)), None);
        let done = h.data_sent(1, t0 + ms(190)).expect("completes");
        assert_eq!(done.from, 0);
        assert_eq!(done.to, 1);
        assert_eq!(done.gap, ms(90));
        assert_eq!(h.count(), 1);
        assert_eq!(h.last(), Some(done));
        assert!(!h.is_open());
        // Further data completes nothing more.
        assert_eq!(h.data_sent(1, t0 + ms(300)), None);
        assert_eq!(h.count(), 1);
    }

    #[test]
    fn a_path_that_comes_back_before_anything_moved_is_no_handover() {
        let t0 = start();
        let mut h = HandoverTracker::default();
        h.path_left(0, t0, t0 + ms(60));
        h.path_back(0);
        assert_eq!(h.data_sent(1, t0 + ms(100)), None);
        assert_eq!(h.count(), 0);
        assert_eq!(h.last(), None);
    }

    #[test]
    fn the_first_failure_of_several_is_followed() {
        let t0 = start();
        let mut h = HandoverTracker::default();
        h.path_left(0, t0, t0 + ms(60));
        h.path_left(1, t0 + ms(50), t0 + ms(110));
        // Another path coming back does not end the first one's handover.
        h.path_back(1);
        let done = h.data_sent(2, t0 + ms(400)).expect("completes");
        assert_eq!((done.from, done.to, done.gap), (0, 2, ms(400)));
    }

    #[test]
    fn last_heard_after_leaving_is_clamped() {
        let t0 = start();
        let mut h = HandoverTracker::default();
        // A link-down event right after a packet was heard: no negative gap.
        h.path_left(0, t0 + ms(10), t0 + ms(5));
        let done = h.data_sent(1, t0 + ms(5)).expect("completes");
        assert_eq!(done.gap, Duration::ZERO);
    }

    #[test]
    fn a_removed_path_ends_its_open_handover() {
        let t0 = start();
        let mut h = HandoverTracker::default();
        h.path_left(3, t0, t0 + ms(60));
        h.path_removed(3);
        assert!(!h.is_open());
        assert_eq!(h.data_sent(1, t0 + ms(70)), None);
    }
}
