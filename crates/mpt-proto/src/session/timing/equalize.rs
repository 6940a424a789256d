//! Which one-way delay the receiver holds data to (delay equalisation).
//!
//! Over paths of unlike delay a flow's packets arrive early or late by the
//! path they took, and a TCP sender sees its RTT jump within one flow. The
//! receiver therefore holds each data datagram until the one-way delay of
//! the slowest path that counts ([`equalize_target`]); the daemon's
//! receive workers do the holding, per packet. Which paths count, and
//! why, is the rule below.

use crate::seq::below_half;
use std::time::{Duration, Instant};

use crate::path::{AdminStatus, Liveness, Path};
use crate::session::timing::owd::{owd_bounds, OWD_HORIZON};
use crate::session::Session;

/// Holds shorter than this are not worth it (like paths, jitter): no
/// target is set below it.
pub const MIN_HOLD: Duration = Duration::from_millis(1);

/// RTT above the fastest path's within which a path sets the delay to
/// equalise to whether or not it carries data (see [`equalize_target`]).
pub const EQUALIZE_NEAR: Duration = Duration::from_millis(100);

/// Smallest share of the received data (smoothed) that lets a path farther
/// than [`EQUALIZE_NEAR`] set the delay the receiver equalises to.
pub const EQUALIZE_MIN_SHARE: f64 = 0.05;

/// How long after the last repair request a connection counts as having
/// random loss (see [`equalize_target`]).
pub const RANDOM_LOSS_HOLD: Duration = Duration::from_secs(10);

/// The delay to hold data to: the slowest counted path's one-way delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EqualizeTarget {
    /// The one-way delay (µs, wrapping, with the clock offset, as
    /// [`Path::rx_owd`]).
    pub owd_us: u32,
    /// How far it lies above the fastest counted path (µs): the longest
    /// hold it makes.
    pub spread_us: u32,
}

/// The one-way delay the receiver holds data to: the slowest of the
/// connection's paths that are up, not backups, and either near the
/// fastest in delay or bringing a real share of the data (`carries`), by
/// the last delay measured on each path that carries data, and by the
/// lowest over the last 20-40 ms on each that does not (its sporadic
/// data's, probes' and feedback's, see [`Path::rx_owd_standing`]); samples
/// older than [`OWD_HORIZON`] do not count. There is a target only when it
/// exceeds the fastest by at least [`MIN_HOLD`] (and by less than half the
/// wrapping clock).
///
/// Why the two: a path that carries little has few samples, each with the
/// jitter of both endpoints' threads, and its latest one set the hold of
/// every flow (ACKs coming back over 2 of 12 like paths were held
/// 3.6-3.9 ms for it). A path that carries data has a fresh sample every
/// receive summary, and its latest one is what the resequencer will wait
/// for anyway: equalising to the lowest of its window instead moves the
/// wait into the resequencer (measured:
/// docs/results/2026-11-26-bbr-rtt-captures.md).
///
/// A path whose minimum RTT is within [`EQUALIZE_NEAR`] of the fastest
/// counts whether it carries data at the moment or not (unless
/// `random_loss`), so that a flow meets one delay from its first packet to
/// its last: counting only the paths in use lets a BBR flow size its
/// window by the fast path's RTT and then be held to a fraction of the
/// summed capacity once the slow path joins (measured:
/// docs/results/2026-11-25-unlike-paths.md). A far path (a satellite
/// beside DSL) counts, unless `bulk`, only while it brings at least
/// [`EQUALIZE_MIN_SHARE`] of the data (payload of data and repair
/// messages; see [`crate::session::timing::SHARE_IDLE`]): holding every
/// datagram to its delay would cost interactive traffic hundreds of
/// milliseconds; bulk flows are held to it from their start by `bulk`.
///
/// `bulk`: the target of full-size datagrams and TCP SYNs, for which a
/// far path counts whenever it is up, carrying data or not (unless
/// `random_loss`). A bulk flow thus meets the far path's delay from its
/// handshake on, whether the sender has put any of it there yet or not,
/// while short datagrams (pings, keystrokes, DNS, voice, ACKs) see the near
/// path's. Otherwise a flow that begins on DSL alone meets a 25 ms RTT,
/// then 313 ms once the satellite joins, and both CUBIC and BBR size
/// themselves by the short one (measured:
/// docs/results/2026-11-27-unlike-paths-far-path-overflow.md).
///
/// `random_loss`: the receiver asked for repairs within the last
/// [`RANDOM_LOSS_HOLD`]. Then only paths carrying data count: the losses
/// repair does not catch make a loss-based sender (CUBIC) back off, and
/// its rate after that is its window over the RTT, so the tunnel had
/// better show the fast path's RTT while the flow fits there (measured:
/// docs/results/2026-11-25-unlike-paths.md).
pub fn equalize_target(
    session: &Session,
    now: Instant,
    carries: impl Fn(usize) -> bool,
    random_loss: bool,
    bulk: bool,
) -> Option<EqualizeTarget> {
    let primary = |p: &Path| p.liveness() == Liveness::Up && p.params().admin == AdminStatus::Up;
    let fastest = session
        .paths()
        .filter(|(_, p)| primary(p))
        .filter_map(|(_, p)| p.rtt().min())
        .min();
    let near = |p: &Path| match (fastest, p.rtt().min()) {
        (Some(f), Some(r)) => !random_loss && r.saturating_sub(f) <= EQUALIZE_NEAR,
        _ => false,
    };
    let (lo, hi, _) = owd_bounds(
        session
            .paths()
            .filter(|(id, p)| primary(p) && (near(p) || carries(*id) || (bulk && !random_loss)))
            .filter_map(|(id, p)| match carries(id) {
                true => p.rx_owd(),
                false => p.rx_owd_standing(now),
            })
            .filter(|(_, at)| now.saturating_duration_since(*at) < OWD_HORIZON)
            .map(|(owd, _)| owd),
    )?;
    let spread = u64::from(hi.wrapping_sub(lo));
    (spread >= MIN_HOLD.as_micros() as u64 && below_half(spread as u32)).then_some(EqualizeTarget {
        owd_us: hi,
        spread_us: spread as u32,
    })
}

/// Whether the receiver counts as having random loss at `now`: it last
/// asked for repairs (`last_repair_request`) less than
/// [`RANDOM_LOSS_HOLD`] ago.
pub fn random_loss(last_repair_request: Option<Instant>, now: Instant) -> bool {
    last_repair_request.is_some_and(|t| now.saturating_duration_since(t) < RANDOM_LOSS_HOLD)
}
