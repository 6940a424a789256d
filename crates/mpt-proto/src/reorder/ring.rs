//! The ring of slots and the packet storage behind it: which slot a
//! sequence number takes, and the memory, made when a packet is first held
//! out of order and given back once nothing has been held for
//! [`STORAGE_IDLE_RELEASE`] (the bound and why: the module docs of
//! `reorder`, on memory).

use std::time::Instant;

use super::{Resequencer, Slot, STORAGE_IDLE_RELEASE};

/// Grows `storage` (zero-filled) to at least `need` bytes: to twice its
/// length when that is more, never beyond `bound`.
pub(super) fn grow_to(storage: &mut Vec<u8>, need: usize, bound: usize) {
    if storage.len() < need {
        storage.resize(need.max(storage.len() * 2).min(bound.max(need)), 0);
    }
}

impl Resequencer {
    pub(super) fn index(&self, seq: u64) -> usize {
        (seq as usize) & (self.ring - 1)
    }

    pub(super) fn window(&self) -> u64 {
        self.ring as u64
    }

    /// Slot `i` (`Empty` while the ring is not made).
    pub(super) fn slot(&self, i: usize) -> Slot {
        self.slots.get(i).copied().unwrap_or(Slot::Empty)
    }

    /// When the packet held in slot `i` arrived.
    pub(super) fn arrived_at(&self, i: usize) -> Option<Instant> {
        self.arrived.get(i).copied().flatten()
    }

    /// Makes the per-slot arrays, before anything is written to them.
    pub(super) fn ensure_ring(&mut self) {
        if self.slots.is_empty() {
            self.slots = vec![Slot::Empty; self.ring];
            self.arrived = vec![None; self.ring];
            self.waiter = vec![None; self.ring];
        }
    }

    /// Whether the per-slot arrays are made (tests).
    #[cfg(test)]
    pub(crate) fn ring_made(&self) -> bool {
        !self.slots.is_empty()
    }

    /// Gives the packet storage back when nothing is held and nothing
    /// was for [`STORAGE_IDLE_RELEASE`] (every buffer is then on the free
    /// stack, so none is in use), and the per-slot arrays too when every
    /// slot is empty.
    pub(super) fn release_idle_storage(&mut self, now: Instant) {
        if self.held == 0
            && (!self.storage.is_empty() || !self.slots.is_empty())
            && self
                .last_held
                .is_none_or(|t| now.saturating_duration_since(t) >= STORAGE_IDLE_RELEASE)
        {
            self.storage = Vec::new();
            if self.occupied == 0 {
                // Every slot empty: the ring is made again when needed.
                self.slots = Vec::new();
                self.arrived = Vec::new();
                self.waiter = Vec::new();
            }
            // Every buffer is free: lowest on top again, so the storage
            // grows from the start when it is needed next.
            let n = self.free.len();
            for (i, b) in self.free.iter_mut().enumerate() {
                *b = (n - 1 - i) as u32;
            }
        }
    }

    /// Bytes of packet storage allocated now.
    pub fn storage_bytes(&self) -> usize {
        self.storage.len()
    }
}
