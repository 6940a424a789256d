//! Authentication of the remote command port (`[daemon] cmd_port`).
//!
//! A remote `mpt` manages a daemon by proving that it holds the pre-shared
//! key of one of the daemon's connections. Both sides (the daemon's
//! `cmd_port` server and `mpt --remote`) use this module; the JSON envelope
//! around it lives in the daemon and the CLI (this crate knows no JSON).
//! Sans-IO: the caller passes the wall clock (`now_ms`, Unix milliseconds)
//! and the random nonce in. Primitives are `ring`'s HKDF-SHA256 and
//! HMAC-SHA256; nothing is hand-rolled.
//!
//! * Key: `K_cmd = HKDF-SHA256(salt = "", IKM = PSK, info = "mpt cmd port v1"
//!   || connection name)`, 32 bytes, an HMAC-SHA256 key ([`CmdKey`]). It is
//!   separate from the handshake and session keys, and bound to the
//!   connection's name, so a request for one connection is useless against
//!   another one that happens to share the PSK.
//! * Request MAC: HMAC-SHA256(K_cmd, [`request_bytes`]), all 32 bytes, over
//!   a length-prefixed canonical encoding of the connection name, the
//!   timestamp, the 16-byte nonce and the exact request text. The encoding
//!   starts with a label that differs from the response's, so a response
//!   can never pass as a request or the other way round.
//! * Response MAC: HMAC-SHA256(K_cmd, [`response_bytes`]) over the
//!   connection name, the request's nonce and the exact response text: it
//!   tells the client that the daemon (a holder of the key) answered this
//!   very request.
//! * Freshness and replay ([`ReplayGuard`]): a request is accepted when its
//!   timestamp is within [`MAX_SKEW_MS`] of the receiver's clock and its
//!   nonce was not accepted before. Accepted nonces are remembered until
//!   their timestamp has left the window (after that the timestamp check
//!   refuses them anyway), at most `capacity` of them
//!   ([`REPLAY_CAPACITY`] by default); when the set is full, new requests
//!   are refused rather than the set grown or an entry forgotten early.
//!
//! [`CmdVerifier`] puts it together for the server, in the order that
//! matters: MAC first (so forged requests never touch the replay set), then
//! the timestamp, then the nonce.

use std::collections::{BTreeSet, HashSet};

use ring::{hkdf, hmac};

use super::Psk;

/// Length of the request nonce in bytes (random, chosen by the client).
pub const NONCE_LEN: usize = 16;
/// Length of a request or response MAC (untruncated HMAC-SHA256).
pub const MAC_LEN: usize = 32;
/// Largest accepted difference between a request's timestamp and the
/// receiver's clock, either way, in milliseconds.
pub const MAX_SKEW_MS: u64 = 30_000;
/// Default bound of the set of remembered nonces.
pub const REPLAY_CAPACITY: usize = 4096;
/// HKDF info prefix of the command port key; the connection name follows.
pub const INFO_CMD_KEY: &[u8] = b"mpt cmd port v1";
/// First bytes of a request's canonical encoding.
pub const LABEL_REQUEST: &[u8] = b"mpt cmd v1 request\0";
/// First bytes of a response's canonical encoding.
pub const LABEL_RESPONSE: &[u8] = b"mpt cmd v1 response\0";
/// Longest connection name that can be encoded (its length is a `u16`).
pub const MAX_CONNECTION_LEN: usize = u16::MAX as usize;

