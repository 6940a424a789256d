//! Driving the public-key handshake (Noise IK, `mpt_proto::noise`) for the
//! connections that have a `public_key` (with `[daemon] private_key_file`).
//!
//! The protocol logic is sans-IO in `mpt_proto::noise`; this module adds
//! what needs the operating system (the OS random generator, the wall
//! clock) and the policy:
//!
//! * **One responder per daemon** ([`NoiseDaemon`]): it knows every
//!   configured peer by its static key, so it finds the connection from
//!   the handshake itself. An authentic key that no connection lists gets
//!   no answer and is counted (`unknown_peer`). While connections still
//!   have their own sockets, an initiation must also arrive on a socket of
//!   the connection its key names (else `wrong_connection`).
//! * **Under load** (more than [`LOAD_INITIATIONS_PER_SECOND`] initiations
//!   reached the control loop within the last second, i.e. its handshake
//!   input is filling), only initiations with a valid mac2 are processed;
//!   the others get a cookie reply.
//! * **One initiator per connection** ([`NoiseConn`]), with the timers:
//!   without keys it initiates every keepalive (200 ms to 2 s) for
//!   [`RekeyConfig::rekey_attempt_time`], then again when traffic waits;
//!   with keys, the initiator of the current keys rekeys when they are
//!   [`RekeyConfig::rekey_after_time`] old (the responder
//!   [`RekeyConfig::responder_rekey_delay`] later) or sealed
//!   [`RekeyConfig::rekey_after_messages`] datagrams, repeating every
//!   [`RekeyConfig::rekey_retry`]; and when all paths are down (the peer
//!   may have lost its keys) it initiates as without keys.
//! * **Hard limits**: keys older than [`RekeyConfig::reject_after_time`] or
//!   that sealed [`RekeyConfig::reject_after_messages`] datagrams are
//!   dropped; nothing seals or opens with them again.
//! * **Both sides initiating at once**: the side with the greater public
//!   key keeps its attempt and ignores the other's initiation while its
//!   own is in flight; the other answers and abandons its own. Both end
//!   with the keys of one handshake (two crossed handshakes would leave
//!   each side sealing with keys the other only keeps for its grace
//!   period).
//! * **Keys** go into the connection's [`ConnCrypto`] exactly as the PSK
//!   handshake's do (initiator: current at once; responder: pending until
//!   a datagram under them opens; replaced keys open for the grace
//!   period), with their session indexes: the header's connection id of
//!   every datagram is the receiver's index ([`ConnCrypto::sealing`],
//!   [`ConnCrypto::knows_index`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mpt_proto::crypto::{Psk, Role};
use mpt_proto::noise::{
    random_index, Entropy, Established, HandshakeCounters, HandshakeLimits, Identity, Initiator,
    NoiseError, Outgoing, PublicKey, Reply, Responder, ResponderConfig, Tai64n,
};
use mpt_proto::wire::Header;
use ring::rand::{SecureRandom, SystemRandom};

use crate::plane::NoiseIds;
use crate::plane::{ConnCrypto, Counter};
use crate::sync::lock_unpoisoned;

/// Initiations per second (daemon-wide) above which the responder counts
/// as under load and answers initiations without a valid mac2 with a
/// cookie reply.
pub const LOAD_INITIATIONS_PER_SECOND: u32 = 64;

/// How long our own initiation counts as in flight for the tie-break
/// when both sides initiate at once.
const IN_FLIGHT: Duration = Duration::from_secs(2);

/// The OS random generator as the handshake's entropy. `fill` cannot
/// fail, so a failure of the OS generator is remembered and the caller
/// throws away whatever was built with it ([`OsEntropy::take_failure`]).
#[derive(Debug)]
pub struct OsEntropy {
    rng: SystemRandom,
    failed: bool,
}

impl Default for OsEntropy {
    fn default() -> Self {
        OsEntropy {
            rng: SystemRandom::new(),
            failed: false,
        }
    }
}

impl Entropy for OsEntropy {
    fn fill(&mut self, out: &mut [u8]) {
        if self.rng.fill(out).is_err() {
            self.failed = true;
        }
    }
}

impl OsEntropy {
    /// Whether the generator failed since the last call.
    pub fn take_failure(&mut self) -> bool {
        std::mem::take(&mut self.failed)
    }
}

