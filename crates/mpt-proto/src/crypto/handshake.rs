//! The pre-shared-key handshake (version 2): one round trip that gives both
//! peers fresh session keys, two when the responder cannot tell the Init is
//! fresh.
//!
//! ```text
//! HandshakeInit body (80 bytes)    HandshakeResponse body (72)    HandshakeChallenge body (56)
//! offset size                      offset size                    offset size
//!      0   32  initiator nonce          0   32  responder nonce        0   16  cookie
//!     32    8  timestamp (u64, BE)     32    8  instance id           16    8  instance id
//!     40    8  instance id             40   16  init mac (echo)       24   16  init mac (echo)
//!     48   16  cookie (zero: none)     56   16  mac                   40   16  mac
//!     64   16  mac
//! ```
//!
//! * `mac` = the first 16 bytes of HMAC-SHA256(key, header (24 bytes) ||
//!   body up to the mac). Each message kind has its own key
//!   (`kdf.rs`: "mpt v2 init mac", "mpt v2 response mac", "mpt v2 challenge
//!   mac"), so a Response can never be taken for an Init, nor the other way
//!   round, even where lengths would allow it. All three are sent with
//!   flags 0; the MAC covers the whole header (type, connection id,
//!   sequence numbers).
//! * `instance id`: 8 random bytes the sender drew when it started, the
//!   same in every message it sends. A side refuses any handshake message
//!   that carries its own instance id ([`HandshakeError::Reflected`]): with
//!   one PSK on both ends, that is the only thing telling "my own Init,
//!   bounced back to me" from "the peer's Init".
//! * Freshness does not rest on clocks alone. The responder accepts an Init
//!   without a cookie only when it accepted one from this peer before in
//!   its own lifetime and the timestamp is above the last accepted one.
//!   Otherwise (just started, a replay, or an initiator whose clock is
//!   behind) it answers with a Challenge holding a random cookie it keeps
//!   for [`COOKIE_LIFETIME`]. The initiator answers an authentic Challenge
//!   to its pending Init with a new Init carrying the cookie, which is
//!   accepted whatever its timestamp, once. A captured Init replayed to a
//!   freshly started responder therefore earns a Challenge, never keys.
//! * Cookie slots are kept **one per initiator instance id**: a Challenge
//!   to an instance that already holds a live cookie repeats that cookie
//!   instead of taking another slot. A replayer (who cannot forge an Init,
//!   hence cannot make up instance ids) replaying the same captured Init
//!   however often, from however many ports, holds one slot and never
//!   evicts the genuine peer's.
//! * Response and Challenge echo the Init's mac, which ties them to that
//!   one Init; the initiator refuses an answer to any other.
//! * Init (104 bytes) > Response (96) > Challenge (80): a forged source
//!   address gains no amplification.
//! * Session keys come from both nonces ([`SessionKeys`], `kdf.rs`). A
//!   Response proves to the initiator that the responder derived them; the
//!   responder learns the same only from the first datagram sealed with
//!   them (key confirmation, done by the daemon).
//!
//! Verification (length, header, connection id, MAC, instance id, cookie)
//! never changes state, so the caller can check a message before spending
//! any rate-limiter token on it. Parsers check the exact length first and
//! never panic.

use std::time::{Duration, Instant};

use ring::hmac;

use super::aead::SessionKeys;
use super::kdf::{self, Unspecified};
use super::{Psk, Role};
use crate::wire::{DecodeError, EncodeError, Flags, Header, MsgType, HEADER_LEN};

/// Length of each side's random nonce.
pub const NONCE_LEN: usize = 32;
/// Length of a (truncated) handshake MAC.
pub const MAC_LEN: usize = 16;
/// Length of an instance id.
pub const INSTANCE_LEN: usize = 8;
/// Length of a cookie.
pub const COOKIE_LEN: usize = 16;
const TIMESTAMP_LEN: usize = 8;

/// A sender's instance id: random, drawn at start, kept for its lifetime.
pub type InstanceId = [u8; INSTANCE_LEN];
/// A responder's cookie: random, handed out in a Challenge.
pub type Cookie = [u8; COOKIE_LEN];

/// How long a cookie handed out in a Challenge stays valid.
pub const COOKIE_LIFETIME: Duration = Duration::from_secs(5);
/// Cookies outstanding at once per responder, one per initiator
/// instance id; a new instance's replaces the oldest.
pub const MAX_COOKIES: usize = 4;

