//! The two ends of a Noise IK handshake, wrapped in our wire format.
//!
//! [`Initiator`] (one per peer the daemon dials) builds initiations and
//! takes responses and cookie replies. [`Responder`] (one per daemon, for
//! all the peers it knows by public key) answers initiations. Both are
//! sans-IO: bytes, the source address, `now` and a wall-clock timestamp
//! come in; bytes and keys go out; every random byte comes from the
//! caller's [`Entropy`], including the Diffie-Hellman ephemeral keys (snow
//! draws them through [`SeededResolver`]).
//!
//! The responder checks an initiation in increasing order of cost, and
//! keeps no state for it until it has passed all the cheap checks:
//!
//! 1. exact length and header ([`parse_initiation`]);
//! 2. mac1, keyed with our public key: one BLAKE2s. A sender that does not
//!    know our public key stops here, before any Diffie-Hellman or snow
//!    state ([`HandshakeCounters::initiations_processed`] does not move);
//! 3. under load only: mac2, keyed with a cookie for the source address;
//!    without one the answer is a cookie reply and nothing else;
//! 4. the rate limits ([`HandshakeLimits`]): a token from the source
//!    address's bucket (IPv4 address, or IPv6 /64, never the port; a
//!    bounded table) and one from the responder-wide bucket, so that a
//!    sender holding a valid cookie and replaying one initiation cannot
//!    make us do Diffie-Hellman at line rate, and the handshake CPU of
//!    the whole daemon stays bounded whatever arrives
//!    ([`NoiseError::SourceLimited`], [`NoiseError::Overloaded`]);
//! 5. the Noise message (two Diffie-Hellman operations), which reveals and
//!    authenticates the initiator's static key;
//! 6. that key must name a configured peer ([`NoiseError::UnknownPeer`]);
//! 7. its timestamp must be above the greatest accepted from that peer
//!    ([`NoiseError::Replay`]), and the peer's previous accepted initiation
//!    at least [`ResponderConfig::min_initiation_interval`] ago
//!    ([`NoiseError::RateLimited`]);
//! 8. then our session index (drawn only now: [`random_index`] costs the
//!    random source and the caller's scan for indexes in use), the
//!    response (one more ephemeral and two Diffie-Hellman operations, the
//!    PSK mixed in) and the keys.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use snow::params::{CipherChoice, DHChoice, HashChoice, NoiseParams};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};

use crate::crypto::Cipher as DataCipher;
use snow::HandshakeState;
use zeroize::{Zeroize, Zeroizing};

use super::keys::{PublicKey, StaticSecret, KEY_LEN};
use super::limits::{HandshakeLimiter, HandshakeLimits};
use super::mac::{self, ct_eq, CookieJar, CookieSecret, MacKeys, COOKIE_NONCE_LEN};
use super::messages::{
    parse_cookie_reply, parse_initiation, parse_response, COOKIE_REPLY_BODY_LEN, COOKIE_REPLY_LEN,
    C_SEALED, INITIATION_LEN, I_MAC1, I_MAC2, I_NOISE, I_SENDER, NOISE_INITIATION_LEN,
    NOISE_RESPONSE_LEN, RESPONSE_LEN, R_MAC1, R_NOISE, R_SENDER, TIMESTAMP_LEN,
};
use super::stats::HandshakeCounters;
use super::timestamp::Tai64n;
use super::{Entropy, NoiseError};
use crate::crypto::{Psk, Role, SessionKeys, PSK_LEN};
use crate::wire::{EncodeError, Flags, Header, MsgType};