/// Why a command port request or response was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum CmdAuthError {
    /// The MAC does not match: wrong key, or something was altered.
    #[error("authentication failed (wrong key, or the message was altered)")]
    BadMac,
    /// The message names another connection than the key belongs to.
    #[error("the message names another connection than the key is for")]
    WrongConnection,
    /// The timestamp is further than [`MAX_SKEW_MS`] from the receiver's
    /// clock.
    #[error(
        "request timestamp {timestamp_ms} ms is more than the allowed skew from the daemon's clock \
         ({now_ms} ms); check that both clocks are synchronised"
    )]
    Stale {
        /// The request's timestamp (Unix ms).
        timestamp_ms: u64,
        /// The receiver's clock (Unix ms).
        now_ms: u64,
    },
    /// The nonce was accepted before (a replayed request).
    #[error("replayed request (its nonce was already used)")]
    Replayed,
    /// The replay set is full; nothing new is accepted until entries expire.
    #[error("too many recent requests; try again in a few seconds")]
    ReplayCacheFull,
    /// A field is too long for the canonical encoding.
    #[error("connection name or message text too long")]
    TooLong,
    /// The cryptographic library refused (cannot happen with these sizes).
    #[error("key derivation failed")]
    Crypto,
}

impl From<ring::error::Unspecified> for CmdAuthError {
    fn from(_: ring::error::Unspecified) -> Self {
        CmdAuthError::Crypto
    }
}

/// What a request's MAC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestFields<'a> {
    /// The connection whose key signs the request.
    pub connection: &'a str,
    /// Client's wall clock at sending, Unix milliseconds.
    pub timestamp_ms: u64,
    /// Random, fresh for every request.
    pub nonce: &'a [u8; NONCE_LEN],
    /// The exact request text (the JSON object the control socket takes).
    pub body: &'a [u8],
}

/// What a response's MAC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseFields<'a> {
    /// The connection named in the request.
    pub connection: &'a str,
    /// The nonce of the request answered.
    pub nonce: &'a [u8; NONCE_LEN],
    /// The exact response text.
    pub body: &'a [u8],
}

fn push_connection(out: &mut Vec<u8>, connection: &str) -> Result<(), CmdAuthError> {
    let len = u16::try_from(connection.len()).map_err(|_| CmdAuthError::TooLong)?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(connection.as_bytes());
    Ok(())
}

fn push_body(out: &mut Vec<u8>, body: &[u8]) -> Result<(), CmdAuthError> {
    let len = u32::try_from(body.len()).map_err(|_| CmdAuthError::TooLong)?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    Ok(())
}

/// The canonical bytes a request MAC covers:
///
/// ```text
/// "mpt cmd v1 request\0" | u16 len | connection | u64 timestamp_ms | nonce (16) | u32 len | body
/// ```
///
/// All integers big-endian. Every variable-length field carries its
/// length, so no two different requests encode to the same bytes.
pub fn request_bytes(r: &RequestFields<'_>) -> Result<Vec<u8>, CmdAuthError> {
    let mut out = Vec::with_capacity(
        LABEL_REQUEST.len() + 2 + r.connection.len() + 8 + NONCE_LEN + 4 + r.body.len(),
    );
    out.extend_from_slice(LABEL_REQUEST);
    push_connection(&mut out, r.connection)?;
    out.extend_from_slice(&r.timestamp_ms.to_be_bytes());
    out.extend_from_slice(r.nonce);
    push_body(&mut out, r.body)?;
    Ok(out)
}

/// The canonical bytes a response MAC covers:
///
/// ```text
/// "mpt cmd v1 response\0" | u16 len | connection | request nonce (16) | u32 len | body
/// ```
pub fn response_bytes(r: &ResponseFields<'_>) -> Result<Vec<u8>, CmdAuthError> {
    let mut out = Vec::with_capacity(
        LABEL_RESPONSE.len() + 2 + r.connection.len() + NONCE_LEN + 4 + r.body.len(),
    );
    out.extend_from_slice(LABEL_RESPONSE);
    push_connection(&mut out, r.connection)?;
    out.extend_from_slice(r.nonce);
    push_body(&mut out, r.body)?;
    Ok(out)
}

/// `K_cmd` of one connection: signs and verifies its requests and
/// responses. `Debug` never shows the key.
#[derive(Clone)]
pub struct CmdKey {
    connection: String,
    key: hmac::Key,
}

