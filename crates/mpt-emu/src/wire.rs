//! The real-time driver: a transparent wire between two interfaces.
//!
//! One thread per direction reads every frame arriving on its ingress
//! interface (an `AF_PACKET` socket), asks the [`LinkModel`] when it may
//! leave, holds it in a queue ordered by departure, and writes it out of the
//! egress interface at that instant. The model is pure; this file owns time.
//!
//! Frames come in through a `PACKET_MMAP` receive ring (module `ring`: no
//! system call per frame; frames too large for a slot are read whole with
//! `recvmsg`), or with `recvmmsg` batches if the kernel refuses the ring,
//! and go out with `sendmmsg` (up to [`RX_BATCH`] frames read and
//! [`TX_BATCH`] sent at a time), so that the per-call cost is shared when
//! the packet rate is high (one system call per frame caps the wire near
//! 1.7 Gbit/s of MTU-sized frames; batched against one frame per call:
//! docs/results/2026-11-26-link-emulator.md). Batching never sends a frame
//! early: a send batch holds only frames whose departure has passed.
//!
//! Timing, after paper 001 (section 3.7): a plain sleep overshoots by tens of
//! microseconds and the error would pile up packet after packet. Here
//!
//! * departures come from the model's absolute timeline, so lateness of one
//!   send never shifts the next (the slack is carried by construction);
//! * the thread sleeps coarsely (`ppoll` on the ingress socket, timer slack
//!   1 us) until [`SPIN_MARGIN`] before the next departure, then spins on the
//!   clock (still reading the ingress socket without blocking) to the exact
//!   instant — the paper's busy waiting, but only for the last microseconds;
//! * arrival times are the kernel's receive timestamps, not the moment the
//!   thread woke up, so wake-up latency does not become extra delay.
//!
//! What is measured: every frame's departure error (actual minus scheduled
//! send instant) and, over back-to-back frames, the achieved rate, counted on
//! whole Ethernet frames as the packet socket sees them.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use tracing::{debug, info, trace, warn};

use super::gso;
use super::model::{DropReason, LinkConfig, LinkModel, Verdict};
use super::ring::{self, RxRing};
use super::stats::{DirectionReport, DropCounts, RateReport, Welford, WireReport};
use super::sys::{self, PacketSocket, RecvBatch, Role, SendBatch, MAX_FRAME, VNET_HDR_LEN};

/// Stop coarse sleeping this long before a departure and spin the rest.
/// Measured on the 2-core CI VM: `ppoll` with 1 us timer slack wakes
/// 10-70 us late (rarely more), so 200 us covers it with margin while keeping
/// the spinning share of the CPU small at low packet rates.
pub const SPIN_MARGIN: Duration = Duration::from_micros(200);

/// Longest coarse sleep, so the stop flag is seen promptly.
const MAX_IDLE: Duration = Duration::from_millis(20);

/// Frames read (from the ring, or per `recvmmsg`) before departures are
/// looked at again. With `recvmmsg` the batch shares the cost of the call
/// (one `recvmsg` per frame topped out near 1.7 Gbit/s of MTU-sized
/// frames); either way its length bounds how late a departure can be: a
/// profile of the wire carrying 2 Gbit/s of TCP on the 2-core CI VM puts
/// `recvmmsg` at about 1 us per full-size frame, so a full batch delays
/// departures by some 35 us (15 frame times at 5 Gbit/s); from the ring
/// about 0.3 us per frame, some 10 us. The absolute timeline makes up for
/// it, so the rate holds.
pub const RX_BATCH: usize = 32;

/// Frames written per `sendmmsg` at most: all that are due, up to this.
/// A batch forms only when the thread fell behind (at a high packet rate
/// or after a wake-up); otherwise each frame leaves alone, on time.
pub const TX_BATCH: usize = 32;

/// A kernel timestamp older than this is not trusted (clock stepped), and
/// the read time is used instead.
const MAX_TIMESTAMP_AGE: Duration = Duration::from_secs(1);

/// Memory guard: the driver holds at most this many bytes of frames in
/// flight (in the model's queue or delay line); beyond it frames are dropped
/// as `overflow`. 1 Gbit/s x 1 s fits.
const MAX_HELD_BYTES: usize = 256 << 20;