/// Length of a `HandshakeInit` body.
pub const INIT_BODY_LEN: usize = NONCE_LEN + TIMESTAMP_LEN + INSTANCE_LEN + COOKIE_LEN + MAC_LEN;
/// Length of a `HandshakeResponse` body.
pub const RESPONSE_BODY_LEN: usize = NONCE_LEN + INSTANCE_LEN + MAC_LEN + MAC_LEN;
/// Length of a `HandshakeChallenge` body.
pub const CHALLENGE_BODY_LEN: usize = COOKIE_LEN + INSTANCE_LEN + MAC_LEN + MAC_LEN;
/// Length of a whole `HandshakeInit` datagram.
pub const INIT_LEN: usize = HEADER_LEN + INIT_BODY_LEN;
/// Length of a whole `HandshakeResponse` datagram.
pub const RESPONSE_LEN: usize = HEADER_LEN + RESPONSE_BODY_LEN;
/// Length of a whole `HandshakeChallenge` datagram.
pub const CHALLENGE_LEN: usize = HEADER_LEN + CHALLENGE_BODY_LEN;

// No amplification: an answer is never larger than the question.
const _: () = assert!(RESPONSE_LEN <= INIT_LEN);
const _: () = assert!(CHALLENGE_LEN <= INIT_LEN);

// Body offsets.
const INIT_TIMESTAMP: usize = NONCE_LEN;
const INIT_INSTANCE: usize = INIT_TIMESTAMP + TIMESTAMP_LEN;
const INIT_COOKIE: usize = INIT_INSTANCE + INSTANCE_LEN;
const INIT_MAC: usize = INIT_COOKIE + COOKIE_LEN;
const RESPONSE_INSTANCE: usize = NONCE_LEN;
const RESPONSE_INIT_MAC: usize = RESPONSE_INSTANCE + INSTANCE_LEN;
const RESPONSE_MAC: usize = RESPONSE_INIT_MAC + MAC_LEN;
const CHALLENGE_INSTANCE: usize = COOKIE_LEN;
const CHALLENGE_INIT_MAC: usize = CHALLENGE_INSTANCE + INSTANCE_LEN;
const CHALLENGE_MAC: usize = CHALLENGE_INIT_MAC + MAC_LEN;

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
    /// An authentic message carrying our own instance id: one of our own
    /// messages sent back to us.
    #[error("handshake message carries our own instance id (reflected)")]
    Reflected,
    /// An authentic Init with a cookie that is not outstanding: never
    /// handed out, expired, or already used.
    #[error("handshake init with an unknown, expired or used cookie")]
    BadCookie,
    /// An authentic Response or Challenge to another Init than ours (a
    /// stale one).
    #[error("handshake answer to another init")]
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

/// Compares two byte strings of `N` bytes in time independent of where
/// they differ (ring's `hmac::verify` only takes untruncated tags).
fn ct_eq<const N: usize>(a: &[u8], b: &[u8; N]) -> bool {
    let diff = a
        .iter()
        .zip(b)
        .fold(u8::from(a.len() != N), |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

fn to_array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = bytes.get(..N) {
        out.copy_from_slice(src);
    }
    out
}

/// The three handshake MAC keys of one PSK.
#[derive(Clone)]
struct MacKeys {
    init: hmac::Key,
    response: hmac::Key,
    challenge: hmac::Key,
}

impl MacKeys {
    fn derive(psk: &Psk) -> Result<MacKeys, Unspecified> {
        Ok(MacKeys {
            init: kdf::handshake_mac_key(psk, kdf::INFO_INIT_MAC)?,
            response: kdf::handshake_mac_key(psk, kdf::INFO_RESPONSE_MAC)?,
            challenge: kdf::handshake_mac_key(psk, kdf::INFO_CHALLENGE_MAC)?,
        })
    }
}

/// Checks length, header type, flags, connection id and MAC of a received
/// handshake datagram; returns its body. `mac_at` is the MAC's offset in
/// the body.
fn verify<'a>(
    datagram: &'a [u8],
    expected: MsgType,
    body_len: usize,
    conn_id: u32,
    key: &hmac::Key,
    mac_at: usize,
) -> Result<&'a [u8], HandshakeError> {
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
    if header.conn_id != conn_id {
        return Err(HandshakeError::WrongConnection {
            expected: conn_id,
            got: header.conn_id,
        });
    }
    let expected_mac = mac(key, &datagram[..HEADER_LEN], &body[..mac_at]);
    if !ct_eq(&body[mac_at..], &expected_mac) {
        return Err(HandshakeError::Auth);
    }
    Ok(body)
}

