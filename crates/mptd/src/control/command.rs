//! Runtime changes requested over the control socket or by SIGHUP.
//!
//! The control loop owns the sessions, so every change goes to it as a
//! [`Command`] with a reply channel, and it applies the change between two
//! rounds. Nothing here touches the data plane directly except through the
//! path table and the per-path atomics the workers read once per batch
//! (see [`crate::control::pathset`]).
//!
//! Adding or removing a path is announced to the peer with a control
//! message. `path add` answers once the peer confirmed (or refused, in
//! which case the path is taken out again) or after [`PEER_ANSWER_WAIT`];
//! a reload answers at once and logs the peer's answers. A connection
//! without a key takes no control messages (nothing would tell its peer
//! from an impostor), so there a change applies to this side only and the
//! answer says so: the operator makes the same change on the peer.
//!
//! The wire format of requests and answers is mpt-api's: the control
//! socket reads a [`mpt_api::Request`] and turns the changes into a
//! [`Command`]; the answer comes back as the [`mpt_api::Response`] the
//! socket writes.

use std::net::IpAddr;
use std::time::Duration;

use mpt_api::Response;
use mpt_proto::path::AdminStatus;

/// How long `path add` and `path remove` wait for the peer's answer before
/// answering the operator anyway (the control socket client waits 5 s).
pub const PEER_ANSWER_WAIT: Duration = Duration::from_secs(3);

/// A change to apply.
#[derive(Debug, Clone)]
pub enum Command {
    /// Set a path's configured status.
    PathState {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// New status.
        state: AdminStatus,
    },
    /// Set a path's weights.
    PathWeight {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// New `weight_out`.
        weight_out: u32,
        /// New `weight_in`, if given.
        weight_in: Option<u16>,
    },
    /// Add a path and tell the peer.
    PathAdd {
        /// Connection name.
        conn: String,
        /// New path's name.
        name: String,
        /// Local address (the connection's port).
        local: IpAddr,
        /// Remote address (the peer's port); learnt if absent.
        remote: Option<IpAddr>,
        /// Device to bind to.
        interface: Option<String>,
        /// `weight_out` and `weight_in` (default 1).
        weight: Option<u32>,
    },
    /// Remove a path and tell the peer.
    PathRemove {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// Remove it even if it is the last usable path.
        force: bool,
    },
    /// Re-read the config file and apply the difference.
    Reload,
}

/// What a command answers: the response to send (`ok`, with what the
/// request reports), or why it failed.
pub type Answer = Result<Response, String>;

/// A command with the channel its answer goes back on.
pub type Request = (Command, std::sync::mpsc::SyncSender<Answer>);

/// How a command was handled.
#[derive(Debug)]
pub enum Outcome {
    /// Answer now.
    Done(Answer),
    /// Answer when the peer answers control message `msg_id` of connection
    /// `conn` (or after [`PEER_ANSWER_WAIT`]) with `answer` plus the peer's
    /// verdict.
    AwaitPeer {
        /// Connection index.
        conn: usize,
        /// The control message.
        msg_id: u64,
        /// The answer so far.
        answer: Response,
    },
}

pub(crate) fn status_name(s: AdminStatus) -> &'static str {
    match s {
        AdminStatus::Up => "up",
        AdminStatus::Down => "down",
        AdminStatus::Backup => "backup",
    }
}
