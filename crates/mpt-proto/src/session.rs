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

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::error::{DecodeError, EncodeError};
use crate::path::{AdminStatus, Path, PathParams, PathState};
use crate::sched::{Eligibility, MAX_PATHS};
use crate::timer::Timer;
use crate::wire::{Flags, Header, Keepalive, MsgType, HEADER_LEN};

/// Outgoing datagrams a session may queue before it drops new probe
/// replies: far more than the paths' probes per keepalive round, small
/// enough that a probe flood cannot grow memory.
const MAX_QUEUED_TRANSMITS: usize = 4 * MAX_PATHS;

/// How a session is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Connection id carried in every header.
    pub conn_id: u32,
    /// The paths, in index order.
    pub paths: Vec<PathParams>,
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
}

/// Something an operator wants to know about.
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
}

/// Data datagrams the data plane received on one path since the last
/// summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSummary {
    /// How many.
    pub packets: u32,
    /// Highest path sequence number among them.
    pub highest_path_seq: u32,
    /// When the last one arrived.
    pub last_rx: Instant,
}

/// A datagram the session wants sent. The caller allocates the sequence
/// numbers (the data plane shares those counters) and emits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Path index to send on.
    pub path: usize,
    /// Probe or probe reply.
    pub msg_type: MsgType,
    /// Connection id.
    pub conn_id: u32,
    /// Send timestamp.
    pub timestamp_us: u32,
    /// Body.
    pub body: Keepalive,
}

impl Transmit {
    /// Encoded length.
    pub const LEN: usize = HEADER_LEN + Keepalive::LEN;

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
        self.body
            .emit(buf.get_mut(HEADER_LEN..).unwrap_or_default())?;
        Ok(Self::LEN)
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
    paths: Vec<Path>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    dropped_transmits: u64,
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
                .map(|p| Path::new(p, now))
                .collect(),
            transmits: VecDeque::with_capacity(MAX_QUEUED_TRANSMITS),
            events: VecDeque::new(),
            dropped_transmits: 0,
        })
    }

    /// Connection id.
    pub fn conn_id(&self) -> u32 {
        self.conn_id
    }

    /// The instant wire timestamps count from.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// The paths, by index.
    pub fn paths(&self) -> &[Path] {
        &self.paths
    }

    /// Probe replies not queued because the queue was full.
    pub fn dropped_transmits(&self) -> u64 {
        self.dropped_transmits
    }

    /// Which paths may carry data now.
    pub fn eligibility(&self) -> Eligibility {
        let mut e = Eligibility::default();
        for (i, p) in self.paths.iter().enumerate().filter(|(_, p)| p.usable()) {
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
        let path = self.paths.get_mut(i)?;
        let from = path.state();
        let r = f(path);
        let to = path.state();
        if from != to {
            self.events
                .push_back(Event::PathStateChanged { path: i, from, to });
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
        if path >= self.paths.len() {
            return Err(DropReason::UnknownPath(path));
        }
        if header.flags.contains(Flags::SEALED) {
            return Err(DropReason::Sealed);
        }
        let received = match header.msg_type {
            MsgType::Data => {
                self.with_path(path, |p| p.on_receive(1, header.path_seq, now));
                Received::Data(payload)
            }
            MsgType::Probe | MsgType::ProbeReply => {
                let body = Keepalive::parse(payload)?;
                if header.msg_type == MsgType::Probe {
                    self.on_probe(path, header, &body, now);
                    Received::Probe
                } else {
                    self.with_path(path, |p| p.on_receive(1, header.path_seq, now));
                    self.on_probe_reply(path, &body, now);
                    Received::ProbeReply
                }
            }
            t @ (MsgType::Control | MsgType::HandshakeInit | MsgType::HandshakeResponse) => {
                return Err(DropReason::Unsupported(t))
            }
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
        let Some(p) = self.paths.get(path) else {
            return;
        };
        let reply = Transmit {
            path,
            msg_type: MsgType::ProbeReply,
            conn_id: self.conn_id,
            timestamp_us: timestamp_us(self.epoch, now),
            body: Keepalive {
                echo_timestamp_us: header.timestamp_us,
                echo_path_seq: header.path_seq,
                report: p.report(),
            },
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
        self.with_path(path, |p| {
            p.on_receive(summary.packets, summary.highest_path_seq, summary.last_rx)
        })
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

    /// The next time [`Session::handle_timeout`] must run.
    pub fn poll_timeout(&self) -> Option<Timer> {
        self.paths
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.next_timer().map(|(at, kind)| Timer { at, path: i, kind }))
            .min_by_key(|t| (t.at, t.path))
    }

    /// Runs every timer due at `now`: dead timers, then probes.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.paths.len() {
            let probe_due = self.with_path(i, |p| p.on_timeout(now)).unwrap_or(false);
            if probe_due {
                let report = self.paths[i].report();
                self.queue_transmit(Transmit {
                    path: i,
                    msg_type: MsgType::Probe,
                    conn_id: self.conn_id,
                    timestamp_us: timestamp_us(self.epoch, now),
                    body: Keepalive {
                        echo_timestamp_us: 0,
                        echo_path_seq: 0,
                        report,
                    },
                });
            }
        }
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