/// The Noise protocol name: IK pattern (the initiator knows the
/// responder's static key beforehand and sends its own, encrypted, in the
/// first message), a PSK mixed in at the end of the second message,
/// X25519, ChaCha20-Poly1305, BLAKE2s.
pub const NOISE_PARAMS: &str = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
/// Bound into the handshake hash: a peer running another protocol or
/// version of ours fails the handshake instead of deriving keys. The data
/// cipher's binding follows it (nothing for ChaCha20-Poly1305,
/// `" aes-256-gcm"`), so peers that would seal with different ciphers fail
/// the handshake too.
pub const PROLOGUE: &[u8] = b"mpt noise v1";
/// Where `psk2` sits in snow's PSK slots.
const PSK_SLOT: u8 = 2;
/// The PSK of a connection without `key_file`: 32 zero bytes. Mixing in a
/// known value changes nothing about security; it lets one protocol name
/// serve both cases.
const NO_PSK: [u8; PSK_LEN] = [0; PSK_LEN];

/// The snow resolver we build handshakes with: snow's default primitives
/// (curve25519-dalek, RustCrypto ChaCha20-Poly1305 and BLAKE2s), and as
/// the random source the 32 bytes the caller drew for this handshake's
/// ephemeral key, so that this crate never reads a random source itself.
struct SeededResolver {
    seed: [u8; KEY_LEN],
}

impl Drop for SeededResolver {
    fn drop(&mut self) {
        self.seed.zeroize();
    }
}

/// Hands out the seed once: one ephemeral key per handshake state. Any
/// further request fails rather than repeat the bytes.
struct OneShot {
    seed: [u8; KEY_LEN],
    used: bool,
}

impl Drop for OneShot {
    fn drop(&mut self) {
        self.seed.zeroize();
    }
}

impl Random for OneShot {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        match self.seed.get(..dest.len()) {
            Some(src) if !self.used => {
                dest.copy_from_slice(src);
                self.used = true;
                self.seed.zeroize();
                Ok(())
            }
            _ => Err(snow::Error::Rng),
        }
    }
}

/// A snow builder for `params` whose one random draw (the ephemeral key)
/// is `seed`: for handshakes outside the tunnel's own (the acceleration's
/// direct legs, `mpt_accel::direct`), which bring their own random bytes
/// as this crate's handshakes do.
pub fn seeded_builder<'a>(params: NoiseParams, seed: &[u8; KEY_LEN]) -> snow::Builder<'a> {
    snow::Builder::with_resolver(params, Box::new(SeededResolver { seed: *seed }))
}

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(OneShot {
            seed: self.seed,
            used: false,
        }))
    }
    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }
    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }
    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

/// Our long-term identity: the private key and what derives from it.
///
/// Cloning it (one per [`Initiator`], one for the [`Responder`]) shares
/// the private key: it is held once, behind an `Arc`, and wiped when the
/// last clone goes.
#[derive(Clone)]
pub struct Identity {
    secret: Arc<StaticSecret>,
    public: PublicKey,
    /// mac1 and cookie keys of our own public key: what we check.
    macs: MacKeys,
    params: NoiseParams,
    /// The data cipher of the sessions it makes.
    cipher: DataCipher,
    /// [`PROLOGUE`] and the cipher's binding.
    prologue: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("public", &self.public)
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// The identity of a private key, its sessions sealing with the
    /// default cipher (ChaCha20-Poly1305).
    pub fn new(secret: StaticSecret) -> Result<Identity, NoiseError> {
        let public = secret.public_key();
        let params: NoiseParams = NOISE_PARAMS.parse().map_err(|_| NoiseError::Crypto)?;
        Ok(Identity {
            macs: MacKeys::of(&public),
            secret: Arc::new(secret),
            public,
            params,
            cipher: DataCipher::default(),
            prologue: PROLOGUE.to_vec(),
        })
    }

    /// The same identity, its sessions sealing with `cipher` (which the
    /// handshake binds: a peer using another fails it).
    pub fn with_cipher(mut self, cipher: DataCipher) -> Identity {
        self.cipher = cipher;
        self.prologue = [PROLOGUE, cipher.binding()].concat();
        self
    }

    /// The data cipher of the sessions this identity makes.
    pub fn cipher(&self) -> DataCipher {
        self.cipher
    }

    /// Our public key.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// Whether `other` holds the very same private key allocation (the
    /// key is held once, not copied per clone).
    #[cfg(test)]
    pub(crate) fn shares_secret_with(&self, other: &Identity) -> bool {
        Arc::ptr_eq(&self.secret, &other.secret)
    }

