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
//! The daemon may also know that a path cannot work: its network interface
//! lost its link or its local address ([`Path::set_link`]). Such a path is
//! [`Liveness::Down`] at once, sends and accepts nothing, and when the link
//! returns probes at once and then every [`RELINK_PROBE_INTERVAL`] until it
//! is usable again (the first probes may be lost while the link settles).
//!
//! A path can also fail in one direction only. Every probe and reply
//! carries the sender's "I hear you" bit; a path whose peer does not hear us
//! is not used for data even though we hear the peer.
//!
//! # Suspect: silence relative to the path's RTT
//!
//! The dead timer (seconds) is far too slow for a path that carries data:
//! a WiFi that fades without any error would swallow every packet sent on
//! it until then. But a busy path is never silent for long: while data
//! arrives, the peer sends feedback every quarter RTT. So once we have sent
//! data on a path and heard nothing for [`Path::suspect_after`] (about
//! three RTTs plus four deviations and a feedback interval, at least
//! [`SUSPECT_MIN`]), the path is [`Liveness::Suspect`] at once: it takes
//! no new data (backups take over when every primary is suspect), it is
//! probed every [`Path::suspect_probe_interval`] instead of every
//! `keepalive`, and the first thing received makes it `Up` again. The dead
//! timer still decides when it is `Down`. An idle path is never suspect:
//! nobody owes it an answer.

mod delivery;
mod loss;
mod recent_min;
mod rtt;

pub use delivery::{DeliveryEstimator, DeliverySample, MIN_RATE_BPS};
pub use loss::LossEstimator;
pub use rtt::RttEstimator;

use std::time::{Duration, Instant};

use crate::seq::{below_half, seq_after, seq_before};
use crate::timer::TimerKind;
use crate::wire::{Feedback, PathReport};
use recent_min::RecentMin;
pub use recent_min::{CONTROL_OWD_WINDOW, STANDING_OWD_WINDOW};

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
    /// Up, but data went out and nothing came back for a few RTTs.
    Suspect,
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
    /// Silent for a few RTTs while carrying data: no new data, probed fast.
    Suspect,
}

impl PathState {
    /// Lower-case name as used in status output and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            PathState::Up => "up",
            PathState::Down => "down",
            PathState::Backup => "backup",
            PathState::Probing => "probing",
            PathState::Suspect => "suspect",
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

/// Liveness and measurements of one path; owned by the session
/// (`Session`).
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
    /// Loss in feedback intervals without a standing queue: what the link
    /// loses by itself, not what a full buffer drops.
    random_loss: LossEstimator,
    /// When the last feedback arrived.
    last_feedback: Option<Instant>,
    /// The peer's data as received here: the latest lowest one-way delay
    /// (µs, wrapping, with the clock offset) and when.
    rx_owd: Option<(u32, Instant)>,
    /// The lowest one-way delay of the peer's probes and feedback over the
    /// last one to two [`CONTROL_OWD_WINDOW`]s (see
    /// [`Path::on_control_owd`]).
    control_owd: RecentMin,
    /// The lowest one-way delay of anything from the peer over the last
    /// one to two [`STANDING_OWD_WINDOW`]s (see [`Path::rx_owd_standing`]).
    standing_owd: RecentMin,
    /// When a feedback last found a standing queue.
    last_queue: Option<Instant>,
    /// Losses are congestion until the peer's highest path sequence
    /// number passes this: what was in flight when the queue stood.
    congestion_until_seq: Option<u32>,
    /// The peer's highest path sequence number about one loss grace ago
    /// (its advance since is what is in flight), and when.
    seq_mark: Option<(u32, Instant)>,
    /// First data sent after the last thing received: from then on the
    /// peer owes us an answer.
    unanswered_since: Option<Instant>,
    /// The latest data send the daemon reported.
    last_data_sent: Option<Instant>,
    delivery: DeliveryEstimator,
    /// Receive side of feedback: what we tell the peer about its data.
    fb: FeedbackState,
    /// The local link or address is gone (see [`Path::set_link`]).
    link_down: bool,
    /// Fast probes left after the link came back.
    relink_probes: u8,
}

/// Interval of the probes a path sends after its link came back, until it
/// is usable: short enough to be back well within a second when the first
/// probe is lost to a link still settling.
pub const RELINK_PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// Fast probes after the link came back (with [`RELINK_PROBE_INTERVAL`]:
/// two seconds), then the keepalive takes over.
pub const RELINK_PROBES: u8 = 20;

