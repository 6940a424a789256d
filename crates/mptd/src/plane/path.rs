//! A path as both planes see it: its socket, remote, published
//! eligibility and the receive summary its worker writes ([`PathShared`]),
//! and a connection's immutable table of paths ([`PathTable`]).

use crate::io::source::Source;
use crate::io::udp::PathSocket;
use crate::sync::Counter;
use crate::sync::{lock_unpoisoned, read_unpoisoned, write_unpoisoned};
use mpt_proto::sched::SchedPath;
use mpt_proto::seq::seq_before;
use socket2::SockAddr;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
/// `rx_summary_owd` when no one-way delay was measured.
pub const NO_OWD: u64 = u64::MAX;

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
/// `crate::io::source`).
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
    /// The configured remote is this host name: the control loop resolves
    /// it and sets the address ([`PathShared::set_remote`]; see
    /// `crate::control::names`).
    pub remote_name: Option<String>,
    /// Why `remote_name` did not give an address at its last lookup
    /// (`None`: it did, or it was not looked up yet). Shown in status.
    pub resolve_error: Mutex<Option<String>>,
    /// The device the socket is bound to.
    pub interface: Option<String>,
    /// Interface-only path: bound to `interface`'s current address, moved
    /// when it changes (see `crate::control::links`).
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
    pub model: crate::plane::model::SharedModel,
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
            remote_name: None,
            resolve_error: Mutex::new(None),
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
            model: crate::plane::model::SharedModel::default(),
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
        p.remote_name.clone_from(&self.remote_name);
        *lock_unpoisoned(&p.resolve_error) = self.resolve_error();
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
        *lock_unpoisoned(&p.view) = self.view();
        p
    }

    pub fn note_owd(&self, owd_us: u32) {
        let _kept_if_not_lower = self.rx_summary_owd.fetch_update(Relaxed, Relaxed, |old| {
            if old == NO_OWD || seq_before(owd_us, old as u32) {
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
        read_unpoisoned(&self.remote).clone()
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
        let mut g = write_unpoisoned(&self.remote);
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

    /// Sets the remote address that the path's host name resolved to
    /// (the workers take it at their next batch, as a learnt one). Returns
    /// true if it changed.
    pub fn set_remote(&self, addr: SocketAddr) -> bool {
        let mut g = write_unpoisoned(&self.remote);
        if g.as_ref().is_some_and(|r| r.addr == addr) {
            return false;
        }
        *g = Some(Remote {
            addr,
            sock: SockAddr::from(addr),
            via: None,
        });
        true
    }

    /// A named remote that never resolved yet: the path has nowhere to
    /// send, so it is held down (`crate::control::links`).
    pub fn awaits_name(&self) -> bool {
        self.remote_name.is_some() && self.remote().is_none()
    }

    /// Why the path's host name did not resolve at its last lookup.
    pub fn resolve_error(&self) -> Option<String> {
        lock_unpoisoned(&self.resolve_error).clone()
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
        *lock_unpoisoned(&self.view)
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
