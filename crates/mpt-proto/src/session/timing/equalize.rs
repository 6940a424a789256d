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
/// for anyway: equalising to the lowest of its window instead moved the
/// wait into the resequencer (WiFi + LTE with BBR: hold p99 38-59 ms in 5
/// of 6 runs against 8-14 ms in 5 of 6 with the latest).
///
/// A path whose minimum RTT is within [`EQUALIZE_NEAR`] of the fastest
/// counts whether it carries data at the moment or not (unless
/// `random_loss`), so that a flow meets one delay from its first packet to
/// its last. When only the paths in use counted, a BBR flow measured the
/// fast path's RTT while it was slow enough to fit there, sized its window
/// by it and, once the slow path joined and everything was held to its
/// delay, was held to a fraction of the summed capacity: bimodal between
/// 0.44 and 0.98 of the sum over WiFi + LTE in runs of the same build,
/// 0.91-0.95 with near paths always counted. A far path (a satellite
/// beside DSL) counts, unless `bulk`, only while it brings at least
/// [`EQUALIZE_MIN_SHARE`] of the data (payload of data and repair
/// messages; see [`crate::session::timing::SHARE_IDLE`]): holding every
/// datagram to its delay would cost interactive traffic hundreds of
/// milliseconds. (An older build measured CUBIC over GEO + DSL at 0.88 of
/// the best path held always, 1.42 held only while the satellite carried
/// data; but it counted keepalives as data, so an idle satellite "carried"
/// half of it and every flow began held, as `bulk` now makes sure.)
///
/// `bulk`: the target of full-size datagrams and TCP SYNs, for which a
/// far path counts whenever it is up, carrying data or not (unless
/// `random_loss`). A bulk flow thus meets the far path's delay from its
/// handshake on, whether the sender has put any of it there yet or not,
/// while short datagrams (pings, keystrokes, DNS, voice, ACKs) see the near
/// path's. Measured over GEO + DSL: with the far path counted for every
/// datagram only while it carried data, a flow that began on DSL alone
/// met a 25 ms RTT, then 313 ms once the satellite joined; CUBIC left
/// slow start on DSL's queue and took 15 s to grow into the satellite
/// (0.58 and 0.64 of the best path in two first runs, against 1.47 and
/// 1.48 in runs that began held), and BBR, sizing its window by the
/// 25 ms, fell to 2.6 Mbit/s until its minimum RTT expired.
///
/// `random_loss`: the receiver asked for repairs within the last
/// [`RANDOM_LOSS_HOLD`]. Then only paths carrying data count: the losses
/// repair does not catch make a loss-based sender (CUBIC) back off, and
/// its rate after that is its window over the RTT, so the tunnel had
/// better show the fast path's RTT while the flow fits there (CUBIC over
/// WiFi with 1 % loss + LTE: 0.68-1.33 of the best path with near paths
/// always counted, 1.57-2.06 without).
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
