//! Driving the key exchange of one connection.
//!
//! The protocol messages and key derivation live in `mpt_proto::crypto`
//! (sans-IO); this wrapper adds what needs the operating system — fresh
//! random nonces and a wall-clock timestamp that only ever increases — and
//! the policy:
//!
//! * **When to initiate.** A side with no session keys, or whose paths are
//!   all down (the peer may have restarted and lost its keys), sends an Init
//!   on one path that has a known remote address, rotating over such paths,
//!   at most once per retry interval.
//! * **Both sides initiating at once.** Each side then holds an Init of its
//!   own and receives the other's. The Init with the larger timestamp wins:
//!   its receiver answers it and drops its own attempt; the other side
//!   ignores the losing Init and waits for the answer to its own. Both end
//!   up with the keys of the same handshake.
//! * **Rate limiting.** Inits are answered at most [`INITS_PER_SECOND`] per
//!   second per connection (burst [`INIT_BURST`]); an answer is never larger
//!   than the Init, so the daemon cannot be used to amplify traffic.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mpt_proto::crypto::{
    HandshakeError, Initiator, Psk, RateLimiter, Responder, SessionKeys, NONCE_LEN,
};
use mpt_proto::wire::Header;
use ring::rand::{SecureRandom, SystemRandom};

/// Inits answered per second per connection.
pub const INITS_PER_SECOND: u32 = 10;
/// Burst of Inits answered at once.
pub const INIT_BURST: u32 = 5;

/// What to do about a received Init.
#[derive(Debug)]
pub enum InitOutcome {
    /// Send the reply (`len` bytes of the reply buffer) and use the keys.
    Respond {
        /// The new session keys (boxed: they are large next to the other
        /// outcomes).
        keys: Box<SessionKeys>,
        /// Length of the reply datagram.
        len: usize,
    },
    /// Our own concurrent Init wins; ignore theirs.
    OursWins,
    /// Over the rate limit; dropped.
    RateLimited,
    /// Refused.
    Refused(HandshakeError),
}

/// Key-exchange state of one connection.
pub struct KeyExchange {
    psk: Psk,
    responder: Responder,
    initiator: Option<Initiator>,
    next_attempt: Option<Instant>,
    retry: Duration,
    attempts: usize,
    last_timestamp: u64,
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

impl KeyExchange {
    /// Key exchange for connection `conn_id`; retries every `keepalive`
    /// (kept within 200 ms..2 s).
    pub fn new(
        psk: &Psk,
        conn_id: u32,
        keepalive: Duration,
    ) -> Result<KeyExchange, HandshakeError> {
        Ok(KeyExchange {
            psk: psk.clone(),
            responder: Responder::new(psk, conn_id)?,
            initiator: None,
            next_attempt: None,
            retry: keepalive.clamp(Duration::from_millis(200), Duration::from_secs(2)),
            attempts: 0,
            last_timestamp: 0,
            limiter: RateLimiter::new(INITS_PER_SECOND, INIT_BURST),
            rng: SystemRandom::new(),
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

    fn nonce(&self) -> Result<[u8; NONCE_LEN], HandshakeError> {
        let mut n = [0u8; NONCE_LEN];
        // The system CSPRNG failing is not recoverable in any useful way;
        // report it as a refused handshake (counted) rather than panic.
        self.rng.fill(&mut n).map_err(|_| HandshakeError::Auth)?;
        Ok(n)
    }

    /// Writes a new Init into `buf` (header fields from `header`) and
    /// returns its length.
    pub fn start(&mut self, header: &Header, buf: &mut [u8]) -> Result<usize, HandshakeError> {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let timestamp = wall.max(self.last_timestamp + 1);
        self.last_timestamp = timestamp;
        let nonce = self.nonce()?;
        let (initiator, len) = Initiator::start(&self.psk, header, nonce, timestamp, buf)?;
        self.initiator = Some(initiator);
        Ok(len)
    }

    /// Takes in an Init; on success the reply is in `reply`.
    pub fn on_init(
        &mut self,
        datagram: &[u8],
        now: Instant,
        reply_header: &Header,
        reply: &mut [u8],
    ) -> InitOutcome {
        if !self.limiter.allow(now) {
            return InitOutcome::RateLimited;
        }
        let nonce = match self.nonce() {
            Ok(n) => n,
            Err(e) => return InitOutcome::Refused(e),
        };
        match self
            .responder
            .handle_init(datagram, nonce, reply_header, reply)
        {
            Ok((keys, len)) => {
                let theirs = self.responder.last_timestamp();
                if let Some(mine) = &self.initiator {
                    if mine.timestamp() > theirs {
                        return InitOutcome::OursWins;
                    }
                }
                self.initiator = None;
                self.next_attempt = None;
                InitOutcome::Respond {
                    keys: Box::new(keys),
                    len,
                }
            }
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
}
