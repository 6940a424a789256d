//! A connection's key sets as both planes see them: the control loop
//! installs and retires keys under one lock; the workers copy them when
//! the generation changes ([`ConnCrypto`]).

use super::conn::ConnShared;
use crate::sync::Counter;
use crate::sync::{read_unpoisoned, write_unpoisoned};
use mpt_proto::crypto::Role;
use mpt_proto::crypto::{Psk, SessionKeys};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
/// How long old session keys still open stragglers after the peer was
/// seen using the new ones.
pub const OLD_KEYS_GRACE: Duration = Duration::from_secs(2);

/// Longest an initiator keeps its old keys while waiting for the peer's
/// first datagram under the new ones, and a responder its pending keys
/// while waiting for confirmation.
pub const OLD_KEYS_MAX: Duration = Duration::from_secs(30);

/// The key sets of a connection, as the receive worker copies them.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    /// Keys that seal, and open first.
    pub current: Option<Arc<SessionKeys>>,
    /// Responder keys of an answered Init, not yet used by the peer: they
    /// only open, and the first datagram they open makes them current.
    pub pending: Option<Arc<SessionKeys>>,
    /// When `pending` is given up if still unconfirmed.
    pending_until: Option<Instant>,
    /// The keys before `current`, opening stragglers until `retire_at`.
    pub previous: Option<Arc<SessionKeys>>,
    retire_at: Option<Instant>,
    /// Whether the peer has been seen sealing with `current`.
    pub peer_on_current: bool,
    /// Public-key (Noise) sessions: the session indexes and age of
    /// `current`, `pending` and `previous` (in that order); `None` for the
    /// PSK handshake's keys.
    pub ids: [Option<NoiseIds>; 3],
}

impl KeySet {
    /// Our session indexes of the key sets present (0 = none), in the order
    /// current, pending, previous.
    fn local_indexes(&self) -> [u32; 3] {
        self.ids.map(|i| i.map_or(0, |i| i.local))
    }
}

/// Encryption state of a connection with a `key_file`.
///
/// Key confirmation: the responder of a handshake does not switch when it
/// answers; its new keys are *pending* until a datagram sealed with them
/// opens (the receive worker calls [`ConnCrypto::confirm`]), so a replayed
/// Init or a lost Response never leaves it sealing with keys the peer does
/// not have. The initiator switches on the Response (which proves the
/// responder derived the keys) with [`ConnCrypto::switch`]. Either way the
/// old keys keep opening for a while: until [`OLD_KEYS_GRACE`] after the
/// peer was first seen on the new keys (at most [`OLD_KEYS_MAX`]).
#[derive(Debug)]
pub struct ConnCrypto {
    /// The pre-shared key.
    pub psk: Psk,
    /// The key sets; the control loop and the receive worker write them,
    /// workers read them once per batch.
    keys: RwLock<KeySet>,
    /// Bumped on every change of `keys`.
    generation: AtomicU64,
    /// Handshakes completed (either role): new keys confirmed.
    pub handshakes: Counter,
    /// Keys that replaced earlier current keys (rekeys).
    pub rekeys: Counter,
    /// Public-key (Noise IK) handshake instead of the PSK handshake (`psk`
    /// is then the optional `key_file` mixed in, or unused zeros).
    pub noise: bool,
    /// How long replaced keys keep opening after the peer was seen on the
    /// new ones (PSK: [`OLD_KEYS_GRACE`]; Noise: 10 s).
    grace: Duration,
    /// Longest wait for that, and for pending keys to be confirmed (PSK:
    /// [`OLD_KEYS_MAX`]).
    retire_max: Duration,
    /// Noise: our session indexes of the key sets (current, pending,
    /// previous; 0 = none), readable without the lock: the receive side
    /// checks a datagram's connection id against them before any crypto.
    local_indexes: [AtomicU32; 3],
    /// Noise: our session index of the handshake in flight (0 = none): the
    /// receiver index of the response or cookie reply we wait for.
    pub handshake_index: AtomicU32,
    /// Noise: the handshake's counters for this connection, as the control
    /// loop last published them.
    pub noise_counters: Mutex<mpt_proto::noise::HandshakeCounters>,
    /// Client connections: the shared port's session map this connection's
    /// indexes are kept in (set once, when the connection is created).
    registry: std::sync::OnceLock<(
        Arc<crate::plane::shared_port::SessionMap>,
        std::sync::Weak<ConnShared>,
    )>,
    /// Noise: checks the mac1 of initiations arriving on the connection's
    /// own sockets (set once by the daemon, which holds the identity).
    mac1: std::sync::OnceLock<mpt_proto::noise::Mac1Check>,
}

