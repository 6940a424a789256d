//! The `adaptive` scheduler against offered loads, in virtual time.

use super::*;
use crate::sched::{level_queue, ps_per_byte, Flowlets};

/// The scheduler's inputs as arguments, as these tests were written.
trait PickWith {
    fn pick_with(
        &mut self,
        paths: &[PathModel],
        mask: u64,
        bytes: usize,
        bulk: bool,
        now_ns: u64,
        hold_ns: u64,
    ) -> Option<usize>;

    #[allow(clippy::too_many_arguments)]
    fn pick_in_flowlet(
        &mut self,
        paths: &[PathModel],
        mask: u64,
        bytes: usize,
        bulk: bool,
        now_ns: u64,
        hold_ns: u64,
        flowlet: Option<usize>,
    ) -> Option<usize>;
}

impl PickWith for Adaptive {
    fn pick_with(
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

    fn pick_in_flowlet(
        &mut self,
        paths: &[PathModel],
        mask: u64,
        bytes: usize,
        bulk: bool,
        now_ns: u64,
        hold_ns: u64,
        flowlet: Option<usize>,
    ) -> Option<usize> {
        self.pick(&PickInput {
            models: paths,
            mask,
            bytes,
            bulk,
            now_ns,
            hold_ns,
            flowlet,
            ..PickInput::default()
        })
    }
}

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
fn offer(s: &mut Adaptive, paths: &[PathModel], rate_mbps: u64, ms: u64, hold_ms: u64) -> Vec<u64> {
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
            .pick_with(paths, 0b11, size as usize, false, t, hold_ms * MS)
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
                    .pick_with(&paths, (1 << 12) - 1, 1250, false, t, 50 * MS)
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
        let i = s.pick_with(&paths, 0b11, 1250, false, 1_000 * MS, 200 * MS);
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
    let mut f = Flowlets::new();
    let gap = Flowlets::gap_for(paths.iter().map(|p| p.owd_ns));
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
    let mut f = Flowlets::new();
    let gap = Flowlets::gap_for(paths.iter().map(|p| p.owd_ns));
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
    let mut f = Flowlets::new();
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
        s.pick_with(&[geo, dsl], 0b11, 100, false, 2_000 * MS, 400 * MS),
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
    assert_eq!(s.pick_with(&[path(10, 0, 10)], 0, 100, false, 0, 0), None);
    assert_eq!(
        s.pick_with(&[path(10, 0, 10)], 0b10, 100, false, 0, 0),
        None
    );
    // An unknown rate costs nothing: the lower delay wins.
    let free = PathModel {
        owd_ns: 5 * MS,
        ..Default::default()
    };
    let paths = [path(10, 10, 10), free];
    assert_eq!(s.pick_with(&paths, 0b11, 1000, false, 0, MS * 100), Some(1));
    // Extreme values saturate instead of overflowing.
    let huge = PathModel {
        ps_per_byte: u64::MAX,
        owd_ns: u64::MAX,
        cap_ns: u64::MAX,
        lossy: false,
        lower_bound: false,
    };
    assert_eq!(
        s.pick_with(&[huge], 1, usize::MAX, false, u64::MAX, u64::MAX),
        Some(0)
    );
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
            .pick_with(&paths, 0b11, size as usize, false, t, 50 * MS)
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
        let got = s.pick_with(&paths, mask, bytes as usize, false, now, hold);
        assert_eq!(got, want, "{paths:?} mask {mask:#b} bytes {bytes}");
        picked_lossy += usize::from(got.is_some_and(|i| paths[i].lossy));
    }
    assert!(
        picked_lossy > 100,
        "lossy paths chosen {picked_lossy} times"
    );
}
