use super::*;

const MS: Duration = Duration::from_millis(1);

use crate::test_clock::t0;

fn pkt(seq: u64) -> Vec<u8> {
    seq.to_be_bytes().to_vec()
}

fn seq_of(p: &[u8]) -> u64 {
    u64::from_be_bytes(p.try_into().expect("8 bytes"))
}

struct Out(Vec<u64>);
impl Out {
    fn sink(&mut self) -> impl FnMut(&[u8]) + '_ {
        |p| self.0.push(seq_of(p))
    }
}

#[test]
fn in_order_passes_straight_through() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, 10 * MS);
    let mut out = Out(vec![]);
    for s in 100..110 {
        assert_eq!(r.insert(s, 0, &pkt(s), t, out.sink()), Outcome::InOrder);
    }
    assert_eq!(out.0, (100..110).collect::<Vec<_>>());
    assert_eq!(r.held(), 0);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn two_interleaved_paths_are_resequenced() {
    let t = t0();
    let mut r = Resequencer::new(64, 64, 10 * MS);
    let mut out = Out(vec![]);
    // Path 0 carries even, path 1 odd sequence numbers; path 1's batch
    // arrives first except for the very first packet.
    r.insert(0, 0, &pkt(0), t, out.sink());
    for s in (1..20).step_by(2) {
        r.insert(s, 1, &pkt(s), t, out.sink());
    }
    for s in (2..20).step_by(2) {
        r.insert(s, 0, &pkt(s), t, out.sink());
    }
    assert_eq!(out.0, (0..20).collect::<Vec<_>>());
    assert_eq!(r.stats().held, 9);
    assert_eq!(r.stats().gaps_skipped, 0);
}

#[test]
fn skips_fill_gaps() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(1, 0, &pkt(1), t, out.sink());
    assert_eq!(r.insert(3, 1, &pkt(3), t, out.sink()), Outcome::Held);
    r.skip(2, 0, t, out.sink());
    assert_eq!(out.0, [1, 3]);
    // A skip ahead of time also works.
    r.skip(5, 1, t, out.sink());
    r.insert(6, 1, &pkt(6), t, out.sink());
    r.insert(4, 0, &pkt(4), t, out.sink());
    assert_eq!(out.0, [1, 3, 4, 6]);
}

#[test]
fn loss_is_proven_when_every_active_path_has_moved_past_the_gap() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    let mut out = Out(vec![]);
    r.insert(0, 1, &pkt(0), t, out.sink());
    r.insert(1, 0, &pkt(1), t, out.sink());
    // 2 was sent on path 1 and lost.
    r.insert(3, 0, &pkt(3), t, out.sink());
    assert_eq!(out.0, [0, 1], "path 1 may still bring 2");
    r.insert(4, 1, &pkt(4), t, out.sink());
    // Path 1 moved past 2: it is lost, once 3 has waited out the grace
    // (two CPUs taking in one path's datagrams may swap them).
    assert_eq!(out.0, [0, 1], "within the reorder grace");
    assert_eq!(r.poll_timeout(), Some(t + REORDER_GRACE), "wakes up for it");
    r.handle_timeout(t + REORDER_GRACE - Duration::from_micros(1), out.sink());
    assert_eq!(out.0, [0, 1]);
    r.handle_timeout(t + REORDER_GRACE, out.sink());
    assert_eq!(out.0, [0, 1, 3, 4], "path 1 moved past 2: it is lost");
    assert_eq!(r.stats().gaps_skipped, 1);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn datagrams_of_one_path_swapped_within_the_grace_are_not_lost() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    let mut out = Out(vec![]);
    r.insert(0, 0, &pkt(0), t, out.sink());
    r.insert(1, 1, &pkt(1), t, out.sink());
    // Path 0 sent 2 then 4, path 1 sent 3; 4 overtakes 2 on the way in.
    r.insert(3, 1, &pkt(3), t, out.sink());
    r.insert(4, 0, &pkt(4), t + Duration::from_micros(50), out.sink());
    assert_eq!(out.0, [0, 1], "both paths are past 2, but not for long");
    r.insert(2, 0, &pkt(2), t + Duration::from_micros(300), out.sink());
    assert_eq!(out.0, [0, 1, 2, 3, 4]);
    assert_eq!(r.stats().gaps_skipped, 0);
    assert_eq!(r.stats().late, 0);
    // With no grace the swap is a loss, and 2 comes late.
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    for (seq, path, us) in [(0, 0, 0), (1, 1, 0), (3, 1, 0), (4, 0, 50), (2, 0, 300)] {
        r.insert(
            seq,
            path,
            &pkt(seq),
            t + Duration::from_micros(us),
            out.sink(),
        );
    }
    assert_eq!(out.0, [0, 1, 3, 4, 2]);
    assert_eq!(r.stats().gaps_skipped, 1);
}

#[test]
fn a_forgotten_path_no_longer_holds_up_loss_proofs() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    // The paths' order alone proves loss here (no reorder grace).
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    r.insert(0, 1, &pkt(0), t, out.sink());
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(3, 0, &pkt(3), t, out.sink());
    assert_eq!(out.0, [0, 1], "path 1 may still bring 2");
    // Path 1 is removed: only path 0 is left, and it moved past 2.
    r.forget_path(1);
    r.insert(4, 0, &pkt(4), t, out.sink());
    assert_eq!(out.0, [0, 1, 3, 4]);
    r.forget_path(99);
}

#[test]
fn single_path_loss_released_by_next_packet() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    // The paths' order alone proves loss here (no reorder grace).
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(3, 0, &pkt(3), t, out.sink());
    assert_eq!(out.0, [1, 3]);
}

#[test]
fn quiet_path_stops_counting_after_two_timeouts() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, 10 * MS);
    // The paths' order alone proves loss here (no reorder grace).
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    r.insert(1, 1, &pkt(1), t, out.sink());
    // Path 1 goes quiet; path 0 carries on past a gap.
    let later = t + 25 * MS;
    r.insert(3, 0, &pkt(3), later, out.sink());
    assert_eq!(out.0, [1, 3]);
}

#[test]
fn an_idle_path_that_starts_carrying_data_is_waited_for() {
    // A fast path (0) and a path 280 ms slower (1) that has carried nothing
    // for long. The sender starts using path 1 at 10: 10 and 12 go there,
    // 11 and 13 on path 0 arrive first. They must wait for path 1's
    // packets, not be taken as proof that 10 and 12 were lost.
    let t = t0();
    let mut r = Resequencer::new(64, 64, Duration::from_millis(400));
    let mut out = Out(vec![]);
    r.set_path_wait(0, Some(Duration::ZERO));
    r.set_path_wait(1, Some(280 * MS));
    for s in 0..10 {
        r.insert(s, 0, &pkt(s), t, out.sink());
    }
    r.insert(11, 0, &pkt(11), t + MS, out.sink());
    r.insert(13, 0, &pkt(13), t + 2 * MS, out.sink());
    assert_eq!(
        out.0,
        (0..10).collect::<Vec<_>>(),
        "path 1 may bring 10, 12"
    );
    // Path 1's packets arrive 280 ms after their neighbours on path 0.
    r.insert(10, 1, &pkt(10), t + 281 * MS, out.sink());
    r.insert(12, 1, &pkt(12), t + 282 * MS, out.sink());
    assert_eq!(out.0, (0..14).collect::<Vec<_>>());
    assert_eq!(r.stats().gaps_skipped, 0);
    assert_eq!(r.stats().late, 0);
}

