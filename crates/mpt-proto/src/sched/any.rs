//! One scheduler of either policy, chosen per connection at run time.
//!
//! A transmit worker keeps one scheduler per connection, and connections
//! differ in policy (`scheduler = weighted | adaptive`). A `match` over
//! this enum costs a predictable branch per packet where a boxed trait
//! object would cost an indirect call, and it keeps the scheduler inline
//! in the worker's table.

use crate::sched::adaptive::Adaptive;
use crate::sched::weighted::Weighted;
use crate::sched::{PickInput, Scheduler};

/// [`Weighted`] or [`Adaptive`].
// Inline, not boxed: one per connection per worker, kept in place in the
// worker's table; the ~500 bytes a `weighted` one leaves unused cost less
// than a pointer chase per packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum AnyScheduler {
    /// Fixed shares by weight.
    Weighted(Weighted),
    /// By measured rate and delay.
    Adaptive(Adaptive),
}

impl Default for AnyScheduler {
    fn default() -> Self {
        AnyScheduler::Weighted(Weighted::new())
    }
}

impl AnyScheduler {
    /// A fresh `adaptive` scheduler if `adaptive`, else a fresh `weighted`
    /// one.
    pub fn new(adaptive: bool) -> AnyScheduler {
        if adaptive {
            AnyScheduler::Adaptive(Adaptive::new())
        } else {
            AnyScheduler::Weighted(Weighted::new())
        }
    }

    /// Whether this is the `adaptive` scheduler.
    pub fn is_adaptive(&self) -> bool {
        matches!(self, AnyScheduler::Adaptive(_))
    }

    /// Makes this the `adaptive` scheduler (or the `weighted` one): kept
    /// with its state if it already is, replaced by a fresh one if not.
    pub fn select(&mut self, adaptive: bool) {
        if self.is_adaptive() != adaptive {
            *self = AnyScheduler::new(adaptive);
        }
    }

    /// Sets path `i`'s virtual clock under `adaptive` (see
    /// [`Adaptive::set_busy_until`]); `weighted` has none.
    pub fn set_busy_until(&mut self, i: usize, ns: u64) {
        if let AnyScheduler::Adaptive(a) = self {
            a.set_busy_until(i, ns);
        }
    }
}

impl Scheduler for AnyScheduler {
    #[inline]
    fn pick(&mut self, input: &PickInput<'_>) -> Option<usize> {
        match self {
            AnyScheduler::Weighted(s) => s.pick(input),
            AnyScheduler::Adaptive(s) => s.pick(input),
        }
    }

    #[inline]
    fn follows_flowlets(&self) -> bool {
        match self {
            AnyScheduler::Weighted(s) => s.follows_flowlets(),
            AnyScheduler::Adaptive(s) => s.follows_flowlets(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{ps_per_byte, PathModel, SchedPath};

    #[test]
    fn dispatches_to_the_selected_policy_and_keeps_its_state() {
        let weights = [SchedPath {
            weight: 1,
            window: 1,
        }; 2];
        let models = [
            PathModel {
                ps_per_byte: ps_per_byte(100_000_000),
                owd_ns: 20_000_000,
                cap_ns: 10_000_000,
                lossy: false,
                lower_bound: false,
            },
            PathModel {
                ps_per_byte: ps_per_byte(100_000_000),
                owd_ns: 0,
                cap_ns: 10_000_000,
                lossy: false,
                lower_bound: false,
            },
        ];
        let input = PickInput {
            weights: &weights,
            models: &models,
            bytes: 100,
            now_ns: 1_000_000_000,
            hold_ns: 50_000_000,
            ..PickInput::weighted(&weights, 0b11)
        };
        let mut s = AnyScheduler::default();
        assert!(!s.is_adaptive() && !s.follows_flowlets());
        // Weighted alternates, whatever the models say.
        assert_eq!(s.pick(&input), Some(0));
        assert_eq!(s.pick(&input), Some(1));
        s.select(false);
        assert_eq!(s.pick(&input), Some(0), "kept its turn");
        // Adaptive sends a small datagram where it arrives first.
        s.select(true);
        assert!(s.is_adaptive() && s.follows_flowlets());
        assert_eq!(s.pick(&input), Some(1));
        s.set_busy_until(1, 2_000_000_000);
        assert_eq!(s.pick(&input), Some(0), "path 1 is full now");
        // Nothing eligible: neither picks.
        let none = PickInput { mask: 0, ..input };
        assert_eq!(s.pick(&none), None);
        s.select(false);
        assert_eq!(s.pick(&none), None);
    }
}