/// Spare buffers kept for reuse, so steady state allocates nothing.
const POOL_LIMIT: usize = 8192;

/// Errors of the real-time wire.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    // Fields are not called `source`: thiserror would chain them and anyhow
    // would print the message twice.
    #[error("{dir}: setup: {error}")]
    Setup {
        dir: &'static str,
        error: std::io::Error,
    },
    #[error("{dir}: {error}")]
    Io {
        dir: &'static str,
        error: std::io::Error,
    },
    #[error("{0}: the thread panicked")]
    Panicked(&'static str),
    #[error("{0}: the thread ended before it was ready")]
    Vanished(&'static str),
}

/// What to emulate between which interfaces.
#[derive(Debug, Clone)]
pub struct WireConfig {
    /// Interface of side a (frames arriving here go a -> b).
    pub a: String,
    /// Interface of side b.
    pub b: String,
    /// Network namespace (`ip netns` name) holding both interfaces.
    pub netns: Option<String>,
    pub a_to_b: LinkConfig,
    pub b_to_a: LinkConfig,
    /// Seed of loss and jitter; the two directions derive their own.
    pub seed: u64,
    /// Turn off TSO/GSO/GRO on `a` and `b` (best effort; warns on failure).
    pub disable_offloads: bool,
    /// Run the direction threads as SCHED_FIFO at this priority (1-99);
    /// `None` keeps the default class. Best effort: warns if not allowed.
    pub realtime_priority: Option<i32>,
}

/// Default real-time priority of the wire threads: above ordinary threads,
/// below the kernel's own threaded IRQ handlers (50).
pub const DEFAULT_RT_PRIORITY: i32 = 20;

/// A running wire. Dropping it without [`Wire::stop`] stops the threads too.
pub struct Wire {
    epoch: Instant,
    stop: Arc<AtomicBool>,
    threads: Vec<(&'static str, JoinHandle<Result<DirectionReport, WireError>>)>,
}

struct DirSetup {
    name: &'static str,
    ingress: String,
    egress: String,
    netns: Option<String>,
    link: LinkConfig,
    seed: u64,
    realtime_priority: Option<i32>,
}

impl Wire {
    /// Opens the sockets of both directions and starts them. Returns once
    /// both are capturing, so no frame sent afterwards is missed; setup
    /// errors are returned here.
    pub fn start(cfg: WireConfig) -> Result<Wire, WireError> {
        // Preflight in the target namespace: both interfaces exist (a clear
        // error now), then offloads off if asked (best effort).
        let ifs = [cfg.a.clone(), cfg.b.clone()];
        let netns = cfg.netns.clone();
        let offloads = cfg.disable_offloads;
        std::thread::spawn(move || -> Result<(), WireError> {
            let setup = |error| WireError::Setup { dir: "wire", error };
            if let Some(ns) = &netns {
                sys::enter_netns(ns).map_err(setup)?;
            }
            for i in &ifs {
                sys::ifindex(i).map_err(setup)?;
            }
            if offloads {
                if let Err(e) = ifs.iter().try_for_each(|i| sys::disable_offloads(i)) {
                    warn!(error = %e, "could not turn off offloads; GRO aggregates would be paced as one frame");
                }
            }
            Ok(())
        })
        .join()
        .map_err(|_| WireError::Panicked("preflight"))??;
        let stop = Arc::new(AtomicBool::new(false));
        let mut sm = cfg.seed;
        let setups = [
            DirSetup {
                name: "a->b",
                ingress: cfg.a.clone(),
                egress: cfg.b.clone(),
                netns: cfg.netns.clone(),
                link: cfg.a_to_b,
                seed: super::rng::splitmix64(&mut sm),
                realtime_priority: cfg.realtime_priority,
            },
            DirSetup {
                name: "b->a",
                ingress: cfg.b,
                egress: cfg.a,
                netns: cfg.netns,
                link: cfg.b_to_a,
                seed: super::rng::splitmix64(&mut sm),
                realtime_priority: cfg.realtime_priority,
            },
        ];
        let mut threads = Vec::new();
        let mut gos = Vec::new();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), WireError>>();
        for setup in setups {
            let (go_tx, go_rx) = mpsc::channel::<Instant>();
            let ready = ready_tx.clone();
            let stop = stop.clone();
            let name = setup.name;
            let handle = std::thread::Builder::new()
                .name(format!("emu {name}"))
                .spawn(move || direction_thread(setup, ready, go_rx, stop))
                .map_err(|error| WireError::Setup { dir: name, error })?;
            threads.push((name, handle));
            gos.push(go_tx);
        }
        drop(ready_tx);
        for _ in 0..threads.len() {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
                Err(_) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(WireError::Vanished("wire"));
                }
            }
        }
        let epoch = Instant::now();
        for go in gos {
            // A thread that already ended reports why on join.
            let _ = go.send(epoch);
        }
        Ok(Wire {
            epoch,
            stop,
            threads,
        })
    }

    /// Time zero of outage schedules and traces.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Has a direction thread ended (only on error before stop)?
    pub fn is_finished(&self) -> bool {
        self.threads.iter().any(|(_, h)| h.is_finished())
    }

    /// Stops both directions and returns their reports.
    pub fn stop(mut self) -> Result<WireReport, WireError> {
        self.stop.store(true, Ordering::Relaxed);
        let mut reports = Vec::new();
        for (name, handle) in self.threads.drain(..) {
            reports.push(handle.join().map_err(|_| WireError::Panicked(name))??);
        }
        let mut it = reports.into_iter();
        Ok(WireReport {
            a_to_b: it.next().unwrap_or_default(),
            b_to_a: it.next().unwrap_or_default(),
        })
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Runs a wire until `stop` is set or `duration` passes; the blocking form
/// of [`Wire::start`] + [`Wire::stop`].
pub fn run(
    cfg: WireConfig,
    stop: &AtomicBool,
    duration: Option<Duration>,
) -> Result<WireReport, WireError> {
    let wire = Wire::start(cfg)?;
    let end = duration.map(|d| wire.epoch() + d);
    while !stop.load(Ordering::Relaxed) && !wire.is_finished() {
        if end.is_some_and(|e| Instant::now() >= e) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    wire.stop()
}

/// A frame held until its departure.
struct Held {
    departure: Instant,
    seq: u64,
    arrival: Instant,
    back_to_back: bool,
    buf: Vec<u8>,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.departure, self.seq) == (other.departure, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    /// Reversed: `BinaryHeap` is a max-heap and we want the earliest first;
    /// `seq` keeps equal departures in arrival order.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.departure, other.seq).cmp(&(self.departure, self.seq))
    }
}

/// Counters of one direction while it runs.
#[derive(Default)]
struct Counters {
    rx_frames: u64,
    rx_bytes: u64,
    tx_frames: u64,
    tx_bytes: u64,
    relayed: u64,
    gso: u64,
    gso_segments: u64,
    gso_whole: u64,
    drops: DropCounts,
    busy_frames: u64,
    busy_bytes: u64,
    busy_sched: Duration,
    busy_actual: Duration,
    delay_error_us: Welford,
    requested_delay_ms: Welford,
    read_latency_us: Welford,
    no_timestamp: u64,
    first_tx: Option<Instant>,
    last_tx: Option<Instant>,
    /// (scheduled, actual) departure of the last frame sent.
    prev_sent: Option<(Instant, Instant)>,
}

fn direction_thread(
    mut setup: DirSetup,
    ready: mpsc::Sender<Result<(), WireError>>,
    go: mpsc::Receiver<Instant>,
    stop: Arc<AtomicBool>,
) -> Result<DirectionReport, WireError> {
    let dir = setup.name;
    let opened = (|| -> std::io::Result<(Ingress, PacketSocket)> {
        if let Some(ns) = &setup.netns {
            sys::enter_netns(ns)?;
        }
        if let Err(e) = sys::set_timer_slack(Duration::from_micros(1)) {
            warn!(dir, error = %e, "cannot lower timer slack; sleeps will be coarser");
        }
        if let Some(prio) = setup.realtime_priority {
            if let Err(e) = sys::set_realtime(prio) {
                warn!(dir, priority = prio, error = %e, "cannot use SCHED_FIFO; timing will suffer on a busy machine");
            }
        }
        Ok((
            Ingress::open(dir, &setup.ingress)?,
            PacketSocket::open(&setup.egress, Role::Egress)?,
        ))
    })();
    let (mut rx, tx) = match opened {
        Ok(s) => s,
        Err(error) => {
            let _ = ready.send(Err(WireError::Setup { dir, error }));
            return Ok(DirectionReport::default());
        }
    };
    // The caller gets the setup error above; ignore a caller that gave up.
    let _ = ready.send(Ok(()));
    let Ok(epoch) = go.recv() else {
        return Ok(DirectionReport::default());
    };
    let link = std::mem::take(&mut setup.link);
    info!(
        dir,
        ingress = %setup.ingress,
        egress = %setup.egress,
        rate_bps = ?link.rate,
        delay = ?link.delay,
        jitter = ?link.jitter,
        per = link.loss.per,
        ge = ?link.loss.gilbert_elliott,
        queue = link.queue,
        relay = ?link.relay,
        outages = link.schedule.windows().len(),
        periodic = ?link.schedule.periodic(),
        trace_steps = link.trace.as_ref().map_or(0, |t| t.points().len()),
        "wire direction started"
    );
    let configured_rate = link.rate;
    let mut model = LinkModel::new(link, epoch, setup.seed);
    let mut c = Counters::default();
    let res = drive(dir, &mut rx, &tx, &mut model, &mut c, &stop);
    let end = Instant::now();
    let mut report = report(dir, &setup, configured_rate, &c, end - epoch);
    // Frames the kernel could not queue for us (ring or socket buffer full).
    report.kernel_drops = ring::take_stats(rx.sock().fd()).map_or(0, |(_, d)| u64::from(d));
    info!(
        dir,
        kernel_drops = report.kernel_drops,
        rx = report.rx_frames,
        tx = report.tx_frames,
        dropped = report.drops.total(),
        achieved_bps = ?report.rate.achieved_bps,
        delay_error_mean_us = report.delay_error_us.mean,
        "wire direction stopped"
    );
    res.map(|()| report)
}

fn drive(
    dir: &'static str,
    rx: &mut Ingress,
    tx: &PacketSocket,
    model: &mut LinkModel,
    c: &mut Counters,
    stop: &AtomicBool,
) -> Result<(), WireError> {
    let io = |error| WireError::Io { dir, error };
    let mut q = Queue {
        heap: BinaryHeap::new(),
        pool: Vec::new(),
        held_bytes: 0,
        seq: 0,
    };
    let mut intake = Intake {
        dir,
        seg_scratch: Vec::with_capacity(MAX_FRAME),
        last_arrival: model.epoch(),
    };
    let mut tx_scratch = SendBatch::default();
    let mut due: Vec<Held> = Vec::with_capacity(TX_BATCH);
    let mut link_up = model.is_up(model.epoch());
    let mut next_state_check = model.epoch();
    let mut send_errors_logged = 0u32;

    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut now = Instant::now();

        // Send everything that is due, up to TX_BATCH frames per call.
        loop {
            while due.len() < TX_BATCH && q.heap.peek().is_some_and(|h| h.departure <= now) {
                let Some(held) = q.heap.pop() else { break };
                due.push(held);
            }
            if due.is_empty() {
                break;
            }
            // One instant for the batch: every frame in it was due by then,
            // and the kernel takes them back to back.
            let actual = Instant::now();
            send(
                dir,
                tx,
                &mut tx_scratch,
                &due,
                actual,
                c,
                &mut send_errors_logged,
            );
            for held in due.drain(..) {
                q.recycle(held);
            }
            now = Instant::now();
        }

        if now >= next_state_check {
            let up = model.is_up(now);
            if up != link_up {
                info!(
                    dir,
                    at_s = (now - model.epoch()).as_secs_f64(),
                    "link {}",
                    if up { "up" } else { "down" }
                );
                link_up = up;
            }
            next_state_check = now + Duration::from_millis(1);
        }

        // Wait: coarse sleep if the next departure is far, spin if close.
        let next = q.heap.peek().map(|h| h.departure);
        let readable = match next {
            Some(dep) if dep <= now + SPIN_MARGIN => {
                std::hint::spin_loop();
                true // poll the socket without blocking while spinning
            }
            _ => {
                let timeout = next.map_or(MAX_IDLE, |d| (d - now - SPIN_MARGIN).min(MAX_IDLE));
                rx.sock().wait_readable(timeout).map_err(io)?
            }
        };
        if !readable {
            continue;
        }

        // Read one bounded batch, then look at departures again.
        match rx {
            Ingress::Batch { sock, batch } => {
                let n = sock.recv_batch(batch).map_err(io)?;
                for (i, got) in batch.received()[..n].iter().enumerate() {
                    if got.outgoing || got.len <= VNET_HDR_LEN {
                        continue;
                    }
                    if got.len > MAX_FRAME {
                        count_oversize(dir, c, got.len, "oversize frame dropped");
                        continue;
                    }
                    intake.take(model, &mut q, c, batch.frame(i), got.kernel_time);
                }
            }
            Ingress::Ring { sock, ring, whole } => {
                for _ in 0..RX_BATCH {
                    let Some(f) = ring.peek() else { break };
                    if f.outgoing {
                        // Not ours to forward; a copy (if any) is read and
                        // dropped below to keep the queue in ring order.
                    } else if f.len + VNET_HDR_LEN > MAX_FRAME {
                        // Larger than any GSO aggregate we expect (BIG
                        // TCP?): cannot be forwarded whole.
                        count_oversize(dir, c, f.len, "oversize frame dropped");
                    } else if f.truncated {
                        // Too large for a slot and no room for the whole
                        // copy in the socket's receive buffer.
                        count_oversize(dir, c, f.len, "large frame dropped: receive buffer full");
                    }
                    if f.copy {
                        match sock.recv(whole).map_err(io)? {
                            Some(got)
                                if !f.outgoing
                                    && got.len > VNET_HDR_LEN
                                    && got.len <= whole.len() =>
                            {
                                if got.len != f.len + VNET_HDR_LEN {
                                    debug!(
                                        dir,
                                        ring = f.len,
                                        queue = got.len,
                                        "copy length differs from its slot"
                                    );
                                }
                                intake.take(model, &mut q, c, &whole[..got.len], f.kernel_time);
                            }
                            // Outgoing, or oversize (counted above).
                            Some(_) => {}
                            None => count_oversize(dir, c, f.len, "large frame's copy missing"),
                        }
                    } else if !f.outgoing && !f.truncated && f.data.len() > VNET_HDR_LEN {
                        intake.take(model, &mut q, c, f.data, f.kernel_time);
                    }
                    ring.release();
                }
            }
        }
    }
}

