//! What a transmit worker keeps per connection, in one struct: its
//! scheduler and the per-batch view of the connection (path table, weights,
//! models, eligible paths), the batch's counts and numbers, and its flow
//! tables. A connection's entry is refreshed only by a batch that routes
//! to it, so a server's idle clients cost nothing per batch.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use mpt_proto::crypto::TAG_LEN;
use mpt_proto::flow::{is_tcp_syn, FlowTable};
use mpt_proto::sched::{
    AnyScheduler, Flowlets, PathModel, PickInput, RealtimeFlows, Redundancy, SchedPath, Scheduler,
    MAX_PATHS,
};

use super::batch::PACKET_OFFSET;
use crate::plane::{ConnShared, PathTable};

/// What a transmit worker keeps per flow bucket of one connection: the
/// last sequence number sent (so each datagram names its flow predecessor
/// for the peer's per-flow resequencing; a flow stays on one tun queue,
/// hence one worker), the path and time of the last packet (flowlets: a
/// flow stays on its path while that costs nothing) and whether the flow
/// looks real-time (redundancy). About 160 KiB, made when the connection
/// first sends: on a server with hundreds of clients only those that
/// receive traffic pay for it.
pub(super) struct FlowState {
    pub(super) order: FlowTable,
    pub(super) flowlets: Flowlets,
    pub(super) realtime: RealtimeFlows,
}

/// One connection as a transmit worker sees it.
pub(super) struct TxConn {
    /// Its scheduler (the policy follows `ConnShared::adaptive`).
    pub sched: AnyScheduler,
    /// The adaptive scheduler's path models, by path id (empty under
    /// `weighted`).
    pub models: Vec<PathModel>,
    /// Transmission time charged per path in this batch, ns.
    pub charged: Vec<u64>,
    /// Weights and windows, by path id.
    pub sched_params: Vec<SchedPath>,
    /// The path table and its generation.
    pub table: Arc<PathTable>,
    pub generation: u64,
    /// The paths the schedulers may use.
    pub mask: u64,
    /// How long the receiver holds a gap (the published gap timeout, ns).
    pub hold_ns: u64,
    /// Packets of this batch for the connection.
    pub count: u32,
    /// The batch that last routed to it (`TxBatch::batch_no`).
    pub stamp: u64,
    /// The batch's first connection sequence number.
    pub base: u64,
    /// The batch's ticket in the connection's send order (see
    /// `crate::plane::tx_order`).
    pub ticket: u64,
    /// Per path: the batch's datagram count and first path sequence
    /// number.
    pub path_counts: Vec<u32>,
    pub path_bases: Vec<u32>,
    /// Made when the connection first sends.
    flows: Option<Box<FlowState>>,
    /// The flowlet gap for the current models.
    pub flowlet_gap: u64,
    /// What gets a redundancy copy.
    pub redundancy: Redundancy,
}

impl TxConn {
    /// A connection's entry before its first batch.
    pub fn new(conn: &ConnShared) -> TxConn {
        TxConn {
            sched: AnyScheduler::default(),
            models: Vec::with_capacity(MAX_PATHS),
            charged: Vec::with_capacity(MAX_PATHS),
            sched_params: Vec::with_capacity(MAX_PATHS),
            table: conn.paths(),
            generation: 0,
            mask: 0,
            hold_ns: 0,
            count: 0,
            stamp: 0,
            base: 0,
            ticket: 0,
            path_counts: Vec::new(),
            path_bases: Vec::new(),
            flows: None,
            flowlet_gap: 0,
            redundancy: Redundancy::Off,
        }
    }

    /// The flow tables, made on first use.
    pub fn flows(&mut self) -> &mut FlowState {
        self.flows.get_or_insert_with(|| {
            Box::new(FlowState {
                order: FlowTable::new(),
                flowlets: Flowlets::new(),
                realtime: RealtimeFlows::new(),
            })
        })
    }

