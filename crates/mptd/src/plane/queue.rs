//! The queues from the workers to the control loop: probes, replies,
//! handshake messages and path notices, each a fixed-size
//! [`ControlDatagram`] in a bounded channel, so a flood holds little
//! memory and never blocks a worker (a full queue is a counted drop).
//!
//! Two queues, so that an established session's probes, feedback and path
//! control never wait behind handshakes ([`ControlSender`] sorts them):
//! the **session queue** ([`CONTROL_QUEUE`]) and the **handshake queue**
//! ([`HANDSHAKE_QUEUE`], smaller: it is the one a flood fills, and it
//! drops first, counted as `handshake_queue_full` in the daemon's drops).
//! The control loop serves the session queue first in every round and at
//! most [`HANDSHAKES_PER_ROUND`] handshakes after it. A handshake queued
//! while the loop sleeps wakes it with one marker in the session queue
//! (at most one outstanding, [`HANDSHAKE_WAKE`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};

/// Why a message was not queued (the message itself is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// Its queue is full (a counted drop).
    Full,
    /// The control loop is gone (shutting down).
    Closed,
}

fn small<T>(e: TrySendError<T>) -> SendError {
    match e {
        TrySendError::Full(_) => SendError::Full,
        TrySendError::Disconnected(_) => SendError::Closed,
    }
}
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::crypto::{CHALLENGE_LEN, INIT_LEN, RESPONSE_LEN};
use mpt_proto::noise::{COOKIE_REPLY_LEN, INITIATION_LEN, RESPONSE_LEN as NOISE_RESPONSE_LEN};
use mpt_proto::wire::MsgType;

use crate::io::source::Source;
use crate::plane::counters::TxStats;

/// Control datagrams queued between receive workers and the control loop.
/// Probes arrive a few per second per path; 4096 absorbs bursts without
/// letting a flood hold much memory (each entry is ~70 bytes).
pub const CONTROL_QUEUE: usize = 4096;

/// Handshake messages queued for the control loop. A second's worth of
/// what the responder-wide bucket lets through (500/s), so a legitimate
/// burst (a concentrator's clients coming back after an outage) fits,
/// and a flood is cut here at the cost of a `try_send`.
pub const HANDSHAKE_QUEUE: usize = crate::config::DEFAULT_HANDSHAKE_QUEUE;

/// Handshake messages the control loop handles per round, after the
/// session queue: with two to four X25519 each (~25-50 us), at most a few
/// milliseconds of a round.
pub const HANDSHAKES_PER_ROUND: usize = 64;

/// `ControlDatagram::conn` of the marker that wakes the control loop for
/// the handshake queue (names no connection; carries nothing).
pub const HANDSHAKE_WAKE: usize = usize::MAX - 2;

/// Largest message handed to the control loop (handshake messages are:
/// a Noise initiation is 168 bytes).
pub const CONTROL_DATAGRAM_MAX: usize = mpt_proto::noise::INITIATION_LEN;

/// `ControlDatagram::conn` of a Noise initiation read on a shared port:
/// it names no connection (the control loop finds it by the static key).
pub const SHARED_INITIATION: usize = usize::MAX - 1;

/// A probe, reply or handshake message handed to the control loop. Sealed
/// probes and replies arrive opened, with the SEALED flag cleared.
#[derive(Debug, Clone, Copy)]
pub struct ControlDatagram {
    /// Connection index.
    pub conn: usize,
    /// Path index.
    pub path: usize,
    /// When it arrived.
    pub at: Instant,
    /// Its source address.
    pub from: Option<SocketAddr>,
    /// Our address it was sent to (shared ports; see `crate::io::source`).
    pub to: Option<Source>,
    /// The shared port it arrived on, for a Noise initiation read there
    /// (`conn` is then [`SHARED_INITIATION`]); 0 otherwise.
    pub port: u16,
    /// Length of `bytes` used; 0: a notice that a client connection's path
    /// `path` was heard from `from` and needs adding (or moving).
    pub len: usize,
    /// The datagram.
    pub bytes: [u8; CONTROL_DATAGRAM_MAX],
}

