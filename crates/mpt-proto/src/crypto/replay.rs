//! Anti-replay window over connection sequence numbers (RFC 6479).
//!
//! A bitmap of [`BITMAP_BITS`] bits in 64-bit blocks, used as a ring:
//! bit `seq % BITMAP_BITS` says whether `seq` was accepted. When the highest
//! accepted number moves forward, only the blocks it moves past are cleared
//! (at most the whole ring), so the cost per datagram is constant however
//! far it jumps. The block holding the highest number is only partly in the
//! past, which is why the window is one block short of the bitmap:
//! [`REPLAY_WINDOW`] numbers.
//!
//! A sequence number is accepted when it is above every number accepted so
//! far, or less than [`REPLAY_WINDOW`] below the highest and not yet seen.
//! So reordering across paths is fine up to [`REPLAY_WINDOW`] datagrams
//! (larger than the daemon's resequencing ring of 4096 slots); anything older
//! is refused, since it can no longer be told apart from a replay.
//!
//! The window must only learn from authenticated datagrams: [`check`] before
//! opening (cheap, saves the AEAD work on obvious replays),
//! [`update`] after a successful open. `update` checks again and is the
//! authoritative decision, so two copies of one datagram that pass `check`
//! concurrently in two workers are still caught.
//!
//! [`check`]: ReplayWindow::check
//! [`update`]: ReplayWindow::update

/// Bits in the bitmap (exported as `REPLAY_BITMAP_BITS`): 8192 sequence numbers in 1 KiB per connection.
pub const BITMAP_BITS: usize = 8192;
const BLOCK_BITS: u64 = u64::BITS as u64;
const BLOCKS: usize = BITMAP_BITS / BLOCK_BITS as usize;

/// How far below the highest accepted sequence number a datagram may
/// still be accepted: `highest - seq < REPLAY_WINDOW`.
pub const REPLAY_WINDOW: u64 = BITMAP_BITS as u64 - BLOCK_BITS;

/// Why a sequence number was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Replay {
    /// Already accepted once.
    #[error("duplicate sequence number")]
    Duplicate,
    /// Too far below the highest accepted number to be tracked.
    #[error("sequence number is older than the replay window")]
    TooOld,
}

/// The replay window of one receiving direction of one session. Start a
/// fresh one with every new set of session keys.
#[derive(Clone, PartialEq, Eq)]
pub struct ReplayWindow {
    /// Highest accepted sequence number (0 while none is: 0 itself is then
    /// still accepted once because its bit is clear).
    top: u64,
    bitmap: [u64; BLOCKS],
}

impl std::fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("top", &self.top)
            .finish_non_exhaustive()
    }
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

/// The block and bit that record `seq`.
fn slot(seq: u64) -> (usize, u64) {
    // The remainder is below BLOCKS, so the cast cannot truncate.
    let block = ((seq / BLOCK_BITS) % BLOCKS as u64) as usize;
    (block, 1u64 << (seq % BLOCK_BITS))
}

impl ReplayWindow {
    /// An empty window: every sequence number is acceptable.
    pub const fn new() -> ReplayWindow {
        ReplayWindow {
            top: 0,
            bitmap: [0; BLOCKS],
        }
    }

    /// The highest sequence number accepted so far (0 if none).
    pub fn highest(&self) -> u64 {
        self.top
    }

    /// Whether `seq` would be accepted now. Does not change the window.
    pub fn check(&self, seq: u64) -> Result<(), Replay> {
        if seq > self.top {
            return Ok(());
        }
        if self.top - seq >= REPLAY_WINDOW {
            return Err(Replay::TooOld);
        }
        let (block, bit) = slot(seq);
        match self.bitmap.get(block) {
            Some(b) if b & bit == 0 => Ok(()),
            _ => Err(Replay::Duplicate),
        }
    }

