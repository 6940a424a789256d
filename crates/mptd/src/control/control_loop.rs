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
use mpt_proto::crypto::TAG_LEN;
use mpt_proto::path::{AdminStatus, Liveness};
use mpt_proto::seq::{below_half, seq_before};
use mpt_proto::wire::{Flags, Header, HeaderViewMut, MsgType, HEADER_LEN};
use mpt_proto::{DataSummary, DropReason, Event, Session};

use super::conn_keys::ConnKeys;
use super::initiate::{index_in_use, initiate, noise_initiate};
use super::transmit::send;
use crate::config::Prefix;
use crate::control::command::{Answer, Outcome, Request, PEER_ANSWER_WAIT};
use crate::control::noise::NoiseDaemon;
use crate::control::pathset::{self, ConnSetup, Draining};
use crate::plane::ControlDatagram;
use crate::plane::{ConnShared, LastHandover, PathView};

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

/// The lowest and highest of one-way delays (wrapping µs) and how many
/// there were; `None` for none.
fn owd_bounds(owds: impl Iterator<Item = u32>) -> Option<(u32, u32, usize)> {
    owds.fold(None, |acc, o| match acc {
        None => Some((o, o, 1)),
        Some((lo, hi, n)) => Some((
            if seq_before(o, lo) { o } else { lo },
            if seq_before(hi, o) { o } else { hi },
            n + 1,
        )),
    })
}

/// How long the resequencer waits for a gap to fill: the spread of one-way
/// delays between the fastest and the slowest usable path, plus twice the
/// largest RTT variation, plus a floor for scheduling jitter of the
/// receive workers; capped at two seconds. The spread is the larger of
/// half the RTT spread and, with a quarter's margin, the spread of the
/// one-way delays measured on the data received in the last second (which
/// includes the paths' queues: a satellite's buffer can add as much as its
/// propagation delay).
pub fn reorder_timeout(session: &Session, now: Instant) -> Duration {
    let floor = crate::plane::DEFAULT_REORDER_TIMEOUT;
    let usable = session.paths().map(|(_, p)| p).filter(|p| p.usable());
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
    let recent = session
        .paths()
        .filter_map(|(_, p)| p.rx_owd())
        .filter(|(_, at)| now.saturating_duration_since(*at) < Duration::from_secs(1))
        .map(|(owd, _)| owd);
    let owd_spread = match owd_bounds(recent) {
        Some((l, h, _)) => {
            Duration::from_micros(u64::from(h.wrapping_sub(l)).min(u64::from(u32::MAX / 2)))
        }
        None => Duration::ZERO,
    };
    let spread = ((hi - lo) / 2).max(owd_spread + owd_spread / 4);
    (spread + var * 2 + floor).min(Duration::from_secs(2))
}

