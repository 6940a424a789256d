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
//!    [`Session::eligibility`] to the schedulers;
//! 4. once per round, publish [`Session::path_models`] to the transmit
//!    workers and [`Session::timing_plan`] (the resequencer's waits and
//!    the delay data is held to, see [`timing`]) to the receive workers.
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
//!
//! The parts, one concern each: this file holds the session's state, its
//! paths and the input and timer handling; `peer_control` the control
//! messages; `models` what the adaptive scheduler is told of each path;
//! [`timing`] the receiver's timing policy; `handover` the handover gaps;
//! `transmit`, `event` and `error` what the session hands its driver.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

mod error;
mod event;
mod handover;
mod models;
mod peer_control;
pub mod timing;
mod transmit;

pub use error::{DropReason, SessionError};
pub use event::{Event, Received};
pub use handover::{Handover, HandoverTracker};
pub use models::{LOSSY_PCT, LOSSY_REPAIRED_PCT, PROBE_PHASE_MAX, PROBE_PHASE_MIN};
pub use transmit::{timestamp_us, Payload, Transmit};

use crate::control::ControlChannel;
pub use crate::path::DataSummary;
use crate::path::{AdminStatus, Liveness, Path, PathParams};
use crate::sched::{Eligibility, MAX_PATHS};
use crate::timer::{Timer, TimerKind};
use crate::wire::{ControlMsg, Feedback, Flags, Header, Keepalive, MsgType, HEADER_LEN};

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
