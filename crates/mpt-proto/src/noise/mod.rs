//! Public-key identities and a handshake with forward secrecy: Noise IK
//! (`Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s`, from the `snow` crate),
//! wrapped in our wire format, with WireGuard-style mac1/mac2 cookies in
//! front of it and key rotation behind it.
//!
//! Why this exists beside the PSK handshake in [`crate::crypto`]: that
//! one derives session keys from the PSK and two nonces sent in clear, so
//! whoever records traffic and later learns the PSK reads it all, and one
//! server cannot tell many clients apart by anything but a configured
//! connection id. Here each daemon has an X25519 key pair
//! ([`StaticSecret`], [`PublicKey`]); a handshake mixes in fresh ephemeral
//! keys (forward secrecy: a stolen static key does not open recorded
//! sessions), identifies the initiator by its static key (so a server on
//! one port finds the connection from the handshake itself), and assigns
//! each side a random **session index** that addresses every later
//! datagram of the session (the header's `conn_id`).
//!
//! The PSK: a connection's `key_file` PSK, when given, is mixed in as
//! Noise's `psk2` (an attacker then needs both the PSK and a static key);
//! without one, 32 zero bytes are mixed in, which adds nothing and costs
//! nothing, so one protocol name covers both cases.
//!
//! Sans-IO like the rest of the crate: time comes in as `now: Instant`
//! and the wall clock as a [`Tai64n`]; every random byte (session indexes,
//! ephemeral keys, cookie secrets and nonces) comes from the caller's
//! [`Entropy`]. Nothing here panics on any input; parsers check lengths
//! first.
//!
//! How the daemon would drive it:
//! 1. Load the private key, build an [`Identity`]; one [`Responder`] for
//!    the daemon with [`Responder::add_peer`] per connection that has a
//!    `public_key`, and one [`Initiator`] + [`Keyring`] per connection.
//! 2. Dial: [`random_index`], then [`Initiator::initiate`]; send the
//!    datagram.
//! 3. Received type 11: [`Responder::handle_initiation`] with the source
//!    address and whether the handshake queue is under load; send what it
//!    wrote (a response or a cookie reply); on a response,
//!    [`Keyring::install`] the keys in that peer's keyring and route the
//!    new local index to it. On an error count it and stay silent.
//! 4. Received type 12 / 13: [`Initiator::handle_response`] (then
//!    [`Keyring::install`]) / [`Initiator::handle_cookie_reply`].
//! 5. Data: [`Keyring::next_send`] gives keys and the peer's index to
//!    address; a received datagram's `conn_id` picks the keyring and
//!    [`Keyring::open_keys`] the keys ([`Keyring::confirm`] when they were
//!    `Next`).
//! 6. [`Keyring::poll`] at [`Keyring::poll_timeout`]:
//!    [`KeyEvent::Initiate`] means step 2, [`KeyEvent::Retired`] means
//!    drop that index from the routing table.
//!
//! What is not provided: identity hiding for the responder (its key is
//! known to initiators by design), protection of the initiator's identity
//! against an attacker who later steals the responder's static key, and
//! post-quantum security. The header of a handshake message is covered by
//! mac1 but not by the Noise transcript. Wire layouts and the reasoning:
//! `docs/PROTOCOL.md`, "Public-key handshake (Noise IK)".

mod error;
mod handshake;
mod keys;
mod limits;
mod mac;
mod messages;
mod stats;
mod timers;
mod timestamp;

pub use error::NoiseError;
pub use handshake::{
    random_index, seeded_builder, Established, Identity, Initiator, Mac1Check, Outgoing, Reply,
    Responder, ResponderConfig, ANSWER_CHECKS_PER_ATTEMPT, NOISE_PARAMS, PROLOGUE,
};
pub use keys::{PublicKey, StaticSecret, KEY_LEN};
pub use limits::{source_key, HandshakeLimiter, HandshakeLimits};
pub use mac::{Mac16, COOKIE_NONCE_LEN, COOKIE_SECRET_LIFETIME, MAC_LEN};
pub use messages::{
    parse_cookie_reply, parse_initiation, parse_response, CookieReply, Initiation, Response,
    COOKIE_REPLY_BODY_LEN, COOKIE_REPLY_LEN, INDEX_LEN, INITIATION_BODY_LEN, INITIATION_LEN,
    NOISE_INITIATION_LEN, NOISE_RESPONSE_LEN, RESPONSE_BODY_LEN, RESPONSE_LEN, TIMESTAMP_LEN,
};
pub use stats::{HandshakeCounters, RefusedCounters};
pub use timers::{KeyEvent, KeySlot, Keyring, RekeyConfig};
pub use timestamp::Tai64n;

/// The caller's cryptographically secure random source (the daemon: the
/// OS generator). Everything random in a handshake comes from here.
pub trait Entropy {
    /// Fills `out` with random bytes.
    fn fill(&mut self, out: &mut [u8]);
}

#[cfg(test)]
mod tests;
