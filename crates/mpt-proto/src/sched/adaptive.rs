//! Scheduling by measured capacity and delay over unlike paths.
//!
//! Striping by fixed shares over a 600 ms satellite and a 25 ms DSL line
//! makes every packet wait for the slowest path: the resequencer holds the
//! fast path's packets until the slow path's ones arrive, so the tunnel is
//! slower than its best member. Instead each packet goes where it is
//! expected to *arrive* first (the ECF / BLEST family of multipath
//! schedulers): for every eligible path,
//!
//! ```text
//! arrival = max(now, busy_until) + bytes / rate + one_way_delay
//! ```
//!
//! where `busy_until` is when the path's bottleneck will have drained what
//! was already sent (a virtual clock advanced by each packet's
//! transmission time at the estimated rate), `rate` its estimated capacity
//! and `one_way_delay` its propagation delay above the connection's fastest
//! path. At low load everything takes the lowest-delay path; as its queue
//! grows, the next path starts to pay off, and under saturation every path
//! carries about its capacity.
//!
//! That is how a *small* datagram (below [`SMALL_PACKET`] bytes: ACKs,
//! voice, keystrokes, DNS) is placed. A full-size one is placed where it
//! *leaves* first (the one-way delay left out), which stripes bulk data over
//! the paths in proportion to their capacity from the first packet on,
//! while the receiver's delay equalisation (mptd's `equalize`) makes the
//! flow's packets arrive at the slowest path's delay. A bulk TCP flow thus
//! sees one path of the summed capacity and a steady RTT. Ranking bulk data by
//! arrival instead keeps it on the fast path until that path's queue is
//! worth the slow path's delay, and then the flow's RTT jumps (25 ms to
//! 600 ms beside a satellite): CUBIC's HyStart leaves slow start at the
//! jump and BBR sizes its window by the early, short RTT, so the flow ends
//! up slower than on the fast path alone (measured, see issue 12).
//!
//! Three limits keep the model honest:
//! * a path's virtual queue is capped (`cap_ns`, about its minimum RTT:
//!   about what a bottleneck buffer holds): a full path takes no more
//!   packets while another can, so the tunnel does not fill a small
//!   buffer the model cannot see;
//! * a path whose packet would arrive more than `hold_ns` after the
//!   earliest possible arrival is not used: the resequencer would not wait
//!   for it;
//! * a lossy path (`lossy`) only takes packets no clean path can: a TCP
//!   flow reads every loss as congestion, so 1 % loss on a share of its
//!   packets costs more than the extra capacity brings.
//!
//! When no path passes, the packet goes where it arrives first anyway: the
//! scheduler never drops, the real bottleneck does. Full paths that tie on
//! that (like paths, all at their cap) share such overflow in proportion
//! to their rates, by clocks that keep counting past the cap. But when the
//! paths a full-size packet would arrive first on all have a known
//! capacity (a standing queue showed it), they would only drop it: it goes
//! instead to a clean path whose rate is only a lower bound
//! (`lower_bound`), which may well carry more. Over a fresh GEO satellite
//! beside DSL, the satellite's estimate starts low and grows by its own
//! deliveries, about doubling per 600 ms round trip; a TCP slow start
//! outgrew it, its overflow went to DSL, whose 64 kB buffer dropped it,
//! and CUBIC then crawled back at the satellite's RTT (the first flow
//! through a fresh tunnel at 0.80-0.94 of the best path alone, those after
//! it 1.3-1.5).
//!
//! The rates come from the receiver's feedback
//! ([`crate::path::DeliveryEstimator`]). To find capacity it does not know
//! of, the scheduler offers a path more than its estimate now and then
//! ([`probe_gain`]): a quarter more for one phase out of eight, a fifth
//! less the next phase (to drain what the probe queued). A path whose
//! estimate is only a lower bound (no queue was seen) is offered twice its
//! estimate by the session until a queue shows its capacity; a path with
//! a standing queue is not probed (it delivers its capacity, which the
//! estimate follows). The session also feeds each path's measured queue
//! back ([`level_queue`]): a path whose queue stands deeper than the
//! connection needs is offered less until it drains, so estimation
//! errors do not pile up as one path's queue that holds every flow in
//! the resequencer.
//!
//! All arithmetic is integer nanoseconds; a pick is one pass over the
//! eligible paths, no allocation.

use super::{for_each_bit, MAX_PATHS};

/// What the scheduler knows of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathModel {
    /// Transmission time per byte at the estimated rate, in picoseconds
    /// (8000 = 1 Gbit/s). 0 models the path as infinitely fast.
    pub ps_per_byte: u64,
    /// One-way delay above the connection's fastest path, ns.
    pub owd_ns: u64,
    /// Most virtual queue the scheduler builds on the path, ns.
    pub cap_ns: u64,
    /// Used only for packets no clean path can take.
    pub lossy: bool,
    /// The rate is only a lower bound (no standing queue has shown the
    /// capacity yet): the path takes full-size overflow when the paths
    /// where it would arrive first are all of known capacity.
    pub lower_bound: bool,
}

/// Picoseconds per byte for a rate in bit/s (0 for an unknown rate).
pub const fn ps_per_byte(rate_bps: u64) -> u64 {
    match 8_000_000_000_000u64.checked_div(rate_bps) {
        None => 0,
        Some(0) => 1,
        Some(ps) => ps,
    }
}

/// Datagrams shorter than this (ACKs, voice, keystrokes, DNS) go where
/// they arrive first; longer ones where they leave first.
pub const SMALL_PACKET: usize = 300;