#[test]
fn a_gap_is_proven_lost_once_the_idle_paths_wait_is_over() {
    let t = t0();
    let mut r = Resequencer::new(64, 64, Duration::from_secs(1));
    let mut out = Out(vec![]);
    r.set_path_wait(0, Some(Duration::ZERO));
    r.set_path_wait(1, Some(50 * MS));
    r.insert(0, 0, &pkt(0), t, out.sink());
    // 1 lost on path 0; 2 arrives, then 3 a little later.
    r.insert(2, 0, &pkt(2), t + MS, out.sink());
    r.insert(3, 0, &pkt(3), t + 40 * MS, out.sink());
    assert_eq!(out.0, [0], "idle path 1 could still bring 1");
    // 2 has waited path 1's 50 ms: 1 is lost. 5 is younger than the wait,
    // so the gap at 4 is not given up yet.
    r.insert(5, 0, &pkt(5), t + 51 * MS, out.sink());
    assert_eq!(out.0, [0, 2, 3]);
    assert_eq!(r.stats().gaps_skipped, 1);
    r.insert(6, 0, &pkt(6), t + 102 * MS, out.sink());
    assert_eq!(out.0, [0, 2, 3, 5, 6]);
    // The timeout releases what no insert does.
    r.insert(8, 0, &pkt(8), t + 103 * MS, out.sink());
    r.handle_timeout(t + 103 * MS + Duration::from_secs(1), out.sink());
    assert_eq!(out.0, [0, 2, 3, 5, 6, 8]);
}

#[test]
fn paths_that_cannot_carry_data_or_deliver_lately_add_no_wait() {
    let t = t0();
    let mut r = Resequencer::new(64, 64, Duration::from_secs(1));
    let mut out = Out(vec![]);
    // Path 1 is down (no wait); path 2 delivers, so its own sequence
    // numbers prove loss and its wait does not apply.
    r.set_path_wait(1, None);
    r.set_path_wait(2, Some(300 * MS));
    r.insert(0, 2, &pkt(0), t, out.sink());
    r.insert(2, 0, &pkt(2), t, out.sink());
    assert_eq!(out.0, [0], "path 2 may still bring 1");
    r.insert(3, 2, &pkt(3), t + MS, out.sink());
    assert_eq!(out.0, [0, 2, 3], "path 2 moved past 1");
}

#[test]
fn lost_packet_is_given_up_after_timeout_and_late_arrival_delivered() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(3, 1, &pkt(3), t + MS, out.sink());
    r.insert(4, 1, &pkt(4), t + 2 * MS, out.sink());
    assert_eq!(r.poll_timeout(), Some(t + 11 * MS));
    r.handle_timeout(t + 10 * MS, out.sink());
    assert_eq!(out.0, [1], "not yet");
    r.handle_timeout(t + 11 * MS, out.sink());
    assert_eq!(out.0, [1, 3, 4]);
    assert_eq!(r.stats().gaps_skipped, 1);
    assert_eq!(
        r.insert(2, 0, &pkt(2), t + 12 * MS, out.sink()),
        Outcome::Late
    );
    assert_eq!(out.0, [1, 3, 4, 2]);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn several_gaps_time_out_one_after_another() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(3, 1, &pkt(3), t, out.sink());
    r.insert(6, 1, &pkt(6), t + 5 * MS, out.sink());
    r.handle_timeout(t + 10 * MS, out.sink());
    assert_eq!(out.0, [1, 3]);
    assert_eq!(r.poll_timeout(), Some(t + 15 * MS));
    r.handle_timeout(t + 15 * MS, out.sink());
    assert_eq!(out.0, [1, 3, 6]);
}

#[test]
fn duplicates_dropped() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(3, 1, &pkt(3), t, out.sink());
    assert_eq!(r.insert(3, 1, &pkt(3), t, out.sink()), Outcome::Duplicate);
    r.insert(2, 0, &pkt(2), t, out.sink());
    assert_eq!(out.0, [1, 2, 3]);
    assert_eq!(r.stats().duplicates, 1);
}

#[test]
fn far_ahead_sequence_forces_window_forward() {
    let t = t0();
    let mut r = Resequencer::new(8, 64, Duration::from_secs(10));
    let mut out = Out(vec![]);
    r.insert(0, 0, &pkt(0), t, out.sink());
    r.insert(2, 1, &pkt(2), t, out.sink());
    r.insert(20, 1, &pkt(20), t, out.sink());
    // 2 was forced out; 20 now waits at the end of the window.
    assert_eq!(out.0, [0, 2]);
    assert_eq!(r.held(), 1);
    for s in 13..20 {
        r.insert(s, 0, &pkt(s), t, out.sink());
    }
    assert_eq!(out.0, [0, 2, 13, 14, 15, 16, 17, 18, 19, 20]);
}

#[test]
fn peer_restart_resets_window() {
    let t = t0();
    let mut r = Resequencer::new(8, 64, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(1000, 0, &pkt(1000), t, out.sink());
    r.insert(1002, 0, &pkt(1002), t, out.sink());
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(2, 0, &pkt(2), t, out.sink());
    assert_eq!(out.0, [1000, 1002, 1, 2]);
    assert_eq!(r.stats().resets, 1);
}

#[test]
fn a_jump_of_2_pow_62_costs_one_pass_and_keeps_order_after_it() {
    let t = t0();
    let mut r = Resequencer::new(4096, 16, Duration::from_secs(1));
    // The paths' order alone proves loss here (no reorder grace).
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(3, 1, &pkt(3), t, out.sink());
    let far = 1u64 << 62;
    // Both kinds of datagram that can carry a sequence number: a skip
    // (probe) and data. Each must return at once, not step through
    // 2^62 numbers.
    r.skip(far, 0, t, out.sink());
    assert_eq!(out.0, [1, 3], "the held packet is given up, in order");
    assert_eq!(r.held(), 0);
    assert!(r.stats().gaps_skipped >= far - 2 * 4096);
    r.insert(far + 2, 0, &pkt(far + 2), t, out.sink());
    r.insert(far + 1, 1, &pkt(far + 1), t, out.sink());
    assert_eq!(out.0, [1, 3, far + 1, far + 2]);
    // Back from the top of the range (the peer restarted): a reset.
    r.insert(u64::MAX - 1, 0, &pkt(u64::MAX - 1), t, out.sink());
    r.insert(u64::MAX, 0, &pkt(u64::MAX), t, out.sink());
    r.insert(7, 0, &pkt(7), t, out.sink());
    r.insert(8, 0, &pkt(8), t, out.sink());
    assert_eq!(out.0[4..], [u64::MAX - 1, u64::MAX, 7, 8]);
    assert_eq!(r.stats().resets, 1);
}

#[test]
fn alternating_huge_jumps_stay_bounded_and_lose_nothing_held() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, Duration::from_secs(1));
    let mut out = Out(vec![]);
    let mut expect = vec![];
    let mut base = 0u64;
    for round in 0..200u64 {
        // A gap and a held packet, then a jump far ahead or far back.
        r.insert(base, 0, &pkt(base), t, out.sink());
        r.insert(base + 2, 1, &pkt(base + 2), t, out.sink());
        expect.extend([base, base + 2]);
        base = if round % 2 == 0 {
            u64::MAX / 2 + round
        } else {
            round
        };
    }
    r.handle_timeout(t + Duration::from_secs(2), out.sink());
    assert_eq!(out.0, expect);
    assert_eq!(r.held(), 0);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn oversized_packet_is_not_stored() {
    let t = t0();
    let mut r = Resequencer::new(8, 4, 10 * MS);
    let mut n = 0;
    r.insert(0, 0, &[0; 4], t, |_| n += 1);
    assert_eq!(r.insert(2, 1, &[0; 5], t, |_| n += 1), Outcome::Oversized);
    assert_eq!(n, 2);
}

