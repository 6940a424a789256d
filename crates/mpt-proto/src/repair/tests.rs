use super::*;
use crate::wire::{Nack, MAX_NACK_RUN};
use std::time::{Duration, Instant};

use crate::test_clock::t0 as start;

fn at(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

/// Feeds `n` in-order datagrams from path_seq/seq `from` with delay `owd`,
/// one per ms from `ms`; returns the next (path_seq, seq, ms).
fn feed(
    d: &mut LossDetector,
    t0: Instant,
    from: (u32, u64, u64),
    n: u32,
    owd: u32,
) -> (u32, u64, u64) {
    let (mut ps, mut s, mut ms) = from;
    for _ in 0..n {
        assert_eq!(d.on_data(ps, s, owd, at(t0, ms)), None);
        ps = ps.wrapping_add(1);
        s += 2; // another path carries every other sequence number
        ms += 1;
    }
    (ps, s, ms)
}

/// The hole a datagram opened (panics if it opened none).
fn opened(e: Option<HoleEvent>) -> Hole {
    match e {
        Some(HoleEvent::Opened(h)) => h,
        other => panic!("expected a hole, got {other:?}"),
    }
}

#[test]
fn a_hole_on_an_empty_queue_is_asked_for_once_its_window_passed() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (ps, s, ms) = feed(&mut d, t0, (10, 100, 0), 50, 5_000);
    // path_seq ps and ps+1 are lost; the next comes at the floor delay.
    let hole = opened(d.on_data(ps + 2, s + 4, 5_200, at(t0, ms)));
    assert!(hole.repairable);
    assert_eq!(
        (hole.after_seq, hole.before_seq, hole.missing),
        (s - 2, s + 4, 2)
    );
    assert_eq!(hole.decide_at, at(t0, ms) + MIN_REORDER_WINDOW);
    assert_eq!(d.next_decision(), Some(hole.decide_at));
    // Not before the window ends: the datagrams may still come.
    assert_eq!(d.poll(hole.decide_at - Duration::from_micros(1)), None);
    let loss = d.poll(hole.decide_at).expect("random loss");
    assert_eq!(
        loss.nack,
        Nack {
            first_path_seq: ps,
            count: 2
        }
    );
    assert_eq!(
        (loss.after_seq, loss.before_seq, loss.missing),
        (s - 2, s + 4, 2)
    );
    assert_eq!(d.poll(hole.decide_at), None, "asked once");
    assert_eq!(d.next_decision(), None);
    assert_eq!(d.stats().requested, 1);
    assert_eq!(d.stats().requested_datagrams, 2);
}

#[test]
fn datagrams_overtaken_on_the_way_in_fill_their_hole_and_nothing_is_asked() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (ps, s, ms) = feed(&mut d, t0, (0, 0, 0), 20, 2_000);
    let hole = opened(d.on_data(ps + 1, s + 2, 2_000, at(t0, ms)));
    // The missing one comes 300 us later, inside the window.
    let late = at(t0, ms) + Duration::from_micros(300);
    assert_eq!(
        d.on_data(ps, s, 2_000, late),
        Some(HoleEvent::Filled {
            seq: s,
            after_seq: hole.after_seq,
            before_seq: hole.before_seq,
            asked: false
        })
    );
    assert_eq!(d.poll(hole.decide_at), None);
    assert_eq!(d.next_decision(), None);
    assert_eq!(d.stats().reordered, 1);
    assert_eq!(d.stats().requested, 0);
    // A second copy of it is a duplicate, not news.
    assert_eq!(d.on_data(ps, s, 2_000, late), None);
}

#[test]
fn the_window_grows_to_the_longest_swap_and_shrinks_when_they_stop() {
    let t0 = start();
    let mut d = LossDetector::new();
    d.set_window_cap(Duration::from_millis(40));
    let (ps, s, ms) = feed(&mut d, t0, (0, 0, 0), 20, 2_000);
    assert_eq!(d.reorder_window(), MIN_REORDER_WINDOW);
    let hole = opened(d.on_data(ps + 1, s + 2, 2_000, at(t0, ms)));
    // This one is 4 ms late: past the 1 ms window, it was asked for.
    assert!(d.poll(hole.decide_at).is_some());
    let fill = d.on_data(ps, s, 2_000, at(t0, ms + 4));
    assert!(matches!(fill, Some(HoleEvent::Filled { asked: true, .. })));
    assert_eq!(d.stats().needless, 1);
    assert_eq!(d.reorder_window(), Duration::from_millis(5));
    // The next hole waits 5 ms: the same swap no longer costs a request.
    let (ps, s, ms) = feed(&mut d, t0, (ps + 2, s + 4, ms + 5), 10, 2_000);
    let hole = opened(d.on_data(ps + 1, s + 2, 2_000, at(t0, ms)));
    assert_eq!(hole.decide_at, at(t0, ms + 5));
    assert!(d.poll(at(t0, ms + 4)).is_none());
    assert!(matches!(
        d.on_data(ps, s, 2_000, at(t0, ms + 4)),
        Some(HoleEvent::Filled { asked: false, .. })
    ));
    assert_eq!(d.stats().needless, 1);
    // 10 s without a swap: back to the minimum.
    feed(&mut d, t0, (ps + 2, s + 4, ms + 1), 11_000, 2_000);
    assert_eq!(d.reorder_window(), MIN_REORDER_WINDOW);
}

