//! What one sender must not be able to do to a tunnel, and what the daemon
//! must do when the ground goes from under it (issue 11), each against
//! real daemons in namespaces:
//!
//! - a datagram numbered 2^62 neither hangs the connection nor its control
//!   socket, and the tunnel carries on after it;
//! - a cleartext path takes datagrams only from its configured remote
//!   address and port (spoofed data from elsewhere never reaches the tun);
//! - inner packets whose source address is not the peer's are refused;
//! - a peer cannot open paths on local addresses the config does not
//!   allow, nor remove the last path; a reload applies `allow_peer_paths`
//!   and names each setting it did not apply;
//! - a deleted tun device ends the daemon at once with status 1;
//! - logs hold no terminal colour codes, and junk from the network adds no
//!   log lines.
//!
//! Handshake abuse (Init floods, reflection, replay after a restart) is in
//! tests/tests/handshake.rs.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use mpt_e2e::*;

/// Header layout (crates/mpt-proto/src/wire/mod.rs, docs/PROTOCOL.md):
/// byte 0 version << 4 | type, byte 1 flags, 2..4 path id, 4..8 connection
/// id, 8..16 connection sequence, 16..20 path sequence, 20..24 timestamp.
fn header(msg_type: u8, path_id: u16, seq: u64) -> Vec<u8> {
    let mut h = vec![0u8; 24];
    h[0] = 0x10 | msg_type;
    h[2..4].copy_from_slice(&path_id.to_be_bytes());
    h[4..8].copy_from_slice(&1u32.to_be_bytes());
    h[8..16].copy_from_slice(&seq.to_be_bytes());
    h[16..20].copy_from_slice(&(seq as u32).to_be_bytes());
    h
}