/// The one-way delay the receive worker holds data to (see `equalize`):
/// the slowest of the connection's paths that are up, not backups, and
/// either near the fastest in delay or bringing a real share of the data
/// (`carries`), by the last delay measured on each path that carries
/// data, and by the lowest over the last 20-40 ms on each that does not
/// (its sporadic data's, probes' and feedback's, see
/// `Path::rx_owd_standing`; µs, wrapping, with the clock offset), when it
/// exceeds the fastest by at least [`crate::dataplane::equalize::MIN_HOLD`]; with
/// it, how far it lies above the fastest (µs), the longest hold it makes.
///
/// Why the two: a path that carries little has few samples, each with the
/// jitter of both endpoints' threads, and its latest one set the hold of
/// every flow (ACKs coming back over 2 of 12 like paths were held
/// 3.6-3.9 ms for it). A path that carries data has a fresh sample every
/// receive summary, and its latest one is what the resequencer will wait
/// for anyway: equalising to the lowest of its window instead moved the
/// wait into the resequencer (WiFi + LTE with BBR: hold p99 38-59 ms in 5
/// of 6 runs against 8-14 ms in 5 of 6 with the latest).
///
/// A path whose RTT is within [`EQUALIZE_NEAR`] of the fastest counts
/// whether it carries data at the moment or not (unless `random_loss`), so that a flow meets one
/// delay from its first packet to its last. When only the paths in use
/// counted, a BBR flow measured the fast path's RTT while it was slow
/// enough to fit there, sized its window by it and, once the slow path
/// joined and everything was held to its delay, was held to a fraction of
/// the summed capacity: bimodal between 0.44 and 0.98 of the sum over
/// WiFi + LTE in runs of the same build, 0.91-0.95 with near paths always
/// counted. A far path (a satellite beside DSL) counts, unless `bulk`,
/// only while it brings at least [`EQUALIZE_MIN_SHARE`] of the data
/// (payload of data and repair messages; see [`SHARE_IDLE`]): holding
/// every datagram to its delay would cost interactive traffic hundreds of
/// milliseconds. (An older build measured CUBIC over GEO + DSL at 0.88 of
/// the best path held always, 1.42 held only while the satellite carried
/// data; but it counted keepalives as data, so an idle satellite "carried"
/// half of it and every flow began held, as `bulk` now makes sure.)
///
/// `bulk`: the target of full-size datagrams and TCP SYNs, for which a
/// far path counts whenever it is up, carrying data or not (unless
/// `random_loss`). A bulk flow thus meets the far path's delay from its
/// handshake on, whether the sender has put any of it there yet or not,
/// while short datagrams (pings, keystrokes, DNS, voice, ACKs) see the near
/// path's. Measured over GEO + DSL: with the far path counted for every
/// datagram only while it carried data, a flow that began on DSL alone
/// met a 25 ms RTT, then 313 ms once the satellite joined; CUBIC left
/// slow start on DSL's queue and took 15 s to grow into the satellite
/// (0.58 and 0.64 of the best path in two first runs, against 1.47 and
/// 1.48 in runs that began held), and BBR, sizing its window by the
/// 25 ms, fell to 2.6 Mbit/s until its minimum RTT expired.
///
/// `random_loss`: the receiver asked for repairs within the last
/// [`RANDOM_LOSS_HOLD`]. Then only paths carrying data count: the losses
/// repair does not catch make a loss-based sender (CUBIC) back off, and
/// its rate after that is its window over the RTT, so the tunnel had
/// better show the fast path's RTT while the flow fits there (CUBIC over
/// WiFi with 1 % loss + LTE: 0.68-1.33 of the best path with near paths
/// always counted, 1.57-2.06 without).
pub fn equalize_target(
    session: &Session,
    now: Instant,
    carries: impl Fn(usize) -> bool,
    random_loss: bool,
    bulk: bool,
) -> Option<(u32, u32)> {
    let primary = |p: &mpt_proto::path::Path| {
        p.liveness() == Liveness::Up && p.params().admin == AdminStatus::Up
    };
    let fastest = session
        .paths()
        .filter(|(_, p)| primary(p))
        .filter_map(|(_, p)| p.rtt().min())
        .min();
    let near = |p: &mpt_proto::path::Path| match (fastest, p.rtt().min()) {
        (Some(f), Some(r)) => !random_loss && r.saturating_sub(f) <= EQUALIZE_NEAR,
        _ => false,
    };
    let (lo, hi, _) = owd_bounds(
        session
            .paths()
            .filter(|(id, p)| primary(p) && (near(p) || carries(*id) || (bulk && !random_loss)))
            .filter_map(|(id, p)| match carries(id) {
                true => p.rx_owd(),
                false => p.rx_owd_standing(now),
            })
            .filter(|(_, at)| now.saturating_duration_since(*at) < OWD_HORIZON)
            .map(|(owd, _)| owd),
    )?;
    let spread = u64::from(hi.wrapping_sub(lo));
    (spread >= crate::dataplane::equalize::MIN_HOLD.as_micros() as u64 && below_half(spread as u32))
        .then_some((hi, spread as u32))
}

