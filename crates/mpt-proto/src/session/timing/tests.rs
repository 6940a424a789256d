//! The timing policy at its edges, on sessions whose paths are put in the
//! wanted state directly (no peer): no paths, one path, unlike delays, a
//! path without an RTT sample, suspect, dead and backup paths.

use std::time::{Duration, Instant};

use super::*;
use crate::path::{AdminStatus, DataSummary, Liveness, Path, PathParams};
use crate::session::SessionConfig;
use crate::wire::PathReport;

const MS: Duration = Duration::from_millis(1);

#[allow(clippy::disallowed_methods)]
fn t0() -> Instant {
    Instant::now()
}

fn params(admin: AdminStatus) -> PathParams {
    PathParams {
        keepalive: Duration::from_secs(2),
        dead_timer: Duration::from_secs(5),
        weight_out: 1,
        weight_in: 1,
        window: 1,
        admin,
    }
}

/// A session of `n` primary paths, all still probing (no sample at all).
fn session(n: usize, now: Instant) -> Session {
    Session::new(
        SessionConfig {
            conn_id: 1,
            paths: vec![params(AdminStatus::Up); n],
            first_control_id: 1,
        },
        now,
    )
    .unwrap()
}

fn path(s: &mut Session, id: usize) -> &mut Path {
    s.paths[id].as_mut().unwrap()
}

/// Path `id` heard from and told it is heard: usable.
fn make_up(s: &mut Session, id: usize, now: Instant) {
    let p = path(s, id);
    p.on_receive(1, 1, now);
    let report = PathReport {
        rx_packets: 1,
        rx_highest_path_seq: 1,
        weight_in: 1,
        hears_you: true,
    };
    p.on_report(&report, now);
    assert!(p.usable());
}

/// Path `id` usable with one RTT sample of `rtt` (variation `rtt / 2`).
fn up_with_rtt(s: &mut Session, id: usize, rtt: Duration, now: Instant) {
    make_up(s, id, now);
    path(s, id).on_rtt_sample(rtt);
}

/// Data on path `id` arrived at `at` with one-way delay `owd_us`.
fn data_owd(s: &mut Session, id: usize, owd_us: u32, at: Instant) {
    path(s, id).on_data(&DataSummary {
        packets: 1,
        highest_path_seq: 2,
        bytes: 1000,
        last_rx: at,
        last_timestamp_us: 0,
        owd_min_us: Some(owd_us),
    });
}

/// Path `id` sent data and heard nothing back long enough to be suspect.
fn make_suspect(s: &mut Session, id: usize, now: Instant) -> Instant {
    let p = path(s, id);
    let sent = now + MS;
    p.on_data_sent(sent);
    let at = sent + p.suspect_after();
    p.on_timeout(at);
    assert_eq!(p.liveness(), Liveness::Suspect);
    at
}

/// Every path carries data.
fn all(_: usize) -> bool {
    true
}

#[test]
fn reorder_timeout_is_the_floor_without_rtt_samples() {
    let now = t0();
    assert_eq!(
        reorder_timeout(&session(0, now), now),
        DEFAULT_REORDER_TIMEOUT
    );
    // Probing paths, and a usable one without an RTT sample yet.
    let mut s = session(2, now);
    assert_eq!(reorder_timeout(&s, now), DEFAULT_REORDER_TIMEOUT);
    make_up(&mut s, 0, now);
    assert_eq!(reorder_timeout(&s, now), DEFAULT_REORDER_TIMEOUT);
}

#[test]
fn reorder_timeout_of_one_path_is_floor_plus_twice_its_variation() {
    let now = t0();
    let mut s = session(2, now);
    up_with_rtt(&mut s, 0, 20 * MS, now);
    // Variation 10 ms; path 1 has no sample and changes nothing.
    assert_eq!(reorder_timeout(&s, now), DEFAULT_REORDER_TIMEOUT + 20 * MS);
}

