//! The counters an operator sees (`mpt status`, metrics): flows, bytes
//! each way, legs, refusals. Plain relaxed atomics, one set per daemon.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
}

/// A copy of [`Stats`] at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
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