/// Where a direction reads its frames: a receive ring (module `ring`), or
/// `recvmmsg` batches if the kernel will not set one up.
enum Ingress {
    Ring {
        sock: PacketSocket,
        ring: RxRing,
        /// A frame too large for a slot, read whole from the socket.
        whole: Vec<u8>,
    },
    Batch {
        sock: PacketSocket,
        batch: RecvBatch,
    },
}

impl Ingress {
    fn open(dir: &'static str, ifname: &str) -> std::io::Result<Ingress> {
        match ring::open_rx_ring(ifname, ring::RX_FRAMES) {
            Ok((sock, ring)) => {
                return Ok(Ingress::Ring {
                    sock,
                    ring,
                    whole: vec![0; MAX_FRAME],
                })
            }
            Err(e) => warn!(dir, error = %e, "no receive ring; reading with recvmmsg"),
        }
        Ok(Ingress::Batch {
            sock: PacketSocket::open(ifname, Role::Ingress)?,
            batch: RecvBatch::new(RX_BATCH, MAX_FRAME),
        })
    }

    fn sock(&self) -> &PacketSocket {
        match self {
            Ingress::Ring { sock, .. } | Ingress::Batch { sock, .. } => sock,
        }
    }
}

/// Hands `due` to the kernel in order with `sendmmsg`, accounting each
/// frame as sent at `actual` or dropped (`send_error`); never blocks.
///
/// `sendmmsg` rather than a TPACKET_V2 transmit ring: on a veth the kernel
/// copies every frame out of a transmit ring again (`skb_copy_ubufs`), so
/// the ring gains no throughput (measured:
/// docs/results/2026-11-26-link-emulator.md) and is not worth a second
/// socket for large frames and a ring that can stall.
fn send(
    dir: &'static str,
    tx: &PacketSocket,
    scratch: &mut SendBatch,
    due: &[Held],
    actual: Instant,
    c: &mut Counters,
    logged: &mut u32,
) {
    let mut i = 0;
    while i < due.len() {
        match tx.send_batch(&due[i..], scratch) {
            Ok(0) => {
                c.drops.send_error += 1;
                i += 1;
            }
            Ok(k) => {
                for held in &due[i..i + k] {
                    account_sent(c, held, actual);
                }
                i += k;
            }
            Err(e) => {
                c.drops.send_error += 1;
                log_send_error(dir, tx, &e, c, logged);
                i += 1;
            }
        }
    }
}

