//! What the adaptive scheduler is told about each path: rate, delay above
//! the fastest path, queue cap, loss, and how often it probes.
//!
//! The session owns the measurements (delivery rate, one-way delays,
//! queues, loss); [`Session::path_models`] turns them into the
//! [`PathModel`]s the daemon publishes to its transmit workers once per
//! control round.

use crate::seq::{seq_before, seq_excess};
use std::time::{Duration, Instant};

use crate::path::Path;
use crate::sched::{level_queue, ps_per_byte, PathModel, LEVEL_DEADBAND_NS};
use crate::session::Session;

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
/// connection for it. A floor far above LAN-like RTTs (0.1 ms) would make
/// probes stand queues of milliseconds on one path after another; 4 ms keeps
/// a probe's queue near 1 ms (measured:
/// docs/results/2026-11-26-like-paths-overflow-probes.md).
pub const PROBE_PHASE_MIN: Duration = Duration::from_millis(4);

/// Longest probing phase.
pub const PROBE_PHASE_MAX: Duration = Duration::from_millis(200);

impl Session {
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
            .reduce(|a, b| if seq_before(a, b) { a } else { b });
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
                    Duration::from_micros(u64::from(seq_excess(own, base)))
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
}