impl ConnCrypto {
    /// Crypto state with no session yet.
    pub fn new(psk: Psk) -> ConnCrypto {
        ConnCrypto {
            psk,
            keys: RwLock::new(KeySet::default()),
            generation: AtomicU64::new(1),
            handshakes: Counter::default(),
            rekeys: Counter::default(),
            noise: false,
            grace: OLD_KEYS_GRACE,
            retire_max: OLD_KEYS_MAX,
            local_indexes: Default::default(),
            handshake_index: AtomicU32::new(0),
            noise_counters: Mutex::default(),
            registry: std::sync::OnceLock::new(),
            mac1: std::sync::OnceLock::new(),
        }
    }

    /// Crypto state of a public-key (Noise IK) connection: `psk` is its
    /// `key_file` (mixed in by the handshake) or zeros; replaced keys open
    /// for `grace`, and pending keys wait at most `pending_max`.
    pub fn new_noise(psk: Psk, grace: Duration, pending_max: Duration) -> ConnCrypto {
        ConnCrypto {
            noise: true,
            grace,
            retire_max: pending_max.max(grace),
            ..ConnCrypto::new(psk)
        }
    }

    /// Sets the mac1 filter of initiations (once; later calls change
    /// nothing).
    pub fn set_mac1(&self, check: mpt_proto::noise::Mac1Check) {
        let _already_set = self.mac1.set(check);
    }

    /// Whether `dgram`, a Noise initiation, passes the mac1 filter (made
    /// for our public key). Without a filter set, everything passes (the
    /// responder checks mac1 again in any case).
    pub fn mac1_ok(&self, dgram: &[u8]) -> bool {
        self.mac1.get().is_none_or(|m| m.check(dgram))
    }

    fn write(&self, f: impl FnOnce(&mut KeySet) -> bool) -> bool {
        let mut g = write_unpoisoned(&self.keys);
        let changed = f(&mut g);
        if changed {
            let before: [u32; 3] = std::array::from_fn(|i| self.local_indexes[i].load(Relaxed));
            let after = g.local_indexes();
            for (slot, index) in self.local_indexes.iter().zip(after) {
                slot.store(index, Relaxed);
            }
            // Under the key lock, so two changes cannot reach the map in
            // the other order.
            if before != after {
                if let Some((map, conn)) = self.registry.get() {
                    map.replace(conn, &before, &after);
                }
            }
            self.generation.fetch_add(1, Relaxed);
        }
        changed
    }

    /// Client connections: keeps this connection's session indexes (those
    /// of its keys and of its handshake in flight) in `map`, from now on.
    pub fn register(
        &self,
        map: Arc<crate::plane::shared_port::SessionMap>,
        conn: std::sync::Weak<ConnShared>,
    ) {
        let _ = self.registry.set((map, conn));
    }

    /// Notes our session index of the handshake in flight (0: none); a
    /// client connection's is also put in its shared port's session map.
    pub fn set_handshake_index(&self, index: u32) {
        let _keys_lock = self.keys.write();
        let before = self.handshake_index.swap(index, Relaxed);
        if before != index {
            if let Some((map, conn)) = self.registry.get() {
                // The handshake's index stays mapped when it has become a
                // key set's (the response installed its keys under it):
                // taking it out would orphan the session just made.
                let gone: &[u32] = if self.knows_index(before) {
                    &[]
                } else {
                    &[before]
                };
                map.replace(conn, gone, &[index]);
            }
        }
    }