    /// The first packet of batch `batch_no` for this connection: a fresh
    /// view of weights, models and live paths (the path table itself only
    /// when it changed).
    pub fn begin_batch(&mut self, conn: &ConnShared, batch_no: u64, now: Instant) {
        self.stamp = batch_no;
        self.count = 0;
        conn.refresh_paths(&mut self.table, &mut self.generation);
        self.sched_params.clear();
        self.sched_params.resize(
            self.table.slots(),
            SchedPath {
                weight: 0,
                window: 1,
            },
        );
        for p in self.table.iter() {
            self.sched_params[p.id] = p.sched();
        }
        self.mask = conn.eligible.load(Relaxed);
        self.hold_ns = conn.timing.load().reorder_timeout_us().saturating_mul(1000);
        self.path_counts.clear();
        self.path_counts.resize(self.table.slots(), 0);
        self.redundancy = conn.redundancy();
        self.models.clear();
        self.charged.clear();
        let adaptive = conn.adaptive.load(Relaxed);
        self.sched.select(adaptive);
        if adaptive {
            let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
            self.models.resize(self.table.slots(), PathModel::default());
            self.charged.resize(self.table.slots(), 0);
            for p in self.table.iter() {
                self.models[p.id] = p.model.load(p.id, conn_ns);
                self.sched.set_busy_until(p.id, p.model.busy_until());
            }
            self.flowlet_gap = Flowlets::gap_for(self.models.iter().map(|m| m.owd_ns));
        }
    }

    /// Picks the path for a packet of `size` bytes (flow `hash`) at
    /// `conn_ns`, and charges its transmission time to that path's model.
    #[inline]
    pub fn pick(
        &mut self,
        conn: &ConnShared,
        hash: u32,
        packet: &[u8],
        size: usize,
        conn_ns: u64,
    ) -> Option<usize> {
        let tag = if conn.crypto.is_some() { TAG_LEN } else { 0 };
        let bytes = PACKET_OFFSET + size + tag;
        let follows = self.sched.follows_flowlets();
        let gap = self.flowlet_gap;
        let flowlet = follows
            .then(|| self.flows().flowlets.current(hash, conn_ns, gap))
            .flatten();
        let pick = self.sched.pick(&PickInput {
            mask: self.mask,
            weights: &self.sched_params,
            models: &self.models,
            bytes,
            bulk: is_tcp_syn(packet),
            now_ns: conn_ns,
            hold_ns: self.hold_ns,
            flowlet,
        });
        if let Some(p) = pick {
            // Only a scheduler with path models charges their clocks.
            if let (Some(m), Some(ns)) = (self.models.get(p), self.charged.get_mut(p)) {
                *ns += (bytes as u64).saturating_mul(m.ps_per_byte) / 1000;
            }
            if follows {
                self.flows().flowlets.record(hash, p, conn_ns);
            }
        }
        pick
    }

    /// Sends a pinned acceleration leg's packet of `size` bytes on path
    /// `p` (eligible: checked by the caller), charging its transmission
    /// time to that path's model as [`TxConn::pick`] does.
    #[inline]
    pub fn pin(&mut self, conn: &ConnShared, p: usize, size: usize) -> usize {
        let tag = if conn.crypto.is_some() { TAG_LEN } else { 0 };
        let bytes = PACKET_OFFSET + size + tag;
        if let (Some(m), Some(ns)) = (self.models.get(p), self.charged.get_mut(p)) {
            *ns += (bytes as u64).saturating_mul(m.ps_per_byte) / 1000;
        }
        p
    }

    /// Whether a packet of flow `hash` wants a redundancy copy.
    #[inline]
    pub fn wants_copy(&mut self, hash: u32, packet: &[u8], conn_ns: u64) -> bool {
        let mode = self.redundancy;
        self.flows()
            .realtime
            .wants_copy(mode, hash, packet, conn_ns)
    }
}