/// The spread (slowest − fastest) of the last one-way delays measured on
/// the up paths that bring data (`carries`), queueing included: what the
/// resequencer must at least wait for data that overtook on a faster path.
/// `None` with fewer than two such paths. Reported in `mpt status`
/// (`reorder.spread_ms`) so a benchmark can set the holds it measured
/// against the delays the paths really had.
pub fn rx_delay_spread(
    session: &Session,
    now: Instant,
    carries: impl Fn(usize) -> bool,
) -> Option<Duration> {
    let (lo, hi, n) = owd_bounds(
        session
            .paths()
            .filter(|(id, p)| p.liveness() == Liveness::Up && carries(*id))
            .filter_map(|(_, p)| p.rx_owd())
            .filter(|(_, at)| now.saturating_duration_since(*at) < OWD_HORIZON)
            .map(|(owd, _)| owd),
    )?;
    let spread = hi.wrapping_sub(lo);
    (n >= 2 && below_half(spread)).then(|| Duration::from_micros(u64::from(spread)))
}

/// Per path id, for the resequencer's loss proof (see
/// `Resequencer::set_path_wait`): how much later than on the fastest path
/// a datagram sent on a usable path arrives (the last one-way delays
/// measured on each, or half the difference of minimum RTTs where no
/// delay was measured lately), plus twice its RTT variation and
/// [`PATH_WAIT_MARGIN`] for jitter, at most the gap timeout; `None` for
/// paths that cannot carry data now.
pub fn path_waits(
    session: &Session,
    now: Instant,
    timeout: Duration,
) -> [Option<Duration>; mpt_proto::sched::MAX_PATHS] {
    let mut waits = [None; mpt_proto::sched::MAX_PATHS];
    let recent = |p: &mpt_proto::path::Path| {
        p.rx_owd()
            .filter(|(_, at)| now.saturating_duration_since(*at) < OWD_HORIZON)
            .map(|(owd, _)| owd)
    };
    let usable = || session.paths().filter(|(_, p)| p.usable());
    let owd_lo = owd_bounds(usable().filter_map(|(_, p)| recent(p))).map(|(lo, _, _)| lo);
    let rtt_lo = usable().filter_map(|(_, p)| p.rtt().min()).min();
    for (id, p) in usable() {
        let extra = match (recent(p), owd_lo) {
            (Some(o), Some(lo)) if !seq_before(o, lo) => {
                Duration::from_micros(u64::from(o.wrapping_sub(lo)).min(u64::from(u32::MAX / 2)))
            }
            _ => match (p.rtt().min(), rtt_lo) {
                (Some(r), Some(lo)) => r.saturating_sub(lo) / 2,
                _ => Duration::ZERO,
            },
        };
        if let Some(w) = waits.get_mut(id) {
            *w = Some((extra + p.rtt().variation() * 2 + PATH_WAIT_MARGIN).min(timeout));
        }
    }
    waits
}

/// Smallest share of the received data (smoothed) that counts a path in
/// the measured delay spread ([`rx_delay_spread`]).
pub const SPREAD_MIN_SHARE: f64 = 0.005;

/// Jitter margin of [`path_waits`].
pub const PATH_WAIT_MARGIN: Duration = Duration::from_millis(2);

/// RTT above the fastest path's within which a path sets the delay to
/// equalise to whether or not it carries data (see [`equalize_target`]).
pub const EQUALIZE_NEAR: Duration = Duration::from_millis(100);

/// How long after the last repair request a connection counts as having
/// random loss (see [`equalize_target`]).
pub const RANDOM_LOSS_HOLD: Duration = Duration::from_secs(10);

/// Smallest share of the received data (smoothed) that lets a path farther
/// than [`EQUALIZE_NEAR`] set the delay the receiver equalises to.
pub const EQUALIZE_MIN_SHARE: f64 = 0.05;

/// Oldest one-way delay sample a path's delay is taken from (idle paths
/// are probed every `keepalive`, 2 s by default).
pub const OWD_HORIZON: Duration = Duration::from_secs(10);

/// Time constant of the smoothed shares of sent and received data.
pub const SHARE_TAU: Duration = Duration::from_millis(500);

