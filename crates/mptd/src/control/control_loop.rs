//! The control loop: drives every connection's [`Session`] and key exchange.
//!
//! One thread owns all sessions, so protocol state needs no locks. It wakes
//! when a probe, reply or handshake message arrives from a receive worker,
//! when a session timer or a handshake retry is due, and at least every
//! [`TICK`] to pull the data plane's receive summaries (which keep busy
//! paths alive without a probe per packet). Each round runs in a fixed
//! order: session input (probes, feedback, path control: up to
//! [`MAX_INPUT_PER_ROUND`]), then at most
//! [`HANDSHAKES_PER_ROUND`] handshake messages from their own queue (see
//! `crate::plane::queue`), summaries, timers, transmits, events, publish
//! eligibility and status.
//!
//! It also applies operator commands ([`crate::control::command`]) and the peer's
//! control messages (a path added or removed on the other side), ends the
//! drain of removed paths, and tells systemd when the daemon is ready.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_api::Response;
use mpt_proto::wire::{Header, MsgType};
use mpt_proto::{DataSummary, DropReason, Event, Session};

use super::conn_keys::ConnKeys;
use super::publish::{poll_keys, publish_liveness, publish_timing, publish_views, transmit};
use crate::config::Prefix;
use crate::control::command::{Answer, Outcome, Request, PEER_ANSWER_WAIT};
use crate::control::noise::NoiseDaemon;
use crate::control::pathset::{self, ConnSetup, Draining};
use crate::plane::{ConnShared, LastHandover};
use crate::plane::{ControlDatagram, HANDSHAKES_PER_ROUND};

/// Longest sleep of the loop: bounds how stale receive summaries and the
/// published status get (and adds at most this to dead-path detection of a
/// path whose traffic the data plane saw last).
pub const TICK: Duration = Duration::from_millis(20);

/// Control datagrams handled per round before timers run: a flood of
/// probes cannot starve the timers.
const MAX_INPUT_PER_ROUND: usize = 256;

/// Room for any datagram the control loop builds (handshake messages are
/// the largest: a Noise initiation is 168 bytes), with the AEAD tag.
pub(super) const OUT_LEN: usize = 192;

/// Longest wait for the paths before readiness is reported anyway (a peer
/// that is down must not make the service fail to start).
const READY_WAIT: Duration = Duration::from_secs(10);

/// The control loop.
pub struct ControlLoop {
    /// Connections, by index.
    pub conns: Arc<Vec<Arc<ConnShared>>>,
    /// Their sessions, same order.
    pub sessions: Vec<Session>,
    /// Their key exchanges, same order.
    pub keys: Vec<ConnKeys>,
    /// The public-key handshake's responder (with `[daemon]
    /// private_key_file`).
    pub noise: Option<NoiseDaemon>,
    /// Probes, replies and handshake messages from the receive workers.
    pub input: crate::plane::ControlInput,
    /// Set on shutdown.
    pub shutdown: Arc<AtomicBool>,
    /// Operator commands (control socket, SIGHUP).
    pub commands: Receiver<Request>,
    /// The config file, for reload.
    pub config_path: PathBuf,
    /// The configuration as running: what start-up and later reloads
    /// applied (a reload names every difference it could not apply).
    pub config: crate::config::Config,
    /// Per connection: what its paths share (ports, timers).
    pub setups: Vec<ConnSetup>,
    /// Per connection: the local addresses on which the peer may open
    /// paths (the configured paths' own, and `allow_peer_paths`).
    pub peer_locals: Vec<Vec<Prefix>>,
    /// Removed paths still receiving.
    pub draining: Vec<Draining>,
    /// Operator commands waiting for the peer's answer.
    pub pending: Vec<PendingAnswer>,
    /// Readiness notification to systemd, until sent.
    pub readiness: Option<Readiness>,
    /// Scratch space for the sessions' path models.
    pub models: Vec<(mpt_proto::sched::PathModel, Duration)>,
    /// Link and address events (`None`: netlink unavailable).
    pub links: Option<crate::control::links::Links>,
    /// Host-name remotes and their lookups (`None`: no path has one and
    /// no resolver thread runs).
    pub names: Option<crate::control::names::Names>,
    /// The shared ports (client connections): per port, a sending handle
    /// on its IPv4 and IPv6 socket (see `crate::plane::shared_port`).
    pub shared_ports: Vec<SharedPort>,
    /// Where the workers and the status read the connections from
    /// (replaced when a reload adds or removes a client connection).
    pub conn_set: Arc<crate::plane::ConnSet>,
    /// The shared ports' session index map (new client connections are
    /// registered in it).
    pub session_map: Arc<crate::plane::shared_port::SessionMap>,
    /// The transmit workers' wake-up events (for new connections).
    pub tx_wakes: crate::plane::TxWakes,
    /// The tun interface (routes of new client connections).
    pub tun_name: String,
    /// The operator's hook (`[daemon] hook`), told of path and
    /// connection changes (see `crate::control::hook_events`).
    pub hooks: Option<crate::io::hook::Hooks>,
    /// Per connection: whether it had a live path at the last change.
    pub conn_alive: Vec<bool>,
}

