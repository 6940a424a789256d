//! The lookup schedule, the choice of address, and answers applied to
//! real paths (loopback sockets), with the resolver thread played by the
//! test through the two channels.

use std::sync::mpsc::channel;

use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::SchedPath;

use super::*;
use crate::plane::{PathTable, TxWakes};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn failed_lookups_back_off_to_a_bound() {
    let hour = Duration::from_secs(3600);
    let waits: Vec<u64> = (1..=9).map(|f| retry_after(f, hour).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    assert_eq!(retry_after(u32::MAX, hour), RETRY_MAX);
    // Never longer than the interval of a name that resolves.
    let short = Duration::from_secs(2);
    assert_eq!(retry_after(1, short), Duration::from_secs(1));
    assert_eq!(retry_after(5, short), short);
}

#[test]
fn the_path_family_decides_and_the_current_address_stays() {
    let both = [ip("192.0.2.7"), ip("2001:db8::7"), ip("192.0.2.8")];
    assert_eq!(pick(&both, Some(false), None), Some(ip("192.0.2.7")));
    assert_eq!(pick(&both, Some(true), None), Some(ip("2001:db8::7")));
    assert_eq!(pick(&both, None, None), Some(ip("192.0.2.7")));
    let v6_first = [ip("2001:db8::7"), ip("192.0.2.7")];
    assert_eq!(pick(&v6_first, None, None), Some(ip("2001:db8::7")));
    // Rotating records do not move a path whose address is still listed.
    assert_eq!(
        pick(&both, Some(false), Some(ip("192.0.2.8"))),
        Some(ip("192.0.2.8"))
    );
    // Gone from the list: the first of the family.
    assert_eq!(
        pick(&both, Some(false), Some(ip("192.0.2.99"))),
        Some(ip("192.0.2.7"))
    );
    assert_eq!(pick(&[ip("2001:db8::7")], Some(false), None), None);
    assert_eq!(pick(&[], None, None), None);
}

/// A connection with one path per `(name, remote name)`, bound on the
/// loopback.
fn conn(paths: &[(&str, Option<&str>)]) -> Arc<ConnShared> {
    let now = Instant::now();
    let table = PathTable::new(paths.iter().enumerate().map(|(id, (name, host))| {
        let socket =
            crate::io::udp::PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let sched = SchedPath {
            weight: 1,
            window: 1,
        };
        let mut p = PathShared::new(id, (*name).into(), socket, None, sched, 1, now);
        p.remote_name = host.map(str::to_string);
        p.remote_fixed = host.is_some();
        p
    }));
    Arc::new(ConnShared::new(
        0,
        "c".into(),
        1,
        now,
        table,
        None,
        crate::plane::route::SourceFilter::default(),
        Resequencer::new(16, 1500, Duration::from_millis(25)),
        Duration::from_millis(25),
        Some(crate::io::udp::Waker::new().unwrap()),
        TxWakes(Arc::new(Vec::new())),
    ))
}

const SETUP: ConnSetup = ConnSetup {
    port: 65022,
    remote_port: 7000,
    keepalive: Duration::from_secs(1),
    dead_timer: Duration::from_secs(3),
};

#[test]
fn lookups_are_sent_when_due_and_answers_move_the_paths() {
    let conns = vec![conn(&[
        ("a", Some("hub.test")),
        ("b", Some("hub.test")),
        ("c", Some("other.test")),
        ("d", None),
    ])];
    let (req_tx, req_rx) = channel();
    let (ans_tx, ans_rx) = channel();
    let interval = Duration::from_secs(10);
    let mut names = Names::new(req_tx, ans_rx, interval);
    let t0 = Instant::now();
    let setups = [SETUP];
    assert!(!names.poll(&conns, &mut [], &setups, t0));
    // One lookup per name, not per path; none for a path without one.
    let sent: Vec<String> = req_rx.try_iter().map(|l| l.name).collect();
    assert_eq!(sent, ["hub.test", "other.test"]);
    // Nothing again while the answers are out.
    names.poll(&conns, &mut [], &setups, t0 + Duration::from_secs(30));
    assert_eq!(req_rx.try_iter().count(), 0);
    let table = conns[0].paths();
    let (a, b, c) = (
        table.get(0).unwrap(),
        table.get(1).unwrap(),
        table.get(2).unwrap(),
    );
    assert!(a.awaits_name() && c.awaits_name());

    ans_tx
        .send(Answer {
            name: "hub.test".into(),
            result: Ok(vec![ip("2001:db8::1"), ip("127.0.0.9")]),
        })
        .unwrap();
    ans_tx
        .send(Answer {
            name: "other.test".into(),
            result: Err("Name or service not known".into()),
        })
        .unwrap();
    let t1 = t0 + Duration::from_millis(5);
    assert!(names.poll(&conns, &mut [], &setups, t1));
    // The IPv4 address, for the paths' IPv4 sockets, at the remote port.
    let want: SocketAddr = "127.0.0.9:7000".parse().unwrap();
    assert_eq!(a.remote().map(|r| r.0), Some(want));
    assert_eq!(b.remote().map(|r| r.0), Some(want));
    assert!(!a.awaits_name());
    assert_eq!(a.resolve_error(), None);
    assert!(c.awaits_name());
    assert_eq!(
        c.resolve_error().as_deref(),
        Some("name other.test: Name or service not known")
    );

    // The failing name is retried after 1 s, the other after the interval.
    names.poll(&conns, &mut [], &setups, t1 + Duration::from_millis(900));
    assert_eq!(req_rx.try_iter().count(), 0);
    names.poll(&conns, &mut [], &setups, t1 + Duration::from_millis(1001));
    let sent: Vec<String> = req_rx.try_iter().map(|l| l.name).collect();
    assert_eq!(sent, ["other.test"]);
    let later = t1 + interval;
    names.poll(&conns, &mut [], &setups, later);
    let sent: Vec<String> = req_rx.try_iter().map(|l| l.name).collect();
    assert_eq!(sent, ["hub.test"]);

    // A new address: the paths follow; a failure later keeps it.
    ans_tx
        .send(Answer {
            name: "hub.test".into(),
            result: Ok(vec![ip("127.0.0.10")]),
        })
        .unwrap();
    assert!(names.poll(&conns, &mut [], &setups, later));
    assert_eq!(
        a.remote().map(|r| r.0),
        Some("127.0.0.10:7000".parse().unwrap())
    );
    // A path going down asks for a lookup at once.
    names.path_down("hub.test", later + Duration::from_secs(2));
    names.poll(&conns, &mut [], &setups, later + Duration::from_secs(2));
    let sent: Vec<String> = req_rx.try_iter().map(|l| l.name).collect();
    assert_eq!(sent, ["hub.test"]);
    ans_tx
        .send(Answer {
            name: "hub.test".into(),
            result: Err("temporary failure".into()),
        })
        .unwrap();
    assert!(!names.poll(&conns, &mut [], &setups, later + Duration::from_secs(3)));
    assert_eq!(
        a.remote().map(|r| r.0),
        Some("127.0.0.10:7000".parse().unwrap())
    );
    assert_eq!(
        a.resolve_error().as_deref(),
        Some("name hub.test: temporary failure")
    );
    // Only IPv6 for an IPv4 path: said so.
    ans_tx
        .send(Answer {
            name: "other.test".into(),
            result: Ok(vec![ip("2001:db8::2")]),
        })
        .unwrap();
    names.poll(&conns, &mut [], &setups, later + Duration::from_secs(3));
    assert!(c
        .resolve_error()
        .is_some_and(|e| e.starts_with("name other.test: no IPv4 address")));
}

#[test]
fn names_of_removed_paths_are_dropped() {
    let conns = vec![conn(&[("a", Some("hub.test"))])];
    let (req_tx, req_rx) = channel();
    let (_ans_tx, ans_rx) = channel();
    let mut names = Names::new(req_tx, ans_rx, Duration::from_secs(5));
    let t0 = Instant::now();
    names.poll(&conns, &mut [], &[SETUP], t0);
    assert_eq!(req_rx.try_iter().count(), 1);
    conns[0].set_paths(PathTable::default());
    names.poll(&conns, &mut [], &[SETUP], t0 + Duration::from_secs(60));
    assert_eq!(req_rx.try_iter().count(), 0);
    assert!(names.entries.is_empty());
}
