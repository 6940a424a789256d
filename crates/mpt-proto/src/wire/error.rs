//! Typed errors of the wire codec: why a datagram did not decode or a
//! message could not be emitted. They live next to the parsers and
//! emitters that raise them; the handshakes, which parse headers too, pass
//! them on. Decoding errors are small `Copy` values: one is produced per
//! bad datagram and mapped to a drop counter.

use thiserror::Error;

/// Why a datagram could not be decoded. Each maps to one drop reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Shorter than the fixed header.
    #[error("datagram of {len} bytes is shorter than the header")]
    TooShort {
        /// Length seen.
        len: usize,
    },
    /// Longer than `wire::MAX_DATAGRAM`.
    #[error("datagram of {len} bytes is longer than allowed")]
    TooLong {
        /// Length seen.
        len: usize,
    },
    /// Version nibble is not ours.
    #[error("unsupported protocol version {version}")]
    BadVersion {
        /// Version seen.
        version: u8,
    },
    /// Message type code unknown.
    #[error("unknown message type {code}")]
    UnknownType {
        /// Code seen.
        code: u8,
    },
    /// A reserved flag bit is set.
    #[error("unknown flag bits {bits:#04x}")]
    UnknownFlags {
        /// Bits seen.
        bits: u8,
    },
    /// A fixed-size body has the wrong length.
    #[error("body of {len} bytes, expected {expected}")]
    BadBodyLength {
        /// Length seen.
        len: usize,
        /// Length required.
        expected: usize,
    },
    /// A control message body is not well formed.
    #[error("malformed control message")]
    BadControl,
    /// A data payload is not a well-formed IPv4/IPv6 packet.
    #[error("data payload is not an IPv4/IPv6 packet of consistent length")]
    BadInnerPacket,
    /// A field of a fixed-size body holds a value it may not.
    #[error("field `{field}` out of range")]
    BadField {
        /// The field's name.
        field: &'static str,
    },
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The caller's buffer is too small.
    #[error("buffer of {have} bytes, {needed} needed")]
    BufferTooSmall {
        /// Bytes required.
        needed: usize,
        /// Bytes available.
        have: usize,
    },
}
