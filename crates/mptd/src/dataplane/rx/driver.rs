//! The receive path's driver: one batch of one connection's datagrams of
//! one path through the stages, in order.
//!
//! 1. [`Plan`]: what the batch reads once (the clock, what the control
//!    loop published about the connection and the path);
//! 2. open: the crypto stage opens the sealed datagrams in place
//!    (`open.rs`);
//! 3. under the connection's resequencer lock (once per batch), datagram
//!    by datagram in arrival order: check (`check.rs`, a [`Verdict`]),
//!    holes (`holes.rs`, the path's loss detector), deliver (`deliver.rs`:
//!    delay line, resequencer, staging);
//! 4. still under the lock: what is due in the delay line, hole decisions,
//!    gaps that timed out;
//! 5. after it: what the batch tells its path and the control loop.
//!
//! The staged packets are written to tun by the worker (once per round
//! over all paths: the larger the run of in-order segments, the more the
//! tun writer can coalesce).

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::reorder::Resequencer;
use mpt_proto::wire::{Flags, Header};

use crate::dataplane::crypto_pool::Submitter;
use crate::dataplane::equalize::{Kind, Meta, MAX_HOLD};
use crate::dataplane::rx::batch::Batch;
use crate::dataplane::rx::check::{Check, Verdict};
use crate::dataplane::rx::deliver::{hold, Deliver, EqualizeTargets};
use crate::dataplane::rx::holes::{min_instant, HoleWait, Holes, Sighting};
use crate::dataplane::rx::open::Opener;
use crate::dataplane::rx::outbox::Outbox;
use crate::dataplane::rx::refusal::Refusal;
use crate::dataplane::rx::sink::{PacketSink, Staging};
use crate::dataplane::rx::state::ConnStages;
use crate::dataplane::rx::summary::Tally;
use crate::io::source::Source;
use crate::io::udp::RecvMeta;
use crate::plane::{ConnShared, ControlSender, PathShared, PathTable, PlanSnapshot};

/// What the stages of one connection's receive path need: the connection,
/// where its data goes, where its control messages go.
pub struct Rx<'a, S: PacketSink> {
    /// The connection.
    pub conn: &'a ConnShared,
    /// Where its packets are written (a tun queue).
    pub tun: &'a S,
    /// Queue to the control loop.
    pub control: &'a ControlSender,
    /// Read from a shared port: the path is the header's path id (checked
    /// after authentication), not the socket's.
    pub shared: bool,
}

/// The state of a worker's stages that is not a connection's: kept from
/// batch to batch (and, in a shared worker, from connection to
/// connection). Allocated once.
pub struct WorkerStages {
    /// Open: key slots in use and the crypto stage.
    pub opener: Opener,
    /// Packets released in order, waiting for the tun write.
    pub staging: Staging,
    /// Messages for the control loop.
    pub outbox: Outbox,
}

impl WorkerStages {
    /// A worker's stages writing to `sink`, opening through `submitter`.
    pub fn new(sink: &impl PacketSink, submitter: Submitter) -> WorkerStages {
        WorkerStages {
            opener: Opener::new(submitter),
            staging: Staging::new(sink),
            outbox: Outbox::new(),
        }
    }
}

/// What a batch reads once, before its first datagram: the clock, and
/// what the control loop published about the connection and the path.
#[derive(Debug, Clone)]
pub struct Plan {
    /// When the batch is handled.
    pub now: Instant,
    /// The same on the connection's wire clock (µs).
    pub now_us: u32,
    /// The same on the wall clock (ns since 1970): arrival stamps are.
    pub wall_now: u64,
    /// Loss repair watches the path's holes; a hole asked for may wait so
    /// long for its copy.
    pub repair_wait: Option<Duration>,
    /// Without a key (`Some`), nothing authenticates a datagram but where
    /// it comes from: only the path's configured remote address and port
    /// count (none: nothing does), and nothing is ever learnt.
    pub cleartext_peer: Option<Option<SocketAddr>>,
    /// The timing the control loop published last (gap timeout, path
    /// waits, equalisation targets).
    pub timing: Arc<PlanSnapshot>,
    /// The delays data is held to.
    pub targets: EqualizeTargets,
}

impl Plan {
    /// The plan of a batch of path `pi` (`path`, if the connection has it).
    pub fn read(
        conn: &ConnShared,
        pi: usize,
        path: Option<&PathShared>,
        holes: &mut Holes,
    ) -> Plan {
        let repair_wait = holes.prepare(conn, pi, path);
        let now = Instant::now();
        let now_us = mpt_proto::timestamp_us(conn.epoch, now);
        let cleartext_peer = match &conn.crypto {
            None => Some(path.and_then(|p| p.remote()).map(|(a, _)| a)),
            Some(_) => None,
        };
        let timing = conn.timing.load_full();
        Plan {
            now,
            now_us,
            wall_now: crate::io::udp::wall_clock_ns(),
            repair_wait,
            cleartext_peer,
            targets: EqualizeTargets::of(&timing),
            timing,
        }
    }
}

