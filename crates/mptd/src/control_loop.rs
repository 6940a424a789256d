//! The control loop: drives every connection's [`Session`] and key exchange.
//!
//! One thread owns all sessions, so protocol state needs no locks. It wakes
//! when a probe, reply or handshake message arrives from a receive worker,
//! when a session timer or a handshake retry is due, and at least every
//! [`TICK`] to pull the data plane's receive summaries (which keep busy
//! paths alive without a probe per packet). Each round runs in a fixed
//! order: input, summaries, handshakes, timers, transmits, events, publish
//! eligibility and status.
//!
//! It also applies operator commands ([`crate::command`]) and the peer's
//! control messages (a path added or removed on the other side), ends the
//! drain of removed paths, and tells systemd when the daemon is ready.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::crypto::{HandshakeError, INIT_LEN, TAG_LEN};
use mpt_proto::path::{AdminStatus, Liveness, PathParams};
use mpt_proto::session::timing::{
    owd_below, owd_bounds, share_idle, share_weight, smoothed_share, TimingInput,
};
use mpt_proto::wire::{
    ControlBody, ControlMsg, Flags, Header, MsgType, PathAdd, PathName, Refusal, HEADER_LEN,
};
use mpt_proto::{DataSummary, DropReason, Event, Session};
use serde_json::{json, Value};

use crate::command::{Outcome, Request, PEER_ANSWER_WAIT};
use crate::config::{Prefix, MAX_WEIGHT, MAX_WINDOW};
use crate::handshake::{ChallengeOutcome, InitOutcome, KeyExchange};
use crate::noise::{InitiationOutcome, NoiseConn, NoiseDaemon};
use crate::pathset::{self, AddError, ConnSetup, Draining, NewPath};
use crate::rx::ControlDatagram;
use crate::source::Source;
use crate::state::{ConnShared, LastHandover, PathShared, PathView};

/// Longest sleep of the loop: bounds how stale receive summaries and the
/// published status get (and adds at most this to dead-path detection of a
/// path whose traffic the data plane saw last).
pub const TICK: Duration = Duration::from_millis(20);

/// Control datagrams handled per round before timers run: a flood of
/// probes cannot starve the timers.
const MAX_INPUT_PER_ROUND: usize = 256;

/// Room for any datagram the control loop builds (handshake messages are
/// the largest: a Noise initiation is 168 bytes), with the AEAD tag.
const OUT_LEN: usize = 192;

/// Longest wait for the paths before readiness is reported anyway (a peer
/// that is down must not make the service fail to start).
const READY_WAIT: Duration = Duration::from_secs(10);

/// The control loop.
pub struct ControlLoop {
    /// Connections, by index.
    pub conns: Arc<Vec<Arc<ConnShared>>>,
    /// Their sessions, same order.
    pub sessions: Vec<Session>,
    /// Their key exchanges (for connections with a key), same order.
    pub exchanges: Vec<Option<KeyExchange>>,
    /// The public-key handshake's responder (with `[daemon]
    /// private_key_file`).
    pub noise: Option<NoiseDaemon>,
    /// Per connection with a `public_key`: its public-key handshake (such
    /// connections have no entry in `exchanges`).
    pub noise_conns: Vec<Option<NoiseConn>>,
    /// Probes, replies and handshake messages from the receive workers.
    pub input: Receiver<ControlDatagram>,
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
    pub links: Option<crate::links::Links>,
    /// The shared ports (client connections): per port, a sending handle
    /// on its IPv4 and IPv6 socket (see `crate::shared`).
    pub shared_ports: Vec<SharedPort>,
    /// Where the workers and the status read the connections from
    /// (replaced when a reload adds or removes a client connection).
    pub conn_set: Arc<crate::state::ConnSet>,
    /// The shared ports' session index map (new client connections are
    /// registered in it).
    pub session_map: Arc<crate::shared::SessionMap>,
    /// The transmit workers' wake-up events (for new connections).
    pub tx_wakes: crate::state::TxWakes,
    /// The tun interface (routes of new client connections).
    pub tun_name: String,
}

/// A shared port as the control loop sends through it: answers to
/// initiations before a path exists, and the sockets of learnt paths.
#[derive(Debug)]
pub struct SharedPort {
    /// The port.
    pub port: u16,
    /// A handle on the IPv4 socket.
    pub v4: Option<crate::udp::PathSocket>,
    /// A handle on the IPv6 socket.
    pub v6: Option<crate::udp::PathSocket>,
}