    /// Client connection removed: drops every key set and handshake, so
    /// nothing it receives opens any more and its indexes leave the map.
    pub fn drop_all(&self) {
        self.set_handshake_index(0);
        self.write(|k| {
            let had = k.current.is_some() || k.pending.is_some() || k.previous.is_some();
            *k = KeySet::default();
            had
        });
    }

    /// Whether `index` is our session index of one of the key sets (Noise;
    /// never 0). Lock-free: checked per datagram before any crypto.
    pub fn knows_index(&self, index: u32) -> bool {
        index != 0 && self.local_indexes.iter().any(|i| i.load(Relaxed) == index)
    }

    /// The keys that seal, and the connection id to put in the header:
    /// the peer's session index of those keys (Noise), or `conn_id` (PSK).
    /// Both from one read, so a datagram is never addressed to the index
    /// of other keys than those that sealed it.
    pub fn sealing(&self, conn_id: u32) -> Option<(Arc<SessionKeys>, u32)> {
        let read = |g: &KeySet| {
            let id = g.ids[0].map_or(conn_id, |i| i.remote);
            g.current.clone().map(|k| (k, id))
        };
        read(&read_unpoisoned(&self.keys))
    }

    /// Noise: indexes and age of the current keys.
    pub fn current_ids(&self) -> Option<NoiseIds> {
        read_unpoisoned(&self.keys).ids[0]
    }

    /// Noise: indexes of the pending keys.
    pub fn pending_ids(&self) -> Option<NoiseIds> {
        read_unpoisoned(&self.keys).ids[1]
    }

    /// Noise: gives up the current keys (hard limit reached): nothing seals
    /// or opens with them any more. Returns whether there were any.
    pub fn drop_current(&self) -> bool {
        self.write(|k| {
            let had = k.current.is_some();
            k.current = None;
            k.ids[0] = None;
            k.peer_on_current = false;
            had
        })
    }

    /// Noise: gives up the pending and previous keys older than `max_age`
    /// (their hard limit). Returns how many pending key sets went (never
    /// confirmed: expired); previous keys past it simply go.
    pub fn drop_older(&self, max_age: Duration, now: Instant) -> usize {
        let old = |ids: &Option<NoiseIds>| {
            ids.is_some_and(|i| now.saturating_duration_since(i.born) >= max_age)
        };
        let mut gone = 0;
        self.write(|k| {
            if old(&k.ids[1]) {
                k.pending = None;
                k.pending_until = None;
                k.ids[1] = None;
                gone += 1;
            }
            let previous = old(&k.ids[2]);
            if previous {
                k.previous = None;
                k.retire_at = None;
                k.ids[2] = None;
            }
            gone > 0 || previous
        });
        gone
    }

    /// The current session keys (those that seal), if a handshake
    /// completed.
    pub fn keys(&self) -> Option<Arc<SessionKeys>> {
        read_unpoisoned(&self.keys).current.clone()
    }

    /// All key sets, for the receive worker.
    pub fn key_set(&self) -> KeySet {
        read_unpoisoned(&self.keys).clone()
    }

    /// Changes whenever the key sets change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// Holds the keys of an Init we answered until the peer uses them (at
    /// most [`OLD_KEYS_MAX`]).
    pub fn set_pending(&self, keys: SessionKeys, now: Instant) {
        self.install_pending(keys, None, now);
    }

    /// [`ConnCrypto::set_pending`] with the session indexes of a Noise
    /// handshake.
    pub fn install_pending(&self, keys: SessionKeys, ids: Option<NoiseIds>, now: Instant) {
        let keys = Arc::new(keys);
        let max = self.retire_max;
        self.write(|k| {
            k.pending = Some(keys);
            k.pending_until = Some(now + max);
            k.ids[1] = ids;
            true
        });
    }

    /// Switches to the keys of a handshake we initiated (the Response
    /// confirmed them); the old ones keep opening for a while.
    pub fn switch(&self, keys: SessionKeys, now: Instant) {
        self.install_current(keys, None, now);
    }