impl std::fmt::Debug for CmdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmdKey")
            .field("connection", &self.connection)
            .finish_non_exhaustive()
    }
}

impl CmdKey {
    /// Derives the command port key of `connection` from its PSK.
    pub fn derive(psk: &Psk, connection: &str) -> Result<CmdKey, CmdAuthError> {
        if connection.len() > MAX_CONNECTION_LEN {
            return Err(CmdAuthError::TooLong);
        }
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &[]).extract(psk.as_bytes());
        let info = [INFO_CMD_KEY, connection.as_bytes()];
        let mut bytes = [0u8; 32];
        prk.expand(&info, hmac::HMAC_SHA256)?.fill(&mut bytes)?;
        Ok(CmdKey {
            connection: connection.to_owned(),
            key: hmac::Key::new(hmac::HMAC_SHA256, &bytes),
        })
    }

    /// The connection this key belongs to.
    pub fn connection(&self) -> &str {
        &self.connection
    }

    fn sign(&self, data: &[u8]) -> [u8; MAC_LEN] {
        let tag = hmac::sign(&self.key, data);
        let mut out = [0u8; MAC_LEN];
        for (o, t) in out.iter_mut().zip(tag.as_ref()) {
            *o = *t;
        }
        out
    }

    fn check_connection(&self, connection: &str) -> Result<(), CmdAuthError> {
        if connection == self.connection {
            Ok(())
        } else {
            Err(CmdAuthError::WrongConnection)
        }
    }

    /// The MAC of a request.
    pub fn sign_request(&self, r: &RequestFields<'_>) -> Result<[u8; MAC_LEN], CmdAuthError> {
        self.check_connection(r.connection)?;
        Ok(self.sign(&request_bytes(r)?))
    }

    /// Checks a request's MAC (in constant time). Says nothing about
    /// freshness; see [`CmdVerifier`].
    pub fn verify_request(&self, r: &RequestFields<'_>, mac: &[u8]) -> Result<(), CmdAuthError> {
        self.check_connection(r.connection)?;
        hmac::verify(&self.key, &request_bytes(r)?, mac).map_err(|_| CmdAuthError::BadMac)
    }

    /// The MAC of a response.
    pub fn sign_response(&self, r: &ResponseFields<'_>) -> Result<[u8; MAC_LEN], CmdAuthError> {
        self.check_connection(r.connection)?;
        Ok(self.sign(&response_bytes(r)?))
    }

    /// Checks a response's MAC (in constant time). The caller also checks
    /// that `r.nonce` is the nonce of the request it sent.
    pub fn verify_response(&self, r: &ResponseFields<'_>, mac: &[u8]) -> Result<(), CmdAuthError> {
        self.check_connection(r.connection)?;
        hmac::verify(&self.key, &response_bytes(r)?, mac).map_err(|_| CmdAuthError::BadMac)
    }
}

/// Whether `timestamp_ms` is within `max_skew_ms` of `now_ms`, either way.
pub fn check_fresh(timestamp_ms: u64, now_ms: u64, max_skew_ms: u64) -> Result<(), CmdAuthError> {
    if timestamp_ms.abs_diff(now_ms) <= max_skew_ms {
        Ok(())
    } else {
        Err(CmdAuthError::Stale {
            timestamp_ms,
            now_ms,
        })
    }
}

/// The timestamp check and the set of recently accepted nonces, with
/// bounded memory. Feed it authenticated requests only.
#[derive(Debug, Clone)]
pub struct ReplayGuard {
    capacity: usize,
    max_skew_ms: u64,
    seen: HashSet<[u8; NONCE_LEN]>,
    /// `(expiry_ms, nonce)`: when each remembered nonce may be forgotten.
    expiry: BTreeSet<(u64, [u8; NONCE_LEN])>,
}

