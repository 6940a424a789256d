//! State shared between the data-plane workers and the control loop.
//!
//! The hot path never takes a lock per packet. Workers read what they need
//! once per batch (eligible-path mask, weights, remote address) and add to
//! counters once per batch. Only the control loop writes liveness-derived
//! state; only a path's receive worker writes its receive summary.
//!
//! Paths come and go at run time (`mpt path add/remove`, reload, the
//! peer's control messages). A connection's paths are an immutable
//! [`PathTable`] behind an `Arc`: the control loop builds a new table and
//! swaps it in, bumping a generation counter; a worker compares the counter
//! once per batch (one relaxed load) and takes the new table only when it
//! changed. A removed path's socket closes when the last worker drops the
//! old table.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

pub use crate::noise::NoiseIds;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use mpt_proto::crypto::{Psk, SessionKeys};
use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::SchedPath;
use socket2::SockAddr;

use crate::route::SourceFilter;
use crate::source::Source;
use crate::udp::{PathSocket, Waker};

/// Monotonic counter, relaxed ordering: counters are statistics.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        if n != 0 {
            self.0.fetch_add(n, Relaxed);
        }
    }
    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Why datagrams or packets were dropped, per connection.
#[derive(Debug, Default)]
pub struct Drops {
    /// Shorter than the header.
    pub too_short: Counter,
    /// Unknown protocol version.
    pub bad_version: Counter,
    /// Anything else that did not decode (type, flags, body, inner packet).
    pub malformed: Counter,
    /// Header names another connection.
    pub unknown_connection: Counter,
    /// Failed authentication (sealed messages we cannot open).
    pub auth: Counter,
    /// Replayed sequence numbers.
    pub replay: Counter,
    /// Message types this version does not handle.
    pub unsupported: Counter,
    /// Tun packets with no usable path.
    pub no_path: Counter,
    /// Tun packets for a path whose remote address is not known yet.
    pub no_remote: Counter,
    /// Datagrams the kernel refused to send.
    pub send_error: Counter,
    /// Control datagrams dropped because the control loop was busy.
    pub control_queue_full: Counter,
    /// Tun packets dropped because no session keys are established yet.
    pub no_session: Counter,
    /// Handshake messages refused by the rate limiter.
    pub handshake_rate_limited: Counter,
    /// Failed tun writes of received data.
    pub tun_write: Counter,
    /// Cleartext datagrams from another address or port than the path's
    /// configured remote (a cleartext path trusts nothing else).
    pub wrong_source: Counter,
    /// Control messages on a connection without a key: nobody can be told
    /// from an impostor there, so they are never obeyed.
    pub unauthenticated_control: Counter,
    /// Inner packets whose source address is none of the peer's tunnel
    /// addresses or `networks` (one peer posing as another).
    pub inner_source: Counter,
    /// Authentic handshake messages carrying our own instance id (our own
    /// messages sent back to us).
    pub handshake_reflected: Counter,
    /// Authentic Inits that were not provably fresh (after a restart, a
    /// replay, a peer clock behind): answered with a Challenge, no keys.
    pub handshake_challenged: Counter,
}

