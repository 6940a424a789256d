//! Stage 2 of the data plane: receive on a path → check → resequence →
//! write tun.
//!
//! Client connections on a shared port are served by [`SharedRxWorker`]s
//! instead (a fixed pool; see `crate::shared` for why): they sort each
//! batch by connection and path and handle each group as below, with the
//! connection's receive state ([`ConnRxState`]) taken from the connection.
//!
//! One receive worker per connection, reading all of the connection's path
//! sockets in turn (a poll over them when all are empty). One worker per
//! connection, not per path: a connection's data must leave in sequence
//! order, and two workers sharing one resequencer starved each other on a
//! 2-core machine (gaps timed out while the other worker waited for the
//! lock). Connections scale across cores, and so does one connection's
//! opening: with a key, the sealed datagrams of a batch are opened in place
//! by the crypto stage (`crate::crypto_pool`, `open_batch`) before the
//! worker goes through them in order; the replay window of the key that
//! opened each is checked and updated then, in batch order.
//!
//! A batch is one `recvmmsg` on one socket. Each
//! datagram is checked (header, connection, inner IP packet) without
//! copying; probes and replies (a few per second) go to the control loop
//! through a bounded queue; everything else that fails is dropped and
//! counted by reason. Without a key, only datagrams from the path's
//! configured remote address and port are looked at, control messages are
//! refused and no address is ever learnt; data whose inner source address
//! the peer is not routed for is refused either way. Then, under the
//! connection's resequencer lock (once
//! per batch), data is put back in connection-sequence order and written to
//! tun with `send_multiple`, which coalesces a flow's TCP segments into few
//! writes. Nothing received from the network can make this loop panic or
//! allocate.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::crypto::{ReplayWindow, SessionKeys, TAG_LEN};
use mpt_proto::flow::is_tcp_syn;
use mpt_proto::reorder::{Resequencer, REORDER_GRACE};
use mpt_proto::repair::{DetectorStats, HoleEvent, LossDetector};
use mpt_proto::wire::{
    check_ip_packet, flow_predecessor, split_flow_prefix, Flags, Header, MsgType, Nack, Repair,
    FLOW_PREFIX_LEN, HEADER_LEN, MAX_DATAGRAM, REPAIR_PREFIX_LEN,
};
use mpt_proto::{DecodeError, Transmit};

/// Which of the connection's key sets (see `ConnCrypto`) a receive slot
/// holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyRole {
    /// Seals; opens first.
    Current,
    /// Answered handshake awaiting confirmation: the first datagram it
    /// opens makes it current.
    Pending,
    /// Before the last switch: opens stragglers for a while.
    Previous,
}

/// One key set as the worker holds it, with its own replay window.
struct RxKey {
    role: KeyRole,
    keys: Arc<SessionKeys>,
    replay: ReplayWindow,
}

/// Receive-side crypto state of the worker: the key sets it last saw, in
/// the order they are tried, each with its replay window (kept as long as
/// the same keys stay, whatever their role).
struct RxCrypto {
    /// Boxed: a shared worker swaps in the slots of the connection whose
    /// datagrams it handles (a pointer swap).
    slots: Box<[Option<RxKey>; 3]>,
    /// `ConnCrypto::generation` of `slots`.
    generation: u64,
    /// The peer was seen sealing with the current keys.
    peer_on_current: bool,
    /// A copy of the datagram being opened when more than one key set may
    /// be tried (a failed open leaves the buffer garbled). Allocated once.
    scratch: Vec<u8>,
    /// Control messages of the current batch, handed over only after the
    /// batch's data summary is stored: a probe's report must never count
    /// less data than arrived before it (that would read as loss).
    pending: Vec<ControlDatagram>,
    /// The batch's datagrams as handed to the crypto stage, one per
    /// datagram in batch order (allocated once).
    opens: Vec<OpenItem>,
    /// This worker's way into the crypto stage.
    submitter: Submitter,
}

/// A datagram of a batch as the crypto stage opens it: where it is, which
/// key slots may open it, which did. Filled in batch order before the
/// parallel part, read in the same order after it.
#[derive(Debug, Clone, Copy)]
struct OpenItem {
    /// The datagram, inside one of the worker's receive buffers.
    ptr: *mut u8,
    len: usize,
    /// Slots (bit i: `RxCrypto::slots[i]`) whose replay window accepted
    /// the sequence number before the batch; 0: not for the crypto stage
    /// (not sealed, not ours, or no slot may take it): opened, or refused,
    /// inline as before.
    candidates: u8,
    /// Some slot's window refused it before the batch.
    replayed: bool,
    /// The slot whose keys opened it, or [`NOT_OPENED`].
    opened: u8,
}

/// `OpenItem::opened` of a datagram no candidate key opened.
const NOT_OPENED: u8 = u8::MAX;

// SAFETY: `ptr` points into a receive buffer the worker owns and lends to
// the crypto stage only for the duration of `Submitter::run`; each item's
// bytes are disjoint from every other item's.
unsafe impl Send for OpenItem {}

/// Most datagrams one batch hands to the crypto stage: UDP GRO coalesces
/// at most 64 datagrams per message (UDP_GRO_CNT_MAX); beyond this
/// (never, in practice) the rest are opened inline.
const MAX_OPENS: usize = RECV_MESSAGES * 64;
/// The receive worker's part of loss repair: a detector per path, and
/// the messages to send once the batch is done.
struct RxRepair {
    detectors: Vec<LossDetector>,
    /// Per path: how long a hole asked for may wait for its copy (set
    /// from the path's RTT with each of its batches).
    waits: Vec<Duration>,
    /// The earliest hole decision of any detector (none: nothing to decide).
    due: Option<Instant>,
    /// When the resequencer's reorder grace was last set from the
    /// detectors' windows.
    grace_set: Option<Instant>,
    /// Requests to send: on which path, for what.
    requests: Vec<(usize, Nack)>,
    /// The peer's requests to answer: received on which path.
    answers: Vec<(usize, Nack)>,
    /// Buffer to build a message in.
    out: Vec<u8>,
}

/// Requests or answers queued per batch at most (more are dropped: the
/// detector's budget keeps ours far below).
const REPAIR_QUEUE: usize = 32;

use tun_rs::SyncDevice;

use crate::tun_write::Coalescer;

use crate::crypto_pool::{CryptoPool, Submitter};
use crate::equalize::{DelayLine, Kind, Meta, MAX_HOLD, MIN_HOLD};
use crate::shared::{SessionMap, SharedStats};
use crate::source::Source;
use crate::state::{ConnShared, Counter, PathShared, PathTable};
use crate::udp::PathSocket;
use crate::udp::{RecvMeta, RECV_TIMEOUT};
use mpt_proto::noise::Mac1Check;

/// Length of a receive buffer: with UDP GRO the kernel coalesces up to
/// 64 KB of datagrams into one message.
const RECV_LEN: usize = 65536;

/// Messages per `recvmmsg`: 32 coalesced messages of up to 64 KB (2 MB of
/// buffers per connection) drain a busy socket in one call.
const RECV_MESSAGES: usize = 32;

/// Datagrams a path may hold for delay equalisation (1024 full-size
/// packets: 300 ms of a 40 Mbit/s path).
const EQUALIZE_SLOTS: usize = 1024;

/// Largest message handed to the control loop (handshake messages are:
/// a Noise initiation is 168 bytes).
pub const CONTROL_DATAGRAM_MAX: usize = mpt_proto::noise::INITIATION_LEN;

/// `ControlDatagram::conn` of a Noise initiation read on a shared port:
/// it names no connection (the control loop finds it by the static key).
pub const SHARED_INITIATION: usize = usize::MAX - 1;

/// A probe, reply or handshake message handed to the control loop. Sealed
/// probes and replies arrive opened, with the SEALED flag cleared.
#[derive(Debug, Clone, Copy)]
pub struct ControlDatagram {
    /// Connection index.
    pub conn: usize,
    /// Path index.
    pub path: usize,
    /// When it arrived.
    pub at: Instant,
    /// Its source address.
    pub from: Option<SocketAddr>,
    /// Our address it was sent to (shared ports; see `crate::source`).
    pub to: Option<Source>,
    /// The shared port it arrived on, for a Noise initiation read there
    /// (`conn` is then [`SHARED_INITIATION`]); 0 otherwise.
    pub port: u16,
    /// Length of `bytes` used; 0: a notice that a client connection's path
    /// `path` was heard from `from` and needs adding (or moving).
    pub len: usize,
    /// The datagram.
    pub bytes: [u8; CONTROL_DATAGRAM_MAX],
}

/// Everything a receive worker needs.
pub struct RxWorker {
    /// The connection.
    pub conn: Arc<ConnShared>,
    /// Tun queue to write to.
    pub tun: Arc<SyncDevice>,
    /// Queue to the control loop.
    pub control: SyncSender<ControlDatagram>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// The crypto stage, shared with every other worker.
    pub crypto_pool: Arc<CryptoPool>,
}

