//! Path schedulers: which path carries the next packet.
//!
//! A scheduler is a policy object owned by one data-plane worker; workers
//! never share one, so picking a path takes no lock. Each worker keeps the
//! configured proportions on its own, hence also all workers together.
//! The set of paths it may use arrives as a bit mask computed by the session
//! ([`Eligibility`]), so liveness and policy stay apart.

mod adaptive;
mod flowlet;
mod redundancy;
mod weighted;

pub use adaptive::{
    level_queue, probe_gain, ps_per_byte, Adaptive, PathModel, LEVEL_DEADBAND_NS, PROBE_PHASES,
    SMALL_PACKET,
};
pub use flowlet::{Flowlets, FLOWLET_GAP_MARGIN_NS, RUN_SLACK_NS, STICK_SLACK_NS};
pub use redundancy::{is_realtime_dscp, is_udp, RealtimeFlows, Redundancy};
pub use weighted::Weighted;

/// Most paths one connection may have: eligibility travels as a `u64` mask.
pub const MAX_PATHS: usize = 64;

/// Scheduling parameters of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedPath {
    /// Share of packets (`weight_out`).
    pub weight: u32,
    /// Packets back to back per turn (`window`, at least 1).
    pub window: u32,
}

/// Which paths may carry data now. Bit `i` stands for path `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Eligibility {
    /// Alive paths with status `up`.
    pub primary: u64,
    /// Alive paths with status `backup`.
    pub backup: u64,
}

impl Eligibility {
    /// The mask to schedule over: the primaries, or the backups when no
    /// primary is alive.
    pub const fn active(self) -> u64 {
        if self.primary != 0 {
            self.primary
        } else {
            self.backup
        }
    }
}

/// A per-packet path choice policy.
pub trait Scheduler {
    /// Picks the path for the next packet among the set bits of `mask`,
    /// or `None` if no path may be used.
    fn pick(&mut self, paths: &[SchedPath], mask: u64) -> Option<usize>;
}

/// Calls `f` with the index of every set bit of `mask` below `len`.
pub(crate) fn for_each_bit(mask: u64, len: usize, mut f: impl FnMut(usize)) {
    let mut m = if len >= MAX_PATHS {
        mask
    } else {
        mask & ((1u64 << len) - 1)
    };
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        f(i);
        m &= m - 1;
    }
}