impl<S: PacketSink> Rx<'_, S> {
    /// Checks, counts and resequences one batch.
    pub fn handle_batch(&self, batch: Batch<'_>, w: &mut WorkerStages, c: &mut ConnStages) {
        let plan = Plan::read(self.conn, batch.pi, batch.path, &mut c.holes);
        self.run(batch, &plan, w, c);
    }

    /// The stages over one batch, its [`Plan`] read.
    pub fn run(&self, batch: Batch<'_>, plan: &Plan, w: &mut WorkerStages, c: &mut ConnStages) {
        let conn = self.conn;
        let Batch {
            pi,
            path,
            bufs,
            meta,
        } = batch;
        let WorkerStages {
            opener,
            staging,
            outbox,
        } = w;
        opener.open_batch(conn, bufs, meta);
        let mut reseq = conn.lock_reseq();
        self.apply_timeout(&plan.timing, &mut reseq);
        let mut pass = Pass {
            conn,
            check: Check {
                conn,
                shared: self.shared,
                pi,
                now: plan.now,
            },
            plan,
            opener,
            outbox: &mut *outbox,
            holes: &mut c.holes,
            out: Deliver::new(
                &mut c.delay,
                &mut reseq,
                staging,
                self.tun,
                &conn.drops.tun_write,
                plan.now,
            ),
            tally: Tally::default(),
            next: 0,
        };
        for (buf, m) in bufs.iter_mut().zip(meta) {
            pass.message(buf, m);
        }
        pass.finish();
        let (tally, (held, held_us)) = (pass.tally, pass.out.held());
        self.publish_deadline(&reseq);
        drop(reseq);
        self.learn(pi, path, plan, tally.heard_from(), outbox);
        conn.equalized.held.add(held);
        conn.equalized.held_us.add(held_us);
        tally.publish(conn, path, plan.now);
        outbox.send(conn, self.control);
    }

    /// What the batch's authentic datagrams tell of where path `pi` is:
    /// a remote address to learn, or (shared ports) a path for the
    /// control loop to add or move. Never without a key.
    fn learn(
        &self,
        pi: usize,
        path: Option<&PathShared>,
        plan: &Plan,
        heard_from: Option<(SocketAddr, Option<Source>)>,
        outbox: &mut Outbox,
    ) {
        let conn = self.conn;
        match (heard_from, plan.cleartext_peer, path) {
            (Some((from, to)), None, Some(path))
                if self.shared && !same_family(from, path.local) =>
            {
                // A client path moved to the other address family: the
                // control loop moves it to that family's shared socket.
                outbox.path_heard(conn, pi, from, to, plan.now);
            }
            (Some((from, to)), None, Some(path)) if path.learn_remote(from, to) => {
                tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address");
            }
            (Some((from, to)), None, None) if self.shared => {
                // Authenticated datagrams of a path the client has not
                // used before (or that died): the control loop adds it.
                outbox.path_heard(conn, pi, from, to, plan.now);
            }
            _ => {}
        }
    }

    /// Gives the resequencer the gap timeout and path waits the control
    /// loop last published.
    fn apply_timeout(&self, timing: &PlanSnapshot, reseq: &mut Resequencer) {
        let t = timing.plan.reorder_timeout;
        if reseq.timeout() != t {
            reseq.set_timeout(t);
        }
        self.conn.timing.apply_path_waits(timing, reseq);
    }

    /// Publishes when the resequencer's oldest gap times out.
    fn publish_deadline(&self, reseq: &Resequencer) {
        let ns = reseq.poll_timeout().map_or(0, |t| {
            (t.saturating_duration_since(self.conn.epoch).as_nanos() as u64).max(1)
        });
        self.conn.reseq_deadline_ns.store(ns, Relaxed);
    }

    /// Releases what is due in the delay line and the resequencer's timed
    /// out gaps, and decides the holes whose reorder window ended (sending
    /// the requests); returns the next deadline of any of them.
    pub fn timeouts(
        &self,
        c: &mut ConnStages,
        table: &PathTable,
        staging: &mut Staging,
        now: Instant,
    ) -> Option<Instant> {
        let conn = self.conn;
        let deadline = |ns: u64| (ns != 0).then(|| conn.epoch + Duration::from_nanos(ns));
        let release = c.delay.next_release();
        let gap = deadline(conn.reseq_deadline_ns.load(Relaxed));
        let holes = c.holes.due();
        if [release, gap, holes].iter().flatten().any(|&t| t <= now) {
            let mut reseq = conn.lock_reseq();
            let mut out = Deliver::new(
                &mut c.delay,
                &mut reseq,
                staging,
                self.tun,
                &conn.drops.tun_write,
                now,
            );
            out.release_due();
            if conn.repair.load(Relaxed) {
                c.holes.decide(conn, out.resequencer(), now);
            } else {
                c.holes.clear_due();
            }
            out.give_up_gaps();
            self.publish_deadline(&reseq);
            drop(reseq);
            c.holes.send(conn, table);
        }
        let release = c.delay.next_release();
        let gap = deadline(conn.reseq_deadline_ns.load(Relaxed));
        min_instant(min_instant(release, gap), c.holes.due())
    }
}