/// What one datagram of a batch turned out to be.
#[derive(Debug, Clone, Copy)]
enum Verdict {
    /// Data for tun with this connection sequence number; with the FLOW
    /// flag, the flow predecessor it waits for (`Some(None)`: none).
    Data(u64, Option<Option<u64>>),
    /// A repair: its own sequence number (consumed like a probe's), and
    /// the data it carries as [`Verdict::Data`] would.
    Repair(u64, u64, Option<Option<u64>>),
    /// A valid sequence number without data for tun (probe, reply, bad
    /// inner packet): the resequencer must not wait for it.
    Skip(u64),
    /// Nothing to do with the sequence (dropped before trusting it).
    Drop,
}

/// Packets released in order, waiting to be written to tun.
struct Staging {
    coalescer: Coalescer,
    errors_logged: u32,
}

impl Staging {
    fn new(tun: &SyncDevice) -> Staging {
        Staging {
            coalescer: Coalescer::new(tun.tcp_gso(), tun.udp_gso()),
            errors_logged: 0,
        }
    }

    fn push(&mut self, packet: &[u8], tun: &SyncDevice, errors: &Counter) {
        let mut logged = self.errors_logged;
        let r = self
            .coalescer
            .push(packet, &mut |f| write_tun(tun, f, errors, &mut logged));
        self.errors_logged = logged;
        debug_assert!(r.is_ok());
    }

    fn flush(&mut self, tun: &SyncDevice, errors: &Counter) {
        if self.coalescer.is_empty() {
            return;
        }
        let mut logged = self.errors_logged;
        let r = self
            .coalescer
            .flush(&mut |f| write_tun(tun, f, errors, &mut logged));
        self.errors_logged = logged;
        debug_assert!(r.is_ok());
    }
}

/// One write to tun (a frame with its virtio header when the device takes
/// one); a failure is counted, logged ten times at most, and fatal only if
/// the device is gone. Never fails: a packet tun refuses is dropped.
fn write_tun(tun: &SyncDevice, frame: &[u8], errors: &Counter, logged: &mut u32) -> io::Result<()> {
    if let Err(e) = tun.send(frame) {
        errors.add(1);
        if crate::fatal::tun_is_gone(&e) {
            crate::fatal::fatal(format!("tun device unusable (write: {e}); was it deleted?"));
        }
        if *logged < 10 {
            *logged += 1;
            tracing::warn!(error = %e, "tun write failed");
        }
    }
    Ok(())
}

impl RxWorker {
    /// Runs until shutdown.
    pub fn run(self) {
        let conn = &*self.conn;
        let rx = Rx {
            conn,
            tun: &self.tun,
            control: &self.control,
            shared: false,
        };
        let mut bufs: Vec<Vec<u8>> = (0..RECV_MESSAGES).map(|_| vec![0u8; RECV_LEN]).collect();
        let mut meta = [RecvMeta::default(); RECV_MESSAGES];
        let mut staging = Staging::new(&self.tun);
        let mut crypto = RxCrypto::new(self.crypto_pool.submitter());
        let mut st = ConnRxState::new(conn);
        let mut start = 0usize;
        while !self.shutdown.load(Relaxed) {
            st.refresh(conn);
            let ConnRxState {
                delay,
                repair,
                table,
                paths,
                ..
            } = &mut st;
            let mut busy = false;
            // Read every path once per round, starting one further each
            // round so no path is always first.
            for k in 0..paths.len() {
                let path = &paths[(start + k) % paths.len()];
                let n = match path.socket.recv_batch(&mut bufs, &mut meta) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        // ICMP errors surface here (port unreachable from a
                        // peer that is not up yet); they are not fatal.
                        tracing::trace!(conn = %conn.name, path = %path.name, error = %e, "recv error");
                        continue;
                    }
                };
                busy = true;
                rx.refresh_keys(&mut crypto);
                rx.handle_batch(
                    path.id,
                    Some(path),
                    &mut bufs[..n],
                    &meta[..n],
                    &mut staging,
                    &mut crypto,
                    delay,
                    repair,
                );
                rx.send_repairs(table, repair);
            }
            start = start.wrapping_add(1);
            // One tun write per round over all paths: the larger the run of
            // in-order segments, the more the tun writer can coalesce.
            staging.flush(&self.tun, &conn.drops.tun_write);
            if !busy {
                rx.idle(paths, &mut staging, delay, repair, table);
            }
        }
    }
}

/// A receive worker of the shared ports (see `crate::shared`): reads its
/// own SO_REUSEPORT socket of each shared port and family, and serves
/// every client connection whose datagrams reach it.
pub struct SharedRxWorker {
    /// This worker's sockets (per shared port: IPv4 and, if available,
    /// IPv6).
    pub sockets: Vec<PathSocket>,
    /// Session index → connection.
    pub map: Arc<SessionMap>,
    /// What the shared ports refused before knowing the connection.
    pub stats: Arc<SharedStats>,
    /// Tun queue to write to.
    pub tun: Arc<SyncDevice>,
    /// Queue to the control loop.
    pub control: SyncSender<ControlDatagram>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// The crypto stage, shared with every other worker.
    pub crypto_pool: Arc<CryptoPool>,
    /// Checks the mac1 of initiations before they are queued.
    pub mac1: Mac1Check,
}

/// A shared worker's buffers for sorting a batch by connection and path.
struct Sorter {
    /// Per kept message: (connection slot in `conns`, path id, index).
    order: Vec<(usize, u16, usize)>,
    /// The batch's connections, in first-seen order.
    conns: Vec<Arc<ConnShared>>,
    /// The messages in sorted order (the receive buffers moved here
    /// and back: pointer swaps, no copy).
    bufs: Vec<Vec<u8>>,
    meta: [RecvMeta; RECV_MESSAGES],
}

