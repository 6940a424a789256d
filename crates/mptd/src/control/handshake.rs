//! Driving the key exchange of one connection.
//!
//! The protocol messages and key derivation live in `mpt_proto::crypto`
//! (sans-IO); this wrapper adds what needs the operating system — fresh
//! random nonces, cookies and the instance id, and a wall-clock timestamp
//! that only ever increases — and the policy:
//!
//! * **Instance id.** Drawn once per connection when the daemon starts and
//!   sent in every handshake message. A message carrying our own id is one
//!   of ours sent back to us (reflection) and is refused
//!   (`handshake_reflected`).
//! * **When to initiate.** A side with no session keys, or whose paths are
//!   all down (the peer may have restarted and lost its keys), sends an Init
//!   on one path that has a known remote address, rotating over such paths,
//!   at most once per retry interval.
//! * **Freshness.** The wall clock only decides whether the responder can
//!   answer at once. After our own restart, for a replay, or for a peer
//!   whose clock is behind, the responder sends a Challenge; an authentic
//!   Challenge to our pending Init is answered at once with a new Init
//!   carrying its cookie. So a restart costs one extra round trip, a
//!   replayed Init gets nothing, and no clock has to be right.
//! * **Both sides initiating at once.** Each side then holds an Init of its
//!   own and receives the other's. The Init with the larger timestamp (then
//!   instance id) wins: its receiver answers it and drops its own attempt;
//!   the other side ignores the losing Init and waits for the answer to its
//!   own. An Init carrying a cookie we handed out always wins: we already
//!   chose it. Both end up with the keys of the same handshake.
//! * **Rate limiting, after authentication.** Every received handshake
//!   message is verified first (length, type, connection, MAC, instance
//!   id, cookie); a forgery is dropped and counted (`auth`) without
//!   touching any limiter, so junk — however much of it — never keeps a
//!   genuine Init out. Only then does an authentic message take a token
//!   from its source address's bucket ([`SOURCE_PER_SECOND`], burst
//!   [`SOURCE_BURST`], a table of at most [`SOURCE_TABLE`] addresses; keyed
//!   by the address, not the port, which a replayer rotates at will) and,
//!   only if it is fresh (it would get keys, not a Challenge), from the
//!   connection's ([`INITS_PER_SECOND`], burst [`INIT_BURST`]). A stale or
//!   replayed Init thus earns a Challenge at the cost of its own source's
//!   bucket and never spends the connection's budget: after a restart the
//!   genuine peer gets in whatever a replayer sends. (The Challenge's
//!   cookie slots are kept one per initiator instance, so a replayer
//!   cannot churn them either: `mpt_proto::crypto::handshake`.) Answers are never larger than the Init, so
//!   the daemon cannot be used to amplify traffic.
//! * **Key confirmation** is done by the caller (`ConnCrypto`): the keys of
//!   an answered Init are only pending until the peer seals something with
//!   them.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mpt_proto::crypto::{
    Answer, Cookie, HandshakeError, Initiator, InstanceId, Psk, RateLimiter, Responder,
    SessionKeys, SourceLimiter, COOKIE_LEN, INSTANCE_LEN, NONCE_LEN,
};
use mpt_proto::wire::Header;
use ring::rand::{SecureRandom, SystemRandom};

/// Handshake answers per second per connection.
pub const INITS_PER_SECOND: u32 = 10;
/// Burst of handshake answers per connection.
pub const INIT_BURST: u32 = 5;
/// Handshake answers per second per source address.
pub const SOURCE_PER_SECOND: u32 = 5;
/// Burst of handshake answers per source address.
pub const SOURCE_BURST: u32 = 3;
/// Source addresses tracked per connection (least recently used evicted).
pub const SOURCE_TABLE: usize = 256;

