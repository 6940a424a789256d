//! Timing policy of the receiving side: how long the resequencer waits
//! and which delay the receiver holds data to, from the paths' measured
//! delays.
//!
//! These are pure functions of a [`Session`]'s path measurements, the
//! data shares the driver counts and `now`: the daemon's control loop
//! asks for a [`TimingPlan`] once per round ([`Session::timing_plan`]) and
//! publishes it to its receive workers, which apply it per packet. Kept
//! here, beside the measurements they read, the rules can be tested in
//! virtual time like the rest of the protocol.
//!
//! * `wait`: the resequencer's gap timeout ([`reorder_timeout`]),
//!   per-path waits of its loss proof ([`path_waits`]), and the measured
//!   delay spread ([`rx_delay_spread`]);
//! * `equalize`: the delay data is held to ([`equalize_target`]);
//! * `share`: the smoothed shares of data per path that decide which
//!   paths count as carrying data ([`smoothed_share`]);
//! * `owd`: comparing wrapping one-way delays ([`owd_bounds`]).

mod equalize;
mod owd;
mod share;
mod wait;

#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

pub use equalize::{
    equalize_target, random_loss, EqualizeTarget, EQUALIZE_MIN_SHARE, EQUALIZE_NEAR, MIN_HOLD,
    RANDOM_LOSS_HOLD,
};
pub use owd::{owd_bounds, OWD_HORIZON};
pub use share::{share_idle, share_weight, smoothed_share, SHARE_IDLE, SHARE_TAU};
pub use wait::{
    path_waits, reorder_timeout, rx_delay_spread, DEFAULT_REORDER_TIMEOUT, MAX_REORDER_TIMEOUT,
    PATH_WAIT_MARGIN, RECENT_OWD, SPREAD_MIN_SHARE,
};

use crate::sched::MAX_PATHS;
use crate::session::Session;

/// What the driver measured that the session does not track: how the
/// received data is spread over the paths, and when the receiver last
/// asked for repairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimingInput {
    /// Per path id: its smoothed share (0 to 1) of the data received,
    /// 0 for a path that brought none lately (see [`smoothed_share`] and
    /// [`share_idle`]).
    pub rx_share: [f64; MAX_PATHS],
    /// When the receiver last asked the peer for repairs, if ever.
    pub last_repair_request: Option<Instant>,
}

impl Default for TimingInput {
    fn default() -> Self {
        TimingInput {
            rx_share: [0.0; MAX_PATHS],
            last_repair_request: None,
        }
    }
}

/// The receiver's waits and holds for one control round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimingPlan {
    /// The resequencer's gap timeout ([`reorder_timeout`]).
    pub reorder_timeout: Duration,
    /// Per path id, the wait of the resequencer's loss proof
    /// ([`path_waits`], capped at `reorder_timeout`).
    pub path_waits: [Option<Duration>; MAX_PATHS],
    /// The one-way delay spread of the paths bringing at least
    /// [`SPREAD_MIN_SHARE`] of the data ([`rx_delay_spread`]).
    pub rx_delay_spread: Option<Duration>,
    /// The delay short datagrams are held to ([`equalize_target`], paths
    /// carrying at least [`EQUALIZE_MIN_SHARE`] of the data).
    pub equalize: Option<EqualizeTarget>,
    /// The delay full-size datagrams and TCP SYNs are held to (the same,
    /// with far paths counted whenever they are up).
    pub equalize_bulk: Option<EqualizeTarget>,
}

impl Session {
    /// The receiver's timing for `now`, from the paths' measurements and
    /// the driver's `input`: a path carries data when its share reaches
    /// [`EQUALIZE_MIN_SHARE`], brings data (for the spread) when it
    /// reaches [`SPREAD_MIN_SHARE`], and the connection has random loss
    /// while the last repair request is within [`RANDOM_LOSS_HOLD`].
    pub fn timing_plan(&self, now: Instant, input: &TimingInput) -> TimingPlan {
        let share = |id: usize| input.rx_share.get(id).copied().unwrap_or(0.0);
        let carries = |id: usize| share(id) >= EQUALIZE_MIN_SHARE;
        // Any path bringing data, however little, makes the fast paths'
        // packets wait for it in the resequencer.
        let brings = |id: usize| share(id) >= SPREAD_MIN_SHARE;
        let random_loss = random_loss(input.last_repair_request, now);
        let timeout = reorder_timeout(self, now);
        TimingPlan {
            reorder_timeout: timeout,
            path_waits: path_waits(self, now, timeout),
            rx_delay_spread: rx_delay_spread(self, now, brings),
            equalize: equalize_target(self, now, carries, random_loss, false),
            equalize_bulk: equalize_target(self, now, carries, random_loss, true),
        }
    }
}
