//! The per-connection state machine the daemon drives.
//!
//! A [`Session`] owns the paths of one connection and decides everything
//! that is not per-packet work: liveness, probes, RTT, loss, and which paths
//! may carry data. It never reads a clock and never touches a socket.
//!
//! Driving contract (the daemon's control loop does exactly this):
//! 1. feed input: [`Session::handle_datagram`] for every probe, reply or
//!    control datagram, and [`Session::handle_data_summary`] for the data
//!    datagrams the data plane counted since the last call;
//! 2. at or after [`Session::poll_timeout`], call [`Session::handle_timeout`];
//! 3. then drain [`Session::poll_transmit`] (send each on its path) and
//!    [`Session::poll_event`] (log/count state changes), and publish
//!    [`Session::eligibility`] to the schedulers.
//!
//! Data datagrams may also be fed through `handle_datagram` (the simulation
//! tests do); the two inputs account the same way, so a datagram must be fed
//! through exactly one of them.
//!
//! Paths live in slots indexed by their path id (the `path_id` on the wire),
//! so paths can come and go while the others keep their ids:
//! [`Session::add_path`], [`Session::remove_path`]. The peer learns of such
//! changes through control messages the driver sends with
//! [`Session::send_control`]; the session repeats them until acknowledged
//! and reports the answer as [`Event::ControlAnswered`]. A request from the
//! peer surfaces as [`Event::PeerControl`]; the driver acts on it and
//! answers with [`Session::answer_control`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

mod handover;

pub use handover::{Handover, HandoverTracker};

use crate::control::{ControlChannel, ControlError, Due, Incoming};
use crate::error::{DecodeError, EncodeError};
pub use crate::path::DataSummary;
use crate::path::{AdminStatus, Liveness, Path, PathParams, PathState};
use crate::sched::{
    level_queue, ps_per_byte, Eligibility, PathModel, LEVEL_DEADBAND_NS, MAX_PATHS,
};
use crate::timer::{Timer, TimerKind};
use crate::wire::{
    ControlBody, ControlMsg, Feedback, Flags, Header, Keepalive, MsgType, Refusal, HEADER_LEN,
};

/// Paths a control message is sent on at once (the usable ones, fastest
/// first): enough to get through when one of them is failing.
const CONTROL_FANOUT: usize = 3;

/// Loss rate (percent) above which a path counts as lossy for the
/// adaptive scheduler (if also well above the connection's best path).
pub const LOSSY_PCT: f64 = 0.5;

/// The same when the peer repairs random losses ([`Session::set_loss_repair`]):
/// a repaired loss costs a copy and a little delay, not TCP's window, so
/// only a path that loses much is set aside.
pub const LOSSY_REPAIRED_PCT: f64 = 5.0;

/// One-way delay differences below this count as none.
const LIKE_DELAY: Duration = Duration::from_millis(1);

/// Most a path's queue cap is raised towards a slower path's delay.
const SPREAD_CAP_MAX: Duration = Duration::from_millis(50);

/// Shortest probing phase (see [`crate::sched::probe_gain`]). A phase is
/// the path's minimum RTT within this and [`PROBE_PHASE_MAX`]: a probe
/// offers a quarter more for one phase, so it queues up to a quarter of
/// a phase at the bottleneck, and the resequencer holds every flow of the
/// connection for it. With a 20 ms floor, probes on LAN-like paths (RTT
/// 0.1 ms) stood 5 ms queues on one path after another (12 x 100 Mbit/s,
/// 4 streams, interleaved runs: CUBIC 0.943 and 0.951 of raw with that
/// floor, 0.951 and 0.962 with this one; BBR 0.857-0.899 and
/// 0.909-0.917).
pub const PROBE_PHASE_MIN: Duration = Duration::from_millis(4);

/// Longest probing phase.
pub const PROBE_PHASE_MAX: Duration = Duration::from_millis(200);

/// Outgoing datagrams a session may queue before it drops new probe
/// replies: far more than the paths' probes per keepalive round, small
/// enough that a probe flood cannot grow memory.
const MAX_QUEUED_TRANSMITS: usize = 4 * MAX_PATHS;

