//! The pre-shared-key handshake: one round trip that gives both peers
//! fresh session keys.
//!
//! ```text
//! HandshakeInit body (72 bytes)          HandshakeResponse body (64 bytes)
//! offset size                             offset size
//!      0   32  initiator nonce                 0   32  responder nonce
//!     32    8  timestamp (u64, BE)            32   16  init mac (echo)
//!     40   16  zero padding                   48   16  mac
//!     56   16  mac
//! ```
//!
//! * `mac` = the first 16 bytes of HMAC-SHA256(mac key, header (24 bytes)
//!   || body up to the mac), mac key = HKDF(psk, "mpt v1 handshake mac").
//!   Both datagrams are sent with flags 0 (not sealed); the MAC covers the
//!   whole header, so type, connection id and sequence numbers are bound.
//! * The Init's `timestamp` must strictly increase per initiator (e.g. Unix
//!   time in nanoseconds): the responder refuses one not above the last it
//!   accepted, so a captured Init cannot be replayed to reset the session.
//!   A retransmission is therefore a new Init (new nonce, new timestamp).
//! * The response echoes the Init's mac, which binds it to that one Init;
//!   the initiator refuses a response to any other.
//! * The padding makes the Init (96 bytes) larger than the response (88),
//!   so a forged source address gains no amplification.
//! * Session keys come from both nonces ([`SessionKeys`], `kdf.rs`).
//!
//! Parsers check the exact length first and never panic.

use ring::hmac;

use super::aead::SessionKeys;
use super::kdf::{self, Unspecified};
use super::{Psk, Role};
use crate::error::{DecodeError, EncodeError};
use crate::wire::{Flags, Header, MsgType, HEADER_LEN};

/// Length of each side's random nonce.
pub const NONCE_LEN: usize = 32;
/// Length of a (truncated) handshake MAC.
pub const MAC_LEN: usize = 16;
const TIMESTAMP_LEN: usize = 8;
const PADDING_LEN: usize = 16;

/// Length of a `HandshakeInit` body.
pub const INIT_BODY_LEN: usize = NONCE_LEN + TIMESTAMP_LEN + PADDING_LEN + MAC_LEN;
/// Length of a `HandshakeResponse` body.
pub const RESPONSE_BODY_LEN: usize = NONCE_LEN + MAC_LEN + MAC_LEN;
/// Length of a whole `HandshakeInit` datagram.
pub const INIT_LEN: usize = HEADER_LEN + INIT_BODY_LEN;
/// Length of a whole `HandshakeResponse` datagram.
pub const RESPONSE_LEN: usize = HEADER_LEN + RESPONSE_BODY_LEN;

// No amplification: the answer is never larger than the question.
const _: () = assert!(RESPONSE_LEN <= INIT_LEN);

// Body offsets.
const INIT_TIMESTAMP: usize = NONCE_LEN;
const INIT_PADDING: usize = INIT_TIMESTAMP + TIMESTAMP_LEN;
const INIT_MAC: usize = INIT_PADDING + PADDING_LEN;
const RESPONSE_INIT_MAC: usize = NONCE_LEN;
const RESPONSE_MAC: usize = RESPONSE_INIT_MAC + MAC_LEN;

