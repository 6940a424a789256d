//! Smooth weighted round robin with MPT's path window.
//!
//! Every packet, each eligible path earns its weight in credit and the
//! richest path pays the total weight back; over any run of packets each
//! path's share tracks `weight / total` within one packet, and the choices
//! interleave smoothly instead of in blocks. MPT's `window` asks for `w`
//! packets back to back on one path: once picked, a path keeps the turn for
//! `window` packets, still paying for each one, so a large window changes
//! the burst pattern but not the shares.
//!
//! When the eligible set changes (a path died or returned) the credits are
//! reset, so a path that was away does not come back with a debt or a hoard.

use crate::sched::{for_each_bit, PickInput, SchedPath, Scheduler, MAX_PATHS};

/// The `weighted` scheduler.
#[derive(Debug, Clone)]
pub struct Weighted {
    credit: [i64; MAX_PATHS],
    last_mask: u64,
    /// The path holding the turn and how many packets it still gets.
    turn: Option<(usize, u32)>,
}

impl Default for Weighted {
    fn default() -> Self {
        Weighted {
            credit: [0; MAX_PATHS],
            last_mask: 0,
            turn: None,
        }
    }
}

impl Weighted {
    /// A scheduler with no history.
    pub fn new() -> Weighted {
        Weighted::default()
    }

    /// Credits every eligible path and charges `chosen`.
    fn account(&mut self, paths: &[SchedPath], mask: u64, total: i64, chosen: usize) {
        for_each_bit(mask, paths.len(), |i| {
            self.credit[i] += i64::from(paths[i].weight);
        });
        self.credit[chosen] -= total;
    }
}

impl Scheduler for Weighted {
    /// Picks by `input.weights` among the set bits of `input.mask`; reads
    /// nothing else of the input.
    #[inline]
    fn pick(&mut self, input: &PickInput<'_>) -> Option<usize> {
        self.pick_among(input.weights, input.mask)
    }
}

impl Weighted {
    /// The pick of [`Scheduler::pick`], with the input's fields as
    /// arguments. Kept out of line on purpose, as `Adaptive`'s: reading
    /// through the [`PickInput`] the pick runs up to 8 % more instructions
    /// (cachegrind, 2 to 32 paths).
    #[inline(never)]
    fn pick_among(&mut self, paths: &[SchedPath], mask: u64) -> Option<usize> {
        let mut total: i64 = 0;
        for_each_bit(mask, paths.len(), |i| total += i64::from(paths[i].weight));
        if total == 0 {
            self.turn = None;
            return None;
        }
        if mask != self.last_mask {
            self.credit = [0; MAX_PATHS];
            self.last_mask = mask;
            self.turn = None;
        }
        if let Some((i, left)) = self.turn {
            if left > 0 {
                self.turn = Some((i, left - 1));
                self.account(paths, mask, total, i);
                return Some(i);
            }
        }
        let mut best: Option<usize> = None;
        for_each_bit(mask, paths.len(), |i| {
            if paths[i].weight == 0 {
                return;
            }
            let c = self.credit[i] + i64::from(paths[i].weight);
            if best.is_none_or(|b| c > self.credit[b] + i64::from(paths[b].weight)) {
                best = Some(i);
            }
        });
        let chosen = best?;
        self.account(paths, mask, total, chosen);
        self.turn = Some((chosen, paths[chosen].window.max(1) - 1));
        Some(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(weights: &[u32], window: u32) -> Vec<SchedPath> {
        weights
            .iter()
            .map(|&weight| SchedPath { weight, window })
            .collect()
    }

    /// `Scheduler::pick` with only what `weighted` reads.
    fn pick(s: &mut Weighted, p: &[SchedPath], mask: u64) -> Option<usize> {
        s.pick(&PickInput::weighted(p, mask))
    }

    fn shares(s: &mut Weighted, p: &[SchedPath], mask: u64, n: usize) -> Vec<usize> {
        let mut counts = vec![0; p.len()];
        for _ in 0..n {
            counts[pick(s, p, mask).expect("a path")] += 1;
        }
        counts
    }

    #[test]
    fn equal_weights_alternate() {
        let p = paths(&[1, 1], 1);
        let mut s = Weighted::new();
        let picks: Vec<_> = (0..6)
            .map(|_| pick(&mut s, &p, 0b11).expect("path"))
            .collect();
        assert_eq!(picks, [0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn shares_follow_weights_exactly_over_a_cycle() {
        let p = paths(&[5, 3, 2], 1);
        let mut s = Weighted::new();
        assert_eq!(shares(&mut s, &p, 0b111, 1000), [500, 300, 200]);
    }

    #[test]
    fn smooth_interleaving() {
        // nginx's classic example: 5,1,1 gives a a b a c a a, not a a a a a b c.
        let p = paths(&[5, 1, 1], 1);
        let mut s = Weighted::new();
        let picks: Vec<_> = (0..7)
            .map(|_| pick(&mut s, &p, 0b111).expect("path"))
            .collect();
        assert_eq!(picks, [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn window_gives_bursts_but_keeps_shares() {
        let p = paths(&[1, 1], 4);
        let mut s = Weighted::new();
        let picks: Vec<_> = (0..8)
            .map(|_| pick(&mut s, &p, 0b11).expect("path"))
            .collect();
        assert_eq!(picks, [0, 0, 0, 0, 1, 1, 1, 1]);
        let p = vec![
            SchedPath {
                weight: 3,
                window: 5,
            },
            SchedPath {
                weight: 1,
                window: 2,
            },
        ];
        let counts = shares(&mut s, &p, 0b11, 40_000);
        let share0 = counts[0] as f64 / 40_000.0;
        assert!((share0 - 0.75).abs() < 0.01, "{counts:?}");
    }

    #[test]
    fn masked_paths_get_nothing() {
        let p = paths(&[1, 1, 1], 1);
        let mut s = Weighted::new();
        assert_eq!(shares(&mut s, &p, 0b101, 100), [50, 0, 50]);
    }

    #[test]
    fn nothing_eligible_gives_none() {
        let p = paths(&[1, 1], 1);
        let mut s = Weighted::new();
        assert_eq!(pick(&mut s, &p, 0), None);
        assert_eq!(pick(&mut s, &paths(&[0, 0], 1), 0b11), None);
        // A mask bit beyond the slice is ignored, not an index panic.
        assert_eq!(pick(&mut s, &p, 0b100), None);
    }

    #[test]
    fn mask_change_resets_turn() {
        let p = paths(&[1, 1], 10);
        let mut s = Weighted::new();
        assert_eq!(pick(&mut s, &p, 0b11), Some(0));
        // Path 0 dies mid-turn: the next packet must not go to it.
        assert_eq!(pick(&mut s, &p, 0b10), Some(1));
    }

    #[test]
    fn sixty_four_paths() {
        let p = paths(&[1; 64], 1);
        let mut s = Weighted::new();
        let counts = shares(&mut s, &p, u64::MAX, 6400);
        assert!(counts.iter().all(|&c| c == 100), "{counts:?}");
    }
}