#[test]
fn the_window_is_capped() {
    let t0 = start();
    let mut d = LossDetector::new();
    d.set_window_cap(Duration::from_millis(3));
    let (ps, s, ms) = feed(&mut d, t0, (0, 0, 0), 20, 2_000);
    opened(d.on_data(ps + 1, s + 2, 2_000, at(t0, ms)));
    d.on_data(ps, s, 2_000, at(t0, ms + 30));
    assert_eq!(d.reorder_window(), Duration::from_millis(3));
    d.set_window_cap(Duration::ZERO);
    assert_eq!(d.reorder_window(), MIN_REORDER_WINDOW);
    d.set_window_cap(Duration::from_secs(9));
    assert_eq!(d.reorder_window(), Duration::from_micros(37_500));
}

#[test]
fn a_partly_filled_hole_asks_for_what_is_still_missing() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (ps, s, ms) = feed(&mut d, t0, (100, 1_000, 0), 20, 2_000);
    // ps..ps+4 missing (5), then the first and the last arrive.
    let hole = opened(d.on_data(ps + 5, s + 10, 2_000, at(t0, ms)));
    assert_eq!(hole.missing, 5);
    d.on_data(ps, s, 2_000, at(t0, ms));
    d.on_data(ps + 4, s + 8, 2_000, at(t0, ms));
    let loss = d.poll(hole.decide_at).expect("still missing");
    assert_eq!(
        loss.nack,
        Nack {
            first_path_seq: ps + 1,
            count: 3
        }
    );
    assert_eq!(loss.missing, 3);
}

#[test]
fn a_hole_behind_a_standing_queue_is_left_to_tcp() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (ps, s, ms) = feed(&mut d, t0, (0, 0, 0), 20, 5_000);
    // A queue builds up to 40 ms, then overflows.
    let (ps, s, ms) = feed(&mut d, t0, (ps, s, ms), 20, 45_000);
    let hole = opened(d.on_data(ps + 1, s + 2, 45_000, at(t0, ms)));
    assert!(!hole.repairable);
    assert_eq!(d.poll(hole.decide_at), None);
    assert_eq!(d.stats().congestion, 1);
    // Once the queue drained, a hole counts as random again.
    let (ps, s, ms) = feed(&mut d, t0, (ps + 2, s + 4, ms + 1), 20, 6_000);
    let hole = opened(d.on_data(ps + 1, s + 2, 6_000, at(t0, ms)));
    assert!(hole.repairable);
    assert!(d.poll(hole.decide_at).is_some());
}

#[test]
fn a_moderate_queue_far_below_the_peak_still_counts_as_random() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (ps, s, ms) = feed(&mut d, t0, (0, 0, 0), 10, 1_000);
    let (ps, s, ms) = feed(&mut d, t0, (ps, s, ms), 10, 61_000); // peak 60 ms
    let (ps, s, ms) = feed(&mut d, t0, (ps, s, ms), 10, 11_000);
    // 10 ms of queue: more than RANDOM_QUEUE_US, less than half the peak.
    assert!(opened(d.on_data(ps + 1, s + 2, 11_000, at(t0, ms))).repairable);
}

#[test]
fn delays_compare_across_the_clock_wrap() {
    let t0 = start();
    let mut d = LossDetector::new();
    // The floor sits just below the wrap; samples just above it are
    // 1 ms more, not 4 billion µs less.
    let base = u32::MAX - 500;
    let (ps, s, ms) = feed(&mut d, t0, (0, 0, 0), 10, base);
    let hole = opened(d.on_data(ps + 1, s + 2, base.wrapping_add(1_000), at(t0, ms)));
    assert!(hole.repairable);
    assert!(d.poll(hole.decide_at).is_some());
    let (ps, s, ms) = feed(&mut d, t0, (ps + 2, s + 4, ms + 1), 10, base);
    let hole = opened(d.on_data(ps + 1, s + 2, base.wrapping_add(50_000), at(t0, ms)));
    assert!(!hole.repairable);
    assert_eq!(d.poll(hole.decide_at), None);
    assert_eq!(d.stats().congestion, 1);
}

#[test]
fn path_seq_wraps_and_stragglers_are_recognised() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (ps, s, ms) = feed(&mut d, t0, (u32::MAX - 5, 1, 0), 5, 2_000);
    assert_eq!(ps, u32::MAX);
    let hole = opened(d.on_data(1, s + 4, 2_000, at(t0, ms)));
    let loss = d.poll(hole.decide_at).expect("hole across the wrap");
    assert_eq!(
        loss.nack,
        Nack {
            first_path_seq: u32::MAX,
            count: 2
        }
    );
    // One lost one turns up late after all (its repair was needless), then
    // a duplicate of a datagram already seen: no news.
    assert!(matches!(
        d.on_data(0, s + 2, 2_000, at(t0, ms + 3)),
        Some(HoleEvent::Filled { asked: true, .. })
    ));
    assert_eq!(d.on_data(0, s + 2, 2_000, at(t0, ms + 3)), None);
    assert_eq!(d.on_data(1, s + 4, 2_000, at(t0, ms + 3)), None);
    assert_eq!(d.on_data(2, s + 6, 2_000, at(t0, ms + 4)), None);
    assert_eq!(d.stats().needless, 1);
}