/// Rate-limited: the first few, then every 1000th.
fn log_send_error(
    dir: &'static str,
    sock: &PacketSocket,
    e: &std::io::Error,
    c: &Counters,
    logged: &mut u32,
) {
    if *logged < 5 || *logged % 1000 == 0 {
        warn!(dir, egress = sock.ifname(), error = %e, dropped = c.drops.send_error, "send failed");
    }
    *logged += 1;
}

/// One bad frame never stops the wire: counted, the first few logged.
fn count_oversize(dir: &'static str, c: &mut Counters, len: usize, what: &'static str) {
    c.drops.oversize += 1;
    if c.drops.oversize <= 5 {
        warn!(dir, len, "{what}");
    }
}

/// Turns received frames into admitted packets: arrival time, counters,
/// segmentation of GSO aggregates.
struct Intake {
    dir: &'static str,
    seg_scratch: Vec<u8>,
    last_arrival: Instant,
}

impl Intake {
    /// Takes one frame (vnet header + Ethernet frame, whole) received at
    /// `kernel_time`.
    fn take(
        &mut self,
        model: &mut LinkModel,
        q: &mut Queue,
        c: &mut Counters,
        frame: &[u8],
        kernel_time: Option<SystemTime>,
    ) {
        let dir = self.dir;
        let (arrival, age) = arrival_time(kernel_time);
        match age {
            Some(age) => c.read_latency_us.push(age.as_secs_f64() * 1e6),
            None => c.no_timestamp += 1,
        }
        let arrival = arrival.max(self.last_arrival);
        self.last_arrival = arrival;
        c.rx_frames += 1;
        c.rx_bytes += (frame.len() - VNET_HDR_LEN) as u64;
        if !gso::is_gso(frame) {
            q.admit(dir, model, c, arrival, frame);
            return;
        }
        c.gso += 1;
        match gso::segment(frame, &mut self.seg_scratch, |seg| {
            q.admit(dir, model, c, arrival, seg)
        }) {
            Ok(n) => c.gso_segments += n as u64,
            Err(why) => {
                c.gso_whole += 1;
                if c.gso_whole <= 5 {
                    warn!(
                        dir,
                        len = frame.len(),
                        ?why,
                        "GSO aggregate not cut; paced as one frame"
                    );
                }
                q.admit(dir, model, c, arrival, frame);
            }
        }
    }
}

