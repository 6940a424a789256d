//! The mpt wire format: one fixed 24-byte header in front of every datagram.
//!
//! Every datagram a path socket sends starts with [`Header`]; what follows
//! depends on [`MsgType`]. The layout (big-endian, byte offsets) is drawn in
//! `docs/PROTOCOL.md`:
//!
//! ```text
//! offset  size  field
//!      0     1  version (high nibble, = 1) | message type (low nibble)
//!      1     1  flags
//!      2     2  path_id       sender's index of the path
//!      4     4  conn_id       connection identifier
//!      8     8  seq           per-connection sequence number
//!     16     4  path_seq      per-path sequence number
//!     20     4  timestamp_us  sender's clock, microseconds, wrapping
//!     24     …  payload (then a 16-byte AEAD tag when SEALED)
//! ```
//!
//! Why these fields:
//! * `conn_id` lets many peers share one server port (and is the key lookup
//!   before any cryptographic work).
//! * `seq` is per connection and per direction, counted over all paths. It
//!   will be the AEAD nonce (hence 64 bits: it never wraps in practice) and
//!   the replay-window index; the receiver can also use it to restore order.
//! * `path_seq` counts datagrams per path, so the peer can report how many
//!   it received and how far the sequence went: that ratio is the loss rate.
//! * `timestamp_us` is the sender's clock in microseconds (wrapping); probe
//!   replies echo it, which yields an RTT sample without synchronised clocks.
//!
//! The header is authenticated in full as AEAD associated data; only the
//! payload is sealed, and the tag (if [`Flags::SEALED`]) trails the payload.
//! So encryption fits without changing a single header byte.
//!
//! Contract: [`Header::parse`] checks the length first; after that no
//! accessor can panic. Parsing never allocates; emitting writes into a
//! caller-owned buffer.

mod control;
mod feedback;
mod keepalive;
mod repair;

pub use control::{
    is_plain_name, ControlBody, ControlMsg, PathAdd, PathName, Refusal, MAX_NAME_LEN,
};
pub use feedback::Feedback;
pub use keepalive::{Keepalive, PathReport};
pub use repair::{Nack, Repair, MAX_NACK_RUN, REPAIR_PREFIX_LEN};

use crate::error::{DecodeError, EncodeError};

/// Protocol version carried in the high nibble of byte 0.
pub const VERSION: u8 = 1;

/// Length of the fixed header in bytes.
pub const HEADER_LEN: usize = 24;

/// The largest datagram we ever build or accept: a 9000-byte jumbo inner
/// packet, the header and room for a 16-byte AEAD tag, rounded up.
pub const MAX_DATAGRAM: usize = 9216;

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
    /// What the receiver saw of a busy path ([`Feedback`]): delivery
    /// rate, loss, RTT and one-way delay for the sender's scheduler.
    Feedback,
    /// A receiver's request for datagrams a path lost at random ([`Nack`]).
    Nack,
    /// A copy of a lost data datagram under a new sequence number
    /// ([`Repair`]).
    Repair,
    /// First message of the public-key handshake (Noise IK), see
    /// [`crate::noise`].
    NoiseInitiation,
    /// Answer to a [`MsgType::NoiseInitiation`], completing the handshake.
    NoiseResponse,
    /// Answer to a [`MsgType::NoiseInitiation`] from a responder under
    /// load: an encrypted cookie to prove the source address with.
    NoiseCookieReply,
}

impl MsgType {
    /// The 4-bit wire code of this type.
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

/// Header flag bits. Unknown bits are rejected so that they can be given a
/// meaning later without old peers misreading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Flags(u8);

impl Flags {
    /// No flag set.
    pub const NONE: Flags = Flags(0);
    /// The payload is sealed with the session's AEAD; a 16-byte tag follows it.
    pub const SEALED: Flags = Flags(0x01);
    /// Data only: the payload starts with a 4-byte flow prefix (see
    /// [`split_flow_prefix`]), so the receiver can release each flow on its
    /// own instead of in global sequence order.
    pub const FLOW: Flags = Flags(0x02);
    /// Redundancy: on data, a copy of this datagram went on another path
    /// too; on a repair, it is that copy, not an answer to a request. The
    /// receiver keeps whichever arrives first and counts the other as an
    /// expected duplicate rather than a replay.
    pub const COPY: Flags = Flags(0x04);
    /// Every bit this version understands.
    pub const KNOWN: Flags = Flags(0x07);

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }
    /// Flags from raw bits, or `None` when an unknown bit is set.
    pub const fn from_bits(bits: u8) -> Option<Flags> {
        if bits & !Self::KNOWN.0 == 0 {
            Some(Flags(bits))
        } else {
            None
        }
    }
    /// Whether every bit of `other` is set here.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// These flags with every bit of `other` set as well.
    pub const fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
}