/// How a session is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Connection id carried in every header.
    pub conn_id: u32,
    /// The paths, in index order: path `i` gets id `i`.
    pub paths: Vec<PathParams>,
    /// Id of the first control message this session sends. Must exceed
    /// every id a previous incarnation of this sender used (the daemon
    /// takes the wall clock in microseconds).
    pub first_control_id: u64,
}

/// Why a datagram was not accepted. Each maps to a drop counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// The header or body did not decode.
    #[error("malformed: {0}")]
    Malformed(#[from] DecodeError),
    /// The header names another connection.
    #[error("unknown connection id {0}")]
    UnknownConnection(u32),
    /// The path index is not one of ours.
    #[error("no such path {0}")]
    UnknownPath(usize),
    /// A message this version does not handle yet (control, handshake).
    #[error("unsupported message type {0:?}")]
    Unsupported(MsgType),
    /// A sealed message arrived on a session without keys.
    #[error("sealed message without session keys")]
    Sealed,
}

/// Errors building or reconfiguring a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// More paths than [`MAX_PATHS`].
    #[error("{0} paths, at most {MAX_PATHS} allowed")]
    TooManyPaths(usize),
    /// The path index is not one of ours.
    #[error("no such path {0}")]
    UnknownPath(usize),
    /// The path id is taken.
    #[error("path id {0} is in use")]
    PathExists(usize),
    /// Too many control messages await an answer.
    #[error(transparent)]
    Control(#[from] ControlError),
}

/// What an accepted datagram was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received<'a> {
    /// An IP packet for the tun device.
    Data(&'a [u8]),
    /// A probe (a reply has been queued).
    Probe,
    /// A probe reply (RTT and loss updated).
    ProbeReply,
    /// Feedback on our data (estimators updated).
    Feedback,
    /// A control message (see the events).
    Control,
}

/// Something the driver or an operator must know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A path's reported state changed.
    PathStateChanged {
        /// Path index.
        path: usize,
        /// Old state.
        from: PathState,
        /// New state.
        to: PathState,
    },
    /// The peer asks for a change (add or remove a path). The driver acts
    /// on it and must answer with [`Session::answer_control`].
    PeerControl {
        /// The path it arrived on (the answer goes back there).
        via: usize,
        /// The request.
        msg: ControlMsg,
    },
    /// The peer answered one of our control messages.
    ControlAnswered {
        /// Our message.
        msg: ControlMsg,
        /// Its answer.
        result: Result<(), Refusal>,
    },
    /// The peer never answered one of our control messages.
    ControlGaveUp {
        /// Our message.
        msg: ControlMsg,
    },
    /// Data moved off a path that left service (see [`HandoverTracker`]).
    Handover(Handover),
}

/// The body of a datagram the session wants sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// A probe or probe reply body.
    Keepalive(Keepalive),
    /// A control message.
    Control(ControlMsg),
    /// Feedback on the peer's data.
    Feedback(Feedback),
}

/// A datagram the session wants sent. The caller allocates the sequence
/// numbers (the data plane shares those counters) and emits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Path index to send on.
    pub path: usize,
    /// Probe, probe reply or control.
    pub msg_type: MsgType,
    /// Connection id.
    pub conn_id: u32,
    /// Send timestamp.
    pub timestamp_us: u32,
    /// Body.
    pub body: Payload,
}

impl Transmit {
    /// Encoded length of a probe or probe reply.
    pub const KEEPALIVE_LEN: usize = HEADER_LEN + Keepalive::LEN;

    /// Encoded length of a feedback message.
    pub const FEEDBACK_LEN: usize = HEADER_LEN + Feedback::LEN;

    /// Longest datagram a session asks to send (a control message).
    pub const MAX_LEN: usize = HEADER_LEN + ControlMsg::MAX_LEN;