/// What the receiving side gathers for its next feedback on a path.
#[derive(Debug, Clone, Copy, Default)]
struct FeedbackState {
    /// Data bytes received (wrapping).
    rx_bytes: u64,
    /// Arrival of the newest data datagram and its sender timestamp.
    newest: Option<(Instant, u32)>,
    /// Lowest one-way delay since the last feedback.
    owd_min_us: Option<u32>,
    /// Data arrived since the last feedback.
    pending: bool,
    /// When the last feedback was sent.
    last_sent: Option<Instant>,
}

/// A path is never suspect after less silence than this (feedback takes a
/// control-loop round or two to leave the peer).
pub const SUSPECT_MIN: Duration = Duration::from_millis(60);

/// Fastest probing of a suspect path.
pub const SUSPECT_PROBE_MIN: Duration = Duration::from_millis(20);

/// How long the loss of a path without feedback is remembered.
pub const LOSS_MEMORY: Duration = Duration::from_secs(2);

/// Datagrams a loss estimate must cover before the scheduler acts on it.
pub const LOSS_MIN_PACKETS: f64 = 200.0;

/// Shortest and longest interval between two feedbacks on a busy path
/// (a quarter of its smoothed RTT in between).
pub const FEEDBACK_MIN_INTERVAL: Duration = Duration::from_millis(10);
/// See [`FEEDBACK_MIN_INTERVAL`].
pub const FEEDBACK_MAX_INTERVAL: Duration = Duration::from_millis(100);

