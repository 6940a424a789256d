//! The control loop: drives every connection's [`Session`] and key exchange.
//!
//! One thread owns all sessions, so protocol state needs no locks. It wakes
//! when a probe, reply or handshake message arrives from a receive worker,
//! when a session timer or a handshake retry is due, and at least every
//! [`TICK`] to pull the data plane's receive summaries (which keep busy
//! paths alive without a probe per packet). Each round runs in a fixed
//! order: input, summaries, handshakes, timers, transmits, events, publish
//! eligibility and status.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::crypto::{HandshakeError, SessionKeys, RESPONSE_LEN, TAG_LEN};
use mpt_proto::path::Liveness;
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};
use mpt_proto::{DataSummary, DropReason, Event, Session};

use crate::command::{Applier, Request};
use crate::handshake::{InitOutcome, KeyExchange};
use crate::rx::ControlDatagram;
use crate::state::{ConnShared, PathShared, PathView};

/// Longest sleep of the loop: bounds how stale receive summaries and the
/// published status get (and adds at most this to dead-path detection of a
/// path whose traffic the data plane saw last).
pub const TICK: Duration = Duration::from_millis(50);

/// Control datagrams handled per round before timers run: a flood of
/// probes cannot starve the timers.
const MAX_INPUT_PER_ROUND: usize = 256;

/// Room for any datagram the control loop builds (handshake messages are
/// the largest).
const OUT_LEN: usize = 128;

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
    /// Their key exchanges (for connections with a key), same order.
    pub exchanges: Vec<Option<KeyExchange>>,
    /// Probes, replies and handshake messages from the receive workers.
    pub input: Receiver<ControlDatagram>,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// Operator commands (control socket, SIGHUP).
    pub commands: Receiver<Request>,
    /// Applies them.
    pub applier: Applier,
}

