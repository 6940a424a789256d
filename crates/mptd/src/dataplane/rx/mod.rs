//! The receive side of the data plane: receive on a path → open → check →
//! holes → deliver to tun.
//!
//! The stages, each in its own file, called in this order by the driver
//! (`driver.rs`) for every batch:
//!
//! * open (`open.rs`): sealed datagrams are opened in place by the crypto
//!   stage (`crate::dataplane::crypto_pool`), in parallel for large
//!   batches; each key set's replay window is checked and updated in
//!   batch order;
//! * check (`check.rs`): each datagram gets a verdict that carries its
//!   parsed header: data to deliver, a message for the control loop, a
//!   sequence number to mark done, or a drop with its reason
//!   (`refusal.rs`), counted once by the driver;
//! * holes (`holes.rs`): the path's loss detector sees every sequence
//!   number; holes become repair requests, sent after the batch;
//! * deliver (`deliver.rs`): delay line (`crate::dataplane::equalize`) →
//!   resequencer → staging → tun write (`sink.rs`).
//!
//! After the batch, what it brought is published on its path (`summary.rs`)
//! and its control messages are queued for the control loop (`outbox.rs`).
//!
//! One receive worker per connection ([`RxWorker`]), reading all of the
//! connection's path sockets in turn (a poll over them when all are
//! empty). One worker per connection, not per path: a connection's data
//! must leave in sequence order, and two workers sharing one resequencer
//! starved each other on a 2-core machine (gaps timed out while the other
//! worker waited for the lock). Connections scale across cores, and so
//! does one connection's opening, through the crypto stage. Client
//! connections on a shared port are served by [`SharedRxWorker`]s instead
//! (a fixed pool; see `crate::plane::shared_port` for why): they sort each
//! batch by connection and path and handle each group as a connection's
//! own worker would, with the connection's receive state
//! ([`ConnRxState`]) taken from the connection. Their Noise initiations
//! arrive on a socket of their own, read by the [`LaneReader`]
//! (`lane.rs`), and pass the mac1 gate there.
//!
//! A batch is one `recvmmsg` on one socket. Each datagram is checked
//! (header, connection, inner IP packet) without copying; probes and
//! replies (a few per second) go to the control loop through a bounded
//! queue; everything else that fails is dropped and counted by reason.
//! Without a key, only datagrams from the path's configured remote address
//! and port are looked at, control messages are refused and no address is
//! ever learnt; data whose inner source address the peer is not routed for
//! is refused either way. Then, under the connection's resequencer lock
//! (once per batch), data is put back in connection-sequence order and
//! staged; the tun writes coalesce a flow's TCP segments into few
//! super-packets (`crate::io::tun_write`). Nothing received from the
//! network can make this loop panic or allocate.

mod batch;
mod check;
mod deliver;
mod driver;
mod holes;
mod lane;
mod open;
mod outbox;
mod refusal;
mod shared;
mod sink;
mod state;
mod summary;

#[cfg(test)]
mod tests;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tun_rs::SyncDevice;

use crate::dataplane::crypto_pool::CryptoPool;
use crate::io::udp::{RecvMeta, RECV_TIMEOUT};
use crate::plane::{ConnShared, ControlSender, PathShared, PathTable};

use crate::dataplane::rx::batch::{buffers, Batch, RECV_MESSAGES};
use crate::dataplane::rx::driver::{Rx, WorkerStages};
use crate::dataplane::rx::sink::Staging;
use crate::dataplane::rx::state::ConnStages;

pub use lane::{InitiationGate, LaneReader};
pub use shared::SharedRxWorker;
pub use sink::PacketSink;
pub use state::ConnRxState;

/// Everything a receive worker needs.
pub struct RxWorker {
    /// The connection.
    pub conn: Arc<ConnShared>,
    /// Tun queue to write to.
    pub tun: Arc<SyncDevice>,
    /// Queue to the control loop.
    pub control: ControlSender,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// The crypto stage, shared with every other worker.
    pub crypto_pool: Arc<CryptoPool>,
}

impl RxWorker {
    /// Runs until shutdown.
    pub fn run(self) {
        let conn = &*self.conn;
        let rx = Rx {
            conn,
            tun: &*self.tun,
            control: &self.control,
            shared: false,
        };
        let mut bufs = buffers();
        let mut meta = [RecvMeta::default(); RECV_MESSAGES];
        let mut w = WorkerStages::new(&*self.tun, self.crypto_pool.submitter());
        let mut st = ConnRxState::new(conn);
        let mut start = 0usize;
        while !self.shutdown.load(Relaxed) {
            st.refresh(conn);
            let ConnRxState {
                stages,
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
                w.opener.refresh(conn);
                let batch = Batch {
                    pi: path.id,
                    path: Some(path),
                    bufs: &mut bufs[..n],
                    meta: &meta[..n],
                };
                rx.handle_batch(batch, &mut w, stages);
                stages.holes.send(conn, table);
            }
            start = start.wrapping_add(1);
            // One tun write per round over all paths: the larger the run of
            // in-order segments, the more the tun writer can coalesce.
            w.staging.flush(rx.tun, &conn.drops.tun_write);
            if !busy {
                idle(&rx, paths, &mut w.staging, stages, table);
            }
        }
    }
}

/// No datagram queued: do what is due (see [`Rx::timeouts`]), then sleep
/// until data arrives, the next deadline, or it is time to check
/// shutdown.
fn idle(
    rx: &Rx<'_, SyncDevice>,
    paths: &[Arc<PathShared>],
    staging: &mut Staging,
    stages: &mut ConnStages,
    table: &PathTable,
) {
    let conn = rx.conn;
    let next = rx.timeouts(stages, table, staging, Instant::now());
    staging.flush(rx.tun, &conn.drops.tun_write);
    let wait = match next {
        Some(t) => t
            .saturating_duration_since(Instant::now())
            .min(RECV_TIMEOUT),
        None => RECV_TIMEOUT,
    };
    if wait.is_zero() {
        return;
    }
    if let Err(e) = crate::io::udp::wait_any_readable(
        paths.iter().map(|p| &p.socket),
        conn.rx_wake.as_ref(),
        wait,
    ) {
        tracing::debug!(conn = %conn.name, error = %e, "poll failed");
        std::thread::sleep(Duration::from_millis(10));
    }
}