#[test]
fn reorder_timeout_adds_half_the_rtt_spread_or_the_owd_spread() {
    let now = t0();
    let mut s = session(2, now);
    up_with_rtt(&mut s, 0, 20 * MS, now);
    up_with_rtt(&mut s, 1, 100 * MS, now);
    // Half the RTT spread (40 ms) plus twice the largest variation (50).
    let by_rtt = 40 * MS + 100 * MS + DEFAULT_REORDER_TIMEOUT;
    assert_eq!(reorder_timeout(&s, now), by_rtt);
    // A measured one-way delay spread of 80 ms (a queue), with a quarter
    // more, outweighs the RTTs' 40.
    data_owd(&mut s, 0, 1_000, now);
    data_owd(&mut s, 1, 81_000, now);
    assert_eq!(reorder_timeout(&s, now), by_rtt + 60 * MS);
    // Only data of the last second counts.
    assert_eq!(reorder_timeout(&s, now + RECENT_OWD), by_rtt);
}

#[test]
fn reorder_timeout_ignores_suspect_and_dead_paths_rtts_and_is_capped() {
    let now = t0();
    let mut s = session(3, now);
    up_with_rtt(&mut s, 0, 20 * MS, now);
    up_with_rtt(&mut s, 2, 1_500 * MS, now);
    assert_eq!(reorder_timeout(&s, now), MAX_REORDER_TIMEOUT);
    path(&mut s, 2).set_link(false, now);
    assert_eq!(reorder_timeout(&s, now), DEFAULT_REORDER_TIMEOUT + 20 * MS);
    make_up(&mut s, 1, now);
    let at = make_suspect(&mut s, 1, now);
    path(&mut s, 1).on_rtt_sample(900 * MS);
    assert_eq!(reorder_timeout(&s, at), DEFAULT_REORDER_TIMEOUT + 20 * MS);
}

#[test]
fn rx_delay_spread_needs_two_up_paths_bringing_recent_data() {
    let now = t0();
    assert_eq!(rx_delay_spread(&session(0, now), now, all), None);
    let mut s = session(3, now);
    make_up(&mut s, 0, now);
    data_owd(&mut s, 0, 5_000, now);
    assert_eq!(rx_delay_spread(&s, now, all), None, "one path");
    make_up(&mut s, 1, now);
    data_owd(&mut s, 1, 35_000, now);
    assert_eq!(rx_delay_spread(&s, now, all), Some(30 * MS));
    // A path not bringing data, or not up, or with only old samples.
    assert_eq!(rx_delay_spread(&s, now, |id| id != 1), None);
    make_up(&mut s, 2, now);
    data_owd(&mut s, 2, 95_000, now);
    assert_eq!(rx_delay_spread(&s, now, all), Some(90 * MS));
    path(&mut s, 2).set_link(false, now);
    assert_eq!(rx_delay_spread(&s, now, all), Some(30 * MS));
    assert_eq!(rx_delay_spread(&s, now + OWD_HORIZON, all), None);
}

#[test]
fn rx_delay_spread_wraps_with_the_clock_offset() {
    let now = t0();
    let mut s = session(2, now);
    make_up(&mut s, 0, now);
    make_up(&mut s, 1, now);
    // The offset puts the fast path just below the wrap.
    data_owd(&mut s, 0, u32::MAX - 999, now);
    data_owd(&mut s, 1, 2_000, now);
    assert_eq!(rx_delay_spread(&s, now, all), Some(3 * MS));
}

#[test]
fn path_waits_are_none_without_usable_paths() {
    let now = t0();
    let waits = path_waits(&session(0, now), now, DEFAULT_REORDER_TIMEOUT);
    assert!(waits.iter().all(Option::is_none));
    let s = session(2, now);
    let waits = path_waits(&s, now, DEFAULT_REORDER_TIMEOUT);
    assert!(waits.iter().all(Option::is_none), "probing paths");
}

#[test]
fn path_waits_of_one_path_without_samples_is_the_margin() {
    let now = t0();
    let mut s = session(1, now);
    make_up(&mut s, 0, now);
    let waits = path_waits(&s, now, DEFAULT_REORDER_TIMEOUT);
    assert_eq!(waits[0], Some(PATH_WAIT_MARGIN));
    assert!(waits[1..].iter().all(Option::is_none));
}