/// For a handshake message type: the exact datagram length, and whether
/// it belongs to the public-key handshake (`true`) or the PSK handshake.
/// `None` for every other type.
pub fn handshake_kind(msg_type: MsgType) -> Option<(usize, bool)> {
    match msg_type {
        MsgType::HandshakeInit => Some((INIT_LEN, false)),
        MsgType::HandshakeResponse => Some((RESPONSE_LEN, false)),
        MsgType::HandshakeChallenge => Some((CHALLENGE_LEN, false)),
        MsgType::NoiseInitiation => Some((INITIATION_LEN, true)),
        MsgType::NoiseResponse => Some((NOISE_RESPONSE_LEN, true)),
        MsgType::NoiseCookieReply => Some((COOKIE_REPLY_LEN, true)),
        MsgType::Data
        | MsgType::Probe
        | MsgType::ProbeReply
        | MsgType::Control
        | MsgType::Feedback
        | MsgType::Nack
        | MsgType::Repair => None,
    }
}

impl ControlDatagram {
    /// A message without bytes addressed to pseudo-connection `conn`.
    pub fn marker(conn: usize) -> ControlDatagram {
        ControlDatagram {
            conn,
            path: 0,
            at: Instant::now(),
            from: None,
            to: None,
            port: 0,
            len: 0,
            bytes: [0; CONTROL_DATAGRAM_MAX],
        }
    }

    /// Whether it goes to the handshake queue: an initiation read on a
    /// shared port, or any handshake message type.
    pub fn is_handshake(&self) -> bool {
        if self.conn == SHARED_INITIATION {
            return true;
        }
        let bytes = &self.bytes[..self.len.min(CONTROL_DATAGRAM_MAX)];
        self.len > 0
            && mpt_proto::wire::Header::parse(bytes)
                .is_ok_and(|(h, _)| handshake_kind(h.msg_type).is_some())
    }
}

/// The workers' end of the two queues (cheap to clone).
#[derive(Debug, Clone)]
pub struct ControlSender {
    session: SyncSender<ControlDatagram>,
    handshake: SyncSender<ControlDatagram>,
    /// A [`HANDSHAKE_WAKE`] marker is in the session queue (or the loop
    /// is about to look at the handshake queue anyway).
    woken: Arc<AtomicBool>,
    /// Daemon-wide drops (`handshake_queue_full`).
    drops: Arc<TxStats>,
}

impl ControlSender {
    /// Queues `msg` on its queue; never blocks. A full queue drops it
    /// (`Full`); the handshake queue's drops are also counted daemon-wide.
    pub fn try_send(&self, msg: ControlDatagram) -> Result<(), SendError> {
        if !msg.is_handshake() {
            return self.session.try_send(msg).map_err(small);
        }
        match self.handshake.try_send(msg) {
            Ok(()) => {
                if !self.woken.swap(true, Ordering::AcqRel)
                    && self
                        .session
                        .try_send(ControlDatagram::marker(HANDSHAKE_WAKE))
                        .is_err()
                {
                    // The session queue is full: the loop is busy and
                    // looks at the handshake queue every round anyway.
                    self.woken.store(false, Ordering::Release);
                }
                Ok(())
            }
            Err(e) => {
                if matches!(e, TrySendError::Full(_)) {
                    self.drops.handshake_queue_full.add(1);
                }
                Err(small(e))
            }
        }
    }
}

/// The control loop's end of the two queues.
#[derive(Debug)]
pub struct ControlInput {
    session: Receiver<ControlDatagram>,
    handshake: Receiver<ControlDatagram>,
    woken: Arc<AtomicBool>,
}

