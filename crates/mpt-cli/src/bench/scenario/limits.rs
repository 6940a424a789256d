//! Limits every scenario is checked against (the generic sweep and the
//! `unlike` cases alike).

/// Most paths a case may have (address plan `10.77.<i>.0/24`, one veth pair
/// per path; the MPT article went to 32 at most).
pub const MAX_PATHS: usize = 32;

/// Longest `omit` of a scenario, seconds.
pub const MAX_OMIT_S: f64 = 60.0;

/// Most parallel TCP streams per measurement (iperf3 allows 128).
pub const MAX_STREAMS: u32 = 32;