/// Frames held until their departure, and the buffers they came in.
struct Queue {
    heap: BinaryHeap<Held>,
    pool: Vec<Vec<u8>>,
    held_bytes: usize,
    seq: u64,
}

impl Queue {
    /// Asks the model about one frame (vnet header + Ethernet frame) and
    /// holds it if it is to be forwarded.
    fn admit(
        &mut self,
        dir: &'static str,
        model: &mut LinkModel,
        c: &mut Counters,
        arrival: Instant,
        frame: &[u8],
    ) {
        let frame_len = frame.len() - VNET_HDR_LEN;
        match model.handle_packet(arrival, frame_len) {
            Verdict::Drop(reason) => {
                trace!(dir, len = frame_len, ?reason, "drop");
                count_drop(&mut c.drops, reason);
            }
            Verdict::Forward(s) => {
                if self.held_bytes + frame.len() > MAX_HELD_BYTES {
                    c.drops.overflow += 1;
                    return;
                }
                if s.relayed {
                    c.relayed += 1;
                }
                let mut buf = self.pool.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(frame);
                self.held_bytes += buf.len();
                trace!(
                    dir,
                    len = frame_len,
                    hold_us = (s.departure - arrival).as_micros() as u64,
                    "forward"
                );
                self.heap.push(Held {
                    departure: s.departure,
                    seq: self.seq,
                    arrival,
                    back_to_back: s.back_to_back,
                    buf,
                });
                self.seq += 1;
            }
        }
    }