    /// [`ConnCrypto::switch`] with the session indexes of a Noise
    /// handshake.
    pub fn install_current(&self, keys: SessionKeys, ids: Option<NoiseIds>, now: Instant) {
        let keys = Arc::new(keys);
        let max = self.retire_max;
        let mut rekey = false;
        self.write(|k| {
            rekey = k.current.is_some();
            k.previous = k.current.take();
            k.ids[2] = k.ids[0].take();
            k.retire_at = k.previous.as_ref().map(|_| now + max);
            k.current = Some(keys);
            k.ids[0] = ids;
            k.pending = None;
            k.pending_until = None;
            k.ids[1] = None;
            k.peer_on_current = false;
            true
        });
        self.handshakes.add(1);
        if rekey {
            self.rekeys.add(1);
        }
    }

    /// A datagram opened under the pending `keys`: the peer has them, so
    /// they become current. Returns whether they did (false if they are no
    /// longer pending).
    pub fn confirm(&self, keys: &Arc<SessionKeys>, now: Instant) -> bool {
        let grace = self.grace;
        let mut rekey = false;
        let done = self.write(|k| {
            if !k.pending.as_ref().is_some_and(|p| Arc::ptr_eq(p, keys)) {
                return false;
            }
            rekey = k.current.is_some();
            k.previous = k.current.take();
            k.ids[2] = k.ids[0].take();
            k.retire_at = k.previous.as_ref().map(|_| now + grace);
            k.current = k.pending.take();
            k.ids[0] = k.ids[1].take();
            k.pending_until = None;
            k.peer_on_current = true;
            true
        });
        if done {
            self.handshakes.add(1);
            if rekey {
                self.rekeys.add(1);
            }
        }
        done
    }

    /// A datagram opened under the current `keys`: the peer uses them, so
    /// the old keys only have [`OLD_KEYS_GRACE`] left.
    pub fn peer_uses(&self, keys: &Arc<SessionKeys>, now: Instant) {
        let grace = self.grace;
        self.write(|k| {
            if k.peer_on_current || !k.current.as_ref().is_some_and(|c| Arc::ptr_eq(c, keys)) {
                return false;
            }
            k.peer_on_current = true;
            k.retire_at = k.retire_at.map(|t| t.min(now + grace));
            true
        });
    }

    /// Drops old keys, and pending keys never confirmed, whose time is up
    /// (control loop, every round).
    pub fn expire(&self, now: Instant) {
        let due = |k: &KeySet| {
            k.retire_at.is_some_and(|t| t <= now) || k.pending_until.is_some_and(|t| t <= now)
        };
        let any = match self.keys.read() {
            Ok(g) => due(&g),
            Err(_) => true,
        };
        if any {
            self.write(|k| {
                if !due(k) {
                    return false;
                }
                if k.retire_at.is_some_and(|t| t <= now) {
                    k.previous = None;
                    k.retire_at = None;
                    k.ids[2] = None;
                }
                if k.pending_until.is_some_and(|t| t <= now) {
                    k.pending = None;
                    k.pending_until = None;
                    k.ids[1] = None;
                }
                true
            });
        }
    }
}

/// Session indexes and age of one key set of a Noise session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoiseIds {
    /// Our session index: the peer addresses these keys' datagrams to it.
    pub local: u32,
    /// The peer's index: we address our datagrams to it.
    pub remote: u32,
    /// Which end of the handshake we played.
    pub role: Role,
    /// When the handshake completed here.
    pub born: Instant,
    /// The connection's sequence counter then: datagrams sealed since are
    /// counted as the counter's advance.
    pub seq0: u64,
}

impl NoiseIds {
    pub fn of(e: &mpt_proto::noise::Established, now: Instant, seq0: u64) -> NoiseIds {
        NoiseIds {
            local: e.local_index,
            remote: e.remote_index,
            role: e.role,
            born: now,
            seq0,
        }
    }
}
