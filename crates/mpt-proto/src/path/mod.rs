//! One path of a connection: liveness, keepalive timing, RTT and loss.
//!
//! Liveness follows SPEC section 3. A path starts in
//! [`Liveness::Probing`] and probes at once. Anything received on it makes
//! it [`Liveness::Up`]; nothing received for `dead_timer` makes it
//! [`Liveness::Down`]. Probes go out every `keepalive` in every state (MPT
//! probed only idle paths; probing always keeps RTT and loss fresh under
//! load for one small datagram per keepalive, and a down path must keep
//! probing to be found again).
//!
//! A path can also fail in one direction only. Every probe and reply
//! carries the sender's "I hear you" bit; a path whose peer does not hear us
//! is not used for data even though we hear the peer.

mod loss;
mod rtt;

pub use loss::LossEstimator;
pub use rtt::RttEstimator;

use std::time::{Duration, Instant};

use crate::timer::TimerKind;
use crate::wire::PathReport;

/// What the operator configured for a path (`status` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdminStatus {
    /// Carries traffic when alive.
    Up,
    /// Switched off: no data, no probes.
    Down,
    /// Carries traffic only when no `Up` path of the connection is alive.
    Backup,
}

/// Whether the path is heard from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// Nothing received yet since start.
    Probing,
    /// Something received within the dead timer.
    Up,
    /// Nothing received for the dead timer.
    Down,
}

/// The state reported to operators (`mpt status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathState {
    /// Alive and carrying traffic.
    Up,
    /// Dead or switched off.
    Down,
    /// Alive, held in reserve.
    Backup,
    /// Not (yet) confirmed in both directions.
    Probing,
}

impl PathState {
    /// Lower-case name as used in status output and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            PathState::Up => "up",
            PathState::Down => "down",
            PathState::Backup => "backup",
            PathState::Probing => "probing",
        }
    }
}

/// Timing and scheduling parameters of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathParams {
    /// Probe interval.
    pub keepalive: Duration,
    /// Silence after which the path is down.
    pub dead_timer: Duration,
    /// Share of the packets we send on this path.
    pub weight_out: u32,
    /// Share we ask the peer to send on it.
    pub weight_in: u16,
    /// Packets sent back to back per scheduling turn.
    pub window: u32,
    /// Configured status.
    pub admin: AdminStatus,
}

/// Liveness and measurements of one path; owned by a [`crate::Session`].
#[derive(Debug, Clone)]
pub struct Path {
    params: PathParams,
    liveness: Liveness,
    /// When `liveness` (or the reported state) last changed.
    last_change: Instant,
    /// Start of the current probing phase, for the dead timer of a path that
    /// never answered.
    probing_since: Instant,
    last_rx: Option<Instant>,
    next_probe: Option<Instant>,
    peer_hears_us: bool,
    peer_weight_in: Option<u16>,
    rx_packets: u32,
    rx_highest_path_seq: Option<u32>,
    rtt: RttEstimator,
    loss: LossEstimator,
}

impl Path {
    /// A new path that will probe at `now`.
    pub fn new(params: PathParams, now: Instant) -> Path {
        let next_probe = (params.admin != AdminStatus::Down).then_some(now);
        Path {
            params,
            liveness: Liveness::Probing,
            last_change: now,
            probing_since: now,
            last_rx: None,
            next_probe,
            peer_hears_us: false,
            peer_weight_in: None,
            rx_packets: 0,
            rx_highest_path_seq: None,
            rtt: RttEstimator::default(),
            loss: LossEstimator::default(),
        }
    }

    /// The configured parameters.
    pub fn params(&self) -> &PathParams {
        &self.params
    }

    /// Replaces the parameters (weights, timers, status) at run time.
    pub fn set_params(&mut self, params: PathParams, now: Instant) {
        let was_off = self.params.admin == AdminStatus::Down;
        self.params = params;
        match (was_off, params.admin == AdminStatus::Down) {
            (true, false) => self.next_probe = Some(now),
            (false, true) => self.next_probe = None,
            _ => {}
        }
        self.last_change = now;
    }

    /// Liveness as seen from here.
    pub fn liveness(&self) -> Liveness {
        self.liveness
    }