    /// What checks the mac1 of initiations (proof that the sender knows
    /// our public key), without the private key: for the receive side to
    /// drop bogus initiations before they cost the handshake anything.
    pub fn mac1_check(&self) -> Mac1Check {
        Mac1Check {
            key: self.macs.mac1,
        }
    }
}

/// Checks the mac1 of initiations addressed to one public key (see
/// [`Identity::mac1_check`]).
#[derive(Clone)]
pub struct Mac1Check {
    key: [u8; 32],
}

impl std::fmt::Debug for Mac1Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mac1Check").finish_non_exhaustive()
    }
}

impl Mac1Check {
    /// Whether `datagram` is a well-formed initiation whose mac1 was made
    /// for our public key. The responder checks it again (this is a
    /// filter, not the decision).
    pub fn check(&self, datagram: &[u8]) -> bool {
        match parse_initiation(datagram) {
            Ok(m) => ct_eq(&mac::mac(&self.key, &[m.mac1_covered()]), &m.mac1()),
            Err(_) => false,
        }
    }
}

impl Identity {
    /// A snow handshake state with our static key, the prologue, `psk` in
    /// slot 2, the responder's key when we initiate, and `seed` as the
    /// ephemeral key.
    fn handshake(
        &self,
        remote: Option<&PublicKey>,
        psk: &[u8; PSK_LEN],
        seed: &[u8; KEY_LEN],
    ) -> Result<HandshakeState, NoiseError> {
        let resolver = Box::new(SeededResolver { seed: *seed });
        let builder = snow::Builder::with_resolver(self.params.clone(), resolver)
            .local_private_key(self.secret.as_bytes())?
            .prologue(&self.prologue)?
            .psk(PSK_SLOT, psk)?;
        Ok(match remote {
            Some(key) => builder
                .remote_public_key(key.as_bytes())?
                .build_initiator()?,
            None => builder.build_responder()?,
        })
    }
}

/// What a completed handshake gives: the session's keys and its two
/// session indexes.
#[derive(Debug, Clone)]
pub struct Established {
    /// The directional keys, for [`SessionKeys::seal_datagram`] and
    /// [`SessionKeys::open_datagram`] with our explicit-counter nonces.
    pub keys: SessionKeys,
    /// Our session index: the peer addresses datagrams of this session to
    /// it (their header's `conn_id`).
    pub local_index: u32,
    /// The peer's session index: we address our datagrams to it.
    pub remote_index: u32,
    /// Which end we played.
    pub role: Role,
    /// The peer's static public key.
    pub peer: PublicKey,
}

/// How a handshake message goes out: the header fields the caller fills
/// (path id, sequence numbers, send timestamp; type, flags and `conn_id`
/// are set here), the random source, and the buffer.
pub struct Outgoing<'a> {
    /// Header template.
    pub template: Header,
    /// The caller's CSPRNG.
    pub entropy: &'a mut dyn Entropy,
    /// Where the datagram is written.
    pub out: &'a mut [u8],
}

impl Outgoing<'_> {
    /// The first `len` bytes of the buffer, with a header of `msg_type`
    /// addressed to `receiver_index`.
    fn start(
        &mut self,
        msg_type: MsgType,
        receiver_index: u32,
        len: usize,
    ) -> Result<&mut [u8], NoiseError> {
        let have = self.out.len();
        let out = self
            .out
            .get_mut(..len)
            .ok_or(EncodeError::BufferTooSmall { needed: len, have })?;
        Header {
            msg_type,
            flags: Flags::NONE,
            conn_id: receiver_index,
            ..self.template
        }
        .emit(out)?;
        Ok(out)
    }
}

/// Draws a random session index that is not 0 (which means "none") and
/// not `in_use`. `None` after 64 draws that all collided: the index space
/// is not plausibly that full, so the random source is broken.
pub fn random_index(entropy: &mut dyn Entropy, in_use: impl Fn(u32) -> bool) -> Option<u32> {
    (0..64).find_map(|_| {
        let mut b = [0u8; 4];
        entropy.fill(&mut b);
        let i = u32::from_be_bytes(b);
        (i != 0 && !in_use(i)).then_some(i)
    })
}

