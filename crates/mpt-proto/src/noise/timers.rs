//! Key rotation for one session: when to start a new handshake, which
//! keys seal, which open, and when old keys go.
//!
//! A small sans-IO state machine driven like the rest of the crate:
//! [`Keyring::install`] a handshake's result, [`Keyring::next_send`] for
//! each datagram sealed, [`Keyring::open_keys`] and [`Keyring::confirm`]
//! for each received, and [`Keyring::poll`] at [`Keyring::poll_timeout`]
//! for what to do ([`KeyEvent`]). Thresholds are a [`RekeyConfig`], so
//! tests run them in small numbers and virtual time.
//!
//! Three slots:
//! * **current** seals and opens;
//! * **next**: keys the responder got and the initiator has not yet used.
//!   They open, but seal nothing until a datagram opened under them
//!   ([`Keyring::confirm`]), so a replayed or unanswered initiation never
//!   makes us seal with keys the peer lacks. Then they become current;
//! * **previous**: the keys current replaced, kept for opening for
//!   [`RekeyConfig::previous_grace`], so datagrams sealed before the
//!   switch and still in flight are not lost.
//!
//! Rekeying: the side that initiated the current keys starts a new
//! handshake when they are [`RekeyConfig::rekey_after_time`] old; the
//! responder waits [`RekeyConfig::responder_rekey_delay`] longer, so the
//! two rarely start at once; either side does so when it has sealed
//! [`RekeyConfig::rekey_after_messages`] datagrams under them. Attempts
//! repeat every [`RekeyConfig::rekey_retry`] until new keys are
//! installed. At [`RekeyConfig::reject_after_time`] or
//! [`RekeyConfig::reject_after_messages`] keys are given up whatever
//! happened: they neither seal nor open any more.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::handshake::Established;
use super::stats::HandshakeCounters;
use crate::crypto::{Role, SessionKeys};

/// Rekey thresholds. The defaults follow WireGuard's timings, with
/// [`RekeyConfig::rekey_after_messages`] at 2^32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RekeyConfig {
    /// Age at which the initiator of the current keys starts a new
    /// handshake (120 s).
    pub rekey_after_time: Duration,
    /// How much longer the responder of the current keys waits before it
    /// starts one itself (10 s).
    pub responder_rekey_delay: Duration,
    /// Age at which keys are given up (180 s).
    pub reject_after_time: Duration,
    /// Datagrams sealed under one key pair before a new handshake starts
    /// (2^32).
    pub rekey_after_messages: u64,
    /// Datagrams sealed under one key pair at most (2^33): far below the
    /// nonce limit of the AEAD, yet far above the rekey threshold.
    pub reject_after_messages: u64,
    /// Interval between handshake attempts while a rekey is due (5 s).
    pub rekey_retry: Duration,
    /// How long attempts go on, without keys, after the keys expired or
    /// [`Keyring::want_keys`] (90 s); then the keyring waits for the next
    /// [`Keyring::want_keys`].
    pub rekey_attempt_time: Duration,
    /// How long replaced keys still open datagrams (10 s: far above any
    /// path's delay plus the reorder window).
    pub previous_grace: Duration,
}

impl Default for RekeyConfig {
    fn default() -> Self {
        RekeyConfig {
            rekey_after_time: Duration::from_secs(120),
            responder_rekey_delay: Duration::from_secs(10),
            reject_after_time: Duration::from_secs(180),
            rekey_after_messages: 1 << 32,
            reject_after_messages: 1 << 33,
            rekey_retry: Duration::from_secs(5),
            rekey_attempt_time: Duration::from_secs(90),
            previous_grace: Duration::from_secs(10),
        }
    }
}

/// What [`Keyring::poll`] asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyEvent {
    /// Start a handshake now ([`super::Initiator::initiate`]).
    Initiate,
    /// Keys under this local session index are gone: remove the index
    /// from the table that routes received datagrams to sessions.
    Retired {
        /// Our session index of the keys dropped.
        local_index: u32,
    },
}

/// Which keys opened a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySlot {
    /// The keys in use.
    Current,
    /// Unconfirmed keys from a handshake we answered: call
    /// [`Keyring::confirm`] once the datagram has opened.
    Next,
    /// Replaced keys, still in their grace period.
    Previous,
}