    /// Writes the datagram into `buf` and returns its length.
    pub fn emit(&self, seq: u64, path_seq: u32, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let header = Header {
            msg_type: self.msg_type,
            flags: Flags::NONE,
            path_id: u16::try_from(self.path).unwrap_or(u16::MAX),
            conn_id: self.conn_id,
            seq,
            path_seq,
            timestamp_us: self.timestamp_us,
        };
        header.emit(buf)?;
        let body = buf.get_mut(HEADER_LEN..).unwrap_or_default();
        let len = match &self.body {
            Payload::Keepalive(k) => {
                k.emit(body)?;
                Keepalive::LEN
            }
            Payload::Control(c) => c.emit(body)?,
            Payload::Feedback(f) => {
                f.emit(body)?;
                Feedback::LEN
            }
        };
        Ok(HEADER_LEN + len)
    }
}

/// Microseconds since `epoch`, wrapping: the wire timestamp.
pub fn timestamp_us(epoch: Instant, now: Instant) -> u32 {
    // Truncation is the point: the timestamp wraps every ~71 minutes and is
    // only ever compared by wrapping subtraction.
    now.saturating_duration_since(epoch).as_micros() as u32
}

/// The state machine of one connection.
#[derive(Debug, Clone)]
pub struct Session {
    conn_id: u32,
    epoch: Instant,
    /// Slot `i` holds the path with id `i`.
    paths: Vec<Option<Path>>,
    control: ControlChannel,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    dropped_transmits: u64,
    /// Loss (percent) above which a path is lossy for the scheduler.
    lossy_pct: f64,
    handovers: HandoverTracker,
}

impl Session {
    /// A new session; every enabled path probes at `now`.
    pub fn new(config: SessionConfig, now: Instant) -> Result<Session, SessionError> {
        if config.paths.len() > MAX_PATHS {
            return Err(SessionError::TooManyPaths(config.paths.len()));
        }
        Ok(Session {
            conn_id: config.conn_id,
            epoch: now,
            paths: config
                .paths
                .into_iter()
                .map(|p| Some(Path::new(p, now)))
                .collect(),
            control: ControlChannel::new(config.first_control_id),
            transmits: VecDeque::with_capacity(MAX_QUEUED_TRANSMITS),
            events: VecDeque::new(),
            dropped_transmits: 0,
            lossy_pct: LOSSY_PCT,
            handovers: HandoverTracker::default(),
        })
    }

    /// Tells the session whether the peer repairs what our paths lose at
    /// random (both ends run the same `repair` setting): a lossy path is
    /// then set aside only above [`LOSSY_REPAIRED_PCT`], not [`LOSSY_PCT`].
    pub fn set_loss_repair(&mut self, repaired: bool) {
        self.lossy_pct = if repaired {
            LOSSY_REPAIRED_PCT
        } else {
            LOSSY_PCT
        };
    }

    /// Connection id.
    pub fn conn_id(&self) -> u32 {
        self.conn_id
    }