#[test]
fn random_merges_of_fifo_paths_come_out_in_order_exactly_once() {
    let t = t0();
    let mut rng = 0x1234_5678_9abc_def0_u64;
    let mut next_rand = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..50 {
        let mut r = Resequencer::new(256, 16, Duration::from_secs(1));
        // Three FIFO paths, sequence numbers dealt at random, arrivals
        // merged at random. Each path first brings a probe (as paths do
        // before they carry data), so the resequencer knows all three.
        let mut out = Out(vec![]);
        for p in 0..3u64 {
            r.skip(p, p as usize, t, out.sink());
        }
        let mut per_path: Vec<Vec<u64>> = vec![vec![]; 3];
        for s in 3..300u64 {
            per_path[(next_rand() % 3) as usize].push(s);
        }
        let mut cursors = [0usize; 3];
        while cursors.iter().zip(&per_path).any(|(c, p)| *c < p.len()) {
            let p = (next_rand() % 3) as usize;
            if let Some(&s) = per_path[p].get(cursors[p]) {
                cursors[p] += 1;
                r.insert(s, p, &pkt(s), t, out.sink());
            }
        }
        assert_eq!(out.0, (3..300).collect::<Vec<_>>());
        assert_eq!(r.stats().gaps_skipped, 0);
    }
}

// ---- Per-flow release -------------------------------------------------

/// Inserts `seq` of a flow whose previous packet was `prev`.
fn ins(
    r: &mut Resequencer,
    seq: u64,
    prev: Option<u64>,
    path: usize,
    at: Instant,
    out: &mut Out,
) -> Outcome {
    r.insert_after(seq, prev, path, &pkt(seq), at, out.sink())
}

/// Flow A has the even, flow B the odd sequence numbers; A's 2 travels on
/// the slow path 1, everything else after 0 on path 0.
fn a_delayed(r: &mut Resequencer, t: Instant, out: &mut Out) {
    assert_eq!(ins(r, 0, None, 1, t, out), Outcome::InOrder);
    assert_eq!(ins(r, 1, None, 0, t, out), Outcome::InOrder);
    assert_eq!(ins(r, 3, Some(1), 0, t, out), Outcome::Bypass);
    assert_eq!(ins(r, 4, Some(2), 0, t + MS, out), Outcome::Held);
    assert_eq!(ins(r, 5, Some(3), 0, t + MS, out), Outcome::Bypass);
    assert_eq!(ins(r, 6, Some(4), 0, t + 3 * MS, out), Outcome::Held);
    assert_eq!(ins(r, 7, Some(5), 0, t + 3 * MS, out), Outcome::Bypass);
}

#[test]
fn a_gap_in_one_flow_does_not_hold_another() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, 100 * MS);
    let mut out = Out(vec![]);
    a_delayed(&mut r, t, &mut out);
    assert_eq!(out.0, [0, 1, 3, 5, 7], "B passes A's gap");
    assert_eq!(r.held(), 2);
    assert_eq!(r.oldest_held(), Some(t + MS));
    assert_eq!(r.longest_hold(t + 5 * MS), Some(4 * MS));
    assert_eq!(
        ins(&mut r, 2, Some(0), 1, t + 5 * MS, &mut out),
        Outcome::InOrder
    );
    assert_eq!(out.0, [0, 1, 3, 5, 7, 2, 4, 6], "A's chain follows its gap");
    assert_eq!(r.held(), 0);
    assert_eq!(r.poll_timeout(), None);
    let s = r.stats();
    assert_eq!(
        (s.in_order, s.flow_bypass, s.held, s.flow_released),
        (3, 3, 2, 2)
    );
    assert_eq!((s.gaps_skipped, s.flow_fallback, s.duplicates), (0, 0, 0));
    assert_eq!(s.hold.total(), 2);
    assert_eq!(s.hold.max_us, 4000);
    // The window base moved over everything delivered early.
    assert_eq!(
        ins(&mut r, 8, Some(6), 0, t + 5 * MS, &mut out),
        Outcome::InOrder
    );
}

#[test]
fn in_global_order_the_same_arrivals_hold_both_flows() {
    // The comparison: without FLOW, B waits behind A's gap.
    let t = t0();
    let mut r = Resequencer::new(64, 16, 100 * MS);
    let mut out = Out(vec![]);
    for (s, p) in [(0, 1), (1, 0), (3, 0), (4, 0), (5, 0), (6, 0), (7, 0)] {
        r.insert(s, p, &pkt(s), t, out.sink());
    }
    assert_eq!(out.0, [0, 1]);
    r.insert(2, 1, &pkt(2), t, out.sink());
    assert_eq!(out.0, (0..8).collect::<Vec<_>>());
}

#[test]
fn a_lost_packet_proven_lost_releases_its_waiters() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, 100 * MS);
    let mut out = Out(vec![]);
    a_delayed(&mut r, t, &mut out);
    // Path 1 moves past 2: it was lost.
    assert_eq!(
        ins(&mut r, 9, Some(7), 1, t + 4 * MS, &mut out),
        Outcome::Bypass
    );
    assert_eq!(out.0, [0, 1, 3, 5, 7, 9, 4, 6]);
    assert_eq!(r.held(), 0);
    assert_eq!(r.stats().gaps_skipped, 1);
    assert_eq!(r.stats().hold.max_us, 3000);
    // 2 shows up after all: late, delivered once.
    assert_eq!(
        ins(&mut r, 2, Some(0), 1, t + 5 * MS, &mut out),
        Outcome::Late
    );
    assert_eq!(out.0.iter().filter(|&&s| s == 2).count(), 1);
}

