//! A connection's receive state beyond the resequencer: what the stages
//! keep between batches ([`ConnRxState`]).
//!
//! A connection with its own worker keeps it in that worker; a client
//! connection keeps it in `ConnShared::rx_state`, for whichever shared
//! worker gets its next datagrams (the plane carries it as `dyn Any`, so
//! the plane never imports the data plane).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::dataplane::equalize::DelayLine;
use crate::dataplane::rx::holes::Holes;
use crate::dataplane::rx::open::{KeySlots, Opener};
use crate::plane::{ConnShared, PathShared, PathTable};

/// Datagrams a path may hold for delay equalisation (1024 full-size
/// packets: 300 ms of a 40 Mbit/s path).
const EQUALIZE_SLOTS: usize = 1024;

/// The state of a connection's stages after open and check: its delay
/// line and its loss detectors.
pub struct ConnStages {
    /// Delay equalisation.
    pub delay: DelayLine,
    /// Loss repair.
    pub holes: Holes,
}

/// What the receive stages keep of a connection between batches.
pub struct ConnRxState {
    /// Key slots with their replay windows (client connections only: the
    /// shared worker swaps them into its open stage for a group).
    keys: KeySlots,
    /// The delay line and the loss detectors.
    pub(crate) stages: ConnStages,
    /// Paths last seen suspect or down (see `ConnShared::silent_paths`).
    silent: u64,
    /// The path table, and its generation.
    pub(crate) table: Arc<PathTable>,
    table_generation: u64,
    /// The table's paths.
    pub(crate) paths: Vec<Arc<PathShared>>,
}

impl std::fmt::Debug for ConnRxState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnRxState")
            .field("paths", &self.paths.len())
            .finish_non_exhaustive()
    }
}

impl ConnRxState {
    /// The state in a connection's `rx_state` slot, created fresh for
    /// `conn` if the slot is empty (or, which no code does, holds another
    /// type).
    pub(crate) fn in_slot<'a>(
        slot: &'a mut Option<Box<dyn std::any::Any + Send>>,
        conn: &ConnShared,
    ) -> &'a mut ConnRxState {
        if !matches!(slot, Some(b) if b.is::<ConnRxState>()) {
            *slot = Some(Box::new(ConnRxState::new(conn)));
        }
        match slot.as_mut().and_then(|b| b.downcast_mut::<ConnRxState>()) {
            Some(st) => st,
            None => unreachable!("the slot was just filled with a ConnRxState"),
        }
    }

    /// Fresh state for `conn`.
    pub fn new(conn: &ConnShared) -> ConnRxState {
        ConnRxState {
            keys: KeySlots::new(),
            stages: ConnStages {
                delay: DelayLine::new(EQUALIZE_SLOTS, conn.lock_reseq().slot_len()),
                holes: Holes::new(),
            },
            silent: 0,
            table: conn.paths(),
            table_generation: 0,
            paths: Vec::with_capacity(mpt_proto::sched::MAX_PATHS),
        }
    }

    /// Takes a changed path table and newly silent paths (once per batch).
    pub(crate) fn refresh(&mut self, conn: &ConnShared) {
        if conn.refresh_paths(&mut self.table, &mut self.table_generation) {
            // Paths that left the table no longer prove losses in the
            // resequencer (their slot may be reused by a new path).
            let mut reseq = conn.lock_reseq();
            for old in &self.paths {
                if self.table.get(old.id).is_none_or(|p| !Arc::ptr_eq(p, old)) {
                    reseq.forget_path(old.id);
                    self.stages.holes.forget_path(old.id);
                }
            }
            drop(reseq);
            self.paths.clear();
            self.paths.extend(self.table.iter().cloned());
        }
        let now_silent = conn.silent_paths.load(Relaxed);
        if now_silent != self.silent {
            // A path that fell silent proves no loss any more: what
            // the others deliver is not held waiting for it.
            let newly = now_silent & !self.silent;
            if newly != 0 {
                let mut reseq = conn.lock_reseq();
                for id in (0..64).filter(|id| newly & (1u64 << id) != 0) {
                    reseq.forget_path(id);
                }
            }
            self.silent = now_silent;
        }
    }

    /// Lends the key slots to a shared worker's open stage (and takes them
    /// back when called again with the same stage).
    pub(crate) fn swap_keys(&mut self, opener: &mut Opener) {
        opener.swap_keys(&mut self.keys);
    }
}