/// The decoded fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// What the payload is.
    pub msg_type: MsgType,
    /// Flag bits.
    pub flags: Flags,
    /// The sender's index of the path this datagram was sent on.
    pub path_id: u16,
    /// The connection this datagram belongs to.
    pub conn_id: u32,
    /// Per-connection, per-direction sequence number over all paths.
    pub seq: u64,
    /// Per-path sequence number (wrapping).
    pub path_seq: u32,
    /// Sender's clock in microseconds when sent (wrapping).
    pub timestamp_us: u32,
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), EncodeError> {
        let Some(out) = buf.get_mut(..HEADER_LEN) else {
            return Err(EncodeError::BufferTooSmall {
                needed: HEADER_LEN,
                have: buf.len(),
            });
        };
        out[0] = (VERSION << 4) | self.msg_type.code();
        out[1] = self.flags.bits();
        out[2..4].copy_from_slice(&self.path_id.to_be_bytes());
        out[4..8].copy_from_slice(&self.conn_id.to_be_bytes());
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..20].copy_from_slice(&self.path_seq.to_be_bytes());
        out[20..24].copy_from_slice(&self.timestamp_us.to_be_bytes());
        Ok(())
    }

    /// Parses the header at the start of `datagram` and returns it with the
    /// payload that follows. Never panics, never allocates.
    pub fn parse(datagram: &[u8]) -> Result<(Header, &[u8]), DecodeError> {
        if datagram.len() < HEADER_LEN {
            return Err(DecodeError::TooShort {
                len: datagram.len(),
            });
        }
        if datagram.len() > MAX_DATAGRAM {
            return Err(DecodeError::TooLong {
                len: datagram.len(),
            });
        }
        let (h, payload) = datagram.split_at(HEADER_LEN);
        let version = h[0] >> 4;
        if version != VERSION {
            return Err(DecodeError::BadVersion { version });
        }
        let code = h[0] & 0x0f;
        let msg_type = MsgType::from_code(code).ok_or(DecodeError::UnknownType { code })?;
        let flags = Flags::from_bits(h[1]).ok_or(DecodeError::UnknownFlags { bits: h[1] })?;
        let header = Header {
            msg_type,
            flags,
            path_id: u16::from_be_bytes([h[2], h[3]]),
            conn_id: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            seq: u64::from_be_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]),
            path_seq: u32::from_be_bytes([h[16], h[17], h[18], h[19]]),
            timestamp_us: u32::from_be_bytes([h[20], h[21], h[22], h[23]]),
        };
        Ok((header, payload))
    }
}

/// Length of the flow prefix that starts a data payload with [`Flags::FLOW`].
pub const FLOW_PREFIX_LEN: usize = 4;

/// Splits a [`Flags::FLOW`] data payload into its `flow_gap` and the IP
/// packet after it.
///
/// `flow_gap` is this datagram's `seq` minus the `seq` of the previous data
/// datagram its sender sent in the same flow bucket; 0 means no known
/// predecessor (deliver at once). The receiver turns it into the sequence
/// number to wait for with [`flow_predecessor`]. The packet is returned
/// unchecked: run [`check_ip_packet`] on it as on any data payload. A
/// payload shorter than the prefix is `BadBodyLength`.
pub fn split_flow_prefix(payload: &[u8]) -> Result<(u32, &[u8]), DecodeError> {
    match payload.split_first_chunk::<FLOW_PREFIX_LEN>() {
        Some((gap, packet)) => Ok((u32::from_be_bytes(*gap), packet)),
        None => Err(DecodeError::BadBodyLength {
            len: payload.len(),
            expected: FLOW_PREFIX_LEN,
        }),
    }
}

/// Writes the flow prefix carrying `flow_gap` into the first
/// [`FLOW_PREFIX_LEN`] bytes of `buf` (the IP packet goes right after it).
pub fn emit_flow_prefix(flow_gap: u32, buf: &mut [u8]) -> Result<(), EncodeError> {
    let have = buf.len();
    let Some(out) = buf.first_chunk_mut::<FLOW_PREFIX_LEN>() else {
        return Err(EncodeError::BufferTooSmall {
            needed: FLOW_PREFIX_LEN,
            have,
        });
    };
    *out = flow_gap.to_be_bytes();
    Ok(())
}

/// The sequence number a flow-prefixed datagram `seq` waits for: `None`
/// when `flow_gap` is 0 (it depends on nothing) or points below 0 (a
/// broken or hostile sender; it then waits for nothing either, which is no
/// worse than a gap of 0).
pub fn flow_predecessor(seq: u64, flow_gap: u32) -> Option<u64> {
    if flow_gap == 0 {
        return None;
    }
    seq.checked_sub(u64::from(flow_gap))
}

/// Checks that `packet` looks like an IPv4 or IPv6 packet whose header
/// length field agrees with the buffer. The daemon applies it to data
/// payloads before writing them to tun, so a peer cannot make the kernel
/// parse junk.
pub fn check_ip_packet(packet: &[u8]) -> Result<(), DecodeError> {
    let Some(&first) = packet.first() else {
        return Err(DecodeError::BadInnerPacket);
    };
    match first >> 4 {
        4 => {
            if packet.len() < 20 {
                return Err(DecodeError::BadInnerPacket);
            }
            let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
            let ihl = usize::from(first & 0x0f) * 4;
            if ihl < 20 || total < ihl || total != packet.len() {
                return Err(DecodeError::BadInnerPacket);
            }
            Ok(())
        }
        6 => {
            if packet.len() < 40 {
                return Err(DecodeError::BadInnerPacket);
            }
            let payload = usize::from(u16::from_be_bytes([packet[4], packet[5]]));
            if payload + 40 != packet.len() {
                return Err(DecodeError::BadInnerPacket);
            }
            Ok(())
        }
        _ => Err(DecodeError::BadInnerPacket),
    }
}

#[cfg(test)]
mod tests;