#[derive(Debug, Clone)]
struct Slot {
    keys: SessionKeys,
    local_index: u32,
    remote_index: u32,
    role: Role,
    established: Instant,
    sent: u64,
}

/// The key pairs of one session and their timers.
#[derive(Debug)]
pub struct Keyring {
    cfg: RekeyConfig,
    current: Option<Slot>,
    next: Option<Slot>,
    /// Replaced keys and until when they open.
    previous: Option<(Slot, Instant)>,
    /// Last handshake attempt this keyring asked for.
    last_attempt: Option<Instant>,
    /// Since when keys are wanted with none usable (expiry or
    /// [`Keyring::want_keys`]).
    wanting_since: Option<Instant>,
    events: VecDeque<KeyEvent>,
    counters: HandshakeCounters,
}

impl Keyring {
    /// An empty keyring.
    pub fn new(cfg: RekeyConfig) -> Keyring {
        Keyring {
            cfg,
            current: None,
            next: None,
            previous: None,
            last_attempt: None,
            wanting_since: None,
            events: VecDeque::new(),
            counters: HandshakeCounters::default(),
        }
    }

    /// Takes the keys of a completed handshake. Ours (we initiated): they
    /// become current at once, the old current previous. The peer's (we
    /// responded): they wait in `next` until confirmed.
    pub fn install(&mut self, e: Established, now: Instant) {
        let slot = Slot {
            keys: e.keys,
            local_index: e.local_index,
            remote_index: e.remote_index,
            role: e.role,
            established: now,
            sent: 0,
        };
        match slot.role {
            Role::Initiator => self.promote(slot, now),
            Role::Responder => {
                if let Some(old) = self.next.replace(slot) {
                    self.retire(old.local_index);
                }
            }
        }
        self.last_attempt = None;
        self.wanting_since = None;
    }

    fn promote(&mut self, slot: Slot, now: Instant) {
        if let Some(old) = self.current.replace(slot) {
            self.counters.rekeys += 1;
            let until = now + self.cfg.previous_grace;
            if let Some((gone, _)) = self.previous.replace((old, until)) {
                self.retire(gone.local_index);
            }
        }
    }

    fn retire(&mut self, local_index: u32) {
        self.events.push_back(KeyEvent::Retired { local_index });
    }

    fn alive(&self, slot: &Slot, now: Instant) -> bool {
        now.saturating_duration_since(slot.established) < self.cfg.reject_after_time
            && slot.sent < self.cfg.reject_after_messages
    }

    /// The keys to seal one datagram with, and the peer's session index to
    /// address it to (the header's `conn_id`); counts the datagram. `None`
    /// when no keys may seal: none yet, or past their hard limit (queue or
    /// drop, and [`Keyring::want_keys`]).
    pub fn next_send(&mut self, now: Instant) -> Option<(&SessionKeys, u32)> {
        let usable = self.current.as_ref().is_some_and(|c| self.alive(c, now));
        if !usable {
            return None;
        }
        let c = self.current.as_mut()?;
        c.sent += 1;
        Some((&c.keys, c.remote_index))
    }

    /// The keys that open a datagram addressed to our session index
    /// `local_index` (its header's `conn_id`), and which slot they are in.
    /// Check the replay window of those keys before opening, as with the
    /// PSK handshake's keys.
    pub fn open_keys(&self, local_index: u32, now: Instant) -> Option<(&SessionKeys, KeySlot)> {
        let matches = |s: &Slot| s.local_index == local_index && self.alive(s, now);
        if let Some(c) = self.current.as_ref().filter(|c| matches(c)) {
            return Some((&c.keys, KeySlot::Current));
        }
        if let Some(n) = self.next.as_ref().filter(|n| matches(n)) {
            return Some((&n.keys, KeySlot::Next));
        }
        self.previous
            .as_ref()
            .filter(|(p, until)| now < *until && matches(p))
            .map(|(p, _)| (&p.keys, KeySlot::Previous))
    }

    /// A datagram opened under the `next` keys with this index: the
    /// initiator has them, so they become current.
    pub fn confirm(&mut self, local_index: u32, now: Instant) {
        if self
            .next
            .as_ref()
            .is_some_and(|n| n.local_index == local_index)
        {
            if let Some(n) = self.next.take() {
                self.promote(n, now);
            }
        }
    }