    /// Records `seq` as accepted, after its datagram authenticated. Fails,
    /// and changes nothing, when `seq` is not acceptable (see
    /// [`ReplayWindow::check`]); the datagram must then be dropped.
    pub fn update(&mut self, seq: u64) -> Result<(), Replay> {
        self.check(seq)?;
        if seq > self.top {
            let old_block = self.top / BLOCK_BITS;
            let new_block = seq / BLOCK_BITS;
            // Clear the blocks between the old top's and the new top's,
            // at most the whole ring.
            let clear = (new_block - old_block).min(BLOCKS as u64);
            for i in 1..=clear {
                let (block, _) = slot((old_block + i) * BLOCK_BITS);
                if let Some(b) = self.bitmap.get_mut(block) {
                    *b = 0;
                }
            }
            self.top = seq;
        }
        let (block, bit) = slot(seq);
        if let Some(b) = self.bitmap.get_mut(block) {
            *b |= bit;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn accept(w: &mut ReplayWindow, seq: u64) {
        assert_eq!(w.check(seq), Ok(()), "check {seq}");
        assert_eq!(w.update(seq), Ok(()), "update {seq}");
    }

    #[test]
    fn geometry() {
        assert_eq!(BLOCKS, 128);
        assert_eq!(REPLAY_WINDOW, 8128);
        // Must cover the daemon's resequencing ring (4096 slots).
        const { assert!(REPLAY_WINDOW > 4096) };
    }

    #[test]
    fn in_order_then_each_is_a_duplicate() {
        let mut w = ReplayWindow::new();
        for seq in 0..20_000 {
            accept(&mut w, seq);
            assert_eq!(w.check(seq), Err(Replay::Duplicate));
        }
        assert_eq!(w.highest(), 19_999);
        // Everything inside the window is remembered.
        for seq in 19_999 - (REPLAY_WINDOW - 1)..=19_999 {
            assert_eq!(w.check(seq), Err(Replay::Duplicate), "{seq}");
        }
        assert_eq!(w.check(19_999 - REPLAY_WINDOW), Err(Replay::TooOld));
    }

    #[test]
    fn sequence_zero_once() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.check(0), Ok(()));
        accept(&mut w, 0);
        assert_eq!(w.check(0), Err(Replay::Duplicate));
        assert_eq!(w.update(0), Err(Replay::Duplicate));
        accept(&mut w, 1);
        assert_eq!(w.check(0), Err(Replay::Duplicate));
    }

    #[test]
    fn first_seq_may_be_anything_and_zero_is_then_too_old_or_fresh() {
        let mut w = ReplayWindow::new();
        accept(&mut w, 5);
        // 0..5 were never seen and are in the window.
        accept(&mut w, 0);
        accept(&mut w, 4);
        assert_eq!(w.check(4), Err(Replay::Duplicate));
        let mut w = ReplayWindow::new();
        accept(&mut w, 1_000_000);
        assert_eq!(w.check(0), Err(Replay::TooOld));
    }

    #[test]
    fn reordered_within_window() {
        let mut w = ReplayWindow::new();
        accept(&mut w, 1);
        accept(&mut w, 5000);
        // Late arrivals from a slow path, in any order.
        for seq in (2..5000).rev().step_by(3) {
            accept(&mut w, seq);
        }
        for seq in (2..5000).step_by(3) {
            // Those not yet seen still pass; those seen are duplicates.
            let seen = (5000 - 1 - seq) % 3 == 0;
            let expected = if seen { Err(Replay::Duplicate) } else { Ok(()) };
            assert_eq!(w.check(seq), expected, "{seq}");
        }
        assert_eq!(w.highest(), 5000);
    }

    #[test]
    fn edge_of_window() {
        let mut w = ReplayWindow::new();
        let top = 100_000;
        accept(&mut w, top);
        accept(&mut w, top - (REPLAY_WINDOW - 1));
        assert_eq!(w.check(top - REPLAY_WINDOW), Err(Replay::TooOld));
        assert_eq!(w.update(top - REPLAY_WINDOW), Err(Replay::TooOld));
        // A refused update changes nothing.
        assert_eq!(w.highest(), top);
        assert_eq!(w.check(top - 1), Ok(()));
    }

