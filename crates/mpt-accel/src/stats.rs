//! The counters an operator sees (`mpt status`, metrics): flows, bytes
//! each way, legs, refusals, and how a pinned leg set spread its bytes
//! over the paths. Plain relaxed atomics, one set per daemon.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Path ids a pinned leg can have (DSCP `path + 1` must fit six bits).
pub const PATH_IDS: usize = crate::frame::MAX_SET_LEGS as usize;

/// Bytes sent on pinned legs, by path id: where a set's scheduler put a
/// flow's data (the fast path first, the slow one with what it cannot
/// take). Counted at the sending end of each chunk, so a daemon's
/// figures are its own direction: uploads at the near end, downloads at
/// the far end.
#[derive(Debug)]
pub struct PathBytes([AtomicU64; PATH_IDS]);

impl Default for PathBytes {
    fn default() -> Self {
        PathBytes(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl PathBytes {
    /// Counts `n` bytes sent on path `path` (ids past the last are not
    /// counted: a set never has them).
    pub fn add(&self, path: u8, n: usize) {
        if let Some(c) = self.0.get(usize::from(path)) {
            c.fetch_add(n as u64, Relaxed);
        }
    }

    /// The paths that carried anything, in id order.
    pub fn snapshot(&self) -> Vec<(u8, u64)> {
        self.0
            .iter()
            .enumerate()
            .map(|(i, c)| (i as u8, c.load(Relaxed)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }
}

/// Acceleration counters.
#[derive(Debug, Default)]
pub struct Stats {
    /// Flows intercepted (near end) or opened for a peer (far end).
    pub flows: AtomicU64,
    /// Flows in progress.
    pub flows_active: AtomicU64,
    /// Bytes from the client towards the destination.
    pub bytes_up: AtomicU64,
    /// Bytes from the destination towards the client.
    pub bytes_down: AtomicU64,
    /// Flows whose destination refused, was unreachable or did not answer.
    pub refused: AtomicU64,
    /// Flows aborted by a reset (either end, or a leg that broke).
    pub resets: AtomicU64,
    /// Flows refused at the near end for want of a leg or over the limit.
    pub dropped: AtomicU64,
    /// Legs idle in the pool (near end) or waiting for a flow (far end).
    pub legs_idle: AtomicU64,
    /// Legs carrying a flow.
    pub legs_busy: AtomicU64,
    /// Legs connected (near) or accepted (far) since start.
    pub legs_opened: AtomicU64,
    /// Leg connects that failed.
    pub leg_failures: AtomicU64,
    /// Leg messages that were not frames, or legs from an unknown address.
    pub bad_frames: AtomicU64,
    /// Data bytes sent on pinned legs, by path id.
    pub path_bytes: PathBytes,
}

/// A copy of [`Stats`] at one moment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// See [`Stats::flows`].
    pub flows: u64,
    /// See [`Stats::flows_active`].
    pub flows_active: u64,
    /// See [`Stats::bytes_up`].
    pub bytes_up: u64,
    /// See [`Stats::bytes_down`].
    pub bytes_down: u64,
    /// See [`Stats::refused`].
    pub refused: u64,
    /// See [`Stats::resets`].
    pub resets: u64,
    /// See [`Stats::dropped`].
    pub dropped: u64,
    /// See [`Stats::legs_idle`].
    pub legs_idle: u64,
    /// See [`Stats::legs_busy`].
    pub legs_busy: u64,
    /// See [`Stats::legs_opened`].
    pub legs_opened: u64,
    /// See [`Stats::leg_failures`].
    pub leg_failures: u64,
    /// See [`Stats::bad_frames`].
    pub bad_frames: u64,
    /// See [`Stats::path_bytes`]: (path id, bytes) of the paths that
    /// carried anything, in id order.
    pub path_bytes: Vec<(u8, u64)>,
}

impl Stats {
    /// Reads every counter.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            flows: self.flows.load(Relaxed),
            flows_active: self.flows_active.load(Relaxed),
            bytes_up: self.bytes_up.load(Relaxed),
            bytes_down: self.bytes_down.load(Relaxed),
            refused: self.refused.load(Relaxed),
            resets: self.resets.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            legs_idle: self.legs_idle.load(Relaxed),
            legs_busy: self.legs_busy.load(Relaxed),
            legs_opened: self.legs_opened.load(Relaxed),
            leg_failures: self.leg_failures.load(Relaxed),
            bad_frames: self.bad_frames.load(Relaxed),
            path_bytes: self.path_bytes.snapshot(),
        }
    }
}

/// Adds one to a gauge for as long as it lives.
pub(crate) struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    pub(crate) fn up(g: &'a AtomicU64) -> Self {
        g.fetch_add(1, Relaxed);
        Gauge(g)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_bytes_keep_each_path_apart_and_skip_idle_ones() {
        let s = Stats::default();
        s.path_bytes.add(1, 16_384);
        s.path_bytes.add(1, 100);
        s.path_bytes.add(62, 7);
        s.path_bytes.add(63, 5); // no such path id: not counted
        s.path_bytes.add(255, 5);
        assert_eq!(s.snapshot().path_bytes, vec![(1, 16_484), (62, 7)]);
        assert!(Stats::default().snapshot().path_bytes.is_empty());
    }
}
