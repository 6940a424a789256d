//! The sans-IO link model: one direction of an emulated link.
//!
//! [`LinkModel::handle_packet`] takes a packet size and its arrival time and
//! returns either a departure time or a drop reason. It never reads a clock
//! and never sleeps, so every property (pacing, queue limit, delay and jitter
//! ordering, loss, outages, relay custody, traces) is unit-tested in virtual
//! time with a seed; the real-time driver (`wire.rs`) only has to hold each
//! packet until its departure.
//!
//! A packet goes through these stages, in this order:
//!
//! 1. **Availability.** Transmission can start at `max(arrival, end of the
//!    previous transmission)`. If the link is down then (outage schedule, or a
//!    trace step with rate 0), a plain link drops the packet (`outage`); a
//!    relay (DTN custody) keeps it and starts it when the contact returns.
//! 2. **Buffer limit** (tail drop). The backlog is the bytes whose
//!    transmission has not ended at the arrival time. The limit is `queue`,
//!    or, in relay mode, the custody store `relay` (it replaces the queue).
//! 3. **Serialization** at the rate in force when transmission starts
//!    ([`Pacer`]: absolute timeline, errors do not accumulate).
//! 4. **Loss** (Bernoulli / Gilbert-Elliott). A lost packet has used the link:
//!    it is corrupted in flight, as on a real radio link, so it still takes
//!    its serialization time.
//! 5. **Propagation**: delay (configured or traced) plus jitter. Unless
//!    `reorder` is set, a departure is never earlier than the previous one
//!    (order-preserving jitter, which biases the mean delay up a little when
//!    jitter is large compared with the packet spacing).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::loss::{LossConfig, LossModel};
use super::pacer::Pacer;
use super::rng::{splitmix64, Rng};
use super::schedule::Schedule;
use super::trace::Trace;

/// Default queue limit when none is given: 1000 full-size Ethernet frames,
/// like Linux's default `txqueuelen` of 1000 packets.
pub const DEFAULT_QUEUE_BYTES: u64 = 1_514_000;

/// How many outage edges [`LinkModel`] will skip looking for an up period
/// before calling the link down for good. Each step moves past one window or
/// cycle, so this bounds the work per packet for pathological schedules.
const MAX_EDGE_STEPS: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JitterDist {
    /// Uniform in `[-jitter, +jitter]`.
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
}

impl std::str::FromStr for JitterDist {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "uniform" => Ok(JitterDist::Uniform),
            "normal" => Ok(JitterDist::Normal),
            _ => Err(format!(
                "invalid jitter distribution {s:?}: expected uniform or normal"
            )),
        }
    }
}

/// Validated configuration of one direction.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LinkConfig {
    /// bit/s, on whole Ethernet frames; `None` = no rate limit.
    pub rate: Option<u64>,
    #[serde(with = "super::serde_duration")]
    pub delay: Duration,
    #[serde(with = "super::serde_duration")]
    pub jitter: Duration,
    pub jitter_dist: JitterDist,
    /// Let jitter reorder packets.
    pub reorder: bool,
    pub loss: LossConfig,
    /// Tail-drop limit of the transmit backlog, bytes.
    pub queue: u64,
    pub schedule: Schedule,
    /// Store-and-forward custody store, bytes; `None` = plain link.
    pub relay: Option<u64>,
    pub trace: Option<Trace>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_dist: JitterDist::Uniform,
            reorder: false,
            loss: LossConfig::default(),
            queue: DEFAULT_QUEUE_BYTES,
            schedule: Schedule::default(),
            relay: None,
            trace: None,
        }
    }
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Transmit backlog over the queue limit.
    Queue,
    /// Bernoulli or Gilbert-Elliott loss.
    Loss,
    /// Link down and not in relay mode.
    Outage,
    /// Relay mode and the custody store is full.
    RelayFull,
}

/// The schedule of a forwarded packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    /// When the packet must leave the emulator.
    pub departure: Instant,
    pub tx_start: Instant,
    pub tx_end: Instant,
    /// Transmission started exactly when the previous forwarded packet's
    /// ended: the link was busy, so the gap between the two departures is a
    /// sample of the link rate.
    pub back_to_back: bool,
    /// Held in custody over an outage (relay mode): arrived while the link
    /// was down, or had to wait for the contact to return.
    pub relayed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Forward(Scheduled),
    Drop(DropReason),
}

