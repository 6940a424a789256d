//! The queue from the workers to the control loop: probes, replies,
//! handshake messages and path notices, each a fixed-size
//! [`ControlDatagram`] in a bounded channel, so a flood holds little
//! memory and never blocks a worker (a full queue is a counted drop).

use std::net::SocketAddr;
use std::time::Instant;

use mpt_proto::crypto::{CHALLENGE_LEN, INIT_LEN, RESPONSE_LEN};
use mpt_proto::noise::{COOKIE_REPLY_LEN, INITIATION_LEN, RESPONSE_LEN as NOISE_RESPONSE_LEN};
use mpt_proto::wire::MsgType;

use crate::io::source::Source;

/// Control datagrams queued between receive workers and the control loop.
/// Probes arrive a few per second per path; 4096 absorbs bursts without
/// letting a flood hold much memory (each entry is ~70 bytes).
pub const CONTROL_QUEUE: usize = 4096;

/// Largest message handed to the control loop (handshake messages are:
/// a Noise initiation is 168 bytes).
pub const CONTROL_DATAGRAM_MAX: usize = mpt_proto::noise::INITIATION_LEN;

/// `ControlDatagram::conn` of a Noise initiation read on a shared port:
/// it names no connection (the control loop finds it by the static key).
pub const SHARED_INITIATION: usize = usize::MAX - 1;

/// A probe, reply or handshake message handed to the control loop. Sealed
/// probes and replies arrive opened, with the SEALED flag cleared.
#[derive(Debug, Clone, Copy)]
pub struct ControlDatagram {
    /// Connection index.
    pub conn: usize,
    /// Path index.
    pub path: usize,
    /// When it arrived.
    pub at: Instant,
    /// Its source address.
    pub from: Option<SocketAddr>,
    /// Our address it was sent to (shared ports; see `crate::io::source`).
    pub to: Option<Source>,
    /// The shared port it arrived on, for a Noise initiation read there
    /// (`conn` is then [`SHARED_INITIATION`]); 0 otherwise.
    pub port: u16,
    /// Length of `bytes` used; 0: a notice that a client connection's path
    /// `path` was heard from `from` and needs adding (or moving).
    pub len: usize,
    /// The datagram.
    pub bytes: [u8; CONTROL_DATAGRAM_MAX],
}

/// For a handshake message type: the exact datagram length, and whether
/// it belongs to the public-key handshake (`true`) or the PSK handshake.
/// `None` for every other type.
pub fn handshake_kind(msg_type: MsgType) -> Option<(usize, bool)> {
    match msg_type {
        MsgType::HandshakeInit => Some((INIT_LEN, false)),
        MsgType::HandshakeResponse => Some((RESPONSE_LEN, false)),
        MsgType::HandshakeChallenge => Some((CHALLENGE_LEN, false)),
        MsgType::NoiseInitiation => Some((INITIATION_LEN, true)),
        MsgType::NoiseResponse => Some((NOISE_RESPONSE_LEN, true)),
        MsgType::NoiseCookieReply => Some((COOKIE_REPLY_LEN, true)),
        MsgType::Data
        | MsgType::Probe
        | MsgType::ProbeReply
        | MsgType::Control
        | MsgType::Feedback
        | MsgType::Nack
        | MsgType::Repair => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_lengths() {
        assert_eq!(handshake_kind(MsgType::NoiseInitiation), Some((168, true)));
        assert_eq!(handshake_kind(MsgType::NoiseResponse), Some((92, true)));
        assert_eq!(handshake_kind(MsgType::NoiseCookieReply), Some((80, true)));
        assert_eq!(handshake_kind(MsgType::HandshakeInit), Some((104, false)));
        assert_eq!(handshake_kind(MsgType::Data), None);
    }
}