fn split(
    hs: &mut HandshakeState,
    role: Role,
    cipher: DataCipher,
) -> Result<SessionKeys, NoiseError> {
    if !hs.is_handshake_finished() {
        return Err(NoiseError::Crypto);
    }
    // Noise's Split: the first key protects initiator -> responder.
    let (mut i2r, mut r2i) = hs.dangerously_get_raw_split();
    let keys = SessionKeys::from_raw(&i2r, &r2i, role, cipher).map_err(|_| NoiseError::Crypto);
    i2r.zeroize();
    r2i.zeroize();
    keys
}

/// How many answers (responses and cookie replies) to one initiation get
/// their costly check: a response's two X25519 operations, a cookie
/// reply's XChaCha20-Poly1305 open. Only answers addressed to the
/// attempt's session index and, for a response, with a valid mac1 (made
/// for our public key) count. A genuine responder sends one answer per
/// initiation (one per copy, should a copy go on each path), so 8 leaves
/// room; a flood of forged answers to one attempt costs at most 8 checks,
/// so at most 8 per initiation sent, a rate the caller's retry timers
/// bound (one attempt per few seconds). What a refused answer gets:
/// [`NoiseError::Overloaded`], and the attempt stays pending until the
/// next [`Initiator::initiate`] gives the new attempt a full budget.
pub const ANSWER_CHECKS_PER_ATTEMPT: u8 = 8;

struct Pending {
    hs: HandshakeState,
    local_index: u32,
    mac1: mac::Mac16,
    sent_at: Instant,
    /// Costly answer checks left (see [`ANSWER_CHECKS_PER_ATTEMPT`]).
    checks_left: u8,
}

impl Pending {
    /// Takes one costly check from the attempt's budget.
    fn spend_check(&mut self) -> Result<(), NoiseError> {
        self.checks_left = self
            .checks_left
            .checked_sub(1)
            .ok_or(NoiseError::Overloaded)?;
        Ok(())
    }
}

/// The dialling end of the handshake with one peer (whose public key we
/// know from the configuration).
///
/// Each [`Initiator::initiate`] starts a new attempt and forgets the
/// previous one; a response or cookie reply is taken only for the latest
/// attempt, recognised by the session index it is addressed to.
pub struct Initiator {
    identity: Identity,
    peer: PublicKey,
    /// mac1 and cookie keys of the peer's public key: what we send.
    peer_macs: MacKeys,
    psk: Option<Psk>,
    cookies: CookieJar,
    last_timestamp: Option<Tai64n>,
    pending: Option<Pending>,
    counters: HandshakeCounters,
}

impl std::fmt::Debug for Initiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initiator")
            .field("peer", &self.peer)
            .field("pending_index", &self.pending_index())
            .finish_non_exhaustive()
    }
}

impl Initiator {
    /// An initiator towards `peer`, mixing in the connection's `psk` if it
    /// has one.
    pub fn new(identity: Identity, peer: PublicKey, psk: Option<Psk>) -> Initiator {
        Initiator {
            identity,
            peer_macs: MacKeys::of(&peer),
            peer,
            psk,
            cookies: CookieJar::default(),
            last_timestamp: None,
            pending: None,
            counters: HandshakeCounters::default(),
        }
    }

