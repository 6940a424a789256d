//! Sealing and opening messages with a session's keys (AES-256-GCM or
//! ChaCha20-Poly1305, see [`super::Cipher`]).
//!
//! A sealed datagram is `header (24) | ciphertext | tag (16)`:
//! * the whole 24-byte header, with [`Flags::SEALED`] set, is the
//!   associated data, so no header byte can be changed without detection;
//! * the nonce is `0u32 || seq` (big-endian, 12 bytes), `seq` being the
//!   connection sequence number read from the header itself, so the nonce
//!   and the authenticated sequence number can never disagree;
//! * each direction has its own key, so both peers may use the same `seq`.
//!
//! Nonce uniqueness is the caller's one duty: under one key a sequence
//! number is sealed at most once. The daemon's per-connection counter does
//! that (it only counts up, and a new handshake brings new keys when it
//! restarts). [`SessionKeys::must_rekey`] says when to start a new
//! handshake, long before the counter could run out; past
//! [`REJECT_AFTER_MESSAGES`] sealing and opening refuse outright.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, NONCE_LEN};

use super::kdf::{self, Unspecified};
use super::{Cipher, Psk, Role};
use crate::wire::{Flags, HeaderView, HEADER_LEN};

/// Length of the authentication tag that trails a sealed body (16 bytes
/// for either cipher).
pub const TAG_LEN: usize = 16;

/// From this connection sequence number on, the sender should run a new
/// handshake ([`SessionKeys::must_rekey`]). 2^60 is WireGuard's value: far
/// beyond any session's lifetime (36 years at a billion packets per second),
/// yet leaving 2^63 numbers of margin before the hard limit.
pub const REKEY_AFTER_MESSAGES: u64 = 1 << 60;

/// No sequence number at or above this is ever sealed or opened, so the
/// 64-bit nonce can never wrap under one key and the replay window's
/// arithmetic (which looks up to 2^13 ahead) never overflows.
pub const REJECT_AFTER_MESSAGES: u64 = u64::MAX - (1 << 13);

/// Why a message could not be sealed or opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AeadError {
    /// The header does not carry [`Flags::SEALED`]: it would lie about the
    /// body (seal), or the body is not sealed (open).
    #[error("header lacks the SEALED flag")]
    NotSealed,
    /// The sequence number is at or above [`REJECT_AFTER_MESSAGES`].
    #[error("sequence number {seq} is beyond this key's limit")]
    Exhausted {
        /// The sequence number in the header.
        seq: u64,
    },
    /// The datagram is too short to hold a header and a tag.
    #[error("datagram of {len} bytes cannot hold header and tag")]
    TooShort {
        /// Length seen.
        len: usize,
    },
    /// The payload exceeds what the cipher can seal under one nonce.
    #[error("payload of {len} bytes is too long to seal")]
    TooLong {
        /// Length of the payload.
        len: usize,
    },
    /// The caller's buffer has no room for the payload and the tag.
    #[error("buffer of {have} bytes, {needed} needed")]
    BufferTooSmall {
        /// Bytes required.
        needed: usize,
        /// Bytes available.
        have: usize,
    },
    /// Authentication failed: wrong key, or the header, body or tag was
    /// altered. One bad datagram; drop it and count it.
    #[error("authentication failed")]
    Auth,
}

/// A session's two directional AEAD keys, as produced by the handshake.
///
/// `Clone` is cheap enough to give each data-plane worker its own copy;
/// sealing and opening take `&self`, so one copy can also be shared.
#[derive(Clone)]
pub struct SessionKeys {
    role: Role,
    send: LessSafeKey,
    recv: LessSafeKey,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeys")
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

fn nonce_for(header: HeaderView<'_>) -> (u64, Nonce) {
    let seq = header.seq();
    let mut nonce = [0u8; NONCE_LEN];
    nonce[NONCE_LEN - 8..].copy_from_slice(&seq.to_be_bytes());
    (seq, Nonce::assume_unique_for_key(nonce))
}

fn check_header(header: &[u8; HEADER_LEN]) -> Result<Nonce, AeadError> {
    let header = HeaderView::new(header);
    if !header.has_flags(Flags::SEALED) {
        return Err(AeadError::NotSealed);
    }
    let (seq, nonce) = nonce_for(header);
    if seq >= REJECT_AFTER_MESSAGES {
        return Err(AeadError::Exhausted { seq });
    }
    Ok(nonce)
}

impl SessionKeys {
    /// Derives the keys of a session from the PSK and both handshake
    /// nonces, for the party playing `role`.
    pub(crate) fn derive(
        psk: &Psk,
        initiator_nonce: &[u8; 32],
        responder_nonce: &[u8; 32],
        role: Role,
    ) -> Result<SessionKeys, Unspecified> {
        let (i2r, r2i) = kdf::session_key_bytes(psk, initiator_nonce, responder_nonce)?;
        let alg = psk.cipher().algorithm();
        let i2r = LessSafeKey::new(UnboundKey::new(alg, &*i2r)?);
        let r2i = LessSafeKey::new(UnboundKey::new(alg, &*r2i)?);
        let (send, recv) = match role {
            Role::Initiator => (i2r, r2i),
            Role::Responder => (r2i, i2r),
        };
        Ok(SessionKeys { role, send, recv })
    }

