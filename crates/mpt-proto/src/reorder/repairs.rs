//! Holes exempt from the loss proof while a repair (or an overtaken
//! original) is on its way, at most
//! [`MAX_PENDING_REPAIRS`](super::MAX_PENDING_REPAIRS) at a time, in fixed
//! memory.

use std::time::Instant;

use super::{PendingRepair, Resequencer};

impl Resequencer {
    /// A repair was asked for the datagrams lost strictly between `after`
    /// and `before` (`missing` of them): until `until`, those gaps are not
    /// given up as proven lost (the timeout still applies), and copies
    /// that arrive ([`Resequencer::repair_arrived`]) count against it.
    /// Asked again for the same hole (or for one given to
    /// [`Resequencer::expect_hole`]), it updates the count and the
    /// deadline. Returns false when
    /// [`MAX_PENDING_REPAIRS`](super::MAX_PENDING_REPAIRS) holes are tracked
    /// already.
    pub fn expect_repair(&mut self, after: u64, before: u64, missing: u16, until: Instant) -> bool {
        self.exempt(after, before, missing, until, true)
    }

    /// A path's loss detector saw a hole strictly between `after` and
    /// `before` (`missing` datagrams) that may still fill, its datagrams
    /// overtaken on their way in: until `until` (the end of the path's
    /// reorder window), those gaps are not given up as proven lost. Late
    /// originals count against it ([`Resequencer::hole_filled`]); copies
    /// do not, none was asked for yet.
    pub fn expect_hole(&mut self, after: u64, before: u64, missing: u16, until: Instant) -> bool {
        self.exempt(after, before, missing, until, false)
    }

    fn exempt(
        &mut self,
        after: u64,
        before: u64,
        missing: u16,
        until: Instant,
        asked: bool,
    ) -> bool {
        if before <= after.saturating_add(1) || missing == 0 {
            return true;
        }
        let same = self
            .repairs
            .iter()
            .position(|r| r.is_some_and(|r| r.after == after && r.before == before));
        let slot = same.or_else(|| self.repairs.iter().position(Option::is_none));
        match slot {
            Some(i) => {
                self.repairs[i] = Some(PendingRepair {
                    after,
                    before,
                    missing,
                    until,
                    asked,
                });
                true
            }
            None => false,
        }
    }

    /// A datagram of the hole between `after` and `before` (as given to
    /// [`Resequencer::expect_repair`]) arrived after all, overtaken on its
    /// way in: the hole expects one datagram less, and is forgotten when
    /// it expects none. Call before inserting it.
    pub fn hole_filled(&mut self, after: u64, before: u64) {
        for slot in &mut self.repairs {
            if let Some(r) = slot {
                if r.after == after && r.before == before {
                    r.missing = r.missing.saturating_sub(1);
                    if r.missing == 0 {
                        *slot = None;
                    }
                }
            }
        }
    }

    /// Holes still waiting for a repair.
    pub fn pending_repairs(&self) -> usize {
        self.repairs.iter().flatten().count()
    }

    /// A repair copy of `seq` arrived (call before inserting it): the hole
    /// it falls in expects one copy less. (Other paths' datagrams fall in
    /// the same range, so only the caller can tell a copy.) Holes not
    /// asked for yet are left alone: the copy is not theirs.
    pub fn repair_arrived(&mut self, seq: u64) {
        for slot in &mut self.repairs {
            if let Some(r) = slot {
                if r.asked && r.after < seq && seq < r.before {
                    r.missing = r.missing.saturating_sub(1);
                    if r.missing == 0 {
                        *slot = None;
                    }
                }
            }
        }
    }

    /// Forgets the holes whose deadline passed; true if one did.
    pub(super) fn expire_repairs(&mut self, now: Instant) -> bool {
        let mut any = false;
        for slot in &mut self.repairs {
            if slot.is_some_and(|r| r.until <= now) {
                *slot = None;
                any = true;
            }
        }
        any
    }
}