    /// The instant wire timestamps count from.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// The paths with their ids, in id order.
    pub fn paths(&self) -> impl Iterator<Item = (usize, &Path)> + '_ {
        self.paths
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|p| (i, p)))
    }

    /// The path with id `id`.
    pub fn path(&self, id: usize) -> Option<&Path> {
        self.paths.get(id).and_then(Option::as_ref)
    }

    /// The lowest free path id, if the connection has room.
    pub fn free_path_id(&self) -> Option<usize> {
        (0..MAX_PATHS).find(|&i| self.path(i).is_none())
    }

    /// Adds a path under id `id`; it probes at `now`.
    pub fn add_path(
        &mut self,
        id: usize,
        params: PathParams,
        now: Instant,
    ) -> Result<(), SessionError> {
        if id >= MAX_PATHS {
            return Err(SessionError::TooManyPaths(id + 1));
        }
        if self.path(id).is_some() {
            return Err(SessionError::PathExists(id));
        }
        if self.paths.len() <= id {
            self.paths.resize_with(id + 1, || None);
        }
        self.paths[id] = Some(Path::new(params, now));
        Ok(())
    }

    /// Removes path `id`; it is forgotten at once (no event).
    pub fn remove_path(&mut self, id: usize) -> Result<Path, SessionError> {
        let path = self
            .paths
            .get_mut(id)
            .and_then(Option::take)
            .ok_or(SessionError::UnknownPath(id))?;
        self.handovers.path_removed(id);
        while self.paths.last().is_some_and(Option::is_none) {
            self.paths.pop();
        }
        Ok(path)
    }

    /// Control messages awaiting the peer's answer.
    pub fn control_outstanding(&self) -> usize {
        self.control.outstanding()
    }

    /// Probe replies not queued because the queue was full.
    pub fn dropped_transmits(&self) -> u64 {
        self.dropped_transmits
    }

    /// Which paths may carry data now.
    pub fn eligibility(&self) -> Eligibility {
        let mut e = Eligibility::default();
        for (i, p) in self.paths().filter(|(_, p)| p.usable()) {
            match p.params().admin {
                AdminStatus::Up => e.primary |= 1 << i,
                AdminStatus::Backup => e.backup |= 1 << i,
                AdminStatus::Down => {}
            }
        }
        e
    }

    /// The adaptive scheduler's model of every path, indexed by path id
    /// (free slots get a default model), plus each path's probing phase
    /// length. See [`crate::sched::Adaptive`] for how they are used.
    ///
    /// * rate: the delivery estimate, offered at twice its value while no
    ///   standing queue has confirmed it, and scaled by `weight_out / max
    ///   weight_out` of the usable paths (under `adaptive`, a weight caps a
    ///   path's share of its capacity; equal weights change nothing). An
    ///   unknown rate models the path as free.
    /// * one-way delay above the fastest path: from the feedback's
    ///   one-way delays when every usable path has one (exact, including
    ///   asymmetric paths), else half the minimum RTTs.
    /// * cap: the minimum RTT within 10-300 ms, raised to the delay gap
    ///   to the slowest usable path (at most 50 ms).
    /// * lossy: over [`LOSSY_PCT`] % loss ([`LOSSY_REPAIRED_PCT`] with
    ///   [`Session::set_loss_repair`]) while no queue stood (a full
    ///   buffer's drops are congestion, which TCP handles) and over four
    ///   times the least lossy usable path's.
    /// * leveling: a path whose measured standing queue makes its packets
    ///   arrive later than the quickest path's (one-way delay plus queue)
    ///   is offered less of its rate until that queue drains
    ///   ([`crate::sched::level_queue`], over two smoothed RTTs): the
    ///   resequencer holds every flow for the latest path, so a queue one
    ///   path builds alone costs the whole connection.
    pub fn path_models(&self, now: Instant, out: &mut Vec<(PathModel, Duration)>) {
        out.clear();
        out.resize(self.paths.len(), (PathModel::default(), Duration::ZERO));
        let usable = || self.paths().filter(|(_, p)| p.usable());
        let max_weight = usable()
            .map(|(_, p)| p.params().weight_out)
            .max()
            .unwrap_or(1)
            .max(1);
        let least_loss = usable()
            .filter_map(|(_, p)| p.current_random_loss(now))
            .fold(f64::INFINITY, f64::min);
        let all_owd = usable().all(|(_, p)| p.delivery().owd_min_us().is_some());
        let base_owd = usable()
            .filter_map(|(_, p)| p.delivery().owd_min_us())
            .reduce(|a, b| if (a.wrapping_sub(b) as i32) < 0 { a } else { b });
        let base_half_rtt = usable()
            .filter_map(|(_, p)| p.rtt().min())
            .min()
            .map(|r| r / 2);
        let owd_of = |p: &Path| {
            let d = p.delivery();
            let owd = match (
                all_owd,
                base_owd,
                d.owd_min_us(),
                base_half_rtt,
                p.rtt().min(),
            ) {
                (true, Some(base), Some(own), _, _) => {
                    let rel = own.wrapping_sub(base) as i32;
                    Duration::from_micros(rel.max(0) as u64)
                }
                (_, _, _, Some(base), Some(own)) => (own / 2).saturating_sub(base),
                _ => Duration::ZERO,
            };
            // Below a millisecond, paths are alike (measurement noise).
            if owd < LIKE_DELAY {
                Duration::ZERO
            } else {
                owd
            }
        };
        let slowest = usable().map(|(_, p)| owd_of(p)).max().unwrap_or_default();
        // When a packet sent now arrives, above the quickest path: the
        // propagation delay above it plus the queue measured lately.
        let queue_of = |p: &Path| p.delivery().recent_queueing_delay(now);
        let quickest = usable()
            .filter_map(|(_, p)| queue_of(p).map(|q| owd_of(p) + q))
            .min();
        for (i, p) in self.paths() {
            let d = p.delivery();
            let mut ps = d.rate_bps().map_or(0, |r| {
                let r = u128::from(r) * u128::from(p.params().weight_out.max(1))
                    / u128::from(max_weight);
                ps_per_byte(r as u64)
            });
            if !d.confirmed() {
                // Only a lower bound (the estimate has a floor, so a path
                // carrying only ACKs is not modelled as nearly useless):
                // offered twice as much until a queue shows the capacity.
                ps /= 2;
            }
            let owd = owd_of(p);
            // A queue stands: the path delivers its capacity, and the
            // estimate follows it up or down without probing, which would
            // only deepen the queue.
            let queued = queue_of(p).is_some_and(|q| q.as_nanos() as u64 > LEVEL_DEADBAND_NS);
            if let (Some(q), Some(lo)) = (queue_of(p), quickest) {
                let excess = q.min((owd + q).saturating_sub(lo));
                let horizon = p.rtt().smoothed().unwrap_or_default() * 2;
                ps = level_queue(ps, excess.as_nanos() as u64, horizon.as_nanos() as u64);
            }
            let min_rtt = p.rtt().min().unwrap_or(Duration::from_millis(50));
            // The cap stands for the bottleneck's buffer, which we cannot
            // see: about an RTT (the usual buffer sizing), raised towards
            // the slowest path's extra delay, up to 50 ms, so a fast path
            // absorbs a burst rather than spilling it where it arrives
            // later (and holds the flow behind it).
            let spread = slowest.saturating_sub(owd).min(SPREAD_CAP_MAX);
            let cap = min_rtt
                .clamp(Duration::from_millis(10), Duration::from_millis(300))
                .max(spread);
            let lossy = p
                .current_random_loss(now)
                .is_some_and(|l| l > self.lossy_pct && l > 4.0 * least_loss);
            out[i] = (
                PathModel {
                    ps_per_byte: ps,
                    owd_ns: owd.as_nanos() as u64,
                    cap_ns: cap.as_nanos() as u64,
                    lossy,
                    lower_bound: !d.confirmed(),
                },
                if queued {
                    Duration::ZERO
                } else {
                    min_rtt.clamp(PROBE_PHASE_MIN, PROBE_PHASE_MAX)
                },
            );
        }
    }

    /// Runs `f` on path `i` and records a state change it causes.
    fn with_path<R>(&mut self, i: usize, f: impl FnOnce(&mut Path) -> R) -> Option<R> {
        let path = self.paths.get_mut(i)?.as_mut()?;
        let from = path.state();
        let was_usable = path.usable();
        let r = f(path);
        let to = path.state();
        if from != to {
            self.events
                .push_back(Event::PathStateChanged { path: i, from, to });
        }
        match (was_usable, path.usable()) {
            (true, false) => {
                let left_at = path.last_change();
                // Only a path that was carrying data hands anything over.
                let carried = path
                    .last_data_sent()
                    .is_some_and(|t| t + path.params().dead_timer >= left_at);
                if carried {
                    let last_heard = path.last_rx().unwrap_or(left_at);
                    self.handovers.path_left(i, last_heard, left_at);
                }
            }
            (false, true) => self.handovers.path_back(i),
            _ => {}
        }
        Some(r)
    }

    /// Takes in one datagram received on path `path` whose header already
    /// parsed.
    pub fn handle_datagram<'a>(
        &mut self,
        path: usize,
        header: &Header,
        payload: &'a [u8],
        now: Instant,
    ) -> Result<Received<'a>, DropReason> {
        if header.conn_id != self.conn_id {
            return Err(DropReason::UnknownConnection(header.conn_id));
        }
        if self.path(path).is_none() {
            return Err(DropReason::UnknownPath(path));
        }
        if header.flags.contains(Flags::SEALED) {
            return Err(DropReason::Sealed);
        }
        let received = match header.msg_type {
            MsgType::Data => {
                let now_us = timestamp_us(self.epoch, now);
                let summary = DataSummary {
                    packets: 1,
                    highest_path_seq: header.path_seq,
                    bytes: (HEADER_LEN + payload.len()) as u64,
                    last_rx: now,
                    last_timestamp_us: header.timestamp_us,
                    owd_min_us: Some(now_us.wrapping_sub(header.timestamp_us)),
                };
                self.with_path(path, |p| p.on_data(&summary));
                Received::Data(payload)
            }
            MsgType::Probe | MsgType::ProbeReply => {
                let body = Keepalive::parse(payload)?;
                let owd = timestamp_us(self.epoch, now).wrapping_sub(header.timestamp_us);
                self.with_path(path, |p| p.on_control_owd(owd, now));
                if header.msg_type == MsgType::Probe {
                    self.on_probe(path, header, &body, now);
                    Received::Probe
                } else {
                    self.with_path(path, |p| {
                        // The probe this answers said "I do not hear you"
                        // unless we already did: tell the peer now, not a
                        // probe interval later.
                        let told_deaf = p.liveness() != Liveness::Up;
                        p.on_receive(1, header.path_seq, now);
                        if told_deaf && p.liveness() == Liveness::Up {
                            p.probe_now(now);
                        }
                    });
                    self.on_probe_reply(path, &body, now);
                    Received::ProbeReply
                }
            }
            MsgType::Feedback => {
                let body = Feedback::parse(payload)?;
                let now_us = timestamp_us(self.epoch, now);
                self.with_path(path, |p| {
                    p.on_receive(1, header.path_seq, now);
                    p.on_feedback(&body, now_us, now);
                    p.on_control_owd(now_us.wrapping_sub(header.timestamp_us), now);
                });
                Received::Feedback
            }
            MsgType::Control => {
                let msg = ControlMsg::parse(payload)?;
                self.with_path(path, |p| p.on_receive(1, header.path_seq, now));
                self.on_control(path, msg, now);
                Received::Control
            }
            // Handshakes belong to the key exchange; loss repair to the
            // data plane, which keeps the copies and the resequencer.
            t @ (MsgType::HandshakeInit
            | MsgType::HandshakeResponse
            | MsgType::HandshakeChallenge
            | MsgType::NoiseInitiation
            | MsgType::NoiseResponse
            | MsgType::NoiseCookieReply
            | MsgType::Nack
            | MsgType::Repair) => return Err(DropReason::Unsupported(t)),
        };
        Ok(received)
    }

    fn on_control(&mut self, via: usize, msg: ControlMsg, now: Instant) {
        if let ControlBody::Ack(result) = msg.body {
            if let Some(ours) = self.control.on_ack(msg.id) {
                self.events
                    .push_back(Event::ControlAnswered { msg: ours, result });
            }
            return;
        }
        match self.control.on_request(msg.id) {
            Incoming::New => self.events.push_back(Event::PeerControl { via, msg }),
            Incoming::Repeat(result) => self.queue_ack(via, &msg, result, now),
            Incoming::Stale => self.queue_ack(via, &msg, Err(Refusal::Refused), now),
        }
    }

    fn queue_ack(
        &mut self,
        via: usize,
        msg: &ControlMsg,
        result: Result<(), Refusal>,
        now: Instant,
    ) {
        let ack = ControlMsg {
            id: msg.id,
            path_id: msg.path_id,
            body: ControlBody::Ack(result),
        };
        self.queue_transmit(Transmit {
            path: via,
            msg_type: MsgType::Control,
            conn_id: self.conn_id,
            timestamp_us: timestamp_us(self.epoch, now),
            body: Payload::Control(ack),
        });
    }

    /// Answers a request the driver got as [`Event::PeerControl`]; the ack
    /// goes back on the path it came on. Repeats of the request are
    /// answered the same way without another event.
    pub fn answer_control(
        &mut self,
        via: usize,
        msg: &ControlMsg,
        result: Result<(), Refusal>,
        now: Instant,
    ) {
        self.control.record_answer(msg.id, result);
        self.queue_ack(via, msg, result, now);
    }

    /// Tells the peer about path `path_id` (added or removed here). The
    /// session repeats the message until the peer answers; the answer
    /// arrives as [`Event::ControlAnswered`] (or [`Event::ControlGaveUp`]).
    /// Returns the message id.
    pub fn send_control(
        &mut self,
        path_id: u16,
        body: ControlBody,
        now: Instant,
    ) -> Result<u64, SessionError> {
        let id = self.control.send(path_id, body, now)?;
        self.flush_control(now);
        Ok(id)
    }

    /// Sends the control messages due at `now` on the best paths: the
    /// usable ones by smoothed RTT, or every path not switched off when
    /// none is usable yet.
    fn flush_control(&mut self, now: Instant) {
        while let Some(due) = self.control.poll_due(now) {
            let msg = match due {
                Due::Send(m) => m,
                Due::GaveUp(msg) => {
                    self.events.push_back(Event::ControlGaveUp { msg });
                    continue;
                }
            };
            let mut via: Vec<(Duration, usize)> = self
                .paths()
                .filter(|(_, p)| p.usable())
                .map(|(i, p)| (p.rtt().smoothed().unwrap_or(Duration::MAX), i))
                .collect();
            if via.is_empty() {
                via = self
                    .paths()
                    .filter(|(_, p)| p.params().admin != AdminStatus::Down)
                    .map(|(i, _)| (Duration::MAX, i))
                    .collect();
            }
            via.sort_unstable();
            for &(_, path) in via.iter().take(CONTROL_FANOUT) {
                self.queue_transmit(Transmit {
                    path,
                    msg_type: MsgType::Control,
                    conn_id: self.conn_id,
                    timestamp_us: timestamp_us(self.epoch, now),
                    body: Payload::Control(msg),
                });
            }
        }
    }

    fn on_probe(&mut self, path: usize, header: &Header, body: &Keepalive, now: Instant) {
        self.with_path(path, |p| {
            // Count the probe before answering: the reply's report then
            // includes it (else every reply would report one datagram lost),
            // and says "I hear you" since the path just proved itself.
            p.on_receive(1, header.path_seq, now);
            p.on_report(&body.report, now);
        });
        let Some(p) = self.path(path) else {
            return;
        };
        let reply = Transmit {
            path,
            msg_type: MsgType::ProbeReply,
            conn_id: self.conn_id,
            timestamp_us: timestamp_us(self.epoch, now),
            body: Payload::Keepalive(Keepalive {
                echo_timestamp_us: header.timestamp_us,
                echo_path_seq: header.path_seq,
                report: p.report(),
            }),
        };
        self.queue_transmit(reply);
    }

    fn on_probe_reply(&mut self, path: usize, body: &Keepalive, now: Instant) {
        let sent = body.echo_timestamp_us;
        let rtt_us = timestamp_us(self.epoch, now).wrapping_sub(sent);
        self.with_path(path, |p| {
            p.on_rtt_sample(Duration::from_micros(u64::from(rtt_us)));
            p.on_report(&body.report, now);
        });
    }

    fn queue_transmit(&mut self, t: Transmit) {
        if self.transmits.len() >= MAX_QUEUED_TRANSMITS {
            self.dropped_transmits += 1;
        } else {
            self.transmits.push_back(t);
        }
    }

    /// Takes in data datagrams the data plane received on `path`.
    pub fn handle_data_summary(
        &mut self,
        path: usize,
        summary: DataSummary,
    ) -> Result<(), SessionError> {
        self.with_path(path, |p| p.on_data(&summary))
            .ok_or(SessionError::UnknownPath(path))
    }

    /// Changes a path's parameters (weights, status, timers).
    pub fn set_path_params(
        &mut self,
        path: usize,
        params: PathParams,
        now: Instant,
    ) -> Result<(), SessionError> {
        self.with_path(path, |p| p.set_params(params, now))
            .ok_or(SessionError::UnknownPath(path))
    }

    /// Tells the session that path `path`'s local link (interface or
    /// address) went down or came back (see [`Path::set_link`]): down, it
    /// carries nothing from now on; up, it probes at the next
    /// [`Session::handle_timeout`]. Returns whether anything changed.
    pub fn set_path_link(
        &mut self,
        path: usize,
        up: bool,
        now: Instant,
    ) -> Result<bool, SessionError> {
        self.with_path(path, |p| p.set_link(up, now))
            .ok_or(SessionError::UnknownPath(path))
    }

    /// The next time [`Session::handle_timeout`] must run.
    pub fn poll_timeout(&self) -> Option<Timer> {
        let control = self.control.next_timer().map(|at| Timer {
            at,
            path: None,
            kind: TimerKind::Control,
        });
        self.paths()
            .filter_map(|(i, p)| {
                p.next_timer().map(|(at, kind)| Timer {
                    at,
                    path: Some(i),
                    kind,
                })
            })
            .chain(control)
            .min_by_key(|t| (t.at, t.path))
    }

    /// Runs every timer due at `now`: dead timers, then probes and
    /// feedbacks.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now_us = timestamp_us(self.epoch, now);
        for i in 0..self.paths.len() {
            let probe_due = self.with_path(i, |p| p.on_timeout(now)).unwrap_or(false);
            if probe_due {
                self.probe_now(i, now);
            }
            let feedback = self
                .paths
                .get_mut(i)
                .and_then(Option::as_mut)
                .and_then(|p| p.take_feedback(now, now_us));
            if let Some(fb) = feedback {
                self.queue_transmit(Transmit {
                    path: i,
                    msg_type: MsgType::Feedback,
                    conn_id: self.conn_id,
                    timestamp_us: now_us,
                    body: Payload::Feedback(fb),
                });
            }
        }
        self.flush_control(now);
    }

    /// Records that the data plane sent data on `path` at `at` (the daemon
    /// reports the latest send once per round): the peer then owes an
    /// answer, and a path that stays silent becomes suspect (see
    /// [`crate::path`]). Unknown paths are ignored.
    pub fn on_data_sent(&mut self, path: usize, at: Instant) {
        if self.with_path(path, |p| p.on_data_sent(at)).is_none() {
            return;
        }
        if let Some(h) = self.handovers.data_sent(path, at) {
            self.events.push_back(Event::Handover(h));
        }
    }

    /// The latest completed handover (see [`HandoverTracker`]).
    pub fn last_handover(&self) -> Option<Handover> {
        self.handovers.last()
    }

    /// Handovers completed so far.
    pub fn handovers(&self) -> u64 {
        self.handovers.count()
    }

    /// Queues a probe on `path` now, besides the timer's: the daemon sends
    /// one right after switching to new session keys, so that the peer sees
    /// a datagram sealed with them at once (key confirmation). Unknown
    /// paths are ignored.
    pub fn probe_now(&mut self, path: usize, now: Instant) {
        let Some(report) = self.path(path).map(Path::report) else {
            return;
        };
        self.queue_transmit(Transmit {
            path,
            msg_type: MsgType::Probe,
            conn_id: self.conn_id,
            timestamp_us: timestamp_us(self.epoch, now),
            body: Payload::Keepalive(Keepalive {
                echo_timestamp_us: 0,
                echo_path_seq: 0,
                report,
            }),
        });
    }

    /// The next datagram to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests;
