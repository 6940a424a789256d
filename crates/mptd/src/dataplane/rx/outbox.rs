//! What a batch hands to the control loop: probes, replies, feedback,
//! control and handshake messages, and notices of paths heard from.
//!
//! They are collected during the batch and queued only after the batch's
//! data summary is stored on its path: a probe's report must never count
//! less data than arrived before it (that would read as loss). The queue
//! to the control loop is bounded and never blocks a worker; what does not
//! fit is dropped and counted.

use mpt_proto::wire::HeaderViewMut;
use std::net::SocketAddr;
use std::time::Instant;

use mpt_proto::wire::Flags;

use crate::dataplane::rx::batch::RECV_MESSAGES;
use crate::io::source::Source;
use crate::io::udp::RecvMeta;
use crate::plane::queue::SendError;
use crate::plane::{ConnShared, ControlDatagram, ControlSender, CONTROL_DATAGRAM_MAX};

/// Control messages of the current batch (allocated once).
pub struct Outbox {
    pending: Vec<ControlDatagram>,
}

impl Outbox {
    /// An empty outbox.
    pub fn new() -> Outbox {
        Outbox {
            pending: Vec::with_capacity(RECV_MESSAGES),
        }
    }

    /// Queues a (plaintext) message of `conn` received on path `pi` (as
    /// `m` says) for the control loop (bounded: beyond the capacity it is
    /// dropped and counted).
    pub fn datagram(
        &mut self,
        conn: &ConnShared,
        pi: usize,
        dgram: &[u8],
        m: &RecvMeta,
        now: Instant,
    ) {
        // When it came (its delay sample and RTT then leave out how long
        // it waited in the socket for this worker).
        let lag = crate::io::udp::arrival_lag(m.arrived_ns, crate::io::udp::wall_clock_ns());
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
        if let Ok(mut h) = HeaderViewMut::check_len(&mut msg.bytes) {
            h.remove_flags(Flags::SEALED);
        }
        self.queue(conn, msg);
    }

    /// Tells the control loop that authenticated datagrams of path `pi`
    /// came from `from` while the connection has no such path (or it is
    /// on the other family's socket): a message without bytes.
    pub fn path_heard(
        &mut self,
        conn: &ConnShared,
        pi: usize,
        from: SocketAddr,
        to: Option<Source>,
        now: Instant,
    ) {
        let msg = ControlDatagram {
            conn: conn.index,
            path: pi,
            at: now,
            from: Some(from),
            to,
            port: 0,
            len: 0,
            bytes: [0; CONTROL_DATAGRAM_MAX],
        };
        self.queue(conn, msg);
    }

    fn queue(&mut self, conn: &ConnShared, msg: ControlDatagram) {
        if self.pending.len() < self.pending.capacity() {
            self.pending.push(msg);
        } else {
            conn.drops.control_queue_full.add(1);
        }
    }

    /// Hands the batch's messages to the control loop.
    pub fn send(&mut self, conn: &ConnShared, control: &ControlSender) {
        for msg in self.pending.drain(..) {
            match control.try_send(msg) {
                Ok(()) | Err(SendError::Closed) => {}
                Err(SendError::Full) => conn.drops.control_queue_full.add(1),
            }
        }
    }
}
