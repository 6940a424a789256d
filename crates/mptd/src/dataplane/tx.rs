//! Stage 1 of the data plane: read tun → route → schedule → send.
//!
//! Each transmit worker owns one tun queue and its own schedulers, so the
//! only shared writes per batch are a handful of atomic adds (sequence
//! ranges and counters). A batch is what the tun queue holds when the
//! worker wakes: one blocking read (a TCP super-packet split into up to
//! [`tun_rs::IDEAL_BATCH_SIZE`] segments, or a single packet), then reads
//! that do not wait, up to [`TX_BATCH`] packets;
//! its packets are headed, grouped by path in their original order,
//! sealed as one batch by the crypto stage (`crate::dataplane::crypto_pool`: in
//! parallel when the batch is large enough) and sent with one GSO send
//! per path.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use mpt_proto::crypto::{SessionKeys, TAG_LEN};
use mpt_proto::flow::{flow_hash, is_tcp_syn, FlowTable};
use mpt_proto::repair::RepairHistory;
use mpt_proto::sched::{
    AnyScheduler, Flowlets, PathModel, PickInput, RealtimeFlows, Redundancy, SchedPath, Scheduler,
};
use mpt_proto::wire::{emit_flow_prefix, Flags, Header, MsgType, FLOW_PREFIX_LEN, HEADER_LEN};
use tun_rs::{InterruptEvent, SyncDevice, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

use crate::dataplane::crypto_pool::CryptoPool;
use crate::plane::route::Router;
use crate::plane::{ConnShared, PathShared, PathTable, Remote, TxStats};

/// Where the IP packet starts in a transmit buffer: our header and the
/// flow prefix go in front of it, so the datagram is built in place
/// without a copy.
const PACKET_OFFSET: usize = HEADER_LEN + FLOW_PREFIX_LEN;

/// Most datagrams in one GSO send (the kernel's UDP_MAX_SEGMENTS is 64
/// on older kernels, 128 on newer ones).
const MAX_GSO_SEGMENTS: usize = crate::io::udp::MAX_GSO_PARTS;

/// Most bytes in one GSO send: the UDP payload of one IP packet, less room
/// for IPv6 extension headers.
const MAX_GSO_BYTES: usize = 65000;

/// Packets one transmit batch holds. The first (blocking) read of a batch
/// may split a TCP super-packet into up to [`IDEAL_BATCH_SIZE`] segments;
/// while at least that many buffers are left, further reads that do not
/// wait add whatever else the tun queue holds. Without them a packet that
/// comes alone (UDP, QUIC, voice, ACKs: no super-packets) was a batch of
/// one: one route, one seal and one send per packet, where a batch shares
/// the sends per path (GSO) and the crypto stage's work.
const TX_BATCH: usize = 2 * IDEAL_BATCH_SIZE;

/// Tun reads failing in a row (with errors not known to mean the device is
/// gone) before the daemon gives up instead of spinning on them.
const MAX_READ_ERRORS: u32 = 10_000;

/// One packet's place in a batch, packed so that sorting groups packets by
/// connection and path while keeping their tun order:
/// connection (8 bits) | path (8) | rank within the connection (24) |
/// buffer index (24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PlanEntry(u64);

impl PlanEntry {
    fn new(conn: usize, path: usize, rank: u32, buf: usize) -> PlanEntry {
        PlanEntry(
            ((conn as u64 & 0xff) << 56)
                | ((path as u64 & 0xff) << 48)
                | ((u64::from(rank) & 0xff_ffff) << 24)
                | (buf as u64 & 0xff_ffff),
        )
    }
    fn conn(self) -> usize {
        (self.0 >> 56) as usize
    }
    fn path(self) -> usize {
        ((self.0 >> 48) & 0xff) as usize
    }
    /// Connection and path: the send group.
    fn group(self) -> u64 {
        self.0 >> 48
    }
    fn rank(self) -> u32 {
        ((self.0 >> 24) & 0xff_ffff) as u32
    }
    fn buf(self) -> usize {
        (self.0 & 0xff_ffff) as usize
    }
}

/// Everything a transmit worker needs.
pub struct TxWorker {
    /// The tun queue this worker reads.
    pub tun: Arc<SyncDevice>,
    /// All connections, by index.
    pub conns: Arc<Vec<Arc<ConnShared>>>,
    /// Where `conns` and `router` come from: replaced when a reload adds
    /// or removes a client connection (checked once per batch).
    pub set: Arc<crate::plane::ConnSet>,
    /// Destination → connection.
    pub router: Arc<Router>,
    /// Daemon-wide counters.
    pub stats: Arc<TxStats>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// Triggered on shutdown and when a path table changes, to wake the
    /// blocking read (this worker's own event).
    pub wake: Arc<InterruptEvent>,
    /// Tun MTU, to size buffers.
    pub mtu: usize,
    /// The crypto stage, shared with every other worker.
    pub crypto_pool: Arc<CryptoPool>,
}

/// What a transmit worker keeps per flow bucket of one connection: the
/// last sequence number sent (so each datagram names its flow predecessor
/// for the peer's per-flow resequencing; a flow stays on one tun queue,
/// hence one worker), the path and time of the last packet (flowlets: a
/// flow stays on its path while that costs nothing) and whether the flow
/// looks real-time (redundancy). About 160 KiB, made when the connection
/// first sends: on a server with hundreds of clients only those that
/// receive traffic pay for it.
struct FlowState {
    order: FlowTable,
    flowlets: Flowlets,
    realtime: RealtimeFlows,
}

impl FlowState {
    /// The tables of connection `c`, made on first use.
    fn of(states: &mut [Option<Box<FlowState>>], c: usize) -> &mut FlowState {
        states[c].get_or_insert_with(|| {
            Box::new(FlowState {
                order: FlowTable::new(),
                flowlets: Flowlets::new(),
                realtime: RealtimeFlows::new(),
            })
        })
    }
}

/// A group (one connection, one path) of a batch, headed and ready to be
/// sealed and sent.
struct Prepared {
    /// The group's entries: `plan[start..end]`.
    start: usize,
    end: usize,
    path: Arc<PathShared>,
    /// Where to, and from which local address (a learnt client path).
    remote: Remote,
    /// The keys its datagrams are sealed with (kept alive for the seal
    /// items that point at them).
    keys: Option<Arc<SessionKeys>>,
    conn_ns: u64,
}

/// A datagram to seal, as handed to the crypto stage: the buffer holds
/// header, payload and room for the tag.
#[derive(Debug, Clone, Copy)]
struct SealItem {
    buf: *mut u8,
    cap: usize,
    payload_len: usize,
    keys: *const SessionKeys,
    /// Index of the buffer in the batch.
    index: usize,
    ok: bool,
}

// SAFETY: `buf` points at one of the worker's transmit buffers (a
// different one for each item) and `keys` at keys a `Prepared` of the same
// batch keeps alive; both are lent to the crypto stage only for the
// duration of `Submitter::run`.
unsafe impl Send for SealItem {}

/// Seals a chunk of a batch's datagrams in place (run by the crypto stage,
/// on any thread).
fn seal_items(chunk: &mut [SealItem]) {
    for it in chunk {
        // SAFETY: see `SealItem`.
        let (buf, keys) = unsafe { (std::slice::from_raw_parts_mut(it.buf, it.cap), &*it.keys) };
        it.ok = keys.seal_datagram(buf, it.payload_len).is_ok();
    }
}

/// `copy_to` entry of a packet without a redundancy copy.
const NO_COPY: u8 = u8::MAX;

/// The path for a redundancy copy of a packet going on `picked`: the
/// eligible other path with the least one-way delay (the lowest id when
/// there is no model, under `weighted`), or [`NO_COPY`].
fn second_path(models: &[PathModel], mask: u64, picked: usize) -> u8 {
    let mut best: Option<(u64, usize)> = None;
    for id in 0..64usize {
        if id == picked || mask & (1u64 << id) == 0 {
            continue;
        }
        let owd = models.get(id).map_or(0, |m| m.owd_ns);
        if best.is_none_or(|(b, _)| owd < b) {
            best = Some((owd, id));
        }
    }
    best.and_then(|(_, id)| u8::try_from(id).ok())
        .unwrap_or(NO_COPY)
}

impl TxWorker {
    /// Runs until shutdown.
    pub fn run(mut self) {
        let seg_len = PACKET_OFFSET + self.mtu + 64;
        let mut original = vec![0u8; VIRTIO_NET_HDR_LEN + 65535];
        let mut bufs: Vec<Vec<u8>> = (0..TX_BATCH).map(|_| vec![0u8; seg_len]).collect();
        let mut sizes = vec![0usize; TX_BATCH];
        let mut scheds: Vec<AnyScheduler> =
            self.conns.iter().map(|_| AnyScheduler::default()).collect();
        let mut models: Vec<Vec<PathModel>> = self
            .conns
            .iter()
            .map(|_| Vec::with_capacity(mpt_proto::sched::MAX_PATHS))
            .collect();
        // Transmission time charged per connection and path in a batch.
        let mut charged: Vec<Vec<u64>> = self
            .conns
            .iter()
            .map(|_| Vec::with_capacity(mpt_proto::sched::MAX_PATHS))
            .collect();
        let mut sched_params: Vec<Vec<SchedPath>> = self
            .conns
            .iter()
            .map(|_| Vec::with_capacity(mpt_proto::sched::MAX_PATHS))
            .collect();
        let mut tables: Vec<Arc<PathTable>> = self.conns.iter().map(|c| c.paths()).collect();
        let mut generations: Vec<u64> = vec![0; self.conns.len()];
        let mut masks: Vec<u64> = vec![0; self.conns.len()];
        let mut plan: Vec<PlanEntry> = Vec::with_capacity(TX_BATCH);
        let mut counts: Vec<u32> = vec![0; self.conns.len()];
        // Which connections the current batch routes to (`stamps[c]` is
        // the batch that last did).
        let mut stamps: Vec<u64> = vec![0; self.conns.len()];
        let mut batch_no = 0u64;
        let mut touched: Vec<usize> = Vec::with_capacity(self.conns.len().min(TX_BATCH));
        let mut bases: Vec<u64> = vec![0; self.conns.len()];
        // Per connection: the batch's ticket in its send order, and per
        // path the batch's datagram count and first path sequence number
        // (see `crate::plane::tx_order`).
        let mut tickets: Vec<u64> = vec![0; self.conns.len()];
        let mut path_counts: Vec<Vec<u32>> = self.conns.iter().map(|_| Vec::new()).collect();
        let mut path_bases: Vec<Vec<u32>> = self.conns.iter().map(|_| Vec::new()).collect();
        // Per connection: its flow tables (see `FlowState`), made when it
        // first sends, so that a server's idle clients cost nothing here.
        let mut flow_states: Vec<Option<Box<FlowState>>> =
            self.conns.iter().map(|_| None).collect();
        let mut flowlet_gaps: Vec<u64> = vec![0; self.conns.len()];
        let mut redundancy: Vec<Redundancy> = vec![Redundancy::Off; self.conns.len()];
        // Per buffer: the path its redundancy copy goes on, or NO_COPY.
        let mut copy_to = vec![NO_COPY; TX_BATCH];
        let mut copy_buf = vec![0u8; mpt_proto::wire::MAX_DATAGRAM];
        let mut hashes = vec![0u32; TX_BATCH];
        let mut gaps = vec![0u32; TX_BATCH];
        let mut submitter = self.crypto_pool.submitter();
        let mut prepared: Vec<Prepared> = Vec::with_capacity(TX_BATCH);
        let mut seals: Vec<SealItem> = Vec::with_capacity(TX_BATCH);
        // Per buffer: whether its datagram counts as sent (headed and, with
        // keys, sealed).
        let mut counted = vec![false; TX_BATCH];
        let mut consecutive_errors = 0u32;
        let mut set_generation = self.set.generation();
        while !self.shutdown.load(Relaxed) {
            let first = match self.tun.recv_multiple_intr(
                &mut original,
                &mut bufs[..IDEAL_BATCH_SIZE],
                &mut sizes[..IDEAL_BATCH_SIZE],
                PACKET_OFFSET,
                &self.wake,
            ) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    if self.shutdown.load(Relaxed) {
                        break;
                    }
                    // A path table changed: take the new one now, so a
                    // removed path's socket is released even while no
                    // packet comes (reset first: a change after this
                    // point interrupts the next read).
                    let _ = self.wake.reset();
                    for (c, conn) in self.conns.iter().enumerate() {
                        conn.refresh_paths(&mut tables[c], &mut generations[c]);
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    self.stats.tun_errors.add(1);
                    consecutive_errors += 1;
                    if crate::io::fatal::tun_is_gone(&e) || consecutive_errors >= MAX_READ_ERRORS {
                        crate::io::fatal::fatal(format!(
                            "tun device unusable (read: {e}); was it deleted?"
                        ));
                        break;
                    }
                    tracing::debug!(error = %e, "tun read failed");
                    continue;
                }
            };
            consecutive_errors = 0;
            let n = self.read_more(first, &mut original, &mut bufs, &mut sizes);
            let set_now = self.set.generation();
            if set_now != set_generation {
                // Connections added (or removed: they keep their slot).
                set_generation = set_now;
                (self.conns, self.router) = self.set.load();
                let n = self.conns.len();
                scheds.resize_with(n, AnyScheduler::default);
                let slots = mpt_proto::sched::MAX_PATHS;
                models.resize_with(n, || Vec::with_capacity(slots));
                charged.resize_with(n, || Vec::with_capacity(slots));
                sched_params.resize_with(n, || Vec::with_capacity(slots));
                let from = tables.len();
                tables.extend(self.conns.iter().skip(from).map(|c| c.paths()));
                generations.resize(n, 0);
                masks.resize(n, 0);
                counts.resize(n, 0);
                stamps.resize(n, 0);
                bases.resize(n, 0);
                tickets.resize(n, 0);
                path_counts.resize_with(n, Vec::new);
                path_bases.resize_with(n, Vec::new);
                flow_states.resize_with(n, || None);
                flowlet_gaps.resize(n, 0);
                redundancy.resize(n, Redundancy::Off);
            }
            let now = Instant::now();
            // Per batch, for each connection it routes packets to (and
            // only those: the cost does not grow with the connections
            // that send nothing, e.g. a server's idle clients): a fresh
            // view of weights, models and live paths (the path table
            // itself only when it changed).
            batch_no = batch_no.wrapping_add(1);
            touched.clear();
            plan.clear();
            for (i, &size) in sizes.iter().enumerate().take(n) {
                let packet = &bufs[i][PACKET_OFFSET..PACKET_OFFSET + size];
                let Some(c) = self.router.lookup(packet) else {
                    self.stats.no_route.add(1);
                    continue;
                };
                if stamps[c] != batch_no {
                    stamps[c] = batch_no;
                    touched.push(c);
                    counts[c] = 0;
                    let conn = &self.conns[c];
                    conn.refresh_paths(&mut tables[c], &mut generations[c]);
                    let params = &mut sched_params[c];
                    params.clear();
                    params.resize(
                        tables[c].slots(),
                        SchedPath {
                            weight: 0,
                            window: 1,
                        },
                    );
                    for p in tables[c].iter() {
                        params[p.id] = p.sched();
                    }
                    masks[c] = conn.eligible.load(Relaxed);
                    path_counts[c].clear();
                    path_counts[c].resize(tables[c].slots(), 0);
                    redundancy[c] = conn.redundancy();
                    models[c].clear();
                    charged[c].clear();
                    let adaptive = conn.adaptive.load(Relaxed);
                    scheds[c].select(adaptive);
                    if adaptive {
                        let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
                        models[c].resize(tables[c].slots(), PathModel::default());
                        charged[c].resize(tables[c].slots(), 0);
                        for p in tables[c].iter() {
                            models[c][p.id] = p.model.load(p.id, conn_ns);
                            scheds[c].set_busy_until(p.id, p.model.busy_until());
                        }
                        flowlet_gaps[c] = Flowlets::gap_for(models[c].iter().map(|m| m.owd_ns));
                    }
                }
                hashes[i] = flow_hash(packet);
                let conn = &self.conns[c];
                let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
                let tag = if conn.crypto.is_some() { TAG_LEN } else { 0 };
                let bytes = PACKET_OFFSET + size + tag;
                let follows = scheds[c].follows_flowlets();
                let flowlet = follows
                    .then(|| {
                        let flowlets = &FlowState::of(&mut flow_states, c).flowlets;
                        flowlets.current(hashes[i], conn_ns, flowlet_gaps[c])
                    })
                    .flatten();
                let pick = scheds[c].pick(&PickInput {
                    mask: masks[c],
                    weights: &sched_params[c],
                    models: &models[c],
                    bytes,
                    bulk: is_tcp_syn(packet),
                    now_ns: conn_ns,
                    hold_ns: conn.reseq_timeout_us.load(Relaxed).saturating_mul(1000),
                    flowlet,
                });
                if let Some(p) = pick {
                    // Only a scheduler with path models charges their clocks.
                    if let (Some(m), Some(ns)) = (models[c].get(p), charged[c].get_mut(p)) {
                        *ns += (bytes as u64).saturating_mul(m.ps_per_byte) / 1000;
                    }
                    if follows {
                        let flowlets = &mut FlowState::of(&mut flow_states, c).flowlets;
                        flowlets.record(hashes[i], p, conn_ns);
                    }
                }
                copy_to[i] = NO_COPY;
                if let Some(p) = pick {
                    let realtime = &mut FlowState::of(&mut flow_states, c).realtime;
                    if realtime.wants_copy(redundancy[c], hashes[i], packet, conn_ns) {
                        copy_to[i] = second_path(&models[c], masks[c], p);
                    }
                }
                match pick {
                    Some(p) => {
                        // Key: connection, path, then the packet's rank among
                        // its connection's packets in tun order, then its
                        // buffer. Sorting groups by path while keeping tun
                        // order; the rank becomes the connection sequence
                        // number, so the peer's resequencer restores tun
                        // order, not path order.
                        plan.push(PlanEntry::new(c, p, counts[c], i));
                        counts[c] += 1;
                        if let Some(n) = path_counts[c].get_mut(p) {
                            *n += 1;
                        }
                    }
                    None => self.conns[c].drops.no_path.add(1),
                }
            }
            // Number the batch: connection and path sequence numbers and a
            // ticket in the connection's send order, at once (see
            // `crate::plane::tx_order`). In ascending connection order, as the
            // sends below.
            touched.sort_unstable();
            for &c in &touched {
                let count = counts[c];
                if count == 0 {
                    bases[c] = 0;
                    continue;
                }
                let conn = &self.conns[c];
                let (table, per_path, firsts) = (&tables[c], &path_counts[c], &mut path_bases[c]);
                let (ticket, base) =
                    conn.tx_order.allocate(|| {
                        firsts.clear();
                        firsts.extend(per_path.iter().enumerate().map(
                            |(p, &n)| match table.get(p) {
                                Some(path) if n > 0 => path.path_seq.fetch_add(n, Relaxed),
                                _ => 0,
                            },
                        ));
                        conn.seq.fetch_add(u64::from(count), Relaxed)
                    });
                tickets[c] = ticket;
                bases[c] = base;
            }
            // Flow predecessors, in tun (= sequence) order.
            for e in &plan {
                let c = e.conn();
                let order = &mut FlowState::of(&mut flow_states, c).order;
                gaps[e.buf()] = order.gap(hashes[e.buf()], bases[c] + u64::from(e.rank()));
            }
            // Add what this batch charged to the paths' shared clocks.
            for &c in &touched {
                let conn = &self.conns[c];
                if charged[c].iter().all(|&ns| ns == 0) {
                    continue;
                }
                let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
                for p in tables[c].iter() {
                    if let Some(&ns) = charged[c].get(p.id).filter(|&&ns| ns > 0) {
                        let cap = models[c].get(p.id).map_or(0, |m| m.cap_ns);
                        p.model.charge(conn_ns, ns, cap.saturating_mul(2));
                    }
                }
            }
            plan.sort_unstable();
            // Head every group, then seal the whole batch at once (in
            // parallel when it is large enough), then send group by group:
            // the batch, not a path's share of it, is what the crypto
            // stage splits.
            prepared.clear();
            seals.clear();
            let mut at = 0;
            while at < plan.len() {
                let key = plan[at].group();
                let end = plan[at..]
                    .iter()
                    .position(|e| e.group() != key)
                    .map_or(plan.len(), |off| at + off);
                let c = plan[at].conn();
                if let Some(p) = self.head_group(
                    &tables[c],
                    (at, end),
                    &plan[at..end],
                    bases[c],
                    path_bases[c].get(plan[at].path()).copied().unwrap_or(0),
                    &mut bufs,
                    &sizes,
                    now,
                    &gaps,
                    &copy_to,
                    &mut copy_buf,
                    &mut counted,
                    &mut seals,
                ) {
                    prepared.push(p);
                }
                at = end;
            }
            if !seals.is_empty() {
                submitter.run(
                    seals.as_mut_slice(),
                    &|chunk: &mut [SealItem], _: &mut Vec<u8>| seal_items(chunk),
                );
                for it in &seals {
                    if !it.ok {
                        counted[it.index] = false;
                    }
                }
            }
            // Send, connection by connection in ascending order, each when
            // its turn has come to this batch's ticket; every ticket taken
            // is ended, whether anything was sent or not.
            let mut next = 0;
            for &c in &touched {
                if counts[c] == 0 {
                    continue;
                }
                let order = &self.conns[c].tx_order;
                order.wait_turn(tickets[c]);
                while let Some(p) = prepared.get(next).filter(|p| plan[p.start].conn() == c) {
                    self.send_group(p, &plan, &bufs, &sizes, &counted);
                    next += 1;
                }
                order.done(tickets[c]);
            }
            debug_assert_eq!(
                next,
                prepared.len(),
                "a group outside the batch's connections"
            );
            prepared.clear();
        }
    }

    /// Heads one group of packets bound for the same path (records them for
    /// repair, sends their redundancy copies) and queues them for sealing.
    /// Returns what sending the group needs, or `None` if it cannot be
    /// sent (counted).
    #[allow(clippy::too_many_arguments)]
    fn head_group(
        &self,
        table: &PathTable,
        (start, end): (usize, usize),
        group: &[PlanEntry],
        seq_base: u64,
        pseq0: u32,
        bufs: &mut [Vec<u8>],
        sizes: &[usize],
        now: Instant,
        gaps: &[u32],
        copy_to: &[u8],
        copy_buf: &mut [u8],
        counted: &mut [bool],
        seals: &mut Vec<SealItem>,
    ) -> Option<Prepared> {
        let c = group[0].conn();
        let p = group[0].path();
        let conn = &self.conns[c];
        let count = group.len() as u64;
        let Some(path) = table.get(p) else {
            conn.drops.no_path.add(count);
            return None;
        };
        let Some(remote) = path.remote_via() else {
            conn.drops.no_remote.add(count);
            return None;
        };
        // The header names the connection, or (public-key sessions) the
        // peer's session index of the keys that seal.
        let (keys, conn_id) = match &conn.crypto {
            None => (None, conn.conn_id),
            Some(crypto) => match crypto.sealing(conn.conn_id) {
                Some((k, id)) => (Some(k), id),
                None => {
                    conn.drops.no_session.add(count);
                    return None;
                }
            },
        };
        let flags = if keys.is_some() {
            Flags::SEALED.with(Flags::FLOW)
        } else {
            Flags::FLOW
        };
        let ts = mpt_proto::timestamp_us(conn.epoch, now);
        // While the peer asks for repairs on this path, keep a copy of
        // each payload before it is sealed (one lock per group).
        let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
        let mut history = if path.repair_until_ns.load(Relaxed) > conn_ns {
            let mut g = match path.repair_history.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            if g.is_none() {
                *g = Some(RepairHistory::new(
                    crate::dataplane::repair::HISTORY_SLOTS,
                    FLOW_PREFIX_LEN + self.mtu,
                ));
            }
            Some(g)
        } else {
            // The peer stopped asking KEEP_COPIES ago: give the copies'
            // memory back (1.4 MiB per path at MTU 1400). Once per episode:
            // the first worker to clear the deadline does it; a request
            // meanwhile sets a new deadline and the exchange fails.
            let until = path.repair_until_ns.load(Relaxed);
            if until != 0
                && path
                    .repair_until_ns
                    .compare_exchange(until, 0, Relaxed, Relaxed)
                    .is_ok()
            {
                let mut g = match path.repair_history.lock() {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
                *g = None;
            }
            None
        };
        for (k, entry) in group.iter().enumerate() {
            let i = entry.buf();
            let copy_via = match copy_to[i] {
                NO_COPY => None,
                q => table.get(usize::from(q)),
            };
            let header = Header {
                msg_type: MsgType::Data,
                flags: if copy_via.is_some() {
                    flags.with(Flags::COPY)
                } else {
                    flags
                },
                path_id: p as u16,
                conn_id,
                seq: seq_base + u64::from(entry.rank()),
                path_seq: pseq0.wrapping_add(k as u32),
                timestamp_us: ts,
            };
            counted[i] = false;
            // The buffer always has PACKET_OFFSET bytes in front of the packet.
            if header.emit(&mut bufs[i][..HEADER_LEN]).is_err()
                || emit_flow_prefix(gaps[i], &mut bufs[i][HEADER_LEN..PACKET_OFFSET]).is_err()
            {
                continue;
            }
            if let Some(h) = history.as_mut().and_then(|g| g.as_mut()) {
                h.record(
                    header.path_seq,
                    header.seq,
                    true,
                    &bufs[i][HEADER_LEN..PACKET_OFFSET + sizes[i]],
                );
            }
            if let Some(via) = copy_via {
                crate::dataplane::repair::send_copy(
                    conn,
                    via,
                    header.seq,
                    &bufs[i][HEADER_LEN..PACKET_OFFSET + sizes[i]],
                    keys.as_deref(),
                    now,
                    copy_buf,
                );
            }
            counted[i] = true;
            if let Some(k) = &keys {
                // Each buffer has room for the tag after the packet.
                let b = &mut bufs[i];
                seals.push(SealItem {
                    buf: b.as_mut_ptr(),
                    cap: b.len(),
                    payload_len: FLOW_PREFIX_LEN + sizes[i],
                    keys: Arc::as_ptr(k),
                    index: i,
                    ok: false,
                });
            }
        }
        drop(history);
        Some(Prepared {
            start,
            end,
            path: path.clone(),
            remote,
            keys,
            conn_ns,
        })
    }

    /// After a batch's first read filled `filled` buffers: reads on
    /// without waiting while [`IDEAL_BATCH_SIZE`] buffers are left (what
    /// one read may need) and the queue has packets. Returns how many
    /// buffers the batch fills. A failing read ends the batch (it is
    /// counted; the next blocking read decides whether the device is gone).
    fn read_more(
        &self,
        mut filled: usize,
        original: &mut [u8],
        bufs: &mut [Vec<u8>],
        sizes: &mut [usize],
    ) -> usize {
        while filled + IDEAL_BATCH_SIZE <= bufs.len().min(sizes.len()) {
            let end = filled + IDEAL_BATCH_SIZE;
            match self.tun.recv_multiple(
                original,
                &mut bufs[filled..end],
                &mut sizes[filled..end],
                PACKET_OFFSET,
            ) {
                Ok(0) => break,
                Ok(k) => filled += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    self.stats.tun_errors.add(1);
                    tracing::debug!(error = %e, "tun read failed");
                    break;
                }
            }
        }
        filled
    }

    /// Sends one headed (and sealed) group of packets bound for the same
    /// path, in GSO runs.
    fn send_group(
        &self,
        prepared: &Prepared,
        plan: &[PlanEntry],
        bufs: &[Vec<u8>],
        sizes: &[usize],
        counted: &[bool],
    ) {
        let group = &plan[prepared.start..prepared.end];
        let conn = &self.conns[group[0].conn()];
        let path = &*prepared.path;
        let remote = &prepared.remote;
        let conn_ns = prepared.conn_ns;
        let tag = if prepared.keys.is_some() { TAG_LEN } else { 0 };
        let bytes: u64 = group
            .iter()
            .filter(|e| counted[e.buf()])
            .map(|e| (PACKET_OFFSET + sizes[e.buf()] + tag) as u64)
            .sum();
        // Send runs of equal-sized datagrams (the last of a run may be
        // shorter) as one GSO send each; the segments of one TCP
        // super-packet all have the same size, so a run is usually the
        // whole group.
        let mut sent_total = 0;
        let mut at = 0;
        while at < group.len() {
            let len_of = |e: PlanEntry| PACKET_OFFSET + sizes[e.buf()] + tag;
            let segment = len_of(group[at]);
            let mut end = at + 1;
            let mut total = segment;
            while end < group.len() && end - at < MAX_GSO_SEGMENTS {
                let l = len_of(group[end]);
                if l > segment || total + l > MAX_GSO_BYTES {
                    break;
                }
                total += l;
                end += 1;
                if l < segment {
                    break;
                }
            }
            // The datagrams stay in their own buffers: the kernel gathers
            // them (one copy fewer per byte than assembling them first).
            let mut parts = [io::IoSlice::new(&[]); MAX_GSO_SEGMENTS];
            for (part, e) in parts.iter_mut().zip(&group[at..end]) {
                let i = e.buf();
                *part = io::IoSlice::new(&bufs[i][..PACKET_OFFSET + sizes[i] + tag]);
            }
            match path
                .socket
                .send_datagrams(&remote.sock, remote.via.as_ref(), &parts[..end - at])
            {
                Ok(n) => {
                    sent_total += n;
                    conn.drops
                        .send_error
                        .add((end - at - n.min(end - at)) as u64);
                }
                Err(e) => {
                    conn.drops.send_error.add((end - at) as u64);
                    tracing::trace!(conn = %conn.name, path = %path.name, error = %e, "send failed");
                }
            }
            at = end;
        }
        path.tx_packets.add(sent_total as u64);
        path.tx_data_packets.add(sent_total as u64);
        if sent_total > 0 {
            path.tx_data_last_ns.store(conn_ns.max(1), Relaxed);
        }
        path.tx_bytes.add(bytes);
        path.tx_data_bytes.add(bytes);
    }
}