/// Queue differences between paths below this are noise (ns): the
/// receiver's scheduling jitter on a loaded machine.
pub const LEVEL_DEADBAND_NS: u64 = 1_000_000;

/// Most of its rate (parts per million) a path gives up to drain a queue
/// deeper than the other paths': leveling steers, it never shuts a path.
pub const LEVEL_MAX_CUT_PPM: u64 = 250_000;

/// Shortest time over which a path is asked to drain its excess queue
/// (ns). Longer than the feedback's lag (a quarter RTT, at least 10 ms,
/// plus the one-way delay) so the loop does not overshoot.
pub const LEVEL_MIN_HORIZON_NS: u64 = 50_000_000;

/// The cost per byte to model a path with, given its estimate `ps` and
/// how much deeper its measured standing queue is than it needs to be
/// (`excess_ns`: its queue, or how much later than the connection's
/// quickest path its packets arrive if that is less). The path is offered
/// `excess / horizon` less of its rate (between the dead band and
/// [`LEVEL_MAX_CUT_PPM`]), so the excess drains over about `horizon_ns`
/// (at least [`LEVEL_MIN_HORIZON_NS`]) while the other paths take the
/// difference.
///
/// Why: the rate estimates of like paths differ by a percent or two of
/// noise, and a share that much above a path's capacity grows its queue
/// without bound (1 % of 100 Mbit/s is 10 ms more every second). The
/// resequencer then holds every flow for the deepest queue, and a BBR
/// flow, whose window is twice its minimum RTT's worth, is held to a
/// fraction of the capacity. Feeding the measured queues back keeps
/// them level whatever the estimates' errors.
pub fn level_queue(ps: u64, excess_ns: u64, horizon_ns: u64) -> u64 {
    let over = excess_ns.saturating_sub(LEVEL_DEADBAND_NS);
    if over == 0 || ps == 0 {
        return ps;
    }
    let horizon = horizon_ns.max(LEVEL_MIN_HORIZON_NS);
    let cut =
        (u128::from(over) * 1_000_000 / u128::from(horizon)).min(u128::from(LEVEL_MAX_CUT_PPM));
    (u128::from(ps) * 1_000_000 / (1_000_000 - cut)).min(u128::from(u64::MAX)) as u64
}

/// Phases of one probing cycle.
pub const PROBE_PHASES: u64 = 8;

/// The transmission cost per byte to use at `now_ns` for a path whose
/// estimate costs `ps` per byte: a quarter more capacity offered in the
/// first phase of each cycle of [`PROBE_PHASES`] phases of `phase_ns`, a
/// fifth less in the second, the estimate in the others. Paths are
/// offset by their index so they do not probe together.
pub fn probe_gain(ps: u64, now_ns: u64, phase_ns: u64, path: usize) -> u64 {
    if phase_ns == 0 {
        return ps;
    }
    match (now_ns / phase_ns + path as u64) % PROBE_PHASES {
        0 => ps * 4 / 5,
        1 => ps + ps / 4,
        _ => ps,
    }
}

/// How far ahead of now the spill clocks run at most (ns); beyond it all
/// are moved back together, which keeps their differences.
pub const SPILL_SPAN_NS: u64 = 2_000_000_000;

/// Full paths whose packets would arrive within this of the earliest
/// (ns) count as tied, and share the overflow by their uncapped clocks.
pub const SPILL_TIE_NS: u64 = 1_000_000;

/// The `adaptive` scheduler of one worker and connection: the virtual
/// clocks of its paths.
#[derive(Debug, Clone)]
pub struct Adaptive {
    busy_until: [u64; MAX_PATHS],
    /// The same clocks without the cap: what the paths' queues would hold
    /// if their buffers took everything. They only decide where a packet
    /// goes when every path is full (see `pick_in_flowlet`).
    spill_until: [u64; MAX_PATHS],
}

impl Default for Adaptive {
    fn default() -> Self {
        Adaptive {
            busy_until: [0; MAX_PATHS],
            spill_until: [0; MAX_PATHS],
        }
    }
}

impl Adaptive {
    /// A scheduler with idle paths.
    pub fn new() -> Adaptive {
        Adaptive::default()
    }

    /// When path `i`'s modelled queue drains, ns on the caller's clock.
    pub fn busy_until(&self, i: usize) -> u64 {
        self.busy_until.get(i).copied().unwrap_or(0)
    }

    /// Sets path `i`'s virtual clock (workers sharing paths merge theirs).
    pub fn set_busy_until(&mut self, i: usize, ns: u64) {
        if let Some(b) = self.busy_until.get_mut(i) {
            *b = ns;
        }
    }

    /// Picks the path for a datagram of `bytes` at `now_ns` among the set
    /// bits of `mask`, and charges it. `hold_ns` is how long the receiver's
    /// resequencer waits for a late packet. A datagram below
    /// [`SMALL_PACKET`] bytes is ranked by arrival unless `bulk` says to
    /// treat it as bulk data (a TCP SYN).
    pub fn pick(
        &mut self,
        paths: &[PathModel],
        mask: u64,
        bytes: usize,
        bulk: bool,
        now_ns: u64,
        hold_ns: u64,
    ) -> Option<usize> {
        self.pick_in_flowlet(paths, mask, bytes, bulk, now_ns, hold_ns, None)
    }