/// A data message numbered `seq` carrying a 28-byte IPv4/UDP packet from
/// `src` to `dst` (port 9, discard).
fn data_message(seq: u64, src: IpAddr, dst: IpAddr) -> Vec<u8> {
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (src, dst) else {
        panic!("IPv4 only");
    };
    let mut d = header(1, 0, seq);
    let mut ip = vec![0u8; 28];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&28u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = ip_checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip[20..22].copy_from_slice(&4000u16.to_be_bytes());
    ip[22..24].copy_from_slice(&9u16.to_be_bytes());
    ip[24..26].copy_from_slice(&8u16.to_be_bytes());
    d.extend_from_slice(&ip);
    d
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Sends `datagrams` from exactly `from` (address and port) inside `ns`.
fn send_from(ns: &Netns, from: SocketAddr, to: SocketAddr, datagrams: Vec<Vec<u8>>) {
    ns.run_in(
        "send from a fixed port",
        Duration::from_secs(5),
        move || {
            let sock = UdpSocket::bind(from)?;
            for d in &datagrams {
                sock.send_to(d, to)?;
            }
            Ok(())
        },
    )
    .expect("send");
}

fn drops(bed: &TestBed, side: Side, reason: &str) -> u64 {
    bed.snap(side)
        .expect("status")
        .drop_reason(reason)
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Packets the daemon wrote into `side`'s tun (a tun device counts what
/// its file descriptor writes as received).
fn tun_rx_packets(bed: &TestBed, side: Side) -> u64 {
    bed.ns(side).link_stats(TUN).expect("tun stats").rx_packets
}

/// The status request must answer quickly: a hung receive worker holds the
/// connection's lock, and the status would wait on it.
fn status_answers_within(bed: &TestBed, side: Side, limit: Duration) {
    let t = Instant::now();
    bed.snap(side)
        .unwrap_or_else(|e| panic!("status of {side:?} did not answer: {e:#}"));
    assert!(
        t.elapsed() < limit,
        "status of {side:?} took {:?}",
        t.elapsed()
    );
}

#[test]
fn a_datagram_numbered_2_pow_62_does_not_hang_the_connection() {
    let spec = BedSpec::uniform(1, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    bed.transfer(Side::A, Family::V4, 2 << 20)
        .expect("transfer before");
    // A stops, so the test can send from A's own address and port: the
    // only source a cleartext path accepts.
    bed.stop_daemon(Side::A).expect("stop A");
    let from = SocketAddr::new(outer_addr(0, Family::V4, Side::A), DATA_PORT);
    let to = SocketAddr::new(outer_addr(0, Family::V4, Side::B), DATA_PORT);
    let far = 1u64 << 62;
    let (a_in, b_in) = (
        inner_addr(Family::V4, Side::A),
        inner_addr(Family::V4, Side::B),
    );
    let t = Instant::now();
    // A probe (any body: it only marks its number as used), then data far
    // ahead of that, then data near the top of the range.
    send_from(
        &bed.a,
        from,
        to,
        vec![
            [header(2, 0, far), vec![0u8; 16]].concat(),
            data_message(far + 1000, a_in, b_in),
            data_message(u64::MAX - 10, a_in, b_in),
        ],
    );
    std::thread::sleep(Duration::from_millis(200));
    status_answers_within(&bed, Side::B, Duration::from_secs(2));
    bed.daemon_mut(Side::B).check_alive().expect("B alive");
    let reorder = bed.snap(Side::B).expect("status").raw["reorder"].clone();
    eprintln!(
        "B answered {:?} after the jump; resequencer: {reorder}",
        t.elapsed()
    );
    // The datagrams were taken (this is what could hang), not dropped.
    let skipped = reorder["gaps_skipped"].as_u64().expect("gaps_skipped");
    assert!(skipped >= far - 8192, "the jump was not taken: {reorder}");
    // The restarted peer counts from 1 again: B resets its window and the
    // tunnel works as before.
    bed.restart_daemon(Side::A, None).expect("restart A");
    bed.wait_all_up(Duration::from_secs(5)).expect("paths up");
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("transfer after the jump");
    bed.transfer(Side::B, Family::V4, 2 << 20)
        .expect("reverse transfer after the jump");
    // And SIGTERM still completes (it would not with a hung worker).
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn a_cleartext_path_takes_nothing_from_anywhere_but_its_configured_remote() {
    let spec = BedSpec::uniform(1, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    // A third host on A's side of the link.
    let spoofer: IpAddr = "10.77.0.9".parse().expect("ip");
    bed.a
        .ip(&["addr", "add", "10.77.0.9/24", "dev", &veth(Side::A, 0)])
        .expect("spoofer address");
    let to = SocketAddr::new(outer_addr(0, Family::V4, Side::B), DATA_PORT);
    let (a_in, b_in) = (
        inner_addr(Family::V4, Side::A),
        inner_addr(Family::V4, Side::B),
    );
    let remote_before = bed
        .snap(Side::B)
        .expect("status")
        .path("p0")
        .expect("p0")
        .raw["remote"]
        .clone();
    let wrong0 = drops(&bed, Side::B, "wrong_source");
    let tun0 = tun_rx_packets(&bed, Side::B);
    // Data and probes numbered just ahead of the tunnel's own, from the
    // right address but another port, and from another address with the
    // right port.
    let base = 1 << 20;
    let batch = |k: u64| -> Vec<Vec<u8>> {
        (0..50)
            .flat_map(|i| {
                [
                    data_message(base + k * 1000 + 2 * i, a_in, b_in),
                    [header(2, 0, base + k * 1000 + 2 * i + 1), vec![0u8; 16]].concat(),
                ]
            })
            .collect()
    };
    send_datagrams(&bed.a, outer_addr(0, Family::V4, Side::A), to, batch(0))
        .expect("from another port");
    send_from(&bed.a, SocketAddr::new(spoofer, DATA_PORT), to, batch(1));
    wait_until(
        "B counts 200 wrong sources",
        Duration::from_secs(3),
        POLL,
        || Ok((drops(&bed, Side::B, "wrong_source") >= wrong0 + 200).then_some(())),
    )
    .expect("spoofed datagrams counted as wrong_source");
    let tun_grew = tun_rx_packets(&bed, Side::B) - tun0;
    assert!(
        tun_grew < 20,
        "{tun_grew} packets reached B's tun (100 spoofed data messages were sent)"
    );
    let s = bed.snap(Side::B).expect("status");
    assert_eq!(
        s.path("p0").expect("p0").raw["remote"],
        remote_before,
        "the remote moved"
    );
    assert_eq!(s.path("p0").expect("p0").state, "up");
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("transfer after the spoofing");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn inner_packets_from_addresses_not_routed_to_the_peer_are_refused() {
    let spec = BedSpec::uniform(1, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    // A claims an address of B's tunnel subnet that B does not route to A
    // (B's `networks` is empty; only A's tunnel address is A's).
    bed.a
        .ip(&["addr", "add", "192.168.77.50/32", "dev", TUN])
        .expect("extra address on A's tun");
    let b_in = inner_addr(Family::V4, Side::B).to_string();
    let refused0 = drops(&bed, Side::B, "inner_source");
    let tun0 = tun_rx_packets(&bed, Side::B);
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", bed.a.name(), "ping", "-n", "-q"])
        .args(["-I", "192.168.77.50", "-c", "20", "-i", "0.02", "-W", "1"])
        .arg(&b_in)
        .output()
        .expect("ping (iputils-ping installed?)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let refused = drops(&bed, Side::B, "inner_source") - refused0;
    let tun_grew = tun_rx_packets(&bed, Side::B) - tun0;
    assert!(
        refused >= 20,
        "B refused {refused} of 20 pings from a foreign source: {text}"
    );
    assert!(
        tun_grew < 5,
        "{tun_grew} packets reached B's tun from a foreign source"
    );
    assert!(text.contains(" 0 received"), "{text}");
    // The peer's own address still gets through.
    bed.transfer(Side::A, Family::V4, 2 << 20)
        .expect("transfer from A's own address");
    bed.shutdown().expect("clean shutdown");
}

/// `mpt --socket SOCK ARGS`: (exit code, stdout, stderr).
fn mpt(bed: &TestBed, side: Side, args: &[&str]) -> (i32, String, String) {
    mpt_ctl(&bed.control_socket(side), args).expect("run mpt")
}

fn has_path(bed: &TestBed, side: Side, name: &str) -> bool {
    bed.snap(side)
        .expect("status")
        .paths
        .iter()
        .any(|p| p.name == name)
}

/// How many of A's path changes B refused so far (its log says each).
fn refusals(bed: &TestBed) -> usize {
    std::fs::read_to_string(&bed.daemon(Side::B).log)
        .expect("B log")
        .matches("refused the peer's path change")
        .count()
}

#[test]
fn a_peer_opens_paths_only_where_allowed_and_never_removes_the_last() {
    let spec = BedSpec::keyed(1);
    let mut bed = TestBed::new(spec).expect("test bed");
    add_veth_pair(&bed.a, &bed.b, 1).expect("veth pair 1");
    let conn = conn_name(Side::A);
    let local = outer_addr(1, Family::V4, Side::A).to_string();
    let remote = outer_addr(1, Family::V4, Side::B).to_string();
    let add = [
        "path", "add", conn, "p1", "--local", &local, "--remote", &remote,
    ];

    // B's config does not let its peer use 10.77.1.2: refused, nothing
    // bound there.
    let (code, out, err) = mpt(&bed, Side::A, &add);
    assert_eq!(code, 1, "the add must be refused: {out}");
    assert!(err.contains("refused"), "{err}");
    assert!(!has_path(&bed, Side::A, "p1") && !has_path(&bed, Side::B, "p1"));
    bed.ns(Side::B)
        .run_in("bind the refused address", Duration::from_secs(5), {
            let addr = SocketAddr::new(outer_addr(1, Family::V4, Side::B), DATA_PORT);
            move || Ok(UdpSocket::bind(addr).map(drop)?)
        })
        .expect("B opened no socket on the refused address");

    // A reload of B that allows it (and changes a setting that needs a
    // restart, which it must name).
    let cfg = bed.config_path(Side::B);
    let text = std::fs::read_to_string(&cfg).expect("B config");
    let text = text
        .replace(
            "networks = []",
            "networks = [\"10.99.0.0/16\"]\nallow_peer_paths = [\"10.77.1.0/24\"]",
        )
        .replace("mtu = 1400", "mtu = 1300");
    std::fs::write(&cfg, text).expect("write B config");
    let (code, out, err) = mpt(&bed, Side::B, &["reload"]);
    assert_eq!(code, 0, "reload: {err}");
    let said = out.clone() + &err;
    for want in [
        "networks changed (restart to apply)",
        "[tunnel] mtu changed (restart to apply)",
    ] {
        assert!(said.contains(want), "reload did not say {want:?}: {said}");
    }
    assert!(
        said.contains("allow_peer_paths = [10.77.1.0/24]"),
        "the applied change is listed: {said}"
    );

    let (code, out, err) = mpt(&bed, Side::A, &add);
    assert_eq!(code, 0, "allowed now: {err}");
    assert!(out.contains("peer: confirmed"), "{out}");
    wait_until("p1 up on both sides", Duration::from_secs(5), POLL, || {
        let up = |side| {
            bed.snap(side)
                .map(|s| s.paths.iter().any(|p| p.name == "p1" && p.state == "up"))
        };
        Ok((up(Side::A)? && up(Side::B)?).then_some(()))
    })
    .expect("p1 up");

    // The peer may move the connection: removing p0 is fine, B keeps p1.
    let (code, _, err) = mpt(&bed, Side::A, &["path", "remove", conn, "p0"]);
    assert_eq!(code, 0, "{err}");
    wait_until("p0 gone on B", Duration::from_secs(5), POLL, || {
        Ok((!has_path(&bed, Side::B, "p0")).then_some(()))
    })
    .expect("p0 removed on B");
    bed.transfer(Side::A, Family::V4, 2 << 20)
        .expect("transfer over p1");
    // But not cut it off: B refuses to remove its last path. (A, which
    // removed its own last path by force, may not hear B's answer: it has
    // no path left to hear it on.)
    let refused0 = refusals(&bed);
    let (code, out, err) = mpt(&bed, Side::A, &["path", "remove", conn, "p1", "--force"]);
    eprintln!("A's forced removal of its last path: {code} {out} {err}");
    wait_until(
        "B refuses the removal",
        Duration::from_secs(3),
        POLL,
        || Ok((refusals(&bed) > refused0).then_some(())),
    )
    .expect("B answered the removal with a refusal");
    assert!(has_path(&bed, Side::B, "p1"), "B removed its last path");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn a_deleted_tun_device_ends_the_daemon_with_status_1() {
    let spec = BedSpec::uniform(1, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    // Traffic running into B's tun when it goes.
    let t = bed
        .start_transfer(Side::A, Family::V4, 64 << 20, Some(8 << 20))
        .expect("start transfer");
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    bed.b.ip(&["link", "del", TUN]).expect("delete B's tun");
    let st = wait_until("B exits", Duration::from_secs(5), POLL, || {
        match bed.daemon_mut(Side::B).check_alive() {
            Ok(()) => Ok(None),
            Err(_) => Ok(Some(())),
        }
    });
    let took = t0.elapsed();
    let log = bed.daemon(Side::B).log_tail(20);
    st.unwrap_or_else(|e| panic!("B still runs without its tun: {e:#}\n{log}"));
    let status = bed
        .daemon_mut(Side::B)
        .stop(Duration::from_secs(1))
        .expect("exit status");
    eprintln!("B exited {took:?} after its tun was deleted: {status}");
    assert_eq!(
        status.code(),
        Some(1),
        "{status} {:?}\n{log}",
        status.signal()
    );
    assert!(log.contains("tun device"), "the log says why: {log}");
    let _ = t.finish(Duration::from_secs(5));
    bed.stop_daemon(Side::A).expect("A stops cleanly");
    bed.shutdown().expect("shutdown");
}

#[test]
fn logs_hold_no_colour_codes_and_junk_from_the_network_adds_no_lines() {
    let spec = BedSpec::keyed(1);
    let bed = TestBed::new(spec).expect("test bed");
    let log_b = bed.daemon(Side::B).log.clone();
    let lines = || -> Vec<String> {
        std::fs::read_to_string(&log_b)
            .expect("B log")
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let before = lines().len();
    let to = SocketAddr::new(outer_addr(0, Family::V4, Side::B), DATA_PORT);
    let from = outer_addr(0, Family::V4, Side::A);
    let (a_in, b_in) = (
        inner_addr(Family::V4, Side::A),
        inner_addr(Family::V4, Side::B),
    );
    // Every kind of unauthenticated datagram, repeated.
    let mut junk = Vec::new();
    for i in 0..100u64 {
        junk.push(data_message(i + 10, a_in, b_in));
        junk.push([header(2, 0, i + 5000), vec![0u8; 16]].concat());
        junk.push([header(4, 0, i + 9000), vec![1u8; 94]].concat());
        let mut sealed = data_message(i + 20000, a_in, b_in);
        sealed[1] = 0x01;
        sealed.extend_from_slice(&[0u8; 16]);
        junk.push(sealed);
        junk.push([header(5, 0, i + 30000), vec![7u8; 80]].concat());
    }
    let sent = send_datagrams(&bed.a, from, to, junk).expect("send junk");
    std::thread::sleep(Duration::from_millis(500));
    bed.snap(Side::B).expect("B alive");
    let all = lines();
    let new: Vec<&String> = all[before..]
        .iter()
        // A path flapping under a loaded CI machine is not the junk's doing.
        .filter(|l| !l.contains("path state changed"))
        .collect();
    assert!(
        new.is_empty(),
        "{sent} junk datagrams added log lines:\n{}",
        new.iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Both daemons' logs so far (start-up, paths up, session keys): plain
    // text, as journald and log files need it.
    for side in [Side::A, Side::B] {
        let path = log_b.with_file_name(format!("{}.log", side.letter()));
        let text = std::fs::read(&path).expect("log");
        assert!(!text.is_empty(), "{} is empty", path.display());
        assert!(
            !text.contains(&0x1b),
            "{} holds escape codes:\n{}",
            path.display(),
            String::from_utf8_lossy(&text[..text.len().min(400)])
        );
    }
    bed.shutdown().expect("clean shutdown");
}
