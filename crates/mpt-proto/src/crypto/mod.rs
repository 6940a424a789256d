//! Authentication and encryption of mpt traffic: a pre-shared-key
//! handshake, per-session keys, AEAD-sealed messages and replay protection.
//!
//! Sans-IO like the rest of the crate: nothing here reads a clock or a
//! random source. The caller passes in fresh random nonces (32 bytes from
//! the OS generator), cookies, its instance id, handshake timestamps and
//! `now`. All primitives come from `ring` (HKDF-SHA256, HMAC-SHA256,
//! ChaCha20-Poly1305); nothing is hand-rolled.
//!
//! How the pieces fit (the daemon drives them in this order):
//!
//! 1. Both peers hold the same [`Psk`]; each draws a random [`InstanceId`]
//!    when it starts. The initiator calls [`Initiator::start`] with a fresh
//!    nonce and a timestamp and sends the `HandshakeInit` it emitted.
//! 2. The responder calls [`Responder::verify_init`] first: length, header,
//!    connection id, MAC, instance id (its own means the Init was reflected
//!    back to it) and cookie, without changing anything. Only an authentic
//!    Init goes on to the rate limiters: a per-source [`SourceLimiter`]
//!    table and a per-connection [`RateLimiter`]. Forgeries cost one HMAC
//!    and never a token, so junk cannot crowd out a genuine peer.
//! 3. [`Responder::answer`] then answers with a `HandshakeResponse` and the
//!    responder's [`SessionKeys`] if the Init is provably fresh (a cookie
//!    it handed out, or a timestamp above the last one it accepted in its
//!    own lifetime), else with a `HandshakeChallenge` carrying a cookie.
//!    Clocks are a hint, not a proof: a replay after a restart, or a peer
//!    whose clock is behind, earns a Challenge; the genuine peer comes back
//!    with the cookie one round trip later, a replayer cannot.
//! 4. The initiator takes a Challenge ([`Initiator::handle_challenge`]) by
//!    sending a new Init with the cookie, and a Response
//!    ([`Initiator::handle_response`]) by switching to the keys: the
//!    Response proves the responder derived them.
//! 5. The responder holds its new keys as pending and keeps sealing with
//!    the old ones until a datagram sealed with the new keys opens (key
//!    confirmation): an Init that was replayed or whose answer was lost
//!    never makes it use keys the peer does not have. Old keys stay for
//!    opening stragglers a short while after a switch.
//! 6. Every message is then sealed with [`SessionKeys::seal_datagram`] (the
//!    header, with [`crate::wire::Flags::SEALED`], is associated data; the
//!    connection sequence number is the nonce). The receiver parses the
//!    header, asks the key set's [`ReplayWindow::check`], opens with
//!    [`SessionKeys::open_datagram`] and only then calls
//!    [`ReplayWindow::update`].
//! 7. Before the sequence number reaches [`REKEY_AFTER_MESSAGES`]
//!    ([`SessionKeys::must_rekey`]) the initiator runs a new handshake; a
//!    key never seals at or beyond [`REJECT_AFTER_MESSAGES`].
//!
//! Role binding: each message kind has its own MAC key (HKDF labels "mpt v2
//! init mac", "mpt v2 response mac", "mpt v2 challenge mac"), so no message
//! passes for another, and each carries its sender's instance id, so a side
//! never accepts its own messages sent back to it.
//!
//! What this does not give: forward secrecy. Session keys are derived from
//! the PSK and two nonces sent in clear, so whoever records the traffic and
//! later learns the PSK can decrypt it. An ephemeral Diffie-Hellman exchange
//! (X25519) would fix that; `ring` only generates ephemeral keys from its own
//! random source, which does not fit the sans-IO core as it stands.
//!
//! Wire layouts and the reasoning are in `docs/PROTOCOL.md`.

mod aead;
mod cipher;
pub mod cmdauth;
mod handshake;
mod kdf;
mod ratelimit;
mod replay;

pub use aead::{AeadError, SessionKeys, REJECT_AFTER_MESSAGES, REKEY_AFTER_MESSAGES, TAG_LEN};
pub use cipher::Cipher;
pub use handshake::{
    Answer, Cookie, HandshakeError, Initiator, InstanceId, Responder, VerifiedInit,
    CHALLENGE_BODY_LEN, CHALLENGE_LEN, COOKIE_LEN, COOKIE_LIFETIME, INIT_BODY_LEN, INIT_LEN,
    INSTANCE_LEN, MAC_LEN, MAX_COOKIES, NONCE_LEN, RESPONSE_BODY_LEN, RESPONSE_LEN,
};
pub use ratelimit::{RateLimiter, SourceLimiter};
pub use replay::{Replay, ReplayWindow, BITMAP_BITS as REPLAY_BITMAP_BITS, REPLAY_WINDOW};

use std::sync::Arc;

use zeroize::Zeroizing;

/// Length of a pre-shared key in bytes.
pub const PSK_LEN: usize = 32;

/// The pre-shared key both peers of a connection hold: 32 uniformly random
/// bytes (generate them with a CSPRNG, e.g. `head -c 32 /dev/urandom`; a
/// password is not a key).
///
/// It travels with the data [`Cipher`] both peers agreed on, which the
/// handshake binds (see [`Cipher`]) and the session keys use.
///
/// `Debug` never shows the key. There is deliberately no `PartialEq`: two
/// keys are never compared, only used.
///
/// The bytes are held once: clones (the connection's handshake, the Noise
/// peer table, the command port) share them behind an `Arc`, and the last
/// one to go wipes them.
#[derive(Clone)]
pub struct Psk {
    bytes: Arc<Zeroizing<[u8; PSK_LEN]>>,
    cipher: Cipher,
}

impl Psk {
    /// The key from its raw bytes, with the default cipher
    /// (ChaCha20-Poly1305). `bytes` is a copy: the caller wipes its own
    /// (e.g. by holding it in [`Zeroizing`]).
    pub fn from_bytes(bytes: [u8; PSK_LEN]) -> Psk {
        Psk {
            bytes: Arc::new(Zeroizing::new(bytes)),
            cipher: Cipher::ChaCha20Poly1305,
        }
    }

    /// The same key used with `cipher`.
    pub fn with_cipher(self, cipher: Cipher) -> Psk {
        Psk {
            bytes: self.bytes,
            cipher,
        }
    }

    /// The data cipher used with this key.
    pub const fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Whether `other` holds the very same key allocation.
    #[cfg(test)]
    pub(crate) fn shares_bytes_with(&self, other: &Psk) -> bool {
        Arc::ptr_eq(&self.bytes, &other.bytes)
    }

    /// The raw key bytes, as input keying material for HKDF.
    pub(crate) fn as_bytes(&self) -> &[u8; PSK_LEN] {
        &self.bytes
    }
}

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Psk(<redacted>, {})", self.cipher)
    }
}

/// Which end of the handshake a party played; decides which derived key
/// seals and which opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sent the `HandshakeInit`: seals with the initiator-to-responder key.
    Initiator,
    /// Answered it: seals with the responder-to-initiator key.
    Responder,
}

#[cfg(test)]
mod tests;
