//! Why the session refuses a datagram or a change: typed errors, each
//! mapping to a drop counter or an operator-facing message.

use crate::control::ControlError;
use crate::error::DecodeError;
use crate::sched::MAX_PATHS;
use crate::wire::MsgType;

/// Why a datagram was not accepted. Each maps to a drop counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// The header or body did not decode.
    #[error("malformed: {0}")]
    Malformed(#[from] DecodeError),
    /// The header names another connection.
    #[error("unknown connection id {0}")]
    UnknownConnection(u32),
    /// The path index is not one of ours.
    #[error("no such path {0}")]
    UnknownPath(usize),
    /// A message this version does not handle yet (control, handshake).
    #[error("unsupported message type {0:?}")]
    Unsupported(MsgType),
    /// A sealed message arrived on a session without keys.
    #[error("sealed message without session keys")]
    Sealed,
}

/// Errors building or reconfiguring a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// More paths than [`MAX_PATHS`].
    #[error("{0} paths, at most {MAX_PATHS} allowed")]
    TooManyPaths(usize),
    /// The path index is not one of ours.
    #[error("no such path {0}")]
    UnknownPath(usize),
    /// The path id is taken.
    #[error("path id {0} is in use")]
    PathExists(usize),
    /// Too many control messages await an answer.
    #[error(transparent)]
    Control(#[from] ControlError),
}