impl SharedRxWorker {
    /// Runs until shutdown.
    pub fn run(self) {
        let mut bufs: Vec<Vec<u8>> = (0..RECV_MESSAGES).map(|_| vec![0u8; RECV_LEN]).collect();
        let mut meta = [RecvMeta::default(); RECV_MESSAGES];
        let mut staging = Staging::new(&self.tun);
        let mut crypto = RxCrypto::new(self.crypto_pool.submitter());
        let mut sorter = Sorter {
            order: Vec::with_capacity(RECV_MESSAGES),
            conns: Vec::with_capacity(RECV_MESSAGES),
            bufs: (0..RECV_MESSAGES).map(|_| Vec::new()).collect(),
            meta: [RecvMeta::default(); RECV_MESSAGES],
        };
        // Connections with a gap or a delayed datagram pending: their
        // timeouts are this worker's to run (bounded by the connections
        // with data in flight, not by the clients).
        let mut timers: Vec<Arc<ConnShared>> = Vec::with_capacity(64);
        let mut start = 0usize;
        while !self.shutdown.load(Relaxed) {
            let mut busy = false;
            for k in 0..self.sockets.len() {
                let socket = &self.sockets[(start + k) % self.sockets.len()];
                let n = match socket.recv_batch(&mut bufs, &mut meta) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        tracing::trace!(local = %socket.local_addr(), error = %e, "recv error");
                        continue;
                    }
                };
                busy = true;
                self.batch(
                    socket.local_addr().port(),
                    &mut bufs[..n],
                    &meta[..n],
                    &mut sorter,
                    &mut staging,
                    &mut crypto,
                    &mut timers,
                );
            }
            start = start.wrapping_add(1);
            let next = self.run_timers(&mut timers, &mut staging);
            staging.flush(&self.tun, &self.stats.tun_write);
            if !busy {
                let wait = next.map_or(RECV_TIMEOUT, |t| {
                    t.saturating_duration_since(Instant::now())
                        .clamp(Duration::from_micros(100), RECV_TIMEOUT)
                });
                if let Err(e) = crate::udp::wait_any_readable(self.sockets.iter(), None, wait) {
                    tracing::debug!(error = %e, "poll failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }

    /// One `recvmmsg` of a shared socket: initiations to the control loop
    /// (after their mac1), the rest sorted by (connection, path, arrival)
    /// and handled group by group.
    #[allow(clippy::too_many_arguments)]
    fn batch(
        &self,
        port: u16,
        bufs: &mut [Vec<u8>],
        meta: &[RecvMeta],
        sorter: &mut Sorter,
        staging: &mut Staging,
        crypto: &mut RxCrypto,
        timers: &mut Vec<Arc<ConnShared>>,
    ) {
        let now = Instant::now();
        sorter.order.clear();
        sorter.conns.clear();
        {
            let map = self.map.read();
            for (i, (buf, m)) in bufs.iter().zip(meta).enumerate() {
                if m.truncated {
                    self.stats.malformed.add(1);
                    continue;
                }
                let Some(first) = m.datagrams(buf).next() else {
                    continue;
                };
                let header = match Header::parse(first) {
                    Ok((h, _)) => h,
                    Err(_) => {
                        self.stats.malformed.add(m.datagrams(buf).count() as u64);
                        continue;
                    }
                };
                if header.msg_type == MsgType::NoiseInitiation {
                    for dgram in m.datagrams(buf) {
                        self.initiation(dgram, m.from, m.to, port, now);
                    }
                    continue;
                }
                let Some(conn) = map.get(&header.conn_id) else {
                    self.stats
                        .unknown_session
                        .add(m.datagrams(buf).count() as u64);
                    continue;
                };
                let slot = match sorter.conns.iter().position(|c| Arc::ptr_eq(c, conn)) {
                    Some(slot) => slot,
                    None => {
                        sorter.conns.push(conn.clone());
                        sorter.conns.len() - 1
                    }
                };
                sorter.order.push((slot, header.path_id, i));
            }
        }
        // Unique keys (the index last): the order within a group is the
        // arrival order, without a stable (allocating) sort.
        sorter.order.sort_unstable();
        for (k, &(_, _, i)) in sorter.order.iter().enumerate() {
            std::mem::swap(&mut bufs[i], &mut sorter.bufs[k]);
            sorter.meta[k] = meta[i];
        }
        let mut a = 0;
        while a < sorter.order.len() {
            let (slot, path_id, _) = sorter.order[a];
            let mut b = a + 1;
            while b < sorter.order.len()
                && sorter.order[b].0 == slot
                && sorter.order[b].1 == path_id
            {
                b += 1;
            }
            if let Some(conn) = sorter.conns.get(slot) {
                self.group(
                    conn,
                    usize::from(path_id),
                    &mut sorter.bufs[a..b],
                    &sorter.meta[a..b],
                    staging,
                    crypto,
                    timers,
                );
            }
            a = b;
        }
        for (k, &(_, _, i)) in sorter.order.iter().enumerate() {
            std::mem::swap(&mut bufs[i], &mut sorter.bufs[k]);
        }
    }

    /// A Noise initiation read on a shared port: its mac1 checked here (a
    /// flood of bogus ones is dropped and counted at this cost), then
    /// queued for the control loop.
    fn initiation(
        &self,
        dgram: &[u8],
        from: Option<SocketAddr>,
        to: Option<Source>,
        port: u16,
        now: Instant,
    ) {
        if dgram.len() != mpt_proto::noise::INITIATION_LEN {
            self.stats.malformed.add(1);
            return;
        }
        if !self.mac1.check(dgram) {
            self.stats.bad_mac1.add(1);
            return;
        }
        let path = match Header::parse(dgram) {
            Ok((h, _)) => usize::from(h.path_id),
            Err(_) => return,
        };
        let mut msg = ControlDatagram {
            conn: SHARED_INITIATION,
            path,
            at: now,
            from,
            to,
            port,
            len: dgram.len(),
            bytes: [0; CONTROL_DATAGRAM_MAX],
        };
        msg.bytes[..dgram.len()].copy_from_slice(dgram);
        match self.control.try_send(msg) {
            Ok(()) => self.stats.initiations.add(1),
            Err(TrySendError::Full(_)) => self.stats.queue_full.add(1),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// One connection's datagrams of one path, under its receive state's
    /// lock (and, inside, its resequencer's): as a connection's own worker
    /// handles a batch.
    #[allow(clippy::too_many_arguments)]
    fn group(
        &self,
        conn: &Arc<ConnShared>,
        pi: usize,
        bufs: &mut [Vec<u8>],
        meta: &[RecvMeta],
        staging: &mut Staging,
        crypto: &mut RxCrypto,
        timers: &mut Vec<Arc<ConnShared>>,
    ) {
        if pi >= mpt_proto::sched::MAX_PATHS || conn.removed.load(Relaxed) {
            let n: usize = bufs
                .iter()
                .zip(meta)
                .map(|(b, m)| m.datagrams(b).count())
                .sum();
            if conn.removed.load(Relaxed) {
                self.stats.unknown_session.add(n as u64);
            } else {
                conn.drops.no_path.add(n as u64);
            }
            return;
        }
        let rx = Rx {
            conn,
            tun: &self.tun,
            control: &self.control,
            shared: true,
        };
        let mut guard = match conn.rx_state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let st = guard.get_or_insert_with(|| Box::new(ConnRxState::new(conn)));
        st.refresh(conn);
        st.swap_keys(crypto);
        rx.refresh_keys(crypto);
        let ConnRxState {
            delay,
            repair,
            table,
            ..
        } = &mut **st;
        let path = table.get(pi).filter(|p| !p.is_removed()).map(|p| &**p);
        rx.handle_batch(pi, path, bufs, meta, staging, crypto, delay, repair);
        rx.send_repairs(table, repair);
        let pending = delay.next_release().is_some()
            || conn.reseq_deadline_ns.load(Relaxed) != 0
            || repair.due.is_some();
        st.swap_keys(crypto);
        drop(guard);
        if pending && !timers.iter().any(|t| Arc::ptr_eq(t, conn)) {
            timers.push(conn.clone());
        }
    }

    /// Runs the due timeouts of the connections in `timers`; keeps those
    /// with more pending. Returns the next deadline.
    fn run_timers(
        &self,
        timers: &mut Vec<Arc<ConnShared>>,
        staging: &mut Staging,
    ) -> Option<Instant> {
        if timers.is_empty() {
            return None;
        }
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        timers.retain(|conn| {
            let mut guard = match conn.rx_state.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            let Some(st) = guard.as_mut() else {
                return false;
            };
            let rx = Rx {
                conn,
                tun: &self.tun,
                control: &self.control,
                shared: true,
            };
            match rx.timeouts(&mut st.delay, &mut st.repair, &st.table, staging, now) {
                Some(t) => {
                    next = Some(next.map_or(t, |n| n.min(t)));
                    true
                }
                None => false,
            }
        });
        next
    }
}

/// A connection's receive state beyond the resequencer: what a worker
/// keeps between batches. A connection with its own worker keeps it in
/// that worker; a client connection keeps it in `ConnShared::rx_state`,
/// for whichever shared worker gets its next datagrams.
pub struct ConnRxState {
    /// Key slots with their replay windows (client connections only: the
    /// shared worker swaps them into its [`RxCrypto`] for a group).
    slots: Box<[Option<RxKey>; 3]>,
    /// `ConnCrypto::generation` of `slots`.
    key_generation: u64,
    /// The peer was seen sealing with the current keys.
    peer_on_current: bool,
    /// Delay equalisation.
    delay: DelayLine,
    /// Loss repair.
    repair: RxRepair,
    /// Paths last seen suspect or down (see `ConnShared::silent_paths`).
    silent: u64,
    /// The path table, and its generation.
    table: Arc<PathTable>,
    table_generation: u64,
    /// The table's paths.
    paths: Vec<Arc<PathShared>>,
}

impl std::fmt::Debug for ConnRxState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnRxState")
            .field("paths", &self.paths.len())
            .finish_non_exhaustive()
    }
}

impl ConnRxState {
    /// Fresh state for `conn`.
    pub fn new(conn: &ConnShared) -> ConnRxState {
        ConnRxState {
            slots: Box::new([None, None, None]),
            key_generation: 0,
            peer_on_current: false,
            delay: DelayLine::new(EQUALIZE_SLOTS, conn.lock_reseq().slot_len()),
            repair: RxRepair {
                detectors: vec![LossDetector::new(); mpt_proto::sched::MAX_PATHS],
                waits: vec![Duration::ZERO; mpt_proto::sched::MAX_PATHS],
                due: None,
                grace_set: None,
                requests: Vec::with_capacity(REPAIR_QUEUE),
                answers: Vec::with_capacity(REPAIR_QUEUE),
                out: vec![0; MAX_DATAGRAM],
            },
            silent: 0,
            table: conn.paths(),
            table_generation: 0,
            paths: Vec::with_capacity(mpt_proto::sched::MAX_PATHS),
        }
    }

    /// Takes a changed path table and newly silent paths (once per batch).
    fn refresh(&mut self, conn: &ConnShared) {
        if conn.refresh_paths(&mut self.table, &mut self.table_generation) {
            // Paths that left the table no longer prove losses in the
            // resequencer (their slot may be reused by a new path).
            let mut reseq = conn.lock_reseq();
            for old in &self.paths {
                if self.table.get(old.id).is_none_or(|p| !Arc::ptr_eq(p, old)) {
                    reseq.forget_path(old.id);
                    if let Some(d) = self.repair.detectors.get_mut(old.id) {
                        *d = LossDetector::new();
                    }
                }
            }
            drop(reseq);
            self.paths.clear();
            self.paths.extend(self.table.iter().cloned());
        }
        let now_silent = conn.silent_paths.load(Relaxed);
        if now_silent != self.silent {
            // A path that fell silent proves no loss any more: what
            // the others deliver is not held waiting for it.
            let newly = now_silent & !self.silent;
            if newly != 0 {
                let mut reseq = conn.lock_reseq();
                for id in (0..64).filter(|id| newly & (1u64 << id) != 0) {
                    reseq.forget_path(id);
                }
            }
            self.silent = now_silent;
        }
    }

    /// Lends the key slots to a shared worker's `crypto` (and takes them
    /// back when called again with the same `crypto`).
    fn swap_keys(&mut self, crypto: &mut RxCrypto) {
        std::mem::swap(&mut self.slots, &mut crypto.slots);
        std::mem::swap(&mut self.key_generation, &mut crypto.generation);
        std::mem::swap(&mut self.peer_on_current, &mut crypto.peer_on_current);
    }
}

impl RxCrypto {
    fn new(submitter: Submitter) -> RxCrypto {
        RxCrypto {
            slots: Box::new([None, None, None]),
            generation: 0,
            peer_on_current: false,
            scratch: Vec::with_capacity(RECV_LEN),
            pending: Vec::with_capacity(RECV_MESSAGES),
            opens: Vec::with_capacity(MAX_OPENS),
            submitter,
        }
    }
}

/// What the checks of one connection's datagrams need: the connection,
/// where its data goes, where its control messages go.
struct Rx<'a> {
    conn: &'a ConnShared,
    tun: &'a SyncDevice,
    control: &'a SyncSender<ControlDatagram>,
    /// Read from a shared port: the path is the header's path id (checked
    /// after authentication), not the socket's.
    shared: bool,
}

impl Rx<'_> {
    /// Picks up changed key sets (checked once per batch); keys new to the
    /// worker start a new replay window.
    fn refresh_keys(&self, crypto: &mut RxCrypto) {
        let Some(c) = &self.conn.crypto else { return };
        let generation = c.generation();
        if generation == crypto.generation {
            return;
        }
        crypto.generation = generation;
        let set = c.key_set();
        crypto.peer_on_current = set.peer_on_current;
        let mut old = std::mem::take(&mut *crypto.slots);
        let wanted = [
            (KeyRole::Current, set.current),
            (KeyRole::Pending, set.pending),
            (KeyRole::Previous, set.previous),
        ];
        for (slot, (role, keys)) in crypto.slots.iter_mut().zip(wanted) {
            let Some(keys) = keys else { continue };
            let replay = old
                .iter_mut()
                .find(|o| o.as_ref().is_some_and(|o| Arc::ptr_eq(&o.keys, &keys)))
                .and_then(Option::take)
                .map_or_else(ReplayWindow::new, |o| o.replay);
            *slot = Some(RxKey { role, keys, replay });
        }
    }

    /// Opens a sealed datagram in place with the first key set that takes
    /// it (current, pending, previous), checking and then updating that
    /// set's replay window. Confirms pending keys that open it. Returns the
    /// slot of the key set that opened it; counts and returns `None` if
    /// none does.
    fn open_sealed(
        &self,
        dgram: &mut [u8],
        seq: u64,
        copied: bool,
        now: Instant,
        crypto: &mut RxCrypto,
    ) -> Option<usize> {
        let conn = self.conn;
        let candidates = crypto.slots.iter().flatten().count();
        let (mut tried, mut replayed) = (0usize, false);
        for i in 0..crypto.slots.len() {
            let Some(k) = &mut crypto.slots[i] else {
                continue;
            };
            if k.replay.check(seq).is_err() {
                replayed = true;
                continue;
            }
            if tried == 0 && candidates > 1 {
                crypto.scratch.clear();
                crypto.scratch.extend_from_slice(dgram);
            } else if tried > 0 {
                dgram.copy_from_slice(&crypto.scratch);
            }
            tried += 1;
            if k.keys.open_datagram(dgram).is_err() {
                continue;
            }
            if k.replay.update(seq).is_err() {
                conn.drops.replay.add(1);
                return None;
            }
            return self.opened_with(i, now, crypto);
        }
        self.count_unopened(replayed, copied);
        None
    }

    /// Takes the verdict of the crypto stage on a sealed datagram: opened
    /// by slot `pre.opened` (then its replay window is checked and updated
    /// now, in batch order: the authoritative decision, so a datagram that
    /// arrived twice in one batch is accepted once), or by none.
    fn take_opened(
        &self,
        pre: OpenItem,
        seq: u64,
        copied: bool,
        now: Instant,
        crypto: &mut RxCrypto,
    ) -> Option<usize> {
        let i = usize::from(pre.opened);
        let Some(k) = crypto.slots.get_mut(i).and_then(Option::as_mut) else {
            self.count_unopened(pre.replayed, copied);
            return None;
        };
        if k.replay.update(seq).is_err() {
            // Accepted earlier in this batch: a copy or a replay.
            self.count_unopened(true, copied);
            return None;
        }
        self.opened_with(i, now, crypto)
    }

    /// Counts a sealed datagram no key set opened.
    fn count_unopened(&self, replayed: bool, copied: bool) {
        let conn = self.conn;
        if replayed && copied {
            // A redundancy copy got here first: expected, not an attack.
            conn.copies.duplicates.add(1);
        } else if replayed {
            conn.drops.replay.add(1);
        } else {
            conn.drops.auth.add(1);
        }
    }

    /// A datagram opened with slot `i` (its window updated): notes that
    /// the peer uses the current keys, or confirms pending ones.
    fn opened_with(&self, i: usize, now: Instant, crypto: &mut RxCrypto) -> Option<usize> {
        let conn = self.conn;
        let Some(c) = &conn.crypto else {
            return Some(i);
        };
        if let Some(k) = crypto.slots.get(i).and_then(Option::as_ref) {
            match k.role {
                KeyRole::Current => {
                    if !crypto.peer_on_current {
                        crypto.peer_on_current = true;
                        c.peer_uses(&k.keys, now);
                    }
                }
                KeyRole::Pending => {
                    if c.confirm(&k.keys, now) {
                        tracing::info!(conn = %conn.name, "session keys established (confirmed by the peer)");
                    }
                }
                KeyRole::Previous => {}
            }
        }
        Some(i)
    }

    /// The crypto stage's part of a batch: finds the sealed datagrams
    /// (in batch order, one [`OpenItem`] per datagram) and which key slots
    /// may open them (replay windows as they stand before the batch), then
    /// has them opened in place, in parallel for large batches. Nothing
    /// else is decided here: `handle_batch` goes through the datagrams in
    /// order afterwards and updates the windows.
    fn open_batch(&self, bufs: &mut [Vec<u8>], meta: &[RecvMeta], crypto: &mut RxCrypto) {
        let conn = self.conn;
        let RxCrypto {
            slots,
            opens,
            submitter,
            ..
        } = crypto;
        opens.clear();
        let present = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .fold(0u8, |m, (i, _)| m | 1 << i);
        let mut sealed = 0usize;
        'batch: for (buf, m) in bufs.iter_mut().zip(meta) {
            if m.truncated {
                continue;
            }
            for dgram in m.datagrams_mut(buf) {
                if opens.len() == opens.capacity() {
                    break 'batch;
                }
                let mut item = OpenItem {
                    ptr: dgram.as_mut_ptr(),
                    len: dgram.len(),
                    candidates: 0,
                    replayed: false,
                    opened: NOT_OPENED,
                };
                if let Ok((h, _)) = Header::parse(dgram) {
                    if h.conn_id == conn.conn_id
                        && h.flags.contains(Flags::SEALED)
                        && dgram.len() >= HEADER_LEN + TAG_LEN
                        && !matches!(
                            h.msg_type,
                            MsgType::HandshakeInit
                                | MsgType::HandshakeResponse
                                | MsgType::HandshakeChallenge
                        )
                    {
                        for (i, slot) in slots.iter().enumerate() {
                            if let Some(k) = slot {
                                if k.replay.check(h.seq).is_ok() {
                                    item.candidates |= 1 << i;
                                }
                            }
                        }
                        item.replayed = present & !item.candidates != 0;
                        sealed += usize::from(item.candidates != 0);
                    }
                }
                opens.push(item);
            }
        }
        if sealed == 0 {
            return;
        }
        let keys: [Option<&SessionKeys>; 3] =
            [0, 1, 2].map(|i| slots.get(i).and_then(Option::as_ref).map(|k| &*k.keys));
        submitter.run(
            opens.as_mut_slice(),
            &|chunk: &mut [OpenItem], scratch: &mut Vec<u8>| open_items(chunk, &keys, scratch),
        );
    }

