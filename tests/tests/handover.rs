//! Paths added and removed at run time, on one side only, with real
//! daemons: the peer learns of every change through control messages.
//!
//! - vertical handover by hand (`mpt path add`, wait for it to be up,
//!   `mpt path remove`): a ping at 100 packets/s through the tunnel loses
//!   nothing and a TCP transfer running across both changes stays intact;
//! - a reload that adds a path makes it carry traffic; one that drops it
//!   from the file removes it on both sides.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mpt_e2e::*;
use serde_json::Value;

fn mpt_bin() -> PathBuf {
    let p = mptd_bin().expect("mptd").with_file_name("mpt");
    assert!(
        p.is_file(),
        "mpt not found at {}: build it first: cargo build --release --bins",
        p.display()
    );
    p
}

/// Runs `mpt --socket SOCK ARGS`; returns (exit code, stdout, stderr).
fn mpt(socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(mpt_bin())
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .expect("run mpt");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn socket(bed: &TestBed, side: Side) -> PathBuf {
    bed.dir().join(format!("{}.sock", side.letter()))
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

/// `ping` from `from`'s namespace to the other side's inner IPv4 address:
/// `n` echo requests 10 ms apart. Returns (transmitted, received).
fn start_ping(bed: &TestBed, from: Side, n: u32) -> std::process::Child {
    let to = inner_addr(Family::V4, from.other()).to_string();
    Command::new("ip")
        .args(["netns", "exec", bed.ns(from).name(), "ping", "-n", "-q"])
        .args(["-i", "0.01", "-W", "2", "-c", &n.to_string(), &to])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ping (iputils-ping installed?)")
}

fn ping_result(child: std::process::Child) -> (u64, u64, String) {
    let out = child.wait_with_output().expect("ping output");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // "600 packets transmitted, 600 received, 0% packet loss, time 6000ms"
    let line = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary in: {text}"));
    let num = |word: &str| -> u64 {
        let parts: Vec<&str> = line.split([',', ' ']).filter(|s| !s.is_empty()).collect();
        let i = parts
            .iter()
            .position(|w| *w == word)
            .unwrap_or_else(|| panic!("no {word} in {line}"));
        parts[i - 1].parse().expect("count")
    };
    (num("packets"), num("received"), text)
}

#[test]
fn path_add_then_remove_hands_over_without_losing_a_ping() {
    let spec = BedSpec::uniform(1, Family::V4).inner(&[Family::V4]);
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
    let ping = start_ping(&bed, Side::A, 800);
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
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn reload_adds_a_path_that_carries_traffic_and_removes_it_again() {
    let spec = BedSpec::uniform(1, Family::V4).inner(&[Family::V4]);
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