impl ReplayGuard {
    /// Remembers at most `capacity` nonces; accepts timestamps within
    /// `max_skew_ms` of the clock.
    pub fn new(capacity: usize, max_skew_ms: u64) -> ReplayGuard {
        ReplayGuard {
            capacity,
            max_skew_ms,
            seen: HashSet::new(),
            expiry: BTreeSet::new(),
        }
    }

    /// Nonces remembered now.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no nonce is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Forgets the nonces whose timestamps are out of the window at `now_ms`.
    fn prune(&mut self, now_ms: u64) {
        while let Some(&(expires, nonce)) = self.expiry.first() {
            if expires >= now_ms {
                break;
            }
            self.expiry.pop_first();
            self.seen.remove(&nonce);
        }
    }

    /// Accepts a request with `timestamp_ms` and `nonce` at `now_ms`, or
    /// says why not. An accepted nonce is remembered; a refused one is not.
    pub fn admit(
        &mut self,
        timestamp_ms: u64,
        nonce: &[u8; NONCE_LEN],
        now_ms: u64,
    ) -> Result<(), CmdAuthError> {
        check_fresh(timestamp_ms, now_ms, self.max_skew_ms)?;
        self.prune(now_ms);
        if self.seen.contains(nonce) {
            return Err(CmdAuthError::Replayed);
        }
        if self.seen.len() >= self.capacity {
            return Err(CmdAuthError::ReplayCacheFull);
        }
        // The timestamp check refuses this nonce from expiry on.
        let expires = timestamp_ms.saturating_add(self.max_skew_ms);
        self.seen.insert(*nonce);
        self.expiry.insert((expires, *nonce));
        Ok(())
    }
}

/// The server side of one connection: its key and its replay guard.
#[derive(Debug, Clone)]
pub struct CmdVerifier {
    key: CmdKey,
    guard: ReplayGuard,
}

impl CmdVerifier {
    /// A verifier with the default limits ([`REPLAY_CAPACITY`],
    /// [`MAX_SKEW_MS`]).
    pub fn new(key: CmdKey) -> CmdVerifier {
        Self::with_limits(key, REPLAY_CAPACITY, MAX_SKEW_MS)
    }

    /// A verifier with other limits (tests).
    pub fn with_limits(key: CmdKey, capacity: usize, max_skew_ms: u64) -> CmdVerifier {
        CmdVerifier {
            key,
            guard: ReplayGuard::new(capacity, max_skew_ms),
        }
    }

    /// The key (to sign the response).
    pub fn key(&self) -> &CmdKey {
        &self.key
    }

    /// Nonces remembered now.
    pub fn remembered(&self) -> usize {
        self.guard.len()
    }