    /// The caller needs keys (e.g. it has data to send and
    /// [`Keyring::next_send`] gave none): [`KeyEvent::Initiate`] follows
    /// at the next poll and repeats every [`RekeyConfig::rekey_retry`]
    /// until keys are installed or [`RekeyConfig::rekey_attempt_time`]
    /// has passed.
    pub fn want_keys(&mut self, now: Instant) {
        if self.wanting_since.is_none() {
            self.wanting_since = Some(now);
        }
    }

    /// When the current keys call for a rekey: by age (depending on our
    /// role) or by datagrams sealed.
    fn rekey_due_at(&self) -> Option<Instant> {
        let c = self.current.as_ref()?;
        if c.sent >= self.cfg.rekey_after_messages {
            return Some(c.established);
        }
        let after = match c.role {
            Role::Initiator => self.cfg.rekey_after_time,
            Role::Responder => self.cfg.rekey_after_time + self.cfg.responder_rekey_delay,
        };
        Some(c.established + after)
    }

    /// Drops keys past their limits and decides on a handshake; returns
    /// the next thing to do, if any. Call until `None` at
    /// [`Keyring::poll_timeout`] and after each [`Keyring::next_send`]
    /// burst (the message threshold has no deadline).
    pub fn poll(&mut self, now: Instant) -> Option<KeyEvent> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        if self
            .previous
            .as_ref()
            .is_some_and(|(p, until)| now >= *until || !self.alive(p, now))
        {
            if let Some((p, _)) = self.previous.take() {
                self.retire(p.local_index);
            }
        }
        if self.next.as_ref().is_some_and(|n| !self.alive(n, now)) {
            if let Some(n) = self.next.take() {
                self.counters.expired += 1;
                self.retire(n.local_index);
            }
        }
        if self.current.as_ref().is_some_and(|c| !self.alive(c, now)) {
            if let Some(c) = self.current.take() {
                self.counters.expired += 1;
                self.retire(c.local_index);
                self.want_keys(now);
            }
        }
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        let due = match self.wanting_since {
            Some(since) => {
                if now.saturating_duration_since(since) >= self.cfg.rekey_attempt_time {
                    // Give up until the caller wants keys again.
                    self.wanting_since = None;
                    self.last_attempt = None;
                    false
                } else {
                    true
                }
            }
            None => self.rekey_due_at().is_some_and(|at| now >= at),
        };
        let retry_ok = self
            .last_attempt
            .is_none_or(|t| now.saturating_duration_since(t) >= self.cfg.rekey_retry);
        if due && retry_ok {
            self.last_attempt = Some(now);
            return Some(KeyEvent::Initiate);
        }
        None
    }

    /// The next instant [`Keyring::poll`] has something to do (ignoring
    /// the message threshold, which the caller checks by polling after
    /// sending).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let retry = |at: Instant| match self.last_attempt {
            Some(t) => at.max(t + self.cfg.rekey_retry),
            None => at,
        };
        let rekey = match self.wanting_since {
            Some(since) => Some(retry(since).min(since + self.cfg.rekey_attempt_time)),
            None => self.rekey_due_at().map(retry),
        };
        let expiry = |s: &Slot| s.established + self.cfg.reject_after_time;
        [
            rekey,
            self.current.as_ref().map(expiry),
            self.next.as_ref().map(expiry),
            self.previous
                .as_ref()
                .map(|(p, until)| (*until).min(expiry(p))),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Our session indexes with keys (current, next, previous): the
    /// entries this session has in the receive table.
    pub fn local_indexes(&self) -> impl Iterator<Item = u32> + '_ {
        self.current
            .iter()
            .chain(self.next.iter())
            .chain(self.previous.iter().map(|(p, _)| p))
            .map(|s| s.local_index)
    }

    /// Whether some keys can seal now.
    pub fn can_send(&self, now: Instant) -> bool {
        self.current.as_ref().is_some_and(|c| self.alive(c, now))
    }

    /// Rekeys and expiries counted here.
    pub fn counters(&self) -> &HandshakeCounters {
        &self.counters
    }
}