/// `rx_summary_owd` when no one-way delay was measured.
pub const NO_OWD: u64 = u64::MAX;

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
    registry: std::sync::OnceLock<(Arc<crate::shared::SessionMap>, std::sync::Weak<ConnShared>)>,
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

    fn write(&self, f: impl FnOnce(&mut KeySet) -> bool) -> bool {
        let mut g = match self.keys.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
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
    pub fn register(&self, map: Arc<crate::shared::SessionMap>, conn: std::sync::Weak<ConnShared>) {
        let _ = self.registry.set((map, conn));
    }

    /// Notes our session index of the handshake in flight (0: none); a
    /// client connection's is also put in its shared port's session map.
    pub fn set_handshake_index(&self, index: u32) {
        let _keys_lock = self.keys.write();
        let before = self.handshake_index.swap(index, Relaxed);
        if before != index {
            if let Some((map, conn)) = self.registry.get() {
                map.replace(conn, &[before], &[index]);
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
        match self.keys.read() {
            Ok(g) => read(&g),
            Err(poisoned) => read(&poisoned.into_inner()),
        }
    }

    /// Noise: indexes and age of the current keys.
    pub fn current_ids(&self) -> Option<NoiseIds> {
        match self.keys.read() {
            Ok(g) => g.ids[0],
            Err(poisoned) => poisoned.into_inner().ids[0],
        }
    }

    /// Noise: indexes of the pending keys.
    pub fn pending_ids(&self) -> Option<NoiseIds> {
        match self.keys.read() {
            Ok(g) => g.ids[1],
            Err(poisoned) => poisoned.into_inner().ids[1],
        }
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
        match self.keys.read() {
            Ok(g) => g.current.clone(),
            Err(poisoned) => poisoned.into_inner().current.clone(),
        }
    }

    /// All key sets, for the receive worker.
    pub fn key_set(&self) -> KeySet {
        match self.keys.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
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

/// What the control loop last published about a path, for status output.
#[derive(Debug, Clone, Copy)]
pub struct PathView {
    /// `up`, `down`, `backup` or `probing`.
    pub state: &'static str,
    /// Smoothed RTT.
    pub rtt_ms: Option<f64>,
    /// Minimum RTT.
    pub rtt_min_ms: Option<f64>,
    /// Loss of the direction we send in.
    pub loss_pct: Option<f64>,
    /// When the state last changed.
    pub last_change: Instant,
    /// When anything was last received.
    pub last_rx: Option<Instant>,
    /// The weight the peer asks for.
    pub peer_weight_in: Option<u16>,
    /// Estimated capacity of the direction we send in, bit/s.
    pub rate_bps: Option<u64>,
    /// The estimate was measured with a standing queue (not a lower bound).
    pub rate_confirmed: bool,
    /// One-way delay above the connection's fastest path.
    pub owd_ms: Option<f64>,
    /// Queueing delay the peer last measured on the path.
    pub queue_ms: Option<f64>,
    /// The lowest one-way delay from the peer on this path over the last
    /// 20-40 ms (see `Path::rx_owd_standing`), above the lowest of the
    /// connection's paths.
    pub rx_owd_ms: Option<f64>,
    /// Counted as lossy by the adaptive scheduler.
    pub lossy: bool,
    /// Share of the connection's sent data bytes recently (smoothed).
    pub share: f64,
    /// `tx_data_bytes` when the share was last updated.
    pub share_tx_bytes: u64,
    /// Share of the connection's received data bytes recently (smoothed;
    /// probes, keepalives and feedback left out, so that idle paths
    /// carry nothing).
    pub rx_share: f64,
    /// `rx_data_bytes` when `rx_share` was last updated.
    pub share_rx_bytes: u64,
    /// When `share` and `rx_share` were last updated (they are smoothed
    /// over time, not over control rounds, which come as often as
    /// datagrams for the control loop do).
    pub share_at: Option<Instant>,
}

/// Where a path sends: the peer's address and, for a learnt path of a
/// shared port, our address its datagrams arrive on (see
/// `crate::source`).
#[derive(Debug, Clone)]
pub struct Remote {
    /// The peer's address.
    pub addr: SocketAddr,
    /// The same, ready for the system calls.
    pub sock: SockAddr,
    /// The local address to send from; `None`: as routing picks.
    pub via: Option<Source>,
}

/// One path as the workers see it.
#[derive(Debug)]
pub struct PathShared {
    /// Path id: the slot in the connection's table and the wire `path_id`.
    pub id: usize,
    /// Name from the config.
    pub name: String,
    /// The bound UDP socket.
    pub socket: PathSocket,
    /// Local address.
    pub local: SocketAddr,
    /// Remote address, configured or learnt, and (paths of a shared port)
    /// our address its datagrams arrive on, which replies leave from.
    /// Read once per batch.
    remote: RwLock<Option<Remote>>,
    /// Whether the remote address came from the config (never relearnt).
    pub remote_fixed: bool,
    /// The device the socket is bound to.
    pub interface: Option<String>,
    /// Interface-only path: bound to `interface`'s current address, moved
    /// when it changes (see `crate::links`).
    pub follow: bool,
    /// The path comes from the config file (at start or by a reload), not
    /// from `mpt path add` or the peer: only such paths does a reload
    /// remove when the file no longer lists them.
    pub from_config: bool,
    /// Next path sequence number.
    pub path_seq: AtomicU32,
    /// `weight_out` (the scheduler reads it per batch).
    pub weight_out: AtomicU32,
    /// `window`.
    pub window: AtomicU32,
    /// `weight_in`.
    pub weight_in: AtomicU32,
    /// Datagrams sent (all types).
    pub tx_packets: Counter,
    /// Bytes sent (UDP payload).
    pub tx_bytes: Counter,
    /// Data datagrams sent.
    pub tx_data_packets: Counter,
    /// Bytes of data and repair datagrams sent (UDP payload; no probes,
    /// keepalives or feedback): what the path's share is counted in.
    pub tx_data_bytes: Counter,
    /// Datagrams received and accepted (all types).
    pub rx_packets: Counter,
    /// Bytes received and accepted.
    pub rx_bytes: Counter,
    /// Data datagrams received and accepted.
    pub rx_data_packets: Counter,
    /// Bytes of data and repair datagrams received and accepted (no
    /// probes, keepalives or feedback): what decides whether a path
    /// carries data (delay equalisation, the measured delay spread).
    pub rx_data_bytes: Counter,
    /// Changes of the reported state (up, down, backup, probing).
    pub state_changes: Counter,
    /// Data datagrams received since the control loop last looked.
    pub rx_summary_packets: AtomicU32,
    /// Highest path sequence among them.
    pub rx_summary_highest: AtomicU32,
    /// When the last one arrived, in ns since the connection epoch.
    pub rx_summary_last_ns: AtomicU64,
    /// Their wire bytes.
    pub rx_summary_bytes: AtomicU64,
    /// Sender timestamp of the newest.
    pub rx_summary_timestamp: AtomicU32,
    /// Lowest `arrival − sender timestamp` (µs, wrapping) among them, or
    /// [`NO_OWD`].
    pub rx_summary_owd: AtomicU64,
    /// The adaptive scheduler's model of the path and its virtual clock.
    pub model: crate::model::SharedModel,
    /// Copies of the data last sent here, for the peer's repair requests;
    /// allocated at the first request (see `repair`) and freed by the
    /// transmit worker once `repair_until_ns` has passed.
    pub repair_history: Mutex<Option<mpt_proto::repair::RepairHistory>>,
    /// Until when (ns since the connection epoch) transmit workers keep
    /// copies: a while after the peer last asked for one.
    pub repair_until_ns: AtomicU64,
    /// When data was last sent here (ns since the connection epoch, 0 =
    /// never): the control loop tells the session, which expects an answer.
    pub tx_data_last_ns: AtomicU64,
    /// Status published by the control loop.
    pub view: Mutex<PathView>,
    /// Removed and draining: receives, never sends data, hidden in status.
    removed: AtomicBool,
}

impl PathShared {
    /// A path around a bound socket.
    pub fn new(
        id: usize,
        name: String,
        socket: PathSocket,
        remote: Option<SocketAddr>,
        sched: SchedPath,
        weight_in: u16,
        now: Instant,
    ) -> PathShared {
        PathShared {
            id,
            name,
            local: socket.local_addr(),
            socket,
            remote: RwLock::new(remote.map(|a| Remote {
                addr: a,
                sock: SockAddr::from(a),
                via: None,
            })),
            remote_fixed: remote.is_some(),
            interface: None,
            follow: false,
            from_config: false,
            path_seq: AtomicU32::new(1),
            weight_out: AtomicU32::new(sched.weight),
            window: AtomicU32::new(sched.window),
            weight_in: AtomicU32::new(u32::from(weight_in)),
            tx_packets: Counter::default(),
            tx_bytes: Counter::default(),
            tx_data_packets: Counter::default(),
            tx_data_bytes: Counter::default(),
            rx_packets: Counter::default(),
            rx_bytes: Counter::default(),
            rx_data_packets: Counter::default(),
            rx_data_bytes: Counter::default(),
            state_changes: Counter::default(),
            rx_summary_packets: AtomicU32::new(0),
            rx_summary_highest: AtomicU32::new(0),
            rx_summary_last_ns: AtomicU64::new(0),
            rx_summary_bytes: AtomicU64::new(0),
            rx_summary_timestamp: AtomicU32::new(0),
            rx_summary_owd: AtomicU64::new(NO_OWD),
            model: crate::model::SharedModel::default(),
            repair_history: Mutex::new(None),
            repair_until_ns: AtomicU64::new(0),
            tx_data_last_ns: AtomicU64::new(0),
            view: Mutex::new(PathView {
                state: "probing",
                rtt_ms: None,
                rtt_min_ms: None,
                loss_pct: None,
                last_change: now,
                last_rx: None,
                peer_weight_in: None,
                rate_bps: None,
                rate_confirmed: false,
                owd_ms: None,
                queue_ms: None,
                rx_owd_ms: None,
                lossy: false,
                share: 0.0,
                share_tx_bytes: 0,
                rx_share: 0.0,
                share_rx_bytes: 0,
                share_at: None,
            }),
            removed: AtomicBool::new(false),
        }
    }

    /// Folds a batch's lowest one-way delay into the summary (receive
    /// worker; wrapping µs values compare by their difference).
    /// The same path on a new socket (an interface-only path whose
    /// address changed): name, id, remote, weights, sequence numbers and
    /// counters carry over; the receive summary starts empty.
    pub fn moved(&self, socket: PathSocket) -> PathShared {
        let sched = self.sched();
        let mut p = PathShared::new(
            self.id,
            self.name.clone(),
            socket,
            self.remote().map(|(a, _)| a),
            sched,
            self.weight_in.load(Relaxed).min(u32::from(u16::MAX)) as u16,
            Instant::now(),
        );
        p.remote_fixed = self.remote_fixed;
        p.interface.clone_from(&self.interface);
        p.follow = self.follow;
        p.from_config = self.from_config;
        p.path_seq.store(self.path_seq.load(Relaxed), Relaxed);
        for (new, old) in [
            (&p.tx_packets, &self.tx_packets),
            (&p.tx_bytes, &self.tx_bytes),
            (&p.tx_data_packets, &self.tx_data_packets),
            (&p.tx_data_bytes, &self.tx_data_bytes),
            (&p.rx_packets, &self.rx_packets),
            (&p.rx_bytes, &self.rx_bytes),
            (&p.rx_data_packets, &self.rx_data_packets),
            (&p.rx_data_bytes, &self.rx_data_bytes),
            (&p.state_changes, &self.state_changes),
        ] {
            new.add(old.get());
        }
        *match p.view.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        } = self.view();
        p
    }

    pub fn note_owd(&self, owd_us: u32) {
        let _kept_if_not_lower = self.rx_summary_owd.fetch_update(Relaxed, Relaxed, |old| {
            if old == NO_OWD || ((owd_us.wrapping_sub(old as u32)) as i32) < 0 {
                Some(u64::from(owd_us))
            } else {
                None
            }
        });
    }

    /// Takes the lowest one-way delay noted since the last call.
    pub fn take_owd(&self) -> Option<u32> {
        let v = self.rx_summary_owd.swap(NO_OWD, Relaxed);
        (v != NO_OWD).then_some(v as u32)
    }

    /// Marks the path removed (it drains, then leaves the table).
    pub fn mark_removed(&self) {
        self.removed.store(true, Relaxed);
    }

    /// Whether the path was removed and only drains.
    pub fn is_removed(&self) -> bool {
        self.removed.load(Relaxed)
    }

    /// The remote address, if known.
    pub fn remote(&self) -> Option<(SocketAddr, SockAddr)> {
        self.remote_via().map(|r| (r.addr, r.sock))
    }

    /// The remote address with the local one to send from, if known.
    pub fn remote_via(&self) -> Option<Remote> {
        match self.remote.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The local address sends on this path leave from, if pinned (a
    /// learnt path of a shared port).
    pub fn via(&self) -> Option<Source> {
        self.remote_via().and_then(|r| r.via)
    }

    /// Learns the remote address from a valid datagram (not for fixed
    /// remotes), and `to`, our address it was sent to, if the socket
    /// reports it. Returns true if the remote changed (a new `to` alone
    /// is taken silently).
    pub fn learn_remote(&self, from: SocketAddr, to: Option<Source>) -> bool {
        if self.remote_fixed {
            return false;
        }
        let mut g = match self.remote.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        match g.as_mut() {
            Some(r) if r.addr == from => {
                if to.is_some() && r.via != to {
                    r.via = to;
                }
                false
            }
            _ => {
                *g = Some(Remote {
                    addr: from,
                    sock: SockAddr::from(from),
                    via: to,
                });
                true
            }
        }
    }

    /// Scheduling parameters as of now.
    pub fn sched(&self) -> SchedPath {
        SchedPath {
            weight: self.weight_out.load(Relaxed),
            window: self.window.load(Relaxed),
        }
    }

    /// The published view.
    pub fn view(&self) -> PathView {
        match self.view.lock() {
            Ok(g) => *g,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }
}

/// The paths of a connection: slot `i` holds the path with id `i`.
#[derive(Debug, Default, Clone)]
pub struct PathTable {
    slots: Vec<Option<Arc<PathShared>>>,
}

impl PathTable {
    /// A table of the given paths (each at its id).
    pub fn new(paths: impl IntoIterator<Item = PathShared>) -> PathTable {
        let mut t = PathTable::default();
        for p in paths {
            t.insert(Arc::new(p));
        }
        t
    }

    /// Puts `path` at its id (replacing what was there).
    pub fn insert(&mut self, path: Arc<PathShared>) {
        let id = path.id;
        if self.slots.len() <= id {
            self.slots.resize_with(id + 1, || None);
        }
        self.slots[id] = Some(path);
    }

    /// Takes the path with id `id` out.
    pub fn remove(&mut self, id: usize) -> Option<Arc<PathShared>> {
        let p = self.slots.get_mut(id).and_then(Option::take);
        while self.slots.last().is_some_and(Option::is_none) {
            self.slots.pop();
        }
        p
    }

    /// The path with id `id`.
    pub fn get(&self, id: usize) -> Option<&Arc<PathShared>> {
        self.slots.get(id).and_then(Option::as_ref)
    }

    /// The path named `name` that is not being removed.
    pub fn find_live(&self, name: &str) -> Option<&Arc<PathShared>> {
        self.iter().find(|p| p.name == name && !p.is_removed())
    }

    /// The paths in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<PathShared>> + '_ {
        self.slots.iter().flatten()
    }

    /// One more than the highest id in use (the length of id-indexed
    /// arrays).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// How many paths.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// No paths at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The transmit workers' wake-up events (one per worker).
#[derive(Clone)]
pub struct TxWakes(pub Arc<Vec<Arc<tun_rs::InterruptEvent>>>);

impl std::fmt::Debug for TxWakes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TxWakes({})", self.0.len())
    }
}

/// One connection as the workers see it.
#[derive(Debug)]
pub struct ConnShared {
    /// Index in the daemon.
    pub index: usize,
    /// Name from the config.
    pub name: String,
    /// Connection id on the wire.
    pub conn_id: u32,
    /// Origin of wire timestamps and receive-summary times.
    pub epoch: Instant,
    /// Next connection sequence number.
    pub seq: AtomicU64,
    /// Transmit batches number and send in one order, so every path stays
    /// FIFO with several transmit workers (see [`crate::tx_order`]).
    pub tx_order: crate::tx_order::TxOrder,
    /// Bit mask of paths the schedulers may use (published by the control
    /// loop from the session's eligibility).
    pub eligible: AtomicU64,
    /// The paths (see [`ConnShared::paths`]).
    paths: RwLock<Arc<PathTable>>,
    /// Bumped whenever `paths` is replaced.
    paths_generation: AtomicU64,
    /// Wakes the receive worker when `paths` changes.
    pub rx_wake: Waker,
    /// Wakes the transmit workers when `paths` changes.
    tx_wake: TxWakes,
    /// Drop counters.
    pub drops: Drops,
    /// Encryption, when the connection has a `key_file`.
    pub crypto: Option<ConnCrypto>,
    /// Inner source addresses this peer may send from: its tunnel
    /// addresses and `networks`.
    pub allowed_sources: SourceFilter,
    /// Puts received data back in sequence order. Locked once per receive
    /// batch; tun writes of a connection happen under it, so they leave in
    /// order.
    pub reseq: Mutex<Resequencer>,
    /// When the resequencer's oldest gap times out, in ns since `epoch`
    /// (0 = nothing held). Lets idle receive workers sleep exactly so long.
    pub reseq_deadline_ns: AtomicU64,
    /// Gap timeout in µs, set by the control loop from the paths' RTTs.
    pub reseq_timeout_us: AtomicU64,
    /// Transmit workers schedule with `adaptive` (else `weighted`).
    pub adaptive: AtomicBool,
    /// The one-way delay (µs, wrapping, receive clock − sender timestamp)
    /// of the slowest path carrying data, to which the receive worker
    /// holds faster paths' data; 0 = none (see `equalize`).
    pub equalize_owd_us: AtomicU64,
    /// How far `equalize_owd_us` lies above the fastest path's delay (µs;
    /// 0 = no hold), for `mpt status`.
    pub equalize_spread_us: AtomicU64,
    /// The same as `equalize_owd_us` with every usable far path counted,
    /// whether it brings data or not: what full-size datagrams and TCP
    /// SYNs are held to (see `mpt_proto::session::timing::equalize_target`).
    pub equalize_bulk_owd_us: AtomicU64,
    /// How far `equalize_bulk_owd_us` lies above the fastest path's delay.
    pub equalize_bulk_spread_us: AtomicU64,
    /// Spread of the one-way delays measured on the paths that bring data
    /// (slowest − fastest, µs; `u64::MAX` = fewer than two such paths):
    /// how long resequencing must at least hold data that overtook, set by
    /// the control loop (see `mpt_proto::session::timing::rx_delay_spread`).
    pub rx_spread_us: AtomicU64,
    /// Per path id: the resequencer's wait for it in µs (see
    /// `mpt_proto::session::timing::path_waits`), `u32::MAX` = none; set by the control
    /// loop, taken by the receive worker when `path_waits_gen` moved.
    pub path_waits_us: [AtomicU32; mpt_proto::sched::MAX_PATHS],
    /// Bumped when `path_waits_us` changed.
    pub path_waits_gen: AtomicU64,
    /// `path_waits_gen` the resequencer last took (under its lock).
    pub path_waits_applied: AtomicU64,
    /// Control loop only: `repairs.requested_datagrams` as last seen, and
    /// when it last grew (random loss on a path we receive on).
    pub random_loss_seen: Mutex<(u64, Option<Instant>)>,
    /// Loss repair is on (`repair` in the config).
    pub repair: AtomicBool,
    /// What gets a second copy (see `mpt_proto::sched::Redundancy`): 0
    /// auto, 1 off, 2 all.
    pub redundancy: std::sync::atomic::AtomicU8,
    /// What redundancy did.
    pub copies: CopyCounters,
    /// What delay equalisation did.
    pub equalized: EqualizeCounters,
    /// Paths that are suspect or down (bit per path id): the receive
    /// worker stops counting them in the resequencer's loss proof.
    pub silent_paths: AtomicU64,
    /// What loss repair did.
    pub repairs: RepairCounters,
    /// Handovers of our traffic off failed paths.
    pub handovers: HandoverRecord,
    /// A server's client connection: no path socket of its own; served by
    /// the shared port's workers, its paths learnt (`crate::shared`).
    pub client: bool,
    /// Client connections: the receive state the shared workers keep for
    /// it (replay windows, delay line, loss detectors), taken under this
    /// lock once per group of a batch. Created by the first worker.
    pub rx_state: Mutex<Option<Box<crate::rx::ConnRxState>>>,
    /// Removed by a reload: its datagrams are refused (and counted).
    pub removed: AtomicBool,
}

/// Handovers of a connection's outgoing traffic (see
/// `mpt_proto::session::HandoverTracker`), as the control loop saw them.
#[derive(Debug, Default)]
pub struct HandoverRecord {
    /// Handovers completed.
    pub count: Counter,
    last: Mutex<Option<LastHandover>>,
}

/// The latest handover, with path names as they were then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastHandover {
    /// The path that left service.
    pub from: String,
    /// The path that carried data next.
    pub to: String,
    /// From the last packet heard on `from` to the first data on `to`.
    pub gap: std::time::Duration,
    /// When it completed.
    pub at: Instant,
}

impl HandoverRecord {
    /// Records a completed handover.
    pub fn record(&self, last: LastHandover) {
        self.count.add(1);
        let mut g = self.last.lock().unwrap_or_else(|p| p.into_inner());
        *g = Some(last);
    }

    /// The latest handover, if any.
    pub fn last(&self) -> Option<LastHandover> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Redundancy counters of a connection: second copies of real-time
/// packets on another path.
#[derive(Debug, Default)]
pub struct CopyCounters {
    /// Copies sent.
    pub sent: Counter,
    /// Their bytes (UDP payload): the price of redundancy.
    pub sent_bytes: Counter,
    /// Copies that arrived before their original (the original was late
    /// or lost): what redundancy saved.
    pub first: Counter,
    /// Second arrivals of a copied packet, dropped as expected.
    pub duplicates: Counter,
}

/// Delay equalisation counters of a connection (see `crate::equalize`):
/// data held before the resequencer until the slowest path's delay.
#[derive(Debug, Default)]
pub struct EqualizeCounters {
    /// Data datagrams held (for at least `equalize::MIN_HOLD`).
    pub held: Counter,
    /// Their holds summed, µs.
    pub held_us: Counter,
}

impl ConnShared {
    /// The redundancy mode.
    pub fn redundancy(&self) -> mpt_proto::sched::Redundancy {
        match self.redundancy.load(Relaxed) {
            1 => mpt_proto::sched::Redundancy::Off,
            2 => mpt_proto::sched::Redundancy::All,
            _ => mpt_proto::sched::Redundancy::Auto,
        }
    }
}

/// Loss repair counters of a connection (see `repair`).
#[derive(Debug, Default)]
pub struct RepairCounters {
    /// Requests sent for holes judged random.
    pub requested: Counter,
    /// Datagrams those requests named.
    pub requested_datagrams: Counter,
    /// Holes while a queue stood: left to TCP.
    pub congestion_holes: Counter,
    /// Holes not asked for (request budget spent, run too long).
    pub unrequested: Counter,
    /// Holes that filled within the path's reorder window (overtaken
    /// datagrams, not losses).
    pub reordered_holes: Counter,
    /// Datagrams that arrived after their repair was asked for.
    pub needless: Counter,
    /// The peer's requests received.
    pub peer_requests: Counter,
    /// Copies sent in answer.
    pub sent: Counter,
    /// Requested datagrams no longer (or never) kept.
    pub missed: Counter,
    /// Copies received and delivered.
    pub received: Counter,
    /// Copies of datagrams that had arrived after all.
    pub duplicates: Counter,
}

impl ConnShared {
    /// A connection with these paths; the other fields as given.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        index: usize,
        name: String,
        conn_id: u32,
        epoch: Instant,
        paths: PathTable,
        crypto: Option<ConnCrypto>,
        allowed_sources: SourceFilter,
        reseq: Resequencer,
        reseq_timeout: std::time::Duration,
        rx_wake: Waker,
        tx_wake: TxWakes,
    ) -> ConnShared {
        ConnShared {
            index,
            name,
            conn_id,
            epoch,
            seq: AtomicU64::new(1),
            tx_order: crate::tx_order::TxOrder::new(),
            eligible: AtomicU64::new(0),
            paths: RwLock::new(Arc::new(paths)),
            paths_generation: AtomicU64::new(1),
            rx_wake,
            tx_wake,
            drops: Drops::default(),
            crypto,
            allowed_sources,
            reseq: Mutex::new(reseq),
            reseq_deadline_ns: AtomicU64::new(0),
            reseq_timeout_us: AtomicU64::new(reseq_timeout.as_micros() as u64),
            adaptive: AtomicBool::new(true),
            equalize_owd_us: AtomicU64::new(0),
            equalize_spread_us: AtomicU64::new(0),
            equalize_bulk_owd_us: AtomicU64::new(0),
            equalize_bulk_spread_us: AtomicU64::new(0),
            rx_spread_us: AtomicU64::new(u64::MAX),
            path_waits_us: std::array::from_fn(|_| AtomicU32::new(u32::MAX)),
            path_waits_gen: AtomicU64::new(0),
            path_waits_applied: AtomicU64::new(0),
            random_loss_seen: Mutex::new((0, None)),
            repair: AtomicBool::new(true),
            silent_paths: AtomicU64::new(0),
            redundancy: std::sync::atomic::AtomicU8::new(0),
            copies: CopyCounters::default(),
            equalized: EqualizeCounters::default(),
            repairs: RepairCounters::default(),
            handovers: HandoverRecord::default(),
            client: false,
            rx_state: Mutex::new(None),
            removed: AtomicBool::new(false),
        }
    }

    /// The current paths.
    pub fn paths(&self) -> Arc<PathTable> {
        match self.paths.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Generation of the path table: changes whenever it is replaced.
    pub fn paths_generation(&self) -> u64 {
        self.paths_generation.load(Relaxed)
    }

    /// Refreshes a worker's copy of the path table if it changed since
    /// `generation`; returns whether it did.
    pub fn refresh_paths(&self, table: &mut Arc<PathTable>, generation: &mut u64) -> bool {
        let now = self.paths_generation();
        if now == *generation {
            return false;
        }
        *generation = now;
        *table = self.paths();
        true
    }

    /// Replaces the path table (control loop only).
    pub fn set_paths(&self, table: PathTable) {
        let table = Arc::new(table);
        match self.paths.write() {
            Ok(mut g) => *g = table,
            Err(poisoned) => *poisoned.into_inner() = table,
        }
        self.paths_generation.fetch_add(1, Relaxed);
        self.rx_wake.wake();
        for w in self.tx_wake.0.iter() {
            let _ = w.trigger();
        }
    }

    /// Publishes the resequencer's per-path waits (control loop).
    pub fn publish_path_waits(&self, waits: &[Option<std::time::Duration>]) {
        let mut changed = false;
        for (slot, w) in self.path_waits_us.iter().zip(waits) {
            let us = w.map_or(u32::MAX, |d| {
                d.as_micros().min(u128::from(u32::MAX - 1)) as u32
            });
            if slot.swap(us, Relaxed) != us {
                changed = true;
            }
        }
        if changed {
            self.path_waits_gen.fetch_add(1, Relaxed);
        }
    }

    /// Gives the resequencer (locked by the caller) the waits published
    /// last, if they changed since it got them (receive worker, once per
    /// batch).
    pub fn apply_path_waits(&self, reseq: &mut Resequencer) {
        let gen = self.path_waits_gen.load(Relaxed);
        if self.path_waits_applied.swap(gen, Relaxed) == gen {
            return;
        }
        for (id, slot) in self.path_waits_us.iter().enumerate() {
            let wait = match slot.load(Relaxed) {
                u32::MAX => None,
                us => Some(std::time::Duration::from_micros(u64::from(us))),
            };
            reseq.set_path_wait(id, wait);
        }
    }

    /// Locks the resequencer (a panicked holder leaves it usable).
    pub fn lock_reseq(&self) -> std::sync::MutexGuard<'_, Resequencer> {
        match self.reseq.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// The connections (by index) and the router to them.
pub type ConnsAndRouter = (Arc<Vec<Arc<ConnShared>>>, Arc<crate::route::Router>);

/// The connections and the routes to them, as the workers and the status
/// read them. The control loop replaces the whole (a client connection
/// added or removed by a reload) and bumps the generation; transmit
/// workers compare it once per batch, as with a path table. Connections
/// keep their index for good: a removed one stays in the list, marked
/// [`ConnShared::removed`], without routes, keys or paths.
#[derive(Debug)]
pub struct ConnSet {
    current: RwLock<ConnsAndRouter>,
    generation: AtomicU64,
}

impl ConnSet {
    /// The set as the daemon starts with it.
    pub fn new(list: Arc<Vec<Arc<ConnShared>>>, router: Arc<crate::route::Router>) -> ConnSet {
        ConnSet {
            current: RwLock::new((list, router)),
            generation: AtomicU64::new(1),
        }
    }

    /// The connections and the router.
    pub fn load(&self) -> ConnsAndRouter {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The connections (removed ones included; see [`ConnShared::removed`]).
    pub fn list(&self) -> Arc<Vec<Arc<ConnShared>>> {
        self.load().0
    }

    /// Changes whenever the set is replaced.
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// Replaces the set (control loop only) and wakes the transmit
    /// workers, whose idle tun reads would otherwise hold the old one.
    pub fn publish(&self, list: Arc<Vec<Arc<ConnShared>>>, router: Arc<crate::route::Router>) {
        let wakes = list.first().map(|c| c.tx_wake.0.clone());
        match self.current.write() {
            Ok(mut g) => *g = (list, router),
            Err(poisoned) => *poisoned.into_inner() = (list, router),
        }
        self.generation.fetch_add(1, Relaxed);
        for w in wakes.iter().flat_map(|w| w.iter()) {
            let _ = w.trigger();
        }
    }
}