/// What to do about a received Init.
#[derive(Debug)]
pub enum InitOutcome {
    /// Send the Response (`len` bytes of the reply buffer); hold the keys
    /// as pending until the peer uses them.
    Respond {
        /// The new session keys (boxed: they are large next to the other
        /// outcomes).
        keys: Box<SessionKeys>,
        /// Length of the reply datagram.
        len: usize,
    },
    /// Send the Challenge (`len` bytes of the reply buffer): the Init was
    /// not provably fresh.
    Challenge {
        /// Length of the reply datagram.
        len: usize,
    },
    /// Our own concurrent Init wins; ignore theirs.
    OursWins,
    /// Authentic, but over the rate limit; dropped.
    RateLimited,
    /// Refused.
    Refused(HandshakeError),
}

/// What to do about a received Challenge.
#[derive(Debug)]
pub enum ChallengeOutcome {
    /// Send the new Init (with the cookie), `len` bytes of the buffer.
    Retry {
        /// Length of the Init.
        len: usize,
    },
    /// Authentic, but over the rate limit; dropped.
    RateLimited,
    /// Refused.
    Refused(HandshakeError),
}

/// Key-exchange state of one connection.
pub struct KeyExchange {
    psk: Psk,
    instance: InstanceId,
    responder: Responder,
    initiator: Option<Initiator>,
    next_attempt: Option<Instant>,
    retry: Duration,
    attempts: usize,
    last_timestamp: u64,
    sources: SourceLimiter<IpAddr>,
    limiter: RateLimiter,
    rng: SystemRandom,
}

impl std::fmt::Debug for KeyExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyExchange")
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

fn random<const N: usize>(rng: &SystemRandom) -> Result<[u8; N], HandshakeError> {
    let mut n = [0u8; N];
    // The system CSPRNG failing is not recoverable in any useful way;
    // report it as a failed handshake (counted) rather than panic.
    rng.fill(&mut n).map_err(|_| HandshakeError::Crypto)?;
    Ok(n)
}

impl KeyExchange {
    /// Key exchange for connection `conn_id`; retries every `keepalive`
    /// (kept within 200 ms..2 s). Draws the instance id.
    pub fn new(
        psk: &Psk,
        conn_id: u32,
        keepalive: Duration,
    ) -> Result<KeyExchange, HandshakeError> {
        let rng = SystemRandom::new();
        let instance: InstanceId = random::<INSTANCE_LEN>(&rng)?;
        Ok(KeyExchange {
            psk: psk.clone(),
            instance,
            responder: Responder::new(psk, conn_id, instance)?,
            initiator: None,
            next_attempt: None,
            retry: keepalive.clamp(Duration::from_millis(200), Duration::from_secs(2)),
            attempts: 0,
            last_timestamp: 0,
            sources: SourceLimiter::new(SOURCE_PER_SECOND, SOURCE_BURST, SOURCE_TABLE),
            limiter: RateLimiter::new(INITS_PER_SECOND, INIT_BURST),
            rng,
        })
    }

    /// Whether to send an Init now, given that one is wanted. Returns the
    /// attempt number (for rotating over paths).
    pub fn poll_initiate(&mut self, want: bool, now: Instant) -> Option<usize> {
        if !want {
            self.next_attempt = None;
            return None;
        }
        if self.next_attempt.is_some_and(|t| now < t) {
            return None;
        }
        self.next_attempt = Some(now + self.retry);
        self.attempts += 1;
        Some(self.attempts)
    }

    /// Holds off new attempts until `until`: a fresh session needs a
    /// moment for its paths to come up before their silence means anything.
    pub fn settle(&mut self, until: Instant) {
        self.next_attempt = Some(until);
    }

    /// When the next attempt may go out, if one is pending.
    pub fn next_attempt(&self) -> Option<Instant> {
        self.next_attempt
    }

    /// Writes a new Init into `buf` (header fields from `header`) and
    /// returns its length.
    pub fn start(&mut self, header: &Header, buf: &mut [u8]) -> Result<usize, HandshakeError> {
        self.start_with(header, None, buf)
    }