/// Writes an unsealed header of `msg_type` for `conn_id` (other fields
/// from `template`) into the first `len` bytes of `buf`, then `fill` the
/// body up to the MAC, then the MAC under `key`. Returns the MAC.
fn emit(
    template: &Header,
    msg_type: MsgType,
    conn_id: u32,
    len: usize,
    buf: &mut [u8],
    key: &hmac::Key,
    fill: impl FnOnce(&mut [u8]),
) -> Result<[u8; MAC_LEN], HandshakeError> {
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
    let (head, body) = out.split_at_mut(HEADER_LEN);
    let mac_at = body.len() - MAC_LEN;
    fill(&mut body[..mac_at]);
    let m = mac(key, head, &body[..mac_at]);
    body[mac_at..].copy_from_slice(&m);
    Ok(m)
}

/// The initiator's side of one handshake attempt.
///
/// Each attempt (and each retransmission, and the retry with a cookie) is
/// a new `Initiator` with a new nonce and a larger timestamp; keep only the
/// latest and drop it once it has produced keys.
#[derive(Clone)]
pub struct Initiator {
    psk: Psk,
    keys: MacKeys,
    instance: InstanceId,
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
    /// answer, with the datagram length.
    ///
    /// `instance` is the sender's instance id; `nonce` must be fresh random
    /// bytes; `timestamp` should be above every timestamp this initiator
    /// used before (Unix time in nanoseconds does it; a clock that is
    /// behind only costs a Challenge round). `cookie` is the one from the
    /// responder's Challenge, if answering one. `header` supplies path id,
    /// sequence numbers, send timestamp and the connection id; type and
    /// flags are set here.
    pub fn start(
        psk: &Psk,
        instance: InstanceId,
        header: &Header,
        nonce: [u8; NONCE_LEN],
        timestamp: u64,
        cookie: Option<Cookie>,
        buf: &mut [u8],
    ) -> Result<(Initiator, usize), HandshakeError> {
        let keys = MacKeys::derive(psk)?;
        let init_mac = emit(
            header,
            MsgType::HandshakeInit,
            header.conn_id,
            INIT_LEN,
            buf,
            &keys.init,
            |body| {
                body[..NONCE_LEN].copy_from_slice(&nonce);
                body[INIT_TIMESTAMP..INIT_INSTANCE].copy_from_slice(&timestamp.to_be_bytes());
                body[INIT_INSTANCE..INIT_COOKIE].copy_from_slice(&instance);
                body[INIT_COOKIE..INIT_MAC].copy_from_slice(&cookie.unwrap_or_default());
            },
        )?;
        let initiator = Initiator {
            psk: psk.clone(),
            keys,
            instance,
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

    /// The timestamp sent in the Init; the next attempt should use a larger
    /// one.
    pub fn timestamp(&self) -> u64 {
        self.timestamp
    }

    /// Takes in a received `HandshakeResponse` datagram (header included)
    /// and returns the session keys if it authenticates, comes from
    /// another instance and answers our Init. The initiator seals with the
    /// initiator-to-responder key.
    pub fn handle_response(&self, datagram: &[u8]) -> Result<SessionKeys, HandshakeError> {
        let body = verify(
            datagram,
            MsgType::HandshakeResponse,
            RESPONSE_BODY_LEN,
            self.conn_id,
            &self.keys.response,
            RESPONSE_MAC,
        )?;
        if ct_eq(&body[RESPONSE_INSTANCE..RESPONSE_INIT_MAC], &self.instance) {
            return Err(HandshakeError::Reflected);
        }
        if !ct_eq(&body[RESPONSE_INIT_MAC..RESPONSE_MAC], &self.init_mac) {
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

    /// Takes in a received `HandshakeChallenge` datagram and returns its
    /// cookie if it authenticates, comes from another instance and answers
    /// our Init. Send a new Init ([`Initiator::start`]) with that cookie.
    pub fn handle_challenge(&self, datagram: &[u8]) -> Result<Cookie, HandshakeError> {
        let body = verify(
            datagram,
            MsgType::HandshakeChallenge,
            CHALLENGE_BODY_LEN,
            self.conn_id,
            &self.keys.challenge,
            CHALLENGE_MAC,
        )?;
        if ct_eq(
            &body[CHALLENGE_INSTANCE..CHALLENGE_INIT_MAC],
            &self.instance,
        ) {
            return Err(HandshakeError::Reflected);
        }
        if !ct_eq(&body[CHALLENGE_INIT_MAC..CHALLENGE_MAC], &self.init_mac) {
            return Err(HandshakeError::UnexpectedResponse);
        }
        Ok(to_array(&body[..COOKIE_LEN]))
    }
}

/// An authentic Init from another instance, as [`Responder::verify_init`]
/// found it. Nothing has changed in the responder yet.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct VerifiedInit {
    /// The Init's timestamp.
    pub timestamp: u64,
    /// The initiator's instance id.
    pub instance: InstanceId,
    /// Whether the Init carries a (valid, outstanding) cookie.
    pub has_cookie: bool,
    /// Whether [`Responder::answer`] would answer with keys (a Response)
    /// rather than a Challenge.
    pub fresh: bool,
    cookie: Cookie,
    initiator_nonce: [u8; NONCE_LEN],
    init_mac: [u8; MAC_LEN],
}

impl std::fmt::Debug for VerifiedInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedInit")
            .field("timestamp", &self.timestamp)
            .field("has_cookie", &self.has_cookie)
            .field("fresh", &self.fresh)
            .finish_non_exhaustive()
    }
}

/// How the responder answered an Init.
#[derive(Debug)]
pub enum Answer {
    /// A `HandshakeResponse` of `len` bytes is in the reply buffer; these
    /// are the responder's session keys (unconfirmed until the initiator
    /// seals something with them).
    Response {
        /// The responder's keys (boxed: they are large next to the other
        /// variant).
        keys: Box<SessionKeys>,
        /// Length of the reply datagram.
        len: usize,
    },
    /// A `HandshakeChallenge` of `len` bytes is in the reply buffer; no
    /// keys.
    Challenge {
        /// Length of the reply datagram.
        len: usize,
    },
}

/// The responder's side: answers authentic Inits for one connection.
///
/// Keeps the last accepted Init timestamp (0: none yet in this lifetime)
/// and the cookies it handed out. It lives as long as the daemon.
#[derive(Clone)]
pub struct Responder {
    psk: Psk,
    keys: MacKeys,
    instance: InstanceId,
    conn_id: u32,
    last_timestamp: u64,
    cookies: [Option<(Cookie, Instant, InstanceId)>; MAX_COOKIES],
    next_cookie: usize,
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
    /// A responder for connection `conn_id` holding `psk`; `instance` is
    /// this side's instance id (the same its initiator uses). It answers
    /// the first Init with a Challenge.
    pub fn new(psk: &Psk, conn_id: u32, instance: InstanceId) -> Result<Responder, HandshakeError> {
        Ok(Responder {
            psk: psk.clone(),
            keys: MacKeys::derive(psk)?,
            instance,
            conn_id,
            last_timestamp: 0,
            cookies: [None; MAX_COOKIES],
            next_cookie: 0,
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

    /// The slot of an outstanding, unexpired cookie equal to `cookie`.
    fn cookie_slot(&self, cookie: &Cookie, now: Instant) -> Option<usize> {
        let mut found = None;
        for (i, slot) in self.cookies.iter().enumerate() {
            if let Some((c, issued, _)) = slot {
                let alive = now.saturating_duration_since(*issued) <= COOKIE_LIFETIME;
                if ct_eq(c, cookie) && alive {
                    found = Some(i);
                }
            }
        }
        found
    }

    /// Checks a received `HandshakeInit` datagram (header included):
    /// length, header, connection id, MAC, instance id and cookie. Changes
    /// nothing: call it before spending rate-limiter tokens, then
    /// [`Responder::answer`].
    pub fn verify_init(
        &self,
        datagram: &[u8],
        now: Instant,
    ) -> Result<VerifiedInit, HandshakeError> {
        let body = verify(
            datagram,
            MsgType::HandshakeInit,
            INIT_BODY_LEN,
            self.conn_id,
            &self.keys.init,
            INIT_MAC,
        )?;
        let instance: InstanceId = to_array(&body[INIT_INSTANCE..INIT_COOKIE]);
        if ct_eq(&instance, &self.instance) {
            return Err(HandshakeError::Reflected);
        }
        let cookie: Cookie = to_array(&body[INIT_COOKIE..INIT_MAC]);
        let has_cookie = cookie != [0u8; COOKIE_LEN];
        if has_cookie && self.cookie_slot(&cookie, now).is_none() {
            return Err(HandshakeError::BadCookie);
        }
        let timestamp = u64::from_be_bytes(to_array(&body[INIT_TIMESTAMP..INIT_INSTANCE]));
        let fresh = has_cookie || (self.last_timestamp != 0 && timestamp > self.last_timestamp);
        Ok(VerifiedInit {
            timestamp,
            instance,
            has_cookie,
            fresh,
            cookie,
            initiator_nonce: to_array(&body[..NONCE_LEN]),
            init_mac: to_array(&body[INIT_MAC..]),
        })
    }

    /// Answers a verified Init: with a `HandshakeResponse` and the
    /// responder's session keys if it is fresh (a valid cookie, or a
    /// timestamp above the last accepted one in this lifetime), else with
    /// a `HandshakeChallenge` holding `cookie`, remembered for
    /// [`COOKIE_LIFETIME`]. The reply goes into `reply`.
    ///
    /// `nonce` and `cookie` must be fresh random bytes (an all-zero cookie
    /// is replaced, since zero means "none"). `reply_header` supplies path
    /// id, sequence numbers and send timestamp; type, flags and connection
    /// id are set here. A used cookie is consumed. Nothing changes if this
    /// fails.
    pub fn answer(
        &mut self,
        init: &VerifiedInit,
        nonce: [u8; NONCE_LEN],
        mut cookie: Cookie,
        now: Instant,
        reply_header: &Header,
        reply: &mut [u8],
    ) -> Result<Answer, HandshakeError> {
        let slot = if init.has_cookie {
            Some(
                self.cookie_slot(&init.cookie, now)
                    .ok_or(HandshakeError::BadCookie)?,
            )
        } else {
            None
        };
        let fresh =
            slot.is_some() || (self.last_timestamp != 0 && init.timestamp > self.last_timestamp);
        if !fresh {
            // One slot per instance: its live cookie again, if it has one.
            let held = self.cookies.iter().position(|s| {
                s.is_some_and(|(_, t, who)| {
                    who == init.instance && now.saturating_duration_since(t) <= COOKIE_LIFETIME
                })
            });
            if let Some((c, _, _)) = held.and_then(|i| self.cookies[i]) {
                cookie = c;
            }
            if cookie == [0u8; COOKIE_LEN] {
                cookie[0] = 1;
            }
            let len = CHALLENGE_LEN;
            emit(
                reply_header,
                MsgType::HandshakeChallenge,
                self.conn_id,
                len,
                reply,
                &self.keys.challenge,
                |body| {
                    body[..COOKIE_LEN].copy_from_slice(&cookie);
                    body[CHALLENGE_INSTANCE..CHALLENGE_INIT_MAC].copy_from_slice(&self.instance);
                    body[CHALLENGE_INIT_MAC..CHALLENGE_MAC].copy_from_slice(&init.init_mac);
                },
            )?;
            if held.is_some() {
                return Ok(Answer::Challenge { len });
            }
            // The slot of an expired or the oldest cookie.
            let i = self
                .cookies
                .iter()
                .position(|s| {
                    s.is_none_or(|(_, t, _)| now.saturating_duration_since(t) > COOKIE_LIFETIME)
                })
                .unwrap_or(self.next_cookie % MAX_COOKIES);
            self.cookies[i] = Some((cookie, now, init.instance));
            self.next_cookie = (i + 1) % MAX_COOKIES;
            return Ok(Answer::Challenge { len });
        }
        let keys = SessionKeys::derive(&self.psk, &init.initiator_nonce, &nonce, Role::Responder)?;
        emit(
            reply_header,
            MsgType::HandshakeResponse,
            self.conn_id,
            RESPONSE_LEN,
            reply,
            &self.keys.response,
            |body| {
                body[..NONCE_LEN].copy_from_slice(&nonce);
                body[RESPONSE_INSTANCE..RESPONSE_INIT_MAC].copy_from_slice(&self.instance);
                body[RESPONSE_INIT_MAC..RESPONSE_MAC].copy_from_slice(&init.init_mac);
            },
        )?;
        if let Some(i) = slot {
            self.cookies[i] = None;
        }
        self.last_timestamp = init.timestamp;
        Ok(Answer::Response {
            keys: Box::new(keys),
            len: RESPONSE_LEN,
        })
    }

    /// [`Responder::verify_init`] then [`Responder::answer`], for callers
    /// that apply no rate limit in between.
    pub fn handle_init(
        &mut self,
        datagram: &[u8],
        nonce: [u8; NONCE_LEN],
        cookie: Cookie,
        now: Instant,
        reply_header: &Header,
        reply: &mut [u8],
    ) -> Result<Answer, HandshakeError> {
        let init = self.verify_init(datagram, now)?;
        self.answer(&init, nonce, cookie, now, reply_header, reply)
    }
}