    /// The keys of a session from the two raw directional keys another
    /// handshake produced (the Noise IK handshake's split, see
    /// [`crate::noise`]), for the party playing `role`, sealing with
    /// `cipher`.
    pub(crate) fn from_raw(
        i2r: &[u8; kdf::KEY_LEN],
        r2i: &[u8; kdf::KEY_LEN],
        role: Role,
        cipher: Cipher,
    ) -> Result<SessionKeys, Unspecified> {
        let alg = cipher.algorithm();
        let i2r = LessSafeKey::new(UnboundKey::new(alg, i2r)?);
        let r2i = LessSafeKey::new(UnboundKey::new(alg, r2i)?);
        let (send, recv) = match role {
            Role::Initiator => (i2r, r2i),
            Role::Responder => (r2i, i2r),
        };
        Ok(SessionKeys { role, send, recv })
    }

    /// Which end of the handshake these keys belong to.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether a sender about to use `seq` should start a new handshake:
    /// true from [`REKEY_AFTER_MESSAGES`] on. Sealing keeps working until
    /// [`REJECT_AFTER_MESSAGES`], which leaves ample time for it.
    pub const fn must_rekey(seq: u64) -> bool {
        seq >= REKEY_AFTER_MESSAGES
    }

    /// Seals `payload` in place under `header` (the emitted header bytes,
    /// with [`Flags::SEALED`] set) and returns the tag, which the caller
    /// appends to the ciphertext. The nonce is the header's sequence number,
    /// which must never have been sealed before under these keys.
    pub fn seal(
        &self,
        header: &[u8; HEADER_LEN],
        payload: &mut [u8],
    ) -> Result<[u8; TAG_LEN], AeadError> {
        let nonce = check_header(header)?;
        let tag = self
            .send
            .seal_in_place_separate_tag(nonce, Aad::from(header), payload)
            // ring refuses only payloads beyond ChaCha20's 256 GiB limit.
            .map_err(|_| AeadError::TooLong { len: payload.len() })?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Seals a datagram in place: `buf[..24]` holds the emitted header
    /// (with [`Flags::SEALED`]), `buf[24..24 + payload_len]` the payload.
    /// Encrypts the payload, writes the tag at `buf[24 + payload_len..][..16]`
    /// and returns the datagram length, `24 + payload_len + 16`.
    pub fn seal_datagram(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, AeadError> {
        let needed = HEADER_LEN + payload_len + TAG_LEN;
        let have = buf.len();
        let Some(datagram) = buf.get_mut(..needed) else {
            return Err(AeadError::BufferTooSmall { needed, have });
        };
        let (header, rest) = datagram.split_at_mut(HEADER_LEN);
        let header: &[u8; HEADER_LEN] = (&*header)
            .try_into()
            .map_err(|_| AeadError::BufferTooSmall { needed, have })?;
        let (payload, tag_out) = rest.split_at_mut(payload_len);
        let tag = self.seal(header, payload)?;
        tag_out.copy_from_slice(&tag);
        Ok(needed)
    }

    /// Opens a sealed body in place: `body` is `ciphertext || tag` as
    /// received after `header`. Returns the plaintext (a prefix of `body`).
    /// On error the contents of `body` are unspecified.
    ///
    /// Check the sequence number against the replay window (`ReplayWindow`)
    /// before (cheap) and update the window only after this succeeds.
    pub fn open<'a>(
        &self,
        header: &[u8; HEADER_LEN],
        body: &'a mut [u8],
    ) -> Result<&'a mut [u8], AeadError> {
        let nonce = check_header(header)?;
        if body.len() < TAG_LEN {
            return Err(AeadError::TooShort {
                len: HEADER_LEN + body.len(),
            });
        }
        self.recv
            .open_in_place(nonce, Aad::from(header), body)
            .map_err(|_| AeadError::Auth)
    }

    /// Opens a whole received datagram (`header | ciphertext | tag`) in
    /// place and returns the plaintext payload, which lies at
    /// `datagram[24..len - 16]`.
    pub fn open_datagram<'a>(&self, datagram: &'a mut [u8]) -> Result<&'a mut [u8], AeadError> {
        let len = datagram.len();
        if len < HEADER_LEN + TAG_LEN {
            return Err(AeadError::TooShort { len });
        }
        let (header, body) = datagram.split_at_mut(HEADER_LEN);
        let header: &[u8; HEADER_LEN] = (&*header)
            .try_into()
            .map_err(|_| AeadError::TooShort { len })?;
        self.open(header, body)
    }
}

// The tag ring produces is the one the wire layout reserves room for.
const _: () = assert!(TAG_LEN == ring::aead::MAX_TAG_LEN);
