//! Why a public-key handshake message was refused or could not be built.
//!
//! One enum for the whole module: the daemon counts each refusal by its
//! kind (`HandshakeCounters::refuse`, in `stats.rs`) and stays silent
//! towards the sender; no variant carries secret material.

use crate::wire::{DecodeError, EncodeError, MsgType};

/// A refused or unbuildable handshake message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoiseError {
    /// The datagram has the wrong length for its message type.
    #[error("{msg_type:?} datagram of {len} bytes, expected {expected}")]
    BadLength {
        /// The message type looked for.
        msg_type: MsgType,
        /// Length seen.
        len: usize,
        /// Length required.
        expected: usize,
    },
    /// The 24-byte header did not decode.
    #[error("malformed header: {0}")]
    Malformed(#[from] DecodeError),
    /// The header has another message type, carries flags, or (an
    /// initiation) names a receiver index.
    #[error("header is not a plain {expected:?}")]
    UnexpectedHeader {
        /// The message type required.
        expected: MsgType,
    },
    /// mac1 does not verify: the sender does not know our public key (or
    /// altered the message). Refused before any Diffie-Hellman work.
    #[error("mac1 does not verify (sender does not know our public key)")]
    Mac1,
    /// The Noise layer refused the message: wrong keys, wrong PSK or
    /// altered ciphertext.
    #[error("handshake message does not decrypt")]
    Decrypt,
    /// An authentic initiation from a static key that no connection names.
    #[error("initiation from an unknown public key")]
    UnknownPeer,
    /// The initiation's timestamp is not above the greatest one accepted
    /// from that peer: a replay (or a peer whose clock went back).
    #[error("initiation timestamp not newer than the last accepted one (replay)")]
    Replay,
    /// The peer's initiations come faster than the responder accepts them.
    #[error("initiation rate limited")]
    RateLimited,
    /// The source address's token bucket is empty (checked after mac1 and
    /// mac2, before any Diffie-Hellman).
    #[error("source address over its handshake rate")]
    SourceLimited,
    /// The responder-wide token bucket is empty: handshakes are arriving
    /// faster than the daemon spends CPU on them.
    #[error("responder over its handshake rate")]
    Overloaded,
    /// A response or cookie reply addressed to a session index with no
    /// handshake pending (late, duplicate or forged).
    #[error("answer to no pending handshake (receiver index {index})")]
    UnknownIndex {
        /// The receiver index in the header.
        index: u32,
    },
    /// A cookie reply that does not decrypt under the responder's cookie
    /// key and our last initiation's mac1.
    #[error("cookie reply does not decrypt")]
    BadCookieReply,
    /// The caller's output buffer is too small.
    #[error("cannot emit handshake message: {0}")]
    Encode(#[from] EncodeError),
    /// The cryptographic library refused an operation that cannot fail with
    /// the fixed sizes used here (kept as an error: this crate never
    /// panics on a reachable path).
    #[error("cryptographic library error")]
    Crypto,
}

impl From<snow::Error> for NoiseError {
    fn from(e: snow::Error) -> Self {
        match e {
            snow::Error::Decrypt | snow::Error::Dh => NoiseError::Decrypt,
            _ => NoiseError::Crypto,
        }
    }
}