    fn start_with(
        &mut self,
        header: &Header,
        cookie: Option<Cookie>,
        buf: &mut [u8],
    ) -> Result<usize, HandshakeError> {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let timestamp = wall.max(self.last_timestamp + 1);
        self.last_timestamp = timestamp;
        let nonce = random::<NONCE_LEN>(&self.rng)?;
        let (initiator, len) = Initiator::start(
            &self.psk,
            self.instance,
            header,
            nonce,
            timestamp,
            cookie,
            buf,
        )?;
        self.initiator = Some(initiator);
        Ok(len)
    }

    /// Takes a token from `from`'s address's bucket and, if `costly`
    /// (keys would be made), the connection's. Only for authenticated
    /// messages.
    fn allow(&mut self, from: Option<SocketAddr>, costly: bool, now: Instant) -> bool {
        if let Some(from) = from {
            if !self.sources.allow(mpt_proto::noise::source_key(&from), now) {
                return false;
            }
        }
        !costly || self.limiter.allow(now)
    }

    /// Takes in an Init from `from`; on success the reply is in `reply`.
    pub fn on_init(
        &mut self,
        datagram: &[u8],
        from: Option<SocketAddr>,
        now: Instant,
        reply_header: &Header,
        reply: &mut [u8],
    ) -> InitOutcome {
        // Authenticate before anything costs a token.
        let init = match self.responder.verify_init(datagram, now) {
            Ok(v) => v,
            Err(e) => return InitOutcome::Refused(e),
        };
        // A stale Init earns a Challenge (no keys, a cheap answer no
        // larger than it) without spending the connection's budget.
        if !self.allow(from, init.fresh, now) {
            return InitOutcome::RateLimited;
        }
        if !init.has_cookie {
            if let Some(mine) = &self.initiator {
                if (mine.timestamp(), self.instance) > (init.timestamp, init.instance) {
                    return InitOutcome::OursWins;
                }
            }
        }
        let (nonce, cookie) = match (
            random::<NONCE_LEN>(&self.rng),
            random::<COOKIE_LEN>(&self.rng),
        ) {
            (Ok(n), Ok(c)) => (n, c),
            (Err(e), _) | (_, Err(e)) => return InitOutcome::Refused(e),
        };
        match self
            .responder
            .answer(&init, nonce, cookie, now, reply_header, reply)
        {
            Ok(Answer::Response { keys, len }) => {
                // Theirs won: our own attempt is void.
                self.initiator = None;
                self.next_attempt = None;
                InitOutcome::Respond { keys, len }
            }
            // Our own attempt (if any) stays: a Challenge may have gone to
            // a replay, which must not cancel a genuine handshake.
            Ok(Answer::Challenge { len }) => InitOutcome::Challenge { len },
            Err(e) => InitOutcome::Refused(e),
        }
    }

    /// Takes in a Response to our Init.
    pub fn on_response(&mut self, datagram: &[u8]) -> Result<SessionKeys, HandshakeError> {
        let Some(initiator) = &self.initiator else {
            return Err(HandshakeError::UnexpectedResponse);
        };
        let keys = initiator.handle_response(datagram)?;
        self.initiator = None;
        self.next_attempt = None;
        Ok(keys)
    }