/// A path that brought no data for this long has no share of the
/// received data (the smoothed share only moves when data arrives, so
/// after a bulk flow over a satellite path it stood still, and held every
/// packet of the next interactive flow to the satellite's delay until
/// enough of its data had come). Longer than a BBR flow's pause of the
/// satellite path while it probes its minimum RTT (about one RTT, 600 ms
/// over GEO), so a bulk flow's hold stays steady.
pub const SHARE_IDLE: Duration = Duration::from_secs(2);

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
    pub links: Option<crate::control::links::Links>,
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
            let keys = match (&conn.crypto, self.keys.get_mut(ci)) {
                (Some(crypto), Some(ConnKeys::Psk(exchange))) => {
                    crypto.expire(now);
                    let keys = crypto.keys();
                    let all_down = session.paths().all(|(_, p)| p.liveness() == Liveness::Down);
                    if let Some(attempt) = exchange.poll_initiate(keys.is_none() || all_down, now) {
                        initiate(conn, exchange, attempt, now, buf);
                    }
                    Some(keys.map(|k| (k, conn.conn_id)))
                }
                (Some(crypto), keys) => {
                    if let (Some(ConnKeys::Noise(nc)), Some(nd)) = (keys, self.noise.as_mut()) {
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
                        let Ok(mut h) = HeaderViewMut::check_len(buf) else {
                            continue;
                        };
                        h.set_conn_id(*conn_id);
                        h.insert_flags(Flags::SEALED);
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
            let timeout = reorder_timeout(session, now);
            conn.reseq_timeout_us
                .store(timeout.as_micros() as u64, Relaxed);
            conn.publish_path_waits(&path_waits(session, now, timeout));
            let rx_share = |id: usize| {
                table.get(id).map_or(0.0, |p| match p.view.lock() {
                    Ok(g) => g.rx_share,
                    Err(poisoned) => poisoned.into_inner().rx_share,
                })
            };
            let carries = |id: usize| rx_share(id) >= EQUALIZE_MIN_SHARE;
            // Any path bringing data, however little, makes the fast
            // paths' packets wait for it in the resequencer.
            let brings = |id: usize| rx_share(id) >= SPREAD_MIN_SHARE;
            let random_loss = {
                let requested = conn.repairs.requested_datagrams.get();
                let mut seen = match conn.random_loss_seen.lock() {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
                if requested > seen.0 {
                    *seen = (requested, Some(now));
                }
                seen.1
                    .is_some_and(|t| now.saturating_duration_since(t) < RANDOM_LOSS_HOLD)
            };
            conn.rx_spread_us.store(
                rx_delay_spread(session, now, brings).map_or(u64::MAX, |d| d.as_micros() as u64),
                Relaxed,
            );
            let equalize = equalize_target(session, now, carries, random_loss, false);
            conn.equalize_owd_us.store(
                equalize.map_or(0, |(d, _)| (1 << 32) | u64::from(d)),
                Relaxed,
            );
            conn.equalize_spread_us
                .store(equalize.map_or(0, |(_, s)| u64::from(s)), Relaxed);
            let bulk = equalize_target(session, now, carries, random_loss, true);
            conn.equalize_bulk_owd_us
                .store(bulk.map_or(0, |(d, _)| (1 << 32) | u64::from(d)), Relaxed);
            conn.equalize_bulk_spread_us
                .store(bulk.map_or(0, |(_, s)| u64::from(s)), Relaxed);
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
                let alpha = share_at.map_or(1.0, |t| {
                    let dt = now.saturating_duration_since(t).as_secs_f64();
                    1.0 - (-dt / SHARE_TAU.as_secs_f64()).exp()
                });
                let (rx_share, share_rx_bytes) = if got_total > 0 {
                    (
                        old_rx.0 * (1.0 - alpha) + alpha * got[id] as f64 / got_total as f64,
                        old_rx.1 + got[id],
                    )
                } else {
                    old_rx
                };
                // A path that brought no data lately carries nothing,
                // whatever its share was when data last came.
                let last_data_ns = shared.rx_summary_last_ns.load(Relaxed);
                let rx_share = if last_data_ns == 0
                    || conn_ns.saturating_sub(last_data_ns) > SHARE_IDLE.as_nanos() as u64
                {
                    0.0
                } else {
                    rx_share
                };
                let (share, share_tx_bytes) = if total > 0 {
                    (
                        old.0 * (1.0 - alpha) + alpha * sent[id] as f64 / total as f64,
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
                        (Some(o), Some(lo)) if !seq_before(o, lo) => {
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
