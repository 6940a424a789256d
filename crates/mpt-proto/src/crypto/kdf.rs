//! Key derivation: HKDF-SHA256 (RFC 5869) from the PSK.
//!
//! * handshake MAC keys, one per message role so that no message can pass
//!   for another: `HKDF(salt = "", IKM = psk, info = label)`, 32 bytes each,
//!   used as HMAC-SHA256 keys, with the labels `"mpt v2 init mac"`,
//!   `"mpt v2 response mac"` and `"mpt v2 challenge mac"`, each followed
//!   by the cipher's binding (`" aes-256-gcm"`, or nothing for
//!   ChaCha20-Poly1305, see [`super::Cipher`]);
//! * session keys: `HKDF(salt = initiator_nonce || responder_nonce,
//!   IKM = psk, info = "mpt v1 session keys")`, 64 bytes: the first 32 are
//!   the initiator-to-responder key, the last 32 the
//!   responder-to-initiator key (of the PSK's cipher).

use ring::hkdf;
use ring::hmac;

use zeroize::{Zeroize, Zeroizing};

use super::Psk;

/// HKDF info of the MAC key of `HandshakeInit` messages.
pub(crate) const INFO_INIT_MAC: &[u8] = b"mpt v2 init mac";
/// HKDF info of the MAC key of `HandshakeResponse` messages.
pub(crate) const INFO_RESPONSE_MAC: &[u8] = b"mpt v2 response mac";
/// HKDF info of the MAC key of `HandshakeChallenge` messages.
pub(crate) const INFO_CHALLENGE_MAC: &[u8] = b"mpt v2 challenge mac";
/// HKDF info of the session keys.
pub(crate) const INFO_SESSION_KEYS: &[u8] = b"mpt v1 session keys";
/// Length of one session key (either cipher).
pub(crate) const KEY_LEN: usize = 32;

/// The cryptographic library refused an operation. With the fixed sizes
/// used here it cannot happen; it is an error rather than a panic because
/// this crate never panics on a reachable path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unspecified;

impl From<ring::error::Unspecified> for Unspecified {
    fn from(_: ring::error::Unspecified) -> Self {
        Unspecified
    }
}

/// An HKDF output length (ring asks for it as a type).
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// The HMAC-SHA256 key that authenticates one kind of handshake message;
/// `label` is one of the `INFO_*_MAC` constants.
pub(crate) fn handshake_mac_key(psk: &Psk, label: &[u8]) -> Result<hmac::Key, Unspecified> {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &[]).extract(psk.as_bytes());
    let mut out = Zeroizing::new([0u8; 32]);
    prk.expand(&[label, psk.cipher().binding()], Len(out.len()))?
        .fill(&mut *out)?;
    Ok(hmac::Key::new(hmac::HMAC_SHA256, &*out))
}

/// Raw key bytes, wiped when dropped.
pub(crate) type KeyBytes = Zeroizing<[u8; KEY_LEN]>;

/// The two directional session keys: `(initiator_to_responder,
/// responder_to_initiator)`, wiped when dropped.
pub(crate) fn session_key_bytes(
    psk: &Psk,
    initiator_nonce: &[u8; 32],
    responder_nonce: &[u8; 32],
) -> Result<(KeyBytes, KeyBytes), Unspecified> {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(initiator_nonce);
    salt[32..].copy_from_slice(responder_nonce);
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &salt).extract(psk.as_bytes());
    let mut okm = Zeroizing::new([0u8; 2 * KEY_LEN]);
    prk.expand(&[INFO_SESSION_KEYS], Len(okm.len()))?
        .fill(&mut *okm)?;
    let mut i2r = Zeroizing::new([0u8; KEY_LEN]);
    let mut r2i = Zeroizing::new([0u8; KEY_LEN]);
    i2r.copy_from_slice(&okm[..KEY_LEN]);
    r2i.copy_from_slice(&okm[KEY_LEN..]);
    okm.zeroize();
    Ok((i2r, r2i))
}