    /// Takes a sent (or dropped) frame's buffer back for reuse.
    fn recycle(&mut self, held: Held) {
        self.held_bytes -= held.buf.len();
        if self.pool.len() < POOL_LIMIT {
            self.pool.push(held.buf);
        }
    }
}

/// Converts the kernel's CLOCK_REALTIME receive stamp to an `Instant`;
/// also returns how long the frame waited to be read, if known.
fn arrival_time(kernel: Option<SystemTime>) -> (Instant, Option<Duration>) {
    let now = Instant::now();
    let age = kernel.and_then(|k| SystemTime::now().duration_since(k).ok());
    match age {
        Some(age) if age < MAX_TIMESTAMP_AGE => (now.checked_sub(age).unwrap_or(now), Some(age)),
        _ => (now, None),
    }
}

fn count_drop(d: &mut DropCounts, reason: DropReason) {
    match reason {
        DropReason::Queue => d.queue += 1,
        DropReason::Loss => d.loss += 1,
        DropReason::Outage => d.outage += 1,
        DropReason::RelayFull => d.relay_full += 1,
    }
}

fn account_sent(c: &mut Counters, held: &Held, actual: Instant) {
    let frame = (held.buf.len() - VNET_HDR_LEN) as u64;
    c.tx_frames += 1;
    c.tx_bytes += frame;
    c.first_tx.get_or_insert(actual);
    c.last_tx = Some(actual);
    c.delay_error_us
        .push((actual - held.departure).as_secs_f64() * 1e6);
    c.requested_delay_ms
        .push((held.departure - held.arrival).as_secs_f64() * 1e3);
    if let (true, Some((prev_sched, prev_actual))) = (held.back_to_back, c.prev_sent) {
        if held.departure >= prev_sched && actual >= prev_actual {
            c.busy_frames += 1;
            c.busy_bytes += frame;
            c.busy_sched += held.departure - prev_sched;
            c.busy_actual += actual - prev_actual;
        }
    }
    c.prev_sent = Some((held.departure, actual));
}

