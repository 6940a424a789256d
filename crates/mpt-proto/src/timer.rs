//! The one timer table of a session: every wake-up has a reason.
//!
//! Timers are not stored as armed objects; each path derives its deadlines
//! from its state (`Path::next_timer` in the `path` module), and the
//! session takes the earliest. Nothing to cancel, nothing to leak.

use std::time::Instant;

/// Why a path needs attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerKind {
    /// A keepalive probe is due.
    Probe,
    /// The dead timer expires.
    Dead,
    /// Data went out and nothing came back for a few RTTs.
    Suspect,
    /// A control message is due to be sent again (or given up).
    Control,
    /// Data arrived on the path and the peer is due a feedback on it.
    Feedback,
}

/// The next wake-up of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timer {
    /// When.
    pub at: Instant,
    /// Which path (its id), if the timer belongs to one.
    pub path: Option<usize>,
    /// What for.
    pub kind: TimerKind,
}
