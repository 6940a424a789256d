//! The remote command port (`[daemon] cmd_port`) with real daemons: the
//! real `mpt --remote` in namespace A manages the mptd in namespace B over
//! TCP and UDP, proving it holds the connection's pre-shared key.
//!
//! Checked here:
//! - `status --json`, `path ... down|up` work over TCP and UDP, `reload` only
//!   with `cmd_port_admin = true` on the server
//!   (IPv4 and IPv6 targets: the port is dual-stack), and the changes show
//!   in B's local status;
//! - a key manages its own connection only;
//! - a wrong key, an unknown connection and a connection without a key are
//!   refused with exit code 1 and the daemon's reason;
//! - a captured request sent again (UDP and TCP) is refused as replayed;
//! - garbage lines and datagrams are refused or dropped, never answered
//!   with more bytes than they had, rate-limited, counted, and the tunnel
//!   keeps forwarding;
//! - without `cmd_port` nothing listens.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mpt_e2e::*;
use serde_json::Value;

/// The port the tests configure (MPT's traditional command port).
const PORT: u16 = 65020;

fn mpt_bin() -> PathBuf {
    mpt_e2e::mpt_bin().expect("mpt")
}

/// Runs `mpt ARGS` in namespace `ns`; returns (exit code, stdout, stderr).
fn mpt_in(ns: &Netns, args: &[String]) -> (i32, String, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name()])
        .arg(mpt_bin())
        .args(args)
        .output()
        .expect("run mpt");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// B's command port at its path-0 address of `family`.
fn target(family: Family) -> SocketAddr {
    SocketAddr::new(outer_addr(0, family, Side::B), PORT)
}

/// `--remote TARGET --remote-conn CONN --key KEY [--udp] ARGS...`
fn remote(target: SocketAddr, conn: &str, key: &Path, udp: bool, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "--remote".into(),
        target.to_string(),
        "--remote-conn".into(),
        conn.into(),
        "--key".into(),
        key.display().to_string(),
    ];
    if udp {
        v.push("--udp".into());
    }
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

/// A's key file (the same key as B's in a `shared_key` bed).
fn key_a(bed: &TestBed) -> PathBuf {
    BedSpec::key_path(Side::A, &bed.daemon(Side::A).control)
}

/// The connection on B that A's key belongs to (B names its peer `a`).
fn conn_b() -> &'static str {
    conn_name(Side::B)
}

fn transport(udp: bool) -> &'static str {
    if udp {
        "UDP"
    } else {
        "TCP"
    }
}

/// A bed whose B serves the command port; both sides share a key.
fn bed_with_port() -> TestBed {
    let spec = BedSpec::uniform(2, Family::V4)
        .inner(&[Family::V4])
        .shared_key()
        .expect("random key")
        .cmd_port(Side::B, PORT);
    TestBed::new(spec).expect("test bed")
}

/// `mpt --remote ... status --json` from A; the parsed document.
fn remote_status(bed: &TestBed, to: SocketAddr, udp: bool) -> Value {
    let key = key_a(bed);
    let (code, out, err) = mpt_in(
        bed.ns(Side::A),
        &remote(to, conn_b(), &key, udp, &["status", "--json"]),
    );
    assert_eq!(
        code,
        0,
        "remote status over {} to {to} failed: {err}",
        transport(udp)
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("status --json is not JSON ({e}): {out}"))
}