    /// Takes in a Challenge to our Init from `from`; on success a new Init
    /// with the cookie is in `buf` (header fields from `header`).
    pub fn on_challenge(
        &mut self,
        datagram: &[u8],
        from: Option<SocketAddr>,
        now: Instant,
        header: &Header,
        buf: &mut [u8],
    ) -> ChallengeOutcome {
        let Some(initiator) = &self.initiator else {
            return ChallengeOutcome::Refused(HandshakeError::UnexpectedResponse);
        };
        let cookie = match initiator.handle_challenge(datagram) {
            Ok(c) => c,
            Err(e) => return ChallengeOutcome::Refused(e),
        };
        if !self.allow(from, true, now) {
            return ChallengeOutcome::RateLimited;
        }
        match self.start_with(header, Some(cookie), buf) {
            Ok(len) => ChallengeOutcome::Retry { len },
            Err(e) => ChallengeOutcome::Refused(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plane::{ConnCrypto, OLD_KEYS_GRACE, OLD_KEYS_MAX};
    use mpt_proto::crypto::{CHALLENGE_LEN, INIT_LEN, RESPONSE_LEN};
    use mpt_proto::wire::{Flags, MsgType};
    use std::sync::Arc;

    const CONN: u32 = 7;

    fn psk() -> Psk {
        Psk::from_bytes([0x42; 32])
    }

    fn header() -> Header {
        Header {
            msg_type: MsgType::HandshakeInit,
            flags: Flags::NONE,
            path_id: 0,
            conn_id: CONN,
            seq: 1,
            path_seq: 1,
            timestamp_us: 0,
        }
    }

    fn exchange() -> KeyExchange {
        KeyExchange::new(&psk(), CONN, Duration::from_secs(1)).unwrap()
    }

    /// Source `n`: its own address (the limiter keys by address).
    fn addr(n: u16) -> Option<SocketAddr> {
        Some(SocketAddr::from(([10, 0, (n >> 8) as u8, n as u8], 4000)))
    }

    /// A genuine Init from `x`.
    fn init(x: &mut KeyExchange) -> [u8; INIT_LEN] {
        let mut buf = [0u8; INIT_LEN];
        x.start(&header(), &mut buf).unwrap();
        buf
    }

    /// Runs `a`'s Init through `b` (with the cookie round if needed);
    /// returns whether `a` got keys.
    fn handshake(a: &mut KeyExchange, b: &mut KeyExchange, from: u16, now: Instant) -> bool {
        keys(a, b, from, now).is_some()
    }

    /// Runs `a`'s Init through `b`; returns (a's keys, b's keys).
    fn keys(
        a: &mut KeyExchange,
        b: &mut KeyExchange,
        from: u16,
        now: Instant,
    ) -> Option<(SessionKeys, SessionKeys)> {
        let mut out = [0u8; 128];
        let i = init(a);
        let mut init_buf = i;
        for _ in 0..2 {
            match b.on_init(&init_buf, addr(from), now, &header(), &mut out) {
                InitOutcome::Respond { len, keys } => {
                    assert_eq!(len, RESPONSE_LEN);
                    return a.on_response(&out[..len]).ok().map(|k| (k, *keys));
                }
                InitOutcome::Challenge { len } => {
                    assert_eq!(len, CHALLENGE_LEN);
                    let mut next = [0u8; INIT_LEN];
                    match a.on_challenge(&out[..len], addr(from), now, &header(), &mut next) {
                        ChallengeOutcome::Retry { len } => assert_eq!(len, INIT_LEN),
                        other => panic!("{other:?}"),
                    }
                    init_buf = next;
                }
                _ => return None,
            }
        }
        None
    }

    #[test]
    fn junk_never_spends_a_token() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let mut a = exchange();
        let mut b = exchange();
        let mut out = [0u8; 128];
        // Thousands of forged Inits of the right length, type and
        // connection, at the same instant, from one source and from many.
        let mut junk = init(&mut exchange());
        for k in 0..5000u32 {
            junk[40..44].copy_from_slice(&k.to_be_bytes());
            let from = if k % 2 == 0 { addr(9) } else { addr(k as u16) };
            match b.on_init(&junk, from, now, &header(), &mut out) {
                InitOutcome::Refused(HandshakeError::Auth) => {}
                other => panic!("junk Init {k}: {other:?}"),
            }
        }
        // The genuine Init, from the flooded source too, gets in at once.
        assert!(handshake(&mut a, &mut b, 9, now));
    }

    #[test]
    fn a_replaying_source_does_not_keep_others_out() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let mut a = exchange();
        let mut b = exchange();
        let mut out = [0u8; 128];
        // A captured authentic Init, replayed over and over from one
        // source: it earns a few Challenges, then is rate limited.
        let captured = init(&mut exchange());
        let (mut challenged, mut limited) = (0, 0);
        for _ in 0..1000 {
            match b.on_init(&captured, addr(6666), now, &header(), &mut out) {
                InitOutcome::Challenge { .. } => challenged += 1,
                InitOutcome::RateLimited => limited += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(challenged, SOURCE_BURST);
        assert_eq!(limited, 1000 - SOURCE_BURST);
        // Another source still gets through, at the same instant.
        assert!(handshake(&mut a, &mut b, 5000, now));
        // And the replaying source's bucket refills with time.
        let later = now + Duration::from_secs(1);
        assert!(matches!(
            b.on_init(&captured, addr(6666), later, &header(), &mut out),
            InitOutcome::Challenge { .. }
        ));
    }

    /// After a restart (a fresh responder) a stale Init replayed from one
    /// address on many ports earns Challenges from that address's bucket
    /// alone: the connection's budget stays whole and the genuine peer,
    /// restarted too, gets in at once.
    #[test]
    fn a_stale_init_from_rotating_ports_does_not_spend_the_connections_budget() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let mut old_a = exchange();
        let captured = init(&mut old_a);
        let mut b = exchange();
        let mut out = [0u8; 128];
        let (mut challenged, mut limited) = (0u32, 0u32);
        for port in 0..2000u16 {
            let from = Some(SocketAddr::from(([192, 0, 2, 66], 1024 + port)));
            match b.on_init(&captured, from, now, &header(), &mut out) {
                InitOutcome::Challenge { .. } => challenged += 1,
                InitOutcome::RateLimited => limited += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(challenged, SOURCE_BURST, "one bucket for all ports");
        assert_eq!(limited, 2000 - SOURCE_BURST);
        // Fresh-looking Inits from many addresses would spend it; stale
        // ones from many addresses do not.
        for n in 0..(INIT_BURST * 4) as u16 {
            assert!(matches!(
                b.on_init(&captured, addr(300 + n), now, &header(), &mut out),
                InitOutcome::Challenge { .. }
            ));
        }
        let mut a = exchange();
        assert!(
            handshake(&mut a, &mut b, 5, now),
            "the genuine peer gets in"
        );
    }

    #[test]
    fn own_init_reflected_is_refused() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let mut a = exchange();
        let mine = init(&mut a);
        let mut out = [0u8; 128];
        assert!(matches!(
            a.on_init(&mine, addr(1), now, &header(), &mut out),
            InitOutcome::Refused(HandshakeError::Reflected)
        ));
    }

    #[test]
    fn simultaneous_inits_end_in_one_handshake() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let mut a = exchange();
        let mut b = exchange();
        let mut out = [0u8; 128];
        let from_a = init(&mut a);
        let from_b = init(&mut b); // later: larger timestamp
        assert!(matches!(
            b.on_init(&from_a, addr(1), now, &header(), &mut out),
            InitOutcome::OursWins
        ));
        // A answers B's (with a Challenge: A never accepted one before).
        let InitOutcome::Challenge { len } = a.on_init(&from_b, addr(2), now, &header(), &mut out)
        else {
            panic!("expected a challenge");
        };
        let mut next = [0u8; INIT_LEN];
        assert!(matches!(
            b.on_challenge(&out[..len], addr(2), now, &header(), &mut next),
            ChallengeOutcome::Retry { .. }
        ));
        // A's own attempt survived the Challenge, but B's cookie wins.
        let InitOutcome::Respond { len, .. } = a.on_init(&next, addr(2), now, &header(), &mut out)
        else {
            panic!("expected a response");
        };
        assert!(b.on_response(&out[..len]).is_ok());
    }

    /// Seals a probe-sized datagram with `k` and whether `c`'s key sets
    /// (tried as the receive worker does: current, pending, previous) open
    /// it; returns which one did.
    fn opened_by(c: &ConnCrypto, k: &SessionKeys, seq: u64) -> Option<&'static str> {
        let mut buf = [0u8; 24 + 8 + 16];
        Header {
            msg_type: MsgType::Probe,
            flags: Flags::SEALED,
            seq,
            ..header()
        }
        .emit(&mut buf)
        .unwrap();
        let n = k.seal_datagram(&mut buf, 8).unwrap();
        let set = c.key_set();
        for (name, keys) in [
            ("current", set.current),
            ("pending", set.pending),
            ("previous", set.previous),
        ] {
            let mut d = buf;
            if keys.is_some_and(|keys| keys.open_datagram(&mut d[..n]).is_ok()) {
                return Some(name);
            }
        }
        None
    }

    #[test]
    fn responder_keys_wait_for_confirmation() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let (mut a, mut b) = (exchange(), exchange());
        let c = ConnCrypto::new(psk());
        // First handshake: B answers, holds the keys as pending, uses none.
        let (ia, rb) = keys(&mut a, &mut b, 1, now).unwrap();
        c.set_pending(rb, now);
        assert!(c.keys().is_none(), "pending keys must not seal");
        assert_eq!(c.handshakes.get(), 0);
        assert_eq!(opened_by(&c, &ia, 1), Some("pending"));
        // The first datagram under them confirms them.
        let pending = c.key_set().pending.unwrap();
        assert!(c.confirm(&pending, now));
        assert!(!c.confirm(&pending, now), "confirmed twice");
        assert_eq!(c.handshakes.get(), 1);
        assert_eq!(opened_by(&c, &ia, 2), Some("current"));

        // A second handshake: the old keys still seal until the new ones
        // are confirmed, then open stragglers for a grace period.
        let (ia2, rb2) = keys(&mut a, &mut b, 2, now).unwrap();
        c.set_pending(rb2, now);
        assert!(Arc::ptr_eq(&c.keys().unwrap(), &pending));
        assert_eq!(opened_by(&c, &ia, 3), Some("current"));
        assert_eq!(opened_by(&c, &ia2, 1), Some("pending"));
        let t = now + Duration::from_millis(10);
        assert!(c.confirm(&c.key_set().pending.unwrap(), t));
        assert_eq!(c.handshakes.get(), 2);
        assert_eq!(opened_by(&c, &ia2, 2), Some("current"));
        assert_eq!(opened_by(&c, &ia, 4), Some("previous"));
        c.expire(t + OLD_KEYS_GRACE - Duration::from_millis(1));
        assert_eq!(opened_by(&c, &ia, 5), Some("previous"));
        c.expire(t + OLD_KEYS_GRACE);
        assert_eq!(opened_by(&c, &ia, 6), None);

        // Pending keys never confirmed (a replayed Init) are given up.
        let (_, rb3) = keys(&mut a, &mut b, 3, now).unwrap();
        c.set_pending(rb3, now);
        c.expire(now + OLD_KEYS_MAX);
        assert!(c.key_set().pending.is_none());
        assert_eq!(c.handshakes.get(), 2);
    }

    #[test]
    fn initiator_keeps_old_keys_until_the_peer_switches() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let (mut a, mut b) = (exchange(), exchange());
        let c = ConnCrypto::new(psk());
        let (ia, rb) = keys(&mut a, &mut b, 1, now).unwrap();
        c.switch(ia, now);
        assert_eq!(c.handshakes.get(), 1);
        let (ia2, rb2) = keys(&mut a, &mut b, 2, now).unwrap();
        c.switch(ia2, now);
        // The peer still seals with the old keys: they open, however long
        // it takes (within the limit)...
        let late = now + Duration::from_secs(10);
        c.expire(late);
        assert_eq!(opened_by(&c, &rb, 1), Some("previous"));
        // ...until it is seen on the new ones, then for the grace period.
        let current = c.keys().unwrap();
        assert_eq!(opened_by(&c, &rb2, 1), Some("current"));
        c.peer_uses(&current, late);
        c.expire(late + OLD_KEYS_GRACE - Duration::from_millis(1));
        assert_eq!(opened_by(&c, &rb, 2), Some("previous"));
        c.expire(late + OLD_KEYS_GRACE);
        assert_eq!(opened_by(&c, &rb, 3), None);
        assert_eq!(c.handshakes.get(), 2);
    }
}