    /// Builds an initiation into `o.out` and returns its length
    /// ([`INITIATION_LEN`]). `local_index` is our session index for it
    /// (see [`random_index`]); `wall` the wall clock, sent encrypted so the
    /// responder can refuse replays (should the clock not have moved since
    /// the previous initiation, one nanosecond more is sent). mac2 is set
    /// when a cookie from the peer is fresh.
    pub fn initiate(
        &mut self,
        local_index: u32,
        wall: Tai64n,
        now: Instant,
        mut o: Outgoing<'_>,
    ) -> Result<usize, NoiseError> {
        // Wiped on every way out of here.
        let mut seed = Zeroizing::new([0u8; KEY_LEN]);
        o.entropy.fill(&mut *seed);
        // The buffer first: no Diffie-Hellman for a message that cannot go.
        let out = o.start(MsgType::NoiseInitiation, 0, INITIATION_LEN)?;
        let psk = self.psk.as_ref().map_or(&NO_PSK, |p| p.as_bytes());
        let mut hs = self.identity.handshake(Some(&self.peer), psk, &seed)?;
        let timestamp = match self.last_timestamp {
            Some(last) if wall <= last => last.successor(),
            _ => wall,
        };
        out[I_SENDER..I_NOISE].copy_from_slice(&local_index.to_be_bytes());
        let n = hs.write_message(&timestamp.to_bytes(), &mut out[I_NOISE..I_MAC1])?;
        if n != NOISE_INITIATION_LEN {
            return Err(NoiseError::Crypto);
        }
        let mac1 = mac::mac(&self.peer_macs.mac1, &[&out[..I_MAC1]]);
        out[I_MAC1..I_MAC2].copy_from_slice(&mac1);
        let mac2 = match self.cookies.fresh(now) {
            Some(cookie) => mac::mac(cookie, &[&out[..I_MAC2]]),
            None => [0; mac::MAC_LEN],
        };
        out[I_MAC2..].copy_from_slice(&mac2);
        self.last_timestamp = Some(timestamp);
        self.pending = Some(Pending {
            hs,
            local_index,
            mac1,
            sent_at: now,
            checks_left: ANSWER_CHECKS_PER_ATTEMPT,
        });
        self.counters.initiations_sent += 1;
        Ok(INITIATION_LEN)
    }

    /// Takes a response to our latest initiation: checks length, header,
    /// that it is addressed to our pending session index, mac1 (keyed with
    /// our public key) and the Noise message. Gives the session's keys and
    /// forgets the attempt. A refused response leaves the attempt pending,
    /// so a forgery cannot cancel it; the Noise check (two X25519) runs at
    /// most [`ANSWER_CHECKS_PER_ATTEMPT`] times per attempt, so a flood of
    /// forgeries costs bounded CPU.
    pub fn handle_response(&mut self, datagram: &[u8]) -> Result<Established, NoiseError> {
        let result = self.response_inner(datagram);
        match &result {
            Ok(_) => {
                self.counters.responses_received += 1;
                self.counters.completed += 1;
            }
            Err(e) => self.counters.refuse(e),
        }
        result
    }

    fn response_inner(&mut self, datagram: &[u8]) -> Result<Established, NoiseError> {
        let r = parse_response(datagram)?;
        let index = r.receiver_index();
        let p = self
            .pending
            .as_mut()
            .filter(|p| p.local_index == index)
            .ok_or(NoiseError::UnknownIndex { index })?;
        let expected = mac::mac(&self.identity.macs.mac1, &[r.mac1_covered()]);
        if !ct_eq(&expected, &r.mac1()) {
            return Err(NoiseError::Mac1);
        }
        p.spend_check()?;
        let mut payload = [0u8; NOISE_RESPONSE_LEN];
        let n = p.hs.read_message(r.noise(), &mut payload)?;
        if n != 0 {
            return Err(NoiseError::Decrypt);
        }
        let keys = split(&mut p.hs, Role::Initiator, self.identity.cipher)?;
        let local_index = p.local_index;
        self.pending = None;
        Ok(Established {
            keys,
            local_index,
            remote_index: r.sender_index(),
            role: Role::Initiator,
            peer: self.peer,
        })
    }