#[test]
fn a_lost_packet_times_out_and_its_waiters_follow() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, 10 * MS);
    let mut out = Out(vec![]);
    a_delayed(&mut r, t, &mut out);
    // 4 has waited since t + 1 ms, 6 since t + 3 ms.
    assert_eq!(r.poll_timeout(), Some(t + 11 * MS));
    r.handle_timeout(t + 10 * MS, out.sink());
    assert_eq!(r.held(), 2, "not yet");
    r.handle_timeout(t + 11 * MS, out.sink());
    assert_eq!(out.0, [0, 1, 3, 5, 7, 4, 6]);
    assert_eq!(r.held(), 0);
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(r.stats().gaps_skipped, 1);
    assert_eq!(r.stats().hold.max_us, 10_000);
    // The window base is past everything: the next A packet is in order.
    assert_eq!(
        ins(&mut r, 8, Some(6), 0, t + 12 * MS, &mut out),
        Outcome::InOrder
    );
}

#[test]
fn a_chain_of_waiters_is_released_in_order() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, Duration::from_secs(1));
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    // 2..=40 of one flow arrive backwards on path 0; 1 is on path 1.
    for s in (2..=40).rev() {
        assert_eq!(ins(&mut r, s, Some(s - 1), 0, t, &mut out), Outcome::Held);
    }
    // Another flow's packet passes them all.
    assert_eq!(ins(&mut r, 41, None, 0, t, &mut out), Outcome::Bypass);
    assert_eq!(out.0, [0, 41]);
    assert_eq!(ins(&mut r, 1, Some(0), 1, t, &mut out), Outcome::InOrder);
    let mut expect = vec![0, 41];
    expect.extend(1..=40);
    assert_eq!(out.0, expect);
    assert_eq!(r.stats().flow_released, 39);
    assert_eq!(r.held(), 0);
}

#[test]
fn a_chain_behind_a_gap_is_released_ahead_of_the_base() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, Duration::from_secs(1));
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    // Flow A: 2, 4, 6, 8 arrive backwards; flow B's 3 is its first.
    for s in [8, 6, 4] {
        ins(&mut r, s, Some(s - 2), 0, t, &mut out);
    }
    assert_eq!(ins(&mut r, 3, None, 0, t, &mut out), Outcome::Bypass);
    // A's 2 (its first) arrives; 1 (flow C) is still missing.
    assert_eq!(ins(&mut r, 2, None, 0, t, &mut out), Outcome::Bypass);
    assert_eq!(out.0, [0, 3, 2, 4, 6, 8]);
    assert_eq!(r.stats().flow_released, 3);
    assert_eq!(ins(&mut r, 1, None, 1, t, &mut out), Outcome::InOrder);
    // The base moved over 2, 3 and 4, delivered early, up to the gap at 5.
    assert_eq!(ins(&mut r, 5, None, 1, t, &mut out), Outcome::InOrder);
    assert_eq!(ins(&mut r, 7, None, 1, t, &mut out), Outcome::InOrder);
    assert_eq!(ins(&mut r, 9, None, 1, t, &mut out), Outcome::InOrder);
}

#[test]
fn global_and_flow_packets_share_the_window() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, Duration::from_secs(1));
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    assert_eq!(ins(&mut r, 2, None, 0, t, &mut out), Outcome::Bypass);
    // Without FLOW: waits for 1 whatever its flow.
    assert_eq!(r.insert(3, 0, &pkt(3), t, out.sink()), Outcome::Held);
    assert_eq!(ins(&mut r, 4, Some(2), 0, t, &mut out), Outcome::Bypass);
    // A flow packet after the global one waits for it.
    assert_eq!(ins(&mut r, 5, Some(3), 0, t, &mut out), Outcome::Held);
    assert_eq!(out.0, [0, 2, 4]);
    assert_eq!(ins(&mut r, 1, None, 1, t, &mut out), Outcome::InOrder);
    assert_eq!(out.0, [0, 2, 4, 1, 3, 5]);
    assert_eq!(r.held(), 0);
    assert_eq!(r.insert(6, 0, &pkt(6), t, out.sink()), Outcome::InOrder);
}

#[test]
fn a_second_waiter_falls_back_to_global_order() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, Duration::from_secs(1));
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    ins(&mut r, 2, None, 0, t, &mut out);
    assert_eq!(ins(&mut r, 4, Some(3), 0, t, &mut out), Outcome::Held);
    // A second packet naming 3: it waits for everything below it.
    assert_eq!(ins(&mut r, 5, Some(3), 0, t, &mut out), Outcome::Held);
    // A predecessor that is not below the packet: global order too.
    assert_eq!(ins(&mut r, 6, Some(6), 0, t, &mut out), Outcome::Held);
    assert_eq!(
        ins(&mut r, 7, Some(u64::MAX), 0, t, &mut out),
        Outcome::Held
    );
    assert_eq!(r.stats().flow_fallback, 3);
    // 3 comes on a third path (path 1 may still bring 1).
    assert_eq!(ins(&mut r, 3, None, 2, t, &mut out), Outcome::Bypass);
    assert_eq!(out.0, [0, 2, 3, 4], "only the registered waiter follows 3");
    assert_eq!(ins(&mut r, 1, None, 1, t, &mut out), Outcome::InOrder);
    assert_eq!(out.0, [0, 2, 3, 4, 1, 5, 6, 7]);
    assert_eq!(r.held(), 0);
}

#[test]
fn skips_release_waiters() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, Duration::from_secs(1));
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    ins(&mut r, 3, Some(2), 0, t, &mut out);
    ins(&mut r, 4, Some(1), 0, t, &mut out);
    // 2 was consumed by a probe, ahead of the base (on path 0: path 1
    // still may bring 1).
    r.skip(2, 0, t, out.sink());
    assert_eq!(out.0, [0, 3]);
    // 1 too, at the base.
    r.skip(1, 1, t, out.sink());
    assert_eq!(out.0, [0, 3, 4]);
    assert_eq!(r.held(), 0);
    // A predecessor already skipped: no wait.
    r.skip(6, 1, t, out.sink());
    assert_eq!(ins(&mut r, 7, Some(6), 0, t, &mut out), Outcome::Bypass);
}

