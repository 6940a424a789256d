//! Initiations read on the shared ports: the mac1 gate every one passes
//! before the control loop sees it, and the thread that reads the ports'
//! initiation lanes (see `crate::io::lane` for why initiations have a
//! socket of their own).
//!
//! The lane's reader runs at the lowest CPU priority (nice 19): a genuine
//! initiation waits at most a scheduler slice when the machine is busy,
//! and a flood of forged ones takes only the CPU nothing else wants; what
//! the reader cannot take the kernel drops at the lane's queue, and the
//! gate counts those drops (`lane_drops`).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use mpt_proto::noise::Mac1Check;
use mpt_proto::wire::{HeaderView, MsgType};

use crate::dataplane::rx::batch::{buffers, RECV_MESSAGES};
use crate::io::lane::kernel_drops;
use crate::io::source::Source;
use crate::io::udp::{PathSocket, RecvMeta, RECV_TIMEOUT};
use crate::plane::queue::SendError;
use crate::plane::shared_port::SharedStats;
use crate::plane::{ControlDatagram, ControlSender, CONTROL_DATAGRAM_MAX, SHARED_INITIATION};

/// Checks an initiation's length and mac1 and queues it for the control
/// loop, counting what it refuses.
#[derive(Clone)]
pub struct InitiationGate {
    /// Checks the mac1 of initiations before they are queued.
    pub mac1: Mac1Check,
    /// Queue to the control loop.
    pub control: ControlSender,
    /// Where refusals and queued initiations are counted.
    pub stats: Arc<SharedStats>,
}

impl InitiationGate {
    /// One initiation read on shared port `port`: its mac1 checked here (a
    /// flood of bogus ones is dropped and counted at this cost), then
    /// queued for the control loop.
    pub fn admit(
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
        let Ok(view) = HeaderView::check_len(dgram) else {
            return;
        };
        let mut msg = ControlDatagram {
            conn: SHARED_INITIATION,
            path: usize::from(view.path_id()),
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
            Err(SendError::Full) => self.stats.queue_full.add(1),
            Err(SendError::Closed) => {}
        }
    }
}

/// The reader of every shared port's lane sockets.
pub struct LaneReader {
    /// The lane sockets (per shared port and family).
    pub sockets: Vec<PathSocket>,
    pub gate: InitiationGate,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
}

impl LaneReader {
    /// Runs until shutdown, at nice 19.
    pub fn run(self) {
        lowest_priority();
        let mut bufs = buffers();
        let mut meta = [RecvMeta::default(); RECV_MESSAGES];
        let mut drops_seen: Vec<u64> = self
            .sockets
            .iter()
            .map(|s| kernel_drops(s).unwrap_or(0))
            .collect();
        while !self.shutdown.load(Relaxed) {
            let mut busy = false;
            for (socket, seen) in self.sockets.iter().zip(&mut drops_seen) {
                let n = match socket.recv_batch(&mut bufs, &mut meta) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        tracing::trace!(local = %socket.local_addr(), error = %e, "lane recv error");
                        continue;
                    }
                };
                busy = true;
                let now = Instant::now();
                let port = socket.local_addr().port();
                for (buf, m) in bufs.iter().zip(&meta).take(n) {
                    self.batch_of_one_source(buf, m, port, now);
                }
                if let Some(total) = kernel_drops(socket) {
                    self.gate.stats.lane_drops.add(total.saturating_sub(*seen));
                    *seen = total;
                }
            }
            if !busy {
                if let Err(e) =
                    crate::io::udp::wait_any_readable(self.sockets.iter(), None, RECV_TIMEOUT)
                {
                    tracing::debug!(error = %e, "lane poll failed");
                    std::thread::sleep(RECV_TIMEOUT);
                }
            }
        }
    }

    /// The datagrams of one received message (one, or a GRO train from
    /// one source): initiations to the gate, anything else (the steering
    /// program sends none here) counted as malformed.
    fn batch_of_one_source(&self, buf: &[u8], m: &RecvMeta, port: u16, now: Instant) {
        if m.truncated {
            self.gate.stats.malformed.add(1);
            return;
        }
        for dgram in m.datagrams(buf) {
            let initiation = HeaderView::check_len(dgram)
                .is_ok_and(|h| h.msg_type() == Some(MsgType::NoiseInitiation));
            if initiation {
                self.gate.admit(dgram, m.from, m.to, port, now);
            } else {
                self.gate.stats.malformed.add(1);
            }
        }
    }
}

/// Lowers the calling thread's CPU priority to nice 19 (best effort).
fn lowest_priority() {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority on this thread's own id; it only changes its
    // scheduling weight.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
    if r != 0 {
        tracing::debug!(error = %io::Error::last_os_error(), "lane: could not lower the priority");
    }
}