#[test]
fn path_waits_follow_the_delay_above_the_fastest_path() {
    let now = t0();
    let mut s = session(4, now);
    up_with_rtt(&mut s, 0, 20 * MS, now);
    up_with_rtt(&mut s, 1, 60 * MS, now);
    // Path 2 has no RTT sample, path 3 is dead.
    make_up(&mut s, 2, now);
    up_with_rtt(&mut s, 3, 20 * MS, now);
    path(&mut s, 3).set_link(false, now);
    let timeout = Duration::from_secs(1);
    // No one-way delays yet: half the minimum RTTs' difference.
    let waits = path_waits(&s, now, timeout);
    assert_eq!(waits[0], Some(20 * MS + PATH_WAIT_MARGIN));
    assert_eq!(waits[1], Some(20 * MS + 60 * MS + PATH_WAIT_MARGIN));
    assert_eq!(waits[2], Some(PATH_WAIT_MARGIN));
    assert_eq!(waits[3], None);
    // Measured one-way delays take precedence: path 1 is 45 ms behind.
    data_owd(&mut s, 0, 10_000, now);
    data_owd(&mut s, 1, 55_000, now);
    let waits = path_waits(&s, now, timeout);
    assert_eq!(waits[0], Some(20 * MS + PATH_WAIT_MARGIN));
    assert_eq!(waits[1], Some(45 * MS + 60 * MS + PATH_WAIT_MARGIN));
    // Capped by the gap timeout; stale delays fall back to the RTTs.
    assert_eq!(path_waits(&s, now, 50 * MS)[1], Some(50 * MS));
    let later = path_waits(&s, now + OWD_HORIZON, timeout);
    assert_eq!(later[1], Some(20 * MS + 60 * MS + PATH_WAIT_MARGIN));
}

#[test]
fn no_equalisation_without_two_counted_paths_a_hold_apart() {
    let now = t0();
    assert_eq!(
        equalize_target(&session(0, now), now, all, false, false),
        None
    );
    let mut s = session(2, now);
    up_with_rtt(&mut s, 0, 20 * MS, now);
    data_owd(&mut s, 0, 5_000, now);
    assert_eq!(equalize_target(&s, now, all, false, true), None, "one path");
    // A second path less than MIN_HOLD slower: not worth a hold.
    up_with_rtt(&mut s, 1, 20 * MS, now);
    data_owd(&mut s, 1, 5_999, now);
    assert_eq!(equalize_target(&s, now, all, false, true), None);
    data_owd(&mut s, 1, 6_000, now);
    let target = EqualizeTarget {
        owd_us: 6_000,
        spread_us: 1_000,
    };
    assert_eq!(equalize_target(&s, now, all, false, false), Some(target));
}

#[test]
fn near_paths_count_idle_far_paths_only_when_carrying_or_for_bulk() {
    let now = t0();
    let mut s = session(3, now);
    // DSL, LTE 60 ms behind in RTT (near), GEO 600 ms behind (far).
    up_with_rtt(&mut s, 0, 25 * MS, now);
    up_with_rtt(&mut s, 1, 85 * MS, now);
    up_with_rtt(&mut s, 2, 625 * MS, now);
    data_owd(&mut s, 0, 12_000, now);
    data_owd(&mut s, 1, 42_000, now);
    data_owd(&mut s, 2, 312_000, now);
    let target = |owd_us: u32| {
        Some(EqualizeTarget {
            owd_us,
            spread_us: owd_us - 12_000,
        })
    };
    let dsl_only = |id: usize| id == 0;
    // Short datagrams: the near idle path counts, the far one does not.
    assert_eq!(
        equalize_target(&s, now, dsl_only, false, false),
        target(42_000)
    );
    // Bulk: the far path counts carrying or not.
    assert_eq!(
        equalize_target(&s, now, dsl_only, false, true),
        target(312_000)
    );
    // Carrying data, the far path counts for everything.
    assert_eq!(equalize_target(&s, now, all, false, false), target(312_000));
    // With random loss only paths carrying data count, bulk or not.
    assert_eq!(equalize_target(&s, now, dsl_only, true, true), None);
    let two = |id: usize| id < 2;
    assert_eq!(equalize_target(&s, now, two, true, true), target(42_000));
}

#[test]
fn a_path_without_rtt_sample_counts_only_when_carrying_or_for_bulk() {
    let now = t0();
    let mut s = session(2, now);
    up_with_rtt(&mut s, 0, 20 * MS, now);
    make_up(&mut s, 1, now);
    data_owd(&mut s, 0, 10_000, now);
    data_owd(&mut s, 1, 30_000, now);
    let first = |id: usize| id == 0;
    assert_eq!(equalize_target(&s, now, first, false, false), None);
    let bulk = equalize_target(&s, now, first, false, true);
    assert_eq!(bulk.map(|t| t.spread_us), Some(20_000));
}