/// Why a handshake message was refused or could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The datagram has the wrong length for this message.
    #[error("handshake datagram of {len} bytes, expected {expected}")]
    BadLength {
        /// Length seen.
        len: usize,
        /// Length required.
        expected: usize,
    },
    /// The header did not decode.
    #[error("malformed header: {0}")]
    Malformed(#[from] DecodeError),
    /// The header has the wrong message type or carries flags.
    #[error("header is not an unsealed {expected:?}")]
    UnexpectedHeader {
        /// The message type required.
        expected: MsgType,
    },
    /// The header names another connection.
    #[error("handshake for connection {got}, expected {expected}")]
    WrongConnection {
        /// Our connection id.
        expected: u32,
        /// The one in the header.
        got: u32,
    },
    /// The MAC does not verify: forged, altered, or another PSK.
    #[error("handshake authentication failed")]
    Auth,
    /// An authentic Init whose padding is not zero (a later version?).
    #[error("non-zero padding in handshake init")]
    BadPadding,
    /// An authentic Init whose timestamp is not above the last accepted
    /// one: a replay (or an initiator clock that went backwards).
    #[error("replayed handshake init (timestamp {timestamp} <= last {last})")]
    Replay {
        /// Timestamp in the Init.
        timestamp: u64,
        /// Last timestamp accepted.
        last: u64,
    },
    /// An authentic response to another Init than ours (a stale one).
    #[error("handshake response answers another init")]
    UnexpectedResponse,
    /// The caller's buffer is too small for the message.
    #[error("cannot emit handshake message: {0}")]
    Encode(#[from] EncodeError),
    /// The cryptographic library refused a key derivation; cannot happen
    /// with the fixed sizes used here.
    #[error("key derivation failed")]
    Crypto,
}

impl From<Unspecified> for HandshakeError {
    fn from(_: Unspecified) -> Self {
        HandshakeError::Crypto
    }
}

/// First [`MAC_LEN`] bytes of HMAC-SHA256 over `header || body`.
pub(super) fn mac(key: &hmac::Key, header: &[u8], body: &[u8]) -> [u8; MAC_LEN] {
    let mut ctx = hmac::Context::with_key(key);
    ctx.update(header);
    ctx.update(body);
    let tag = ctx.sign();
    let mut out = [0u8; MAC_LEN];
    out.copy_from_slice(&tag.as_ref()[..MAC_LEN]);
    out
}

/// Compares two MACs in time independent of where they differ (ring's
/// `hmac::verify` only takes untruncated tags).
fn mac_eq(a: &[u8], b: &[u8; MAC_LEN]) -> bool {
    let diff = a
        .iter()
        .zip(b)
        .fold(u8::from(a.len() != MAC_LEN), |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

fn to_array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = bytes.get(..N) {
        out.copy_from_slice(src);
    }
    out
}

/// Checks length, header type and flags of a received handshake datagram
/// and splits it into header bytes, header and body.
fn split(
    datagram: &[u8],
    expected: MsgType,
    body_len: usize,
) -> Result<(&[u8], Header, &[u8]), HandshakeError> {
    if datagram.len() != HEADER_LEN + body_len {
        return Err(HandshakeError::BadLength {
            len: datagram.len(),
            expected: HEADER_LEN + body_len,
        });
    }
    let (header, body) = Header::parse(datagram)?;
    if header.msg_type != expected || header.flags != Flags::NONE {
        return Err(HandshakeError::UnexpectedHeader { expected });
    }
    Ok((&datagram[..HEADER_LEN], header, body))
}

/// The first `len` bytes of `buf`, with `template` written into them as an
/// unsealed header of `msg_type` for `conn_id`.
fn emit_header<'a>(
    template: &Header,
    msg_type: MsgType,
    conn_id: u32,
    len: usize,
    buf: &'a mut [u8],
) -> Result<&'a mut [u8], HandshakeError> {
    let have = buf.len();
    let out = buf
        .get_mut(..len)
        .ok_or(EncodeError::BufferTooSmall { needed: len, have })?;
    Header {
        msg_type,
        flags: Flags::NONE,
        conn_id,
        ..*template
    }
    .emit(out)?;
    Ok(out)
}

/// The initiator's side of one handshake attempt.
///
/// Each attempt (and each retransmission) is a new `Initiator` with a new
/// nonce and a larger timestamp; keep only the latest and drop it once it
/// has produced keys.
#[derive(Clone)]
pub struct Initiator {
    psk: Psk,
    mac_key: hmac::Key,
    conn_id: u32,
    timestamp: u64,
    nonce: [u8; NONCE_LEN],
    init_mac: [u8; MAC_LEN],
}