    /// [`Adaptive::pick`] for a packet whose flow's previous packet took
    /// path `flowlet` not long ago (see [`super::Flowlets`]): that path is
    /// kept if it could take the packet and ranks at most
    /// [`super::STICK_SLACK_NS`] behind the best while it has nothing
    /// queued in the model, at most [`super::RUN_SLACK_NS`] while it has.
    #[allow(clippy::too_many_arguments)]
    pub fn pick_in_flowlet(
        &mut self,
        paths: &[PathModel],
        mask: u64,
        bytes: usize,
        bulk: bool,
        now_ns: u64,
        hold_ns: u64,
        flowlet: Option<usize>,
    ) -> Option<usize> {
        let small = bytes < SMALL_PACKET && !bulk;
        let bytes = bytes as u64;
        // How long the packet takes to send at the path's modelled rate.
        let tx_time = |p: &PathModel| bytes.saturating_mul(p.ps_per_byte) / 1000;
        let finish = |busy: u64, p: &PathModel| busy.max(now_ns).saturating_add(tx_time(p));
        let arrival = |busy: u64, p: &PathModel| finish(busy, p).saturating_add(p.owd_ns);
        // What a packet is ranked by: a small one by when it arrives, a
        // full-size one by when its path has sent it (see module docs).
        let rank = |busy: u64, p: &PathModel| {
            if small {
                arrival(busy, p)
            } else {
                finish(busy, p)
            }
        };
        // When every path is full, the packet goes where it arrives first,
        // and among paths that tie on that (within [`SPILL_TIE_NS`]), by
        // the uncapped clocks. By the capped ones alone, every full like
        // path stood at the same cap and the ties all went to the path
        // whose estimate was highest by noise: a TCP start over 12 like
        // paths dumped whole batches on one path, whose buffer overflowed
        // (thousands of drops per run where fixed shares had hundreds).
        // The uncapped clocks spread the overflow over like paths in
        // proportion to their rates. Between unlike paths the overflow
        // still goes where it arrives first: spread to the slower path, it
        // would only queue there, and the resequencer would hold every
        // flow for it.
        let mut first: Option<(u64, usize)> = None;
        for_each_bit(mask, paths.len(), |i| {
            let a = arrival(self.busy_until[i], &paths[i]);
            if first.is_none_or(|(b, _)| a < b) {
                first = Some((a, i));
            }
        });
        let (first_arrival, first_path) = first?;
        let horizon = first_arrival.saturating_add(hold_ns);
        let tie = first_arrival.saturating_add(SPILL_TIE_NS);
        // One more pass finds both the overflow path (among those tied
        // with the earliest arrival, the first by the uncapped clock) and
        // the best clean and lossy paths with room that arrive within the
        // hold; each path's finish and arrival are worked out once.
        let mut spill: Option<(u64, usize)> = None;
        // Full-size overflow that would arrive first only on paths of
        // known capacity goes instead to a clean path whose rate is only a
        // lower bound, the earliest by its uncapped clock (module docs).
        let mut probe_spill: Option<(u64, usize)> = None;
        let mut tied_lower_bound = false;
        let mut best: [Option<((u64, u64), usize)>; 2] = [None, None];
        for_each_bit(mask, paths.len(), |i| {
            let p = &paths[i];
            let busy = self.busy_until[i];
            let done = finish(busy, p);
            let a = done.saturating_add(p.owd_ns);
            let uncapped_arrival = || {
                let uncapped = self.spill_until[i];
                if uncapped > busy {
                    arrival(uncapped, p)
                } else {
                    a
                }
            };
            if a <= tie {
                let s = uncapped_arrival();
                if spill.is_none_or(|(b, _)| s < b) {
                    spill = Some((s, i));
                }
                tied_lower_bound |= p.lower_bound;
            }
            if p.lower_bound && !p.lossy && !small {
                let s = uncapped_arrival();
                if probe_spill.is_none_or(|(b, _)| s < b) {
                    probe_spill = Some((s, i));
                }
            }
            if busy.saturating_sub(now_ns) > p.cap_ns || a > horizon {
                return;
            }
            let tier = &mut best[usize::from(p.lossy)];
            // By `rank`; ties (like paths) go to the path idle the longest,
            // so like paths alternate even when one alone could carry the
            // load: a sender probing for more (BBR) then finds both.
            let k = (if small { a } else { done }, busy);
            if tier.is_none_or(|(b, _)| k < b) {
                *tier = Some((k, i));
            }
        });
        let fallback = if tied_lower_bound {
            spill
        } else {
            probe_spill.or(spill)
        }
        .map_or(first_path, |(_, i)| i);
        let mut chosen = best[0].or(best[1]).map_or(fallback, |(_, i)| i);
        if let Some(q) = flowlet.filter(|&q| q != chosen && q < paths.len() && q < MAX_PATHS) {
            let (pq, pc) = (&paths[q], &paths[chosen]);
            let busy = self.busy_until[q];
            // With the full slack only while its path has nothing queued
            // in the model: a flow that loads a slow path is striped
            // packet by packet, like one without flowlets. Kept in runs, big flows left the paths'
            // queues a run apart; the resequencer held each flow for the
            // deepest, and four BBR flows over 12 like paths reached
            // 0.80-0.91 of the capacity where packet-by-packet striping
            // reached 0.89-0.92 (5 interleaved runs each).
            // A path with something queued keeps it only within the much
            // shorter run slack, and only if a run holds more than one
            // packet there (see `super::RUN_SLACK_NS`).
            let slack = if busy <= now_ns {
                Some(super::STICK_SLACK_NS)
            } else if tx_time(pq) < super::RUN_SLACK_NS {
                Some(super::RUN_SLACK_NS)
            } else {
                None
            };
            let keeps = slack.is_some_and(|slack| {
                mask & (1 << q) != 0
                    && busy.saturating_sub(now_ns) <= pq.cap_ns
                    && arrival(busy, pq) <= horizon
                    && (!pq.lossy || pc.lossy)
                    && rank(busy, pq) <= rank(self.busy_until[chosen], pc).saturating_add(slack)
            });
            if keeps {
                chosen = q;
            }
        }
        let p = &paths[chosen];
        let start = self.busy_until[chosen].max(now_ns);
        let tx_ns = tx_time(p);
        let end = start.saturating_add(tx_ns);
        // Past its cap the model stops counting: the real queue drops.
        self.busy_until[chosen] = end.min(now_ns.saturating_add(p.cap_ns.saturating_mul(2)));
        self.charge_spill(chosen, start, tx_ns, now_ns);
        Some(chosen)
    }

