//! Smoothed shares of the data each path carries.
//!
//! The daemon counts the bytes sent and received per path; once per
//! control round it folds each path's part of the round's total into an
//! exponentially smoothed share. The received shares decide which paths
//! count as carrying data for the timing policy
//! ([`crate::session::timing::EQUALIZE_MIN_SHARE`],
//! [`crate::session::timing::SPREAD_MIN_SHARE`]); both are shown in
//! `mpt status`.

use std::time::{Duration, Instant};

/// Time constant of the smoothed shares of sent and received data.
pub const SHARE_TAU: Duration = Duration::from_millis(500);

/// A path that brought no data for this long has no share of the
/// received data (the smoothed share only moves when data arrives, so
/// after a bulk flow over a satellite path it stood still, and held every
/// packet of the next interactive flow to the satellite's delay until
/// enough of its data had come). Longer than a BBR flow's pause of the
/// satellite path while it probes its minimum RTT (about one RTT, 600 ms
/// over GEO), so a bulk flow's hold stays steady.
pub const SHARE_IDLE: Duration = Duration::from_secs(2);

/// The weight of a new share sample that covers the time since the last
/// one (`since`, `None` for the first sample, which counts in full):
/// `1 - e^(-dt / SHARE_TAU)`, so the weight grows with the time covered.
pub fn share_weight(since: Option<Instant>, now: Instant) -> f64 {
    since.map_or(1.0, |t| {
        let dt = now.saturating_duration_since(t).as_secs_f64();
        1.0 - (-dt / SHARE_TAU.as_secs_f64()).exp()
    })
}

/// `old` moved by `weight` towards this round's share, `part` of `total`
/// bytes; `old` unchanged when the round counted nothing (`total` 0).
pub fn smoothed_share(old: f64, part: u64, total: u64, weight: f64) -> f64 {
    if total == 0 {
        return old;
    }
    old * (1.0 - weight) + weight * part as f64 / total as f64
}

/// Whether a path that last brought data at `last_data_ns` (ns on the
/// connection's clock, 0 for never) has no share of the received data at
/// `now_ns`: it brought none for longer than [`SHARE_IDLE`].
pub fn share_idle(last_data_ns: u64, now_ns: u64) -> bool {
    last_data_ns == 0 || now_ns.saturating_sub(last_data_ns) > SHARE_IDLE.as_nanos() as u64
}
