//! One warning, now and then, when public-key handshake initiations fail
//! to decrypt.
//!
//! Such refusals are counted (`noise.refused.decrypt`) and logged at trace
//! level. But an initiation that passed mac1 (its sender knows our public
//! key) and then does not decrypt is, on a new set-up, most often our own
//! peer configured differently: a PSK (`key_file`) on one end only or not
//! the same, or another `[daemon] cipher`. Nothing in the default log said
//! why the tunnel never came up. So the first such refusal on a connection
//! without a session is logged as a warning that names those settings,
//! then at most one per [`WARN_EVERY`] for the whole daemon. Junk cannot
//! trigger it without our public key (mac1 stops it first), and junk sent
//! to a working tunnel adds no line. The PSK handshake has no such filter
//! (any datagram can fail its MAC), so its refusals stay counted only
//! (`drops.auth`).

use crate::sync::lock_unpoisoned;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Least time between two warnings.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// When the last warning was logged.
static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// Whether a warning may be logged at `now` (and, if so, records it).
fn due(last: &Mutex<Option<Instant>>, now: Instant) -> bool {
    let mut last = lock_unpoisoned(last);
    if last.is_some_and(|t| now.saturating_duration_since(t) < WARN_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}

/// A handshake message (`what`) for connection `conn` (`None` on the
/// shared port, before the sender is known) from `from` failed
/// authentication at `now`.
pub fn failed(conn: Option<&str>, from: Option<SocketAddr>, what: &str, now: Instant) {
    if !due(&LAST, now) {
        return;
    }
    let conn = conn.unwrap_or("-");
    let from = from.map_or_else(|| "-".to_string(), |a| a.to_string());
    tracing::warn!(
        conn,
        %from,
        what,
        "a handshake initiation that knows our public key does not decrypt; if it is from our peer, the two ends differ in key_file or [daemon] cipher (counted in noise.refused.decrypt; warned at most once a minute)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_one_warning_per_interval() {
        let last = Mutex::new(None);
        let t = Instant::now();
        assert!(due(&last, t));
        assert!(!due(&last, t + Duration::from_secs(1)));
        assert!(!due(&last, t + WARN_EVERY - Duration::from_millis(1)));
        assert!(due(&last, t + WARN_EVERY));
        assert!(!due(&last, t + WARN_EVERY + Duration::from_secs(59)));
    }
}
