//! How much of its estimated rate a path is offered to the `adaptive`
//! scheduler: more now and then to find capacity the estimate does not
//! know of ([`probe_gain`]), less while its measured queue stands deeper
//! than the connection needs ([`level_queue`]). Both act on the cost per
//! byte of a [`crate::sched::PathModel`] before a batch is scheduled.

/// Queue differences between paths below this are noise (ns): the
/// receiver's scheduling jitter on a loaded machine.
pub const LEVEL_DEADBAND_NS: u64 = 1_000_000;

/// Most of its rate (parts per million) a path gives up to drain a queue
/// deeper than the other paths': leveling steers, it never shuts a path.
pub const LEVEL_MAX_CUT_PPM: u64 = 250_000;

/// Shortest time over which a path is asked to drain its excess queue
/// (ns). Longer than the feedback's lag (a quarter RTT, at least 10 ms,
/// plus the one-way delay) so the loop does not overshoot.
pub const LEVEL_MIN_HORIZON_NS: u64 = 50_000_000;

/// The cost per byte to model a path with, given its estimate `ps` and
/// how much deeper its measured standing queue is than it needs to be
/// (`excess_ns`: its queue, or how much later than the connection's
/// quickest path its packets arrive if that is less). The path is offered
/// `excess / horizon` less of its rate (between the dead band and
/// [`LEVEL_MAX_CUT_PPM`]), so the excess drains over about `horizon_ns`
/// (at least [`LEVEL_MIN_HORIZON_NS`]) while the other paths take the
/// difference.
///
/// Why: the rate estimates of like paths differ by a percent or two of
/// noise, and a share that much above a path's capacity grows its queue
/// without bound (1 % of 100 Mbit/s is 10 ms more every second). The
/// resequencer then holds every flow for the deepest queue, and a BBR
/// flow, whose window is twice its minimum RTT's worth, is held to a
/// fraction of the capacity. Feeding the measured queues back keeps
/// them level whatever the estimates' errors.
pub fn level_queue(ps: u64, excess_ns: u64, horizon_ns: u64) -> u64 {
    let over = excess_ns.saturating_sub(LEVEL_DEADBAND_NS);
    if over == 0 || ps == 0 {
        return ps;
    }
    let horizon = horizon_ns.max(LEVEL_MIN_HORIZON_NS);
    let cut =
        (u128::from(over) * 1_000_000 / u128::from(horizon)).min(u128::from(LEVEL_MAX_CUT_PPM));
    (u128::from(ps) * 1_000_000 / (1_000_000 - cut)).min(u128::from(u64::MAX)) as u64
}

/// Phases of one probing cycle.
pub const PROBE_PHASES: u64 = 8;

/// The transmission cost per byte to use at `now_ns` for a path whose
/// estimate costs `ps` per byte: a quarter more capacity offered in the
/// first phase of each cycle of [`PROBE_PHASES`] phases of `phase_ns`, a
/// fifth less in the second, the estimate in the others. Paths are
/// offset by their index so they do not probe together.
pub fn probe_gain(ps: u64, now_ns: u64, phase_ns: u64, path: usize) -> u64 {
    if phase_ns == 0 {
        return ps;
    }
    match (now_ns / phase_ns + path as u64) % PROBE_PHASES {
        0 => ps * 4 / 5,
        1 => ps + ps / 4,
        _ => ps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::model::ps_per_byte;

    const MS: u64 = 1_000_000;

    #[test]
    fn level_queue_cuts_in_proportion_and_within_bounds() {
        // Within the dead band, unknown rates: unchanged.
        assert_eq!(level_queue(1000, LEVEL_DEADBAND_NS, 0), 1000);
        assert_eq!(level_queue(0, 40 * MS, 0), 0);
        // 5 ms over the band, 100 ms horizon: 5 % less rate offered.
        assert_eq!(
            level_queue(950_000, LEVEL_DEADBAND_NS + 5 * MS, 100 * MS),
            1_000_000
        );
        // A short horizon is raised to the minimum.
        assert_eq!(
            level_queue(950_000, LEVEL_DEADBAND_NS + 5 * MS / 2, 0),
            1_000_000
        );
        // Never more than a quarter.
        assert_eq!(level_queue(750, u64::MAX, 1), 1000);
        assert_eq!(level_queue(u64::MAX, u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn probe_gain_cycles() {
        let g: Vec<u64> = (0..8).map(|k| probe_gain(1000, k * 10, 10, 0)).collect();
        assert_eq!(g, [800, 1250, 1000, 1000, 1000, 1000, 1000, 1000]);
        assert_eq!(probe_gain(1000, 0, 10, 1), 1250);
        assert_eq!(probe_gain(1000, 0, 10, 7), 1000);
        assert_eq!(probe_gain(1000, 5, 0, 0), 1000);
        assert_eq!(ps_per_byte(8_000_000_000), 1000);
        assert_eq!(ps_per_byte(0), 0);
        assert_eq!(ps_per_byte(u64::MAX), 1);
    }
}
