//! The receiver's timing plan in the two-session world: it follows the
//! delays the links really have.

use super::*;
use crate::session::timing::{self, EqualizeTarget, TimingInput, TimingPlan, RECENT_OWD};

/// A timing input with these received shares and no repair request.
fn shares(rx: &[f64]) -> TimingInput {
    let mut input = TimingInput::default();
    input.rx_share[..rx.len()].copy_from_slice(rx);
    input
}

#[test]
fn the_reorder_timeout_grows_with_one_paths_delay_and_comes_back() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 10 * MS);
    w.data_interval = Some(MS);
    w.run_until(w.at(3.0));
    let both = shares(&[0.5, 0.5]);
    let like = w.b.timing_plan(w.now, &both);
    assert!(
        like.reorder_timeout < timing::DEFAULT_REORDER_TIMEOUT + 20 * MS,
        "{like:?}"
    );
    assert_eq!(like.rx_delay_spread, Some(Duration::ZERO));
    // Path 1 gains 50 ms (a queue builds): the data that overtakes on
    // path 0 must wait for it.
    w.links[1].delay = 60 * MS;
    w.run_until(w.at(4.0));
    let slow = w.b.timing_plan(w.now, &both);
    assert_eq!(slow.rx_delay_spread, Some(50 * MS));
    assert!(
        slow.reorder_timeout >= timing::DEFAULT_REORDER_TIMEOUT + 50 * MS * 5 / 4,
        "{slow:?}"
    );
    let wait = |plan: &TimingPlan, p: usize| plan.path_waits[p].expect("usable");
    assert!(wait(&slow, 1) >= 50 * MS + timing::PATH_WAIT_MARGIN);
    assert!(wait(&slow, 1) > wait(&like, 1) + 40 * MS);
    assert!(wait(&slow, 0) < wait(&slow, 1));
    // The queue drains: within a second of the last late datagram the
    // measured spread is gone and the waits shrink again (to what the
    // RTT variation the change caused still asks for).
    w.links[1].delay = 10 * MS;
    let drained = w.now + RECENT_OWD;
    w.run_until(drained);
    let back = w.b.timing_plan(w.now, &both);
    assert_eq!(back.rx_delay_spread, Some(Duration::ZERO));
    assert!(back.reorder_timeout < slow.reorder_timeout, "{back:?}");
    assert!(wait(&back, 1) + 20 * MS < wait(&slow, 1), "{back:?}");
}

#[test]
fn the_equalisation_target_tracks_the_far_path() {
    // DSL 10 ms one way beside a 300 ms satellite.
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 10 * MS);
    w.links[1].delay = 300 * MS;
    w.data_interval = Some(5 * MS);
    w.run_until(w.at(3.0));
    let satellite = |owd_ms: u32| {
        Some(EqualizeTarget {
            owd_us: owd_ms * 1000,
            spread_us: (owd_ms - 10) * 1000,
        })
    };
    let both = shares(&[0.5, 0.5]);
    let plan = w.b.timing_plan(w.now, &both);
    assert_eq!(plan.equalize, satellite(300));
    assert_eq!(plan.equalize_bulk, satellite(300));
    // While the satellite carries (next to) nothing, short datagrams are
    // not held for it; full-size ones still are.
    let idle = w.b.timing_plan(w.now, &shares(&[1.0, 0.0]));
    assert_eq!(idle.equalize, None);
    assert_eq!(idle.equalize_bulk, satellite(300));
    // The satellite's delay halves: the target follows.
    w.links[1].delay = 150 * MS;
    w.run_until(w.at(4.0));
    let plan = w.b.timing_plan(w.now, &both);
    assert_eq!(plan.equalize, satellite(150));
    assert_eq!(plan.equalize_bulk, satellite(150));
    assert_eq!(plan.rx_delay_spread, Some(140 * MS));
}

#[test]
fn a_backup_paths_late_first_reply_does_not_hold_the_failover() {
    // WiFi 5 ms one way beside LTE 30 ms as a backup, whose first probes
    // take 600 ms more each way (a neighbour resolved late, a radio
    // waking up): one reply 630 ms after its probe, every later one
    // 60 ms. Data flows on WiFi, 50 datagrams a second.
    let mut w = Pair::new(
        vec![params(AdminStatus::Up), params(AdminStatus::Backup)],
        5 * MS,
    );
    w.links[1].delay = 630 * MS;
    w.data_interval = Some(20 * MS);
    w.run_until(w.at(0.3));
    w.links[1].delay = 30 * MS;
    w.run_until(w.at(10.0));
    let lte = *w.b.path(1).unwrap().rtt();
    assert!(lte.min() < Some(70 * MS), "{lte:?}");
    // WiFi falls silent and the backup takes over: the gap the lost WiFi
    // datagrams leave waits at most the resequencer's timeout, which must
    // follow LTE's real 60 ms, not its first reply, four keepalives later.
    w.links[0].up_ab = false;
    w.links[0].up_ba = false;
    w.run_until(w.at(10.5));
    assert!(w.data_received[1] > 10, "backup carries the data");
    let plan = w.b.timing_plan(w.now, &shares(&[0.0, 1.0]));
    assert!(plan.reorder_timeout <= 100 * MS, "{plan:?} {lte:?}");
}