#[test]
fn long_runs_and_inconsistent_sequences_are_not_asked_for() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (ps, s, ms) = feed(&mut d, t0, (0, 1_000, 0), 10, 2_000);
    let run = u32::from(MAX_NACK_RUN) + 1;
    assert_eq!(d.on_data(ps + run, s + 1_000, 2_000, at(t0, ms)), None);
    assert_eq!(d.stats().unrequested, 1);
    // A hole of 3 datagrams but a sequence that moved by 1: a restart.
    let (ps, s, ms) = feed(&mut d, t0, (ps + run + 1, s + 1_002, ms + 1), 3, 2_000);
    assert_eq!(d.on_data(ps + 3, s - 1, 2_000, at(t0, ms)), None);
    assert_eq!(d.poll(at(t0, ms + 100)), None);
    assert_eq!(d.stats().requested, 0);
}

#[test]
fn holes_beyond_the_tracked_ones_are_decided_at_once() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (mut ps, mut s, ms) = feed(&mut d, t0, (0, 0, 0), 20, 2_000);
    // Every other datagram lost within one instant: eight holes tracked.
    for _ in 0..MAX_OPEN_HOLES {
        assert!(opened(d.on_data(ps + 1, s + 2, 2_000, at(t0, ms))).repairable);
        ps += 2;
        s += 4;
    }
    let ninth = opened(d.on_data(ps + 1, s + 2, 2_000, at(t0, ms)));
    assert!(!ninth.repairable);
    assert_eq!(ninth.decide_at, at(t0, ms));
    // The eight are asked for (budget: NACK_BURST) when their window ends.
    let mut asked = 0;
    while d.poll(at(t0, ms + 1)).is_some() {
        asked += 1;
    }
    assert_eq!(asked, MAX_OPEN_HOLES.min(NACK_BURST as usize));
    // Decided holes make room for new ones.
    let (ps, s, ms) = feed(&mut d, t0, (ps + 2, s + 4, ms + 2), 1, 2_000);
    assert!(opened(d.on_data(ps + 1, s + 2, 2_000, at(t0, ms))).repairable);
}

#[test]
fn requests_are_rate_limited() {
    let t0 = start();
    let mut d = LossDetector::new();
    // Every other datagram lost: far more holes than the budget allows.
    let (mut ps, mut s) = (0u32, 0u64);
    let mut asked = 0;
    let total = 1_000u32;
    for k in 0..total {
        let now = at(t0, u64::from(k) * 2);
        d.on_data(ps, s, 2_000, now);
        while d.poll(now).is_some() {
            asked += 1;
        }
        ps += 2;
        s += 2;
    }
    assert!(
        asked <= NACK_BURST + total / NACK_EVERY + 1,
        "{asked} requests"
    );
    assert!(asked >= total / NACK_EVERY - 1, "{asked} requests");
}

#[test]
fn the_floor_follows_a_path_whose_delay_rises_for_good() {
    let t0 = start();
    let mut d = LossDetector::new();
    let (ps, s, _) = feed(&mut d, t0, (0, 0, 0), 10, 2_000);
    // The path is rerouted: 30 ms more, from 1 s on. After two windows
    // the old floor is forgotten and holes count as random again.
    let mut state = (ps, s, 1_000);
    for _ in 0..11 {
        state = feed(&mut d, t0, state, 1_000, 32_000);
    }
    let (ps, s, ms) = state;
    assert!(opened(d.on_data(ps + 1, s + 2, 32_000, at(t0, ms))).repairable);
}

#[test]
fn history_answers_each_copy_once_and_forgets_overwritten_ones() {
    let mut h = RepairHistory::new(4, 8);
    h.record(7, 70, true, &[1, 2, 3]);
    h.record(8, 80, false, &[4; 8]);
    h.record(9, 90, false, &[5; 9]); // too large: not kept
    assert_eq!(
        h.take(7),
        Some(Copy {
            seq: 70,
            flow: true,
            payload: &[1, 2, 3][..]
        })
    );
    assert_eq!(h.take(7), None, "answered once");
    assert_eq!(h.take(9), None);
    assert_eq!(h.take(12), None, "slot of 8, other path_seq");
    h.record(12, 120, false, &[6]); // overwrites 8's slot
    assert_eq!(h.take(8), None);
    assert_eq!(h.take(12).map(|c| c.seq), Some(120));
    h.record(u32::MAX, 1, false, &[]);
    assert_eq!(h.take(u32::MAX).map(|c| c.payload.len()), Some(0));
}