/// A shared port as the control loop sends through it: answers to
/// initiations before a path exists, and the sockets of learnt paths.
#[derive(Debug)]
pub struct SharedPort {
    /// The port.
    pub port: u16,
    /// A handle on the IPv4 socket.
    pub v4: Option<crate::io::udp::PathSocket>,
    /// A handle on the IPv6 socket.
    pub v6: Option<crate::io::udp::PathSocket>,
}

impl SharedPort {
    /// The socket of `port` for datagrams to `to`'s family.
    pub(super) fn socket(
        ports: &[SharedPort],
        port: u16,
        to: SocketAddr,
    ) -> Option<&crate::io::udp::PathSocket> {
        let p = ports.iter().find(|p| p.port == port)?;
        if to.is_ipv4() {
            p.v4.as_ref()
        } else {
            p.v6.as_ref()
        }
    }
}

/// An operator command waiting for the peer's answer to a control message.
#[derive(Debug)]
pub struct PendingAnswer {
    conn: usize,
    msg_id: u64,
    answer: Response,
    reply: SyncSender<Answer>,
    deadline: Instant,
}

/// When to tell systemd the daemon is ready: once every connection has a
/// usable path, or at `deadline`.
#[derive(Debug, Clone, Copy)]
pub struct Readiness {
    /// Report readiness at the latest then.
    pub deadline: Instant,
}

impl Readiness {
    /// Readiness due within [`READY_WAIT`] of `now`.
    pub fn new(now: Instant) -> Readiness {
        Readiness {
            deadline: now + READY_WAIT,
        }
    }
}

/// How often the allocator is asked to give free memory back.
const MEMORY_TRIM_EVERY: Duration = Duration::from_secs(10);

