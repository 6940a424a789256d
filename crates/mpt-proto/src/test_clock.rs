//! The one place the crate's tests read the real clock. The protocol code
//! never does (it takes `now: Instant`; `clippy.toml` forbids
//! `Instant::now` here), so a test takes one base instant from this module
//! and moves virtual time on from it.

use std::time::Instant;

/// A base instant for a test: every later time is computed from it.
#[allow(clippy::disallowed_methods)]
pub(crate) fn t0() -> Instant {
    Instant::now()
}
