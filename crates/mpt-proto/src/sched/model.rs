//! What the `adaptive` scheduler knows of a path: its rate as a cost per
//! byte, its delay above the connection's fastest path and how much the
//! scheduler may queue on it. The session builds these from its
//! measurements (`Session::path_models`); the schedulers only read them.

/// What the scheduler knows of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathModel {
    /// Transmission time per byte at the estimated rate, in picoseconds
    /// (8000 = 1 Gbit/s). 0 models the path as infinitely fast.
    pub ps_per_byte: u64,
    /// One-way delay above the connection's fastest path, ns.
    pub owd_ns: u64,
    /// Most virtual queue the scheduler builds on the path, ns.
    pub cap_ns: u64,
    /// Used only for packets no clean path can take.
    pub lossy: bool,
    /// The rate is only a lower bound (no standing queue has shown the
    /// capacity yet): the path takes full-size overflow when the paths
    /// where it would arrive first are all of known capacity.
    pub lower_bound: bool,
}

/// Picoseconds per byte for a rate in bit/s (0 for an unknown rate).
pub const fn ps_per_byte(rate_bps: u64) -> u64 {
    match 8_000_000_000_000u64.checked_div(rate_bps) {
        None => 0,
        Some(0) => 1,
        Some(ps) => ps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_convert_to_a_cost_per_byte() {
        assert_eq!(ps_per_byte(8_000_000_000), 1000);
        assert_eq!(ps_per_byte(0), 0, "unknown: free");
        assert_eq!(ps_per_byte(u64::MAX), 1, "never free when known");
    }
}