/// Gives the allocator's free pages back to the system. The workers'
/// resequencers and delay lines free their packet storage after a couple
/// of idle seconds (`mpt_proto::reorder::STORAGE_IDLE_RELEASE`), but
/// glibc keeps freed blocks of its per-thread arenas mapped unless asked:
/// without this a server's RSS would stay at the peak of its busiest
/// minute. A walk over the arenas' free lists every few seconds, off the
/// data path.
fn trim_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim has no preconditions; it only releases pages the
    // allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl ControlLoop {
    /// Runs until shutdown.
    pub fn run(mut self) {
        let mut buf = [0u8; OUT_LEN];
        self.round(Instant::now(), &mut buf);
        let mut next_trim = Instant::now() + MEMORY_TRIM_EVERY;
        let mut handshakes_waiting = false;
        while !self.shutdown.load(Relaxed) {
            let now = Instant::now();
            if now >= next_trim {
                trim_memory();
                next_trim = now + MEMORY_TRIM_EVERY;
            }
            let timers = self
                .sessions
                .iter()
                .filter_map(|s| s.poll_timeout())
                .map(|t| t.at);
            let retries = self
                .keys
                .iter()
                .filter_map(ConnKeys::psk)
                .filter_map(|x| x.next_attempt());
            let wake = timers
                .chain(retries)
                .min()
                .map_or(now + TICK, |t| t.min(now + TICK));
            // Handshakes left over from the last round: do not sleep.
            let wait = if handshakes_waiting {
                Duration::ZERO
            } else {
                wake.saturating_duration_since(now)
            };
            // The session queue first: established sessions' probes,
            // feedback and path control never wait behind handshakes.
            match self.input.recv_timeout(wait) {
                Ok(d) => {
                    // Data counted before these messages arrived must be in
                    // the sessions' receive reports first.
                    self.pull_summaries();
                    self.on_datagram(d, &mut buf);
                    for _ in 0..MAX_INPUT_PER_ROUND {
                        match self.input.try_recv() {
                            Some(d) => self.on_datagram(d, &mut buf),
                            None => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            // Then a bounded number of handshakes.
            self.input.start_handshakes();
            let mut served = 0;
            while served < HANDSHAKES_PER_ROUND {
                let Some(d) = self.input.try_handshake() else {
                    break;
                };
                self.on_datagram(d, &mut buf);
                served += 1;
            }
            handshakes_waiting = served == HANDSHAKES_PER_ROUND;
            let mut answers = Vec::new();
            while let Ok((cmd, reply)) = self.commands.try_recv() {
                let now = Instant::now();
                match self.apply(cmd, now) {
                    Outcome::Done(result) => answers.push((reply, result)),
                    Outcome::AwaitPeer {
                        conn,
                        msg_id,
                        answer,
                    } => self.pending.push(PendingAnswer {
                        conn,
                        msg_id,
                        answer,
                        reply,
                        deadline: now + PEER_ANSWER_WAIT,
                    }),
                }
            }
            let now = Instant::now();
            self.finish_drains(now);
            self.poll_names(now);
            if let Some(links) = &mut self.links {
                links.poll(&self.conns, &mut self.sessions, &self.setups, now);
            }
            self.round(now, &mut buf);
            // Answer after the round published the new state, so a status
            // request right after the answer already shows the change.
            for (reply, result) in answers {
                let _client_may_have_gone = reply.try_send(result);
            }
            self.answer_overdue(now);
            self.notify_when_ready(now);
        }
    }

    /// Takes in the resolver's answers and sends the lookups due; a path
    /// that got its first address is judged again by the links (or, without
    /// netlink, let go here).
    fn poll_names(&mut self, now: Instant) {
        let Some(names) = &mut self.names else { return };
        let changed = names.poll(&self.conns, &mut self.sessions, &self.setups, now);
        match &mut self.links {
            Some(links) if changed => links.recheck(),
            Some(_) => {}
            None => crate::control::names::hold_without_links(&self.conns, &mut self.sessions, now),
        }
    }

    /// Drops drained paths from their tables.
    fn finish_drains(&mut self, now: Instant) {
        let conns = &self.conns;
        self.draining.retain(|d| {
            if d.until > now {
                return true;
            }
            if let Some(conn) = conns.get(d.conn) {
                pathset::finish(conn, d.id);
                tracing::debug!(conn = %conn.name, id = d.id, "removed path drained");
            }
            false
        });
    }

    /// Answers operator commands whose peer has not answered in time.
    fn answer_overdue(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].deadline <= now {
                let p = self.pending.swap_remove(i);
                let mut answer = p.answer;
                answer.peer = Some("no answer yet (still trying)".into());
                let _ = p.reply.try_send(Ok(answer));
            } else {
                i += 1;
            }
        }
    }

    pub(super) fn answer_pending(&mut self, conn: usize, msg_id: u64, result: Result<(), String>) {
        if let Some(i) = self
            .pending
            .iter()
            .position(|p| p.conn == conn && p.msg_id == msg_id)
        {
            let p = self.pending.swap_remove(i);
            let reply = match result {
                Ok(()) => {
                    let mut answer = p.answer;
                    answer.peer = Some("confirmed".into());
                    Ok(answer)
                }
                Err(e) => Err(e),
            };
            let _ = p.reply.try_send(reply);
        }
    }

    /// Tells systemd the daemon is ready once every connection has a usable
    /// path (or the wait is over).
    fn notify_when_ready(&mut self, now: Instant) {
        let Some(r) = self.readiness else { return };
        let all_up = self.sessions.iter().all(|s| s.eligibility().active() != 0);
        if all_up {
            crate::io::notify::ready("tunnel up: every connection has a usable path");
        } else if now >= r.deadline {
            crate::io::notify::ready("running; waiting for peers on some connections");
        } else {
            return;
        }
        self.readiness = None;
    }

    fn on_datagram(&mut self, d: ControlDatagram, out: &mut [u8; OUT_LEN]) {
        if d.conn == crate::plane::HANDSHAKE_WAKE {
            // Only woke the loop; the handshakes are served after the
            // session queue.
            return;
        }
        if d.conn == crate::plane::SHARED_INITIATION {
            self.on_shared_initiation(d, d.port, out);
            return;
        }
        let Some(conn) = self.conns.get(d.conn).cloned() else {
            return;
        };
        if conn.client && conn.removed.load(Relaxed) {
            return;
        }
        if d.len == 0 {
            // A client's path heard from (see `Rx::notice_path`).
            if let (true, Some(from)) = (conn.client, d.from) {
                self.learn_path(d.conn, d.path, from, d.to, d.at);
            }
            return;
        }
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let Ok((mut header, payload)) = Header::parse(bytes) else {
            conn.drops.malformed.add(1);
            return;
        };
        if conn.client {
            if header.msg_type == MsgType::NoiseInitiation {
                // Read on the shared port inside a group of this client's
                // datagrams: the key decides the connection, as always.
                let port = self.setups.get(d.conn).map_or(0, |s| s.port);
                self.on_shared_initiation(d, port, out);
                return;
            }
            // Authenticated (the worker opened it; handshake messages are
            // not opened there, and teach nothing): a path of the client.
            let handshake = crate::plane::queue::handshake_kind(header.msg_type).is_some();
            if let (Some(from), false) = (d.from, handshake) {
                self.learn_path(d.conn, d.path, from, d.to, d.at);
            }
        }
        match header.msg_type {
            MsgType::HandshakeInit | MsgType::HandshakeResponse | MsgType::HandshakeChallenge => {
                self.on_handshake(&conn, d, &header, out);
                return;
            }
            MsgType::NoiseInitiation | MsgType::NoiseResponse | MsgType::NoiseCookieReply => {
                self.on_noise(&conn, d, &header, out);
                return;
            }
            MsgType::Data
            | MsgType::Probe
            | MsgType::ProbeReply
            | MsgType::Control
            | MsgType::Feedback
            | MsgType::Nack
            | MsgType::Repair => {}
        }
        let Some(session) = self.sessions.get_mut(d.conn) else {
            return;
        };
        if conn.crypto.as_ref().is_some_and(|c| c.noise) {
            // Addressed to one of our session indexes (the receive worker
            // checked which, and opened it): the session knows the
            // connection by its configured id.
            header.conn_id = session.conn_id();
        }
        match session.handle_datagram(d.path, &header, payload, d.at) {
            Ok(_) => {
                if let Some(p) = conn.paths().get(d.path) {
                    p.rx_packets.add(1);
                    p.rx_bytes.add(d.len as u64);
                }
            }
            Err(DropReason::Malformed(_)) => conn.drops.malformed.add(1),
            Err(DropReason::UnknownConnection(_)) => conn.drops.unknown_connection.add(1),
            Err(DropReason::Sealed) => conn.drops.auth.add(1),
            Err(DropReason::Unsupported(_)) => conn.drops.unsupported.add(1),
            // A path being drained after its removal: nothing to do.
            Err(DropReason::UnknownPath(_)) => {}
        }
        self.drain_events(d.conn, d.at);
    }

    /// Handles a session's events (state changes, control messages).
    fn drain_events(&mut self, ci: usize, now: Instant) {
        let Some(conn) = self.conns.get(ci).cloned() else {
            return;
        };
        while let Some(event) = self.sessions[ci].poll_event() {
            match event {
                Event::PathStateChanged { path, from, to } => {
                    if conn.client && to == mpt_proto::path::PathState::Down {
                        // A client's learnt path died (dead timer): it
                        // goes; the client's next datagram on it (from
                        // wherever) brings it back.
                        if let Some(d) =
                            pathset::remove(&conn, ci, &mut self.sessions[ci], path, now)
                        {
                            tracing::info!(conn = %conn.name, id = path, "client path silent: removed");
                            self.draining.push(d);
                        }
                    }
                    let table = conn.paths();
                    let name = table.get(path).map_or("?", |p| p.name.as_str());
                    if let Some(p) = table.get(path) {
                        p.state_changes.add(1);
                        // The server may have moved: look its name up now.
                        if let (Some(host), Some(names), mpt_proto::path::PathState::Down) =
                            (&p.remote_name, &mut self.names, to)
                        {
                            names.path_down(host, now);
                        }
                    }
                    tracing::info!(
                        conn = %conn.name,
                        path = name,
                        from = from.as_str(),
                        state = to.as_str(),
                        "path state changed"
                    );
                    self.hook_path_change(ci, &conn, path, from, to);
                }
                Event::PeerControl { via, msg } => self.on_peer_control(ci, via, msg, now),
                Event::ControlAnswered { msg, result } => {
                    self.on_control_answer(ci, msg, result, now)
                }
                Event::ControlGaveUp { msg } => {
                    tracing::warn!(conn = %conn.name, id = msg.path_id, "the peer never answered a path change");
                    self.answer_pending(ci, msg.id, Err("the peer never answered".into()));
                }
                Event::Handover(h) => {
                    let table = conn.paths();
                    let name = |i: usize| table.get(i).map_or("?".to_string(), |p| p.name.clone());
                    let (from, to) = (name(h.from), name(h.to));
                    tracing::info!(
                        conn = %conn.name,
                        from = %from,
                        to = %to,
                        gap_ms = h.gap.as_millis() as u64,
                        "traffic handed over"
                    );
                    conn.handovers.record(LastHandover {
                        from,
                        to,
                        gap: h.gap,
                        at: h.at,
                    });
                }
            }
        }
    }

    /// Feeds the data plane's receive summaries into the sessions.
    fn pull_summaries(&mut self) {
        for (session, conn) in self.sessions.iter_mut().zip(self.conns.iter()) {
            for p in conn.paths().iter() {
                // Data sent since the last look: the peer owes an answer.
                let sent_ns = p.tx_data_last_ns.load(Relaxed);
                if sent_ns != 0 {
                    session.on_data_sent(p.id, conn.epoch + Duration::from_nanos(sent_ns));
                }
                let packets = p.rx_summary_packets.swap(0, Relaxed);
                if packets > 0 {
                    let last_ns = p.rx_summary_last_ns.load(Relaxed);
                    let summary = DataSummary {
                        packets,
                        highest_path_seq: p.rx_summary_highest.load(Relaxed),
                        bytes: p.rx_summary_bytes.swap(0, Relaxed),
                        last_rx: conn.epoch + Duration::from_nanos(last_ns),
                        last_timestamp_us: p.rx_summary_timestamp.load(Relaxed),
                        owd_min_us: p.take_owd(),
                    };
                    // A draining path is no longer in the session.
                    let _draining = session.handle_data_summary(p.id, summary);
                }
            }
        }
    }

    /// One round, in a fixed order: receive summaries, session timers and
    /// events, then per connection its key exchange, the session's
    /// transmits, and what the workers and the status read (liveness,
    /// models, the receive timing plan, the paths' views).
    fn round(&mut self, now: Instant, buf: &mut [u8; OUT_LEN]) {
        self.pull_summaries();
        for ci in 0..self.sessions.len() {
            self.sessions[ci].handle_timeout(now);
            self.drain_events(ci, now);
        }
        for (ci, (session, conn)) in self.sessions.iter_mut().zip(self.conns.iter()).enumerate() {
            let table = conn.paths();
            let sealing = poll_keys(
                conn,
                session,
                self.keys.get_mut(ci),
                self.noise.as_mut(),
                &self.conns,
                now,
                buf,
            );
            transmit(conn, session, &table, &sealing, buf);
            publish_liveness(conn, session, &table, &mut self.models, now);
            publish_timing(conn, session, &table, now);
            publish_views(conn, session, &table, &self.models, now);
        }
    }
}
