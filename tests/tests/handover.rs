//! Paths added and removed at run time, on one side only, with real
//! daemons: the peer learns of every change through control messages.
//!
//! - vertical handover by hand (`mpt path add`, wait for it to be up,
//!   `mpt path remove`): a ping at 100 packets/s through the tunnel loses
//!   nothing and a TCP transfer running across both changes stays intact;
//! - a reload that adds a path makes it carry traffic; one that drops it
//!   from the file removes it on both sides.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpt_e2e::*;
use serde_json::Value;

/// Runs `mpt --socket SOCK ARGS`; returns (exit code, stdout, stderr).
fn mpt(socket: &Path, args: &[&str]) -> (i32, String, String) {
    mpt_ctl(socket, args).expect("run mpt")
}

/// One IPv4 path, the same key on both sides (path changes are told to
/// the peer only on encrypted connections), and each side lets its peer
/// open paths on the addresses of veth pair 1, which the tests add later.
fn keyed_spec() -> BedSpec {
    BedSpec::keyed(1).allow_peer_paths(&["10.77.1.0/24"])
}

fn socket(bed: &TestBed, side: Side) -> PathBuf {
    bed.control_socket(side)
}

/// The status entry of path `name` on `side`, if it has one.
fn path_status(bed: &TestBed, side: Side, name: &str) -> Option<Value> {
    let snap = bed.snap(side).expect("status");
    snap.paths
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.raw.clone())
}

fn wait_path_up_both(bed: &mut TestBed, name: &str, timeout: Duration) {
    let r = wait_until(
        &format!("path {name} up on both sides"),
        timeout,
        POLL,
        || {
            bed.check_alive()?;
            let up = |side| path_status(bed, side, name).is_some_and(|p| p["state"] == "up");
            Ok((up(Side::A) && up(Side::B)).then_some(()))
        },
    );
    if let Err(e) = r {
        panic!(
            "{e:#}\nA: {:?}\nB: {:?}",
            path_status(bed, Side::A, name),
            path_status(bed, Side::B, name)
        );
    }
}

fn wait_path_gone_both(bed: &mut TestBed, name: &str, timeout: Duration) {
    wait_until(
        &format!("path {name} gone on both sides"),
        timeout,
        POLL,
        || {
            bed.check_alive()?;
            let gone = |side| path_status(bed, side, name).is_none();
            Ok((gone(Side::A) && gone(Side::B)).then_some(()))
        },
    )
    .expect("path removed on both sides");
}

fn count(p: &Value, field: &str) -> u64 {
    p[field].as_u64().unwrap_or(0)
}

