//! Stage 1 of the data plane: read tun → plan (route, pick, number) →
//! head → seal → send.
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

//!
//! The stages, each in its file: [`plan`] (route, pick, copy, number),
//! [`head`], [`seal`] and [`send`], methods of [`TxStages`] (what they
//! read, apart from the tun queue, so that tests drive them without one);
//! what the worker keeps per connection is one [`conn::TxConn`], and the
//! batch's buffers one [`batch::TxBatch`].

mod batch;
mod conn;
mod head;
mod plan;
mod seal;
mod send;
mod stages;
#[cfg(test)]
mod tests;

pub use stages::TxStages;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use tun_rs::{InterruptEvent, SyncDevice, IDEAL_BATCH_SIZE};

use crate::dataplane::crypto_pool::CryptoPool;
use batch::{TxBatch, MAX_READ_ERRORS, PACKET_OFFSET};
use conn::TxConn;

/// Everything a transmit worker needs.
pub struct TxWorker {
    /// The tun queue this worker reads.
    pub tun: Arc<SyncDevice>,
    /// The connections, router, counters and MTU the stages read.
    pub stages: TxStages,
    /// Where the stages' `conns` and `router` come from: replaced when a
    /// reload adds or removes a client connection (checked once per batch).
    pub set: Arc<crate::plane::ConnSet>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// Triggered on shutdown and when a path table changes, to wake the
    /// blocking read (this worker's own event).
    pub wake: Arc<InterruptEvent>,
    /// The crypto stage, shared with every other worker.
    pub crypto_pool: Arc<CryptoPool>,
}

/// What the first read of a batch gave.
enum Read {
    /// The batch holds this many packets.
    Packets(usize),
    /// Nothing to send; read again.
    Again,
    /// Shutting down (or the tun device is gone).
    Stop,
}

impl TxWorker {
    /// Runs until shutdown.
    pub fn run(mut self) {
        let mut batch = TxBatch::new(self.stages.mtu, self.stages.conns.len());
        let mut txc: Vec<TxConn> = self.stages.conns.iter().map(|c| TxConn::new(c)).collect();
        let mut submitter = self.crypto_pool.submitter();
        let mut consecutive_errors = 0u32;
        let mut set_generation = self.set.generation();
        while !self.shutdown.load(Relaxed) {
            let first = match self.read_batch(&mut batch, &mut txc, &mut consecutive_errors) {
                Read::Packets(n) => n,
                Read::Again => continue,
                Read::Stop => break,
            };
            let n = self.read_more(first, &mut batch);
            let set_now = self.set.generation();
            if set_now != set_generation {
                // Connections added (or removed: they keep their slot).
                set_generation = set_now;
                let stages = &mut self.stages;
                (stages.conns, stages.router) = self.set.load();
                let from = txc.len();
                txc.extend(stages.conns.iter().skip(from).map(|c| TxConn::new(c)));
                txc.truncate(stages.conns.len());
            }
            let now = Instant::now();
            let stages = &self.stages;
            stages.plan_batch(&mut batch, &mut txc, n, now);
            stages.number(&mut batch, &mut txc);
            stages.charge(&batch, &txc, now);
            batch.plan.sort_unstable();
            // Head every group, then seal the whole batch at once (in
            // parallel when it is large enough), then send group by group:
            // the batch, not a path's share of it, is what the crypto
            // stage splits.
            stages.head_batch(&mut batch, &txc, now);
            seal::seal_batch(&mut batch, &mut submitter);
            stages.send_batch(&mut batch, &txc);
        }
    }

    /// The batch's first, blocking read. Woken without packets: a path
    /// table changed (taken now, so a removed path's socket is released
    /// even while no packet comes), or shutdown.
    fn read_batch(&self, batch: &mut TxBatch, txc: &mut [TxConn], errors: &mut u32) -> Read {
        match self.tun.recv_multiple_intr(
            &mut batch.original,
            &mut batch.bufs[..IDEAL_BATCH_SIZE],
            &mut batch.sizes[..IDEAL_BATCH_SIZE],
            PACKET_OFFSET,
            &self.wake,
        ) {
            Ok(n) => {
                *errors = 0;
                Read::Packets(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                if self.shutdown.load(Relaxed) {
                    return Read::Stop;
                }
                // Reset first: a change after this point interrupts the
                // next read.
                let _ = self.wake.reset();
                for (t, conn) in txc.iter_mut().zip(self.stages.conns.iter()) {
                    conn.refresh_paths(&mut t.table, &mut t.generation);
                }
                Read::Again
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Read::Again,
            Err(e) => {
                self.stages.stats.tun_errors.add(1);
                *errors += 1;
                if crate::io::fatal::tun_is_gone(&e) || *errors >= MAX_READ_ERRORS {
                    crate::io::fatal::fatal(format!(
                        "tun device unusable (read: {e}); was it deleted?"
                    ));
                    return Read::Stop;
                }
                tracing::debug!(error = %e, "tun read failed");
                Read::Again
            }
        }
    }

    /// After a batch's first read filled `filled` buffers: reads on
    /// without waiting while [`IDEAL_BATCH_SIZE`] buffers are left (what
    /// one read may need) and the queue has packets. Returns how many
    /// buffers the batch fills. A failing read ends the batch (it is
    /// counted; the next blocking read decides whether the device is gone).
    fn read_more(&self, mut filled: usize, batch: &mut TxBatch) -> usize {
        let (original, bufs, sizes) = (&mut batch.original, &mut batch.bufs, &mut batch.sizes);
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
                    self.stages.stats.tun_errors.add(1);
                    tracing::debug!(error = %e, "tun read failed");
                    break;
                }
            }
        }
        filled
    }
}
