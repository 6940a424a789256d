//! The control loop: drives every connection's [`Session`].
//!
//! One thread owns all sessions, so protocol state needs no locks. It wakes
//! when a probe or reply arrives from a receive worker, when a session timer
//! is due, and at least every [`TICK`] to pull the data plane's receive
//! summaries (which keep busy paths alive without a probe per packet). Each
//! round runs in a fixed order: input, summaries, timers, transmits, events,
//! publish eligibility and status.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::wire::Header;
use mpt_proto::{DataSummary, DropReason, Event, Session, Transmit};

use crate::rx::ControlDatagram;
use crate::state::{ConnShared, PathView};

/// Longest sleep of the loop: bounds how stale receive summaries and the
/// published status get (and adds at most this to dead-path detection of a
/// path whose traffic the data plane saw last).
pub const TICK: Duration = Duration::from_millis(50);

/// Control datagrams handled per round before timers run: a flood of
/// probes cannot starve the timers.
const MAX_INPUT_PER_ROUND: usize = 256;

/// How long the resequencer waits for a gap to fill: the spread of one-way
/// delays between the fastest and the slowest usable path (half the RTT
/// spread), plus twice the largest RTT variation, plus a floor for
/// scheduling jitter of the receive workers; capped at one second.
pub fn reorder_timeout(session: &Session) -> Duration {
    let floor = crate::daemon::DEFAULT_REORDER_TIMEOUT;
    let usable = session.paths().iter().filter(|p| p.usable());
    let (mut lo, mut hi, mut var) = (Duration::MAX, Duration::ZERO, Duration::ZERO);
    for p in usable {
        if let Some(rtt) = p.rtt().smoothed() {
            lo = lo.min(rtt);
            hi = hi.max(rtt);
            var = var.max(p.rtt().variation());
        }
    }
    if hi < lo {
        return floor;
    }
    ((hi - lo) / 2 + var * 2 + floor).min(Duration::from_secs(1))
}

/// The control loop.
pub struct ControlLoop {
    /// Connections, by index.
    pub conns: Arc<Vec<Arc<ConnShared>>>,
    /// Their sessions, same order.
    pub sessions: Vec<Session>,
    /// Probes and replies from the receive workers.
    pub input: Receiver<ControlDatagram>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
}

impl ControlLoop {
    /// Runs until shutdown.
    pub fn run(mut self) {
        let mut buf = [0u8; Transmit::LEN];
        self.round(Instant::now(), &mut buf);
        while !self.shutdown.load(Relaxed) {
            let now = Instant::now();
            let wake = self
                .sessions
                .iter()
                .filter_map(|s| s.poll_timeout())
                .map(|t| t.at)
                .min()
                .map_or(now + TICK, |t| t.min(now + TICK));
            match self.input.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(d) => {
                    self.on_datagram(d);
                    for _ in 0..MAX_INPUT_PER_ROUND {
                        match self.input.try_recv() {
                            Ok(d) => self.on_datagram(d),
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.round(Instant::now(), &mut buf);
        }
    }

    fn on_datagram(&mut self, d: ControlDatagram) {
        let (Some(session), Some(conn)) = (self.sessions.get_mut(d.conn), self.conns.get(d.conn))
        else {
            return;
        };
        let Ok((header, payload)) = Header::parse(&d.bytes) else {
            conn.drops.malformed.add(1);
            return;
        };
        match session.handle_datagram(d.path, &header, payload, d.at) {
            Ok(_) => {
                if let Some(p) = conn.paths.get(d.path) {
                    p.rx_packets.add(1);
                    p.rx_bytes.add(d.bytes.len() as u64);
                }
            }
            Err(DropReason::Malformed(_)) => conn.drops.malformed.add(1),
            Err(DropReason::UnknownConnection(_)) => conn.drops.unknown_connection.add(1),
            Err(DropReason::Sealed) => conn.drops.auth.add(1),
            Err(DropReason::Unsupported(_)) => conn.drops.unsupported.add(1),
            Err(DropReason::UnknownPath(_)) => conn.drops.malformed.add(1),
        }
    }

    fn round(&mut self, now: Instant, buf: &mut [u8; Transmit::LEN]) {
        for (session, conn) in self.sessions.iter_mut().zip(self.conns.iter()) {
            for (i, p) in conn.paths.iter().enumerate() {
                let packets = p.rx_summary_packets.swap(0, Relaxed);
                if packets > 0 {
                    let last_ns = p.rx_summary_last_ns.load(Relaxed);
                    let summary = DataSummary {
                        packets,
                        highest_path_seq: p.rx_summary_highest.load(Relaxed),
                        last_rx: conn.epoch + Duration::from_nanos(last_ns),
                    };
                    // The index comes from the same list the session was built from.
                    let _unknown_path_impossible = session.handle_data_summary(i, summary);
                }
            }
            session.handle_timeout(now);
            while let Some(t) = session.poll_transmit() {
                let Some(path) = conn.paths.get(t.path) else {
                    continue;
                };
                let Some((remote, _)) = path.remote() else {
                    continue;
                };
                let seq = conn.seq.fetch_add(1, Relaxed);
                let pseq = path.path_seq.fetch_add(1, Relaxed);
                let Ok(len) = t.emit(seq, pseq, buf) else {
                    continue;
                };
                match path.socket.send_to(&buf[..len], remote) {
                    Ok(_) => {
                        path.tx_packets.add(1);
                        path.tx_bytes.add(len as u64);
                    }
                    Err(e) => {
                        conn.drops.send_error.add(1);
                        tracing::trace!(conn = %conn.name, path = %path.name, error = %e, "probe send failed");
                    }
                }
            }
            while let Some(event) = session.poll_event() {
                match event {
                    Event::PathStateChanged { path, from, to } => {
                        let name = conn.paths.get(path).map_or("?", |p| p.name.as_str());
                        tracing::info!(
                            conn = %conn.name,
                            path = name,
                            from = from.as_str(),
                            state = to.as_str(),
                            "path state changed"
                        );
                    }
                }
            }
            conn.eligible.store(session.eligibility().active(), Relaxed);
            conn.reseq_timeout_us
                .store(reorder_timeout(session).as_micros() as u64, Relaxed);
            for (p, shared) in session.paths().iter().zip(conn.paths.iter()) {
                let view = PathView {
                    state: p.state().as_str(),
                    rtt_ms: p.rtt().smoothed().map(|d| d.as_secs_f64() * 1e3),
                    rtt_min_ms: p.rtt().min().map(|d| d.as_secs_f64() * 1e3),
                    loss_pct: p.loss().loss_pct(),
                    last_change: p.last_change(),
                    last_rx: p.last_rx(),
                    peer_weight_in: p.peer_weight_in(),
                };
                match shared.view.lock() {
                    Ok(mut g) => *g = view,
                    Err(poisoned) => *poisoned.into_inner() = view,
                }
            }
        }
    }
}
