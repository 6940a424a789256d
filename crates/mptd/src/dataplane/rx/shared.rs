//! The receive workers of the shared ports (see
//! `crate::plane::shared_port`): a fixed pool, each reading its own
//! SO_REUSEPORT socket of each shared port and family, serving every
//! client connection whose datagrams reach it.
//!
//! A batch is sorted by (connection, path, arrival) and each group goes
//! through the stages as a connection's own worker's batch would, with the
//! connection's receive state ([`ConnRxState`]) taken from the connection
//! under its lock. Noise initiations name no connection yet: the kernel
//! steers them to the port's lane (`lane.rs`); any that reach a worker
//! all the same pass the same mac1 gate here and go to the control loop.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::wire::{Header, MsgType};
use tun_rs::SyncDevice;

use crate::dataplane::crypto_pool::CryptoPool;
use crate::dataplane::rx::batch::{buffers, Batch, RECV_MESSAGES};
use crate::dataplane::rx::driver::{Rx, WorkerStages};
use crate::dataplane::rx::lane::InitiationGate;
use crate::dataplane::rx::sink::Staging;
use crate::dataplane::rx::state::ConnRxState;
use crate::io::udp::{PathSocket, RecvMeta, RECV_TIMEOUT};
use crate::plane::shared_port::{SessionMap, SharedStats};
use crate::plane::{ConnShared, ControlSender};
use crate::sync::lock_unpoisoned;

/// A receive worker of the shared ports.
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
    pub control: ControlSender,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// The crypto stage, shared with every other worker.
    pub crypto_pool: Arc<CryptoPool>,
    /// Checks and queues the initiations that reach this worker (only
    /// when the port has no lane: see `crate::io::lane`).
    pub gate: InitiationGate,
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

/// What a shared worker keeps from batch to batch.
struct SharedStages {
    stages: WorkerStages,
    sorter: Sorter,
    /// Connections with a gap or a delayed datagram pending: their
    /// timeouts are this worker's to run (bounded by the connections
    /// with data in flight, not by the clients).
    timers: Vec<Arc<ConnShared>>,
}

impl SharedRxWorker {
    /// Runs until shutdown.
    pub fn run(self) {
        let mut bufs = buffers();
        let mut meta = [RecvMeta::default(); RECV_MESSAGES];
        let mut s = SharedStages {
            stages: WorkerStages::new(&*self.tun, self.crypto_pool.submitter()),
            sorter: Sorter {
                order: Vec::with_capacity(RECV_MESSAGES),
                conns: Vec::with_capacity(RECV_MESSAGES),
                bufs: (0..RECV_MESSAGES).map(|_| Vec::new()).collect(),
                meta: [RecvMeta::default(); RECV_MESSAGES],
            },
            timers: Vec::with_capacity(64),
        };
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
                    &mut s,
                );
            }
            start = start.wrapping_add(1);
            let next = self.run_timers(&mut s.timers, &mut s.stages.staging);
            s.stages.staging.flush(&*self.tun, &self.stats.tun_write);
            if !busy {
                let wait = next.map_or(RECV_TIMEOUT, |t| {
                    t.saturating_duration_since(Instant::now())
                        .clamp(Duration::from_micros(100), RECV_TIMEOUT)
                });
                if let Err(e) = crate::io::udp::wait_any_readable(self.sockets.iter(), None, wait) {
                    tracing::debug!(error = %e, "poll failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }

    /// One `recvmmsg` of a shared socket: initiations to the control loop
    /// (after their mac1), the rest sorted by (connection, path, arrival)
    /// and handled group by group.
    fn batch(&self, port: u16, bufs: &mut [Vec<u8>], meta: &[RecvMeta], s: &mut SharedStages) {
        let sorter = &mut s.sorter;
        self.sort(port, bufs, meta, sorter);
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
                let group = Batch {
                    pi: usize::from(path_id),
                    path: None,
                    bufs: &mut sorter.bufs[a..b],
                    meta: &sorter.meta[a..b],
                };
                self.group(conn, group, &mut s.stages, &mut s.timers);
            }
            a = b;
        }
        for (k, &(_, _, i)) in sorter.order.iter().enumerate() {
            std::mem::swap(&mut bufs[i], &mut sorter.bufs[k]);
        }
    }

    /// Finds each message's connection and path (refusing what has none,
    /// and taking initiations out), and sorts the rest by (connection,
    /// path, arrival) in `sorter.order`.
    fn sort(&self, port: u16, bufs: &[Vec<u8>], meta: &[RecvMeta], sorter: &mut Sorter) {
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
                        self.gate.admit(dgram, m.from, m.to, port, now);
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
    }

    /// One connection's datagrams of one path (`group.path` is not used:
    /// the path is looked up here), under its receive state's lock (and, inside, its
    /// resequencer's): as a connection's own worker handles a batch.
    fn group(
        &self,
        conn: &Arc<ConnShared>,
        group: Batch<'_>,
        w: &mut WorkerStages,
        timers: &mut Vec<Arc<ConnShared>>,
    ) {
        let pi = group.pi;
        if pi >= mpt_proto::sched::MAX_PATHS || conn.removed.load(Relaxed) {
            let n: usize = group
                .bufs
                .iter()
                .zip(group.meta)
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
            tun: &*self.tun,
            control: &self.control,
            shared: true,
        };
        let mut guard = lock_unpoisoned(&conn.rx_state);
        let st = ConnRxState::in_slot(&mut guard, conn);
        st.refresh(conn);
        st.swap_keys(&mut w.opener);
        w.opener.refresh(conn);
        let ConnRxState { stages, table, .. } = st;
        let batch = Batch {
            pi,
            path: table.get(pi).filter(|p| !p.is_removed()).map(|p| &**p),
            bufs: &mut *group.bufs,
            meta: group.meta,
        };
        rx.handle_batch(batch, w, stages);
        stages.holes.send(conn, table);
        let pending = stages.delay.next_release().is_some()
            || conn.reseq_deadline_ns.load(Relaxed) != 0
            || stages.holes.due().is_some();
        st.swap_keys(&mut w.opener);
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
            let mut guard = lock_unpoisoned(&conn.rx_state);
            let Some(st) = guard.as_mut().and_then(|b| b.downcast_mut::<ConnRxState>()) else {
                return false;
            };
            let rx = Rx {
                conn,
                tun: &*self.tun,
                control: &self.control,
                shared: true,
            };
            match rx.timeouts(&mut st.stages, &st.table, staging, now) {
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