/// Data received on a path, as the data plane sums it up for the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSummary {
    /// Datagrams.
    pub packets: u32,
    /// Highest path sequence number among them.
    pub highest_path_seq: u32,
    /// Their wire bytes.
    pub bytes: u64,
    /// When the newest arrived.
    pub last_rx: Instant,
    /// The sender timestamp of the newest.
    pub last_timestamp_us: u32,
    /// Lowest `arrival − sender timestamp` (µs, wrapping) among them.
    pub owd_min_us: Option<u32>,
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
            random_loss: LossEstimator::default(),
            last_feedback: None,
            rx_owd: None,
            control_owd: RecentMin::default(),
            standing_owd: RecentMin::default(),
            last_queue: None,
            congestion_until_seq: None,
            seq_mark: None,
            unanswered_since: None,
            last_data_sent: None,
            delivery: DeliveryEstimator::default(),
            fb: FeedbackState::default(),
            link_down: false,
            relink_probes: 0,
        }
    }

    /// The local link (interface up and running, local address present)
    /// went away (`up == false`) or came back. Down: the path is
    /// [`Liveness::Down`] at once, stops probing and ignores what is still
    /// reported received. Up: it starts probing afresh, the first probe at
    /// `now`. Returns whether anything changed.
    pub fn set_link(&mut self, up: bool, now: Instant) -> bool {
        if up != self.link_down {
            return false;
        }
        self.link_down = !up;
        self.last_change = now;
        if up {
            self.liveness = Liveness::Probing;
            self.probing_since = now;
            self.relink_probes = RELINK_PROBES;
            self.next_probe = (self.params.admin != AdminStatus::Down).then_some(now);
        } else {
            self.liveness = Liveness::Down;
            self.peer_hears_us = false;
            self.relink_probes = 0;
            self.next_probe = None;
            self.fb.pending = false;
        }
        true
    }

    /// Whether the local link is down (see [`Path::set_link`]).
    pub fn link_down(&self) -> bool {
        self.link_down
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
            (true, false) if !self.link_down => self.next_probe = Some(now),
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
            (_, Liveness::Suspect) => PathState::Suspect,
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
            && !self.link_down
    }

    /// Records that data was sent on the path at `at` (the daemon reports
    /// it once per round): if nothing was received since, the peer owes an
    /// answer from then on.
    pub fn on_data_sent(&mut self, at: Instant) {
        if self.last_data_sent.is_none_or(|t| at > t) {
            self.last_data_sent = Some(at);
        }
        if self.unanswered_since.is_none() && self.last_rx.is_none_or(|rx| at > rx) {
            self.unanswered_since = Some(at);
        }
    }

    /// Silence after sending data that makes the path suspect: three
    /// smoothed RTTs, four deviations and a feedback interval, at least
    /// [`SUSPECT_MIN`], at most the dead timer.
    pub fn suspect_after(&self) -> Duration {
        let srtt = self.rtt.smoothed().unwrap_or(Duration::from_millis(100));
        let feedback = (srtt / 4).clamp(FEEDBACK_MIN_INTERVAL, FEEDBACK_MAX_INTERVAL);
        (srtt * 3 + self.rtt.variation() * 4 + feedback)
            .max(SUSPECT_MIN)
            .min(self.params.dead_timer)
    }

    /// How often a suspect path is probed: every smoothed RTT, at least
    /// [`SUSPECT_PROBE_MIN`] apart, at most `keepalive`.
    pub fn suspect_probe_interval(&self) -> Duration {
        self.rtt
            .smoothed()
            .unwrap_or(SUSPECT_PROBE_MIN)
            .max(SUSPECT_PROBE_MIN)
            .min(self.params.keepalive)
    }

    fn suspect_deadline(&self) -> Option<Instant> {
        match self.liveness {
            Liveness::Up => self.unanswered_since.map(|t| t + self.suspect_after()),
            _ => None,
        }
    }

    /// When the reported state last changed.
    pub fn last_change(&self) -> Instant {
        self.last_change
    }

    /// When anything was last received.
    pub fn last_rx(&self) -> Option<Instant> {
        self.last_rx
    }

    /// The latest data send reported with [`Path::on_data_sent`].
    pub fn last_data_sent(&self) -> Option<Instant> {
        self.last_data_sent
    }

    /// RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// Loss estimator (direction we send in).
    pub fn loss(&self) -> &LossEstimator {
        &self.loss
    }

    /// Loss seen while no queue stood (from feedback only): the link's own
    /// loss, which the adaptive scheduler avoids, unlike congestion.
    pub fn random_loss(&self) -> &LossEstimator {
        &self.random_loss
    }

    /// The link's own loss in percent if it is known well enough to act
    /// on: feedback within [`LOSS_MEMORY`] of `now`, over at least
    /// [`LOSS_MIN_PACKETS`] datagrams.
    pub fn current_random_loss(&self, now: Instant) -> Option<f64> {
        let fresh = self
            .last_feedback
            .is_some_and(|t| now.saturating_duration_since(t) <= LOSS_MEMORY);
        (fresh && self.random_loss.expected() >= LOSS_MIN_PACKETS)
            .then(|| self.random_loss.loss_pct())
            .flatten()
    }

    /// Capacity and one-way delay estimator (direction we send in).
    pub fn delivery(&self) -> &DeliveryEstimator {
        &self.delivery
    }

    /// Takes in the peer's feedback on our data: report, RTT sample and
    /// delivery sample. `now_us` is our wire clock now.
    pub fn on_feedback(&mut self, fb: &Feedback, now_us: u32, now: Instant) {
        self.take_report(&fb.report, now);
        let rtt_us = now_us
            .wrapping_sub(fb.echo_timestamp_us)
            .wrapping_sub(fb.echo_delay_us);
        if below_half(rtt_us) && fb.echo_timestamp_us != 0 {
            self.rtt.on_sample(Duration::from_micros(u64::from(rtt_us)));
        }
        let min_rtt = self.rtt.min().unwrap_or_default();
        self.delivery
            .on_feedback(fb, self.rtt.variation(), min_rtt, now);
        // Loss measured long ago says little of the link now: a path left
        // without data (for being lossy) starts afresh when it gets some.
        if self
            .last_feedback
            .is_none_or(|t| now.saturating_duration_since(t) > LOSS_MEMORY)
        {
            self.random_loss = LossEstimator::default();
        }
        self.last_feedback = Some(now);
        // Drops at a full buffer show in the reports late: the lost
        // datagrams count once later ones arrive, which may be long after
        // the queue drained when the scheduler then moves traffic off the
        // path. So everything that was in flight when a queue stood (what
        // the peer received over the last grace, at least 64 datagrams)
        // counts as congestion, and so does whatever is reported within
        // the grace (an RTT, at least 200 ms) after the queue. Reports
        // that are neither are held for a grace before they count: the
        // drops of a short overload can be reported before the feedback
        // that shows its queue.
        let grace = self
            .rtt
            .smoothed()
            .unwrap_or_default()
            .max(Duration::from_millis(200));
        let high = fb.report.rx_highest_path_seq;
        let mark = *self.seq_mark.get_or_insert((high, now));
        if now.saturating_duration_since(mark.1) >= grace {
            self.seq_mark = Some((high, now));
        }
        if self.delivery.queue_standing() {
            self.last_queue = Some(now);
            self.random_loss.drop_held();
            let in_flight = high.wrapping_sub(mark.0).clamp(64, u32::MAX / 4);
            self.congestion_until_seq = Some(high.wrapping_add(in_flight));
        }
        let after_queue = self
            .last_queue
            .is_some_and(|t| now.saturating_duration_since(t) <= grace);
        let in_flight_then = self
            .congestion_until_seq
            .is_some_and(|until| !seq_after(high, until));
        if after_queue || in_flight_then {
            self.random_loss.skip_report(&fb.report, now);
        } else {
            self.congestion_until_seq = None;
            self.random_loss.hold_report(&fb.report, now, grace);
        }
    }

    /// Takes in data the data plane received on this path (counts it like
    /// [`Path::on_receive`] and gathers it for the next feedback).
    pub fn on_data(&mut self, s: &DataSummary) {
        self.on_receive(s.packets, s.highest_path_seq, s.last_rx);
        let fb = &mut self.fb;
        fb.rx_bytes = fb.rx_bytes.wrapping_add(s.bytes);
        if fb.newest.is_none_or(|(at, _)| s.last_rx >= at) {
            fb.newest = Some((s.last_rx, s.last_timestamp_us));
        }
        if let Some(owd) = s.owd_min_us {
            self.rx_owd = Some((owd, s.last_rx));
            self.standing_owd.add(owd, s.last_rx, STANDING_OWD_WINDOW);
            fb.owd_min_us = Some(match fb.owd_min_us {
                Some(m) if seq_before(m, owd) => m,
                _ => owd,
            });
        }
        fb.pending = true;
    }

    /// Takes the one-way delay of a probe, reply or feedback from the peer
    /// (`owd_us` as for data): a path that carries no data still has a
    /// delay to equalise to, so that the tunnel shows one delay whether or
    /// not the slow path is in use at the moment. Data's own samples, when
    /// recent, take precedence.
    ///
    /// An idle path's delay is the lowest control delay of the last one
    /// to two [`CONTROL_OWD_WINDOW`]s, not the latest: control messages
    /// wait behind both endpoints' control loops, and the receiver holds
    /// every flow to the slowest path's delay, so one late probe on an
    /// idle path would set every flow's hold (see
    /// [`Path::rx_owd_standing`] for the paths in use).
    pub fn on_control_owd(&mut self, owd_us: u32, now: Instant) {
        self.standing_owd.add(owd_us, now, STANDING_OWD_WINDOW);
        let low = self.control_owd.add(owd_us, now, CONTROL_OWD_WINDOW);
        let data_recent = self
            .rx_owd
            .is_some_and(|(_, at)| now.saturating_duration_since(at) < Duration::from_secs(1));
        if !data_recent {
            self.rx_owd = Some((low, now));
        }
    }

    /// The latest one-way delay of the peer's data on this path, as
    /// received here (µs, wrapping, with an offset common to the
    /// connection's paths), and when it was measured. The spread of these
    /// over the paths is how long the resequencer must wait.
    pub fn rx_owd(&self) -> Option<(u32, Instant)> {
        self.rx_owd
    }

    /// The delay the path holds to at least, lately: the lowest one-way
    /// delay of anything from the peer (data, probes, feedback) over the
    /// last one to two [`STANDING_OWD_WINDOW`]s, with when it was last
    /// fed; [`Path::rx_owd`] where nothing came that recently.
    ///
    /// The receiver equalises to this on paths that carry little data:
    /// their few samples each carry the jitter of both endpoints' threads
    /// (a receive worker that woke 3 ms late stamps 3 ms more), and the
    /// receiver holds every flow to the slowest path, so one late sample
    /// on a path hardly used set every flow's hold. A queue that stands
    /// for a whole window still counts; what came and went within one
    /// does not.
    pub fn rx_owd_standing(&self, now: Instant) -> Option<(u32, Instant)> {
        self.standing_owd
            .get(now, STANDING_OWD_WINDOW)
            .or(self.rx_owd)
    }

    /// Time between feedbacks while data arrives: a quarter of the RTT.
    fn feedback_interval(&self) -> Duration {
        self.rtt
            .smoothed()
            .map_or(Duration::from_millis(50), |r| r / 4)
            .clamp(FEEDBACK_MIN_INTERVAL, FEEDBACK_MAX_INTERVAL)
    }

    /// When the next feedback is due, if data awaits one.
    pub fn feedback_due(&self) -> Option<Instant> {
        if !self.fb.pending || self.params.admin == AdminStatus::Down || self.link_down {
            return None;
        }
        let newest = self.fb.newest.map(|(at, _)| at)?;
        Some(match self.fb.last_sent {
            Some(t) => (t + self.feedback_interval()).max(newest),
            None => newest,
        })
    }

    /// Builds the feedback due at `now` (our wire clock `now_us`), if any,
    /// and starts gathering the next one.
    pub fn take_feedback(&mut self, now: Instant, now_us: u32) -> Option<Feedback> {
        if self.feedback_due().is_none_or(|t| t > now) {
            return None;
        }
        let (at, ts) = self.fb.newest?;
        let held = now.saturating_duration_since(at);
        let last_rx_us = now_us.wrapping_sub(held.as_micros() as u32);
        let fb = Feedback {
            report: self.report(),
            rx_bytes: self.fb.rx_bytes,
            last_rx_us,
            echo_timestamp_us: ts,
            echo_delay_us: held.as_micros().min(u128::from(u32::MAX)) as u32,
            owd_us: self.fb.owd_min_us.take(),
        };
        self.fb.pending = false;
        self.fb.last_sent = Some(now);
        Some(fb)
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
        if self.unanswered_since.is_some_and(|t| at >= t) {
            self.unanswered_since = None;
        }
        if self.liveness == Liveness::Suspect && !self.link_down {
            // Heard again: back to the keepalive cadence.
            self.next_probe = Some(at + self.params.keepalive);
        }
        if self.liveness != Liveness::Up && !self.link_down {
            self.liveness = Liveness::Up;
            self.last_change = at;
        }
    }

    /// Sends a probe at the next timeout (`now`) unless the path is off or
    /// its link is down; the keepalive cadence resumes after it.
    pub fn probe_now(&mut self, now: Instant) {
        if self.params.admin != AdminStatus::Down && !self.link_down {
            self.next_probe = Some(now);
        }
    }

    /// Takes in the peer's report of this path (from a probe or a reply).
    pub fn on_report(&mut self, report: &PathReport, now: Instant) {
        self.take_report(report, now);
    }

    fn take_report(&mut self, report: &PathReport, now: Instant) {
        if self.peer_hears_us != report.hears_you {
            self.peer_hears_us = report.hears_you;
            self.last_change = now;
        }
        self.peer_weight_in = Some(report.weight_in);
        self.loss.on_report(report, now);
    }

    /// Takes in an RTT sample.
    pub fn on_rtt_sample(&mut self, rtt: Duration) {
        self.rtt.on_sample(rtt);
    }

    /// The earliest timer of this path.
    pub fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        let dead = self.dead_deadline().map(|t| (t, TimerKind::Dead));
        let suspect = self.suspect_deadline().map(|t| (t, TimerKind::Suspect));
        let probe = self.next_probe.map(|t| (t, TimerKind::Probe));
        let feedback = self.feedback_due().map(|t| (t, TimerKind::Feedback));
        [dead, suspect, probe, feedback]
            .into_iter()
            .flatten()
            .min_by_key(|(t, _)| *t)
    }

    fn dead_deadline(&self) -> Option<Instant> {
        match self.liveness {
            Liveness::Up | Liveness::Suspect => self.last_rx.map(|t| t + self.params.dead_timer),
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
            self.unanswered_since = None;
        } else if self.suspect_deadline().is_some_and(|t| now >= t) {
            self.liveness = Liveness::Suspect;
            self.last_change = now;
            // Probe at once, then fast.
            if self.params.admin != AdminStatus::Down {
                self.next_probe = Some(now);
            }
        }
        match self.next_probe {
            Some(t) if now >= t => {
                // After a link came back: fast probes until usable; the
                // first probe sent while usable tells the peer we hear it.
                let fast = self.relink_probes > 0 && !self.usable();
                self.relink_probes = if fast { self.relink_probes - 1 } else { 0 };
                let wait = if self.liveness == Liveness::Suspect {
                    self.suspect_probe_interval()
                } else if fast {
                    RELINK_PROBE_INTERVAL.min(self.params.keepalive)
                } else {
                    self.params.keepalive
                };
                self.next_probe = Some(now + wait);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