    /// Whether the peer said it hears us in its latest report.
    pub fn peer_hears_us(&self) -> bool {
        self.peer_hears_us
    }

    /// The operator-facing state.
    pub fn state(&self) -> PathState {
        match (self.params.admin, self.liveness) {
            (AdminStatus::Down, _) | (_, Liveness::Down) => PathState::Down,
            (_, Liveness::Probing) => PathState::Probing,
            (_, Liveness::Up) if !self.peer_hears_us => PathState::Probing,
            (AdminStatus::Backup, Liveness::Up) => PathState::Backup,
            (AdminStatus::Up, Liveness::Up) => PathState::Up,
        }
    }

    /// Whether data may be sent on this path (as a primary or a backup).
    pub fn usable(&self) -> bool {
        self.liveness == Liveness::Up
            && self.peer_hears_us
            && self.params.admin != AdminStatus::Down
    }

    /// When the reported state last changed.
    pub fn last_change(&self) -> Instant {
        self.last_change
    }

    /// When anything was last received.
    pub fn last_rx(&self) -> Option<Instant> {
        self.last_rx
    }

    /// RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// Loss estimator (direction we send in).
    pub fn loss(&self) -> &LossEstimator {
        &self.loss
    }

    /// The weight the peer asks for on this path, once told.
    pub fn peer_weight_in(&self) -> Option<u16> {
        self.peer_weight_in
    }

    /// Our receive report for the peer.
    pub fn report(&self) -> PathReport {
        PathReport {
            rx_packets: self.rx_packets,
            rx_highest_path_seq: self.rx_highest_path_seq.unwrap_or(0),
            weight_in: self.params.weight_in,
            hears_you: self.liveness == Liveness::Up,
        }
    }

    /// Records `count` datagrams received up to `at`, the highest path
    /// sequence among them being `highest`.
    pub fn on_receive(&mut self, count: u32, highest: u32, at: Instant) {
        self.rx_packets = self.rx_packets.wrapping_add(count);
        self.rx_highest_path_seq = Some(match self.rx_highest_path_seq {
            Some(prev) if seq_after(prev, highest) => prev,
            _ => highest,
        });
        if self.last_rx.is_none_or(|prev| at > prev) {
            self.last_rx = Some(at);
        }
        if self.liveness != Liveness::Up {
            self.liveness = Liveness::Up;
            self.last_change = at;
        }
    }

    /// Takes in the peer's report of this path.
    pub fn on_report(&mut self, report: &PathReport, now: Instant) {
        if self.peer_hears_us != report.hears_you {
            self.peer_hears_us = report.hears_you;
            self.last_change = now;
        }
        self.peer_weight_in = Some(report.weight_in);
        self.loss.on_report(report);
    }

    /// Takes in an RTT sample.
    pub fn on_rtt_sample(&mut self, rtt: Duration) {
        self.rtt.on_sample(rtt);
    }

    /// The earliest timer of this path.
    pub fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        let dead = self.dead_deadline().map(|t| (t, TimerKind::Dead));
        let probe = self.next_probe.map(|t| (t, TimerKind::Probe));
        match (dead, probe) {
            (Some(d), Some(p)) => Some(if d.0 <= p.0 { d } else { p }),
            (d, p) => d.or(p),
        }
    }

    fn dead_deadline(&self) -> Option<Instant> {
        match self.liveness {
            Liveness::Up => self.last_rx.map(|t| t + self.params.dead_timer),
            Liveness::Probing => Some(self.probing_since + self.params.dead_timer),
            Liveness::Down => None,
        }
    }

    /// Runs the timers due at `now`. Returns whether a probe must be sent.
    pub fn on_timeout(&mut self, now: Instant) -> bool {
        if self.dead_deadline().is_some_and(|t| now >= t) {
            self.liveness = Liveness::Down;
            self.peer_hears_us = false;
            self.last_change = now;
        }
        match self.next_probe {
            Some(t) if now >= t => {
                self.next_probe = Some(now + self.params.keepalive);
                true
            }
            _ => false,
        }
    }
}

/// Whether wrapping sequence number `a` is after `b`.
pub(crate) fn seq_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && d < u32::MAX / 2
}

#[cfg(test)]
mod tests;
