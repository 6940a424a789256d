//! Path schedulers: which path carries the next packet.
//!
//! A scheduler is a policy object owned by one data-plane worker; workers
//! never share one, so picking a path takes no lock. Each worker keeps the
//! configured proportions on its own, hence also all workers together.
//! The set of paths it may use arrives as a bit mask computed by the session
//! ([`Eligibility`]), so liveness and policy stay apart.
//!
//! Every policy implements [`Scheduler`]: one call per packet with a
//! [`PickInput`] that carries all a policy may weigh (weights, path
//! models, the packet's size and flowlet, the caller's clock); each
//! policy reads what it needs. [`AnyScheduler`] holds either policy and
//! dispatches by a `match`, so a worker can switch policy per connection
//! without a virtual call per packet.
//!
//! * [`Weighted`]: fixed shares by `weight_out` (smooth weighted round
//!   robin with MPT's window);
//! * [`Adaptive`]: by measured rate and delay ([`PathModel`]), shaped by
//!   [`probe_gain`] and [`level_queue`], with [`Flowlets`];
//! * [`RealtimeFlows`]: which packets get a redundancy copy.

mod adaptive;
mod any;
mod flowlet;
mod model;
mod offer;
mod redundancy;
mod weighted;

pub use adaptive::{Adaptive, SMALL_PACKET, SPILL_SPAN_NS, SPILL_TIE_NS};
pub use any::AnyScheduler;
pub use flowlet::{Flowlets, FLOWLET_GAP_MARGIN_NS, RUN_SLACK_NS, STICK_SLACK_NS};
pub use model::{ps_per_byte, PathModel};
pub use offer::{
    level_queue, probe_gain, LEVEL_DEADBAND_NS, LEVEL_MAX_CUT_PPM, LEVEL_MIN_HORIZON_NS,
    PROBE_PHASES,
};
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

/// What a scheduler may weigh to place one packet. Each policy reads what
/// it needs and ignores the rest, so a caller that runs one policy only
/// may leave the others' fields at their defaults.
///
/// Time is the caller's clock in nanoseconds (the crate never reads one);
/// it must not go backwards between picks of one scheduler.
#[derive(Debug, Clone, Copy, Default)]
pub struct PickInput<'a> {
    /// The paths that may be used: bit `i` stands for path `i`.
    pub mask: u64,
    /// Per path id: its weight and window (read by [`Weighted`]).
    pub weights: &'a [SchedPath],
    /// Per path id: its rate, delay and queue cap (read by [`Adaptive`]).
    pub models: &'a [PathModel],
    /// The datagram's size on the wire, bytes.
    pub bytes: usize,
    /// Treat the datagram as bulk data even if it is small (a TCP SYN).
    pub bulk: bool,
    /// Now, ns on the caller's clock.
    pub now_ns: u64,
    /// How long the receiver's resequencer waits for a late packet, ns.
    pub hold_ns: u64,
    /// The path the packet's flowlet is on, if it goes on (see
    /// [`Flowlets::current`]; only for a [`Scheduler::follows_flowlets`]
    /// policy).
    pub flowlet: Option<usize>,
}

impl<'a> PickInput<'a> {
    /// The input of a policy that only weighs fixed shares: `weights` and
    /// `mask`, nothing of the packet.
    pub fn weighted(weights: &'a [SchedPath], mask: u64) -> PickInput<'a> {
        PickInput {
            mask,
            weights,
            ..PickInput::default()
        }
    }
}

/// A per-packet path choice policy.
pub trait Scheduler {
    /// Picks the path for the next packet among the set bits of
    /// `input.mask`, and charges it to the policy's state; `None` if no
    /// path may be used.
    fn pick(&mut self, input: &PickInput<'_>) -> Option<usize>;

    /// Whether [`Scheduler::pick`] reads [`PickInput::flowlet`]: the
    /// caller then looks each packet's flow up in its [`Flowlets`] before
    /// the pick and records the chosen path after it.
    fn follows_flowlets(&self) -> bool {
        false
    }
}

/// Calls `f` with the index of every set bit of `mask` below `len`.
///
/// Always inlined: it is the inner loop of every pick, and the compiler
/// does not always see that (left out of line, it cost a `weighted` pick
/// over 2 paths a fifth more instructions).
#[inline(always)]
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