/// The wall clock as a TAI64N timestamp.
pub fn wall_clock() -> Tai64n {
    Tai64n::from_unix(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

/// Initiations seen per one-second window: the responder's judgement of
/// load.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoadGauge {
    window: Option<Instant>,
    count: u32,
}

impl LoadGauge {
    /// Counts one initiation at `now`; returns whether the responder is
    /// under load (more than `limit` in the current second).
    pub fn note(&mut self, now: Instant, limit: u32) -> bool {
        match self.window {
            Some(start) if now.saturating_duration_since(start) < Duration::from_secs(1) => {
                self.count = self.count.saturating_add(1);
            }
            _ => {
                self.window = Some(now);
                self.count = 1;
            }
        }
        self.count > limit
    }

    /// Whether the current second already saw more than `limit`
    /// initiations (without counting one).
    pub fn loaded(&self, now: Instant, limit: u32) -> bool {
        self.window
            .is_some_and(|start| now.saturating_duration_since(start) < Duration::from_secs(1))
            && self.count > limit
    }
}

/// Daemon-wide counters of the public-key handshake, for the status.
#[derive(Debug, Default)]
pub struct NoiseDaemonStats {
    /// The responder's counters (all peers), as last published: what it
    /// processed, answered, and refused by reason (`mac1`, `decrypt`,
    /// `unknown_peer`, `replay`, ...).
    pub responder: Mutex<HandshakeCounters>,
    /// Refusals the protocol module does not count.
    pub refusals: DaemonRefusals,
}

/// Daemon-wide refusals that the protocol module does not count.
#[derive(Debug, Default)]
pub struct DaemonRefusals {
    /// Authentic initiations whose key names another connection than the
    /// one whose socket received them.
    pub wrong_connection: Counter,
    /// Initiations ignored because our own, to the same peer, was in flight
    /// and wins the tie-break.
    pub lost_race: Counter,
    /// The OS random generator failed.
    pub entropy: Counter,
}

/// The daemon's side of the public-key handshake: the responder for every
/// configured peer, the random source, the load gauge, and counters the
/// status shows.
pub struct NoiseDaemon {
    identity: Identity,
    responder: Responder<usize>,
    /// The random source of every handshake.
    pub rng: OsEntropy,
    load: LoadGauge,
    /// Counters, shared with the status.
    pub stats: Arc<NoiseDaemonStats>,
}

impl std::fmt::Debug for NoiseDaemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoiseDaemon")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// What to do with a received initiation.
#[derive(Debug)]
pub enum InitiationOutcome {
    /// Send the first `len` bytes of the buffer back to the source (a
    /// cookie reply).
    Cookie {
        /// Datagram length.
        len: usize,
    },
    /// Send the response (`len` bytes) and hold the keys as pending for
    /// connection `conn`.
    Respond {
        /// Datagram length.
        len: usize,
        /// The connection (index) the initiator's key names.
        conn: usize,
        /// The handshake's result.
        established: Box<Established>,
    },
    /// Refused (already counted); answer nothing.
    Refused(NoiseError),
}

impl NoiseDaemon {
    /// The responder for `identity`, knowing no peer yet.
    pub fn new(identity: Identity) -> NoiseDaemon {
        NoiseDaemon::with_limits(identity, HandshakeLimits::default())
    }

    /// The responder for `identity` with the token buckets of `limits`
    /// (`[daemon] handshake_*`).
    pub fn with_limits(identity: Identity, limits: HandshakeLimits) -> NoiseDaemon {
        let cfg = ResponderConfig {
            limits,
            ..ResponderConfig::default()
        };
        NoiseDaemon {
            responder: Responder::new(identity.clone(), cfg),
            identity,
            rng: OsEntropy::default(),
            load: LoadGauge::default(),
            stats: Arc::new(NoiseDaemonStats::default()),
        }
    }

    /// Our identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Lets connection `conn` be reached by the peer key `key` (with the
    /// connection's PSK, if any).
    pub fn add_peer(&mut self, key: PublicKey, conn: usize, psk: Option<Psk>) {
        self.responder.add_peer(key, conn, psk);
    }

    /// Forgets the peer key `key` (a client connection removed by a
    /// reload): its initiations are refused as from an unknown peer.
    pub fn remove_peer(&mut self, key: &PublicKey) {
        let _conn = self.responder.remove_peer(key);
    }

    /// Answers an initiation from `src`; `in_use` tells which session
    /// indexes are taken (ours is drawn only if every check passes); the
    /// reply is built into `out` with the header fields of `template`.
    pub fn on_initiation(
        &mut self,
        datagram: &[u8],
        src: SocketAddr,
        in_use: &dyn Fn(u32) -> bool,
        now: Instant,
        template: Header,
        out: &mut [u8],
    ) -> InitiationOutcome {
        let under_load = self.load.note(now, LOAD_INITIATIONS_PER_SECOND);
        let o = Outgoing {
            template,
            entropy: &mut self.rng,
            out,
        };
        let mut pick = |rng: &mut dyn Entropy| random_index(rng, in_use);
        let result = self
            .responder
            .handle_initiation(datagram, src, &mut pick, now, under_load, o);
        let outcome = if self.rng.take_failure() {
            self.stats.refusals.entropy.add(1);
            InitiationOutcome::Refused(NoiseError::Crypto)
        } else {
            match result {
                Ok(Reply::CookieReply { len }) => InitiationOutcome::Cookie { len },
                Ok(Reply::Response {
                    len,
                    peer,
                    established,
                }) => InitiationOutcome::Respond {
                    len,
                    conn: peer,
                    established,
                },
                Err(e) => InitiationOutcome::Refused(e),
            }
        };
        self.publish();
        outcome
    }

    /// Whether a Noise response from `src` may be checked (two X25519):
    /// under load it takes a token from the same buckets as initiations;
    /// a refusal is counted (`source_limited`, `overloaded`).
    pub fn admit_response(&mut self, src: Option<SocketAddr>, now: Instant) -> bool {
        if !self.load.loaded(now, LOAD_INITIATIONS_PER_SECOND) {
            return true;
        }
        let Some(src) = src else { return true };
        let ok = self.responder.admit(&src, now).is_ok();
        self.publish();
        ok
    }

    /// Copies the responder's counters where the status reads them.
    pub fn publish(&self) {
        let mut g = lock_unpoisoned(&self.stats.responder);
        *g = *self.responder.counters();
    }
}

/// The timers of one connection's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoiseTiming {
    /// Rekey thresholds and hard limits.
    pub rekey: mpt_proto::noise::RekeyConfig,
    /// Interval between attempts while the connection has no keys, or all
    /// its paths are down.
    pub first_retry: Duration,
    /// Replaced keys keep opening this long after the peer was seen on the
    /// new ones.
    pub grace: Duration,
    /// How old keys must be before all paths being down makes us initiate
    /// (the paths of a fresh session need a dead timer to come up).
    pub settle: Duration,
}

