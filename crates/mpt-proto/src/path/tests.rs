use super::*;

use crate::test_clock::t0;

fn params() -> PathParams {
    PathParams {
        keepalive: Duration::from_secs(2),
        dead_timer: Duration::from_secs(5),
        weight_out: 1,
        weight_in: 1,
        window: 1,
        admin: AdminStatus::Up,
    }
}

fn hearing(hears_you: bool) -> PathReport {
    PathReport {
        hears_you,
        ..Default::default()
    }
}

#[test]
fn new_path_probes_immediately_and_is_probing() {
    let t = t0();
    let p = Path::new(params(), t);
    assert_eq!(p.state(), PathState::Probing);
    assert_eq!(p.next_timer(), Some((t, TimerKind::Probe)));
    assert!(!p.usable());
}

#[test]
fn up_needs_rx_and_peer_hearing_us() {
    let t = t0();
    let mut p = Path::new(params(), t);
    p.on_receive(1, 7, t);
    assert_eq!(p.liveness(), Liveness::Up);
    assert_eq!(
        p.state(),
        PathState::Probing,
        "peer has not said it hears us"
    );
    p.on_report(&hearing(true), t);
    assert_eq!(p.state(), PathState::Up);
    assert!(p.usable());
    assert_eq!(p.report().rx_highest_path_seq, 7);
    assert!(p.report().hears_you);
}

#[test]
fn dead_exactly_at_dead_timer_after_last_rx() {
    let t = t0();
    let mut p = Path::new(params(), t);
    p.on_receive(1, 1, t + Duration::from_secs(1));
    p.on_report(&hearing(true), t);
    let last = t + Duration::from_secs(1);
    assert_eq!(
        p.next_timer().map(|x| x.0),
        Some(t),
        "probe is due before the dead timer"
    );
    p.on_timeout(t);
    let just_before = last + Duration::from_secs(5) - Duration::from_micros(1);
    p.on_timeout(just_before);
    assert_eq!(p.state(), PathState::Up);
    p.on_timeout(last + Duration::from_secs(5));
    assert_eq!(p.state(), PathState::Down);
    assert!(!p.usable());
    assert!(!p.report().hears_you);
}

#[test]
fn never_answering_path_goes_down_after_dead_timer() {
    let t = t0();
    let mut p = Path::new(params(), t);
    p.on_timeout(t + Duration::from_secs(5));
    assert_eq!(p.state(), PathState::Down);
}

#[test]
fn probes_keep_coming_while_down() {
    let t = t0();
    let mut p = Path::new(params(), t);
    assert!(p.on_timeout(t));
    assert!(!p.on_timeout(t + Duration::from_millis(1999)));
    assert!(p.on_timeout(t + Duration::from_secs(2)));
    p.on_timeout(t + Duration::from_secs(6));
    assert_eq!(p.liveness(), Liveness::Down);
    assert!(p.next_timer().is_some_and(|(_, k)| k == TimerKind::Probe));
}

#[test]
fn admin_down_stops_probing_and_admin_up_restarts() {
    let t = t0();
    let mut p = Path::new(
        PathParams {
            admin: AdminStatus::Down,
            ..params()
        },
        t,
    );
    assert!(!p.on_timeout(t + Duration::from_secs(10)));
    p.set_params(params(), t + Duration::from_secs(11));
    assert!(p.on_timeout(t + Duration::from_secs(11)));
}

#[test]
fn backup_state_reported() {
    let t = t0();
    let mut p = Path::new(
        PathParams {
            admin: AdminStatus::Backup,
            ..params()
        },
        t,
    );
    p.on_receive(1, 1, t);
    p.on_report(&hearing(true), t);
    assert_eq!(p.state(), PathState::Backup);
    assert!(p.usable());
}

#[test]
fn highest_seq_survives_reordering_and_wrap() {
    let t = t0();
    let mut p = Path::new(params(), t);
    p.on_receive(1, u32::MAX - 1, t);
    p.on_receive(1, 2, t);
    p.on_receive(1, u32::MAX, t);
    assert_eq!(p.report().rx_highest_path_seq, 2);
    assert_eq!(p.report().rx_packets, 3);
    assert!(seq_after(2, u32::MAX));
    assert!(!seq_after(5, 5));
}

