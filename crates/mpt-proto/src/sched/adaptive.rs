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
//! deliveries, about doubling per 600 ms round trip, so a TCP slow start
//! outgrows it; its overflow then goes to the satellite, not into DSL's
//! full 64 kB buffer, where CUBIC would read it as loss (measured:
//! docs/results/2026-11-27-unlike-paths-far-path-overflow.md).
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

use crate::sched::flowlet::{RUN_SLACK_NS, STICK_SLACK_NS};
use crate::sched::model::PathModel;
use crate::sched::{for_each_bit, PickInput, Scheduler, MAX_PATHS};

/// Datagrams shorter than this (ACKs, voice, keystrokes, DNS) go where
/// they arrive first; longer ones where they leave first.
pub const SMALL_PACKET: usize = 300;

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
    /// goes when every path is full (see the pick).
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

    /// The pick of [`Scheduler::pick`], with the input's fields as
    /// arguments. Kept out of line on purpose: inlined into the trait
    /// method it runs 3-4 % more instructions (cachegrind, 2 to 32 paths).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn place(
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
            // packet by packet, like one without flowlets. Kept in runs, big
            // flows leave the paths' queues a run apart and the resequencer
            // holds each flow for the deepest (measured:
            // docs/results/2026-11-26-like-paths-level-queues.md).
            // A path with something queued keeps it only within the much
            // shorter run slack, and only if a run holds more than one
            // packet there (see `RUN_SLACK_NS`).
            let slack = if busy <= now_ns {
                Some(STICK_SLACK_NS)
            } else if tx_time(pq) < RUN_SLACK_NS {
                Some(RUN_SLACK_NS)
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

impl Scheduler for Adaptive {
    /// Picks the path for a datagram of `input.bytes` at `input.now_ns`
    /// among the set bits of `input.mask`, by `input.models`, and charges
    /// it. `input.hold_ns` is how long the receiver's resequencer waits for
    /// a late packet. A datagram below [`SMALL_PACKET`] bytes is ranked by
    /// arrival unless `input.bulk` says to treat it as bulk data (a TCP
    /// SYN). `input.weights` is not read.
    ///
    /// When the packet's flow's previous packet took path `input.flowlet`
    /// not long ago (see [`crate::sched::Flowlets`]), that path is kept if
    /// it could take the packet and ranks at most [`STICK_SLACK_NS`]
    /// behind the best while it has nothing queued in the model, at most
    /// [`RUN_SLACK_NS`] while it has.
    #[inline]
    fn pick(&mut self, input: &PickInput<'_>) -> Option<usize> {
        self.place(
            input.models,
            input.mask,
            input.bytes,
            input.bulk,
            input.now_ns,
            input.hold_ns,
            input.flowlet,
        )
    }

    /// The `adaptive` scheduler keeps a flow on its path while that costs
    /// nothing (see [`crate::sched::Flowlets`]).
    fn follows_flowlets(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