impl NoiseTiming {
    /// The protocol's timers, with attempts without keys every `keepalive`
    /// (kept within 200 ms..2 s) and, if given, `rekey_after` instead of
    /// 120 s (for tests; the other limits scale with it).
    pub fn new(keepalive: Duration, rekey_after: Option<Duration>) -> NoiseTiming {
        let mut rekey = mpt_proto::noise::RekeyConfig::default();
        if let Some(after) = rekey_after {
            rekey.rekey_after_time = after;
            rekey.responder_rekey_delay = rekey.responder_rekey_delay.min(after / 4);
            rekey.reject_after_time = after + after / 2;
            rekey.rekey_retry = rekey.rekey_retry.min(after / 4);
            rekey.previous_grace = rekey.previous_grace.min(after / 2);
        }
        NoiseTiming {
            grace: rekey.previous_grace,
            settle: rekey.rekey_retry,
            rekey,
            first_retry: keepalive.clamp(Duration::from_millis(200), Duration::from_secs(2)),
        }
    }

    /// All paths down counts once keys are `dead_timer` old (the longest
    /// the paths of a fresh session take to come up).
    pub fn with_settle(mut self, dead_timer: Duration) -> NoiseTiming {
        self.settle = dead_timer;
        self
    }
}

/// What the policy sees of a connection at one moment.
#[derive(Debug, Clone, Copy)]
pub struct KeyState {
    /// The current keys' indexes and age, if any.
    pub current: Option<NoiseIds>,
    /// Datagrams sealed under them (the sequence counter's advance).
    pub sent: u64,
    /// Unconfirmed keys of a handshake we answered.
    pub pending: Option<NoiseIds>,
    /// All paths are down (and have been given a dead timer to come up).
    pub all_down: bool,
    /// Traffic is waiting for keys (tun packets dropped for want of them).
    pub traffic_waiting: bool,
}

