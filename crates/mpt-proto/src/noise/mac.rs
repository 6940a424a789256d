//! mac1, mac2 and cookies: the cheap, stateless checks in front of the
//! Noise handshake (the design WireGuard uses, in our own code).
//!
//! * **mac1** = keyed BLAKE2s-128 over the message up to mac1, keyed with
//!   `BLAKE2s-256("mpt noise mac1 v1" || receiver's static public key)`.
//!   Only who knows the receiver's public key can compute it, so a
//!   responder drops anything from a scanner with one hash, before any
//!   Diffie-Hellman or handshake state.
//! * **cookie** = keyed BLAKE2s-128 over the sender's source address
//!   (IP octets || port), keyed with a random secret the responder
//!   replaces every [`COOKIE_SECRET_LIFETIME`]. It proves that the sender
//!   receives datagrams at that address.
//! * **mac2** = keyed BLAKE2s-128 over the message up to mac2 (mac1
//!   included), keyed with the cookie. A responder under load processes
//!   only initiations with a valid mac2, and answers the others with a
//!   Cookie Reply: the cookie sealed with XChaCha20-Poly1305 under
//!   `BLAKE2s-256("mpt noise cookie v1" || responder's public key)`, a
//!   random 24-byte nonce and the initiation's mac1 as associated data (so
//!   the reply is bound to that one initiation and only its sender, who
//!   knows the responder's key, can read it).
//!
//! BLAKE2s is the hash of our Noise protocol too; the MACs are truncated
//! to 16 bytes, which forgery resistance needs, not collision resistance.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use blake2::digest::consts::U16;
use blake2::digest::{FixedOutput, KeyInit, Mac};
use blake2::{Blake2s256, Blake2sMac, Digest};
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use super::keys::PublicKey;
use super::Entropy;

/// Length of mac1, mac2 and a cookie.
pub const MAC_LEN: usize = 16;
/// Length of the Cookie Reply's random nonce (XChaCha20-Poly1305).
pub const COOKIE_NONCE_LEN: usize = 24;
/// Length of the Poly1305 tag on the sealed cookie.
pub(crate) const COOKIE_TAG_LEN: usize = 16;
/// How long a responder's cookie secret lives; a cookie made with it is
/// valid that long at most, and an initiator uses a cookie no longer than
/// this after receiving it.
pub const COOKIE_SECRET_LIFETIME: Duration = Duration::from_secs(120);

const LABEL_MAC1: &[u8] = b"mpt noise mac1 v1";
const LABEL_COOKIE: &[u8] = b"mpt noise cookie v1";

/// A 16-byte MAC or cookie.
pub type Mac16 = [u8; MAC_LEN];

/// BLAKE2s-256(label || key): the MAC and cookie-sealing keys of a static
/// public key.
fn derive(label: &[u8], key: &PublicKey) -> [u8; 32] {
    let mut h = Blake2s256::new();
    Digest::update(&mut h, label);
    Digest::update(&mut h, key.as_bytes());
    h.finalize().into()
}

/// Keyed BLAKE2s-128 over the concatenation of `parts`.
pub(crate) fn mac(key: &[u8], parts: &[&[u8]]) -> Mac16 {
    // Keys here are 16 or 32 bytes; BLAKE2s takes up to 32, so this never
    // fails. Should it, the all-zero MAC it returns verifies nothing the
    // sender computed properly.
    let Ok(mut m) = <Blake2sMac<U16> as KeyInit>::new_from_slice(key) else {
        return [0; MAC_LEN];
    };
    for p in parts {
        Mac::update(&mut m, p);
    }
    m.finalize_fixed().into()
}

/// Compares in time independent of where the inputs differ.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The mac1 and cookie-sealing keys of one static public key: ours (to
/// check what we receive) or a peer's (to compute what we send).
#[derive(Clone)]
pub(crate) struct MacKeys {
    pub(crate) mac1: [u8; 32],
    pub(crate) cookie: [u8; 32],
}

impl MacKeys {
    pub(crate) fn of(key: &PublicKey) -> MacKeys {
        MacKeys {
            mac1: derive(LABEL_MAC1, key),
            cookie: derive(LABEL_COOKIE, key),
        }
    }
}

/// IP octets || port (big-endian): what a cookie vouches for.
fn address_bytes(src: &SocketAddr, out: &mut [u8; 18]) -> usize {
    let n = match src.ip() {
        IpAddr::V4(a) => {
            out[..4].copy_from_slice(&a.octets());
            4
        }
        IpAddr::V6(a) => {
            out[..16].copy_from_slice(&a.octets());
            16
        }
    };
    out[n..n + 2].copy_from_slice(&src.port().to_be_bytes());
    n + 2
}

