//! The lowest of a path's recent one-way delay samples.
//!
//! A one-way delay sample is the path's delay plus whatever the endpoints'
//! threads added (a late wake-up, a busy control loop): noise that only
//! ever adds. The lowest sample over a short window is the delay the path
//! itself had. Two windows are kept, the current one and the one before,
//! so the minimum never rests on a window that has just begun: the value
//! is the lowest over the last one to two windows.
//!
//! Delays are microseconds with the connection's clock offset in them, so
//! they wrap; they compare by their wrapping difference.

use std::time::{Duration, Instant};

use crate::seq::seq_before;

/// How long a control message's one-way delay counts towards an idle
/// path's delay (see `Path::on_control_owd`).
pub const CONTROL_OWD_WINDOW: Duration = Duration::from_secs(1);

/// How long any sample counts towards the delay a path stands at (see
/// `Path::rx_owd_standing`): long enough to span a few feedbacks (a
/// thread's late wake-up lasts a few milliseconds), short enough that a
/// growing queue is followed within 20-40 ms (a 100 ms window
/// under-estimates a fast-growing satellite queue by up to 50 ms; measured:
/// docs/results/2026-11-26-bbr-rtt-captures.md).
pub const STANDING_OWD_WINDOW: Duration = Duration::from_millis(20);

/// The lowest sample of the current window (with when the window began
/// and when it last took a sample) and of the one before.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RecentMin {
    current: Option<Window>,
    previous: Option<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    low: u32,
    start: Instant,
    last: Instant,
}

impl RecentMin {
    /// Takes a sample; returns the lowest over the current and previous
    /// window.
    pub(super) fn add(&mut self, owd: u32, now: Instant, window: Duration) -> u32 {
        match &mut self.current {
            Some(w) if now.saturating_duration_since(w.start) < window => {
                if seq_before(owd, w.low) {
                    w.low = owd;
                }
                w.last = w.last.max(now);
            }
            current => {
                // A window ended (or none began): it becomes the previous
                // one only if it ended just now; an older one says nothing
                // of the path today.
                self.previous = current
                    .filter(|w| now.saturating_duration_since(w.start) < 2 * window)
                    .map(|w| w.low);
                *current = Some(Window {
                    low: owd,
                    start: now,
                    last: now,
                });
            }
        }
        self.lowest().unwrap_or(owd)
    }

    /// The lowest over the current and previous window, with when the
    /// last sample came; `None` when no sample came within the last
    /// `window`.
    pub(super) fn get(&self, now: Instant, window: Duration) -> Option<(u32, Instant)> {
        let w = self.current?;
        if now.saturating_duration_since(w.last) >= window {
            return None;
        }
        self.lowest().map(|low| (low, w.last))
    }

    fn lowest(&self) -> Option<u32> {
        let low = self.current?.low;
        Some(match self.previous {
            Some(p) if seq_before(p, low) => p,
            _ => low,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_millis(100);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_lowest_of_the_last_one_to_two_windows() {
        let t = crate::test_clock::t0();
        let mut m = RecentMin::default();
        assert_eq!(m.get(t, W), None);
        assert_eq!(m.add(5_000, t, W), 5_000);
        assert_eq!(m.add(9_000, t + ms(40), W), 5_000);
        assert_eq!(m.add(4_000, t + ms(90), W), 4_000);
        // The next window: the previous one's 4 000 still counts.
        assert_eq!(m.add(7_000, t + ms(120), W), 4_000);
        assert_eq!(m.get(t + ms(150), W), Some((4_000, t + ms(120))));
        // Two windows on, it no longer does.
        assert_eq!(m.add(8_000, t + ms(230), W), 7_000);
        assert_eq!(m.add(8_500, t + ms(340), W), 8_000);
        // Nothing for a window: nothing to say.
        assert_eq!(m.get(t + ms(439), W), Some((8_000, t + ms(340))));
        assert_eq!(m.get(t + ms(440), W), None);
        // After a silence, an old window is not the previous one.
        assert_eq!(m.add(9_500, t + ms(1_000), W), 9_500);
    }

    #[test]
    fn wrapping_delays_compare_by_their_difference() {
        let t = crate::test_clock::t0();
        let mut m = RecentMin::default();
        m.add(u32::MAX - 100, t, W);
        assert_eq!(m.add(50, t + ms(10), W), u32::MAX - 100);
        assert_eq!(m.add(u32::MAX - 200, t + ms(20), W), u32::MAX - 200);
    }
}
