//! X25519 identities: a long-term private key ([`StaticSecret`]) and the
//! public key peers configure ([`PublicKey`]).
//!
//! The public key is derived with snow's own Curve25519 implementation (its
//! default resolver, i.e. curve25519-dalek), so the key we print with
//! `mpt pubkey` is exactly the one the handshake will present. A private
//! key is any 32 bytes: X25519 clamps the scalar, so there is no invalid
//! private key, and generating one is just drawing 32 bytes from a CSPRNG
//! (the caller's; this crate reads no random source).

use snow::params::DHChoice;
use snow::resolvers::{CryptoResolver, DefaultResolver};
use zeroize::Zeroize;

/// Length of an X25519 private or public key.
pub const KEY_LEN: usize = 32;

/// A long-term X25519 private key.
///
/// `Debug` never shows it, and there is no `PartialEq`: a secret is used,
/// never compared. Nor is there `Clone`: the key is held once (an
/// [`super::Identity`] shares it behind an `Arc`), and its bytes are wiped
/// when it is dropped.
pub struct StaticSecret([u8; KEY_LEN]);

impl Drop for StaticSecret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl zeroize::ZeroizeOnDrop for StaticSecret {}

impl StaticSecret {
    /// The key from its 32 raw bytes (e.g. 32 bytes from the OS CSPRNG, or
    /// a key file's contents).
    pub const fn from_bytes(bytes: [u8; KEY_LEN]) -> StaticSecret {
        StaticSecret(bytes)
    }

    /// The raw bytes, for writing the key file and for snow.
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// The public key that goes with this private key.
    pub fn public_key(&self) -> PublicKey {
        let mut out = [0u8; KEY_LEN];
        // The default resolver always has Curve25519 with the
        // `use-curve25519` feature we build snow with; were it missing, the
        // all-zero key returned here is refused as a peer key everywhere
        // (see `PublicKey::is_zero`).
        if let Some(mut dh) = DefaultResolver.resolve_dh(&DHChoice::Curve25519) {
            dh.set(&self.0);
            if let Some(src) = dh.pubkey().get(..KEY_LEN) {
                out.copy_from_slice(src);
            }
        }
        PublicKey(out)
    }
}

impl std::fmt::Debug for StaticSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StaticSecret(<redacted>)")
    }
}

/// An X25519 public key: how a peer is named in the configuration and
/// recognised in a handshake.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey([u8; KEY_LEN]);

impl PublicKey {
    /// The key from its 32 raw bytes.
    pub const fn from_bytes(bytes: [u8; KEY_LEN]) -> PublicKey {
        PublicKey(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// Whether all bytes are zero: never a real peer's key (it is the
    /// identity point, whose Diffie-Hellman output is zero for everyone).
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Enough to tell keys apart in logs without printing a whole key.
        write!(
            f,
            "PublicKey({:02x}{:02x}{:02x}{:02x}…)",
            self.0[0], self.0[1], self.0[2], self.0[3]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7748 section 6.1: Alice's private key and public key.
    #[test]
    fn rfc7748_public_key() {
        let private = hex32("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let public = hex32("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
        assert_eq!(
            StaticSecret::from_bytes(private).public_key(),
            PublicKey::from_bytes(public)
        );
    }

    #[test]
    fn debug_hides_the_secret() {
        let s = StaticSecret::from_bytes([0xa5; KEY_LEN]);
        assert_eq!(format!("{s:?}"), "StaticSecret(<redacted>)");
        assert!(!s.public_key().is_zero());
        assert!(PublicKey::from_bytes([0; KEY_LEN]).is_zero());
    }

    fn hex32(s: &str) -> [u8; KEY_LEN] {
        let mut out = [0u8; KEY_LEN];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }
}