fn path_names(status: &Value) -> Vec<(String, String)> {
    status["connections"][0]["paths"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        p["name"].as_str().unwrap_or("").to_owned(),
                        p["local"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn remote_status_path_and_reload_over_tcp_and_udp() {
    let mut bed = bed_with_port();
    let local = bed.daemon(Side::B).status().expect("B's local status");
    let p1 = path_name(1);

    // status --json returns B's status document, over every transport and
    // both address families.
    for family in [Family::V4, Family::V6] {
        for udp in [false, true] {
            let st = remote_status(&bed, target(family), udp);
            assert_eq!(st["tunnel"], local["tunnel"], "{st}");
            let conns = st["connections"].as_array().expect("connections");
            assert_eq!(conns.len(), 1, "{st}");
            assert_eq!(conns[0]["name"], conn_b(), "{st}");
            assert_eq!(path_names(&st), path_names(&local), "{st}");
            assert!(
                st["cmd_port"]["accepted"].as_u64().unwrap_or(0) >= 1,
                "no cmd_port counters in {st}"
            );
        }
    }

    // path down over TCP: B's own status shows it.
    let key = key_a(&bed);
    let (code, out, err) = mpt_in(
        bed.ns(Side::A),
        &remote(
            target(Family::V4),
            conn_b(),
            &key,
            false,
            &["path", conn_b(), &p1, "down"],
        ),
    );
    assert_eq!(code, 0, "remote path down: {err}");
    assert!(out.contains("down"), "{out}");
    assert_eq!(
        bed.snap(Side::B)
            .expect("B status")
            .path(&p1)
            .expect("p1")
            .state,
        "down"
    );
    // ... and it carries none of B's data any more.
    let before = bed.tx_data(Side::B).expect("tx");
    bed.transfer(Side::B, Family::V4, 2 << 20)
        .expect("transfer with p1 down");
    let after = bed.tx_data(Side::B).expect("tx");
    assert_eq!(after[1], before[1], "p1 carried data while down");

    // Back up over UDP.
    let (code, _, err) = mpt_in(
        bed.ns(Side::A),
        &remote(
            target(Family::V4),
            conn_b(),
            &key,
            true,
            &["path", conn_b(), &p1, "up"],
        ),
    );
    assert_eq!(code, 0, "remote path up: {err}");
    bed.wait_path_state(Side::B, 1, "up", Instant::now(), Duration::from_secs(5))
        .expect("p1 up again on B");

    // Weights over UDP.
    let (code, _, err) = mpt_in(
        bed.ns(Side::A),
        &remote(
            target(Family::V4),
            conn_b(),
            &key,
            true,
            &["path", conn_b(), &path_name(0), "weight", "250"],
        ),
    );
    assert_eq!(code, 0, "remote weight: {err}");
    let p0 = bed
        .snap(Side::B)
        .expect("B")
        .path(&path_name(0))
        .expect("p0")
        .raw
        .clone();
    assert_eq!(p0["weight_out"], 250, "{p0}");

    // reload changes the whole server: refused unless the server's
    // config says `cmd_port_admin = true`.
    let (code, _, err) = mpt_in(
        bed.ns(Side::A),
        &remote(target(Family::V4), conn_b(), &key, false, &["reload"]),
    );
    assert_ne!(code, 0, "remote reload without cmd_port_admin was obeyed");
    assert!(err.contains("cmd_port_admin"), "{err}");
    let admin = bed
        .spec
        .config(Side::B, &bed.control_socket(Side::B))
        .replace(
            &format!("cmd_port = {PORT}\n"),
            &format!("cmd_port = {PORT}\ncmd_port_admin = true\n"),
        );
    assert!(admin.contains("cmd_port_admin"), "{admin}");
    bed.stop_daemon(Side::B).expect("stop B");
    bed.restart_daemon(Side::B, Some(&admin))
        .expect("B with cmd_port_admin");
    bed.wait_all_up(Duration::from_secs(10)).expect("paths up");

    // With it, reload over both transports.
    for udp in [false, true] {
        let (code, out, err) = mpt_in(
            bed.ns(Side::A),
            &remote(target(Family::V4), conn_b(), &key, udp, &["reload"]),
        );
        assert_eq!(code, 0, "remote reload over {}: {err}", transport(udp));
        assert!(out.contains("reloaded"), "{out}");
    }

    // A key manages its own connection only.
    let (code, _, err) = mpt_in(
        bed.ns(Side::A),
        &remote(
            target(Family::V4),
            conn_b(),
            &key,
            false,
            &["path", "other", &p1, "down"],
        ),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("manages connection"), "{err}");

    // An unknown path is the daemon's error, exit code 1.
    let (code, _, err) = mpt_in(
        bed.ns(Side::A),
        &remote(
            target(Family::V4),
            conn_b(),
            &key,
            true,
            &["path", conn_b(), "nope", "down"],
        ),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nope"), "{err}");
    bed.shutdown()
        .expect("clean shutdown with the command port on");
}

/// Sends `data` to `to` over UDP from namespace A and returns the answer
/// (`None` if none came within `wait`).
fn udp_exchange(bed: &TestBed, to: SocketAddr, data: Vec<u8>, wait: Duration) -> Option<Vec<u8>> {
    bed.ns(Side::A)
        .run_in("udp exchange", wait + Duration::from_secs(5), move || {
            let s = UdpSocket::bind(SocketAddr::new(outer_addr(0, Family::V4, Side::A), 0))?;
            s.connect(to)?;
            s.send(&data)?;
            let mut buf = vec![0u8; 65536];
            let got = retry_interrupted_within(wait, |left| {
                s.set_read_timeout(Some(left))?;
                s.recv(&mut buf)
            });
            Ok(got.ok().map(|n| buf[..n].to_vec()))
        })
        .expect("udp exchange")
}

/// Sends `data` (a newline is added) over a new TCP connection from A and
/// returns the answer line and whether the daemon then closed.
fn tcp_exchange(bed: &TestBed, to: SocketAddr, data: Vec<u8>) -> (String, bool) {
    bed.ns(Side::A)
        .run_in("tcp exchange", Duration::from_secs(15), move || {
            let s = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            (&s).write_all(&data)?;
            (&s).write_all(b"\n")?;
            let mut r = BufReader::new(&s);
            let mut line = String::new();
            r.read_line(&mut line)?;
            // After a refusal of an unauthenticated request the daemon
            // closes; after an authenticated one it waits for more.
            let mut rest = [0u8; 1];
            let read = retry_interrupted_within(Duration::from_millis(500), |left| {
                s.set_read_timeout(Some(left))?;
                r.read(&mut rest)
            });
            let closed = matches!(read, Ok(0));
            Ok((line, closed))
        })
        .expect("tcp exchange")
}

/// Runs the real `mpt --udp status` in A against a UDP socket of the
/// test's, and returns the first request datagram it sends.
fn capture_udp_request(bed: &TestBed) -> Vec<u8> {
    let key = key_a(bed);
    let ns = bed.ns(Side::A).name().to_owned();
    let mpt = mpt_bin();
    bed.ns(Side::A)
        .run_in("capture a request", Duration::from_secs(20), move || {
            let s = UdpSocket::bind("127.0.0.1:0")?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            let trap = s.local_addr()?;
            let mut child = Command::new("ip")
                .args(["netns", "exec", &ns])
                .arg(&mpt)
                .args(remote(
                    trap,
                    conn_name(Side::B),
                    &key,
                    true,
                    &["status", "--json"],
                ))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let mut buf = vec![0u8; 65536];
            let got = retry_interrupted(|| s.recv(&mut buf));
            let _ = child.kill();
            let _ = child.wait();
            let n = got?;
            Ok(buf[..n].to_vec())
        })
        .expect("capturing the request mpt sends")
}

fn counters(bed: &TestBed) -> Value {
    remote_status(bed, target(Family::V4), false)["cmd_port"].clone()
}

#[test]
fn wrong_key_replay_and_garbage_are_refused_and_the_tunnel_keeps_working() {
    let mut bed = bed_with_port();
    let to = target(Family::V4);

    // A wrong key: exit 1 and the daemon's reason, over both transports.
    let wrong = bed.dir().join("wrong.key");
    write_key_file(&wrong, &random_key().expect("key"), 0o600).expect("wrong key file");
    for udp in [false, true] {
        let (code, _, err) = mpt_in(
            bed.ns(Side::A),
            &remote(to, conn_b(), &wrong, udp, &["status", "--json"]),
        );
        assert_eq!(code, 1, "wrong key over {}: {err}", transport(udp));
        assert!(err.contains("authentication failed"), "{err}");
    }
    // An unknown connection.
    let (code, _, err) = mpt_in(
        bed.ns(Side::A),
        &remote(to, "nobody", &key_a(&bed), false, &["status"]),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown connection"), "{err}");
    // An unreadable key file is the client's own error.
    let (code, _, err) = mpt_in(
        bed.ns(Side::A),
        &remote(
            to,
            conn_b(),
            &bed.dir().join("missing.key"),
            false,
            &["status"],
        ),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("missing.key"), "{err}");

    // A captured request: answered once, refused as replayed afterwards,
    // over UDP and over TCP.
    let captured = capture_udp_request(&bed);
    let first = udp_exchange(&bed, to, captured.clone(), Duration::from_secs(5))
        .expect("an answer to the captured request");
    let first: Value = serde_json::from_slice(&first).expect("answer is JSON");
    let inner: Value =
        serde_json::from_str(first["response"].as_str().expect("a signed response")).expect("JSON");
    assert_eq!(inner["ok"], true, "{first}");
    assert!(first["mac"].is_string(), "{first}");
    let again = udp_exchange(&bed, to, captured.clone(), Duration::from_secs(5))
        .expect("an answer to the replay");
    let again = String::from_utf8_lossy(&again).into_owned();
    assert!(again.contains("replayed"), "{again}");
    assert!(
        !again.contains("\\\"status\\\""),
        "a replay got the status: {again}"
    );
    let (line, closed) = tcp_exchange(&bed, to, captured.clone());
    assert!(line.contains("replayed"), "{line}");
    assert!(!closed, "an authentic (if replayed) request closes nothing");

    // Garbage over TCP: a plain error, then the daemon closes.
    let (line, closed) = tcp_exchange(&bed, to, b"GET / HTTP/1.0".to_vec());
    assert!(line.contains("\"ok\":false"), "{line}");
    assert!(closed, "garbage did not close the TCP connection");
    let (line, closed) = tcp_exchange(&bed, to, vec![b'x'; 40_000]);
    assert!(line.contains("too long"), "{line}");
    assert!(closed);
    // The request with its MAC altered.
    let mut forged: Value = serde_json::from_slice(&captured).expect("captured is JSON");
    forged["request"] = Value::String(r#"{"version":1,"request":"reload"}"#.into());
    let forged = forged.to_string().into_bytes();
    let (line, closed) = tcp_exchange(&bed, to, forged.clone());
    assert!(line.contains("authentication failed"), "{line}");
    assert!(closed);

    // Garbage datagrams: never an answer larger than the datagram.
    let mut prng = Prng::new(0x00c0_ffee);
    for size in [1usize, 8, 40, 100, 1000, 20_000] {
        let mut d = vec![0u8; size];
        prng.fill(&mut d);
        if let Some(a) = udp_exchange(&bed, to, d, Duration::from_millis(300)) {
            assert!(
                a.len() <= size,
                "{size}-byte garbage got a {}-byte answer",
                a.len()
            );
        }
    }
    let a = udp_exchange(&bed, to, forged.clone(), Duration::from_secs(2)).expect("answer");
    assert!(a.len() <= forged.len());
    assert!(String::from_utf8_lossy(&a).contains("authentication failed"));

    // A flood of garbage datagrams: answers are rate-limited, and no more
    // bytes come back than went out.
    let flood = bed
        .ns(Side::A)
        .run_in("garbage flood", Duration::from_secs(30), move || {
            let s = UdpSocket::bind(SocketAddr::new(outer_addr(0, Family::V4, Side::A), 0))?;
            s.connect(to)?;
            s.set_nonblocking(true)?;
            let mut prng = Prng::new(7);
            let t0 = Instant::now();
            let (mut sent, mut sent_bytes, mut answers, mut answer_bytes) =
                (0u64, 0u64, 0u64, 0u64);
            let mut buf = vec![0u8; 65536];
            let mut d = vec![0u8; 200];
            while t0.elapsed() < Duration::from_secs(2) {
                prng.fill(&mut d);
                d[0] = b'{';
                if s.send(&d).is_ok() {
                    sent += 1;
                    sent_bytes += d.len() as u64;
                }
                while let Ok(n) = s.recv(&mut buf) {
                    answers += 1;
                    answer_bytes += n as u64;
                }
                if sent % 64 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            std::thread::sleep(Duration::from_millis(300));
            while let Ok(n) = s.recv(&mut buf) {
                answers += 1;
                answer_bytes += n as u64;
            }
            Ok((sent, sent_bytes, answers, answer_bytes, t0.elapsed()))
        })
        .expect("flood");
    let (sent, sent_bytes, answers, answer_bytes, took) = flood;
    assert!(sent > 1000, "only {sent} datagrams sent");
    assert!(answer_bytes <= sent_bytes);
    let allowed = 20 + (20.0 * took.as_secs_f64()).ceil() as u64 + 5;
    assert!(
        answers <= allowed,
        "{answers} answers to {sent} garbage datagrams in {took:?} (limit ~{allowed})"
    );

    // Everything was counted, the daemons live, and the tunnel forwards.
    let c = counters(&bed);
    eprintln!("flood: {sent} datagrams ({sent_bytes} B) in {took:?}, {answers} answers ({answer_bytes} B); counters {c}");
    let refused = &c["refused"];
    assert!(refused["auth"].as_u64().unwrap_or(0) >= 4, "{c}");
    assert!(refused["replay"].as_u64().unwrap_or(0) >= 2, "{c}");
    assert!(
        refused["unknown_connection"].as_u64().unwrap_or(0) >= 1,
        "{c}"
    );
    assert!(refused["oversized"].as_u64().unwrap_or(0) >= 2, "{c}");
    // (The kernel may drop part of the flood before the daemon reads it.)
    assert!(refused["malformed"].as_u64().unwrap_or(0) >= 100, "{c}");
    assert!(c["unanswered"].as_u64().unwrap_or(0) >= 100, "{c}");
    bed.check_alive().expect("daemons alive");
    bed.wait_tunnel(Side::A, Family::V4, Duration::from_secs(5))
        .expect("the tunnel forwards after the garbage");
    bed.transfer(Side::A, Family::V4, 2 << 20)
        .expect("a transfer after the garbage");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn without_cmd_port_nothing_listens() {
    let spec = BedSpec::uniform(1, Family::V4)
        .inner(&[Family::V4])
        .shared_key()
        .expect("random key");
    let mut bed = TestBed::new(spec).expect("test bed");
    let key = key_a(&bed);
    for udp in [false, true] {
        let t0 = Instant::now();
        let (code, _, err) = mpt_in(
            bed.ns(Side::A),
            &remote(target(Family::V4), conn_b(), &key, udp, &["status"]),
        );
        assert_eq!(code, 1, "{err}");
        // The host answers "connection refused" / port unreachable at once.
        assert!(
            err.contains(&format!(
                "cannot reach {} over {}",
                target(Family::V4),
                transport(udp)
            )),
            "{err}"
        );
        assert!(t0.elapsed() < Duration::from_secs(5), "{err}");
    }
    // Nothing of mptd's listens on TCP in B at all, and its only UDP
    // sockets are the path sockets.
    let tcp = bed
        .ns(Side::B)
        .exec(&["cat", "/proc/net/tcp", "/proc/net/tcp6"])
        .expect("tcp");
    let port_hex = format!(":{PORT:04X} ");
    assert!(
        !tcp.contains(&port_hex),
        "something listens on {PORT}/tcp:\n{tcp}"
    );
    let udp = bed
        .ns(Side::B)
        .exec(&["cat", "/proc/net/udp", "/proc/net/udp6"])
        .expect("udp");
    assert!(
        !udp.contains(&port_hex),
        "something listens on {PORT}/udp:\n{udp}"
    );
    // The tunnel is unaffected by the refused attempts.
    bed.wait_tunnel(Side::A, Family::V4, Duration::from_secs(5))
        .expect("tunnel");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn a_connection_without_key_cannot_be_managed_remotely() {
    // B's connection has no key_file (so the tunnel does not come up:
    // A encrypts); A holds a key and asks anyway.
    let key = random_key().expect("key");
    let spec = BedSpec::uniform(1, Family::V4)
        .inner(&[Family::V4])
        .key(Side::A, key)
        .cmd_port(Side::B, PORT);
    let bed = TestBed::start(spec).expect("test bed");
    for udp in [false, true] {
        let (code, _, err) = mpt_in(
            bed.ns(Side::A),
            &remote(target(Family::V4), conn_b(), &key_a(&bed), udp, &["status"]),
        );
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("cannot be managed remotely"), "{err}");
    }
    // The IPv6 address of the same port answers the same (dual stack).
    let (code, _, err) = mpt_in(
        bed.ns(Side::A),
        &remote(
            target(Family::V6),
            conn_b(),
            &key_a(&bed),
            false,
            &["status"],
        ),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot be managed remotely"), "{err}");
    bed.shutdown().expect("clean shutdown");
}
