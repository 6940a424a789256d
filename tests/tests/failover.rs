//! A path's link goes down in the middle of a transfer: the transfer
//! completes intact over the other paths, both daemons report the path
//! `down` within keepalive + dead_timer (+ polling slack), the path carries
//! no data while down, and it is `up` and carrying data again after the
//! link returns.
//!
//! Alone in its test binary so that no parallel test skews the timing.

use std::time::{Duration, Instant};

use mpt_e2e::*;

/// Allowed lateness beyond keepalive + dead_timer: status polling (25 ms),
/// the status request itself, and scheduling on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(300);

/// Polls both sides until path `i` is in `state` on each; returns, per
/// side, the time from `since` to the start of the first poll that saw it.
fn wait_both(
    bed: &mut TestBed,
    i: usize,
    state: &str,
    since: Instant,
    timeout: Duration,
) -> [Duration; 2] {
    let name = path_name(i);
    let mut seen: [Option<Duration>; 2] = [None, None];
    let mut history: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let deadline = since + timeout;
    loop {
        bed.check_alive().expect("daemons alive");
        for (k, side) in [Side::A, Side::B].into_iter().enumerate() {
            if seen[k].is_some() {
                continue;
            }
            let asked = Instant::now();
            let s = bed.snap(side).expect("status");
            let p = s.path(&name).expect("path");
            if history[k].last() != Some(&p.state) {
                history[k].push(format!("{}@{:?}", p.state, asked.duration_since(since)));
            }
            if p.state == state {
                seen[k] = Some(asked.duration_since(since));
            }
        }
        if let [Some(a), Some(b)] = seen {
            return [a, b];
        }
        assert!(
            Instant::now() < deadline,
            "{name} not {state:?} on both sides within {timeout:?}; A saw {:?}, B saw {:?}",
            history[0],
            history[1]
        );
        std::thread::sleep(POLL);
    }
}

#[test]
fn path_down_mid_transfer_is_detected_and_comes_back() {
    const BYTES: u64 = 50 << 20;
    // 50 MB at 10 MB/s: ~5 s, so the link goes down and comes back while
    // the transfer runs.
    const PACE: u64 = 10 << 20;
    const VICTIM: usize = 1;

    let spec = BedSpec::uniform(3, Family::V4).inner(&[Family::V4]);
    let bound = spec.keepalive + spec.dead_timer + SLACK;
    let mut bed = TestBed::new(spec).expect("test bed");
    let victim = path_name(VICTIM);

    let t = bed
        .start_transfer(Side::A, Family::V4, BYTES, Some(PACE))
        .expect("start transfer");
    wait_until(
        "a quarter of the transfer",
        Duration::from_secs(20),
        POLL,
        || Ok((t.progress.load(std::sync::atomic::Ordering::Relaxed) >= BYTES / 4).then_some(())),
    )
    .expect("transfer under way");
    let before = bed
        .snap(Side::A)
        .expect("status")
        .path(&victim)
        .expect("path")
        .tx_data();
    assert!(before > 0, "{victim} carried no data before the failure");

    bed.set_path_link(VICTIM, false).expect("link down");
    let down_at = Instant::now();
    let [a, b] = wait_both(&mut bed, VICTIM, "down", down_at, Duration::from_secs(10));
    eprintln!("{victim} down after: A {a:?}, B {b:?} (bound {bound:?})");
    assert!(
        a <= bound && b <= bound,
        "{victim} reported down after A {a:?} / B {b:?}, bound {bound:?}"
    );

    // While down, the path carries no data (a few packets scheduled just
    // before the state change may still be counted).
    let at_detection = bed
        .snap(Side::A)
        .expect("status")
        .path(&victim)
        .expect("path")
        .tx_data();
    std::thread::sleep(Duration::from_millis(500));
    let later = bed.snap(Side::A).expect("status");
    // A's traffic moved off the victim, and status says how fast.
    let handover = &later.raw["handover"];
    assert!(
        handover["count"].as_u64().is_some_and(|n| n >= 1),
        "no handover recorded: {handover}"
    );
    assert_eq!(handover["last"]["from"], victim.as_str(), "{handover}");
    let gap_ms = handover["last"]["gap_ms"].as_f64().unwrap_or(f64::MAX);
    assert!(
        gap_ms <= bound.as_secs_f64() * 1e3,
        "handover gap {gap_ms} ms, bound {bound:?}"
    );
    let p = later.path(&victim).expect("path");
    assert_eq!(
        p.state, "down",
        "{victim} left down with its link still down: {}",
        p.raw
    );
    assert!(
        p.tx_data() <= at_detection + 16,
        "{victim} sent {} data packets while down",
        p.tx_data() - at_detection
    );
    assert!(
        t.progress.load(std::sync::atomic::Ordering::Relaxed) < BYTES,
        "transfer ended before the link came back; the test needs a slower pace"
    );

    bed.set_path_link(VICTIM, true).expect("link up");
    let up_at = Instant::now();
    let [a, b] = wait_both(&mut bed, VICTIM, "up", up_at, Duration::from_secs(3));
    eprintln!("{victim} up again after: A {a:?}, B {b:?}");
    let back = bed
        .snap(Side::A)
        .expect("status")
        .path(&victim)
        .expect("path")
        .tx_data();

    let r = t
        .finish(transfer_timeout(BYTES))
        .expect("transfer across the failure");
    assert_eq!(r.bytes, BYTES);
    let end = bed
        .snap(Side::A)
        .expect("status")
        .path(&victim)
        .expect("path")
        .tx_data();
    assert!(
        end > back,
        "{victim} carried no data after it came back ({back} -> {end})"
    );

    // And all three paths share a fresh transfer evenly again.
    bed.transfer_checking_shares(Side::A, Family::V4, 16 << 20)
        .expect("transfer after recovery");
    bed.shutdown().expect("clean shutdown");
}