fn report(
    dir: &'static str,
    setup: &DirSetup,
    configured: Option<u64>,
    c: &Counters,
    duration: Duration,
) -> DirectionReport {
    let bits = c.busy_bytes as f64 * 8.0;
    let rate_of = |d: Duration| (c.busy_frames > 0 && !d.is_zero()).then(|| bits / d.as_secs_f64());
    let requested = rate_of(c.busy_sched);
    let achieved = rate_of(c.busy_actual);
    let active = match (c.first_tx, c.last_tx) {
        (Some(f), Some(l)) if l > f => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    debug!(dir, busy_frames = c.busy_frames, "report");
    DirectionReport {
        direction: dir.to_string(),
        ingress: setup.ingress.clone(),
        egress: setup.egress.clone(),
        rx_frames: c.rx_frames,
        rx_bytes: c.rx_bytes,
        tx_frames: c.tx_frames,
        tx_bytes: c.tx_bytes,
        relayed_frames: c.relayed,
        gso_frames: c.gso,
        gso_segments: c.gso_segments,
        gso_whole: c.gso_whole,
        drops: c.drops,
        rate: RateReport {
            configured_bps: configured,
            busy_frames: c.busy_frames,
            busy_bytes: c.busy_bytes,
            requested_bps: requested,
            achieved_bps: achieved,
            error_pct: requested.zip(achieved).map(|(r, a)| (a / r - 1.0) * 100.0),
        },
        requested_delay_ms: c.requested_delay_ms.summary(),
        delay_error_us: c.delay_error_us.summary(),
        read_latency_us: c.read_latency_us.summary(),
        rx_without_timestamp: c.no_timestamp,
        // Read from the socket when the direction stops.
        kernel_drops: 0,
        mean_throughput_bps: if active > 0.0 {
            c.tx_bytes as f64 * 8.0 / active
        } else {
            0.0
        },
        duration_s: duration.as_secs_f64(),
    }
}
