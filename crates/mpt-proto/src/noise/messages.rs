//! Byte layouts of the three public-key handshake messages, and their
//! parsers.
//!
//! Each is one datagram: our 24-byte header (flags 0, the message type,
//! `conn_id` = the receiver's session index, 0 in an initiation where the
//! initiator knows none yet) and a fixed-size body. All integers are
//! big-endian.
//!
//! ```text
//! Initiation (type 11), 144-byte body     Response (type 12), 68-byte body
//! offset size                             offset size
//!      0    4  sender index                    0    4  sender index
//!      4   32  ephemeral public key            4   32  ephemeral public key
//!     36   48  static public key, sealed      36   16  empty payload, sealed
//!     84   28  TAI64N timestamp, sealed       52   16  mac1
//!    112   16  mac1
//!    128   16  mac2 (zero without cookie)     Cookie Reply (type 13), 56-byte body
//!                                                   0   24  nonce
//!                                                  24   32  cookie, sealed (16 + tag)
//! ```
//!
//! mac1 and mac2 cover the whole header as well as the body before them,
//! so no header byte can be changed without the receiver noticing.
//!
//! Contract: a parser checks the exact length, then the header, before it
//! reads anything; after that no accessor can panic. Parsing does no
//! cryptography and keeps no state: that is the callers' business, in the
//! order `Responder` (in `handshake.rs`) documents.

use super::mac::{Mac16, COOKIE_NONCE_LEN, COOKIE_TAG_LEN, MAC_LEN};
use super::NoiseError;
use crate::wire::{Flags, Header, MsgType, HEADER_LEN};

/// Length of a session index.
pub const INDEX_LEN: usize = 4;
/// Length of the Noise part of an initiation: `e` (32), `s` sealed
/// (32 + 16), the timestamp sealed (12 + 16).
pub const NOISE_INITIATION_LEN: usize = 32 + (32 + 16) + (TIMESTAMP_LEN + 16);
/// Length of the Noise part of a response: `e` (32), empty payload sealed
/// (16).
pub const NOISE_RESPONSE_LEN: usize = 32 + 16;
/// Length of the TAI64N timestamp an initiation carries.
pub const TIMESTAMP_LEN: usize = 12;

/// Body length of an initiation.
pub const INITIATION_BODY_LEN: usize = INDEX_LEN + NOISE_INITIATION_LEN + 2 * MAC_LEN;
/// Body length of a response.
pub const RESPONSE_BODY_LEN: usize = INDEX_LEN + NOISE_RESPONSE_LEN + MAC_LEN;
/// Body length of a cookie reply.
pub const COOKIE_REPLY_BODY_LEN: usize = COOKIE_NONCE_LEN + MAC_LEN + COOKIE_TAG_LEN;
/// Datagram length of an initiation.
pub const INITIATION_LEN: usize = HEADER_LEN + INITIATION_BODY_LEN;
/// Datagram length of a response.
pub const RESPONSE_LEN: usize = HEADER_LEN + RESPONSE_BODY_LEN;
/// Datagram length of a cookie reply.
pub const COOKIE_REPLY_LEN: usize = HEADER_LEN + COOKIE_REPLY_BODY_LEN;

// No amplification: whatever a responder answers to an initiation (whose
// source address may be forged) is no larger than the initiation.
const _: () = assert!(RESPONSE_LEN <= INITIATION_LEN);
const _: () = assert!(COOKIE_REPLY_LEN <= INITIATION_LEN);

// Datagram offsets.
pub(crate) const I_SENDER: usize = HEADER_LEN;
pub(crate) const I_NOISE: usize = I_SENDER + INDEX_LEN;
pub(crate) const I_MAC1: usize = I_NOISE + NOISE_INITIATION_LEN;
pub(crate) const I_MAC2: usize = I_MAC1 + MAC_LEN;
pub(crate) const R_SENDER: usize = HEADER_LEN;
pub(crate) const R_NOISE: usize = R_SENDER + INDEX_LEN;
pub(crate) const R_MAC1: usize = R_NOISE + NOISE_RESPONSE_LEN;
pub(crate) const C_SEALED: usize = HEADER_LEN;

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    if let Some(src) = bytes.get(at..at + 4) {
        b.copy_from_slice(src);
    }
    u32::from_be_bytes(b)
}

fn array_at<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = bytes.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

