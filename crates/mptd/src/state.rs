//! State shared between the data-plane workers and the control loop.
//!
//! The hot path never takes a lock per packet. Workers read what they need
//! once per batch (eligible-path mask, weights, remote address) and add to
//! counters once per batch. Only the control loop writes liveness-derived
//! state; only a path's receive worker writes its receive summary.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use mpt_proto::crypto::{Psk, SessionKeys};
use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::SchedPath;
use socket2::SockAddr;

use crate::udp::PathSocket;

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
}

/// Encryption state of a connection with a `key_file`.
#[derive(Debug)]
pub struct ConnCrypto {
    /// The pre-shared key.
    pub psk: Psk,
    /// Current session keys, published by the control loop after a
    /// handshake; workers read them once per batch.
    keys: RwLock<Option<Arc<SessionKeys>>>,
    /// Handshakes completed (either role).
    pub handshakes: Counter,
}

impl ConnCrypto {
    /// Crypto state with no session yet.
    pub fn new(psk: Psk) -> ConnCrypto {
        ConnCrypto {
            psk,
            keys: RwLock::new(None),
            handshakes: Counter::default(),
        }
    }

    /// The current session keys, if a handshake completed.
    pub fn keys(&self) -> Option<Arc<SessionKeys>> {
        match self.keys.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Installs new session keys.
    pub fn install(&self, keys: SessionKeys) {
        let keys = Some(Arc::new(keys));
        match self.keys.write() {
            Ok(mut g) => *g = keys,
            Err(poisoned) => *poisoned.into_inner() = keys,
        }
        self.handshakes.add(1);
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
}

/// One path as the workers see it.
#[derive(Debug)]
pub struct PathShared {
    /// Index in the connection.
    pub index: usize,
    /// Name from the config.
    pub name: String,
    /// The bound UDP socket.
    pub socket: PathSocket,
    /// Local address.
    pub local: SocketAddr,
    /// Remote address, configured or learnt. Read once per batch.
    remote: RwLock<Option<(SocketAddr, SockAddr)>>,
    /// Whether the remote address came from the config (never relearnt).
    pub remote_fixed: bool,
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
    /// Datagrams received and accepted (all types).
    pub rx_packets: Counter,
    /// Bytes received and accepted.
    pub rx_bytes: Counter,
    /// Data datagrams received and accepted.
    pub rx_data_packets: Counter,
    /// Failed tun writes of data received on this path.
    pub tun_write_errors: Counter,
    /// Data datagrams received since the control loop last looked.
    pub rx_summary_packets: AtomicU32,
    /// Highest path sequence among them.
    pub rx_summary_highest: AtomicU32,
    /// When the last one arrived, in ns since the connection epoch.
    pub rx_summary_last_ns: AtomicU64,
    /// Status published by the control loop.
    pub view: Mutex<PathView>,
}

impl PathShared {
    /// A path around a bound socket.
    pub fn new(
        index: usize,
        name: String,
        socket: PathSocket,
        remote: Option<SocketAddr>,
        sched: SchedPath,
        weight_in: u16,
        now: Instant,
    ) -> PathShared {
        PathShared {
            index,
            name,
            local: socket.local_addr(),
            socket,
            remote: RwLock::new(remote.map(|a| (a, SockAddr::from(a)))),
            remote_fixed: remote.is_some(),
            path_seq: AtomicU32::new(1),
            weight_out: AtomicU32::new(sched.weight),
            window: AtomicU32::new(sched.window),
            weight_in: AtomicU32::new(u32::from(weight_in)),
            tx_packets: Counter::default(),
            tx_bytes: Counter::default(),
            tx_data_packets: Counter::default(),
            rx_packets: Counter::default(),
            rx_bytes: Counter::default(),
            rx_data_packets: Counter::default(),
            tun_write_errors: Counter::default(),
            rx_summary_packets: AtomicU32::new(0),
            rx_summary_highest: AtomicU32::new(0),
            rx_summary_last_ns: AtomicU64::new(0),
            view: Mutex::new(PathView {
                state: "probing",
                rtt_ms: None,
                rtt_min_ms: None,
                loss_pct: None,
                last_change: now,
                last_rx: None,
                peer_weight_in: None,
            }),
        }
    }

    /// The remote address, if known.
    pub fn remote(&self) -> Option<(SocketAddr, SockAddr)> {
        match self.remote.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Learns the remote address from a valid datagram (not for fixed
    /// remotes). Returns true if it changed.
    pub fn learn_remote(&self, from: SocketAddr) -> bool {
        if self.remote_fixed {
            return false;
        }
        let mut g = match self.remote.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if g.as_ref().is_some_and(|(a, _)| *a == from) {
            return false;
        }
        *g = Some((from, SockAddr::from(from)));
        true
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
    /// Bit mask of paths the schedulers may use (published by the control
    /// loop from the session's eligibility).
    pub eligible: AtomicU64,
    /// The paths, by index.
    pub paths: Vec<PathShared>,
    /// Drop counters.
    pub drops: Drops,
    /// Encryption, when the connection has a `key_file`.
    pub crypto: Option<ConnCrypto>,
    /// Puts received data back in sequence order. Locked once per receive
    /// batch; tun writes of a connection happen under it, so they leave in
    /// order.
    pub reseq: Mutex<Resequencer>,
    /// When the resequencer's oldest gap times out, in ns since `epoch`
    /// (0 = nothing held). Lets idle receive workers sleep exactly so long.
    pub reseq_deadline_ns: AtomicU64,
    /// Gap timeout in µs, set by the control loop from the paths' RTTs.
    pub reseq_timeout_us: AtomicU64,
}

impl ConnShared {
    /// Locks the resequencer (a panicked holder leaves it usable).
    pub fn lock_reseq(&self) -> std::sync::MutexGuard<'_, Resequencer> {
        match self.reseq.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}