#[test]
fn suspect_dead_and_backup_paths_set_no_hold() {
    let now = t0();
    let mut s = Session::new(
        SessionConfig {
            conn_id: 1,
            paths: vec![
                params(AdminStatus::Up),
                params(AdminStatus::Up),
                params(AdminStatus::Up),
                params(AdminStatus::Backup),
            ],
            first_control_id: 1,
        },
        now,
    )
    .unwrap();
    for id in 0..4 {
        up_with_rtt(&mut s, id, 20 * MS, now);
        data_owd(&mut s, id, 10_000 + 20_000 * id as u32, now);
    }
    let at = make_suspect(&mut s, 1, now);
    path(&mut s, 2).set_link(false, at);
    assert_eq!(equalize_target(&s, at, all, false, true), None);
    // Stale samples do not count either.
    let mut s = session(2, now);
    up_with_rtt(&mut s, 0, 20 * MS, now);
    up_with_rtt(&mut s, 1, 20 * MS, now);
    data_owd(&mut s, 0, 10_000, now);
    data_owd(&mut s, 1, 30_000, now);
    assert!(equalize_target(&s, now, all, false, true).is_some());
    assert_eq!(
        equalize_target(&s, now + OWD_HORIZON, all, false, true),
        None
    );
}

#[test]
fn random_loss_lasts_the_hold_after_a_repair_request() {
    let now = t0();
    assert!(!random_loss(None, now));
    assert!(random_loss(Some(now), now));
    assert!(random_loss(Some(now), now + RANDOM_LOSS_HOLD - MS));
    assert!(!random_loss(Some(now), now + RANDOM_LOSS_HOLD));
}

#[test]
fn shares_are_smoothed_by_the_time_they_cover() {
    let now = t0();
    assert_eq!(share_weight(None, now), 1.0);
    assert_eq!(share_weight(Some(now), now), 0.0);
    let w = share_weight(Some(now), now + SHARE_TAU);
    assert!((w - (1.0 - (-1.0f64).exp())).abs() < 1e-12, "{w}");
    assert_eq!(smoothed_share(0.25, 0, 0, 1.0), 0.25, "nothing counted");
    assert_eq!(smoothed_share(0.25, 3, 4, 1.0), 0.75);
    assert_eq!(smoothed_share(0.25, 3, 4, 0.5), 0.5);
    assert!(share_idle(0, 1), "never brought data");
    let idle = SHARE_IDLE.as_nanos() as u64;
    assert!(!share_idle(5, 5 + idle));
    assert!(share_idle(5, 5 + idle + 1));
}

#[test]
fn the_plan_applies_the_share_thresholds() {
    let now = t0();
    let mut s = session(2, now);
    up_with_rtt(&mut s, 0, 25 * MS, now);
    up_with_rtt(&mut s, 1, 625 * MS, now);
    data_owd(&mut s, 0, 12_000, now);
    data_owd(&mut s, 1, 312_000, now);
    let empty = s.timing_plan(now, &TimingInput::default());
    assert_eq!(empty.reorder_timeout, reorder_timeout(&s, now));
    assert_eq!(empty.path_waits, path_waits(&s, now, empty.reorder_timeout));
    assert_eq!(empty.rx_delay_spread, None);
    assert_eq!(empty.equalize, None, "the far path carries nothing");
    assert_eq!(empty.equalize_bulk.map(|t| t.owd_us), Some(312_000));
    let mut input = TimingInput::default();
    input.rx_share[0] = 1.0 - EQUALIZE_MIN_SHARE;
    input.rx_share[1] = EQUALIZE_MIN_SHARE;
    let plan = s.timing_plan(now, &input);
    assert_eq!(plan.equalize.map(|t| t.owd_us), Some(312_000));
    assert_eq!(plan.rx_delay_spread, Some(300 * MS));
    // Below the carrying share the far path still counts in the spread.
    input.rx_share[1] = SPREAD_MIN_SHARE;
    let plan = s.timing_plan(now, &input);
    assert_eq!(plan.equalize, None);
    assert_eq!(plan.rx_delay_spread, Some(300 * MS));
    input.rx_share[1] = 0.0;
    assert_eq!(s.timing_plan(now, &input).rx_delay_spread, None);
    // A recent repair request: the far path, carrying nothing, no longer
    // counts for bulk either.
    input.last_repair_request = Some(now);
    assert_eq!(s.timing_plan(now, &input).equalize_bulk, None);
}