/// An up path with a 10 ms RTT, last heard at `t`.
fn busy_path(t: Instant) -> Path {
    let mut p = Path::new(params(), t);
    assert!(p.on_timeout(t), "first probe");
    for _ in 0..8 {
        p.on_rtt_sample(Duration::from_millis(10));
    }
    p.on_receive(1, 1, t);
    p.on_report(&hearing(true), t);
    assert!(p.usable());
    p
}

#[test]
fn a_silent_busy_path_is_suspect_after_a_few_rtts_then_probed_fast() {
    let t = t0();
    let mut p = busy_path(t);
    let after = p.suspect_after();
    // 3 x 10 + 4 x var + 10 ms of feedback, but at least SUSPECT_MIN.
    assert!(
        after >= SUSPECT_MIN && after < Duration::from_millis(100),
        "{after:?}"
    );
    // Data goes out 1 ms after the last receive; nothing comes back.
    let sent = t + Duration::from_millis(1);
    p.on_data_sent(sent);
    p.on_data_sent(sent + Duration::from_millis(30)); // still owed since `sent`
    assert_eq!(p.next_timer(), Some((sent + after, TimerKind::Suspect)));
    assert!(!p.on_timeout(sent + after - Duration::from_micros(1)));
    assert_eq!(p.state(), PathState::Up);
    let at = sent + after;
    assert!(p.on_timeout(at), "a suspect path is probed at once");
    assert_eq!(p.state(), PathState::Suspect);
    assert!(!p.usable(), "no new data on a suspect path");
    assert!(!p.report().hears_you);
    // Then every RTT (here 20 ms, the floor), not every keepalive.
    let interval = p.suspect_probe_interval();
    assert_eq!(interval, SUSPECT_PROBE_MIN);
    assert_eq!(p.next_timer().map(|x| x.0), Some(at + interval));
    assert!(p.on_timeout(at + interval));
    // The dead timer still runs from the last receive.
    p.on_timeout(t + Duration::from_secs(5));
    assert_eq!(p.state(), PathState::Down);
}

#[test]
fn an_answer_clears_the_debt_and_brings_a_suspect_path_back() {
    let t = t0();
    let mut p = busy_path(t);
    let after = p.suspect_after();
    p.on_data_sent(t + Duration::from_millis(1));
    // Feedback in time: no longer owed, no suspect timer.
    p.on_receive(1, 2, t + Duration::from_millis(12));
    assert!(p.next_timer().is_none_or(|(_, k)| k != TimerKind::Suspect));
    // Owed again, and silent: suspect.
    let sent = t + Duration::from_millis(20);
    p.on_data_sent(sent);
    p.on_timeout(sent + after);
    assert_eq!(p.state(), PathState::Suspect);
    // The first datagram heard makes it up again, probing at keepalive.
    let back = sent + after + Duration::from_millis(5);
    p.on_receive(1, 3, back);
    assert_eq!(p.state(), PathState::Up);
    assert!(p.usable());
    assert_eq!(
        p.next_timer().map(|x| x.0),
        Some(back + Duration::from_secs(2))
    );
}

#[test]
fn an_idle_path_is_never_suspect_and_old_sends_do_not_count() {
    let t = t0();
    let mut p = busy_path(t);
    // Nothing sent: silence up to the dead timer is fine.
    p.on_timeout(t + Duration::from_secs(2));
    p.on_receive(1, 2, t + Duration::from_secs(2));
    assert_eq!(p.state(), PathState::Up);
    // A send reported late, from before the last receive, owes nothing.
    p.on_data_sent(t + Duration::from_secs(1));
    assert!(p.next_timer().is_none_or(|(_, k)| k != TimerKind::Suspect));
    // A long RTT raises the bar, the dead timer caps it.
    for _ in 0..30 {
        p.on_rtt_sample(Duration::from_secs(3));
    }
    assert_eq!(p.suspect_after(), Duration::from_secs(5));
}