    /// Advances path `i`'s uncapped clock by `tx_ns` from `start` (its
    /// capped clock or now) and keeps all within [`SPILL_SPAN_NS`] of now.
    fn charge_spill(&mut self, i: usize, start: u64, tx_ns: u64, now_ns: u64) {
        let end = self.spill_until[i].max(start).saturating_add(tx_ns);
        self.spill_until[i] = end;
        let limit = now_ns.saturating_add(SPILL_SPAN_NS);
        if end > limit {
            let shift = end - limit;
            for s in &mut self.spill_until {
                *s = s.saturating_sub(shift);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn path(rate_mbps: u64, owd_ms: u64, cap_ms: u64) -> PathModel {
        PathModel {
            ps_per_byte: ps_per_byte(rate_mbps * 1_000_000),
            owd_ns: owd_ms * MS,
            cap_ns: cap_ms * MS,
            lossy: false,
            lower_bound: false,
        }
    }

    /// Offers `rate_mbps` of 1250-byte packets for `ms`, returns packets
    /// per path.
    fn offer(
        s: &mut Adaptive,
        paths: &[PathModel],
        rate_mbps: u64,
        ms: u64,
        hold_ms: u64,
    ) -> Vec<u64> {
        offer_sized(s, paths, 1250, rate_mbps, ms, hold_ms)
    }

    fn offer_sized(
        s: &mut Adaptive,
        paths: &[PathModel],
        size: u64,
        rate_mbps: u64,
        ms: u64,
        hold_ms: u64,
    ) -> Vec<u64> {
        let mut counts = vec![0; paths.len()];
        let gap_ns = size * 8 * 1000 / rate_mbps; // ns between packets
        let mut t = 1_000 * MS;
        let end = t + ms * MS;
        while t < end {
            let i = s
                .pick(paths, 0b11, size as usize, false, t, hold_ms * MS)
                .expect("path");
            counts[i] += 1;
            t += gap_ns;
        }
        counts
    }

    #[test]
    fn small_packets_take_the_low_delay_path() {
        // GEO 20 Mbit/s 300 ms one way + DSL 10 Mbit/s 12.5 ms: ACKs and
        // voice go over DSL even at a few Mbit/s.
        let paths = [path(20, 287, 600), path(10, 0, 25)];
        let mut s = Adaptive::new();
        let c = offer_sized(&mut s, &paths, 200, 3, 1000, 400);
        assert_eq!(c[0], 0, "{c:?}");
    }

    #[test]
    fn light_bulk_takes_the_path_that_sends_it_first() {
        // 5 Mbit/s of full-size packets: the satellite, twice as fast,
        // sends each one sooner; the flow sees one steady delay.
        let paths = [path(20, 287, 600), path(10, 0, 25)];
        let mut s = Adaptive::new();
        let c = offer(&mut s, &paths, 5, 1000, 400);
        assert_eq!(c[1], 0, "{c:?}");
    }

    #[test]
    fn saturation_uses_every_path_by_capacity() {
        let paths = [path(20, 287, 600), path(10, 0, 25)];
        let mut s = Adaptive::new();
        // 29 Mbit/s offered: both paths nearly full, shares about 2:1.
        let c = offer(&mut s, &paths, 29, 2000, 400);
        let share_geo = c[0] as f64 / (c[0] + c[1]) as f64;
        assert!((0.6..0.72).contains(&share_geo), "{c:?}");
        // 25 Mbit/s: the satellite runs full (20), DSL takes the rest.
        let mut s = Adaptive::new();
        let c = offer(&mut s, &paths, 25, 2000, 400);
        let dsl_mbps = c[1] as f64 * 1250.0 * 8.0 / 2.0 / 1e6;
        assert!((4.0..6.5).contains(&dsl_mbps), "{c:?} {dsl_mbps}");
    }

    #[test]
    fn a_path_beyond_the_hold_is_not_used() {
        // The resequencer waits 100 ms; the satellite is 287 ms behind.
        let paths = [path(20, 287, 600), path(10, 0, 25)];
        let mut s = Adaptive::new();
        let c = offer(&mut s, &paths, 25, 1000, 100);
        assert_eq!(c[0], 0, "{c:?}");
    }

    #[test]
    fn equal_paths_share_equally() {
        let paths = [path(100, 0, 10), path(100, 0, 10)];
        let mut s = Adaptive::new();
        let c = offer(&mut s, &paths, 150, 1000, 50);
        let diff = c[0].abs_diff(c[1]);
        assert!(diff * 50 < c[0] + c[1], "{c:?}");
    }

    #[test]
    fn overflow_spreads_over_full_paths_by_rate() {
        // Twelve like paths whose estimates differ by noise (99.4-100.5
        // Mbit/s), offered 1.5 times their capacity in batches of 64
        // packets that share one clock reading (as a transmit batch does):
        // once all are full, the overflow must not pile onto the path
        // estimated fastest.
        let paths: Vec<PathModel> = (0..12u64)
            .map(|k| PathModel {
                ps_per_byte: ps_per_byte(99_400_000 + k * 100_000),
                owd_ns: 0,
                cap_ns: 10 * MS,
                lossy: false,
                lower_bound: false,
            })
            .collect();
        let mut s = Adaptive::new();
        let batch_ns = 64 * 1250 * 8 * 1000 / 1800; // 64 packets at 1.8 Gbit/s
        let mut t = 1_000 * MS;
        // 1 s, then 5 s more: the uncapped clocks run past their span
        // (half a second of excess per second) and are moved back.
        for secs in [1, 5] {
            let mut counts = [0u64; 12];
            for _ in 0..(secs * 1_000 * MS / batch_ns) {
                for _ in 0..64 {
                    let i = s
                        .pick(&paths, (1 << 12) - 1, 1250, false, t, 50 * MS)
                        .expect("path");
                    counts[i] += 1;
                }
                t += batch_ns;
            }
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(hi - lo < hi / 20, "shares {counts:?}");
            assert!(s.spill_until.iter().all(|&c| c <= t + SPILL_SPAN_NS));
        }
        // Unlike paths (25 ms apart, both full): the overflow still goes
        // where it arrives first, not to the slow path's queue.
        let paths = [path(50, 0, 25), path(20, 25, 60)];
        let mut s = Adaptive::new();
        s.set_busy_until(0, 1_000 * MS + 50 * MS);
        s.set_busy_until(1, 1_000 * MS + 120 * MS);
        for _ in 0..1000 {
            let i = s.pick(&paths, 0b11, 1250, false, 1_000 * MS, 200 * MS);
            assert_eq!(i, Some(0));
        }
    }

    #[test]
    fn like_paths_alternate_at_light_load() {
        let paths = [path(100, 0, 10), path(100, 0, 10)];
        let mut s = Adaptive::new();
        // 20 Mbit/s: either path alone is idle at every packet.
        let c = offer(&mut s, &paths, 20, 1000, 50);
        assert!(c[0].abs_diff(c[1]) <= 1, "{c:?}");
    }

    /// Offers `flows` flows round robin (1250-byte packets, `rate_mbps` in
    /// all) through flowlets; returns packets per path and the number of
    /// times a flow changed path.
    fn offer_flows(
        s: &mut Adaptive,
        paths: &[PathModel],
        flows: u32,
        rate_mbps: u64,
        ms: u64,
    ) -> (Vec<u64>, u64) {
        let mut f = super::super::Flowlets::new();
        let gap = super::super::Flowlets::gap_for(paths.iter().map(|p| p.owd_ns));
        let mut counts = vec![0; paths.len()];
        let mut switches = 0;
        let gap_ns = 1250 * 8 * 1000 / rate_mbps;
        let mut t = 1_000 * MS;
        let mut last = vec![None; flows as usize];
        for k in 0..(ms * MS / gap_ns) {
            let flow = (k % u64::from(flows)) as u32;
            let hash = flow.wrapping_mul(0x9e37_79b9);
            let cur = f.current(hash, t, gap);
            let i = s
                .pick_in_flowlet(paths, 0b11, 1250, false, t, 50 * MS, cur)
                .expect("path");
            f.record(hash, i, t);
            if last[flow as usize].is_some_and(|l| l != i) {
                switches += 1;
            }
            last[flow as usize] = Some(i);
            counts[i] += 1;
            t += gap_ns;
        }
        (counts, switches)
    }

    #[test]
    fn flowlets_keep_many_flows_in_place_and_still_balance() {
        let paths = [path(100, 0, 10), path(100, 0, 10)];
        // 16 flows, 20 Mbit/s in all: without flowlets like paths
        // alternate packet by packet, so every flow hops at each packet.
        let mut s = Adaptive::new();
        let (c, switches) = offer_flows(&mut s, &paths, 16, 20, 1000);
        let total = c[0] + c[1];
        assert!(
            switches * 100 < total,
            "{switches} switches in {total} packets"
        );
        // 16 flows at 150 Mbit/s: paths still share the load about evenly.
        let mut s = Adaptive::new();
        let (c, _) = offer_flows(&mut s, &paths, 16, 150, 1000);
        assert!(c[0].abs_diff(c[1]) * 10 < c[0] + c[1], "{c:?}");
    }

    #[test]
    fn one_big_flow_is_still_striped_by_capacity() {
        let paths = [path(100, 0, 10), path(50, 5, 20)];
        let mut s = Adaptive::new();
        let (c, switches) = offer_flows(&mut s, &paths, 1, 140, 1000);
        // About 2:1, in runs rather than packet by packet.
        let share = c[0] as f64 / (c[0] + c[1]) as f64;
        assert!((0.58..0.76).contains(&share), "{c:?}");
        assert!(
            switches > 10,
            "a big flow must be striped: {switches} switches"
        );
    }

    #[test]
    fn flows_that_load_their_paths_keep_the_queues_level() {
        // Three flows at 190 Mbit/s over two like paths: packet by packet,
        // the modelled queues never stand more than about a packet apart
        // (kept in runs, they stood up to the 1 ms slack apart).
        let paths = [path(100, 0, 10), path(100, 0, 10)];
        let mut s = Adaptive::new();
        let mut f = super::super::Flowlets::new();
        let gap = super::super::Flowlets::gap_for(paths.iter().map(|p| p.owd_ns));
        let gap_ns = 1250 * 8 * 1000 / 190;
        let mut t = 1_000 * MS;
        let mut widest = 0;
        for k in 0..20_000u64 {
            let hash = ((k % 3) as u32).wrapping_mul(0x9e37_79b9);
            let cur = f.current(hash, t, gap);
            let i = s
                .pick_in_flowlet(&paths, 0b11, 1250, false, t, 50 * MS, cur)
                .expect("path");
            f.record(hash, i, t);
            let q = |p: usize| s.busy_until(p).saturating_sub(t);
            widest = widest.max(q(0).abs_diff(q(1)));
            t += gap_ns;
        }
        // One 1250-byte packet at 100 Mbit/s is 100 us.
        assert!(widest <= 200_000, "queues {widest} ns apart");
    }

    /// Path switches of one flow's burst of `n` 1400-byte packets, all
    /// handed over at the same instant (one transmit batch), over two
    /// idle like paths of `rate_mbps`.
    fn burst_switches(rate_mbps: u64, n: usize) -> usize {
        let paths = [path(rate_mbps, 0, 10), path(rate_mbps, 0, 10)];
        let mut s = Adaptive::new();
        let mut f = super::super::Flowlets::new();
        let t = 1_000 * MS;
        let mut last = None;
        let mut switches = 0;
        for _ in 0..n {
            let cur = f.current(7, t, MS);
            let i = s
                .pick_in_flowlet(&paths, 0b11, 1400, false, t, 50 * MS, cur)
                .expect("path");
            f.record(7, i, t);
            switches += usize::from(last.is_some_and(|l| l != i));
            last = Some(i);
        }
        switches
    }

    #[test]
    fn a_burst_goes_in_runs_on_fast_paths_and_packet_by_packet_on_slow_ones() {
        // 10 Gbit/s: 1.12 us per packet, so a run of the 50 us slack is
        // about 44 packets, a GSO send's worth (packet by packet: 63
        // switches).
        let fast = burst_switches(10_000, 64);
        assert!(fast <= 2, "{fast} switches in a burst of 64");
        // 100 Mbit/s: 112 us per packet, beyond the run slack: like paths
        // alternate and their queues stay level.
        let slow = burst_switches(100, 16);
        assert_eq!(slow, 15, "slow paths alternate");
    }

    #[test]
    fn a_flowlet_never_keeps_a_full_or_lossy_path() {
        let mut paths = [path(100, 0, 10), path(100, 0, 10)];
        let mut s = Adaptive::new();
        // Path 0 is full: its virtual queue is past the cap.
        s.set_busy_until(0, 1_000 * MS + 11 * MS);
        let i = s.pick_in_flowlet(&paths, 0b11, 1250, false, 1_000 * MS, 50 * MS, Some(0));
        assert_eq!(i, Some(1));
        // Path 0 is lossy, path 1 clean and idle.
        paths[0].lossy = true;
        let mut s = Adaptive::new();
        let i = s.pick_in_flowlet(&paths, 0b11, 1250, false, 1_000 * MS, 50 * MS, Some(0));
        assert_eq!(i, Some(1));
        // Not eligible, or not a path at all.
        let mut s = Adaptive::new();
        paths[0].lossy = false;
        assert_eq!(
            s.pick_in_flowlet(&paths, 0b10, 1250, false, 1_000 * MS, 50 * MS, Some(0)),
            Some(1)
        );
        assert_eq!(
            s.pick_in_flowlet(&paths, 0b10, 1250, false, 1_000 * MS, 50 * MS, Some(9)),
            Some(1)
        );
    }

    #[test]
    fn a_lossy_path_takes_only_the_overflow() {
        let mut wifi = path(50, 0, 10);
        wifi.lossy = true;
        let lte = path(20, 25, 60);
        let paths = [wifi, lte];
        let mut s = Adaptive::new();
        // 15 Mbit/s fits on LTE: nothing on the lossy WiFi despite its
        // lower delay.
        let c = offer(&mut s, &paths, 15, 1000, 200);
        assert_eq!(c[0], 0, "{c:?}");
        // 40 Mbit/s does not: the overflow goes to WiFi.
        let c = offer(&mut s, &paths, 40, 1000, 200);
        assert!(c[0] > 0 && c[1] > 0, "{c:?}");
    }

    /// A fresh satellite beside DSL, offered a slow-start burst of twice
    /// what the model gives both: DSL's capacity is known (a queue showed
    /// it), the satellite's estimate is only a lower bound. The overflow
    /// must go to the satellite, not into DSL's small buffer; once the
    /// satellite's rate is known too, it goes where it arrives first (DSL)
    /// as before. Small packets keep arriving first either way.
    #[test]
    fn full_size_overflow_goes_to_a_path_whose_rate_is_a_lower_bound() {
        let dsl = path(10, 0, 50);
        let mut geo = path(2, 287, 300);
        geo.lower_bound = true;
        let (sat, line) = (0, 1);
        // 24 Mbit/s for 1 s: DSL takes 10, the satellite's model 2.
        let mut s = Adaptive::new();
        let counts = offer(&mut s, &[geo, dsl], 24, 1000, 400);
        let dsl_packets = 10_000_000 / 8 / 1250;
        assert!(
            counts[line] <= dsl_packets + dsl_packets / 20,
            "DSL got {counts:?}, its capacity {dsl_packets} packets"
        );
        assert!(counts[sat] > 1000, "{counts:?}");
        // Its virtual queue stays at its cap (the satellite's grows).
        let now = 2_000 * MS;
        assert!(s.busy_until(line) <= now + dsl.cap_ns + 2 * MS);
        assert!(s.busy_until(sat) > now + geo.cap_ns);

        // Known rates: the overflow goes to DSL, where it arrives first.
        geo.lower_bound = false;
        let mut s = Adaptive::new();
        let counts = offer(&mut s, &[geo, dsl], 24, 1000, 400);
        assert!(counts[line] > 2 * dsl_packets, "{counts:?}");

        // A small packet with both full still takes DSL.
        geo.lower_bound = true;
        let mut s = Adaptive::new();
        let _ = offer(&mut s, &[geo, dsl], 24, 1000, 400);
        assert_eq!(
            s.pick(&[geo, dsl], 0b11, 100, false, 2_000 * MS, 400 * MS),
            Some(line)
        );
        // Nor is a lossy path's overflow preferred for being unconfirmed.
        geo.lossy = true;
        let mut s = Adaptive::new();
        let counts = offer(&mut s, &[geo, dsl], 24, 1000, 400);
        assert!(counts[line] > 2 * dsl_packets, "{counts:?}");

        // Like paths that tie share their overflow by their clocks whether
        // their rates are known or not: the rule only acts when every path
        // where a packet arrives first is known to be full.
        let like = |lower_bound| {
            let mut p = path(10, 0, 10);
            p.lower_bound = lower_bound;
            let mut s = Adaptive::new();
            offer(&mut s, &[p, p], 40, 500, 50)
        };
        assert_eq!(like(true), like(false));
        let mixed = {
            let mut q = path(10, 0, 10);
            q.lower_bound = true;
            let mut s = Adaptive::new();
            offer(&mut s, &[path(10, 0, 10), q], 40, 500, 50)
        };
        assert_eq!(mixed, like(false));
    }

    #[test]
    fn nothing_eligible_and_unknown_rates() {
        let mut s = Adaptive::new();
        assert_eq!(s.pick(&[path(10, 0, 10)], 0, 100, false, 0, 0), None);
        assert_eq!(s.pick(&[path(10, 0, 10)], 0b10, 100, false, 0, 0), None);
        // An unknown rate costs nothing: the lower delay wins.
        let free = PathModel {
            owd_ns: 5 * MS,
            ..Default::default()
        };
        let paths = [path(10, 10, 10), free];
        assert_eq!(s.pick(&paths, 0b11, 1000, false, 0, MS * 100), Some(1));
        // Extreme values saturate instead of overflowing.
        let huge = PathModel {
            ps_per_byte: u64::MAX,
            owd_ns: u64::MAX,
            cap_ns: u64::MAX,
            lossy: false,
            lower_bound: false,
        };
        assert_eq!(
            s.pick(&[huge], 1, usize::MAX, false, u64::MAX, u64::MAX),
            Some(0)
        );
    }

    #[test]
    fn level_queue_cuts_in_proportion_and_within_bounds() {
        // Within the dead band, unknown rates: unchanged.
        assert_eq!(level_queue(1000, LEVEL_DEADBAND_NS, 0), 1000);
        assert_eq!(level_queue(0, 40 * MS, 0), 0);
        // 5 ms over the band, 100 ms horizon: 5 % less rate offered.
        assert_eq!(
            level_queue(950_000, LEVEL_DEADBAND_NS + 5 * MS, 100 * MS),
            1_000_000
        );
        // A short horizon is raised to the minimum.
        assert_eq!(
            level_queue(950_000, LEVEL_DEADBAND_NS + 5 * MS / 2, 0),
            1_000_000
        );
        // Never more than a quarter.
        assert_eq!(level_queue(750, u64::MAX, 1), 1000);
        assert_eq!(level_queue(u64::MAX, u64::MAX, 1), u64::MAX);
    }

    /// Two 100 Mbit/s paths whose rate estimates are 2 % apart (and a
    /// little low, as a delivery rate is) carry a flow of their summed
    /// capacity for 3 s; every 10 ms the sender learns each path's queue
    /// as it stood 10 ms earlier. Returns the final queues, ms.
    fn skewed_estimates(level: bool) -> [f64; 2] {
        let estimates = [100_500_000u64, 98_500_000];
        let capacity = 100e6 / 8.0; // bytes per second
        let mut queue = [0.0f64; 2]; // bytes
        let mut seen = [[0.0f64; 2]; 2]; // lagged readings, oldest first
        let mut s = Adaptive::new();
        let mut paths = [path(100, 0, 10); 2];
        let size = 1250u64;
        let gap_ns = size * 8 * 1000 / 200;
        let mut t = 1_000 * MS;
        let mut next_fb = t;
        let end = t + 3_000 * MS;
        while t < end {
            if t >= next_fb {
                next_fb += 10 * MS;
                seen = [seen[1], queue];
                let q_ns = seen[0].map(|b| (b / capacity * 1e9) as u64);
                let lo = q_ns[0].min(q_ns[1]);
                for i in 0..2 {
                    let ps = ps_per_byte(estimates[i]);
                    paths[i].ps_per_byte = if level {
                        level_queue(ps, q_ns[i] - lo, 20 * MS)
                    } else {
                        ps
                    };
                }
            }
            let i = s
                .pick(&paths, 0b11, size as usize, false, t, 50 * MS)
                .expect("path");
            queue[i] += size as f64;
            for q in &mut queue {
                *q = (*q - capacity * gap_ns as f64 / 1e9).max(0.0);
            }
            t += gap_ns;
        }
        queue.map(|b| b / capacity * 1e3)
    }

    #[test]
    fn measured_queues_level_paths_despite_skewed_estimates() {
        let [a, b] = skewed_estimates(false);
        assert!(a - b > 8.0, "without leveling the queues drift: {a} {b}");
        let [a, b] = skewed_estimates(true);
        assert!(
            (a - b).abs() < 3.0,
            "leveled queues stay within a few ms: {a} {b}"
        );
    }

    #[test]
    fn probe_gain_cycles() {
        let g: Vec<u64> = (0..8).map(|k| probe_gain(1000, k * 10, 10, 0)).collect();
        assert_eq!(g, [800, 1250, 1000, 1000, 1000, 1000, 1000, 1000]);
        assert_eq!(probe_gain(1000, 0, 10, 1), 1250);
        assert_eq!(probe_gain(1000, 0, 10, 7), 1000);
        assert_eq!(probe_gain(1000, 5, 0, 0), 1000);
        assert_eq!(ps_per_byte(8_000_000_000), 1000);
        assert_eq!(ps_per_byte(0), 0);
        assert_eq!(ps_per_byte(u64::MAX), 1);
    }

    /// The overflow and best-with-room choice as three separate passes,
    /// the way the rule reads (the scheduler fuses the last two).
    fn three_pass_choice(
        s: &Adaptive,
        paths: &[PathModel],
        mask: u64,
        bytes: u64,
        small: bool,
        now: u64,
        hold: u64,
    ) -> Option<usize> {
        let finish = |busy: u64, p: &PathModel| {
            busy.max(now)
                .saturating_add(bytes.saturating_mul(p.ps_per_byte) / 1000)
        };
        let arrival = |busy: u64, p: &PathModel| finish(busy, p).saturating_add(p.owd_ns);
        let ids: Vec<usize> = (0..paths.len()).filter(|&i| mask & (1 << i) != 0).collect();
        let (first, first_path) = ids
            .iter()
            .map(|&i| (arrival(s.busy_until[i], &paths[i]), i))
            .min()?;
        let tied = ids
            .iter()
            .filter(|&&i| arrival(s.busy_until[i], &paths[i]) <= first + SPILL_TIE_NS);
        let spill = tied
            .map(|&i| (arrival(s.busy_until[i].max(s.spill_until[i]), &paths[i]), i))
            .min();
        let room = |lossy: bool| {
            ids.iter()
                .filter(|&&i| paths[i].lossy == lossy)
                .filter(|&&i| s.busy_until[i].saturating_sub(now) <= paths[i].cap_ns)
                .filter(|&&i| arrival(s.busy_until[i], &paths[i]) <= first + hold)
                .map(|&i| {
                    let busy = s.busy_until[i];
                    let rank = if small {
                        arrival(busy, &paths[i])
                    } else {
                        finish(busy, &paths[i])
                    };
                    ((rank, busy), i)
                })
                .min()
        };
        let tied_lower_bound = ids
            .iter()
            .filter(|&&i| arrival(s.busy_until[i], &paths[i]) <= first + SPILL_TIE_NS)
            .any(|&i| paths[i].lower_bound);
        let probe_spill = ids
            .iter()
            .filter(|&&i| paths[i].lower_bound && !paths[i].lossy && !small)
            .filter(|_| !tied_lower_bound)
            .map(|&i| (arrival(s.busy_until[i].max(s.spill_until[i]), &paths[i]), i))
            .min();
        let best = room(false).or(room(true)).map(|(_, i)| i);
        Some(best.unwrap_or(probe_spill.or(spill).map_or(first_path, |(_, i)| i)))
    }

    #[test]
    fn one_pass_choice_matches_the_three_pass_rule() {
        // Random paths, clocks and masks; small numbers so that ties,
        // full paths and paths past the hold all come up often.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut picked_lossy = 0;
        for _ in 0..20_000 {
            let n = 1 + next(12) as usize;
            let paths: Vec<PathModel> = (0..n)
                .map(|_| PathModel {
                    ps_per_byte: next(4) * 40_000,
                    owd_ns: next(4) * MS,
                    cap_ns: next(3) * 2 * MS,
                    lossy: next(4) == 0,
                    lower_bound: next(3) == 0,
                })
                .collect();
            let now = 100 * MS;
            let mut s = Adaptive::new();
            for i in 0..n {
                s.busy_until[i] = now - 2 * MS + next(8) * MS;
                s.spill_until[i] = now - 2 * MS + next(8) * MS;
            }
            let mask = next(1 << n) | (1 << next(n as u64));
            let bytes = if next(2) == 0 { 100 } else { 1400 };
            let hold = next(4) * MS;
            let want = three_pass_choice(&s, &paths, mask, bytes, bytes < 300, now, hold);
            let got = s.pick(&paths, mask, bytes as usize, false, now, hold);
            assert_eq!(got, want, "{paths:?} mask {mask:#b} bytes {bytes}");
            picked_lossy += usize::from(got.is_some_and(|i| paths[i].lossy));
        }
        assert!(
            picked_lossy > 100,
            "lossy paths chosen {picked_lossy} times"
        );
    }
}