    /// Takes a cookie reply to our latest initiation and keeps the cookie
    /// for the next ones (mac2). The caller sends the next initiation when
    /// its retry timer says so, not at once: the responder is under load.
    pub fn handle_cookie_reply(&mut self, datagram: &[u8], now: Instant) -> Result<(), NoiseError> {
        let result = (|| {
            let c = parse_cookie_reply(datagram)?;
            let index = c.receiver_index();
            let p = self
                .pending
                .as_mut()
                .filter(|p| p.local_index == index)
                .ok_or(NoiseError::UnknownIndex { index })?;
            p.spend_check()?;
            mac::open_cookie(&self.peer_macs.cookie, &p.mac1, &c.sealed())
                .ok_or(NoiseError::BadCookieReply)
        })();
        match result {
            Ok(cookie) => {
                self.cookies.store(cookie, now);
                self.counters.cookies_received += 1;
                Ok(())
            }
            Err(e) => {
                self.counters.refuse(&e);
                Err(e)
            }
        }
    }

    /// The session index of the attempt in flight, if any.
    pub fn pending_index(&self) -> Option<u32> {
        self.pending.as_ref().map(|p| p.local_index)
    }

    /// When the attempt in flight was sent (for the caller's retry timer).
    pub fn pending_since(&self) -> Option<Instant> {
        self.pending.as_ref().map(|p| p.sent_at)
    }

    /// Forgets the attempt in flight (the caller gave up on it).
    pub fn abandon(&mut self) {
        self.pending = None;
    }

    /// The peer's public key.
    pub fn peer(&self) -> PublicKey {
        self.peer
    }

    /// What this initiator did.
    pub fn counters(&self) -> &HandshakeCounters {
        &self.counters
    }
}

/// The responder's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponderConfig {
    /// Accepted initiations from one peer are at least this far apart
    /// (default 50 ms): a peer, or whoever replays its fresh initiations
    /// from many addresses, cannot make us do more than 20 handshakes a
    /// second for it.
    pub min_initiation_interval: Duration,
    /// How long a cookie secret lives (default
    /// [`mac::COOKIE_SECRET_LIFETIME`], 2 minutes).
    pub cookie_secret_lifetime: Duration,
    /// The token buckets in front of the Diffie-Hellman work.
    pub limits: HandshakeLimits,
}

impl Default for ResponderConfig {
    fn default() -> Self {
        ResponderConfig {
            min_initiation_interval: Duration::from_millis(50),
            cookie_secret_lifetime: mac::COOKIE_SECRET_LIFETIME,
            limits: HandshakeLimits::default(),
        }
    }
}

struct PeerEntry<Id> {
    id: Id,
    psk: Option<Psk>,
    greatest: Option<Tai64n>,
    last_accepted: Option<Instant>,
}

/// How the responder answered an initiation.
#[derive(Debug)]
pub enum Reply<Id> {
    /// Under load and without a valid mac2: a cookie reply of `len` bytes
    /// is in the buffer; send it to the source address. Nothing else
    /// happened.
    CookieReply {
        /// Datagram length ([`COOKIE_REPLY_LEN`]).
        len: usize,
    },
    /// Accepted: a response of `len` bytes is in the buffer, and the keys.
    /// Like the PSK handshake's responder, use the keys for sending only
    /// once a datagram sealed with them has arrived (key confirmation,
    /// which the `Keyring` in `timers.rs` does).
    Response {
        /// Datagram length ([`RESPONSE_LEN`]).
        len: usize,
        /// The connection the initiator's key maps to.
        peer: Id,
        /// Keys and session indexes (boxed: a handshake is rare, and the
        /// cookie-reply variant stays small).
        established: Box<Established>,
    },
}

/// The answering end of the handshake, for every peer known by public key.
///
/// `Id` is the caller's connection id: the responder maps the initiator's
/// static key to it ([`Responder::add_peer`]) and keeps, per peer, the
/// greatest timestamp accepted and when.
pub struct Responder<Id> {
    identity: Identity,
    cfg: ResponderConfig,
    limiter: HandshakeLimiter,
    cookie_secret: CookieSecret,
    peers: HashMap<PublicKey, PeerEntry<Id>>,
    counters: HandshakeCounters,
}

impl<Id> std::fmt::Debug for Responder<Id> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("identity", &self.identity)
            .field("peers", &self.peers.len())
            .finish_non_exhaustive()
    }
}