#[test]
fn link_down_ignores_late_receive_reports_and_feedback() {
    let t = t0();
    let mut p = Path::new(params(), t);
    p.on_receive(1, 1, t);
    p.on_report(&hearing(true), t);
    assert!(p.usable());
    assert!(p.set_link(false, t));
    assert_eq!(p.state(), PathState::Down);
    // Data the data plane counted before the link went.
    p.on_receive(3, 4, t + Duration::from_millis(1));
    p.on_report(&hearing(true), t);
    assert_eq!(p.state(), PathState::Down);
    assert!(!p.usable());
    assert_eq!(p.feedback_due(), None);
    assert_eq!(p.next_timer(), None, "no probe, no dead timer, no feedback");
    // Switching the path on by hand does not probe a dead link either.
    let mut on = params();
    on.admin = AdminStatus::Down;
    p.set_params(on, t);
    p.set_params(params(), t);
    assert_eq!(p.next_timer(), None);
}

#[test]
fn link_up_probes_now_then_fast_until_usable_then_at_keepalive() {
    let t = t0();
    let mut p = Path::new(params(), t);
    assert!(p.on_timeout(t));
    assert!(p.set_link(false, t));
    let back = t + Duration::from_secs(1);
    assert!(p.set_link(true, back));
    assert!(!p.set_link(true, back));
    assert_eq!(p.state(), PathState::Probing);
    assert_eq!(p.next_timer(), Some((back, TimerKind::Probe)));
    assert!(p.on_timeout(back));
    let second = back + RELINK_PROBE_INTERVAL;
    assert_eq!(p.next_timer(), Some((second, TimerKind::Probe)));
    p.on_receive(1, 1, second);
    p.on_report(&hearing(true), second);
    assert!(p.usable());
    // This probe tells the peer we hear it; then the keepalive.
    assert!(p.on_timeout(second));
    assert!(p.report().hears_you);
    assert_eq!(
        p.next_timer().map(|(at, _)| at),
        Some(second + Duration::from_secs(2))
    );
}

#[test]
fn control_owd_fills_in_for_an_idle_path_but_not_over_recent_data() {
    let t = t0();
    let ms = Duration::from_millis;
    let mut p = Path::new(params(), t);
    assert_eq!(p.rx_owd(), None);
    // A probe on a path without data gives it a delay.
    p.on_control_owd(30_000, t);
    assert_eq!(p.rx_owd(), Some((30_000, t)));
    // Data's own sample wins while it is recent.
    let summary = DataSummary {
        packets: 1,
        highest_path_seq: 1,
        bytes: 100,
        last_rx: t + ms(10),
        last_timestamp_us: 0,
        owd_min_us: Some(35_000),
    };
    p.on_data(&summary);
    p.on_control_owd(31_000, t + ms(500));
    assert_eq!(p.rx_owd(), Some((35_000, t + ms(10))));
    // Once the path carried nothing for a second, probes take over again,
    // with the lowest of their recent delays.
    p.on_control_owd(31_000, t + ms(1_100));
    assert_eq!(p.rx_owd(), Some((30_000, t + ms(1_100))));
}

#[test]
fn an_idle_paths_delay_is_its_lowest_recent_control_delay() {
    let t = t0();
    let ms = Duration::from_millis;
    let mut p = Path::new(params(), t);
    // Control messages every 50 ms, most of them delayed 0-3 ms by the
    // endpoints' control loops: the path's delay is the 20 ms they had at
    // best, not the last one's.
    for i in 0..20u32 {
        let jitter = (i * 7919) % 3_000;
        p.on_control_owd(20_000 + jitter, t + ms(50 * u64::from(i)));
    }
    assert_eq!(p.rx_owd().map(|(owd, _)| owd), Some(20_000));
    // The path became slower: within two windows its delay follows.
    let later = t + ms(1_000);
    for i in 0..50u32 {
        p.on_control_owd(45_000 + (i % 2) * 1_500, later + ms(50 * u64::from(i)));
    }
    assert_eq!(p.rx_owd().map(|(owd, _)| owd), Some(45_000));
    // Delays near the wrap of the microsecond clock compare as delays.
    let mut q = Path::new(params(), t);
    q.on_control_owd(u32::MAX - 100, t);
    q.on_control_owd(50, t + ms(10));
    assert_eq!(q.rx_owd().map(|(owd, _)| owd), Some(u32::MAX - 100));
    // A window that ended long ago says nothing of the path now.
    q.on_control_owd(9_000, t + ms(5_000));
    assert_eq!(q.rx_owd().map(|(owd, _)| owd), Some(9_000));
}