impl SharedPort {
    /// The socket of `port` for datagrams to `to`'s family.
    fn socket(ports: &[SharedPort], port: u16, to: SocketAddr) -> Option<&crate::udp::PathSocket> {
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
    answer: Value,
    reply: SyncSender<Result<Value, String>>,
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
                answer["peer"] = json!("no answer yet (still trying)");
                let _ = p.reply.try_send(Ok(answer));
            } else {
                i += 1;
            }
        }
    }

    fn answer_pending(&mut self, conn: usize, msg_id: u64, result: Result<(), String>) {
        if let Some(i) = self
            .pending
            .iter()
            .position(|p| p.conn == conn && p.msg_id == msg_id)
        {
            let p = self.pending.swap_remove(i);
            let reply = match result {
                Ok(()) => {
                    let mut answer = p.answer;
                    answer["peer"] = json!("confirmed");
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
            crate::notify::ready("tunnel up: every connection has a usable path");
        } else if now >= r.deadline {
            crate::notify::ready("running; waiting for peers on some connections");
        } else {
            return;
        }
        self.readiness = None;
    }

    /// Acts on a control message from the peer and answers it.
    fn on_peer_control(&mut self, ci: usize, via: usize, msg: ControlMsg, now: Instant) {
        let id = usize::from(msg.path_id);
        let result = match msg.body {
            ControlBody::PathAdd(add) => self.peer_add(ci, id, &add, now),
            ControlBody::PathRemove { name } => self.peer_remove(ci, id, name, now),
            ControlBody::Ack(_) => return,
        };
        if let Err(r) = result {
            tracing::warn!(conn = %self.conns[ci].name, id, refusal = r.as_str(), "refused the peer's path change");
        }
        self.sessions[ci].answer_control(via, &msg, result, now);
    }

    fn peer_add(
        &mut self,
        ci: usize,
        id: usize,
        add: &PathAdd,
        now: Instant,
    ) -> Result<(), Refusal> {
        let conn = self.conns[ci].clone();
        if !add.name.is_plain() {
            tracing::debug!(conn = %conn.name, id, name = %add.name, "refused a peer path: name is not printable ASCII");
            return Err(Refusal::Refused);
        }
        let table = conn.paths();
        if let Some(p) = table.get(id) {
            if p.is_removed() {
                // Still draining from an earlier removal: end that now.
                self.draining.retain(|d| !(d.conn == ci && d.id == id));
                pathset::finish(&conn, id);
            } else if p.name == add.name.as_str() {
                // Both sides added it (e.g. both configs were reloaded).
                return Ok(());
            } else {
                return Err(Refusal::IdInUse);
            }
        }
        // The old table may hold a draining socket on the address to bind.
        drop(table);
        if conn.paths().find_live(add.name.as_str()).is_some() {
            return Err(Refusal::NameInUse);
        }
        let setup = self.setups[ci];
        let params = PathParams {
            keepalive: setup.keepalive,
            dead_timer: setup.dead_timer,
            weight_out: u32::from(add.weight_in).clamp(1, MAX_WEIGHT),
            weight_in: u16::try_from(add.weight_out).unwrap_or(u16::MAX).max(1),
            window: add.window.clamp(1, MAX_WINDOW),
            admin: if add.backup {
                AdminStatus::Backup
            } else {
                AdminStatus::Up
            },
        };
        // Our end: where the peer sends to, if it said and we have that
        // address; else the source our routing picks towards the peer.
        // Always on the connection's port, and only on an address the
        // config lets the peer use: the peer chooses paths, not sockets.
        let mut candidates: Vec<SocketAddr> = add
            .sender_remote
            .map(|a| SocketAddr::new(a.ip(), setup.port))
            .into_iter()
            .collect();
        if let Ok(ip) = pathset::source_towards(add.sender_local) {
            candidates.push(SocketAddr::new(ip, setup.port));
        }
        let allowed = &self.peer_locals[ci];
        candidates.retain(|c| peer_may_bind(c.ip(), allowed));
        if candidates.is_empty() {
            tracing::debug!(conn = %conn.name, path = %add.name, wanted = ?add.sender_remote, "refused a peer path: no local address it may use (see allow_peer_paths)");
            return Err(Refusal::Refused);
        }
        let mut last = Refusal::CannotBind;
        for local in candidates {
            let new = NewPath {
                name: add.name.as_str().to_string(),
                local,
                remote: Some(add.sender_local),
                remote_fixed: false,
                interface: None,
                follow: false,
                from_config: false,
                params,
            };
            match pathset::add(&conn, &mut self.sessions[ci], id, new, now) {
                Ok(p) => {
                    tracing::info!(conn = %conn.name, path = %p.name, id, local = %p.local, remote = %add.sender_local, "path added by the peer");
                    return Ok(());
                }
                Err(AddError::Bind { local, source, .. }) => {
                    tracing::debug!(conn = %conn.name, path = %add.name, local = %local, error = %source, "cannot bind for the peer's path");
                    last = Refusal::CannotBind;
                }
                Err(AddError::NameInUse { .. }) => return Err(Refusal::NameInUse),
                Err(AddError::IdInUse(_)) => return Err(Refusal::IdInUse),
                Err(AddError::NoRoom) => return Err(Refusal::TooManyPaths),
            }
        }
        Err(last)
    }

    fn peer_remove(
        &mut self,
        ci: usize,
        id: usize,
        name: PathName,
        now: Instant,
    ) -> Result<(), Refusal> {
        let conn = self.conns[ci].clone();
        let table = conn.paths();
        let Some(p) = table.get(id) else {
            // Already gone: the answer to a repeat, or both sides removed it.
            return Ok(());
        };
        if p.name != name.as_str() {
            return Err(Refusal::UnknownPath);
        }
        if p.is_removed() {
            return Ok(());
        }
        // The peer may move the connection to other paths, not cut it off:
        // it keeps one path it can come back on.
        let others = table
            .iter()
            .filter(|q| q.id != id && !q.is_removed())
            .count();
        if others == 0 {
            tracing::debug!(conn = %conn.name, path = %name, id, "refused to remove the last path at the peer's request");
            return Err(Refusal::Refused);
        }
        drop(table);
        if let Some(d) = pathset::remove(&conn, ci, &mut self.sessions[ci], id, now) {
            self.draining.push(d);
        }
        tracing::info!(conn = %conn.name, path = %name, id, "path removed by the peer");
        Ok(())
    }

    /// The peer answered one of our control messages.
    fn on_control_answer(
        &mut self,
        ci: usize,
        msg: ControlMsg,
        result: Result<(), Refusal>,
        now: Instant,
    ) {
        let conn = self.conns[ci].clone();
        let id = usize::from(msg.path_id);
        match (msg.body, result) {
            (_, Ok(())) => {
                tracing::info!(conn = %conn.name, id, "peer confirmed the path change");
                self.answer_pending(ci, msg.id, Ok(()));
            }
            (ControlBody::PathAdd(add), Err(r)) => {
                // A path the peer will not serve is useless: take it out.
                let ours = conn
                    .paths()
                    .get(id)
                    .is_some_and(|p| p.name == add.name.as_str() && !p.is_removed());
                if ours {
                    if let Some(d) = pathset::remove(&conn, ci, &mut self.sessions[ci], id, now) {
                        self.draining.push(d);
                    }
                }
                tracing::error!(conn = %conn.name, path = %add.name, refusal = r.as_str(), "the peer refused the new path; removed it again");
                self.answer_pending(
                    ci,
                    msg.id,
                    Err(format!(
                        "the peer refused path {}: {}; nothing changed",
                        add.name,
                        r.as_str()
                    )),
                );
            }
            (_, Err(r)) => {
                tracing::warn!(conn = %conn.name, id, refusal = r.as_str(), "the peer refused the path change");
                self.answer_pending(
                    ci,
                    msg.id,
                    Err(format!(
                        "the path was removed here, but the peer answered: {}",
                        r.as_str()
                    )),
                );
            }
        }
    }

    fn on_datagram(&mut self, d: ControlDatagram, out: &mut [u8; OUT_LEN]) {
        if d.conn == crate::rx::SHARED_INITIATION {
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
            let handshake = crate::demux::handshake_kind(header.msg_type).is_some();
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
                    }
                    tracing::info!(
                        conn = %conn.name,
                        path = name,
                        from = from.as_str(),
                        state = to.as_str(),
                        "path state changed"
                    );
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

    /// A handshake message (not sealed; authenticated by its own MAC).
    /// Refusals are counted and logged at trace level only: anyone can send
    /// them at will. "Session keys established" is logged once per
    /// handshake, when the new keys are confirmed.
    fn on_handshake(
        &mut self,
        conn: &ConnShared,
        d: ControlDatagram,
        header: &Header,
        out: &mut [u8; OUT_LEN],
    ) {
        let table = conn.paths();
        let (Some(Some(exchange)), Some(crypto), Some(path)) = (
            self.exchanges.get_mut(d.conn),
            conn.crypto.as_ref(),
            table.get(d.path),
        ) else {
            conn.drops.unsupported.add(1);
            return;
        };
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let refused = |e: HandshakeError| {
            match e {
                HandshakeError::Auth => conn.drops.auth.add(1),
                HandshakeError::UnexpectedResponse | HandshakeError::BadCookie => {
                    conn.drops.auth.add(1)
                }
                HandshakeError::Reflected => conn.drops.handshake_reflected.add(1),
                HandshakeError::WrongConnection { .. } => conn.drops.unknown_connection.add(1),
                _ => conn.drops.malformed.add(1),
            }
            tracing::trace!(conn = %conn.name, path = %path.name, msg = ?header.msg_type, error = %e, "handshake message refused");
        };
        let limited = || {
            conn.drops.handshake_rate_limited.add(1);
            tracing::trace!(conn = %conn.name, path = %path.name, msg = ?header.msg_type, "handshake message over the rate limit");
        };
        // Answers go back where the message came from.
        let to = d.from.or_else(|| path.remote().map(|(a, _)| a));
        match header.msg_type {
            MsgType::HandshakeInit => {
                let reply_header = next_header(conn, path, d.at);
                match exchange.on_init(bytes, d.from, d.at, &reply_header, &mut out[..INIT_LEN]) {
                    InitOutcome::Respond { keys, len } => {
                        // Pending until the peer seals something with them;
                        // the remote is learnt from that datagram too.
                        crypto.set_pending(*keys, d.at);
                        exchange.settle(d.at + settle_time(&self.sessions[d.conn]));
                        tracing::debug!(conn = %conn.name, path = %path.name, "answered a handshake init; keys pending");
                        if let Some(to) = to {
                            send(conn, path, &out[..len], to);
                        }
                    }
                    InitOutcome::Challenge { len } => {
                        conn.drops.handshake_challenged.add(1);
                        tracing::trace!(conn = %conn.name, path = %path.name, "handshake init not provably fresh; challenged");
                        if let Some(to) = to {
                            send(conn, path, &out[..len], to);
                        }
                    }
                    InitOutcome::OursWins => {}
                    InitOutcome::RateLimited => limited(),
                    InitOutcome::Refused(e) => refused(e),
                }
            }
            MsgType::HandshakeChallenge => {
                let init_header = next_header(conn, path, d.at);
                match exchange.on_challenge(bytes, d.from, d.at, &init_header, &mut out[..INIT_LEN])
                {
                    ChallengeOutcome::Retry { len } => {
                        tracing::debug!(conn = %conn.name, path = %path.name, "challenged; sending handshake init with the cookie");
                        if let Some(to) = to {
                            send(conn, path, &out[..len], to);
                        }
                    }
                    ChallengeOutcome::RateLimited => limited(),
                    ChallengeOutcome::Refused(e) => refused(e),
                }
            }
            _ => match exchange.on_response(bytes) {
                Ok(keys) => {
                    // The Response proves the peer derived the keys: switch,
                    // and probe at once so it confirms them without waiting
                    // for a keepalive.
                    crypto.switch(keys, d.at);
                    if let Some(from) = d.from {
                        if path.learn_remote(from, d.to) {
                            tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address from handshake");
                        }
                    }
                    tracing::info!(conn = %conn.name, path = %path.name, "session keys established");
                    exchange.settle(d.at + settle_time(&self.sessions[d.conn]));
                    self.sessions[d.conn].probe_now(d.path, d.at);
                }
                Err(e) => refused(e),
            },
        }
    }

    /// A public-key handshake message (not sealed; authenticated by its
    /// MACs and the Noise layer). Refusals are counted (by the protocol
    /// module, by reason) and logged at trace level only: anyone can send
    /// them at will.
    fn on_noise(
        &mut self,
        conn: &ConnShared,
        d: ControlDatagram,
        header: &Header,
        out: &mut [u8; OUT_LEN],
    ) {
        let table = conn.paths();
        let (Some(crypto), Some(path), Some(Some(nc)), Some(nd)) = (
            conn.crypto.as_ref().filter(|c| c.noise),
            table.get(d.path),
            self.noise_conns.get_mut(d.conn),
            self.noise.as_mut(),
        ) else {
            conn.drops.unsupported.add(1);
            return;
        };
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let refused = |e: &dyn std::fmt::Display| {
            tracing::trace!(conn = %conn.name, path = %path.name, msg = ?header.msg_type, error = %e, "handshake message refused");
        };
        match header.msg_type {
            MsgType::NoiseInitiation => {
                // Answers go back where the initiation came from.
                let Some(src) = d.from else { return };
                let conns = &self.conns;
                let Some(local) =
                    mpt_proto::noise::random_index(&mut nd.rng, |i| index_in_use(conns, i))
                else {
                    return;
                };
                let template = noise_header(conn, path, d.at);
                match nd.on_initiation(bytes, src, local, d.at, template, &mut out[..]) {
                    InitiationOutcome::Cookie { len } => {
                        nc.stats.cookies_sent += 1;
                        tracing::trace!(conn = %conn.name, path = %path.name, from = %src, "under load: answered an initiation with a cookie");
                        send(conn, path, &out[..len], src);
                    }
                    InitiationOutcome::Respond {
                        len,
                        conn: peer,
                        established,
                    } => {
                        if peer != d.conn {
                            nd.stats.refusals.wrong_connection.add(1);
                            refused(&"the initiator's key names another connection");
                            return;
                        }
                        if !nc.take_their_initiation(crypto, d.at) {
                            nd.stats.refusals.lost_race.add(1);
                            tracing::debug!(conn = %conn.name, path = %path.name, "both sides initiated; ours wins, theirs ignored");
                            return;
                        }
                        nc.responded(crypto, *established, conn.seq.load(Relaxed), d.at);
                        tracing::debug!(conn = %conn.name, path = %path.name, "answered a handshake initiation; keys pending");
                        send(conn, path, &out[..len], src);
                    }
                    InitiationOutcome::Refused(e) => {
                        if e == mpt_proto::noise::NoiseError::Decrypt && crypto.keys().is_none() {
                            crate::auth_warning::failed(
                                Some(&conn.name),
                                Some(src),
                                "Noise initiation that does not decrypt",
                                d.at,
                            );
                        }
                        refused(&e)
                    }
                }
            }
            MsgType::NoiseResponse => {
                match nc.on_response(crypto, bytes, conn.seq.load(Relaxed), d.at) {
                    Ok(_) => {
                        if let Some(from) = d.from {
                            if path.learn_remote(from, d.to) {
                                tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address from handshake");
                            }
                        }
                        tracing::info!(conn = %conn.name, path = %path.name, "session keys established");
                        // The peer confirms the keys with our first
                        // datagram under them: send one now.
                        if let Some(session) = self.sessions.get_mut(d.conn) {
                            session.probe_now(d.path, d.at);
                        }
                    }
                    Err(e) => refused(&e),
                }
            }
            _ => match nc.on_cookie_reply(bytes, d.at) {
                Ok(()) => {
                    tracing::debug!(conn = %conn.name, path = %path.name, "the peer is under load: got a cookie for the next initiation");
                }
                Err(e) => refused(&e),
            },
        }
        nd.publish();
        nc.publish(crypto);
    }

    /// Adds client connection `c` (a reload): its state, session, key
    /// and routes, then publishes the new set to the workers. Nothing
    /// else changes.
    pub fn add_client(&mut self, c: &crate::config::ConnectionConfig) -> Result<(), String> {
        use crate::noise::NoiseTiming;
        use mpt_proto::crypto::Psk;
        let Some(peer) = c.public_key else {
            return Err("a client connection needs a public_key".into());
        };
        if !self.shared_ports.iter().any(|p| p.port == c.port) {
            return Err(format!(
                "port {} is no shared port yet (restart to open it)",
                c.port
            ));
        }
        let Some(nd) = self.noise.as_mut() else {
            return Err("the daemon started without a private key in use (restart)".into());
        };
        let psk = match &c.key_file {
            Some(file) => Some(
                Psk::from_bytes(crate::keys::load(file).map_err(|e| format!("{e:#}"))?)
                    .with_cipher(self.config.daemon.cipher),
            ),
            None => None,
        };
        let now = Instant::now();
        let ci = self.conns.len();
        let timing = NoiseTiming::new(c.keepalive, c.rekey_after);
        let crypto = crate::state::ConnCrypto::new_noise(
            psk.clone()
                .unwrap_or_else(|| Psk::from_bytes([0; 32]).with_cipher(self.config.daemon.cipher)),
            timing.grace,
            crate::state::OLD_KEYS_MAX,
        );
        let mut session = Session::new(
            mpt_proto::SessionConfig {
                conn_id: c.id,
                paths: Vec::new(),
                first_control_id: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_micros() as u64),
            },
            now,
        )
        .map_err(|e| e.to_string())?;
        session.set_loss_repair(c.repair);
        let waker = crate::udp::Waker::new().map_err(|e| format!("wake-up event: {e}"))?;
        let mut conn = ConnShared::new(
            ci,
            c.name.clone(),
            c.id,
            now,
            crate::state::PathTable::new(Vec::new()),
            Some(crypto),
            crate::route::SourceFilter::for_connection(c),
            mpt_proto::reorder::Resequencer::new(
                crate::daemon::REORDER_SLOTS,
                usize::from(self.config.tunnel.mtu),
                crate::daemon::DEFAULT_REORDER_TIMEOUT,
            ),
            crate::daemon::DEFAULT_REORDER_TIMEOUT,
            waker,
            self.tx_wakes.clone(),
        );
        conn.client = true;
        conn.adaptive.store(
            c.scheduler == crate::config::SchedulerKind::Adaptive,
            Relaxed,
        );
        conn.repair.store(c.repair, Relaxed);
        conn.redundancy.store(
            match c.redundancy {
                mpt_proto::sched::Redundancy::Auto => 0,
                mpt_proto::sched::Redundancy::Off => 1,
                mpt_proto::sched::Redundancy::All => 2,
            },
            Relaxed,
        );
        let conn = Arc::new(conn);
        if let Some(crypto) = &conn.crypto {
            crypto.register(self.session_map.clone(), Arc::downgrade(&conn));
        }
        for net in &c.networks {
            if let Err(e) = crate::daemon::add_route(net, &self.tun_name) {
                tracing::warn!(conn = %c.name, route = %net, error = %e, "cannot route a new client's network");
            }
        }
        nd.add_peer(peer, ci, psk.clone());
        self.noise_conns.push(Some(NoiseConn::new(
            nd.identity().clone(),
            peer,
            psk,
            NoiseTiming::new(c.keepalive, c.rekey_after).with_settle(c.dead_timer),
        )));
        self.sessions.push(session);
        self.exchanges.push(None);
        self.setups.push(ConnSetup {
            port: c.port,
            remote_port: c.remote_port,
            keepalive: c.keepalive,
            dead_timer: c.dead_timer,
        });
        self.peer_locals.push(c.peer_locals());
        let mut list = (*self.conns).clone();
        list.push(conn);
        self.conns = Arc::new(list);
        self.config.connections.push(c.clone());
        self.publish_conns();
        tracing::info!(conn = %c.name, index = ci, port = c.port, "client connection added");
        Ok(())
    }

    /// Removes client connection `ci` (a reload): from now on its
    /// datagrams are refused (its keys and session indexes are gone), its
    /// initiations too (its key is unknown), nothing is routed to it and
    /// it has no path. Its slot stays (indexes never move), empty.
    pub fn remove_client(&mut self, ci: usize) {
        let Some(conn) = self.conns.get(ci).cloned() else {
            return;
        };
        conn.removed.store(true, Relaxed);
        if let Some(crypto) = &conn.crypto {
            crypto.drop_all();
        }
        let name = conn.name.clone();
        if let Some(c) = self.config.connections.iter().find(|c| c.name == name) {
            if let (Some(nd), Some(key)) = (self.noise.as_mut(), c.public_key) {
                nd.remove_peer(&key);
            }
            for net in &c.networks {
                if let Err(e) = crate::daemon::del_route(net, &self.tun_name) {
                    tracing::debug!(conn = %name, route = %net, error = %e, "removing a client's route");
                }
            }
        }
        if let Some(session) = self.sessions.get_mut(ci) {
            for p in conn.paths().iter() {
                let _ = session.remove_path(p.id);
                p.mark_removed();
            }
        }
        conn.set_paths(crate::state::PathTable::new(Vec::new()));
        self.draining.retain(|d| d.conn != ci);
        if let Some(nc) = self.noise_conns.get_mut(ci) {
            *nc = None;
        }
        self.config.connections.retain(|c| c.name != name);
        self.publish_conns();
        tracing::info!(conn = %name, "client connection removed");
    }

    /// Publishes the connections and a router over those not removed.
    fn publish_conns(&self) {
        let by_name: std::collections::HashMap<&str, &crate::config::ConnectionConfig> = self
            .config
            .connections
            .iter()
            .map(|c| (c.name.as_str(), c))
            .collect();
        let mut router = crate::route::Router::default();
        for (ci, conn) in self.conns.iter().enumerate() {
            if conn.removed.load(Relaxed) {
                continue;
            }
            if let Some(c) = by_name.get(conn.name.as_str()) {
                router.add_connection(c, ci);
            }
        }
        self.conn_set.publish(self.conns.clone(), Arc::new(router));
    }

    /// A client connection's path `id` was heard from `from` (after
    /// authentication): adds it if the connection has no such path (or
    /// only a draining one), moves it to the other family's socket if
    /// the client changed family. A known path's new source is learnt by
    /// the receive worker (roaming).
    fn learn_path(
        &mut self,
        ci: usize,
        id: usize,
        from: SocketAddr,
        to: Option<Source>,
        now: Instant,
    ) {
        let Some(conn) = self.conns.get(ci).cloned() else {
            return;
        };
        if !conn.client || id >= mpt_proto::sched::MAX_PATHS {
            return;
        }
        let Some(setup) = self.setups.get(ci).copied() else {
            return;
        };
        let table = conn.paths();
        if let Some(p) = table.get(id) {
            if !p.is_removed() && p.local.is_ipv4() == from.is_ipv4() {
                return;
            }
            // Draining after it died, or on the other family: start over.
            let was_live = !p.is_removed();
            drop(table);
            if was_live {
                let _ = pathset::remove(&conn, ci, &mut self.sessions[ci], id, now);
            }
            self.draining.retain(|d| !(d.conn == ci && d.id == id));
            pathset::finish(&conn, id);
        } else {
            drop(table);
        }
        let Some(socket) = SharedPort::socket(&self.shared_ports, setup.port, from) else {
            return;
        };
        let socket = match socket.try_clone() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(conn = %conn.name, error = %e, "cannot use the shared socket for a new path");
                return;
            }
        };
        let new = NewPath {
            name: format!("path{id}"),
            local: socket.local_addr(),
            remote: Some(from),
            remote_fixed: false,
            interface: None,
            follow: false,
            from_config: false,
            params: PathParams {
                keepalive: setup.keepalive,
                dead_timer: setup.dead_timer,
                // A path's defaults in the config (its client weighs its
                // paths; feedback and the adaptive scheduler do the rest).
                weight_out: 1,
                weight_in: 1,
                window: 1,
                admin: AdminStatus::Up,
            },
        };
        match pathset::add_socket(&conn, &mut self.sessions[ci], id, new, socket, now) {
            Ok(p) => {
                // Replies leave from the address the client sends to.
                p.learn_remote(from, to);
                tracing::info!(conn = %conn.name, path = %p.name, id, remote = %from, local = %to.map_or_else(|| "(routing's choice)".to_string(), |t| t.addr.to_string()), "learnt a path of the client");
            }
            Err(e) => {
                tracing::debug!(conn = %conn.name, id, error = %e, "cannot add the client's path");
            }
        }
    }

    /// A Noise initiation on shared port `port`: the responder finds the
    /// connection from the initiator's static key; it must be a client
    /// connection of that port. The answer goes back from the port's
    /// socket, and the path it came on becomes a path of the connection.
    fn on_shared_initiation(&mut self, d: ControlDatagram, port: u16, out: &mut [u8; OUT_LEN]) {
        let (Some(src), Some(nd)) = (d.from, self.noise.as_mut()) else {
            return;
        };
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let conns = &self.conns;
        let Some(local) = mpt_proto::noise::random_index(&mut nd.rng, |i| index_in_use(conns, i))
        else {
            return;
        };
        let template = Header {
            msg_type: MsgType::NoiseInitiation,
            flags: Flags::NONE,
            path_id: d.path as u16,
            conn_id: 0,
            seq: 0,
            path_seq: 0,
            timestamp_us: 0,
        };
        let Some(socket) = SharedPort::socket(&self.shared_ports, port, src) else {
            return;
        };
        match nd.on_initiation(bytes, src, local, d.at, template, &mut out[..]) {
            InitiationOutcome::Cookie { len } => {
                tracing::trace!(from = %src, port, "under load: answered an initiation with a cookie");
                let _ = socket.send_from(&out[..len], src, d.to.as_ref());
            }
            InitiationOutcome::Respond {
                len,
                conn: ci,
                established,
            } => {
                let client = self.conns.get(ci).cloned();
                let port_ok = self.setups.get(ci).is_some_and(|s| s.port == port);
                let (Some(conn), true) = (client.filter(|c| c.client), port_ok) else {
                    nd.stats.refusals.wrong_connection.add(1);
                    tracing::debug!(from = %src, port, "refused an initiation on the shared port: the key is no client connection of this port");
                    return;
                };
                if conn.removed.load(Relaxed) {
                    nd.stats.refusals.wrong_connection.add(1);
                    return;
                }
                let (Some(crypto), Some(Some(nc))) =
                    (conn.crypto.as_ref(), self.noise_conns.get_mut(ci))
                else {
                    return;
                };
                if !nc.take_their_initiation(crypto, d.at) {
                    nd.stats.refusals.lost_race.add(1);
                    return;
                }
                nc.responded(crypto, *established, conn.seq.load(Relaxed), d.at);
                nc.publish(crypto);
                nd.publish();
                tracing::debug!(conn = %conn.name, from = %src, "answered a client's handshake initiation; keys pending");
                match socket.send_from(&out[..len], src, d.to.as_ref()) {
                    Ok(_) => {}
                    Err(e) => {
                        conn.drops.send_error.add(1);
                        tracing::trace!(conn = %conn.name, error = %e, "response send failed");
                    }
                }
                self.learn_path(ci, d.path, src, d.to, d.at);
            }
            InitiationOutcome::Refused(e) => {
                if e == mpt_proto::noise::NoiseError::Decrypt {
                    crate::auth_warning::failed(
                        None,
                        Some(src),
                        "Noise initiation on the shared port that does not decrypt",
                        d.at,
                    );
                }
                tracing::trace!(from = %src, port, error = %e, "initiation refused on the shared port");
            }
        }
        if let Some(nd) = self.noise.as_ref() {
            nd.publish();
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

    fn round(&mut self, now: Instant, buf: &mut [u8; OUT_LEN]) {
        self.pull_summaries();
        for ci in 0..self.sessions.len() {
            self.sessions[ci].handle_timeout(now);
            self.drain_events(ci, now);
        }
        for (ci, (session, conn)) in self.sessions.iter_mut().zip(self.conns.iter()).enumerate() {
            let table = conn.paths();
            let keys = match (&conn.crypto, self.exchanges.get_mut(ci)) {
                (Some(crypto), Some(Some(exchange))) => {
                    crypto.expire(now);
                    let keys = crypto.keys();
                    let all_down = session.paths().all(|(_, p)| p.liveness() == Liveness::Down);
                    if let Some(attempt) = exchange.poll_initiate(keys.is_none() || all_down, now) {
                        initiate(conn, exchange, attempt, now, buf);
                    }
                    Some(keys.map(|k| (k, conn.conn_id)))
                }
                (Some(crypto), _) => {
                    if let (Some(Some(nc)), Some(nd)) =
                        (self.noise_conns.get_mut(ci), self.noise.as_mut())
                    {
                        let all_down = session.paths().all(|(_, p)| p.liveness() == Liveness::Down);
                        let seq = conn.seq.load(Relaxed);
                        let no_session = conn.drops.no_session.get();
                        if nc.poll(crypto, seq, no_session, all_down, now) {
                            let conns = &self.conns;
                            noise_initiate(conn, nc, nd, |i| index_in_use(conns, i), now, buf);
                        }
                        nc.publish(crypto);
                    }
                    Some(crypto.sealing(conn.conn_id))
                }
                _ => None,
            };
            while let Some(t) = session.poll_transmit() {
                let Some(path) = table.get(t.path) else {
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
                    Some(Some((k, conn_id))) => {
                        // The peer's session index on a public-key
                        // connection (else the connection id again).
                        buf[4..8].copy_from_slice(&conn_id.to_be_bytes());
                        buf[1] |= Flags::SEALED.bits();
                        match k.seal_datagram(&mut buf[..len + TAG_LEN], len - HEADER_LEN) {
                            Ok(n) => len = n,
                            Err(_) => continue,
                        }
                    }
                }
                send(conn, path, &buf[..len], remote);
            }
            conn.eligible.store(session.eligibility().active(), Relaxed);
            let silent = session
                .paths()
                .filter(|(id, p)| {
                    *id < 64 && matches!(p.liveness(), Liveness::Suspect | Liveness::Down)
                })
                .fold(0u64, |m, (id, _)| m | (1 << id));
            conn.silent_paths.store(silent, Relaxed);
            session.path_models(now, &mut self.models);
            for (id, (model, phase)) in self.models.iter().enumerate() {
                if let Some(shared) = table.get(id) {
                    shared.model.publish(*model, *phase);
                }
            }
            // The receiver's waits and holds (see `mpt_proto::session::timing`).
            let mut timing = TimingInput::default();
            for (id, _) in session.paths() {
                if let (Some(p), Some(share)) = (table.get(id), timing.rx_share.get_mut(id)) {
                    *share = match p.view.lock() {
                        Ok(g) => g.rx_share,
                        Err(poisoned) => poisoned.into_inner().rx_share,
                    };
                }
            }
            timing.last_repair_request = {
                let requested = conn.repairs.requested_datagrams.get();
                let mut seen = match conn.random_loss_seen.lock() {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
                if requested > seen.0 {
                    *seen = (requested, Some(now));
                }
                seen.1
            };
            let plan = session.timing_plan(now, &timing);
            conn.reseq_timeout_us
                .store(plan.reorder_timeout.as_micros() as u64, Relaxed);
            conn.publish_path_waits(&plan.path_waits);
            conn.rx_spread_us.store(
                plan.rx_delay_spread
                    .map_or(u64::MAX, |d| d.as_micros() as u64),
                Relaxed,
            );
            let equalize = plan.equalize;
            conn.equalize_owd_us.store(
                equalize.map_or(0, |t| (1 << 32) | u64::from(t.owd_us)),
                Relaxed,
            );
            conn.equalize_spread_us
                .store(equalize.map_or(0, |t| u64::from(t.spread_us)), Relaxed);
            let bulk = plan.equalize_bulk;
            conn.equalize_bulk_owd_us
                .store(bulk.map_or(0, |t| (1 << 32) | u64::from(t.owd_us)), Relaxed);
            conn.equalize_bulk_spread_us
                .store(bulk.map_or(0, |t| u64::from(t.spread_us)), Relaxed);
            // Each path's share of the data sent since the last round.
            let mut sent = [0u64; mpt_proto::sched::MAX_PATHS];
            for (id, _) in session.paths() {
                if let Some(shared) = table.get(id) {
                    let before = match shared.view.lock() {
                        Ok(g) => g.share_tx_bytes,
                        Err(poisoned) => poisoned.into_inner().share_tx_bytes,
                    };
                    sent[id] = shared.tx_data_bytes.get().saturating_sub(before);
                }
            }
            let total: u64 = sent.iter().sum();
            // The same for what arrived.
            let mut got = [0u64; mpt_proto::sched::MAX_PATHS];
            for (id, _) in session.paths() {
                if let Some(shared) = table.get(id) {
                    let before = match shared.view.lock() {
                        Ok(g) => g.share_rx_bytes,
                        Err(poisoned) => poisoned.into_inner().share_rx_bytes,
                    };
                    got[id] = shared.rx_data_bytes.get().saturating_sub(before);
                }
            }
            let got_total: u64 = got.iter().sum();
            let standing = |p: &mpt_proto::path::Path| p.rx_owd_standing(now).map(|(o, _)| o);
            let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
            let rx_owd_lo =
                owd_bounds(session.paths().filter_map(|(_, p)| standing(p))).map(|(lo, _, _)| lo);
            for (id, p) in session.paths() {
                let Some(shared) = table.get(id) else {
                    continue;
                };
                let (model, _) = self.models.get(id).copied().unwrap_or_default();
                let (old, old_rx, share_at) = {
                    let g = match shared.view.lock() {
                        Ok(g) => g,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    (
                        (g.share, g.share_tx_bytes),
                        (g.rx_share, g.share_rx_bytes),
                        g.share_at,
                    )
                };
                // Smoothed over time: the weight of this round's sample
                // grows with the time it covers.
                let alpha = share_weight(share_at, now);
                let (rx_share, share_rx_bytes) = if got_total > 0 {
                    (
                        smoothed_share(old_rx.0, got[id], got_total, alpha),
                        old_rx.1 + got[id],
                    )
                } else {
                    old_rx
                };
                // A path that brought no data lately carries nothing,
                // whatever its share was when data last came.
                let last_data_ns = shared.rx_summary_last_ns.load(Relaxed);
                let rx_share = if share_idle(last_data_ns, conn_ns) {
                    0.0
                } else {
                    rx_share
                };
                let (share, share_tx_bytes) = if total > 0 {
                    (
                        smoothed_share(old.0, sent[id], total, alpha),
                        old.1 + sent[id],
                    )
                } else {
                    old
                };
                let d = p.delivery();
                let view = PathView {
                    rate_bps: d.rate_bps(),
                    rate_confirmed: d.confirmed(),
                    owd_ms: (d.owd_min_us().is_some() || p.rtt().min().is_some())
                        .then(|| model.owd_ns as f64 / 1e6),
                    queue_ms: d.queueing_delay().map(|q| q.as_secs_f64() * 1e3),
                    rx_owd_ms: match (standing(p), rx_owd_lo) {
                        (Some(o), Some(lo)) if !owd_below(o, lo) => {
                            Some(f64::from(o.wrapping_sub(lo)) / 1e3)
                        }
                        _ => None,
                    },
                    lossy: model.lossy,
                    share,
                    share_tx_bytes,
                    rx_share,
                    share_rx_bytes,
                    share_at: Some(now),
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

/// Whether the peer may have a path opened on local address `ip`: only on
/// one the config allows, and never on an address no peer can reach
/// (unspecified, multicast, broadcast).
pub fn peer_may_bind(ip: std::net::IpAddr, allowed: &[Prefix]) -> bool {
    let unusable = ip.is_unspecified()
        || ip.is_multicast()
        || matches!(ip, std::net::IpAddr::V4(v4) if v4.is_broadcast());
    !unusable && allowed.iter().any(|p| p.contains(ip))
}

/// How long a fresh session gets before all-paths-down triggers a new
/// handshake: the longest dead timer.
fn settle_time(session: &Session) -> Duration {
    session
        .paths()
        .map(|(_, p)| p.params().dead_timer)
        .max()
        .unwrap_or(Duration::from_secs(5))
}

/// A header with fresh sequence numbers for a message on `path`.
fn next_header(conn: &ConnShared, path: &PathShared, now: Instant) -> Header {
    Header {
        msg_type: MsgType::HandshakeInit,
        flags: Flags::NONE,
        path_id: path.id as u16,
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
    let table = conn.paths();
    let known: Vec<&Arc<PathShared>> = table
        .iter()
        .filter(|p| p.remote().is_some() && !p.is_removed())
        .collect();
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

/// Whether session index `i` is taken by a key set or a handshake in
/// flight of any connection.
fn index_in_use(conns: &[Arc<ConnShared>], i: u32) -> bool {
    conns.iter().any(|c| {
        c.crypto
            .as_ref()
            .is_some_and(|k| k.knows_index(i) || k.handshake_index.load(Relaxed) == i)
    })
}

/// The header fields of a public-key handshake message on `path`. Its
/// sequence numbers are informational and consume none: the receiver
/// hands handshake messages to no resequencer and counts them on no path,
/// so a number taken here would be a hole there (a rekey every two
/// minutes would each time look like a lost datagram).
fn noise_header(conn: &ConnShared, path: &PathShared, now: Instant) -> Header {
    Header {
        seq: conn.seq.load(Relaxed),
        path_seq: path.path_seq.load(Relaxed),
        ..next_header_fields(conn, path, now)
    }
}

/// [`next_header`]'s fields other than the sequence numbers.
fn next_header_fields(conn: &ConnShared, path: &PathShared, now: Instant) -> Header {
    Header {
        msg_type: MsgType::NoiseInitiation,
        flags: Flags::NONE,
        path_id: path.id as u16,
        conn_id: conn.conn_id,
        seq: 0,
        path_seq: 0,
        timestamp_us: mpt_proto::timestamp_us(conn.epoch, now),
    }
}

/// Sends a Noise initiation on the next path (rotating over those whose
/// remote is known).
fn noise_initiate(
    conn: &ConnShared,
    nc: &mut NoiseConn,
    nd: &mut NoiseDaemon,
    in_use: impl Fn(u32) -> bool,
    now: Instant,
    buf: &mut [u8],
) {
    let Some(crypto) = conn.crypto.as_ref() else {
        return;
    };
    let table = conn.paths();
    let known: Vec<&Arc<PathShared>> = table
        .iter()
        .filter(|p| p.remote().is_some() && !p.is_removed())
        .collect();
    if known.is_empty() {
        return;
    }
    let attempt = nc.counters().initiations_sent as usize;
    let path = known[attempt % known.len()];
    let Some((remote, _)) = path.remote() else {
        return;
    };
    let template = noise_header(conn, path, now);
    match nc.initiate(crypto, &mut nd.rng, in_use, template, buf, now) {
        Ok(len) => {
            tracing::debug!(conn = %conn.name, path = %path.name, attempt, "sending handshake initiation");
            send(conn, path, &buf[..len], remote);
        }
        Err(e) => {
            nd.stats
                .refusals
                .entropy
                .add(u64::from(matches!(e, mpt_proto::noise::NoiseError::Crypto)));
            tracing::warn!(conn = %conn.name, error = %e, "cannot build handshake initiation");
        }
    }
}

fn send(conn: &ConnShared, path: &PathShared, bytes: &[u8], to: std::net::SocketAddr) {
    match path.socket.send_from(bytes, to, path.via().as_ref()) {
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