/// When to initiate: the policy of one connection, on its own so that it
/// can be tested in virtual time.
#[derive(Debug, Clone)]
pub struct RekeyPolicy {
    timing: NoiseTiming,
    last_attempt: Option<Instant>,
    wanting_since: Option<Instant>,
}

impl RekeyPolicy {
    /// A policy that has not initiated yet.
    pub fn new(timing: NoiseTiming) -> RekeyPolicy {
        RekeyPolicy {
            timing,
            last_attempt: None,
            wanting_since: None,
        }
    }

    /// Whether to send an initiation now.
    pub fn should_initiate(&mut self, s: KeyState, now: Instant) -> bool {
        let cfg = &self.timing.rekey;
        // Keys we answered wait for the initiator's first datagram: a
        // handshake of our own now would cross it.
        if s.pending
            .is_some_and(|p| now.saturating_duration_since(p.born) < cfg.rekey_retry)
        {
            return false;
        }
        let (due, retry) = match s.current {
            None => {
                let since = *self.wanting_since.get_or_insert(now);
                if now.saturating_duration_since(since) >= cfg.rekey_attempt_time {
                    if !s.traffic_waiting {
                        return false;
                    }
                    self.wanting_since = Some(now);
                }
                (true, self.timing.first_retry)
            }
            Some(c) => {
                self.wanting_since = None;
                let after = match c.role {
                    Role::Initiator => cfg.rekey_after_time,
                    Role::Responder => cfg.rekey_after_time + cfg.responder_rekey_delay,
                };
                let old = now.saturating_duration_since(c.born) >= after
                    || s.sent >= cfg.rekey_after_messages;
                if s.all_down {
                    (true, self.timing.first_retry)
                } else {
                    (old, cfg.rekey_retry)
                }
            }
        };
        if !due
            || self
                .last_attempt
                .is_some_and(|t| now.saturating_duration_since(t) < retry)
        {
            return false;
        }
        self.last_attempt = Some(now);
        true
    }

    /// A handshake completed: the next attempt is timed afresh.
    pub fn completed(&mut self) {
        self.last_attempt = None;
        self.wanting_since = None;
    }
}

/// Per-connection counters of the public-key handshake, beside the
/// initiator's own.
#[derive(Debug, Default, Clone, Copy)]
pub struct ConnNoiseStats {
    /// Initiations from this connection's peer that we answered.
    pub responses_sent: u64,
    /// Cookie replies sent on this connection's sockets.
    pub cookies_sent: u64,
    /// Key pairs given up at a hard limit.
    pub expired: u64,
}

/// One connection's public-key handshake.
pub struct NoiseConn {
    initiator: Initiator,
    policy: RekeyPolicy,
    timing: NoiseTiming,
    /// Our key is greater than the peer's: our attempt wins a tie.
    wins_ties: bool,
    /// `drops.no_session` as last seen (traffic waiting for keys).
    no_session_seen: u64,
    /// Counters kept here.
    pub stats: ConnNoiseStats,
}

impl std::fmt::Debug for NoiseConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoiseConn")
            .field("peer", &self.initiator.peer())
            .finish_non_exhaustive()
    }
}

impl NoiseConn {
    /// The handshake with the peer `peer` (with the connection's PSK, if
    /// any).
    pub fn new(
        identity: Identity,
        peer: PublicKey,
        psk: Option<Psk>,
        timing: NoiseTiming,
    ) -> NoiseConn {
        let wins_ties = identity.public_key() > peer;
        NoiseConn {
            initiator: Initiator::new(identity, peer, psk),
            policy: RekeyPolicy::new(timing),
            timing,
            wins_ties,
            no_session_seen: 0,
            stats: ConnNoiseStats::default(),
        }
    }

    /// The timers.
    pub fn timing(&self) -> &NoiseTiming {
        &self.timing
    }

    /// The initiator's counters.
    pub fn counters(&self) -> &HandshakeCounters {
        self.initiator.counters()
    }