/// One direction of an emulated link. See the module docs for the stages.
#[derive(Debug, Clone)]
pub struct LinkModel {
    cfg: LinkConfig,
    epoch: Instant,
    pacer: Pacer,
    /// (transmission end, bytes) of packets still in the transmit backlog,
    /// in transmission order.
    backlog: VecDeque<(Instant, u64)>,
    backlog_bytes: u64,
    loss: LossModel,
    jitter_rng: Rng,
    last_departure: Option<Instant>,
    prev_forward_end: Option<Instant>,
}

impl LinkModel {
    /// `epoch` is time zero of the outage schedule and the trace; `seed`
    /// fixes loss and jitter.
    pub fn new(cfg: LinkConfig, epoch: Instant, seed: u64) -> Self {
        // Separate streams so that jitter draws do not shift the loss pattern.
        let mut sm = seed;
        let loss_seed = splitmix64(&mut sm);
        let jitter_seed = splitmix64(&mut sm);
        LinkModel {
            loss: LossModel::new(cfg.loss, loss_seed),
            jitter_rng: Rng::new(jitter_seed),
            cfg,
            epoch,
            pacer: Pacer::new(),
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            last_departure: None,
            prev_forward_end: None,
        }
    }

    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    fn offset(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.epoch)
    }

    /// Is the link up at `at` (schedule and trace)? A gap between the
    /// delivery opportunities of a Mahimahi trace is not an outage.
    pub fn is_up(&self, at: Instant) -> bool {
        let t = self.offset(at);
        self.cfg.schedule.is_up(t)
            && self
                .cfg
                .trace
                .as_ref()
                .is_none_or(|tr| tr.gaps_queue() || tr.zero_rate_until(t).is_none())
    }

    /// The first instant at or after `at` when the link is up; `None` if it
    /// never comes back.
    pub fn next_up(&self, at: Instant) -> Option<Instant> {
        self.next_start(at).map(|(t, _)| t)
    }

    /// The first instant at or after `at` when the link can transmit, and
    /// whether an outage (schedule, or a zero step of a trace in our own
    /// format) postponed it, rather than only the gaps of a trace whose
    /// gaps queue.
    fn next_start(&self, at: Instant) -> Option<(Instant, bool)> {
        let mut t = self.offset(at);
        let mut outage = false;
        for _ in 0..MAX_EDGE_STEPS {
            if let Some(end) = self.cfg.schedule.down_until(t) {
                t = end;
                outage = true;
                continue;
            }
            if let Some((end, tr)) = self
                .cfg
                .trace
                .as_ref()
                .and_then(|tr| Some((tr.zero_rate_until(t)?, tr)))
            {
                if end == Duration::MAX {
                    return None;
                }
                t = end;
                outage |= !tr.gaps_queue();
                continue;
            }
            return Some((at.max(self.epoch.checked_add(t)?), outage));
        }
        None
    }

    /// Bytes in the transmit backlog as of the last packet handled.
    pub fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    /// Decides the fate of a packet of `bytes` arriving at `now`. Arrival
    /// times must not go backwards.
    pub fn handle_packet(&mut self, now: Instant, bytes: usize) -> Verdict {
        while let Some(&(end, size)) = self.backlog.front() {
            if end > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= size;
        }

        // 1. Availability.
        let ready = self.pacer.start_time(now);
        let Some((start, outage)) = self.next_start(ready) else {
            return Verdict::Drop(if self.cfg.relay.is_some() {
                DropReason::RelayFull
            } else {
                DropReason::Outage
            });
        };
        // Waiting for a Mahimahi delivery opportunity is queueing; waiting
        // out an outage needs a relay.
        let postponed = start > ready;
        if outage && self.cfg.relay.is_none() {
            return Verdict::Drop(DropReason::Outage);
        }
        // In custody: arrived during an outage, or waits for the contact.
        let relayed = self.cfg.relay.is_some() && (outage || !self.is_up(now));

        // 2. Buffer limit.
        let size = bytes as u64;
        match self.cfg.relay {
            Some(store) if self.backlog_bytes + size > store => {
                return Verdict::Drop(DropReason::RelayFull)
            }
            None if self.backlog_bytes + size > self.cfg.queue => {
                return Verdict::Drop(DropReason::Queue)
            }
            _ => {}
        }

        // 3. Serialization.
        let t_start = self.offset(start);
        let rate = self
            .cfg
            .trace
            .as_ref()
            .and_then(|tr| tr.rate_at(t_start))
            .or(self.cfg.rate);
        let tx_end = self.pacer.commit(start, bytes, rate);
        self.backlog.push_back((tx_end, size));
        self.backlog_bytes += size;
        let back_to_back = !postponed && self.prev_forward_end == Some(start);

        // 4. Loss: the packet has used the link, and now it is gone.
        if self.loss.lose() {
            self.prev_forward_end = None;
            return Verdict::Drop(DropReason::Loss);
        }
        self.prev_forward_end = Some(tx_end);

        // 5. Propagation.
        let delay = self
            .cfg
            .trace
            .as_ref()
            .and_then(|tr| tr.delay_at(t_start))
            .unwrap_or(self.cfg.delay);
        let mut departure = tx_end + self.jittered(delay);
        if !self.cfg.reorder {
            if let Some(last) = self.last_departure {
                departure = departure.max(last);
            }
        }
        self.last_departure = Some(self.last_departure.map_or(departure, |l| l.max(departure)));
        Verdict::Forward(Scheduled {
            departure,
            tx_start: start,
            tx_end,
            back_to_back,
            relayed,
        })
    }

    fn jittered(&mut self, delay: Duration) -> Duration {
        if self.cfg.jitter.is_zero() {
            return delay;
        }
        let j = self.cfg.jitter.as_secs_f64();
        let offset = match self.cfg.jitter_dist {
            JitterDist::Uniform => (self.jitter_rng.next_f64() * 2.0 - 1.0) * j,
            JitterDist::Normal => self.jitter_rng.normal() * j,
        };
        Duration::try_from_secs_f64((delay.as_secs_f64() + offset).max(0.0)).unwrap_or(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::super::loss::GeParams;
    use super::super::schedule::{Periodic, Window};
    use super::super::trace::TracePoint;
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }
    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Feeds `n` packets of `size`, one every `gap`, and returns verdicts
    /// with arrival times.
    fn feed(m: &mut LinkModel, n: usize, size: usize, gap: Duration) -> Vec<(Instant, Verdict)> {
        let t0 = m.epoch();
        (0..n)
            .map(|i| {
                let at = t0 + gap * i as u32;
                (at, m.handle_packet(at, size))
            })
            .collect()
    }

    fn forwarded(v: &[(Instant, Verdict)]) -> Vec<(Instant, Scheduled)> {
        v.iter()
            .filter_map(|&(at, v)| match v {
                Verdict::Forward(s) => Some((at, s)),
                Verdict::Drop(_) => None,
            })
            .collect()
    }

    fn drops(v: &[(Instant, Verdict)], reason: DropReason) -> usize {
        v.iter()
            .filter(|(_, v)| *v == Verdict::Drop(reason))
            .count()
    }

    #[test]
    fn pacing_rate_is_exact_at_every_rate() {
        for rate in [1_000_000u64, 10_000_000, 100_000_000, 1_000_000_000] {
            let cfg = LinkConfig {
                rate: Some(rate),
                queue: 10_000_000,
                ..LinkConfig::default()
            };
            let mut m = LinkModel::new(cfg, Instant::now(), 1);
            // Offered at twice the link rate.
            let ser_ns = 1514 * 8 * 1_000_000_000 / rate;
            let out = forwarded(&feed(&mut m, 2000, 1514, Duration::from_nanos(ser_ns / 2)));
            assert!(out.len() > 1000);
            assert!(out[1..].iter().all(|(_, s)| s.back_to_back));
            let first = out[0].1.departure;
            let last = out[out.len() - 1].1.departure;
            let bits = ((out.len() - 1) * 1514 * 8) as f64;
            let achieved = bits / (last - first).as_secs_f64();
            assert!(
                (achieved / rate as f64 - 1.0).abs() < 1e-6,
                "rate {rate}: achieved {achieved}"
            );
        }
    }

    #[test]
    fn queue_limit_tail_drops_a_burst() {
        let cfg = LinkConfig {
            rate: Some(10_000_000),
            queue: 15_140,
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 1);
        // 50 frames at the same instant: only queue / size fit.
        let v = feed(&mut m, 50, 1514, Duration::ZERO);
        assert_eq!(forwarded(&v).len(), 10);
        assert_eq!(drops(&v, DropReason::Queue), 40);
        assert_eq!(m.backlog_bytes(), 15_140);
        // After one frame time the head has left, so one more fits.
        let later = m.epoch() + Duration::from_nanos(1514 * 8 * 100);
        assert!(matches!(m.handle_packet(later, 1514), Verdict::Forward(_)));
        assert!(matches!(
            m.handle_packet(later, 1514),
            Verdict::Drop(DropReason::Queue)
        ));
    }

    #[test]
    fn fixed_delay_is_added_after_serialization() {
        let cfg = LinkConfig {
            rate: Some(8_000_000),
            delay: ms(300),
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 1);
        // 1000 bytes at 8 Mbit/s = 1 ms; arrivals every 2 ms: no queueing.
        for (at, s) in forwarded(&feed(&mut m, 100, 1000, ms(2))) {
            assert_eq!(s.departure - at, ms(301));
        }
    }

    #[test]
    fn jitter_preserves_order_and_stays_in_bounds() {
        let cfg = LinkConfig {
            delay: ms(50),
            jitter: ms(5),
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 3);
        // Packets 1 ms apart, jitter +-5 ms: would reorder if allowed.
        let out = forwarded(&feed(&mut m, 5000, 200, ms(1)));
        assert_eq!(out.len(), 5000);
        for pair in out.windows(2) {
            assert!(pair[1].1.departure >= pair[0].1.departure);
        }
        for (at, s) in &out {
            let d = s.departure - *at;
            // Clamping to the previous departure can only push later, and
            // never past the previous packet's maximum.
            assert!(d >= ms(45) && d <= ms(56), "delay {d:?}");
        }
    }

    #[test]
    fn jitter_with_reorder_is_unbiased_uniform_and_normal() {
        for (dist, seed) in [(JitterDist::Uniform, 4), (JitterDist::Normal, 5)] {
            let cfg = LinkConfig {
                delay: ms(50),
                jitter: ms(5),
                jitter_dist: dist,
                reorder: true,
                ..LinkConfig::default()
            };
            let mut m = LinkModel::new(cfg, Instant::now(), seed);
            let out = forwarded(&feed(&mut m, 20_000, 200, ms(1)));
            let d: Vec<f64> = out
                .iter()
                .map(|(at, s)| (s.departure - *at).as_secs_f64() * 1e3)
                .collect();
            let n = d.len() as f64;
            let mean = d.iter().sum::<f64>() / n;
            let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            // Uniform on +-5 ms has variance 25/3; normal with sd 5 has 25.
            let want_var = match dist {
                JitterDist::Uniform => 25.0 / 3.0,
                JitterDist::Normal => 25.0,
            };
            assert!(
                (mean - 50.0).abs() < 5.0 * (want_var / n).sqrt(),
                "{dist:?} mean {mean}"
            );
            assert!((var / want_var - 1.0).abs() < 0.05, "{dist:?} var {var}");
            let reordered = out
                .windows(2)
                .filter(|p| p[1].1.departure < p[0].1.departure)
                .count();
            assert!(reordered > 0, "{dist:?}: reorder allowed but none happened");
        }
    }

    #[test]
    fn bernoulli_loss_in_the_model() {
        let per = 0.05;
        let cfg = LinkConfig {
            loss: LossConfig {
                per,
                gilbert_elliott: None,
            },
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 11);
        let n = 20_000;
        let lost = drops(&feed(&mut m, n, 100, us(100)), DropReason::Loss);
        let sd = (n as f64 * per * (1.0 - per)).sqrt();
        assert!(
            (lost as f64 - n as f64 * per).abs() < 4.0 * sd,
            "lost {lost}"
        );
    }

    #[test]
    fn same_seed_same_run_other_seed_differs() {
        let cfg = LinkConfig {
            jitter: ms(3),
            delay: ms(10),
            reorder: true,
            loss: LossConfig {
                per: 0.1,
                gilbert_elliott: GeParams::parse("0.01,0.3").ok(),
            },
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let run = |seed| {
            let mut m = LinkModel::new(cfg.clone(), t0, seed);
            feed(&mut m, 500, 100, ms(1))
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn outage_windows_drop_exactly_inside() {
        let cfg = LinkConfig {
            schedule: Schedule::new(
                vec![Window {
                    start: ms(100),
                    len: ms(50),
                }],
                Some(Periodic {
                    up: ms(400),
                    down: ms(100),
                }),
            ),
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 1);
        let t0 = m.epoch();
        let v = feed(&mut m, 1000, 100, ms(1));
        for (at, verdict) in &v {
            let t = (*at - t0).as_millis();
            let down = (100..150).contains(&t) || (t % 500) >= 400;
            assert_eq!(
                matches!(verdict, Verdict::Drop(DropReason::Outage)),
                down,
                "t = {t} ms"
            );
            assert_eq!(m.is_up(*at), !down);
        }
        assert_eq!(drops(&v, DropReason::Outage), 50 + 2 * 100);
    }

    #[test]
    fn relay_holds_packets_over_an_outage_and_drains_at_rate() {
        let rate = 10_000_000;
        let cfg = LinkConfig {
            rate: Some(rate),
            delay: ms(20),
            schedule: Schedule::new(
                vec![Window {
                    start: ms(100),
                    len: ms(200),
                }],
                None,
            ),
            relay: Some(1_000_000),
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 1);
        let t0 = m.epoch();
        // 1000 B every 1 ms = 8 Mbit/s offered, 10 Mbit/s link.
        let v = feed(&mut m, 500, 1000, ms(1));
        let out = forwarded(&v);
        assert_eq!(out.len(), 500, "custody must not lose anything");
        let mut prev = t0;
        for (at, s) in &out {
            assert!(s.departure >= prev, "order");
            prev = s.departure;
            let start = s.tx_start - t0;
            assert!(!(ms(100)..ms(300)).contains(&start), "sent during outage");
            let t = *at - t0;
            if (ms(100)..ms(300)).contains(&t) {
                assert!(s.relayed);
                assert!(start >= ms(300));
            }
        }
        // The relayed burst leaves at link rate: consecutive relayed packets
        // are spaced by exactly one serialization time (0.8 ms).
        let burst: Vec<&Scheduled> = out
            .iter()
            .map(|(_, s)| s)
            .filter(|s| s.tx_start - t0 >= ms(300) && s.tx_start - t0 < ms(400))
            .collect();
        assert!(burst.len() > 100);
        for pair in burst.windows(2) {
            assert_eq!(pair[1].tx_start - pair[0].tx_start, us(800));
        }
    }

    #[test]
    fn relay_store_limit_drops_the_excess() {
        let cfg = LinkConfig {
            rate: Some(10_000_000),
            schedule: Schedule::new(
                vec![Window {
                    start: ms(0),
                    len: ms(1000),
                }],
                None,
            ),
            relay: Some(50_000),
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 1);
        let v = feed(&mut m, 200, 1000, ms(1));
        assert_eq!(forwarded(&v).len(), 50);
        assert_eq!(drops(&v, DropReason::RelayFull), 150);
    }

    #[test]
    fn trace_steps_change_rate_delay_and_can_stop_the_link() {
        let trace = Trace::from_points(vec![
            TracePoint {
                at: ms(0),
                rate: Some(8_000_000),
                delay: Some(ms(10)),
            },
            TracePoint {
                at: ms(100),
                rate: Some(4_000_000),
                delay: Some(ms(30)),
            },
            TracePoint {
                at: ms(200),
                rate: Some(0),
                delay: None,
            },
            TracePoint {
                at: ms(300),
                rate: None,
                delay: None,
            },
        ])
        .ok();
        let cfg = LinkConfig {
            rate: Some(2_000_000),
            delay: ms(5),
            trace,
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 1);
        let t0 = m.epoch();
        // 500 B every 5 ms: never queued at these rates.
        for (at, v) in feed(&mut m, 80, 500, ms(5)) {
            let t = at - t0;
            let expect = if t < ms(100) {
                Some(us(500) + ms(10))
            } else if t < ms(200) {
                Some(ms(1) + ms(30))
            } else if t < ms(300) {
                None
            } else {
                Some(ms(2) + ms(5))
            };
            match (v, expect) {
                (Verdict::Forward(s), Some(d)) => assert_eq!(s.departure - at, d, "t = {t:?}"),
                (Verdict::Drop(DropReason::Outage), None) => {}
                other => panic!("t = {t:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn mahimahi_gaps_queue_packets_until_the_next_opportunity() {
        // Opportunities at 0 (the loop's 10 ms) and 5 ms of every 10 ms.
        let trace = super::super::mahimahi::parse("5\n10\n").ok();
        let cfg = LinkConfig {
            trace,
            queue: 100 * 1514,
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg, Instant::now(), 1);
        let t0 = m.epoch();
        assert!(
            m.is_up(t0 + ms(2)),
            "a gap between opportunities is no outage"
        );
        // 40 full-size frames at once: nothing dropped, one frame per
        // opportunity, each 1 ms long, at 0, 5, 10, 15 ... ms.
        let v = feed(&mut m, 40, 1514, Duration::ZERO);
        let out = forwarded(&v);
        assert_eq!(out.len(), 40, "{:?}", &v[..3]);
        for (i, (_, s)) in out.iter().enumerate() {
            assert_eq!(s.tx_start - t0, ms(5 * i as u64), "frame {i}");
            assert_eq!(s.tx_end - s.tx_start, ms(1), "frame {i}");
            assert!(!s.relayed);
        }
        // The queue still limits: a burst beyond it is tail-dropped.
        let v = feed(&mut m, 200, 1514, Duration::ZERO);
        assert!(drops(&v, DropReason::Queue) > 0);
        assert_eq!(drops(&v, DropReason::Outage), 0);
    }
}
