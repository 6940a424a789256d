use super::*;

#[test]
fn hold_histogram_is_cumulative_with_sum_and_count() {
    let mut h = HoldHistogram::default();
    for us in [300, 1_500, 1_500, 700_000, 3_000_000] {
        h.record(Duration::from_micros(us));
    }
    let mut out = String::new();
    hold_histogram(&mut out, &[("conn=\"c\"".into(), h)]);
    let value = |series: &str| -> f64 {
        out.lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{out}"))
    };
    assert!(out.contains("# TYPE mpt_reorder_hold_seconds histogram"));
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{conn=\"c\",le=\"0.001\"}"),
        1.0
    );
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{conn=\"c\",le=\"0.002\"}"),
        3.0
    );
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{conn=\"c\",le=\"0.512\"}"),
        3.0
    );
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{conn=\"c\",le=\"1.024\"}"),
        4.0
    );
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{conn=\"c\",le=\"+Inf\"}"),
        5.0
    );
    assert_eq!(value("mpt_reorder_hold_seconds_count{conn=\"c\"}"), 5.0);
    assert!((value("mpt_reorder_hold_seconds_sum{conn=\"c\"}") - 3.7033).abs() < 1e-9);
    // Twelve buckets: eleven limits and +Inf.
    assert_eq!(out.matches("_bucket{").count(), 12);
}

/// A status source with one connection `conn` and one path `p0`, every
/// counter of the groups set to a distinct value.
fn one_connection(conn: &str) -> StatusSource {
    use crate::plane::{ConnSet, ConnShared, PathShared, PathTable, TxStats, TxWakes};
    use mpt_proto::reorder::Resequencer;
    use mpt_proto::sched::SchedPath;
    #[allow(clippy::disallowed_methods)]
    let now = Instant::now();
    let socket = crate::io::udp::PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let remote = Some("127.0.0.2:5000".parse().unwrap());
    let sched = SchedPath {
        weight: 3,
        window: 1,
    };
    let path = PathShared::new(0, "p0".into(), socket, remote, sched, 1, now);
    path.tx_bytes.add(1234);
    let c = ConnShared::new(
        0,
        conn.into(),
        1,
        now,
        PathTable::new([path]),
        None,
        crate::plane::route::SourceFilter::default(),
        Resequencer::new(16, 1500, Duration::from_millis(25)),
        Duration::from_millis(25),
        crate::io::udp::Waker::new().unwrap(),
        TxWakes(Arc::new(Vec::new())),
    );
    let mut n = 100;
    let mut next = || {
        n += 1;
        n
    };
    macro_rules! fill {
        ($group:expr, $($field:ident),*) => { $( $group.$field.add(next()); )* };
    }
    fill!(
        c.drops,
        too_short,
        bad_version,
        malformed,
        unknown_connection,
        auth,
        replay,
        unsupported,
        no_path,
        no_remote,
        send_error,
        control_queue_full,
        no_session,
        handshake_rate_limited,
        tun_write,
        wrong_source,
        unauthenticated_control,
        inner_source,
        handshake_reflected,
        handshake_challenged
    );
    fill!(
        c.repairs,
        requested,
        requested_datagrams,
        congestion_holes,
        unrequested,
        reordered_holes,
        needless,
        peer_requests,
        sent,
        missed,
        received,
        duplicates
    );
    fill!(c.copies, sent, sent_bytes, first, duplicates);
    fill!(c.equalized, held, held_us);
    let tx = TxStats::default();
    fill!(tx, no_route, tun_errors);
    let conns = Arc::new(vec![Arc::new(c)]);
    let (commands, _) = std::sync::mpsc::sync_channel(1);
    StatusSource {
        conns: Arc::new(ConnSet::new(conns, Arc::default())),
        tx: Arc::new(tx),
        tun_name: "mpt0".into(),
        started: now,
        commands,
        netlink: None,
        noise: None,
        shared: None,
    }
}

#[test]
fn status_lists_every_counter_of_the_groups_under_its_name() {
    let source = one_connection("c");
    let status = crate::ops::control_socket::status(&source);
    let conn = &source.conns.list()[0];
    let json = &status["connections"][0];
    for (group, counters) in [
        ("drops", conn.drops.each().to_vec()),
        ("repair", conn.repairs.each().to_vec()),
    ] {
        for (name, value) in &counters {
            assert_eq!(json[group][name], *value, "{group}.{name}");
        }
    }
    assert_eq!(json["drops"].as_object().map(|o| o.len()), Some(19));
    // The counters and `enabled`.
    assert_eq!(json["repair"].as_object().map(|o| o.len()), Some(12));
    assert_eq!(status["drops"]["no_route"], source.tx.no_route.get());
    assert_eq!(
        status["drops"]["tun_read_errors"],
        source.tx.tun_errors.get()
    );
    assert_eq!(status["drops"].as_object().map(|o| o.len()), Some(2));
}
