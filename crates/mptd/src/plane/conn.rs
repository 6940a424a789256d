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

use super::counters::{CopyCounters, Drops, EqualizeCounters, RepairCounters, TcpCounters};
use super::crypto::ConnCrypto;
use super::path::PathTable;
use super::plan::PublishedPlan;
use crate::io::udp::Waker;
use crate::plane::route::SourceFilter;
use crate::sync::Counter;
use crate::sync::{lock_unpoisoned, read_unpoisoned, write_unpoisoned};
use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::Redundancy;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
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
    /// FIFO with several transmit workers (see [`crate::plane::tx_order`]).
    pub tx_order: crate::plane::tx_order::TxOrder,
    /// Bit mask of paths the schedulers may use (published by the control
    /// loop from the session's eligibility).
    pub eligible: AtomicU64,
    /// The paths (see [`ConnShared::paths`]).
    paths: RwLock<Arc<PathTable>>,
    /// Bumped whenever `paths` is replaced.
    paths_generation: AtomicU64,
    /// Wakes the connection's own receive worker when `paths` changes.
    /// `None` for a client connection: the shared port's workers read its
    /// paths, so it has no worker of its own and keeps no descriptor (a
    /// concentrator's descriptors do not grow with its clients).
    pub rx_wake: Option<Waker>,
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
    /// The receive side's timing (gap timeout, path waits, delay spread,
    /// equalisation targets), published by the control loop each round
    /// (see [`crate::plane::plan`]).
    pub timing: PublishedPlan,
    /// Transmit workers schedule with `adaptive` (else `weighted`).
    pub adaptive: AtomicBool,
    /// Control loop only: `repairs.requested_datagrams` as last seen, and
    /// when it last grew (random loss on a path we receive on).
    pub random_loss_seen: Mutex<(u64, Option<Instant>)>,
    /// Loss repair is on (`repair` in the config).
    pub repair: AtomicBool,
    /// What gets a second copy (see `mpt_proto::sched::Redundancy`), as
    /// [`ConnShared::redundancy`] and [`ConnShared::set_redundancy`]
    /// encode it.
    redundancy: std::sync::atomic::AtomicU8,
    /// What redundancy did.
    pub copies: CopyCounters,
    /// What delay equalisation did.
    pub equalized: EqualizeCounters,
    /// Paths that are suspect or down (bit per path id): the receive
    /// worker stops counting them in the resequencer's loss proof.
    pub silent_paths: AtomicU64,
    /// What loss repair did.
    pub repairs: RepairCounters,
    /// What the transmit stage did to TCP segments (MSS clamping).
    pub tcp: TcpCounters,
    /// Handovers of our traffic off failed paths.
    pub handovers: HandoverRecord,
    /// A server's client connection: no path socket of its own; served by
    /// the shared port's workers, its paths learnt (`crate::plane::shared_port`).
    pub client: bool,
    /// Client connections: the receive state the shared workers keep for
    /// it (replay windows, delay line, loss detectors), taken under this
    /// lock once per group of a batch. Created by the first worker. Its
    /// type is the receive stage's own: the plane carries it without
    /// knowing it, so the plane never imports the data plane.
    pub rx_state: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// Removed by a reload: its datagrams are refused (and counted).
    pub removed: AtomicBool,
    /// Which packets are pinned acceleration legs' (their path chosen by
    /// their DSCP, not held by delay equalisation).
    pub leg_pin: super::leg_pin::LegPin,
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
        let mut g = lock_unpoisoned(&self.last);
        *g = Some(last);
    }

    /// The latest handover, if any.
    pub fn last(&self) -> Option<LastHandover> {
        lock_unpoisoned(&self.last).clone()
    }
}

impl ConnShared {
    /// The redundancy mode.
    pub fn redundancy(&self) -> Redundancy {
        match self.redundancy.load(Relaxed) {
            1 => Redundancy::Off,
            2 => Redundancy::All,
            _ => Redundancy::Auto,
        }
    }

