//! What the remote command port has seen since start: requests executed
//! and refused by reason, answers not sent. Shown in the status the port
//! answers (`cmd_port`) and logged when they changed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use mpt_api::status::{CmdPortRefusals, CmdPortStats};

/// What the port has seen since start.
#[derive(Debug, Default)]
pub struct Stats {
    /// Authenticated requests executed.
    pub accepted: AtomicU64,
    /// Not an envelope / bad field.
    pub malformed: AtomicU64,
    /// Longer than `MAX_REQUEST`.
    pub oversized: AtomicU64,
    /// Names no configured connection.
    pub unknown_connection: AtomicU64,
    /// Names a connection without `key_file`.
    pub no_key: AtomicU64,
    /// Bad MAC.
    pub auth: AtomicU64,
    /// Timestamp out of the window.
    pub stale: AtomicU64,
    /// Nonce seen before.
    pub replay: AtomicU64,
    /// Replay set full.
    pub replay_full: AtomicU64,
    /// Authenticated, but the request is outside the key's scope.
    pub forbidden: AtomicU64,
    /// UDP answers replaced by "use TCP".
    pub udp_too_large: AtomicU64,
    /// Refusals not sent (UDP: larger than the request, or over the rate).
    pub unanswered: AtomicU64,
    /// TCP clients turned away (too many at once).
    pub tcp_busy: AtomicU64,
}

impl Stats {
    /// The counters as the status document shows them (`cmd_port`).
    pub fn to_status(&self) -> CmdPortStats {
        let g = |c: &AtomicU64| Some(c.load(Relaxed));
        CmdPortStats {
            accepted: g(&self.accepted),
            refused: Some(CmdPortRefusals {
                auth: g(&self.auth),
                forbidden: g(&self.forbidden),
                malformed: g(&self.malformed),
                no_key: g(&self.no_key),
                oversized: g(&self.oversized),
                replay: g(&self.replay),
                replay_full: g(&self.replay_full),
                stale: g(&self.stale),
                unknown_connection: g(&self.unknown_connection),
                other: Default::default(),
            }),
            tcp_busy: g(&self.tcp_busy),
            udp_too_large: g(&self.udp_too_large),
            unanswered: g(&self.unanswered),
            other: Default::default(),
        }
    }

    /// Logs the counters with `what` as the message.
    pub(super) fn log(&self, what: &str) {
        let g = |c: &AtomicU64| c.load(Relaxed);
        tracing::info!(
            accepted = g(&self.accepted),
            malformed = g(&self.malformed),
            oversized = g(&self.oversized),
            unknown_connection = g(&self.unknown_connection),
            no_key = g(&self.no_key),
            auth = g(&self.auth),
            stale = g(&self.stale),
            replay = g(&self.replay),
            replay_full = g(&self.replay_full),
            forbidden = g(&self.forbidden),
            udp_too_large = g(&self.udp_too_large),
            unanswered = g(&self.unanswered),
            tcp_busy = g(&self.tcp_busy),
            "{what}"
        );
    }

    /// All counters added up: changes whenever one does.
    pub(super) fn sum(&self) -> u64 {
        [
            &self.accepted,
            &self.malformed,
            &self.oversized,
            &self.unknown_connection,
            &self.no_key,
            &self.auth,
            &self.stale,
            &self.replay,
            &self.replay_full,
            &self.forbidden,
            &self.udp_too_large,
            &self.unanswered,
            &self.tcp_busy,
        ]
        .iter()
        .map(|c| c.load(Relaxed))
        .fold(0u64, u64::wrapping_add)
    }
}