    /// Accepts an authentic, fresh, not yet seen request, in that order of
    /// checks; an accepted request's nonce is remembered.
    pub fn accept(
        &mut self,
        r: &RequestFields<'_>,
        mac: &[u8],
        now_ms: u64,
    ) -> Result<(), CmdAuthError> {
        self.key.verify_request(r, mac)?;
        self.guard.admit(r.timestamp_ms, r.nonce, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn psk(start: u8) -> Psk {
        let mut k = [0u8; 32];
        for (i, b) in k.iter_mut().enumerate() {
            *b = start.wrapping_add(i as u8);
        }
        Psk::from_bytes(k)
    }

    const NONCE: [u8; NONCE_LEN] = [
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae,
        0xaf,
    ];
    const TS: u64 = 1_700_000_000_123;
    const BODY: &[u8] = br#"{"version":1,"request":"status"}"#;

    fn key() -> CmdKey {
        CmdKey::derive(&psk(0), "site-b").unwrap()
    }

    fn req<'a>(body: &'a [u8], nonce: &'a [u8; NONCE_LEN], ts: u64) -> RequestFields<'a> {
        RequestFields {
            connection: "site-b",
            timestamp_ms: ts,
            nonce,
            body,
        }
    }

    /// Vectors computed independently (Python's hmac/hashlib: RFC 5869
    /// HKDF by hand) for PSK 00 01 .. 1f, connection "site-b".
    #[test]
    fn known_answers() {
        let k = key();
        let r = req(BODY, &NONCE, TS);
        assert_eq!(
            request_bytes(&r).unwrap(),
            hex("6d707420636d642076312072657175657374000006736974652d620000018bcfe5687ba0a1a2a3a4a5a6a7a8a9aaabacadaeaf000000207b2276657273696f6e223a312c2272657175657374223a22737461747573227d")
        );
        assert_eq!(
            k.sign_request(&r).unwrap().to_vec(),
            hex("7f0dd3db940036dae2fe644f1a39648f9c2b5a41bdfb5fbe967b789873bbbd31")
        );
        let resp = ResponseFields {
            connection: "site-b",
            nonce: &NONCE,
            body: br#"{"version":1,"ok":true}"#,
        };
        assert_eq!(
            k.sign_response(&resp).unwrap().to_vec(),
            hex("13e2a83fa635078c65ed4aba62fc4a49e171f3c8736a425c2fc012de51583251")
        );
    }

    #[test]
    fn round_trip() {
        let k = key();
        let r = req(BODY, &NONCE, TS);
        let mac = k.sign_request(&r).unwrap();
        assert_eq!(k.verify_request(&r, &mac), Ok(()));
        let resp = ResponseFields {
            connection: "site-b",
            nonce: &NONCE,
            body: b"{}",
        };
        let rmac = k.sign_response(&resp).unwrap();
        assert_eq!(k.verify_response(&resp, &rmac), Ok(()));
        // Derivation is deterministic: the client and the server agree.
        let other_side = CmdKey::derive(&psk(0), "site-b").unwrap();
        assert_eq!(other_side.verify_request(&r, &mac), Ok(()));
        assert!(!format!("{k:?}").contains("key:"), "{k:?}");
    }

    #[test]
    fn every_tampered_request_field_is_refused() {
        let k = key();
        let r = req(BODY, &NONCE, TS);
        let mac = k.sign_request(&r).unwrap();
        // Timestamp.
        for ts in [TS - 1, TS + 1, TS ^ (1 << 40), 0, u64::MAX] {
            assert_eq!(
                k.verify_request(&req(BODY, &NONCE, ts), &mac),
                Err(CmdAuthError::BadMac)
            );
        }
        // Every bit of the nonce.
        for i in 0..NONCE_LEN * 8 {
            let mut n = NONCE;
            n[i / 8] ^= 1 << (i % 8);
            assert_eq!(
                k.verify_request(&req(BODY, &n, TS), &mac),
                Err(CmdAuthError::BadMac)
            );
        }
        // Every bit of the body, plus appended, truncated and empty bodies.
        for i in 0..BODY.len() * 8 {
            let mut b = BODY.to_vec();
            b[i / 8] ^= 1 << (i % 8);
            assert_eq!(
                k.verify_request(&req(&b, &NONCE, TS), &mac),
                Err(CmdAuthError::BadMac)
            );
        }
        let mut longer = BODY.to_vec();
        longer.push(b' ');
        for b in [&longer[..], &BODY[..BODY.len() - 1], b""] {
            assert_eq!(
                k.verify_request(&req(b, &NONCE, TS), &mac),
                Err(CmdAuthError::BadMac)
            );
        }
        // Every bit of the MAC, and wrong MAC lengths.
        for i in 0..MAC_LEN * 8 {
            let mut m = mac;
            m[i / 8] ^= 1 << (i % 8);
            assert_eq!(k.verify_request(&r, &m), Err(CmdAuthError::BadMac));
        }
        assert_eq!(k.verify_request(&r, &mac[..16]), Err(CmdAuthError::BadMac));
        assert_eq!(k.verify_request(&r, &[]), Err(CmdAuthError::BadMac));
        let mut long = mac.to_vec();
        long.push(0);
        assert_eq!(k.verify_request(&r, &long), Err(CmdAuthError::BadMac));
        // Connection: another name is refused by this key outright.
        let other = RequestFields {
            connection: "site-c",
            ..r
        };
        assert_eq!(
            k.verify_request(&other, &mac),
            Err(CmdAuthError::WrongConnection)
        );
    }

    #[test]
    fn wrong_key_and_wrong_connection_are_refused() {
        let r = req(BODY, &NONCE, TS);
        let mac = key().sign_request(&r).unwrap();
        // Another PSK.
        let wrong = CmdKey::derive(&psk(1), "site-b").unwrap();
        assert_eq!(wrong.verify_request(&r, &mac), Err(CmdAuthError::BadMac));
        // The same PSK for another connection: another key, and the
        // request's MAC does not verify under it even with the name changed.
        let c = CmdKey::derive(&psk(0), "site-c").unwrap();
        let as_c = RequestFields {
            connection: "site-c",
            ..r
        };
        assert_eq!(c.verify_request(&as_c, &mac), Err(CmdAuthError::BadMac));
        assert_ne!(
            c.sign_request(&as_c).unwrap(),
            key().sign_request(&r).unwrap()
        );
        // A name that is a prefix: still a different key.
        let prefix = CmdKey::derive(&psk(0), "site-").unwrap();
        let as_prefix = RequestFields {
            connection: "site-",
            ..r
        };
        assert_eq!(
            prefix.verify_request(&as_prefix, &mac),
            Err(CmdAuthError::BadMac)
        );
    }

    #[test]
    fn responses_are_bound_to_the_request_and_direction() {
        let k = key();
        let body = br#"{"version":1,"ok":true}"#;
        let resp = ResponseFields {
            connection: "site-b",
            nonce: &NONCE,
            body,
        };
        let mac = k.sign_response(&resp).unwrap();
        // Another request's nonce.
        let mut n = NONCE;
        n[15] ^= 1;
        let other = ResponseFields { nonce: &n, ..resp };
        assert_eq!(k.verify_response(&other, &mac), Err(CmdAuthError::BadMac));
        // Altered text.
        let altered = ResponseFields {
            body: br#"{"version":1,"ok":false}"#,
            ..resp
        };
        assert_eq!(k.verify_response(&altered, &mac), Err(CmdAuthError::BadMac));
        for i in 0..MAC_LEN * 8 {
            let mut m = mac;
            m[i / 8] ^= 1 << (i % 8);
            assert_eq!(k.verify_response(&resp, &m), Err(CmdAuthError::BadMac));
        }
        // Another key.
        let wrong = CmdKey::derive(&psk(1), "site-b").unwrap();
        assert_eq!(
            wrong.verify_response(&resp, &mac),
            Err(CmdAuthError::BadMac)
        );
        // A request MAC never passes as a response MAC, nor the reverse:
        // the labels differ.
        let r = req(body, &NONCE, TS);
        let req_mac = k.sign_request(&r).unwrap();
        assert_eq!(
            k.verify_response(&resp, &req_mac),
            Err(CmdAuthError::BadMac)
        );
        assert_eq!(k.verify_request(&r, &mac), Err(CmdAuthError::BadMac));
    }

    #[test]
    fn encoding_is_unambiguous() {
        // Moving bytes between fields changes the encoding.
        let n = NONCE;
        let a = request_bytes(&RequestFields {
            connection: "ab",
            timestamp_ms: 1,
            nonce: &n,
            body: b"c",
        })
        .unwrap();
        let b = request_bytes(&RequestFields {
            connection: "a",
            timestamp_ms: 1,
            nonce: &n,
            body: b"bc",
        })
        .unwrap();
        assert_ne!(a, b);
        let long = "x".repeat(MAX_CONNECTION_LEN + 1);
        assert_eq!(
            request_bytes(&RequestFields {
                connection: &long,
                timestamp_ms: 1,
                nonce: &n,
                body: b""
            }),
            Err(CmdAuthError::TooLong)
        );
        assert_eq!(
            CmdKey::derive(&psk(0), &long).map(|_| ()),
            Err(CmdAuthError::TooLong)
        );
        // The longest name still works.
        let max = "x".repeat(MAX_CONNECTION_LEN);
        let k = CmdKey::derive(&psk(0), &max).unwrap();
        let r = RequestFields {
            connection: &max,
            timestamp_ms: 1,
            nonce: &n,
            body: b"",
        };
        let mac = k.sign_request(&r).unwrap();
        assert_eq!(k.verify_request(&r, &mac), Ok(()));
    }

    #[test]
    fn timestamp_window_edges() {
        let now = TS;
        assert_eq!(check_fresh(now, now, MAX_SKEW_MS), Ok(()));
        assert_eq!(check_fresh(now - MAX_SKEW_MS, now, MAX_SKEW_MS), Ok(()));
        assert_eq!(check_fresh(now + MAX_SKEW_MS, now, MAX_SKEW_MS), Ok(()));
        for ts in [now - MAX_SKEW_MS - 1, now + MAX_SKEW_MS + 1, 0, u64::MAX] {
            assert_eq!(
                check_fresh(ts, now, MAX_SKEW_MS),
                Err(CmdAuthError::Stale {
                    timestamp_ms: ts,
                    now_ms: now
                })
            );
        }
        // Extremes never overflow.
        assert_eq!(check_fresh(u64::MAX, u64::MAX, 0), Ok(()));
        assert!(check_fresh(0, u64::MAX, MAX_SKEW_MS).is_err());
        let mut g = ReplayGuard::new(4, MAX_SKEW_MS);
        assert_eq!(g.admit(u64::MAX, &NONCE, u64::MAX), Ok(()));
        assert_eq!(
            g.admit(u64::MAX, &NONCE, u64::MAX),
            Err(CmdAuthError::Replayed)
        );
    }

    fn signed(k: &CmdKey, nonce: &[u8; NONCE_LEN], ts: u64) -> [u8; MAC_LEN] {
        k.sign_request(&req(BODY, nonce, ts)).unwrap()
    }

    #[test]
    fn verifier_accepts_once_and_refuses_replays() {
        let k = key();
        let mut v = CmdVerifier::new(k.clone());
        let mac = signed(&k, &NONCE, TS);
        let r = req(BODY, &NONCE, TS);
        assert_eq!(v.accept(&r, &mac, TS + 5), Ok(()));
        assert_eq!(v.remembered(), 1);
        // The same bytes again, now and later within the window.
        assert_eq!(v.accept(&r, &mac, TS + 5), Err(CmdAuthError::Replayed));
        assert_eq!(
            v.accept(&r, &mac, TS + MAX_SKEW_MS),
            Err(CmdAuthError::Replayed)
        );
        // After the window the timestamp refuses it (and it is forgotten
        // only then).
        assert!(matches!(
            v.accept(&r, &mac, TS + MAX_SKEW_MS + 1),
            Err(CmdAuthError::Stale { .. })
        ));
        // A clock that goes back into the window still refuses it.
        assert_eq!(v.accept(&r, &mac, TS), Err(CmdAuthError::Replayed));
        // A fresh nonce is fine.
        let mut n2 = NONCE;
        n2[0] = 0;
        assert_eq!(
            v.accept(&req(BODY, &n2, TS), &signed(&k, &n2, TS), TS),
            Ok(())
        );
    }

    #[test]
    fn forged_or_stale_requests_do_not_enter_the_replay_set() {
        let k = key();
        let mut v = CmdVerifier::with_limits(k.clone(), 1, MAX_SKEW_MS);
        let r = req(BODY, &NONCE, TS);
        let mac = signed(&k, &NONCE, TS);
        let mut bad = mac;
        bad[0] ^= 1;
        assert_eq!(v.accept(&r, &bad, TS), Err(CmdAuthError::BadMac));
        let forged = CmdKey::derive(&psk(9), "site-b").unwrap();
        assert_eq!(
            v.accept(&r, &signed(&forged, &NONCE, TS), TS),
            Err(CmdAuthError::BadMac)
        );
        assert!(matches!(
            v.accept(&r, &mac, TS + MAX_SKEW_MS + 1),
            Err(CmdAuthError::Stale { .. })
        ));
        assert_eq!(v.remembered(), 0);
        // So the genuine request (capacity 1) still goes through, once.
        assert_eq!(v.accept(&r, &mac, TS), Ok(()));
        assert_eq!(v.accept(&r, &mac, TS), Err(CmdAuthError::Replayed));
        // A request for another connection, signed by its own key, is
        // refused by this connection's verifier.
        let c = CmdKey::derive(&psk(0), "site-c").unwrap();
        let rc = RequestFields {
            connection: "site-c",
            ..r
        };
        let cmac = c.sign_request(&rc).unwrap();
        assert_eq!(v.accept(&rc, &cmac, TS), Err(CmdAuthError::WrongConnection));
    }

    #[test]
    fn full_replay_set_refuses_until_entries_expire() {
        let k = key();
        let cap = 8;
        let mut v = CmdVerifier::with_limits(k.clone(), cap, MAX_SKEW_MS);
        let nonce = |i: u8| {
            let mut n = NONCE;
            n[0] = i;
            n
        };
        for i in 0..cap as u8 {
            let n = nonce(i);
            // Timestamps spread over the window: entries expire in turn.
            let ts = TS + u64::from(i) * 1000;
            assert_eq!(
                v.accept(&req(BODY, &n, ts), &signed(&k, &n, ts), ts),
                Ok(())
            );
        }
        assert_eq!(v.remembered(), cap);
        let last = nonce(cap as u8);
        let t = TS + 10_000;
        assert_eq!(
            v.accept(&req(BODY, &last, t), &signed(&k, &last, t), t),
            Err(CmdAuthError::ReplayCacheFull)
        );
        // Refusing does not forget anything: every old one is still a replay.
        for i in 0..cap as u8 {
            let n = nonce(i);
            let ts = TS + u64::from(i) * 1000;
            assert_eq!(
                v.accept(&req(BODY, &n, ts), &signed(&k, &n, ts), t),
                Err(CmdAuthError::Replayed)
            );
        }
        assert_eq!(v.remembered(), cap);
        // When the oldest leaves the window (ts TS + 0 expires after
        // TS + MAX_SKEW_MS), exactly one slot frees.
        let t2 = TS + MAX_SKEW_MS + 1;
        assert_eq!(
            v.accept(&req(BODY, &last, t2), &signed(&k, &last, t2), t2),
            Ok(())
        );
        assert_eq!(v.remembered(), cap);
        let another = nonce(200);
        assert_eq!(
            v.accept(&req(BODY, &another, t2), &signed(&k, &another, t2), t2),
            Err(CmdAuthError::ReplayCacheFull)
        );
        // Much later everything has expired.
        let t3 = t2 + 2 * MAX_SKEW_MS;
        assert_eq!(
            v.accept(&req(BODY, &another, t3), &signed(&k, &another, t3), t3),
            Ok(())
        );
        assert_eq!(v.remembered(), 1);
    }

    #[test]
    fn zero_capacity_refuses_everything() {
        let mut g = ReplayGuard::new(0, MAX_SKEW_MS);
        assert_eq!(g.admit(TS, &NONCE, TS), Err(CmdAuthError::ReplayCacheFull));
        assert!(g.is_empty());
    }
}