    /// Applies the hard limits to `crypto`'s keys and decides whether to
    /// initiate now. `seq` is the connection's sequence counter,
    /// `no_session` its count of tun packets dropped for want of keys.
    pub fn poll(
        &mut self,
        crypto: &ConnCrypto,
        seq: u64,
        no_session: u64,
        all_down: bool,
        now: Instant,
    ) -> bool {
        let cfg = self.timing.rekey;
        crypto.expire(now);
        self.stats.expired += crypto.drop_older(cfg.reject_after_time, now) as u64;
        let mut current = crypto.current_ids();
        let sent = current.map_or(0, |c| seq.saturating_sub(c.seq0));
        if let Some(c) = current {
            let age = now.saturating_duration_since(c.born);
            if (age >= cfg.reject_after_time || sent >= cfg.reject_after_messages)
                && crypto.drop_current()
            {
                self.stats.expired += 1;
                current = None;
                tracing::info!(
                    age_s = age.as_secs(),
                    sent,
                    "session keys reached their hard limit; dropped"
                );
            }
        }
        let traffic_waiting = no_session > self.no_session_seen;
        self.no_session_seen = no_session;
        let state = KeyState {
            current,
            sent,
            pending: crypto.pending_ids(),
            all_down: all_down
                && current
                    .is_some_and(|c| now.saturating_duration_since(c.born) >= self.timing.settle),
            traffic_waiting,
        };
        self.policy.should_initiate(state, now)
    }

    /// Builds an initiation (into `out`, header fields from `template`)
    /// with a fresh session index not in use (`in_use`), and notes it as
    /// the handshake in flight. Returns its length.
    pub fn initiate(
        &mut self,
        crypto: &ConnCrypto,
        rng: &mut OsEntropy,
        in_use: impl Fn(u32) -> bool,
        template: Header,
        out: &mut [u8],
        now: Instant,
    ) -> Result<usize, NoiseError> {
        let index = random_index(rng, in_use).ok_or(NoiseError::Crypto)?;
        let o = Outgoing {
            template,
            entropy: rng,
            out,
        };
        let len = self.initiator.initiate(index, wall_clock(), now, o)?;
        if rng.take_failure() {
            self.initiator.abandon();
            crypto.set_handshake_index(0);
            return Err(NoiseError::Crypto);
        }
        crypto.set_handshake_index(index);
        Ok(len)
    }

    /// Takes a response to our initiation: the keys become current at
    /// once (the response proves the peer has them).
    pub fn on_response(
        &mut self,
        crypto: &ConnCrypto,
        datagram: &[u8],
        seq: u64,
        now: Instant,
    ) -> Result<NoiseIds, NoiseError> {
        let e = self.initiator.handle_response(datagram)?;
        let ids = NoiseIds::of(&e, now, seq);
        crypto.install_current(e.keys, Some(ids), now);
        crypto.set_handshake_index(0);
        self.policy.completed();
        Ok(ids)
    }

    /// Takes a cookie reply to our initiation (the next one carries mac2).
    pub fn on_cookie_reply(&mut self, datagram: &[u8], now: Instant) -> Result<(), NoiseError> {
        self.initiator.handle_cookie_reply(datagram, now)
    }

    /// Whether to answer the peer's initiation, given our own attempt: if
    /// ours is in flight and wins the tie-break, theirs is ignored; if
    /// theirs wins, ours is abandoned.
    pub fn take_their_initiation(&mut self, crypto: &ConnCrypto, now: Instant) -> bool {
        let in_flight = self
            .initiator
            .pending_since()
            .is_some_and(|t| now.saturating_duration_since(t) < IN_FLIGHT);
        if in_flight && self.wins_ties {
            return false;
        }
        if self.initiator.pending_index().is_some() {
            self.initiator.abandon();
            crypto.set_handshake_index(0);
        }
        true
    }

    /// Copies this connection's counters where the status reads them
    /// (`crypto.noise_counters`): the initiator's, what we answered for
    /// this peer, rekeys and expiries.
    pub fn publish(&self, crypto: &ConnCrypto) {
        let mut c = *self.initiator.counters();
        c.responses_sent += self.stats.responses_sent;
        c.initiations_processed += self.stats.responses_sent;
        c.cookies_sent += self.stats.cookies_sent;
        c.completed = crypto.handshakes.get();
        c.rekeys = crypto.rekeys.get();
        c.expired += self.stats.expired;
        let mut g = lock_unpoisoned(&crypto.noise_counters);
        *g = c;
    }

    /// Holds the keys of an initiation we answered as pending.
    pub fn responded(&mut self, crypto: &ConnCrypto, e: Established, seq: u64, now: Instant) {
        let ids = NoiseIds::of(&e, now, seq);
        crypto.install_pending(e.keys, Some(ids), now);
        self.stats.responses_sent += 1;
        self.policy.completed();
    }
}

#[cfg(test)]
pub(crate) mod tests;