#[test]
fn duplicates_of_early_deliveries_are_dropped() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, Duration::from_secs(1));
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    assert_eq!(ins(&mut r, 2, None, 0, t, &mut out), Outcome::Bypass);
    assert_eq!(ins(&mut r, 2, None, 0, t, &mut out), Outcome::Duplicate);
    assert_eq!(ins(&mut r, 4, Some(3), 0, t, &mut out), Outcome::Held);
    assert_eq!(ins(&mut r, 4, Some(3), 0, t, &mut out), Outcome::Duplicate);
    assert_eq!(r.insert(4, 0, &pkt(4), t, out.sink()), Outcome::Duplicate);
    ins(&mut r, 3, None, 0, t, &mut out);
    assert_eq!(out.0, [0, 2, 3, 4]);
    assert_eq!(ins(&mut r, 4, Some(3), 0, t, &mut out), Outcome::Duplicate);
    assert_eq!(r.stats().duplicates, 4);
    // A duplicate must not steal a waiter either: 5's slot is taken.
    assert_eq!(ins(&mut r, 6, Some(5), 0, t, &mut out), Outcome::Held);
    assert_eq!(ins(&mut r, 6, Some(1), 0, t, &mut out), Outcome::Duplicate);
    ins(&mut r, 5, None, 0, t, &mut out);
    assert_eq!(out.0, [0, 2, 3, 4, 5, 6]);
}

#[test]
fn window_overflow_gives_up_gaps_and_releases_waiters() {
    let t = t0();
    let mut r = Resequencer::new(8, 16, Duration::from_secs(10));
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    ins(&mut r, 2, Some(1), 0, t, &mut out);
    ins(&mut r, 3, Some(2), 0, t, &mut out);
    ins(&mut r, 6, Some(5), 0, t, &mut out);
    assert_eq!(r.held(), 3);
    // 20 forces the base to 13: 1 and 5 are given up, their waiters go,
    // and 20's predecessor 12 is now below the base: 20 goes at once.
    assert_eq!(ins(&mut r, 20, Some(12), 1, t, &mut out), Outcome::Bypass);
    assert_eq!(out.0, [0, 2, 3, 6, 20]);
    assert_eq!(r.held(), 0);
    // 1, 4, 5 and 7..=12 given up; 2, 3, 6 were delivered.
    assert_eq!(r.stats().gaps_skipped, 12 - 3);
    assert_eq!(ins(&mut r, 12, Some(2), 0, t, &mut out), Outcome::Late);
    // Waiters in the new window are registered as before.
    assert_eq!(ins(&mut r, 15, Some(14), 0, t, &mut out), Outcome::Held);
    for s in 13..15 {
        r.skip(s, 1, t, out.sink());
    }
    assert_eq!(out.0, [0, 2, 3, 6, 20, 12, 15]);
    assert_eq!(r.held(), 0);
    // The base moved over 15 and stops at 16; 20 is still marked done.
    assert_eq!(ins(&mut r, 20, None, 0, t, &mut out), Outcome::Duplicate);
}

#[test]
fn huge_jumps_with_waiters_cost_one_pass() {
    let t = t0();
    let mut r = Resequencer::new(4096, 16, Duration::from_secs(1));
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    ins(&mut r, 2, Some(1), 0, t, &mut out);
    ins(&mut r, 3, Some(2), 0, t, &mut out);
    let far = 1u64 << 62;
    // A flow packet 2^62 ahead that names a predecessor in the new window.
    assert_eq!(
        ins(&mut r, far, Some(far - 1), 1, t, &mut out),
        Outcome::Held
    );
    assert_eq!(out.0, [0, 2, 3], "the old waiters were released");
    assert_eq!(
        ins(&mut r, far - 1, Some(1), 0, t, &mut out),
        Outcome::Bypass
    );
    assert_eq!(out.0, [0, 2, 3, far - 1, far]);
    // A predecessor 2^62 away from the packet: below the base, no wait.
    assert_eq!(
        ins(&mut r, far + 5, Some(7), 0, t, &mut out),
        Outcome::Bypass
    );
    // Back to the start (restart): held waiters are flushed by the reset.
    ins(&mut r, far + 7, Some(far + 6), 0, t, &mut out);
    assert_eq!(r.held(), 1);
    ins(&mut r, 1, None, 0, t, &mut out);
    assert_eq!(out.0[5..], [far + 5, far + 7, 1]);
    assert_eq!(r.stats().resets, 1);
    assert_eq!(r.held(), 0);
    // The top of the range.
    ins(&mut r, u64::MAX - 1, None, 0, t, &mut out);
    ins(&mut r, u64::MAX, Some(u64::MAX - 1), 0, t, &mut out);
    assert_eq!(out.0[8..], [u64::MAX - 1, u64::MAX]);
}