    #[test]
    fn too_old() {
        let mut w = ReplayWindow::new();
        accept(&mut w, 20_000);
        assert_eq!(w.check(20_000 - REPLAY_WINDOW), Err(Replay::TooOld));
        assert_eq!(w.check(0), Err(Replay::TooOld));
        assert_eq!(w.check(1), Err(Replay::TooOld));
    }

    #[test]
    fn huge_jump_clears_the_whole_bitmap() {
        let mut w = ReplayWindow::new();
        // Fill every bit of the ring.
        for seq in 0..BITMAP_BITS as u64 {
            accept(&mut w, seq);
        }
        let far = 10_000_000_000;
        accept(&mut w, far);
        // Nothing remembered from before may alias into the new window.
        for seq in far - (REPLAY_WINDOW - 1)..far {
            assert_eq!(w.check(seq), Ok(()), "{seq} must be fresh");
        }
        assert_eq!(w.check(far), Err(Replay::Duplicate));
        assert_eq!(w.check(5), Err(Replay::TooOld));
    }

    #[test]
    fn jump_by_less_than_the_ring_clears_only_what_it_passes() {
        let mut w = ReplayWindow::new();
        for seq in 0..1000 {
            accept(&mut w, seq);
        }
        // Jump 3000 ahead: 0..1000 are still inside the window.
        accept(&mut w, 4000);
        for seq in 0..1000 {
            assert_eq!(w.check(seq), Err(Replay::Duplicate), "{seq}");
        }
        for seq in 1000..4000 {
            assert_eq!(w.check(seq), Ok(()), "{seq}");
        }
    }

    #[test]
    fn block_index_wraps_around_the_ring() {
        let mut w = ReplayWindow::new();
        // Walk across several full turns of the ring with gaps, so every
        // block index is reused; stale bits of a reused block must be gone.
        let mut seq = 0;
        while seq < 5 * BITMAP_BITS as u64 {
            accept(&mut w, seq);
            seq += 37;
        }
        let top = w.highest();
        for s in top - (REPLAY_WINDOW - 1)..=top {
            let seen = s % 37 == 0;
            let expected = if seen { Err(Replay::Duplicate) } else { Ok(()) };
            assert_eq!(w.check(s), expected, "{s}");
        }
        // Exactly one ring apart: same slot, different number.
        let mut w = ReplayWindow::new();
        accept(&mut w, 10);
        accept(&mut w, 10 + BITMAP_BITS as u64);
        assert_eq!(w.check(10), Err(Replay::TooOld));
        assert_eq!(
            w.check(10 + BITMAP_BITS as u64 - 64),
            Ok(()),
            "slot of a cleared block"
        );
    }

    #[test]
    fn near_the_top_of_the_sequence_space() {
        let mut w = ReplayWindow::new();
        let high = super::super::REJECT_AFTER_MESSAGES - 1;
        accept(&mut w, high - 10);
        accept(&mut w, high);
        accept(&mut w, high - 5);
        assert_eq!(w.check(high), Err(Replay::Duplicate));
        assert_eq!(w.check(high - 10), Err(Replay::Duplicate));
    }

    proptest! {
        /// Against a model that remembers everything: the window agrees
        /// wherever the model's answer is within the window.
        #[test]
        fn matches_a_model(steps in prop::collection::vec(0u64..30_000, 1..400)) {
            let mut w = ReplayWindow::new();
            let mut seen = BTreeSet::new();
            let mut top = 0u64;
            for seq in steps {
                let expected = if seq > top {
                    Ok(())
                } else if top - seq >= REPLAY_WINDOW {
                    Err(Replay::TooOld)
                } else if seen.contains(&seq) {
                    Err(Replay::Duplicate)
                } else {
                    Ok(())
                };
                prop_assert_eq!(w.check(seq), expected);
                prop_assert_eq!(w.update(seq), expected);
                if expected.is_ok() {
                    seen.insert(seq);
                    top = top.max(seq);
                }
            }
        }
    }
}