impl<Id: Copy> Responder<Id> {
    /// A responder for `identity` that knows no peer yet.
    pub fn new(identity: Identity, cfg: ResponderConfig) -> Responder<Id> {
        Responder {
            identity,
            cookie_secret: CookieSecret::new(cfg.cookie_secret_lifetime),
            limiter: HandshakeLimiter::new(cfg.limits),
            cfg,
            peers: HashMap::new(),
            counters: HandshakeCounters::default(),
        }
    }

    /// Maps the peer's public key to the caller's connection `id`, with the
    /// connection's PSK if it has one. Re-adding a key (a reload) keeps its
    /// replay state.
    pub fn add_peer(&mut self, key: PublicKey, id: Id, psk: Option<Psk>) {
        let e = self.peers.entry(key).or_insert(PeerEntry {
            id,
            psk: None,
            greatest: None,
            last_accepted: None,
        });
        e.id = id;
        e.psk = psk;
    }

    /// Forgets a peer; returns its connection id.
    pub fn remove_peer(&mut self, key: &PublicKey) -> Option<Id> {
        self.peers.remove(key).map(|e| e.id)
    }

    /// Answers an initiation from `src` (checks in the order given in the
    /// module docs). `pick_index` gives the session index we take if we
    /// accept (normally [`random_index`] over the indexes in use); it is
    /// called only once every other check has passed, so nothing costly
    /// happens before mac1. `under_load` is the caller's
    /// judgement (e.g. its handshake queue is filling): then only
    /// initiations with a valid mac2 are processed, the others get a cookie
    /// reply. Every refusal is counted and returned; answer none of them.
    pub fn handle_initiation(
        &mut self,
        datagram: &[u8],
        src: SocketAddr,
        pick_index: &mut dyn FnMut(&mut dyn Entropy) -> Option<u32>,
        now: Instant,
        under_load: bool,
        o: Outgoing<'_>,
    ) -> Result<Reply<Id>, NoiseError> {
        let result = self.initiation_inner(datagram, src, pick_index, now, under_load, o);
        if let Err(e) = &result {
            self.counters.refuse(e);
        }
        result
    }