    /// Sets the redundancy mode (the control loop, from the config).
    pub fn set_redundancy(&self, mode: Redundancy) {
        let code = match mode {
            Redundancy::Auto => 0,
            Redundancy::Off => 1,
            Redundancy::All => 2,
        };
        self.redundancy.store(code, Relaxed);
    }
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
        rx_wake: Option<Waker>,
        tx_wake: TxWakes,
    ) -> ConnShared {
        ConnShared {
            index,
            name,
            conn_id,
            epoch,
            seq: AtomicU64::new(first_seq()),
            tx_order: crate::plane::tx_order::TxOrder::new(),
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
            timing: PublishedPlan::new(reseq_timeout),
            adaptive: AtomicBool::new(true),
            random_loss_seen: Mutex::new((0, None)),
            repair: AtomicBool::new(true),
            silent_paths: AtomicU64::new(0),
            redundancy: std::sync::atomic::AtomicU8::new(0),
            copies: CopyCounters::default(),
            equalized: EqualizeCounters::default(),
            repairs: RepairCounters::default(),
            tcp: TcpCounters::default(),
            handovers: HandoverRecord::default(),
            client: false,
            rx_state: Mutex::new(None),
            removed: AtomicBool::new(false),
            leg_pin: Default::default(),
        }
    }

    /// The current paths.
    pub fn paths(&self) -> Arc<PathTable> {
        read_unpoisoned(&self.paths).clone()
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
        *write_unpoisoned(&self.paths) = table;
        self.paths_generation.fetch_add(1, Relaxed);
        if let Some(w) = &self.rx_wake {
            w.wake();
        }
        for w in self.tx_wake.0.iter() {
            let _ = w.trigger();
        }
    }

    /// Locks the resequencer (a panicked holder leaves it usable).
    pub fn lock_reseq(&self) -> std::sync::MutexGuard<'_, Resequencer> {
        lock_unpoisoned(&self.reseq)
    }
}

/// The connections (by index) and the router to them.
pub type ConnsAndRouter = (Arc<Vec<Arc<ConnShared>>>, Arc<crate::plane::route::Router>);

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
    pub fn new(
        list: Arc<Vec<Arc<ConnShared>>>,
        router: Arc<crate::plane::route::Router>,
    ) -> ConnSet {
        ConnSet {
            current: RwLock::new((list, router)),
            generation: AtomicU64::new(1),
        }
    }

    /// The connections and the router.
    pub fn load(&self) -> ConnsAndRouter {
        read_unpoisoned(&self.current).clone()
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
    pub fn publish(
        &self,
        list: Arc<Vec<Arc<ConnShared>>>,
        router: Arc<crate::plane::route::Router>,
    ) {
        let wakes = list.first().map(|c| c.tx_wake.0.clone());
        *write_unpoisoned(&self.current) = (list, router);
        self.generation.fetch_add(1, Relaxed);
        for w in wakes.iter().flat_map(|w| w.iter()) {
            let _ = w.trigger();
        }
    }
}

/// Resequencing window per connection, in packets: 4096 covers a 10 ms
/// gap at ~5 Gbit/s of 1400-byte packets (5.7 MB per connection at MTU
/// 1400).
pub const REORDER_SLOTS: usize = 4096;

/// Gap timeout until the control loop has RTT samples to adapt it, and its
/// floor (the timing policy's, see `mpt_proto::session::timing`).
pub use mpt_proto::session::timing::DEFAULT_REORDER_TIMEOUT;

/// The first connection sequence number of a connection made now: the
/// microseconds since the Unix epoch (at least 1).
///
/// Why not 1: the peer's resequencer does not know that we restarted. A
/// restarted daemon numbering from 1 again sends numbers the peer already
/// saw from the old process: below the peer's window base they are "late"
/// and pass, but where the old process left numbers marked done above a
/// gap (skipped probes, flow-bypass deliveries) the new datagrams land on
/// those marks and are dropped as duplicates until the count passes them
/// (`mpt bench soak --quick`: a client's TCP stalled for 11 to 30 s after
/// the concentrator's restart; the resequencer's own restart test only
/// catches a counter more than four windows behind). Numbering from the
/// clock puts a restarted daemon's numbers above the old ones (unless the
/// old process sent more than one datagram per microsecond on the
/// connection, or the clock stepped back), so the peer's window jumps
/// forward and clears. 2^50 microseconds are 35 years from now:
/// `REKEY_AFTER_MESSAGES` (2^60) is far.
pub fn first_seq() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| (d.as_micros() as u64).max(1))
}

#[cfg(test)]
mod first_seq_tests {
    use super::first_seq;

    #[test]
    fn a_later_connection_numbers_above_what_an_earlier_one_sent() {
        // An earlier process's connection that sent 1000 datagrams...
        let earlier = first_seq();
        let sent = earlier + 1000;
        std::thread::sleep(std::time::Duration::from_millis(5));
        // ...and the restarted one's first number: above, by the time
        // that passed (less what was sent).
        let restarted = first_seq();
        assert!(restarted > sent, "{restarted} <= {sent}");
        assert!(restarted < 1 << 60, "far from REKEY_AFTER_MESSAGES");
    }
}
