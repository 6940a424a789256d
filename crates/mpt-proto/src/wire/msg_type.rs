//! The message type: the low nibble of a header's first byte, which says
//! what the payload after the header is. The codes are on the wire and
//! never reused; a code this version does not know is refused when the
//! header is parsed, so a later version can add types safely.

/// What a datagram carries. The numeric values are on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgType {
    /// An IP packet read from the sender's tun device.
    Data,
    /// A keepalive probe: asks the peer for a [`MsgType::ProbeReply`].
    Probe,
    /// The answer to a probe, echoing its timestamp (RTT sample).
    ProbeReply,
    /// Control messages between daemons (path add/remove, weights).
    Control,
    /// First message of the key-exchange handshake.
    HandshakeInit,
    /// Answer to [`MsgType::HandshakeInit`], with keys.
    HandshakeResponse,
    /// Answer to a [`MsgType::HandshakeInit`] the responder cannot tell is
    /// fresh: a cookie to send back in a new Init.
    HandshakeChallenge,
    /// What the receiver saw of a busy path (`Feedback`): delivery
    /// rate, loss, RTT and one-way delay for the sender's scheduler.
    Feedback,
    /// A receiver's request for datagrams a path lost at random (`Nack`).
    Nack,
    /// A copy of a lost data datagram under a new sequence number
    /// (`Repair`).
    Repair,
    /// First message of the public-key handshake (Noise IK), see the
    /// `noise` module.
    NoiseInitiation,
    /// Answer to a [`MsgType::NoiseInitiation`], completing the handshake.
    NoiseResponse,
    /// Answer to a [`MsgType::NoiseInitiation`] from a responder under
    /// load: an encrypted cookie to prove the source address with.
    NoiseCookieReply,
}

impl MsgType {
    /// The 4-bit wire code of this type.
    #[inline]
    pub const fn code(self) -> u8 {
        match self {
            MsgType::Data => 1,
            MsgType::Probe => 2,
            MsgType::ProbeReply => 3,
            MsgType::Control => 4,
            MsgType::HandshakeInit => 5,
            MsgType::HandshakeResponse => 6,
            MsgType::HandshakeChallenge => 7,
            MsgType::Feedback => 8,
            MsgType::Nack => 9,
            MsgType::Repair => 10,
            MsgType::NoiseInitiation => 11,
            MsgType::NoiseResponse => 12,
            MsgType::NoiseCookieReply => 13,
        }
    }

    /// The type for a 4-bit wire code, if it is one we know.
    #[inline]
    pub const fn from_code(code: u8) -> Option<MsgType> {
        match code {
            1 => Some(MsgType::Data),
            2 => Some(MsgType::Probe),
            3 => Some(MsgType::ProbeReply),
            4 => Some(MsgType::Control),
            5 => Some(MsgType::HandshakeInit),
            6 => Some(MsgType::HandshakeResponse),
            7 => Some(MsgType::HandshakeChallenge),
            8 => Some(MsgType::Feedback),
            9 => Some(MsgType::Nack),
            10 => Some(MsgType::Repair),
            11 => Some(MsgType::NoiseInitiation),
            12 => Some(MsgType::NoiseResponse),
            13 => Some(MsgType::NoiseCookieReply),
            _ => None,
        }
    }
}