    fn initiation_inner(
        &mut self,
        datagram: &[u8],
        src: SocketAddr,
        pick_index: &mut dyn FnMut(&mut dyn Entropy) -> Option<u32>,
        now: Instant,
        under_load: bool,
        mut o: Outgoing<'_>,
    ) -> Result<Reply<Id>, NoiseError> {
        let m = parse_initiation(datagram)?;
        let expected = mac::mac(&self.identity.macs.mac1, &[m.mac1_covered()]);
        if !ct_eq(&expected, &m.mac1()) {
            return Err(NoiseError::Mac1);
        }
        if under_load
            && !self
                .cookie_secret
                .check_mac2(&src, now, &[m.mac2_covered()], &m.mac2())
        {
            if m.mac2() != [0; mac::MAC_LEN] {
                self.counters.refused.stale_mac2 += 1;
            }
            let cookie = self.cookie_secret.issue(&src, now, &mut *o.entropy);
            let mut nonce = [0u8; COOKIE_NONCE_LEN];
            o.entropy.fill(&mut nonce);
            let mut sealed = [0u8; COOKIE_REPLY_BODY_LEN];
            if !mac::seal_cookie(
                &self.identity.macs.cookie,
                &nonce,
                &m.mac1(),
                &cookie,
                &mut sealed,
            ) {
                return Err(NoiseError::Crypto);
            }
            let out = o.start(
                MsgType::NoiseCookieReply,
                m.sender_index(),
                COOKIE_REPLY_LEN,
            )?;
            out[C_SEALED..].copy_from_slice(&sealed);
            self.counters.cookies_sent += 1;
            return Ok(Reply::CookieReply {
                len: COOKIE_REPLY_LEN,
            });
        }
        // After the cookie (under load the address is proven): the rate
        // limits, before any Diffie-Hellman.
        self.limiter.admit(&src, now)?;
        // No Diffie-Hellman for an answer that would not fit.
        if o.out.len() < RESPONSE_LEN {
            return Err(EncodeError::BufferTooSmall {
                needed: RESPONSE_LEN,
                have: o.out.len(),
            }
            .into());
        }
        self.counters.initiations_processed += 1;
        let mut seed = Zeroizing::new([0u8; KEY_LEN]);
        o.entropy.fill(&mut *seed);
        // The PSK is needed only for the response (psk2): the initiation
        // tells us who the peer is, hence which PSK.
        let mut hs = self.identity.handshake(None, &NO_PSK, &seed)?;
        let mut payload = [0u8; NOISE_INITIATION_LEN];
        let n = hs.read_message(m.noise(), &mut payload)?;
        let Some(timestamp) = payload
            .get(..n)
            .and_then(|p| <[u8; TIMESTAMP_LEN]>::try_from(p).ok())
        else {
            return Err(NoiseError::Decrypt);
        };
        let timestamp = Tai64n::from_bytes(timestamp);
        let mut key = [0u8; KEY_LEN];
        match hs.get_remote_static() {
            Some(k) if k.len() == KEY_LEN => key.copy_from_slice(k),
            _ => return Err(NoiseError::Decrypt),
        }
        let peer_key = PublicKey::from_bytes(key);
        let entry = self
            .peers
            .get_mut(&peer_key)
            .ok_or(NoiseError::UnknownPeer)?;
        if entry.greatest.is_some_and(|g| timestamp <= g) {
            return Err(NoiseError::Replay);
        }
        if entry
            .last_accepted
            .is_some_and(|t| now.saturating_duration_since(t) < self.cfg.min_initiation_interval)
        {
            return Err(NoiseError::RateLimited);
        }
        let local_index = pick_index(&mut *o.entropy).ok_or(NoiseError::Crypto)?;
        let psk = entry.psk.as_ref().map_or(&NO_PSK, |p| p.as_bytes());
        hs.set_psk(usize::from(PSK_SLOT), psk)?;
        let peer_macs = MacKeys::of(&peer_key);
        let out = o.start(MsgType::NoiseResponse, m.sender_index(), RESPONSE_LEN)?;
        out[R_SENDER..R_NOISE].copy_from_slice(&local_index.to_be_bytes());
        let n = hs.write_message(&[], &mut out[R_NOISE..R_MAC1])?;
        if n != NOISE_RESPONSE_LEN {
            return Err(NoiseError::Crypto);
        }
        let mac1 = mac::mac(&peer_macs.mac1, &[&out[..R_MAC1]]);
        out[R_MAC1..].copy_from_slice(&mac1);
        let keys = split(&mut hs, Role::Responder, self.identity.cipher)?;
        entry.greatest = Some(timestamp);
        entry.last_accepted = Some(now);
        self.counters.responses_sent += 1;
        self.counters.completed += 1;
        Ok(Reply::Response {
            len: RESPONSE_LEN,
            peer: entry.id,
            established: Box::new(Established {
                keys,
                local_index,
                remote_index: m.sender_index(),
                role: Role::Responder,
                peer: peer_key,
            }),
        })
    }

    /// Our public key.
    pub fn public_key(&self) -> PublicKey {
        self.identity.public_key()
    }

    /// Takes a token for a handshake message other than an initiation
    /// (the daemon: a Noise response under load, whose check costs two
    /// X25519 too) from `src`'s bucket and the global one; a refusal is
    /// counted.
    pub fn admit(&mut self, src: &SocketAddr, now: Instant) -> Result<(), NoiseError> {
        let r = self.limiter.admit(src, now);
        if let Err(e) = &r {
            self.counters.refuse(e);
        }
        r
    }

    /// Source addresses the limiter tracks (bounded by
    /// [`HandshakeLimits::source_table`]).
    pub fn limited_sources(&self) -> usize {
        self.limiter.sources()
    }

    /// What this responder did.
    pub fn counters(&self) -> &HandshakeCounters {
        &self.counters
    }
}