#[test]
fn every_hold_is_bounded_by_the_timeout() {
    // A packet lower in sequence but younger does not extend the wait of
    // an older one above it.
    let t = t0();
    let mut r = Resequencer::new(64, 16, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(0, 0, &pkt(0), t, out.sink());
    r.skip(0, 1, t, out.sink());
    r.insert(5, 0, &pkt(5), t, out.sink());
    r.insert(3, 0, &pkt(3), t + 8 * MS, out.sink());
    assert_eq!(r.poll_timeout(), Some(t + 10 * MS));
    r.handle_timeout(t + 10 * MS, out.sink());
    assert_eq!(out.0, [0, 3, 5]);
    assert_eq!(r.stats().hold.max_us, 10_000);
}

#[test]
fn a_stale_deadline_is_brought_up_to_date() {
    let t = t0();
    let mut r = Resequencer::new(64, 16, 10 * MS);
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    ins(&mut r, 3, Some(2), 0, t, &mut out);
    ins(&mut r, 5, Some(4), 0, t + 5 * MS, &mut out);
    ins(&mut r, 2, None, 1, t + 6 * MS, &mut out);
    assert_eq!(out.0, [0, 2, 3]);
    // 3, the oldest, is gone; the deadline may still be its.
    assert!(r.poll_timeout() <= Some(t + 15 * MS));
    r.handle_timeout(t + 10 * MS, out.sink());
    assert_eq!(out.0, [0, 2, 3], "5 has not waited long enough");
    assert_eq!(r.poll_timeout(), Some(t + 15 * MS));
    assert_eq!(r.oldest_held(), Some(t + 5 * MS));
}

#[test]
fn oversized_flow_packets_count_as_delivered() {
    let t = t0();
    let mut r = Resequencer::new(8, 8, 10 * MS);
    let mut out = Out(vec![]);
    ins(&mut r, 0, None, 1, t, &mut out);
    ins(&mut r, 3, Some(2), 0, t, &mut out);
    let big = [0u8; 9];
    let mut n = 0;
    assert_eq!(
        r.insert_after(2, Some(1), 0, &big, t, |_| n += 1),
        Outcome::Oversized
    );
    assert_eq!(n, 2, "delivered at once, and counted done: 3 follows it");
    assert_eq!(out.0, [0]);
    ins(&mut r, 1, None, 1, t, &mut out);
    assert_eq!(ins(&mut r, 4, None, 1, t, &mut out), Outcome::InOrder);
    assert_eq!(out.0, [0, 1, 4]);
    assert_eq!(
        r.insert_after(2, Some(1), 0, &big, t, |_| n += 1),
        Outcome::Late
    );
}

// ---- Randomised -------------------------------------------------------

/// A small deterministic generator for the simulations below (proptest
/// draws the seed).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*; the seed is forced odd so it is never stuck at 0.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What one path carries, in order.
#[derive(Debug, Clone, Copy)]
enum Sent {
    Data {
        seq: u64,
        prev: Option<u64>,
        global: bool,
    },
    Probe(u64),
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// K flows striped over P first-in first-out paths with loss, merged
    /// at random: every packet that arrives is delivered exactly once,
    /// each flow in sequence order, and nothing stays held once every path
    /// has moved past the last packet.
    #[test]
    fn flows_over_fifo_paths_come_out_in_flow_order_exactly_once(
        seed in proptest::prelude::any::<u64>(),
        paths in 1usize..=4,
        flows in 1u64..=8,
        n in 1u64..=300,
        loss_pct in 0u64..30,
        global_pct in 0u64..20,
        probe_pct in 0u64..10,
    ) {
        let t = t0();
        let mut rng = Rng(seed | 1);
        let mut r = Resequencer::new(1024, 16, Duration::from_secs(1));
        // The paths' order alone proves loss here (no reorder grace).
        r.set_reorder_grace(Duration::ZERO);
        let mut table = crate::flow::FlowTable::new();
        let mut per_path: Vec<Vec<Sent>> = vec![vec![]; paths];
        let mut flow_of = std::collections::HashMap::new();
        let mut arriving = vec![];
        // Every path first brings a probe, as paths do before data.
        let mut seq = 0u64;
        for p in per_path.iter_mut() {
            p.push(Sent::Probe(seq));
            seq += 1;
        }
        for _ in 0..n {
            let path = rng.below(paths as u64) as usize;
            let lost = rng.below(100) < loss_pct;
            let sent = if rng.below(100) < probe_pct {
                Sent::Probe(seq)
            } else {
                let flow = rng.below(flows);
                let gap = table.gap(flow as u32, seq);
                flow_of.insert(seq, flow);
                if !lost {
                    arriving.push(seq);
                }
                Sent::Data {
                    seq,
                    prev: crate::wire::flow_predecessor(seq, gap),
                    global: rng.below(100) < global_pct,
                }
            };
            if !lost {
                per_path[path].push(sent);
            }
            seq += 1;
        }
        // And a last probe on every path, which proves every loss.
        for p in per_path.iter_mut() {
            p.push(Sent::Probe(seq));
            seq += 1;
        }
        // The first probes arrive before anything else, so the resequencer
        // knows every path (a path it does not know cannot hold up a loss
        // proof; that is what the timeout is for).
        let mut out = Out(vec![]);
        for (p, sent) in per_path.iter().enumerate() {
            if let Sent::Probe(s) = sent[0] {
                r.skip(s, p, t, out.sink());
            }
        }
        let mut cursors = vec![1usize; paths];
        loop {
            let open: Vec<usize> = (0..paths).filter(|&p| cursors[p] < per_path[p].len()).collect();
            if open.is_empty() {
                break;
            }
            let p = open[rng.below(open.len() as u64) as usize];
            match per_path[p][cursors[p]] {
                Sent::Probe(s) => r.skip(s, p, t, out.sink()),
                // A packet from a peer without FLOW: global order.
                Sent::Data { seq, global: true, .. } => {
                    r.insert(seq, p, &pkt(seq), t, out.sink());
                }
                Sent::Data { seq, prev, global: false } => {
                    r.insert_after(seq, prev, p, &pkt(seq), t, out.sink());
                }
            }
            cursors[p] += 1;
        }
        proptest::prop_assert_eq!(r.held(), 0);
        let mut delivered = out.0.clone();
        delivered.sort_unstable();
        proptest::prop_assert_eq!(&delivered, &arriving, "exactly the packets that arrived, once");
        for f in 0..flows {
            let order: Vec<u64> = out.0.iter().copied().filter(|s| flow_of[s] == f).collect();
            proptest::prop_assert!(
                order.windows(2).all(|w| w[0] < w[1]),
                "flow {} out of order: {:?}",
                f,
                order
            );
        }
        let s = r.stats();
        proptest::prop_assert_eq!(s.late, 0);
        proptest::prop_assert_eq!(s.flow_fallback, 0);
        proptest::prop_assert_eq!(s.duplicates, 0);
        proptest::prop_assert_eq!(s.hold.total(), s.held);
    }

    /// Arbitrary calls (any sequence numbers, any predecessors, time
    /// moving on, small windows): every packet not refused as a duplicate
    /// is delivered exactly once, and a timeout far ahead empties the
    /// buffer.
    #[test]
    fn arbitrary_calls_deliver_every_accepted_packet_exactly_once(
        seed in proptest::prelude::any::<u64>(),
        slots in 2usize..64,
        steps in 1usize..400,
    ) {
        let t = t0();
        let mut rng = Rng(seed | 1);
        let timeout = 10 * MS;
        let mut r = Resequencer::new(slots, 8, timeout);
        let mut now = t;
        let mut base = rng.next() >> 1;
        let mut accepted = std::collections::HashMap::<u64, u64>::new();
        let mut out = Out(vec![]);
        for _ in 0..steps {
            // Mostly near `base`, sometimes anywhere.
            let seq = match rng.below(20) {
                0 => rng.next(),
                1 => base.wrapping_add(rng.below(1 << 20)),
                _ => base.wrapping_add(rng.below(3 * slots as u64)),
            };
            let prev = match rng.below(4) {
                0 => None,
                1 => Some(rng.next()),
                _ => seq.checked_sub(1 + rng.below(8)),
            };
            let path = rng.below(5) as usize;
            match rng.below(10) {
                0 => r.skip(seq, path, now, out.sink()),
                1 => r.handle_timeout(now, out.sink()),
                2 => {
                    if r.insert(seq, path, &pkt(seq), now, out.sink()) != Outcome::Duplicate {
                        *accepted.entry(seq).or_default() += 1;
                    }
                }
                _ => {
                    let o = r.insert_after(seq, prev, path, &pkt(seq), now, out.sink());
                    if o != Outcome::Duplicate {
                        *accepted.entry(seq).or_default() += 1;
                    }
                }
            }
            proptest::prop_assert!(r.held() <= slots.next_power_of_two());
            if let Some(d) = r.poll_timeout() {
                proptest::prop_assert!(r.oldest_held().is_some_and(|o| d <= o + timeout));
            }
            now += Duration::from_micros(rng.below(3000));
            if rng.below(50) == 0 {
                base = rng.next() >> 1;
            } else {
                base = base.wrapping_add(rng.below(4));
            }
        }
        r.handle_timeout(now + Duration::from_secs(1), out.sink());
        proptest::prop_assert_eq!(r.held(), 0);
        proptest::prop_assert_eq!(r.poll_timeout(), None);
        let mut got = std::collections::HashMap::<u64, u64>::new();
        for s in out.0 {
            *got.entry(s).or_default() += 1;
        }
        proptest::prop_assert_eq!(got, accepted);
    }
}

#[test]
fn a_hole_awaiting_repair_is_not_proven_lost_and_the_copy_fills_it() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    let mut out = Out(vec![]);
    r.insert(0, 1, &pkt(0), t, out.sink());
    r.insert(1, 0, &pkt(1), t, out.sink());
    // 2 was sent on path 1 and lost at random; the receiver saw the hole
    // between 0 and 4 on path 1 and asked for a copy.
    assert!(r.expect_repair(0, 4, 1, t + 20 * MS));
    r.insert(3, 0, &pkt(3), t, out.sink());
    r.insert(4, 1, &pkt(4), t, out.sink());
    r.insert(5, 0, &pkt(5), t, out.sink());
    assert_eq!(
        out.0,
        [0, 1],
        "every path moved past 2, but a copy is coming"
    );
    assert_eq!(r.poll_timeout(), Some(t + 20 * MS));
    // The copy comes under its original number on path 0.
    r.repair_arrived(2);
    assert_eq!(
        r.insert(2, 0, &pkt(2), t + 8 * MS, out.sink()),
        Outcome::InOrder
    );
    assert_eq!(out.0, [0, 1, 2, 3, 4, 5]);
    assert_eq!(r.pending_repairs(), 0, "the only missing datagram came");
    assert_eq!(r.stats().gaps_skipped, 0);
}

