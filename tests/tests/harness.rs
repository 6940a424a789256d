//! Tests of the harness itself, without mptd: namespaces, veths, the
//! per-thread TCP transfer and cleanup. If these fail, the tunnel tests
//! cannot be trusted.

use std::time::Duration;

use mpt_e2e::*;

#[test]
fn tcp_transfer_over_plain_veth_both_families() {
    let a = Netns::new("a").unwrap();
    let b = Netns::new("b").unwrap();
    add_veth_pair(&a, &b, 0).unwrap();
    add_veth_pair(&a, &b, 1).unwrap();
    for (port, family) in [(6001, Family::V4), (6002, Family::V6)] {
        let bytes = 8 << 20;
        let before = a.link_stats(&veth(Side::A, 1)).unwrap();
        let t =
            Transfer::start(&a, &b, outer_addr(1, family, Side::B), port, bytes, 7, None).unwrap();
        let r = t.finish(transfer_timeout(bytes)).unwrap();
        assert_eq!(r.bytes, bytes);
        let after = a.link_stats(&veth(Side::A, 1)).unwrap();
        // The 8 MiB went out of va1 (the kernel counts TSO super-packets,
        // so bytes, not packets, are the measure).
        assert!(
            after.tx_bytes - before.tx_bytes > bytes,
            "{before:?} -> {after:?}"
        );
    }
}

#[test]
fn same_seed_same_digest_and_a_link_down_breaks_the_transfer() {
    let a = Netns::new("a").unwrap();
    let b = Netns::new("b").unwrap();
    add_veth_pair(&a, &b, 0).unwrap();
    let to = outer_addr(0, Family::V4, Side::B);
    let r1 = Transfer::start(&a, &b, to, 6001, 1 << 20, 42, None)
        .unwrap()
        .finish(Duration::from_secs(20))
        .unwrap();
    let r2 = Transfer::start(&a, &b, to, 6002, 1 << 20, 42, None)
        .unwrap()
        .finish(Duration::from_secs(20))
        .unwrap();
    assert_eq!(r1.sha256, r2.sha256);
    // The harness must be able to notice a broken path: with the only link
    // down, a transfer fails (within its deadline) instead of hanging.
    a.set_link(&veth(Side::A, 0), false).unwrap();
    let t = Transfer::start(&a, &b, to, 6003, 1 << 20, 1, None);
    let failed = match t {
        Err(_) => true,
        Ok(t) => t.finish(Duration::from_secs(8)).is_err(),
    };
    assert!(failed, "a transfer over a downed link succeeded");
}

#[test]
fn namespaces_are_removed_on_drop_and_on_panic() {
    let name = {
        let ns = Netns::new("x").unwrap();
        ns.name().to_owned()
    };
    assert!(!run("ip", &["netns", "list"]).unwrap().contains(&name));

    let r = std::thread::spawn(|| {
        let ns = Netns::new("y").unwrap();
        let name = ns.name().to_owned();
        std::fs::write(std::env::temp_dir().join(format!("{name}.marker")), &name).unwrap();
        panic!("{name}");
    })
    .join();
    let msg = r.unwrap_err();
    let name = msg.downcast_ref::<String>().unwrap().clone();
    std::fs::remove_file(std::env::temp_dir().join(format!("{name}.marker"))).unwrap();
    assert!(
        !run("ip", &["netns", "list"]).unwrap().contains(&name),
        "{name} survived a panic"
    );
}

#[test]
fn check_shares_accepts_and_rejects() {
    check_shares("t", &[1000, 500, 500], &[100, 50, 50], 0.10).unwrap();
    check_shares("t", &[1080, 460, 460], &[100, 50, 50], 0.10).unwrap();
    assert!(check_shares("t", &[1200, 400, 400], &[100, 50, 50], 0.10).is_err());
    assert!(
        check_shares("t", &[1000, 0], &[100, 0], 0.10).is_err(),
        "a path with no traffic must fail"
    );
    assert!(check_shares("t", &[0, 0], &[1, 1], 0.10).is_err());
    // Few packets: two off is within the slack, three is not.
    check_shares("t", &[15, 13, 12], &[1, 1, 1], 0.10).unwrap();
    assert!(check_shares("t", &[16, 12, 12], &[1, 1, 1], 0.10).is_err());
}

#[test]
fn configs_mirror_each_other() {
    let spec = BedSpec::with_paths(vec![
        PathSpec::new(Family::V4).weights(3, 1),
        PathSpec::new(Family::V6).weights(1, 2),
    ])
    .inner(&[Family::V6]);
    let a = spec.config(Side::A, std::path::Path::new("/tmp/a.sock"));
    let b = spec.config(Side::B, std::path::Path::new("/tmp/b.sock"));
    for needle in [
        "control = \"/tmp/a.sock\"",
        "ipv6 = \"fd00:77::1/64\"",
        "peer_ipv6 = \"fd00:77::2\"",
        "name = \"b\"",
        "local = \"10.77.0.1\"\nremote = \"10.77.0.2\"\nweight_out = 3\nweight_in = 1",
        "local = \"fd77:1::1\"\nremote = \"fd77:1::2\"\nweight_out = 1\nweight_in = 2",
        "keepalive = \"300ms\"\ndead_timer = \"1000ms\"",
    ] {
        assert!(a.contains(needle), "A config lacks {needle:?}:\n{a}");
    }
    assert!(!a.contains("ipv4"), "inner IPv4 not asked for:\n{a}");
    for needle in [
        "name = \"a\"",
        "local = \"10.77.0.2\"\nremote = \"10.77.0.1\"\nweight_out = 1\nweight_in = 3",
        "local = \"fd77:1::2\"\nremote = \"fd77:1::1\"\nweight_out = 2\nweight_in = 1",
    ] {
        assert!(b.contains(needle), "B config lacks {needle:?}:\n{b}");
    }
}

#[test]
fn status_parsing_is_generous() {
    let v: serde_json::Value = serde_json::from_str(
        r#"{"connections":[{"name":"b","extra":1,"drops":{"malformed":2,"auth":0,"replay":1,"unknown_connection":0,"bad_version":3,"too_short":4,"new_kind":5},
        "paths":[{"name":"p0","state":"up","local":"10.0.0.1:65022","remote":"10.0.0.2:65022","weight_out":100,"weight_in":100,
        "rtt_ms":0.2,"loss_pct":0.0,"tx_packets":10,"rx_packets":9,"tx_bytes":1000,"rx_bytes":900,"tx_data_packets":7,"rx_data_packets":6,"new":"x"},
        {"name":"p1","state":"probing","tx_packets":3,"rx_packets":0,"tx_bytes":30,"rx_bytes":0}]}]}"#,
    )
    .unwrap();
    let c = ConnSnap::from_status(&v, "b").unwrap();
    assert_eq!(c.drops, 15);
    assert_eq!(c.path("p0").unwrap().tx_data(), 7);
    assert_eq!(
        c.path("p1").unwrap().tx_data(),
        3,
        "falls back to tx_packets"
    );
    assert_eq!(c.path("p1").unwrap().state, "probing");
    assert!(c.path("p2").is_err());
    assert!(ConnSnap::from_status(&v, "a").is_err());
}

#[test]
fn strip_ansi_removes_colour_codes() {
    assert_eq!(
        strip_ansi("\x1b[2m2026\x1b[0m \x1b[32m INFO\x1b[0m path=\x1b[3mp0\x1b[0m"),
        "2026  INFO path=p0"
    );
}
