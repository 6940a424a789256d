use super::*;

const MS: Duration = Duration::from_millis(1);

#[allow(clippy::disallowed_methods)]
fn t0() -> Instant {
    Instant::now()
}

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
    assert_eq!(out.0, [0, 1, 3, 4], "path 1 moved past 2: it is lost");
    assert_eq!(r.stats().gaps_skipped, 1);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn a_forgotten_path_no_longer_holds_up_loss_proofs() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, Duration::from_secs(1));
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
    let mut out = Out(vec![]);
    r.insert(1, 0, &pkt(1), t, out.sink());
    r.insert(3, 0, &pkt(3), t, out.sink());
    assert_eq!(out.0, [1, 3]);
}

#[test]
fn quiet_path_stops_counting_after_two_timeouts() {
    let t = t0();
    let mut r = Resequencer::new(16, 64, 10 * MS);
    let mut out = Out(vec![]);
    r.insert(1, 1, &pkt(1), t, out.sink());
    // Path 1 goes quiet; path 0 carries on past a gap.
    let later = t + 25 * MS;
    r.insert(3, 0, &pkt(3), later, out.sink());
    assert_eq!(out.0, [1, 3]);
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