/// Feeds a busy path 10 ms feedbacks for `ms`: 100 datagrams each, `lost`
/// of them lost, one-way delay `owd_us`. Returns the time after.
fn feed(
    p: &mut Path,
    mut t: Instant,
    counters: &mut (u32, u32),
    ms: u64,
    lost: u32,
    owd_us: u32,
) -> Instant {
    for _ in 0..ms / 10 {
        t += Duration::from_millis(10);
        counters.0 += 100 - lost;
        counters.1 += 100;
        let fb = Feedback {
            report: PathReport {
                rx_packets: counters.0,
                rx_highest_path_seq: counters.1,
                hears_you: true,
                ..Default::default()
            },
            rx_bytes: u64::from(counters.0) * 1400,
            last_rx_us: counters.1 * 100,
            echo_timestamp_us: 0,
            echo_delay_us: 0,
            owd_us: Some(owd_us),
        };
        p.on_feedback(&fb, 0, t);
    }
    t
}

#[test]
fn drops_reported_just_before_a_queue_shows_are_not_random_loss() {
    let t = t0();
    let mut p = busy_path(t);
    let mut c = (0, 0);
    // A clean second sets the delay floor.
    let t = feed(&mut p, t, &mut c, 1_000, 0, 10_000);
    // Slow start overshoots the buffer: 20 % dropped for 60 ms before a
    // feedback shows the queue (40 ms above the floor), then it drains.
    let t = feed(&mut p, t, &mut c, 60, 20, 10_000);
    let t = feed(&mut p, t, &mut c, 30, 0, 50_000);
    // The scheduler moved off the path: the tail of the overshoot is
    // reported lost a second later, with the next data.
    let t = t + Duration::from_secs(1);
    c.1 += 50;
    let t = feed(&mut p, t, &mut c, 1_000, 0, 10_000);
    let loss = p.current_random_loss(t).expect("estimate");
    assert!(loss < 0.1, "{loss}");
    // Sparse drops with no queue in sight are the link's own (a dense
    // run is an overflow, see `loss`).
    let t = feed(&mut p, t, &mut c, 600, 2, 10_000);
    let t = feed(&mut p, t, &mut c, 500, 0, 10_000);
    let loss = p.current_random_loss(t).expect("estimate");
    assert!(loss > 0.5, "{loss}");
}

#[test]
fn the_standing_delay_drops_short_spikes_and_follows_a_growing_queue() {
    let t = t0();
    let ms = Duration::from_millis;
    let mut p = Path::new(params(), t);
    assert_eq!(p.rx_owd_standing(t), None);
    let data = |at: Instant, owd: u32| DataSummary {
        packets: 10,
        highest_path_seq: 1,
        bytes: 14_000,
        last_rx: at,
        last_timestamp_us: 0,
        owd_min_us: Some(owd),
    };
    // Receive summaries every 2 ms at 10 ms; one comes 4 ms late (a
    // thread woke late): the latest sample says 14 ms, the path 10 ms.
    for i in 0..10u64 {
        p.on_data(&data(t + ms(2 * i), 10_000));
    }
    p.on_data(&data(t + ms(20), 14_000));
    assert_eq!(p.rx_owd().map(|(o, _)| o), Some(14_000));
    assert_eq!(p.rx_owd_standing(t + ms(20)).map(|(o, _)| o), Some(10_000));
    // A queue builds, 1 ms more every 2 ms: within two windows the
    // standing delay has followed it most of the way.
    let start = t + ms(22);
    for i in 0..40u32 {
        p.on_data(&data(
            start + ms(2 * u64::from(i)),
            10_000 + 1_000 * (i + 1),
        ));
    }
    let now = start + ms(78);
    let standing = p.rx_owd_standing(now).map(|(o, _)| o).unwrap();
    // Two windows of growth at 0.5 ms per ms lie below the latest.
    let lag = 2 * STANDING_OWD_WINDOW.as_micros() as u32 / 2;
    assert!(
        (50_000 - lag..50_000).contains(&standing),
        "standing {standing} against a latest 50 000"
    );
    // Control messages count too, and after a silence the latest sample
    // of any kind stands in.
    p.on_control_owd(35_000, now + ms(1));
    assert_eq!(p.rx_owd_standing(now + ms(1)).map(|(o, _)| o), Some(35_000));
    let later = now + ms(500);
    assert_eq!(
        p.rx_owd_standing(later).map(|(o, _)| o),
        p.rx_owd().map(|(o, _)| o)
    );
}