/// Exact length, then a header of `msg_type` without flags.
fn check(datagram: &[u8], msg_type: MsgType, len: usize) -> Result<Header, NoiseError> {
    if datagram.len() != len {
        return Err(NoiseError::BadLength {
            msg_type,
            len: datagram.len(),
            expected: len,
        });
    }
    let (header, _) = Header::parse(datagram)?;
    if header.msg_type != msg_type || header.flags != Flags::NONE {
        return Err(NoiseError::UnexpectedHeader { expected: msg_type });
    }
    Ok(header)
}

/// A length- and header-checked initiation.
#[derive(Debug, Clone, Copy)]
pub struct Initiation<'a> {
    /// The header (its `conn_id` is 0).
    pub header: Header,
    bytes: &'a [u8],
}

/// Checks an initiation's length and header (type 11, no flags, receiver
/// index 0). No cryptography.
pub fn parse_initiation(datagram: &[u8]) -> Result<Initiation<'_>, NoiseError> {
    let header = check(datagram, MsgType::NoiseInitiation, INITIATION_LEN)?;
    if header.conn_id != 0 {
        return Err(NoiseError::UnexpectedHeader {
            expected: MsgType::NoiseInitiation,
        });
    }
    Ok(Initiation {
        header,
        bytes: datagram,
    })
}

impl<'a> Initiation<'a> {
    /// The initiator's session index: the receiver index of everything the
    /// responder sends it in this session.
    pub fn sender_index(&self) -> u32 {
        u32_at(self.bytes, I_SENDER)
    }
    /// The Noise handshake message.
    pub fn noise(&self) -> &'a [u8] {
        &self.bytes[I_NOISE..I_MAC1]
    }
    /// What mac1 covers: header and body up to mac1.
    pub fn mac1_covered(&self) -> &'a [u8] {
        &self.bytes[..I_MAC1]
    }
    /// mac1.
    pub fn mac1(&self) -> Mac16 {
        array_at(self.bytes, I_MAC1)
    }
    /// What mac2 covers: header and body up to mac2 (mac1 included).
    pub fn mac2_covered(&self) -> &'a [u8] {
        &self.bytes[..I_MAC2]
    }
    /// mac2 (all zero when the initiator has no cookie).
    pub fn mac2(&self) -> Mac16 {
        array_at(self.bytes, I_MAC2)
    }
}

/// A length- and header-checked response.
#[derive(Debug, Clone, Copy)]
pub struct Response<'a> {
    /// The header (its `conn_id` is the initiator's session index).
    pub header: Header,
    bytes: &'a [u8],
}

/// Checks a response's length and header (type 12, no flags).
pub fn parse_response(datagram: &[u8]) -> Result<Response<'_>, NoiseError> {
    let header = check(datagram, MsgType::NoiseResponse, RESPONSE_LEN)?;
    Ok(Response {
        header,
        bytes: datagram,
    })
}

impl<'a> Response<'a> {
    /// The initiator's session index it answers.
    pub fn receiver_index(&self) -> u32 {
        self.header.conn_id
    }
    /// The responder's session index.
    pub fn sender_index(&self) -> u32 {
        u32_at(self.bytes, R_SENDER)
    }
    /// The Noise handshake message.
    pub fn noise(&self) -> &'a [u8] {
        &self.bytes[R_NOISE..R_MAC1]
    }
    /// What mac1 covers.
    pub fn mac1_covered(&self) -> &'a [u8] {
        &self.bytes[..R_MAC1]
    }
    /// mac1 (keyed with the initiator's public key).
    pub fn mac1(&self) -> Mac16 {
        array_at(self.bytes, R_MAC1)
    }
}

/// A length- and header-checked cookie reply.
#[derive(Debug, Clone, Copy)]
pub struct CookieReply<'a> {
    /// The header (its `conn_id` is the initiator's session index).
    pub header: Header,
    bytes: &'a [u8],
}

/// Checks a cookie reply's length and header (type 13, no flags).
pub fn parse_cookie_reply(datagram: &[u8]) -> Result<CookieReply<'_>, NoiseError> {
    let header = check(datagram, MsgType::NoiseCookieReply, COOKIE_REPLY_LEN)?;
    Ok(CookieReply {
        header,
        bytes: datagram,
    })
}

impl CookieReply<'_> {
    /// The initiator's session index it answers.
    pub fn receiver_index(&self) -> u32 {
        self.header.conn_id
    }
    /// Nonce, sealed cookie and tag.
    pub(crate) fn sealed(&self) -> [u8; COOKIE_REPLY_BODY_LEN] {
        array_at(self.bytes, C_SEALED)
    }
}