impl std::fmt::Debug for Initiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initiator")
            .field("conn_id", &self.conn_id)
            .field("timestamp", &self.timestamp)
            .finish_non_exhaustive()
    }
}

impl Initiator {
    /// Starts a handshake: writes the `HandshakeInit` datagram
    /// ([`INIT_LEN`] bytes) into `buf` and returns the state awaiting the
    /// response, with the datagram length.
    ///
    /// `nonce` must be fresh random bytes; `timestamp` must be above every
    /// timestamp this PSK's initiator used before (Unix time in nanoseconds
    /// does it). `header` supplies path id, sequence numbers, send timestamp
    /// and the connection id; type and flags are set here.
    pub fn start(
        psk: &Psk,
        header: &Header,
        nonce: [u8; NONCE_LEN],
        timestamp: u64,
        buf: &mut [u8],
    ) -> Result<(Initiator, usize), HandshakeError> {
        let mac_key = kdf::handshake_mac_key(psk)?;
        let out = emit_header(
            header,
            MsgType::HandshakeInit,
            header.conn_id,
            INIT_LEN,
            buf,
        )?;
        let (head, body) = out.split_at_mut(HEADER_LEN);
        body[..NONCE_LEN].copy_from_slice(&nonce);
        body[INIT_TIMESTAMP..INIT_PADDING].copy_from_slice(&timestamp.to_be_bytes());
        body[INIT_PADDING..INIT_MAC].fill(0);
        let init_mac = mac(&mac_key, head, &body[..INIT_MAC]);
        body[INIT_MAC..].copy_from_slice(&init_mac);
        let initiator = Initiator {
            psk: psk.clone(),
            mac_key,
            conn_id: header.conn_id,
            timestamp,
            nonce,
            init_mac,
        };
        Ok((initiator, INIT_LEN))
    }

    /// The connection this handshake is for.
    pub fn conn_id(&self) -> u32 {
        self.conn_id
    }

    /// The timestamp sent in the Init; the next attempt must use a larger
    /// one.
    pub fn timestamp(&self) -> u64 {
        self.timestamp
    }

    /// Takes in a received `HandshakeResponse` datagram (header included)
    /// and returns the session keys if it authenticates and answers our
    /// Init. The initiator seals with the initiator-to-responder key.
    pub fn handle_response(&self, datagram: &[u8]) -> Result<SessionKeys, HandshakeError> {
        let (head, header, body) = split(datagram, MsgType::HandshakeResponse, RESPONSE_BODY_LEN)?;
        if header.conn_id != self.conn_id {
            return Err(HandshakeError::WrongConnection {
                expected: self.conn_id,
                got: header.conn_id,
            });
        }
        let expected = mac(&self.mac_key, head, &body[..RESPONSE_MAC]);
        if !mac_eq(&body[RESPONSE_MAC..], &expected) {
            return Err(HandshakeError::Auth);
        }
        if !mac_eq(&body[RESPONSE_INIT_MAC..RESPONSE_MAC], &self.init_mac) {
            return Err(HandshakeError::UnexpectedResponse);
        }
        let responder_nonce: [u8; NONCE_LEN] = to_array(&body[..NONCE_LEN]);
        Ok(SessionKeys::derive(
            &self.psk,
            &self.nonce,
            &responder_nonce,
            Role::Initiator,
        )?)
    }
}

/// The responder's side: answers authentic, fresh Inits for one connection.
///
/// Keeps the last accepted Init timestamp. It lives as long as the daemon;
/// after a restart it starts at 0 (or at what [`Responder::set_last_timestamp`]
/// restores), so an Init captured before the restart could be accepted once.
/// Such a replay yields keys the attacker does not know, so the daemon
/// should keep using its previous keys until the first datagram sealed with
/// the new ones opens (key confirmation).
#[derive(Clone)]
pub struct Responder {
    psk: Psk,
    mac_key: hmac::Key,
    conn_id: u32,
    last_timestamp: u64,
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("conn_id", &self.conn_id)
            .field("last_timestamp", &self.last_timestamp)
            .finish_non_exhaustive()
    }
}