impl ControlInput {
    /// The next session-queue message, waiting up to `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<ControlDatagram, RecvTimeoutError> {
        self.session.recv_timeout(timeout)
    }

    /// The next session-queue message, if one is waiting.
    pub fn try_recv(&self) -> Option<ControlDatagram> {
        self.session.try_recv().ok()
    }

    /// Starts serving the handshake queue: a handshake queued from now on
    /// sends a new wake marker (so none waits for a tick).
    pub fn start_handshakes(&self) {
        self.woken.store(false, Ordering::Release);
    }

    /// The oldest handshake message, if any.
    pub fn try_handshake(&self) -> Option<ControlDatagram> {
        self.handshake.try_recv().ok()
    }
}

/// The two queues, with `session` and `handshake` slots; the handshake
/// queue's drops are counted in `drops.handshake_queue_full`.
pub fn control_queues(
    session: usize,
    handshake: usize,
    drops: Arc<TxStats>,
) -> (ControlSender, ControlInput) {
    let (stx, srx) = sync_channel(session);
    let (htx, hrx) = sync_channel(handshake);
    let woken = Arc::new(AtomicBool::new(false));
    (
        ControlSender {
            session: stx,
            handshake: htx,
            woken: woken.clone(),
            drops,
        },
        ControlInput {
            session: srx,
            handshake: hrx,
            woken,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_proto::wire::{Flags, Header};

    fn dgram(msg_type: MsgType, conn: usize) -> ControlDatagram {
        let mut d = ControlDatagram::marker(conn);
        let h = Header {
            msg_type,
            flags: Flags::NONE,
            path_id: 0,
            conn_id: 1,
            seq: 0,
            path_seq: 0,
            timestamp_us: 0,
        };
        d.len = handshake_kind(msg_type).map_or(40, |(l, _)| l);
        h.emit(&mut d.bytes[..d.len]).unwrap();
        d
    }

    /// A handshake flood fills (and overflows, counted) the handshake
    /// queue only: session traffic still queues, is served first, and
    /// handshakes come out at most a round's budget at a time.
    #[test]
    fn session_traffic_is_served_while_the_handshake_queue_is_full() {
        let drops = Arc::new(TxStats::default());
        let (tx, rx) = control_queues(8, 4, drops.clone());
        let full = &drops.handshake_queue_full;
        for _ in 0..10 {
            let _ = tx.try_send(dgram(MsgType::NoiseInitiation, SHARED_INITIATION));
        }
        assert_eq!(full.get(), 6, "drops counted");
        for _ in 0..3 {
            tx.try_send(dgram(MsgType::Probe, 0)).unwrap();
        }
        let _ = tx.try_send(dgram(MsgType::HandshakeInit, 0));
        // The session queue: one wake marker, then the probes.
        let first = rx.recv_timeout(Duration::ZERO).unwrap();
        assert_eq!(first.conn, HANDSHAKE_WAKE);
        let probes = std::iter::from_fn(|| rx.try_recv()).count();
        assert_eq!(probes, 3, "no probe lost or behind a handshake");
        rx.start_handshakes();
        let seen = std::iter::from_fn(|| rx.try_handshake()).count();
        assert_eq!(seen, 4);
        assert_eq!(full.get(), 7);
        // Queued while the loop sleeps: a new marker wakes it.
        tx.try_send(dgram(MsgType::NoiseResponse, 0)).unwrap();
        assert_eq!(rx.try_recv().map(|d| d.conn), Some(HANDSHAKE_WAKE));
        assert!(rx.try_recv().is_none(), "one marker at a time");
    }

    #[test]
    fn handshake_lengths() {
        assert_eq!(handshake_kind(MsgType::NoiseInitiation), Some((168, true)));
        assert_eq!(handshake_kind(MsgType::NoiseResponse), Some((92, true)));
        assert_eq!(handshake_kind(MsgType::NoiseCookieReply), Some((80, true)));
        assert_eq!(handshake_kind(MsgType::HandshakeInit), Some((104, false)));
        assert_eq!(handshake_kind(MsgType::Data), None);
    }
}
