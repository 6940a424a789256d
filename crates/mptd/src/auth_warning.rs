//! One warning, now and then, when handshake messages fail authentication.
//!
//! Such refusals are counted per reason (`drops.auth`, `noise.refused`)
//! and logged at trace level, as they should be: on the open Internet they
//! are mostly noise. But the commonest cause on a new set-up is our own
//! peer configured differently (another `key_file`, a `public_key` that is
//! not the other end's, or another `[daemon] cipher`), and then nothing in
//! the default log says why the tunnel never comes up. So the first such
//! refusal is logged as a warning that names those settings, and then at
//! most one per [`WARN_EVERY`] for the whole daemon, so that a flood of
//! forgeries cannot fill the log.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Least time between two warnings.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// When the last warning was logged.
static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// Whether a warning may be logged at `now` (and, if so, records it).
fn due(last: &Mutex<Option<Instant>>, now: Instant) -> bool {
    let mut last = match last.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
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
        "a handshake message failed authentication; if it is from our peer, the two ends differ in key_file, public_key or [daemon] cipher (counted in drops.auth / noise.refused; warned at most once a minute)"
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