impl Responder {
    /// A responder for connection `conn_id` holding `psk`. It accepts any
    /// timestamp above 0 first.
    pub fn new(psk: &Psk, conn_id: u32) -> Result<Responder, HandshakeError> {
        Ok(Responder {
            psk: psk.clone(),
            mac_key: kdf::handshake_mac_key(psk)?,
            conn_id,
            last_timestamp: 0,
        })
    }

    /// The connection this responder answers for.
    pub fn conn_id(&self) -> u32 {
        self.conn_id
    }

    /// The timestamp of the last accepted Init (0 if none).
    pub fn last_timestamp(&self) -> u64 {
        self.last_timestamp
    }

    /// Restores the last accepted timestamp, e.g. persisted across a
    /// restart; later Inits must carry a larger one.
    pub fn set_last_timestamp(&mut self, timestamp: u64) {
        self.last_timestamp = timestamp;
    }

    /// Takes in a received `HandshakeInit` datagram (header included). If
    /// it authenticates and its timestamp is fresh, writes the
    /// `HandshakeResponse` datagram ([`RESPONSE_LEN`] bytes) into `reply`
    /// and returns the responder's session keys and the reply length.
    ///
    /// `nonce` must be fresh random bytes. `reply_header` supplies path id,
    /// sequence numbers and send timestamp; type, flags and connection id
    /// are set here. Nothing changes unless this succeeds. Apply the
    /// [`super::RateLimiter`]s before calling.
    pub fn handle_init(
        &mut self,
        datagram: &[u8],
        nonce: [u8; NONCE_LEN],
        reply_header: &Header,
        reply: &mut [u8],
    ) -> Result<(SessionKeys, usize), HandshakeError> {
        if reply.len() < RESPONSE_LEN {
            return Err(EncodeError::BufferTooSmall {
                needed: RESPONSE_LEN,
                have: reply.len(),
            }
            .into());
        }
        let (head, header, body) = split(datagram, MsgType::HandshakeInit, INIT_BODY_LEN)?;
        if header.conn_id != self.conn_id {
            return Err(HandshakeError::WrongConnection {
                expected: self.conn_id,
                got: header.conn_id,
            });
        }
        let expected = mac(&self.mac_key, head, &body[..INIT_MAC]);
        if !mac_eq(&body[INIT_MAC..], &expected) {
            return Err(HandshakeError::Auth);
        }
        if body[INIT_PADDING..INIT_MAC].iter().any(|&b| b != 0) {
            return Err(HandshakeError::BadPadding);
        }
        let timestamp = u64::from_be_bytes(to_array(&body[INIT_TIMESTAMP..INIT_PADDING]));
        if timestamp <= self.last_timestamp {
            return Err(HandshakeError::Replay {
                timestamp,
                last: self.last_timestamp,
            });
        }
        let initiator_nonce: [u8; NONCE_LEN] = to_array(&body[..NONCE_LEN]);
        let keys = SessionKeys::derive(&self.psk, &initiator_nonce, &nonce, Role::Responder)?;

        let datagram = emit_header(
            reply_header,
            MsgType::HandshakeResponse,
            self.conn_id,
            RESPONSE_LEN,
            reply,
        )?;
        let (out_head, out) = datagram.split_at_mut(HEADER_LEN);
        out[..NONCE_LEN].copy_from_slice(&nonce);
        out[RESPONSE_INIT_MAC..RESPONSE_MAC].copy_from_slice(&expected);
        let response_mac = mac(&self.mac_key, out_head, &out[..RESPONSE_MAC]);
        out[RESPONSE_MAC..].copy_from_slice(&response_mac);

        self.last_timestamp = timestamp;
        Ok((keys, RESPONSE_LEN))
    }
}