/// One batch on its way through check, holes and deliver, under the
/// resequencer lock.
struct Pass<'p, S: PacketSink> {
    conn: &'p ConnShared,
    check: Check<'p>,
    plan: &'p Plan,
    opener: &'p mut Opener,
    outbox: &'p mut Outbox,
    holes: &'p mut Holes,
    out: Deliver<'p, S>,
    tally: Tally,
    /// Index of the next datagram in the batch (as `open_batch` counted).
    next: usize,
}

impl<S: PacketSink> Pass<'_, S> {
    /// The datagrams of one received message.
    fn message(&mut self, buf: &mut [u8], m: &RecvMeta) {
        if let Err((refused, n)) = self.check.message(m, buf, self.plan.cleartext_peer) {
            refused.count(self.conn, n);
            return;
        }
        // The path's delay samples count from when the kernel took the
        // message in, not from when this worker read it.
        let lag = crate::io::udp::arrival_lag(m.arrived_ns, self.plan.wall_now);
        let arrived_us = self.plan.now_us.wrapping_sub(lag.as_micros() as u32);
        for dgram in m.datagrams_mut(buf) {
            let wire_len = dgram.len();
            let pre = self.opener.pre_opened(self.next);
            self.next += 1;
            let verdict = self.check.datagram(dgram, pre, self.opener);
            self.take(verdict, wire_len, m, arrived_us);
        }
    }

    /// Acts on one datagram's verdict: hands it on, notes its sequence
    /// number in the loss detector, delivers it.
    fn take(&mut self, verdict: Verdict<'_>, wire_len: usize, m: &RecvMeta, arrived_us: u32) {
        let (conn, pi, now) = (self.conn, self.check.pi, self.plan.now);
        match verdict {
            Verdict::Data {
                header,
                flow,
                plain,
                packet,
            } => {
                // A pinned acceleration leg keeps its own path's delay.
                let target = match conn.leg_pin.path(packet) {
                    Some(_) => None,
                    None => self.plan.targets.for_data(plain.len(), packet),
                };
                let owd = self.plan.now_us.wrapping_sub(header.timestamp_us);
                let hold = hold(target, owd, header.flags.contains(Flags::COPY));
                // The hole shows at the resequencer only once this
                // datagram leaves the delay line: wait from there.
                self.watch(&header, hold.min(MAX_HOLD));
                self.tally.data(wire_len, &header, m, arrived_us);
                let meta = Meta {
                    seq: header.seq,
                    flow,
                    path: pi,
                    kind: Kind::Data,
                };
                self.out.data(meta, packet, hold);
            }
            Verdict::Repair {
                header,
                original,
                flow,
                packet,
            } => {
                if header.flags.contains(Flags::COPY) {
                    conn.copies.first.add(1);
                } else {
                    conn.repairs.received.add(1);
                }
                self.watch(&header, Duration::ZERO);
                self.tally.repair(wire_len, &header, m);
                let meta = Meta {
                    seq: original,
                    flow,
                    path: pi,
                    kind: Kind::Repair,
                };
                self.out.repair(header.seq, meta, packet);
            }
            Verdict::Control { header, plain } => {
                self.outbox.datagram(conn, pi, plain, m, now);
                self.done(&header, m);
            }
            Verdict::Nack { header, nack } => {
                if !self.holes.answer_later(pi, nack) {
                    Refusal::QueueFull.count(conn, 1);
                }
                self.done(&header, m);
            }
            Verdict::Skip { header, refused } => {
                refused.count(conn, 1);
                self.done(&header, m);
            }
            Verdict::Handshake { dgram } => self.outbox.datagram(conn, pi, dgram, m, now),
            Verdict::Drop(refused) => refused.count(conn, 1),
        }
    }

    /// A sequence number without data for tun: done.
    fn done(&mut self, header: &Header, m: &RecvMeta) {
        self.watch(header, Duration::ZERO);
        self.tally.heard(m);
        self.out.skip(header.seq, self.check.pi);
    }

    /// Every datagram with a sequence number moves its path's sequence
    /// on: a hole in it is a loss (when loss repair is on). `equalized`:
    /// how long the delay line holds it.
    fn watch(&mut self, header: &Header, equalized: Duration) {
        let Some(repair) = self.plan.repair_wait else {
            return;
        };
        let wait = HoleWait { equalized, repair };
        let sighting = Sighting::of(header, self.check.pi, self.plan.now_us, wait);
        self.holes
            .watch(self.conn, self.out.resequencer(), sighting, self.plan.now);
    }

    /// After the batch's datagrams: releases what is due in the delay
    /// line, decides the holes due, gives up the gaps that timed out.
    fn finish(&mut self) {
        self.out.release_due();
        self.out.release_idle();
        if self.plan.repair_wait.is_some() {
            self.holes
                .decide(self.conn, self.out.resequencer(), self.plan.now);
        }
        self.out.give_up_gaps();
    }
}

/// Whether two addresses are of the same family.
fn same_family(a: SocketAddr, b: SocketAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}