#[test]
fn path_add_then_remove_hands_over_without_losing_a_ping() {
    let spec = keyed_spec();
    let mut bed = TestBed::new(spec).expect("test bed");
    // The new uplink: a second veth pair that no config mentions.
    add_veth_pair(&bed.a, &bed.b, 1).expect("veth pair 1");
    let sock = socket(&bed, Side::A);
    let conn = conn_name(Side::A);
    let (old, new) = (path_name(0), path_name(1));
    let local = outer_addr(1, Family::V4, Side::A).to_string();
    let remote = outer_addr(1, Family::V4, Side::B).to_string();

    // 800 pings at 100/s (8 s) and a TCP transfer paced over ~7 s run
    // across both changes.
    let ping = start_ping(&bed, Side::A, "0.01", 800);
    let transfer = bed
        .start_transfer(Side::A, Family::V4, 28 << 20, Some(4 << 20))
        .expect("start transfer");
    std::thread::sleep(Duration::from_millis(700));

    let t_add = Instant::now();
    let (code, out, err) = mpt(
        &sock,
        &[
            "path", "add", conn, &new, "--local", &local, "--remote", &remote,
        ],
    );
    assert_eq!(code, 0, "path add failed: {err}");
    assert!(out.contains("peer: confirmed"), "{out}");
    eprintln!("path add confirmed by the peer in {:?}", t_add.elapsed());
    wait_path_up_both(&mut bed, &new, Duration::from_secs(5));
    eprintln!(
        "new path up on both sides {:?} after the add",
        t_add.elapsed()
    );
    // B learnt the path from A: same name, its end on B's address.
    let b_view = path_status(&bed, Side::B, &new).expect("B has the new path");
    assert_eq!(b_view["local"], format!("{remote}:{DATA_PORT}"), "{b_view}");
    std::thread::sleep(Duration::from_millis(800));
    let a_new = path_status(&bed, Side::A, &new).expect("A's new path");
    assert!(
        count(&a_new, "tx_data_packets") > 0,
        "the new path carries data: {a_new}"
    );

    let (code, out, err) = mpt(&sock, &["path", "remove", conn, &old]);
    assert_eq!(code, 0, "path remove failed: {err}");
    assert!(out.contains("peer: confirmed"), "{out}");
    wait_path_gone_both(&mut bed, &old, Duration::from_secs(3));
    // Nothing is sent on the old link any more (after the drain time).
    std::thread::sleep(Duration::from_millis(2500));
    let before = bed.veth_stats(Side::A, 0).expect("veth 0");
    let before_b = bed.veth_stats(Side::B, 0).expect("veth 0");
    std::thread::sleep(Duration::from_secs(1));
    let after = bed.veth_stats(Side::A, 0).expect("veth 0");
    let after_b = bed.veth_stats(Side::B, 0).expect("veth 0");
    assert!(
        after.tx_bytes - before.tx_bytes < 1500 && after_b.tx_bytes - before_b.tx_bytes < 1500,
        "the removed path still carries traffic: A {} B {} bytes in 1 s",
        after.tx_bytes - before.tx_bytes,
        after_b.tx_bytes - before_b.tx_bytes
    );

    let report = transfer
        .finish(Duration::from_secs(60))
        .expect("TCP transfer intact across the handover");
    eprintln!(
        "transfer: {} bytes, {:.1} Mbit/s",
        report.bytes,
        report.mbit_per_s()
    );
    let (sent, received, text) = ping_result(ping);
    assert_eq!(sent, 800, "{text}");
    assert_eq!(received, sent, "pings lost over the handover: {text}");
    eprintln!(
        "ping: {}",
        text.lines()
            .filter(|l| l.contains("packets") || l.starts_with("rtt"))
            .collect::<Vec<_>>()
            .join(" / ")
    );

    // The only usable path is not removed without --force.
    let (code, _, err) = mpt(&sock, &["path", "remove", conn, &new]);
    assert_eq!(code, 1, "removing the last path must be refused");
    assert!(err.contains("--force"), "{err}");
    assert!(path_status(&bed, Side::A, &new).is_some());
    bed.transfer(Side::A, Family::V4, 2 << 20)
        .expect("traffic after the refused removal");

    // A path the peer cannot serve (it has neither the address nor a
    // route towards ours) is refused and taken out again.
    // (Both ends of this veth pair stay in A.)
    bed.a
        .ip(&["link", "add", "x0", "type", "veth", "peer", "name", "x1"])
        .expect("veth inside A");
    bed.a
        .ip(&["addr", "add", "10.88.0.1/24", "dev", "x0"])
        .expect("address on x0");
    bed.a.ip(&["link", "set", "x0", "up"]).expect("x0 up");
    bed.a.ip(&["link", "set", "x1", "up"]).expect("x1 up");
    let (code, _, err) = mpt(
        &sock,
        &[
            "path",
            "add",
            conn,
            "bogus",
            "--local",
            "10.88.0.1",
            "--remote",
            "10.88.0.2",
        ],
    );
    assert_eq!(code, 1, "a path the peer cannot bind must fail");
    assert!(err.contains("refused"), "{err}");
    assert!(path_status(&bed, Side::A, "bogus").is_none());
    assert!(path_status(&bed, Side::B, "bogus").is_none());

    // Back to the first uplink, on the same addresses: its old sockets are
    // gone (idle workers let go of them too), so the binds succeed.
    let local0 = outer_addr(0, Family::V4, Side::A).to_string();
    let remote0 = outer_addr(0, Family::V4, Side::B).to_string();
    let (code, out, err) = mpt(
        &sock,
        &[
            "path", "add", conn, &old, "--local", &local0, "--remote", &remote0,
        ],
    );
    assert_eq!(code, 0, "re-adding {old} failed: {err}");
    assert!(out.contains("peer: confirmed"), "{out}");
    wait_path_up_both(&mut bed, &old, Duration::from_secs(5));
    // Remove the other one and take it back at once, while it drains: the
    // draining socket is reclaimed on both sides.
    let (code, _, err) = mpt(&sock, &["path", "remove", conn, &new]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = mpt(
        &sock,
        &[
            "path", "add", conn, &new, "--local", &local, "--remote", &remote,
        ],
    );
    assert_eq!(code, 0, "re-adding {new} during its drain failed: {err}");
    assert!(out.contains("peer: confirmed"), "{out}");
    wait_path_up_both(&mut bed, &new, Duration::from_secs(5));
    bed.transfer(Side::A, Family::V4, 8 << 20)
        .expect("transfer after handing back");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn reload_adds_a_path_that_carries_traffic_and_removes_it_again() {
    let spec = keyed_spec();
    let mut bed = TestBed::new(spec).expect("test bed");
    add_veth_pair(&bed.a, &bed.b, 1).expect("veth pair 1");
    let sock = socket(&bed, Side::A);
    let cfg = bed.config_path(Side::A);
    let original = std::fs::read_to_string(&cfg).expect("config");
    let new = path_name(1);
    let with_path = format!(
        "{original}\n[[connection.path]]\nname = \"{new}\"\nlocal = \"{}\"\nremote = \"{}\"\nweight_out = 100\nweight_in = 100\n",
        outer_addr(1, Family::V4, Side::A),
        outer_addr(1, Family::V4, Side::B)
    );
    std::fs::write(&cfg, &with_path).expect("write config");
    let (code, out, err) = mpt(&sock, &["reload"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("path {new}: added")), "{out}");
    wait_path_up_both(&mut bed, &new, Duration::from_secs(5));
    // B's file does not list the path (B learnt it from A): B's own reload
    // leaves a path added at run time alone.
    let (code, out, err) = mpt(&socket(&bed, Side::B), &["reload"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("removed"), "{out}");
    assert!(
        path_status(&bed, Side::B, &new).is_some(),
        "B's reload removed {new}"
    );

    let before_a = path_status(&bed, Side::A, &new).expect("A");
    let before_b = path_status(&bed, Side::B, &new).expect("B");
    bed.transfer(Side::A, Family::V4, 16 << 20)
        .expect("transfer over both paths");
    let after_a = path_status(&bed, Side::A, &new).expect("A");
    let after_b = path_status(&bed, Side::B, &new).expect("B");
    let sent = count(&after_a, "tx_data_packets") - count(&before_a, "tx_data_packets");
    let got = count(&after_b, "rx_data_packets") - count(&before_b, "rx_data_packets");
    // Equal weights: about half of ~12,000 segments.
    assert!(sent > 2000, "the added path carried {sent} data packets");
    assert!(got > 2000, "B received {got} data packets on it");

    // Back to the original file: the path goes on both sides.
    std::fs::write(&cfg, &original).expect("write config");
    let (code, out, err) = mpt(&sock, &["reload"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("path {new}: removed")), "{out}");
    wait_path_gone_both(&mut bed, &new, Duration::from_secs(3));
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("transfer after the removal");
    bed.shutdown().expect("clean shutdown");
}

/// A path-add control message as docs/PROTOCOL.md draws it (built here
/// byte by byte, independently of mpt-proto): header, then the 94-byte body.
fn forged_path_add(seq: u64, path_id: u16, name: &str, local: [u8; 4], remote: [u8; 4]) -> Vec<u8> {
    let mut d = vec![0u8; 24 + 94];
    d[0] = 0x14; // version 1, type 4 (control)
    d[1] = 0; // flags: not sealed
    d[2..4].copy_from_slice(&0u16.to_be_bytes()); // travels on path 0
    d[4..8].copy_from_slice(&1u32.to_be_bytes()); // connection id 1
    d[8..16].copy_from_slice(&seq.to_be_bytes());
    d[16..20].copy_from_slice(&(seq as u32).to_be_bytes());
    let b = &mut d[24..];
    b[0] = 1; // path add
    b[2..4].copy_from_slice(&path_id.to_be_bytes());
    b[4..12].copy_from_slice(&(u64::MAX - seq).to_be_bytes()); // message id
    b[13] = name.len() as u8;
    b[14..14 + name.len()].copy_from_slice(name.as_bytes());
    b[46] = 4;
    b[47..51].copy_from_slice(&local);
    b[63..65].copy_from_slice(&DATA_PORT.to_be_bytes());
    b[65] = 4;
    b[66..70].copy_from_slice(&remote);
    b[82..84].copy_from_slice(&DATA_PORT.to_be_bytes());
    b[84..88].copy_from_slice(&1u32.to_be_bytes());
    b[88..90].copy_from_slice(&1u16.to_be_bytes());
    b[90..94].copy_from_slice(&1u32.to_be_bytes());
    d
}

#[test]
fn on_an_encrypted_connection_only_sealed_control_messages_change_paths() {
    let spec = keyed_spec();
    let mut bed = TestBed::new(spec).expect("test bed");
    add_veth_pair(&bed.a, &bed.b, 1).expect("veth pair 1");
    let b_to = SocketAddr::new(outer_addr(0, Family::V4, Side::B), DATA_PORT);
    let from = outer_addr(0, Family::V4, Side::A);
    let auth_before = bed.snap(Side::B).expect("status").raw["drops"]["auth"]
        .as_u64()
        .expect("auth drops");

    // Forged (unsealed) adds, as an on-path attacker could send them.
    let forged: Vec<Vec<u8>> = (0..50)
        .map(|i| forged_path_add(1_000_000 + i, 1, "evil", [10, 77, 1, 1], [10, 77, 1, 2]))
        .collect();
    let sent = send_datagrams(&bed.a, from, b_to, forged).expect("send forged");
    assert_eq!(sent, 50);
    wait_until("auth drops counted", Duration::from_secs(3), POLL, || {
        let auth = bed.snap(Side::B)?.raw["drops"]["auth"]
            .as_u64()
            .unwrap_or(0);
        Ok((auth >= auth_before + 50).then_some(()))
    })
    .expect("forged control messages dropped as unauthenticated");
    assert!(
        path_status(&bed, Side::B, "evil").is_none(),
        "a forged add was obeyed"
    );

    // The sealed add of the real peer works.
    let sock = socket(&bed, Side::A);
    let (code, out, err) = mpt(
        &sock,
        &[
            "path",
            "add",
            conn_name(Side::A),
            &path_name(1),
            "--local",
            &outer_addr(1, Family::V4, Side::A).to_string(),
            "--remote",
            &outer_addr(1, Family::V4, Side::B).to_string(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("peer: confirmed"), "{out}");
    wait_path_up_both(&mut bed, &path_name(1), Duration::from_secs(5));
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("transfer over the encrypted paths");
    bed.shutdown().expect("clean shutdown");
}

/// Without a key nothing tells the peer from an impostor, so the same
/// documented path add is refused even when it comes from the peer's own
/// address and port (A's daemon is stopped so the test can use them), and
/// nothing from any other address is looked at.
#[test]
fn without_a_key_a_path_add_is_never_obeyed() {
    let spec = BedSpec::uniform(1, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    add_veth_pair(&bed.a, &bed.b, 1).expect("veth pair 1");
    let b_to = SocketAddr::new(outer_addr(0, Family::V4, Side::B), DATA_PORT);
    let from = SocketAddr::new(outer_addr(0, Family::V4, Side::A), DATA_PORT);
    let drops = |bed: &TestBed, reason: &str| {
        bed.snap(Side::B).expect("status").raw["drops"][reason]
            .as_u64()
            .unwrap_or(0)
    };
    bed.stop_daemon(Side::A).expect("stop A");
    let add = forged_path_add(1_000_000, 1, "unkeyed", [10, 77, 1, 1], [10, 77, 1, 2]);
    bed.a
        .run_in(
            "send from the peer's port",
            Duration::from_secs(5),
            move || {
                let sock = std::net::UdpSocket::bind(from)?;
                sock.send_to(&add, b_to)?;
                Ok(())
            },
        )
        .expect("send the add from A's address and port");
    wait_until("B counts the refusal", Duration::from_secs(3), POLL, || {
        Ok((drops(&bed, "unauthenticated_control") >= 1).then_some(()))
    })
    .expect("the cleartext control message refused and counted");
    // From another port of the peer's address: not even looked at.
    let wrong_before = drops(&bed, "wrong_source");
    let add = forged_path_add(1_000_001, 1, "unkeyed", [10, 77, 1, 1], [10, 77, 1, 2]);
    send_datagrams(&bed.a, from.ip(), b_to, vec![add]).expect("send");
    wait_until(
        "B counts the wrong source",
        Duration::from_secs(3),
        POLL,
        || Ok((drops(&bed, "wrong_source") > wrong_before).then_some(())),
    )
    .expect("a datagram from another port dropped as wrong_source");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        path_status(&bed, Side::B, "unkeyed").is_none(),
        "a cleartext path add was obeyed"
    );
    bed.restart_daemon(Side::A, None).expect("restart A");
    bed.wait_all_up(Duration::from_secs(5))
        .expect("paths up again");
    // `mpt path add` on a cleartext connection: only with --remote (nothing
    // is learnt), and it says the peer was not told.
    let sock = socket(&bed, Side::A);
    let local = outer_addr(1, Family::V4, Side::A).to_string();
    let remote = outer_addr(1, Family::V4, Side::B).to_string();
    let conn = conn_name(Side::A);
    let (code, _, err) = mpt(&sock, &["path", "add", conn, "p1", "--local", &local]);
    assert_eq!(code, 1, "a cleartext path without --remote must fail");
    assert!(err.contains("--remote"), "{err}");
    let (code, out, err) = mpt(
        &sock,
        &[
            "path", "add", conn, "p1", "--local", &local, "--remote", &remote,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("not told"), "{out}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(path_status(&bed, Side::B, "p1").is_none(), "B was told");
    bed.shutdown().expect("clean shutdown");
}

/// `mpt path add` without `--remote`: the peer picks its end by routing
/// towards our address, and we learn its address from its probes.
#[test]
fn a_path_added_without_a_remote_finds_its_peer() {
    let spec = keyed_spec();
    let mut bed = TestBed::new(spec).expect("test bed");
    add_veth_pair(&bed.a, &bed.b, 1).expect("veth pair 1");
    let new = path_name(1);
    let local = outer_addr(1, Family::V4, Side::A).to_string();
    let (code, out, err) = mpt(
        &socket(&bed, Side::A),
        &["path", "add", conn_name(Side::A), &new, "--local", &local],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("peer: confirmed"), "{out}");
    wait_path_up_both(&mut bed, &new, Duration::from_secs(5));
    let end_b = format!("{}:{DATA_PORT}", outer_addr(1, Family::V4, Side::B));
    let a = path_status(&bed, Side::A, &new).expect("A");
    let b = path_status(&bed, Side::B, &new).expect("B");
    assert_eq!(b["local"], end_b, "B's end chosen by routing: {b}");
    assert_eq!(a["remote"], end_b, "A learnt B's end: {a}");
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("transfer over both paths");
    bed.shutdown().expect("clean shutdown");
}