#[test]
fn a_repair_that_does_not_come_gives_the_hole_up_at_its_deadline() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    let mut out = Out(vec![]);
    r.insert(0, 1, &pkt(0), t, out.sink());
    assert!(r.expect_repair(0, 3, 2, t + 20 * MS));
    r.insert(3, 1, &pkt(3), t, out.sink());
    r.insert(4, 0, &pkt(4), t, out.sink());
    assert_eq!(out.0, [0]);
    // One of the two copies comes; the other is lost again.
    r.repair_arrived(1);
    r.insert(1, 0, &pkt(1), t + 5 * MS, out.sink());
    assert_eq!(out.0, [0, 1]);
    assert_eq!(r.pending_repairs(), 1);
    r.handle_timeout(t + 19 * MS, out.sink());
    assert_eq!(out.0, [0, 1], "still exempt");
    let due = r.poll_timeout().expect("held");
    assert_eq!(due, t + 20 * MS);
    r.handle_timeout(due, out.sink());
    assert_eq!(out.0, [0, 1, 3, 4], "the loss proof applies again");
    assert_eq!(r.pending_repairs(), 0);
    assert_eq!(r.stats().gaps_skipped, 1);
    // Too late now: delivered as it comes.
    assert_eq!(
        r.insert(2, 0, &pkt(2), t + 30 * MS, out.sink()),
        Outcome::Late
    );
}

#[test]
fn gaps_below_a_pending_hole_are_still_proven_and_the_table_is_bounded() {
    let t = t0();
    let mut r = Resequencer::new(64, 64, Duration::from_secs(1));
    // The paths' order alone proves loss here (no reorder grace).
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    r.insert(0, 0, &pkt(0), t, out.sink());
    // 1 lost at congestion (no repair asked); 3 lost at random (asked).
    assert!(r.expect_repair(2, 4, 1, t + 50 * MS));
    r.insert(2, 0, &pkt(2), t, out.sink());
    r.insert(4, 0, &pkt(4), t, out.sink());
    assert_eq!(out.0, [0, 2], "1 is proven lost, 3 is exempt");
    assert!(
        r.expect_repair(10, 11, 1, t + 50 * MS),
        "an empty range is no hole"
    );
    assert_eq!(r.pending_repairs(), 1);
    for k in 1..MAX_PENDING_REPAIRS as u64 {
        assert!(r.expect_repair(10 * k, 10 * k + 2, 1, t + 50 * MS));
    }
    let beyond = 10 * MAX_PENDING_REPAIRS as u64;
    assert!(
        !r.expect_repair(beyond, beyond + 2, 1, t + 50 * MS),
        "table full"
    );
    assert_eq!(r.pending_repairs(), MAX_PENDING_REPAIRS);
}

