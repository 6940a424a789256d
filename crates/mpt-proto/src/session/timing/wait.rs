//! How long the receiver's resequencer waits: for a gap to fill
//! ([`reorder_timeout`]), for a late datagram on each path before a gap
//! counts as lost ([`path_waits`]), and at least for data that overtook on
//! a faster path ([`rx_delay_spread`], reported to operators).
//!
//! All three follow the paths' measured delays: a fixed wait is either too
//! short beside a satellite (reordered data taken for lost) or too long
//! between like paths (a real loss holds every flow).

use std::time::{Duration, Instant};

use crate::path::{Liveness, Path};
use crate::sched::MAX_PATHS;
use crate::seq::{below_half, seq_before};
use crate::session::timing::owd::{owd_bounds, OWD_HORIZON};
use crate::session::Session;

/// The gap timeout while no path has an RTT sample to adapt it, and its
/// floor. Losses are normally detected without it (see [`crate::reorder`]);
/// it only matters when a path falls silent, and must exceed how long a
/// busy 2-core machine can stall a sender between two paths' sends (10-20
/// ms seen under load), or reordered packets would be mistaken for losses.
pub const DEFAULT_REORDER_TIMEOUT: Duration = Duration::from_millis(25);

/// Longest gap timeout, whatever the paths' delays.
pub const MAX_REORDER_TIMEOUT: Duration = Duration::from_secs(2);

/// Data seen within this counts in the one-way delay spread of
/// [`reorder_timeout`].
pub const RECENT_OWD: Duration = Duration::from_secs(1);

/// Jitter margin of [`path_waits`].
pub const PATH_WAIT_MARGIN: Duration = Duration::from_millis(2);

/// Smallest share of the received data (smoothed) that counts a path in
/// the measured delay spread ([`rx_delay_spread`]).
pub const SPREAD_MIN_SHARE: f64 = 0.005;

/// How long the resequencer waits for a gap to fill: the spread of one-way
/// delays between the fastest and the slowest usable path, plus twice the
/// largest RTT variation, plus a floor ([`DEFAULT_REORDER_TIMEOUT`]) for
/// scheduling jitter of the receive workers; capped at
/// [`MAX_REORDER_TIMEOUT`]. The spread is the larger of half the RTT
/// spread and, with a quarter's margin, the spread of the one-way delays
/// measured on the data received in the last second ([`RECENT_OWD`]),
/// which includes the paths' queues: a satellite's buffer can add as much
/// as its propagation delay. Without any usable path with an RTT sample,
/// the floor alone.
pub fn reorder_timeout(session: &Session, now: Instant) -> Duration {
    let floor = DEFAULT_REORDER_TIMEOUT;
    let usable = session.paths().map(|(_, p)| p).filter(|p| p.usable());
    let (mut lo, mut hi, mut var) = (Duration::MAX, Duration::ZERO, Duration::ZERO);
    for p in usable {
        if let Some(rtt) = p.rtt().smoothed() {
            lo = lo.min(rtt);
            hi = hi.max(rtt);
            var = var.max(p.rtt().variation());
        }
    }
    if hi < lo {
        return floor;
    }
    let recent = session
        .paths()
        .filter_map(|(_, p)| p.rx_owd())
        .filter(|(_, at)| now.saturating_duration_since(*at) < RECENT_OWD)
        .map(|(owd, _)| owd);
    let owd_spread = match owd_bounds(recent) {
        Some((l, h, _)) => {
            Duration::from_micros(u64::from(h.wrapping_sub(l)).min(u64::from(u32::MAX / 2)))
        }
        None => Duration::ZERO,
    };
    let spread = ((hi - lo) / 2).max(owd_spread + owd_spread / 4);
    (spread + var * 2 + floor).min(MAX_REORDER_TIMEOUT)
}

/// The spread (slowest − fastest) of the last one-way delays measured on
/// the up paths that bring data (`carries`), queueing included: what the
/// resequencer must at least wait for data that overtook on a faster path.
/// Samples older than [`OWD_HORIZON`] do not count. `None` with fewer
/// than two such paths. The daemon reports it in `mpt status`
/// (`reorder.spread_ms`) so a benchmark can set the holds it measured
/// against the delays the paths really had.
pub fn rx_delay_spread(
    session: &Session,
    now: Instant,
    carries: impl Fn(usize) -> bool,
) -> Option<Duration> {
    let (lo, hi, n) = owd_bounds(
        session
            .paths()
            .filter(|(id, p)| p.liveness() == Liveness::Up && carries(*id))
            .filter_map(|(_, p)| p.rx_owd())
            .filter(|(_, at)| now.saturating_duration_since(*at) < OWD_HORIZON)
            .map(|(owd, _)| owd),
    )?;
    let spread = hi.wrapping_sub(lo);
    (n >= 2 && below_half(spread)).then(|| Duration::from_micros(u64::from(spread)))
}

/// Per path id, for the resequencer's loss proof (see
/// [`crate::reorder::Resequencer::set_path_wait`]): how much later than on
/// the fastest path a datagram sent on a usable path arrives (the last
/// one-way delays measured on each within [`OWD_HORIZON`], or half the
/// difference of minimum RTTs where no delay was measured lately), plus
/// twice its RTT variation and [`PATH_WAIT_MARGIN`] for jitter, at most
/// the gap timeout `timeout`; `None` for paths that cannot carry data now.
pub fn path_waits(
    session: &Session,
    now: Instant,
    timeout: Duration,
) -> [Option<Duration>; MAX_PATHS] {
    let mut waits = [None; MAX_PATHS];
    let recent = |p: &Path| {
        p.rx_owd()
            .filter(|(_, at)| now.saturating_duration_since(*at) < OWD_HORIZON)
            .map(|(owd, _)| owd)
    };
    let usable = || session.paths().filter(|(_, p)| p.usable());
    let owd_lo = owd_bounds(usable().filter_map(|(_, p)| recent(p))).map(|(lo, _, _)| lo);
    let rtt_lo = usable().filter_map(|(_, p)| p.rtt().min()).min();
    for (id, p) in usable() {
        let extra = match (recent(p), owd_lo) {
            (Some(o), Some(lo)) if !seq_before(o, lo) => {
                Duration::from_micros(u64::from(o.wrapping_sub(lo)).min(u64::from(u32::MAX / 2)))
            }
            _ => match (p.rtt().min(), rtt_lo) {
                (Some(r), Some(lo)) => r.saturating_sub(lo) / 2,
                _ => Duration::ZERO,
            },
        };
        if let Some(w) = waits.get_mut(id) {
            *w = Some((extra + p.rtt().variation() * 2 + PATH_WAIT_MARGIN).min(timeout));
        }
    }
    waits
}
