//! What the session reports to its driver: what an accepted datagram was,
//! and the events (state changes, control messages, handovers) it queues
//! for [`crate::Session::poll_event`].

use crate::path::PathState;
use crate::session::handover::Handover;
use crate::wire::{ControlMsg, Refusal};

/// What an accepted datagram was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received<'a> {
    /// An IP packet for the tun device.
    Data(&'a [u8]),
    /// A probe (a reply has been queued).
    Probe,
    /// A probe reply (RTT and loss updated).
    ProbeReply,
    /// Feedback on our data (estimators updated).
    Feedback,
    /// A control message (see the events).
    Control,
}

/// Something the driver or an operator must know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A path's reported state changed.
    PathStateChanged {
        /// Path index.
        path: usize,
        /// Old state.
        from: PathState,
        /// New state.
        to: PathState,
    },
    /// The peer asks for a change (add or remove a path). The driver acts
    /// on it and must answer with [`crate::Session::answer_control`].
    PeerControl {
        /// The path it arrived on (the answer goes back there).
        via: usize,
        /// The request.
        msg: ControlMsg,
    },
    /// The peer answered one of our control messages.
    ControlAnswered {
        /// Our message.
        msg: ControlMsg,
        /// Its answer.
        result: Result<(), Refusal>,
    },
    /// The peer never answered one of our control messages.
    ControlGaveUp {
        /// Our message.
        msg: ControlMsg,
    },
    /// Data moved off a path that left service (see [`crate::session::HandoverTracker`]).
    Handover(Handover),
}