#[test]
fn held_packets_reuse_the_lowest_buffers_whatever_their_slot() {
    // Pairs swapped (seq 2k+2 before 2k+1) over four turns of the ring:
    // one packet is held at a time, so one buffer serves them all and the
    // storage never grows beyond it.
    let t = t0();
    let slots = 64;
    let mut r = Resequencer::new(slots, 64, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(0, 0, &pkt(0), t, out.sink());
    for k in 0..(2 * slots as u64) {
        let (a, b) = (2 * k + 2, 2 * k + 1);
        r.insert(a, 1, &pkt(a), t, out.sink());
        r.insert(b, 0, &pkt(b), t, out.sink());
    }
    assert_eq!(out.0, (0..=4 * slots as u64).collect::<Vec<_>>());
    assert_eq!(r.stats().held, 2 * slots as u64);
    assert_eq!(r.free.len(), slots, "every buffer back on the free stack");
    assert_eq!(r.storage.len(), r.slot_len, "one buffer allocated");
    // A deeper hold uses as many buffers as it holds at once, still the
    // lowest ones.
    let base = 4 * slots as u64 + 1;
    for s in base + 1..base + 6 {
        r.insert(s, 1, &pkt(s), t, out.sink());
    }
    r.insert(base, 0, &pkt(base), t, out.sink());
    assert_eq!(out.0.len(), 4 * slots + 7);
    assert_eq!(r.storage.len(), 8 * r.slot_len, "grown by doubling to 5");
    // Bounded by the ring, however many are held.
    for s in base + 7..base + 5 + slots as u64 {
        r.insert(s, 1, &pkt(s), t, out.sink());
    }
    assert!(r.held() > 32);
    assert_eq!(r.storage.len(), slots * r.slot_len);
}

#[test]
fn storage_is_given_back_after_holding_nothing_for_a_while() {
    let t = t0();
    let mut r = Resequencer::new(64, 64, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(0, 0, &pkt(0), t, out.sink());
    for s in 2..6 {
        r.insert(s, 1, &pkt(s), t, out.sink());
    }
    assert_eq!(r.storage_bytes(), 4 * 64, "four held");
    // Still held: the storage stays, however long.
    r.handle_timeout(t + 5 * MS, out.sink());
    assert_eq!(r.storage_bytes(), 4 * 64);
    r.insert(1, 0, &pkt(1), t + 6 * MS, out.sink());
    assert_eq!(out.0, (0..6).collect::<Vec<_>>());
    // Nothing held, but held lately: kept for the next reordering.
    r.handle_timeout(t + STORAGE_IDLE_RELEASE - MS, out.sink());
    assert_eq!(r.storage_bytes(), 4 * 64);
    assert!(r.ring_made());
    r.handle_timeout(t + STORAGE_IDLE_RELEASE, out.sink());
    assert_eq!(r.storage_bytes(), 0, "given back");
    assert!(!r.ring_made(), "the per-slot arrays too");
    // And grown again when needed, delivering intact packets.
    let t2 = t + 3 * STORAGE_IDLE_RELEASE;
    r.insert(6, 0, &pkt(6), t2, out.sink());
    r.insert(8, 1, &pkt(8), t2, out.sink());
    assert_eq!(r.storage_bytes(), 64, "one held, in the lowest buffer");
    r.insert(7, 0, &pkt(7), t2, out.sink());
    assert_eq!(out.0, (0..9).collect::<Vec<_>>());
}

#[test]
fn a_connection_delivering_in_order_never_makes_the_ring() {
    let t = t0();
    let mut out = Out(vec![]);
    let mut r = Resequencer::new(4096, 1500, 10 * MS);
    for s in 0..10_000u64 {
        r.insert(s, (s % 3) as usize, &pkt(s), t, out.sink());
        r.handle_timeout(t, out.sink());
    }
    assert!(!r.ring_made(), "in order: no per-slot arrays");
    assert_eq!(r.storage_bytes(), 0);
    // The first packet out of order makes it.
    r.insert(10_001, 1, &pkt(10_001), t, out.sink());
    assert!(r.ring_made());
    r.insert(10_000, 0, &pkt(10_000), t, out.sink());
    assert_eq!(r.held(), 0);
    assert_eq!(out.0, (0..10_002).collect::<Vec<_>>());
}

#[test]
fn a_hole_in_its_reorder_window_waits_and_its_late_original_fills_it() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    r.insert(0, 1, &pkt(0), t, out.sink());
    // Path 1's detector saw 4 come before 2 and opened a hole for 5 ms.
    assert!(r.expect_hole(0, 4, 1, t + 5 * MS));
    r.insert(4, 1, &pkt(4), t, out.sink());
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(3, 0, &pkt(3), t, out.sink());
    r.insert(5, 0, &pkt(5), t, out.sink());
    assert_eq!(out.0, [0, 1], "2 may still come: not given up");
    // It does, 2 ms later: the hole's exemption is taken back.
    r.hole_filled(0, 4);
    assert_eq!(r.pending_repairs(), 0);
    assert_eq!(
        r.insert(2, 1, &pkt(2), t + 2 * MS, out.sink()),
        Outcome::InOrder
    );
    assert_eq!(out.0, [0, 1, 2, 3, 4, 5]);
    assert_eq!(r.stats().late, 0);
    assert_eq!(r.stats().gaps_skipped, 0);
}

#[test]
fn a_hole_asked_for_after_its_window_keeps_its_place_with_a_later_deadline() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    r.insert(0, 1, &pkt(0), t, out.sink());
    assert!(r.expect_hole(0, 4, 2, t + 5 * MS));
    r.insert(4, 1, &pkt(4), t, out.sink());
    r.insert(3, 0, &pkt(3), t, out.sink());
    // One of the two came late; the other is asked for when the window
    // ends: the same hole, one datagram, a deadline 20 ms on.
    r.hole_filled(0, 4);
    r.insert(1, 1, &pkt(1), t + MS, out.sink());
    assert!(r.expect_repair(0, 4, 1, t + 25 * MS));
    assert_eq!(r.pending_repairs(), 1, "updated, not added");
    r.handle_timeout(t + 24 * MS, out.sink());
    assert_eq!(out.0, [0, 1], "exempt until the copy's deadline");
    r.handle_timeout(t + 25 * MS, out.sink());
    assert_eq!(out.0, [0, 1, 3, 4], "given up when it did not come");
    assert_eq!(r.stats().gaps_skipped, 1);
}

#[test]
fn a_copy_counts_only_against_a_hole_that_was_asked_for() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    r.set_reorder_grace(Duration::ZERO);
    let mut out = Out(vec![]);
    r.insert(0, 0, &pkt(0), t, out.sink());
    // Path 0 lost 2 (asked for); path 1's hole around 1..4 is still in
    // its reorder window: the ranges overlap.
    assert!(r.expect_repair(0, 3, 1, t + 20 * MS));
    assert!(r.expect_hole(0, 5, 1, t + 20 * MS));
    r.insert(3, 0, &pkt(3), t, out.sink());
    r.insert(5, 1, &pkt(5), t, out.sink());
    // The copy of 2 comes: path 0's hole is done, path 1's still waits.
    r.repair_arrived(2);
    assert_eq!(r.pending_repairs(), 1, "the copy was not path 1's");
    r.insert(2, 0, &pkt(2), t + MS, out.sink());
    assert_eq!(out.0, [0], "1 may still come on path 1: not given up");
    // Path 1's late original fills its hole.
    r.hole_filled(0, 5);
    assert_eq!(r.pending_repairs(), 0);
    r.insert(1, 1, &pkt(1), t + MS, out.sink());
    r.insert(4, 1, &pkt(4), t + MS, out.sink());
    assert_eq!(out.0, [0, 1, 2, 3, 4, 5]);
}

/// Why a restarted sender must not number from where it began before
/// (mptd's `first_seq`): the old process left numbers marked done above a
/// gap at the window base (here 7 and 8, delivered past the lost 6 by
/// their flow), and a new process numbering from 1 again reuses them for
/// other datagrams. Below the base they pass as late; on a mark they are
/// taken for duplicates and dropped, until the count passes the marks.
/// Numbered from above the old ones, the window jumps and clears.
#[test]
fn a_restarted_counter_below_old_marks_is_dropped_one_above_them_passes() {
    let t = t0();
    let old = |r: &mut Resequencer, out: &mut Out| {
        for s in 1..=5 {
            r.insert(s, 0, &pkt(s), t, out.sink());
        }
        // 6 lost; 7 and 8 depend on nothing and are delivered past it.
        for s in 7..=8 {
            assert_eq!(
                r.insert_after(s, None, 1, &pkt(s), t, out.sink()),
                Outcome::Bypass
            );
        }
    };
    // The peer restarts and numbers from 1 again.
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    let mut out = Out(vec![]);
    old(&mut r, &mut out);
    assert_eq!(r.insert(2, 0, &pkt(2), t, out.sink()), Outcome::Late);
    let before = r.stats().duplicates;
    assert_eq!(
        r.insert_after(7, None, 0, &pkt(7), t, out.sink()),
        Outcome::Duplicate,
        "a new datagram on an old mark is lost"
    );
    assert_eq!(r.stats().duplicates, before + 1);
    assert_eq!(r.stats().resets, 0, "not far enough behind to restart");
    // Numbered from above the old numbers (by more than a window).
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
    let mut out = Out(vec![]);
    old(&mut r, &mut out);
    let first = 1_000;
    assert_eq!(
        r.insert_after(first + 1, None, 0, &pkt(first + 1), t, out.sink()),
        Outcome::Bypass
    );
    // The marks are gone: a number that maps to 7's slot is new data.
    let same_slot = first + 1 + 16 - ((first + 1) % 16) + 7;
    assert_ne!(
        r.insert_after(same_slot, None, 0, &pkt(same_slot), t, out.sink()),
        Outcome::Duplicate
    );
    assert_eq!(r.stats().duplicates, 0);
}
