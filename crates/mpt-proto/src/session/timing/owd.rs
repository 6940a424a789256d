//! One-way delays as the receiver measures them: wrapping microseconds
//! with the clock offset between the two endpoints in them, so only their
//! differences mean anything. These helpers compare and bound them, and
//! say how old a sample may be and still count.

use std::time::Duration;

use crate::seq::seq_before;

/// Oldest one-way delay sample a path's delay is taken from (idle paths
/// are probed every `keepalive`, 2 s by default).
pub const OWD_HORIZON: Duration = Duration::from_secs(10);

/// The lowest and highest of one-way delays (wrapping µs) and how many
/// there were; `None` for none.
pub fn owd_bounds(owds: impl Iterator<Item = u32>) -> Option<(u32, u32, usize)> {
    owds.fold(None, |acc, o| match acc {
        None => Some((o, o, 1)),
        Some((lo, hi, n)) => Some((
            if seq_before(o, lo) { o } else { lo },
            if seq_before(hi, o) { o } else { hi },
            n + 1,
        )),
    })
}