impl ControlLoop {
    /// Runs until shutdown.
    pub fn run(mut self) {
        let mut buf = [0u8; OUT_LEN];
        self.round(Instant::now(), &mut buf);
        while !self.shutdown.load(Relaxed) {
            let now = Instant::now();
            let timers = self
                .sessions
                .iter()
                .filter_map(|s| s.poll_timeout())
                .map(|t| t.at);
            let retries = self
                .exchanges
                .iter()
                .flatten()
                .filter_map(|x| x.next_attempt());
            let wake = timers
                .chain(retries)
                .min()
                .map_or(now + TICK, |t| t.min(now + TICK));
            match self.input.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(d) => {
                    // Data counted before these messages arrived must be in
                    // the sessions' receive reports first.
                    self.pull_summaries();
                    self.on_datagram(d, &mut buf);
                    for _ in 0..MAX_INPUT_PER_ROUND {
                        match self.input.try_recv() {
                            Ok(d) => self.on_datagram(d, &mut buf),
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let mut answers = Vec::new();
            while let Ok((cmd, reply)) = self.commands.try_recv() {
                let result =
                    self.applier
                        .apply(cmd, &self.conns, &mut self.sessions, Instant::now());
                answers.push((reply, result));
            }
            self.round(Instant::now(), &mut buf);
            // Answer after the round published the new state, so a status
            // request right after the answer already shows the change.
            for (reply, result) in answers {
                let _client_may_have_gone = reply.try_send(result);
            }
        }
    }

    fn on_datagram(&mut self, d: ControlDatagram, out: &mut [u8; OUT_LEN]) {
        let Some(conn) = self.conns.get(d.conn).cloned() else {
            return;
        };
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let Ok((header, payload)) = Header::parse(bytes) else {
            conn.drops.malformed.add(1);
            return;
        };
        match header.msg_type {
            MsgType::HandshakeInit | MsgType::HandshakeResponse => {
                self.on_handshake(&conn, d, &header, out);
                return;
            }
            MsgType::Data | MsgType::Probe | MsgType::ProbeReply | MsgType::Control => {}
        }
        let Some(session) = self.sessions.get_mut(d.conn) else {
            return;
        };
        match session.handle_datagram(d.path, &header, payload, d.at) {
            Ok(_) => {
                if let Some(p) = conn.paths.get(d.path) {
                    p.rx_packets.add(1);
                    p.rx_bytes.add(d.len as u64);
                }
            }
            Err(DropReason::Malformed(_)) => conn.drops.malformed.add(1),
            Err(DropReason::UnknownConnection(_)) => conn.drops.unknown_connection.add(1),
            Err(DropReason::Sealed) => conn.drops.auth.add(1),
            Err(DropReason::Unsupported(_)) => conn.drops.unsupported.add(1),
            Err(DropReason::UnknownPath(_)) => conn.drops.malformed.add(1),
        }
    }

    fn on_handshake(
        &mut self,
        conn: &ConnShared,
        d: ControlDatagram,
        header: &Header,
        out: &mut [u8; OUT_LEN],
    ) {
        let (Some(Some(exchange)), Some(crypto), Some(path)) = (
            self.exchanges.get_mut(d.conn),
            conn.crypto.as_ref(),
            conn.paths.get(d.path),
        ) else {
            conn.drops.unsupported.add(1);
            return;
        };
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let count_error = |e: HandshakeError| match e {
            HandshakeError::Auth | HandshakeError::UnexpectedResponse => conn.drops.auth.add(1),
            HandshakeError::Replay { .. } => conn.drops.replay.add(1),
            HandshakeError::WrongConnection { .. } => conn.drops.unknown_connection.add(1),
            _ => conn.drops.malformed.add(1),
        };
        let installed = |keys: SessionKeys, from| {
            crypto.install(keys);
            if let Some(from) = from {
                if path.learn_remote(from) {
                    tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address from handshake");
                }
            }
            tracing::info!(conn = %conn.name, path = %path.name, "session keys established");
        };
        match header.msg_type {
            MsgType::HandshakeInit => {
                let reply_header = next_header(conn, path, d.at);
                match exchange.on_init(bytes, d.at, &reply_header, &mut out[..RESPONSE_LEN]) {
                    InitOutcome::Respond { keys, len } => {
                        let to = d.from.or_else(|| path.remote().map(|(a, _)| a));
                        installed(*keys, d.from);
                        exchange.settle(d.at + settle_time(&self.sessions[d.conn]));
                        if let Some(to) = to {
                            send(conn, path, &out[..len], to);
                        }
                    }
                    InitOutcome::OursWins => {}
                    InitOutcome::RateLimited => conn.drops.handshake_rate_limited.add(1),
                    InitOutcome::Refused(e) => count_error(e),
                }
            }
            _ => match exchange.on_response(bytes) {
                Ok(keys) => {
                    installed(keys, d.from);
                    exchange.settle(d.at + settle_time(&self.sessions[d.conn]));
                }
                Err(e) => count_error(e),
            },
        }
    }

    /// Feeds the data plane's receive summaries into the sessions.
    fn pull_summaries(&mut self) {
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
        }
    }

    fn round(&mut self, now: Instant, buf: &mut [u8; OUT_LEN]) {
        self.pull_summaries();
        for (ci, (session, conn)) in self.sessions.iter_mut().zip(self.conns.iter()).enumerate() {
            let keys = match (&conn.crypto, self.exchanges.get_mut(ci)) {
                (Some(crypto), Some(Some(exchange))) => {
                    let keys = crypto.keys();
                    let all_down = session
                        .paths()
                        .iter()
                        .all(|p| p.liveness() == Liveness::Down);
                    if let Some(attempt) = exchange.poll_initiate(keys.is_none() || all_down, now) {
                        initiate(conn, exchange, attempt, now, buf);
                    }
                    Some(keys)
                }
                _ => None,
            };
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
                let Ok(mut len) = t.emit(seq, pseq, buf) else {
                    continue;
                };
                match &keys {
                    None => {}
                    // Encrypted connection without a session yet: nothing
                    // can be sent that the peer would accept.
                    Some(None) => continue,
                    Some(Some(k)) => {
                        buf[1] |= Flags::SEALED.bits();
                        match k.seal_datagram(&mut buf[..len + TAG_LEN], len - HEADER_LEN) {
                            Ok(n) => len = n,
                            Err(_) => continue,
                        }
                    }
                }
                send(conn, path, &buf[..len], remote);
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

/// How long a fresh session gets before all-paths-down triggers a new
/// handshake: the longest dead timer.
fn settle_time(session: &Session) -> Duration {
    session
        .paths()
        .iter()
        .map(|p| p.params().dead_timer)
        .max()
        .unwrap_or(Duration::from_secs(5))
}

/// A header with fresh sequence numbers for a message on `path`.
fn next_header(conn: &ConnShared, path: &PathShared, now: Instant) -> Header {
    Header {
        msg_type: MsgType::HandshakeInit,
        flags: Flags::NONE,
        path_id: path.index as u16,
        conn_id: conn.conn_id,
        seq: conn.seq.fetch_add(1, Relaxed),
        path_seq: path.path_seq.fetch_add(1, Relaxed),
        timestamp_us: mpt_proto::timestamp_us(conn.epoch, now),
    }
}

/// Sends an Init on the `attempt`-th path (rotating) whose remote is known.
fn initiate(
    conn: &ConnShared,
    exchange: &mut KeyExchange,
    attempt: usize,
    now: Instant,
    buf: &mut [u8],
) {
    let known: Vec<&PathShared> = conn.paths.iter().filter(|p| p.remote().is_some()).collect();
    if known.is_empty() {
        return;
    }
    let path = known[attempt % known.len()];
    let Some((remote, _)) = path.remote() else {
        return;
    };
    let header = next_header(conn, path, now);
    match exchange.start(&header, buf) {
        Ok(len) => {
            tracing::debug!(conn = %conn.name, path = %path.name, attempt, "sending handshake init");
            send(conn, path, &buf[..len], remote);
        }
        Err(e) => tracing::warn!(conn = %conn.name, error = %e, "cannot build handshake init"),
    }
}

fn send(conn: &ConnShared, path: &PathShared, bytes: &[u8], to: std::net::SocketAddr) {
    match path.socket.send_to(bytes, to) {
        Ok(_) => {
            path.tx_packets.add(1);
            path.tx_bytes.add(bytes.len() as u64);
        }
        Err(e) => {
            conn.drops.send_error.add(1);
            tracing::trace!(conn = %conn.name, path = %path.name, error = %e, "control send failed");
        }
    }
}