    /// Checks, counts and resequences one batch received on `path`.
    #[allow(clippy::too_many_arguments)]
    fn handle_batch(
        &self,
        pi: usize,
        path: Option<&PathShared>,
        bufs: &mut [Vec<u8>],
        meta: &[RecvMeta],
        staging: &mut Staging,
        crypto: &mut RxCrypto,
        delay: &mut DelayLine,
        repair: &mut RxRepair,
    ) {
        let conn = self.conn;
        // Loss repair: how long a hole on this path may wait for its copy
        // (the request goes back on this path, the copy comes on the
        // fastest: within about this path's RTT).
        let ask_repairs = conn.repair.load(Relaxed) && pi < repair.detectors.len();
        let repair_wait = if ask_repairs {
            let rtt_ms = path.and_then(|path| match path.view.lock() {
                Ok(v) => v.rtt_ms,
                Err(poisoned) => poisoned.into_inner().rtt_ms,
            });
            let rtt = Duration::from_secs_f64(rtt_ms.unwrap_or(50.0).clamp(1.0, 2_000.0) * 1e-3);
            // Waiting for a hole longer than the path's RTT would make the
            // repair no faster than TCP's own recovery.
            repair.detectors[pi].set_window_cap(rtt);
            let wait = rtt + rtt / 2 + REPAIR_MARGIN;
            repair.waits[pi] = wait;
            wait
        } else {
            Duration::ZERO
        };
        let now = Instant::now();
        let (mut rx_packets, mut rx_bytes) = (0u64, 0u64);
        // Equalisation holds of this batch: count and µs (added to the
        // connection's counters once per batch).
        let (mut eq_held, mut eq_held_us) = (0u64, 0u64);
        let mut highest: Option<u32> = None;
        let now_us = mpt_proto::timestamp_us(conn.epoch, now);
        // Newest sender timestamp and lowest one-way delay of the batch's
        // data (for the feedback to the peer's scheduler).
        let mut newest_ts: Option<u32> = None;
        let mut owd_min: Option<u32> = None;
        let mut learnt_from = None;
        let errors = &conn.drops.tun_write;
        // Without a key nothing authenticates a datagram but where it comes
        // from: only the path's configured remote address and port count,
        // and nothing is ever learnt from such datagrams.
        let cleartext_peer = match &conn.crypto {
            None => Some(path.and_then(|p| p.remote()).map(|(a, _)| a)),
            Some(_) => None,
        };
        let wall_now = crate::udp::wall_clock_ns();
        let equalize_to = match conn.equalize_owd_us.load(Relaxed) {
            0 => None,
            v => Some(v as u32),
        };
        let equalize_bulk_to = match conn.equalize_bulk_owd_us.load(Relaxed) {
            0 => None,
            v => Some(v as u32),
        };
        // Full-size datagrams and TCP SYNs are held with far paths counted
        // whether they carry data or not; short ones only with those that
        // do (see `mpt_proto::session::timing::equalize_target`).
        let target = |dgram: &[u8], flow: Option<Option<u64>>| {
            let packet = dgram
                .get(HEADER_LEN + if flow.is_some() { FLOW_PREFIX_LEN } else { 0 }..)
                .unwrap_or(&[]);
            if dgram.len() >= mpt_proto::sched::SMALL_PACKET || is_tcp_syn(packet) {
                equalize_bulk_to
            } else {
                equalize_to
            }
        };
        if conn.crypto.is_some() {
            self.open_batch(bufs, meta, crypto);
        } else {
            crypto.opens.clear();
        }
        // Index of the datagram in the batch (as `open_batch` counted).
        let mut di = 0usize;
        let mut reseq = conn.lock_reseq();
        self.apply_timeout(&mut reseq);
        for (buf, m) in bufs.iter_mut().zip(meta) {
            if m.truncated {
                conn.drops.malformed.add(1);
                continue;
            }
            if let Some(peer) = cleartext_peer {
                if !same_endpoint(m.from, peer) {
                    conn.drops
                        .wrong_source
                        .add(m.datagrams_mut(buf).count() as u64);
                    continue;
                }
            }
            // The path's delay samples count from when the kernel took the
            // message in, not from when this worker read it.
            let lag = crate::udp::arrival_lag(m.arrived_ns, wall_now);
            let arrived_us = now_us.wrapping_sub(lag.as_micros() as u32);
            for dgram in m.datagrams_mut(buf) {
                let wire_len = dgram.len();
                let pre = crypto.opens.get(di).copied().filter(|o| o.candidates != 0);
                di += 1;
                let (verdict, dgram) = self.check(pi, dgram, pre, m, now, crypto, repair);
                // The delay a data datagram is held to, worked out once.
                let held_to = match verdict {
                    Verdict::Data(_, flow) => target(dgram, flow),
                    _ => None,
                };
                // Every datagram with a sequence number moves its path's
                // sequence on: a hole in it is a loss.
                let hole_seq = match verdict {
                    Verdict::Data(seq, _) | Verdict::Repair(seq, _, _) | Verdict::Skip(seq) => {
                        ask_repairs.then_some(seq)
                    }
                    Verdict::Drop => None,
                };
                if let Some(seq) = hole_seq {
                    let owd = now_us.wrapping_sub(timestamp_of(dgram));
                    // The hole shows at the resequencer only once this
                    // datagram leaves the delay line: wait from there.
                    let equalized = match (held_to, &verdict) {
                        (Some(d), Verdict::Data(..)) if !has_copy(dgram) => {
                            let hold_us = (d.wrapping_sub(owd) as i32).max(0) as u32;
                            Duration::from_micros(u64::from(hold_us)).min(MAX_HOLD)
                        }
                        _ => Duration::ZERO,
                    };
                    let pseq = path_seq_of(dgram);
                    let hole = HoleWait {
                        equalized,
                        repair: repair_wait,
                    };
                    watch_holes(conn, repair, &mut reseq, pi, pseq, seq, owd, now, hole);
                }
                match verdict {
                    Verdict::Repair(seq, original, flow) => {
                        rx_packets += 1;
                        rx_bytes += wire_len as u64;
                        highest = Some(match highest {
                            Some(h) if seq_after(h, path_seq_of(dgram)) => h,
                            _ => path_seq_of(dgram),
                        });
                        learnt_from = m.from.map(|f| (f, m.to)).or(learnt_from);
                        // Its own number is done; the copy goes where the
                        // original would have. Both queue behind what this
                        // path holds (see `equalize::Kind`).
                        let own = Meta {
                            seq,
                            flow: None,
                            path: pi,
                            kind: Kind::Skip,
                        };
                        delay.push(now, own, &[], now, |m, p| {
                            resequence(&mut reseq, m, p, now, staging, self.tun, errors)
                        });
                        let skip = HEADER_LEN
                            + REPAIR_PREFIX_LEN
                            + if flow.is_some() { FLOW_PREFIX_LEN } else { 0 };
                        let meta = Meta {
                            seq: original,
                            flow,
                            path: pi,
                            kind: Kind::Repair,
                        };
                        delay.push(now, meta, &dgram[skip..], now, |m, p| {
                            resequence(&mut reseq, m, p, now, staging, self.tun, errors)
                        });
                    }
                    Verdict::Data(seq, flow) => {
                        rx_packets += 1;
                        rx_bytes += wire_len as u64;
                        let pseq = path_seq_of(dgram);
                        let ts = timestamp_of(dgram);
                        let owd = now_us.wrapping_sub(ts);
                        newest_ts = Some(ts);
                        let path_owd = arrived_us.wrapping_sub(ts);
                        owd_min = Some(match owd_min {
                            Some(m) if (m.wrapping_sub(path_owd) as i32) < 0 => m,
                            _ => path_owd,
                        });
                        highest = Some(match highest {
                            Some(h) if seq_after(h, pseq) => h,
                            _ => pseq,
                        });
                        learnt_from = m.from.map(|f| (f, m.to)).or(learnt_from);
                        let packet = match flow {
                            Some(_) => &dgram[HEADER_LEN + FLOW_PREFIX_LEN..],
                            None => &dgram[HEADER_LEN..],
                        };
                        // Hold until the slowest path's delay (see equalize),
                        // except real-time packets sent twice: they are
                        // there for their delay, and leave at once unless
                        // the path holds data ahead of them. (TCP ACKs are
                        // held too: let through at once, a BBR flow over
                        // WiFi + LTE fell from 0.95 to 0.36 of the sum.)
                        let hold_us = match held_to {
                            Some(d) if !has_copy(dgram) => d.wrapping_sub(owd) as i32,
                            _ => 0,
                        };
                        let hold = Duration::from_micros(u64::from(hold_us.max(0) as u32));
                        let release = if hold >= MIN_HOLD {
                            eq_held += 1;
                            eq_held_us += hold.min(MAX_HOLD).as_micros() as u64;
                            now + hold.min(MAX_HOLD)
                        } else {
                            now
                        };
                        let meta = Meta {
                            seq,
                            flow,
                            path: pi,
                            kind: Kind::Data,
                        };
                        delay.push(release, meta, packet, now, |m, p| {
                            resequence(&mut reseq, m, p, now, staging, self.tun, errors)
                        });
                    }
                    Verdict::Skip(seq) => {
                        learnt_from = m.from.map(|f| (f, m.to)).or(learnt_from);
                        let meta = Meta {
                            seq,
                            flow: None,
                            path: pi,
                            kind: Kind::Skip,
                        };
                        delay.push(now, meta, &[], now, |m, p| {
                            resequence(&mut reseq, m, p, now, staging, self.tun, errors)
                        });
                    }
                    Verdict::Drop => {}
                }
            }
        }
        delay.release_due(now, |m, p| {
            resequence(&mut reseq, m, p, now, staging, self.tun, errors)
        });
        delay.release_idle(now);
        if ask_repairs {
            decide_holes(conn, repair, &mut reseq, now);
        }
        reseq.handle_timeout(now, |p| staging.push(p, self.tun, errors));
        self.publish_deadline(&reseq);
        drop(reseq);
        match (learnt_from, cleartext_peer, path) {
            (Some((from, to)), None, Some(path))
                if self.shared && !same_family(from, path.local) =>
            {
                // A client path moved to the other address family: the
                // control loop moves it to that family's shared socket.
                self.notice_path(pi, from, to, now, &mut crypto.pending);
            }
            (Some((from, to)), None, Some(path)) if path.learn_remote(from, to) => {
                tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address");
            }
            (Some((from, to)), None, None) if self.shared => {
                // Authenticated datagrams of a path the client has not
                // used before (or that died): the control loop adds it.
                self.notice_path(pi, from, to, now, &mut crypto.pending);
            }
            _ => {}
        }
        conn.equalized.held.add(eq_held);
        conn.equalized.held_us.add(eq_held_us);
        if let (Some(path), true) = (path, rx_packets > 0) {
            path.rx_data_packets.add(rx_packets);
            path.rx_packets.add(rx_packets);
            path.rx_bytes.add(rx_bytes);
            path.rx_data_bytes.add(rx_bytes);
            if let Some(h) = highest {
                path.rx_summary_highest.store(h, Relaxed);
            }
            if let Some(ts) = newest_ts {
                path.rx_summary_timestamp.store(ts, Relaxed);
            }
            if let Some(owd) = owd_min {
                path.note_owd(owd);
            }
            path.rx_summary_bytes.fetch_add(rx_bytes, Relaxed);
            path.rx_summary_packets
                .fetch_add(rx_packets as u32, Relaxed);
            let ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
            path.rx_summary_last_ns.store(ns, Relaxed);
        }
        for msg in crypto.pending.drain(..) {
            match self.control.try_send(msg) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => conn.drops.control_queue_full.add(1),
            }
        }
    }

    /// Checks one datagram (opening it when the connection is encrypted,
    /// unless the crypto stage already tried: `pre`);
    /// hands probes, replies and handshake messages to the control loop.
    /// Returns the verdict and the datagram as plaintext (header, then
    /// payload without tag).
    #[allow(clippy::too_many_arguments)]
    fn check<'a>(
        &self,
        pi: usize,
        dgram: &'a mut [u8],
        pre: Option<OpenItem>,
        m: &RecvMeta,
        now: Instant,
        crypto: &mut RxCrypto,
        repair: &mut RxRepair,
    ) -> (Verdict, &'a [u8]) {
        let conn = self.conn;
        let header = match Header::parse(dgram) {
            Ok((h, _)) => h,
            Err(DecodeError::TooShort { .. }) => {
                conn.drops.too_short.add(1);
                return (Verdict::Drop, dgram);
            }
            Err(DecodeError::BadVersion { .. }) => {
                conn.drops.bad_version.add(1);
                return (Verdict::Drop, dgram);
            }
            Err(_) => {
                conn.drops.malformed.add(1);
                return (Verdict::Drop, dgram);
            }
        };
        // By connection id, or (public-key sessions) session index.
        if !crate::demux::accepts(conn, &header) {
            conn.drops.unknown_connection.add(1);
            return (Verdict::Drop, dgram);
        }
        // On a shared port the header names the path (the client's path
        // id; its source address is learnt): the whole group is one path.
        if self.shared && usize::from(header.path_id) != pi {
            conn.drops.no_path.add(1);
            return (Verdict::Drop, dgram);
        }
        if let Some((expected, noise)) = crate::demux::handshake_kind(header.msg_type) {
            // Handshakes are authenticated by their own MAC in the control
            // loop; only size-check them here.
            if conn.crypto.as_ref().map(|c| c.noise) != Some(noise) {
                conn.drops.unsupported.add(1);
            } else if dgram.len() != expected {
                conn.drops.malformed.add(1);
            } else {
                self.to_control(pi, dgram, m, now, &mut crypto.pending);
            }
            return (Verdict::Drop, dgram);
        }
        let sealed = header.flags.contains(Flags::SEALED);
        let mut opened_by = None;
        let dgram: &'a [u8] = match (&conn.crypto, sealed) {
            (None, false) => dgram,
            (None, true) | (Some(_), false) => {
                conn.drops.auth.add(1);
                return (Verdict::Drop, dgram);
            }
            (Some(_), true) => {
                let len = dgram.len();
                let copied = header.flags.contains(Flags::COPY);
                opened_by = match pre {
                    Some(p) if p.len == len => self.take_opened(p, header.seq, copied, now, crypto),
                    _ => self.open_sealed(dgram, header.seq, copied, now, crypto),
                };
                if opened_by.is_none() {
                    return (Verdict::Drop, dgram);
                }
                // Plaintext: header then payload; the tag is cut off and the
                // header keeps its SEALED bit (cleared for the control loop).
                &dgram[..len - TAG_LEN]
            }
        };
        let verdict = match header.msg_type {
            MsgType::Data => {
                let (flow, inner) = if header.flags.contains(Flags::FLOW) {
                    match split_flow_prefix(&dgram[HEADER_LEN..]) {
                        Ok((gap, packet)) => (Some(flow_predecessor(header.seq, gap)), packet),
                        Err(_) => (None, &[][..]),
                    }
                } else {
                    (None, &dgram[HEADER_LEN..])
                };
                if check_ip_packet(inner).is_err() {
                    conn.drops.malformed.add(1);
                    Verdict::Skip(header.seq)
                } else if !conn.allowed_sources.allows(inner) {
                    conn.drops.inner_source.add(1);
                    Verdict::Skip(header.seq)
                } else {
                    Verdict::Data(header.seq, flow)
                }
            }
            MsgType::Repair => self.check_repair(&header, &dgram[HEADER_LEN..], opened_by, crypto),
            MsgType::Nack => {
                // As trusted as a probe (sealed, or from the configured
                // remote); answered after the batch.
                match Nack::parse(&dgram[HEADER_LEN..]) {
                    Ok(n) if repair.answers.len() < REPAIR_QUEUE => repair.answers.push((pi, n)),
                    Ok(_) => conn.drops.control_queue_full.add(1),
                    Err(_) => conn.drops.malformed.add(1),
                }
                Verdict::Skip(header.seq)
            }
            MsgType::Feedback => {
                // As trusted as a probe: sealed with a key; without one,
                // from the configured remote only (checked above).
                if dgram.len() != Transmit::FEEDBACK_LEN {
                    conn.drops.malformed.add(1);
                } else {
                    self.to_control(pi, dgram, m, now, &mut crypto.pending);
                }
                Verdict::Skip(header.seq)
            }
            MsgType::Probe | MsgType::ProbeReply => {
                if dgram.len() != Transmit::KEEPALIVE_LEN {
                    conn.drops.malformed.add(1);
                } else {
                    self.to_control(pi, dgram, m, now, &mut crypto.pending);
                }
                Verdict::Skip(header.seq)
            }
            MsgType::Control => {
                // Parsed (and length-checked) by the session. Without a key
                // anyone who can spoof the peer's address could add or
                // remove paths: never obeyed there.
                if conn.crypto.is_none() {
                    conn.drops.unauthenticated_control.add(1);
                } else if dgram.len() > Transmit::MAX_LEN {
                    conn.drops.malformed.add(1);
                } else {
                    self.to_control(pi, dgram, m, now, &mut crypto.pending);
                }
                Verdict::Skip(header.seq)
            }
            // Handled above, before any crypto.
            MsgType::HandshakeInit
            | MsgType::HandshakeResponse
            | MsgType::HandshakeChallenge
            | MsgType::NoiseInitiation
            | MsgType::NoiseResponse
            | MsgType::NoiseCookieReply => {
                conn.drops.unsupported.add(1);
                Verdict::Drop
            }
        };
        (verdict, dgram)
    }

    /// Checks a repair's payload (plaintext, after the header): the data
    /// it carries is checked as data is, and must not have arrived before
    /// (the original's number goes through the replay window of the keys
    /// that opened the copy).
    fn check_repair(
        &self,
        header: &Header,
        payload: &[u8],
        opened_by: Option<usize>,
        crypto: &mut RxCrypto,
    ) -> Verdict {
        let conn = self.conn;
        let Ok(r) = Repair::parse(payload) else {
            conn.drops.malformed.add(1);
            return Verdict::Skip(header.seq);
        };
        let (flow, inner) = if header.flags.contains(Flags::FLOW) {
            match split_flow_prefix(r.payload) {
                Ok((gap, packet)) => (Some(flow_predecessor(r.original_seq, gap)), packet),
                Err(_) => (None, &[][..]),
            }
        } else {
            (None, r.payload)
        };
        if check_ip_packet(inner).is_err() {
            conn.drops.malformed.add(1);
            return Verdict::Skip(header.seq);
        }
        if !conn.allowed_sources.allows(inner) {
            conn.drops.inner_source.add(1);
            return Verdict::Skip(header.seq);
        }
        let copy = header.flags.contains(Flags::COPY);
        if let Some(k) = opened_by
            .and_then(|i| crypto.slots.get_mut(i))
            .and_then(Option::as_mut)
        {
            if k.replay.check(r.original_seq).is_err() || k.replay.update(r.original_seq).is_err() {
                // The original came after all (or the copy is a replay).
                if copy {
                    conn.copies.duplicates.add(1);
                } else {
                    conn.repairs.duplicates.add(1);
                }
                return Verdict::Skip(header.seq);
            }
        }
        if copy {
            conn.copies.first.add(1);
        } else {
            conn.repairs.received.add(1);
        }
        Verdict::Repair(header.seq, r.original_seq, flow)
    }

    /// Sends the batch's repair requests and answers the peer's.
    fn send_repairs(&self, table: &PathTable, repair: &mut RxRepair) {
        if repair.requests.is_empty() && repair.answers.is_empty() {
            return;
        }
        let conn = self.conn;
        let now = Instant::now();
        let RxRepair {
            requests,
            answers,
            out,
            ..
        } = repair;
        for (pi, nack) in requests.drain(..) {
            if let Some(path) = table.get(pi) {
                crate::repair::request(conn, path, nack, now, out);
            }
        }
        for (pi, nack) in answers.drain(..) {
            if let Some(path) = table.get(pi) {
                crate::repair::answer(conn, table, path, nack, now, out);
            }
        }
    }

    /// Queues a (plaintext) message for the control loop (sent at the end
    /// of the batch; bounded: beyond the capacity it is dropped and counted).
    fn to_control(
        &self,
        pi: usize,
        dgram: &[u8],
        m: &RecvMeta,
        now: Instant,
        pending: &mut Vec<ControlDatagram>,
    ) {
        let conn = self.conn;
        // When it came (its delay sample and RTT then leave out how long
        // it waited in the socket for this worker).
        let lag = crate::udp::arrival_lag(m.arrived_ns, crate::udp::wall_clock_ns());
        let mut msg = ControlDatagram {
            conn: conn.index,
            path: pi,
            at: now.checked_sub(lag).unwrap_or(now),
            from: m.from,
            to: m.to,
            port: 0,
            len: dgram.len().min(CONTROL_DATAGRAM_MAX),
            bytes: [0; CONTROL_DATAGRAM_MAX],
        };
        msg.bytes[..msg.len].copy_from_slice(&dgram[..msg.len]);
        msg.bytes[1] &= !Flags::SEALED.bits();
        if pending.len() < pending.capacity() {
            pending.push(msg);
        } else {
            conn.drops.control_queue_full.add(1);
        }
    }

    /// Tells the control loop that authenticated datagrams of path `pi`
    /// came from `from` while the connection has no such path (or it is
    /// on the other family's socket): a message without bytes.
    fn notice_path(
        &self,
        pi: usize,
        from: SocketAddr,
        to: Option<Source>,
        now: Instant,
        pending: &mut Vec<ControlDatagram>,
    ) {
        let msg = ControlDatagram {
            conn: self.conn.index,
            path: pi,
            at: now,
            from: Some(from),
            to,
            port: 0,
            len: 0,
            bytes: [0; CONTROL_DATAGRAM_MAX],
        };
        if pending.len() < pending.capacity() {
            pending.push(msg);
        } else {
            self.conn.drops.control_queue_full.add(1);
        }
    }

    fn apply_timeout(&self, reseq: &mut Resequencer) {
        let t = Duration::from_micros(self.conn.reseq_timeout_us.load(Relaxed));
        if reseq.timeout() != t {
            reseq.set_timeout(t);
        }
        self.conn.apply_path_waits(reseq);
    }

    fn publish_deadline(&self, reseq: &Resequencer) {
        let ns = reseq.poll_timeout().map_or(0, |t| {
            (t.saturating_duration_since(self.conn.epoch).as_nanos() as u64).max(1)
        });
        self.conn.reseq_deadline_ns.store(ns, Relaxed);
    }

    /// Releases what is due in the delay line and the resequencer's timed
    /// out gaps, and decides the holes whose reorder window ended (sending
    /// the requests); returns the next deadline of any of them.
    fn timeouts(
        &self,
        delay: &mut DelayLine,
        repair: &mut RxRepair,
        table: &PathTable,
        staging: &mut Staging,
        now: Instant,
    ) -> Option<Instant> {
        let conn = self.conn;
        let errors = &conn.drops.tun_write;
        let deadline = |ns: u64| (ns != 0).then(|| conn.epoch + Duration::from_nanos(ns));
        let release = delay.next_release();
        let gap = deadline(conn.reseq_deadline_ns.load(Relaxed));
        let holes = repair.due;
        if [release, gap, holes].iter().flatten().any(|&t| t <= now) {
            let mut reseq = conn.lock_reseq();
            delay.release_due(now, |m, p| {
                resequence(&mut reseq, m, p, now, staging, self.tun, errors)
            });
            if conn.repair.load(Relaxed) {
                decide_holes(conn, repair, &mut reseq, now);
            } else {
                repair.due = None;
            }
            reseq.handle_timeout(now, |p| staging.push(p, self.tun, errors));
            self.publish_deadline(&reseq);
            drop(reseq);
            self.send_repairs(table, repair);
        }
        let release = delay.next_release();
        let gap = deadline(conn.reseq_deadline_ns.load(Relaxed));
        min_instant(min_instant(release, gap), repair.due)
    }

    /// No datagram queued: do what is due (see [`Rx::timeouts`]), then
    /// sleep until data arrives, the next deadline, or it is time to check
    /// shutdown.
    fn idle(
        &self,
        paths: &[Arc<PathShared>],
        staging: &mut Staging,
        delay: &mut DelayLine,
        repair: &mut RxRepair,
        table: &PathTable,
    ) {
        let conn = self.conn;
        let next = self.timeouts(delay, repair, table, staging, Instant::now());
        staging.flush(self.tun, &conn.drops.tun_write);
        let wait = match next {
            Some(t) => t
                .saturating_duration_since(Instant::now())
                .min(RECV_TIMEOUT),
            None => RECV_TIMEOUT,
        };
        if wait.is_zero() {
            return;
        }
        if let Err(e) = crate::udp::wait_any_readable(
            paths.iter().map(|p| &p.socket),
            Some(&conn.rx_wake),
            wait,
        ) {
            tracing::debug!(conn = %conn.name, error = %e, "poll failed");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Opens a chunk of a batch's datagrams in place (run by the crypto
/// stage, on any thread): each with the first of its candidate key slots
/// that takes it, recording which. With more than one candidate the
/// datagram is kept in `scratch` to try the next (a failed open garbles
/// it).
fn open_items(chunk: &mut [OpenItem], keys: &[Option<&SessionKeys>; 3], scratch: &mut Vec<u8>) {
    for it in chunk {
        if it.candidates == 0 {
            continue;
        }
        // SAFETY: see `OpenItem`: the bytes are the worker's, lent to
        // this chunk alone while the batch is in the crypto stage.
        let dgram = unsafe { std::slice::from_raw_parts_mut(it.ptr, it.len) };
        let several = it.candidates.count_ones() > 1;
        if several {
            scratch.clear();
            scratch.extend_from_slice(dgram);
        }
        let mut tried = 0;
        for (i, k) in keys.iter().enumerate() {
            let Some(k) = k.filter(|_| it.candidates & (1 << i) != 0) else {
                continue;
            };
            if tried > 0 {
                dgram.copy_from_slice(scratch);
            }
            tried += 1;
            if k.open_datagram(dgram).is_ok() {
                it.opened = i as u8;
                break;
            }
        }
    }
}

/// Extra time a hole waits for its copy beyond 1.5 RTT of its path.
const REPAIR_MARGIN: Duration = Duration::from_millis(5);

/// How long a new hole's gap is kept from being given up beyond its
/// decision: the delay line's hold of the datagram that revealed it, and
/// (if it may be asked for) the time its copy takes.
#[derive(Debug, Clone, Copy)]
struct HoleWait {
    equalized: Duration,
    repair: Duration,
}

/// Feeds a datagram's path and connection sequence numbers to its path's
/// loss detector. A new hole is exempted from the resequencer's loss
/// proof until it is decided (and its copy could arrive); a datagram that
/// fills one takes its part of the exemption back.
#[allow(clippy::too_many_arguments)]
fn watch_holes(
    conn: &ConnShared,
    repair: &mut RxRepair,
    reseq: &mut Resequencer,
    pi: usize,
    path_seq: u32,
    seq: u64,
    owd_us: u32,
    now: Instant,
    wait: HoleWait,
) {
    let Some(detector) = repair.detectors.get_mut(pi) else {
        return;
    };
    let before = detector.stats();
    let event = detector.on_data(path_seq, seq, owd_us, now);
    let after = detector.stats();
    if after != before {
        count_holes(conn, before, after);
    }
    match event {
        None => {}
        Some(HoleEvent::Opened(hole)) => {
            let mut until = hole.decide_at + wait.equalized;
            if hole.repairable {
                until += wait.repair;
            }
            reseq.expect_hole(hole.after_seq, hole.before_seq, hole.missing, until);
            repair.due = Some(repair.due.map_or(hole.decide_at, |d| d.min(hole.decide_at)));
        }
        Some(HoleEvent::Filled {
            after_seq,
            before_seq,
            ..
        }) => {
            reseq.hole_filled(after_seq, before_seq);
            // The path's window may have grown: so does the grace of gaps
            // no detector tracks.
            let window = detector.reorder_window();
            if window > reseq.reorder_grace() {
                reseq.set_reorder_grace(window);
            }
        }
    }
}

/// How often the resequencer's reorder grace is brought down to the
/// detectors' windows when they shrink.
const GRACE_REFRESH: Duration = Duration::from_secs(1);

/// Decides the holes whose reorder window ended: queues a request for
/// each still missing and worth it, and keeps its gap exempt until the
/// copy can arrive. Brings the resequencer's grace to the longest window.
fn decide_holes(conn: &ConnShared, repair: &mut RxRepair, reseq: &mut Resequencer, now: Instant) {
    if repair
        .grace_set
        .is_none_or(|t| now.saturating_duration_since(t) >= GRACE_REFRESH)
    {
        repair.grace_set = Some(now);
        let longest = repair
            .detectors
            .iter()
            .map(LossDetector::reorder_window)
            .max()
            .unwrap_or(REORDER_GRACE);
        reseq.set_reorder_grace(longest.max(REORDER_GRACE));
    }
    if repair.due.is_none_or(|d| d > now) {
        return;
    }
    repair.due = None;
    for (pi, detector) in repair.detectors.iter_mut().enumerate() {
        if detector.next_decision().is_none_or(|d| d > now) {
            repair.due = min_instant(repair.due, detector.next_decision());
            continue;
        }
        let before = detector.stats();
        while let Some(loss) = detector.poll(now) {
            let until = now + repair.waits[pi];
            if repair.requests.len() < REPAIR_QUEUE
                && reseq.expect_repair(loss.after_seq, loss.before_seq, loss.missing, until)
            {
                repair.requests.push((pi, loss.nack));
            }
        }
        let after = detector.stats();
        if after != before {
            count_holes(conn, before, after);
        }
        repair.due = min_instant(repair.due, detector.next_decision());
    }
}

fn min_instant(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Adds what a detector newly counted to the connection's counters
/// (requests are counted when sent).
fn count_holes(conn: &ConnShared, before: DetectorStats, after: DetectorStats) {
    conn.repairs
        .congestion_holes
        .add(after.congestion.saturating_sub(before.congestion));
    conn.repairs
        .unrequested
        .add(after.unrequested.saturating_sub(before.unrequested));
    conn.repairs
        .reordered_holes
        .add(after.reordered.saturating_sub(before.reordered));
    conn.repairs
        .needless
        .add(after.needless.saturating_sub(before.needless));
}

/// Hands a datagram's packet (or, for [`Kind::Skip`], its sequence
/// number) to the resequencer.
fn resequence(
    reseq: &mut Resequencer,
    m: Meta,
    packet: &[u8],
    now: Instant,
    staging: &mut Staging,
    tun: &SyncDevice,
    errors: &Counter,
) {
    let deliver = |p: &[u8]| staging.push(p, tun, errors);
    match m.kind {
        Kind::Data => {}
        Kind::Repair => reseq.repair_arrived(m.seq),
        Kind::Skip => {
            reseq.skip(m.seq, m.path, now, deliver);
            return;
        }
    }
    match m.flow {
        Some(prev) => {
            reseq.insert_after(m.seq, prev, m.path, packet, now, deliver);
        }
        None => {
            reseq.insert(m.seq, m.path, packet, now, deliver);
        }
    }
}

/// Whether a datagram from `from` comes from the configured `remote`:
/// address and port (an IPv6 source's scope id and flow label, which a
/// configured address does not carry, are not compared).
fn same_family(a: SocketAddr, b: SocketAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

/// Whether a datagram from `from` comes from the configured `remote`:
/// address and port (see `same_endpoint`).
fn same_endpoint(from: Option<SocketAddr>, remote: Option<SocketAddr>) -> bool {
    match (from, remote) {
        (Some(f), Some(r)) => f.ip() == r.ip() && f.port() == r.port(),
        _ => false,
    }
}

/// The path sequence number of a datagram already checked to have a header.
fn path_seq_of(dgram: &[u8]) -> u32 {
    match dgram.get(16..20).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
        Some(b) => u32::from_be_bytes(b),
        None => 0,
    }
}

/// Whether a datagram already checked to have a header says a copy of it
/// went on another path (redundancy for real-time flows).
fn has_copy(dgram: &[u8]) -> bool {
    dgram.get(1).is_some_and(|&f| f & Flags::COPY.bits() != 0)
}

/// The sender timestamp of a datagram already checked to have a header.
fn timestamp_of(dgram: &[u8]) -> u32 {
    match dgram.get(20..24).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
        Some(b) => u32::from_be_bytes(b),
        None => 0,
    }
}

fn seq_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && d < u32::MAX / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_proto::crypto::INIT_LEN;
    use std::net::{Ipv6Addr, SocketAddrV6};

    /// Session keys `(initiator, responder)` from a real handshake (they
    /// exist only as its result).
    fn session_keys() -> (SessionKeys, SessionKeys) {
        use mpt_proto::crypto::{Answer, Initiator, Psk, Responder};
        let psk = Psk::from_bytes(*b"mptd rx test pre-shared key 32 b");
        let header = Header {
            msg_type: MsgType::HandshakeInit,
            flags: Flags::NONE,
            path_id: 0,
            conn_id: 7,
            seq: 0,
            path_seq: 0,
            timestamp_us: 0,
        };
        let mut responder = Responder::new(&psk, 7, *b"rx-test!").unwrap();
        let (mut init, mut reply) = ([0u8; INIT_LEN], [0u8; INIT_LEN]);
        let (mut initiator, mut n) =
            Initiator::start(&psk, *b"rx-test?", &header, [1; 32], 1, None, &mut init).unwrap();
        for _ in 0..2 {
            match responder
                .handle_init(
                    &init[..n],
                    [2; 32],
                    [3; 16],
                    Instant::now(),
                    &header,
                    &mut reply,
                )
                .unwrap()
            {
                Answer::Response { keys, len } => {
                    return (initiator.handle_response(&reply[..len]).unwrap(), *keys);
                }
                Answer::Challenge { len } => {
                    let cookie = initiator.handle_challenge(&reply[..len]).unwrap();
                    (initiator, n) = Initiator::start(
                        &psk,
                        *b"rx-test?",
                        &header,
                        [1; 32],
                        2,
                        Some(cookie),
                        &mut init,
                    )
                    .unwrap();
                }
            }
        }
        panic!("no handshake");
    }

    /// The crypto stage opens a batch in parallel, yet what is accepted is
    /// what the serial worker would accept: every datagram that
    /// authenticates, once, in batch order; a forged one in the middle
    /// shifts nothing; a datagram twice in one batch is taken once; one
    /// the window had seen before the batch is not even tried.
    #[test]
    fn the_crypto_stage_opens_in_order_and_the_window_takes_each_once() {
        let (seal, open) = session_keys();
        let pool = Arc::new(CryptoPool::start(2, 4, Duration::from_micros(20)).unwrap());
        let mut sub = pool.submitter();
        let mut window = ReplayWindow::new();
        window.update(3).unwrap();
        // seq 0..200, with 50 twice (the copy right after it), 3 already
        // accepted, and 120 forged (a flipped ciphertext byte).
        let mut seqs: Vec<u64> = (0..200).collect();
        seqs.insert(51, 50);
        let mut bufs: Vec<Vec<u8>> = seqs
            .iter()
            .map(|&seq| {
                let payload = 100 + (seq as usize % 7) * 100;
                let mut b = vec![0u8; HEADER_LEN + payload + TAG_LEN];
                let h = Header {
                    msg_type: MsgType::Data,
                    flags: Flags::SEALED,
                    path_id: 0,
                    conn_id: 7,
                    seq,
                    path_seq: seq as u32,
                    timestamp_us: 0,
                };
                h.emit(&mut b[..HEADER_LEN]).unwrap();
                b[HEADER_LEN..HEADER_LEN + payload].fill(seq as u8);
                seal.seal_datagram(&mut b, payload).unwrap();
                if seq == 120 {
                    b[HEADER_LEN + 5] ^= 1;
                }
                b
            })
            .collect();
        let mut items: Vec<OpenItem> = bufs
            .iter_mut()
            .zip(&seqs)
            .map(|(b, &seq)| OpenItem {
                ptr: b.as_mut_ptr(),
                len: b.len(),
                candidates: u8::from(window.check(seq).is_ok()),
                replayed: window.check(seq).is_err(),
                opened: NOT_OPENED,
            })
            .collect();
        let keys: [Option<&SessionKeys>; 3] = [Some(&open), None, None];
        sub.run(
            &mut items,
            &|chunk: &mut [OpenItem], scratch: &mut Vec<u8>| open_items(chunk, &keys, scratch),
        );
        // What `take_opened` does, in batch order.
        let mut accepted = Vec::new();
        for ((it, &seq), b) in items.iter().zip(&seqs).zip(&bufs) {
            if it.opened == 0 && window.update(seq).is_ok() {
                let payload = &b[HEADER_LEN..b.len() - TAG_LEN];
                assert!(
                    payload.iter().all(|&x| x == seq as u8),
                    "seq {seq} opened wrong"
                );
                accepted.push(seq);
            }
        }
        let expected: Vec<u64> = (0..200).filter(|&s| s != 3 && s != 120).collect();
        assert_eq!(accepted, expected);
        assert_eq!(
            items[3].candidates, 0,
            "an already accepted number is not tried"
        );
        assert_eq!(items[121].opened, NOT_OPENED, "the forged datagram");
        assert_eq!(items[51].opened, 0, "the copy opens; the window refuses it");
    }

    #[test]
    fn a_cleartext_source_must_match_address_and_port() {
        let remote: SocketAddr = "10.0.0.2:65022".parse().unwrap();
        assert!(same_endpoint(Some(remote), Some(remote)));
        assert!(!same_endpoint(
            Some("10.0.0.2:65023".parse().unwrap()),
            Some(remote)
        ));
        assert!(!same_endpoint(
            Some("10.0.0.3:65022".parse().unwrap()),
            Some(remote)
        ));
        assert!(!same_endpoint(None, Some(remote)));
        assert!(!same_endpoint(Some(remote), None));
        // A link-local source arrives with its interface's scope id; the
        // configured address has none.
        let ll: Ipv6Addr = "fe80::2".parse().unwrap();
        let configured = SocketAddr::V6(SocketAddrV6::new(ll, 65022, 0, 0));
        let received = SocketAddr::V6(SocketAddrV6::new(ll, 65022, 0, 7));
        assert!(same_endpoint(Some(received), Some(configured)));
    }
}