/// Seals `cookie` for the initiator: `out` receives
/// `nonce (24) || ciphertext (16) || tag (16)`.
pub(crate) fn seal_cookie(
    cookie_key: &[u8; 32],
    nonce: &[u8; COOKIE_NONCE_LEN],
    initiation_mac1: &Mac16,
    cookie: &Mac16,
    out: &mut [u8; COOKIE_NONCE_LEN + MAC_LEN + COOKIE_TAG_LEN],
) -> bool {
    let aead = XChaCha20Poly1305::new(cookie_key.into());
    let (n, rest) = out.split_at_mut(COOKIE_NONCE_LEN);
    n.copy_from_slice(nonce);
    let (ct, tag_out) = rest.split_at_mut(MAC_LEN);
    ct.copy_from_slice(cookie);
    match aead.encrypt_in_place_detached(XNonce::from_slice(nonce), initiation_mac1, ct) {
        Ok(tag) => {
            tag_out.copy_from_slice(&tag);
            true
        }
        Err(_) => false,
    }
}

/// Opens a sealed cookie (`nonce || ciphertext || tag`).
pub(crate) fn open_cookie(
    cookie_key: &[u8; 32],
    initiation_mac1: &Mac16,
    sealed: &[u8; COOKIE_NONCE_LEN + MAC_LEN + COOKIE_TAG_LEN],
) -> Option<Mac16> {
    let aead = XChaCha20Poly1305::new(cookie_key.into());
    let (nonce, rest) = sealed.split_at(COOKIE_NONCE_LEN);
    let (ct, tag) = rest.split_at(MAC_LEN);
    let mut cookie = [0u8; MAC_LEN];
    cookie.copy_from_slice(ct);
    aead.decrypt_in_place_detached(
        XNonce::from_slice(nonce),
        initiation_mac1,
        &mut cookie,
        tag.into(),
    )
    .ok()
    .map(|()| cookie)
}

/// The responder's rotating cookie secret.
pub(crate) struct CookieSecret {
    secret: [u8; 32],
    born: Option<Instant>,
    lifetime: Duration,
}

impl Drop for CookieSecret {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.secret);
    }
}

impl CookieSecret {
    pub(crate) fn new(lifetime: Duration) -> CookieSecret {
        CookieSecret {
            secret: [0; 32],
            born: None,
            lifetime,
        }
    }

    /// The cookie for `src` under the current secret, if it is still
    /// alive (no cookie is valid before the first one was handed out).
    fn current(&self, src: &SocketAddr, now: Instant) -> Option<Mac16> {
        let born = self.born?;
        if now.saturating_duration_since(born) >= self.lifetime {
            return None;
        }
        let mut a = [0u8; 18];
        let n = address_bytes(src, &mut a);
        Some(mac(&self.secret, &[&a[..n]]))
    }

    /// The cookie to hand out to `src`, drawing a new secret first if the
    /// current one has expired.
    pub(crate) fn issue(
        &mut self,
        src: &SocketAddr,
        now: Instant,
        entropy: &mut dyn Entropy,
    ) -> Mac16 {
        if let Some(c) = self.current(src, now) {
            return c;
        }
        entropy.fill(&mut self.secret);
        self.born = Some(now);
        let mut a = [0u8; 18];
        let n = address_bytes(src, &mut a);
        mac(&self.secret, &[&a[..n]])
    }

    /// Whether `mac2` was computed over `covered` with the cookie `src`
    /// would get now.
    pub(crate) fn check_mac2(
        &self,
        src: &SocketAddr,
        now: Instant,
        covered: &[&[u8]],
        mac2: &[u8],
    ) -> bool {
        self.current(src, now)
            .is_some_and(|cookie| ct_eq(&mac(&cookie, covered), mac2))
    }
}

/// The initiator's last cookie from its responder.
#[derive(Clone, Default)]
pub(crate) struct CookieJar {
    cookie: Option<(Mac16, Instant)>,
}

impl CookieJar {
    pub(crate) fn store(&mut self, cookie: Mac16, now: Instant) {
        self.cookie = Some((cookie, now));
    }

    /// The cookie, while younger than [`COOKIE_SECRET_LIFETIME`].
    pub(crate) fn fresh(&self, now: Instant) -> Option<&Mac16> {
        self.cookie
            .as_ref()
            .filter(|(_, at)| now.saturating_duration_since(*at) < COOKIE_SECRET_LIFETIME)
            .map(|(c, _)| c)
    }
}
