//! `mpt status|path|reload` against a stand-in daemon: a unix socket in
//! the test that records each request line and answers canned responses.
//! Checks the exact requests and the exit codes (0 ok, 1 runtime failure,
//! 2 usage). The real daemon is covered by the workspace end-to-end tests.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const MPT: &str = env!("CARGO_BIN_EXE_mpt");

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mpt-ctl-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn sock(&self) -> PathBuf {
        self.0.join("mptd.sock")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the stand-in daemon does with each request line, in order.
#[derive(Clone)]
enum Answer {
    /// Reply with this line.
    Line(String),
    /// Close the connection without answering.
    Close,
    /// Read the request and never answer (until the client gives up).
    Hang,
}

/// A stand-in daemon; `requests` holds every line received, in order.
struct FakeDaemon {
    dir: TempDir,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FakeDaemon {
    fn start(answers: Vec<Answer>) -> FakeDaemon {
        let dir = TempDir::new();
        let listener = UnixListener::bind(dir.sock()).unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        // The thread ends with the test process; it holds no resources the
        // temp dir's removal needs.
        std::thread::spawn(move || {
            let mut answers = answers.into_iter();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let mut out = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    seen.lock().unwrap().push(line);
                    match answers.next() {
                        Some(Answer::Line(l)) => {
                            out.write_all(l.as_bytes()).unwrap();
                            out.write_all(b"\n").unwrap();
                        }
                        Some(Answer::Hang) => std::thread::sleep(Duration::from_secs(30)),
                        Some(Answer::Close) | None => break,
                    }
                }
            }
        });
        FakeDaemon { dir, requests }
    }

    fn answering(lines: &[Value]) -> FakeDaemon {
        FakeDaemon::start(lines.iter().map(|l| Answer::Line(l.to_string())).collect())
    }

    fn sock(&self) -> PathBuf {
        self.dir.sock()
    }

    /// The requests received, each checked to be exactly one line.
    fn requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|l| {
                assert!(l.ends_with('\n') && l.matches('\n').count() == 1, "{l:?}");
                serde_json::from_str(l).unwrap()
            })
            .collect()
    }
}

fn mpt(sock: &Path, args: &[&str]) -> Output {
    let out = Command::new(MPT)
        .arg("--socket")
        .arg(sock)
        .args(args)
        .env_remove("MPT_SOCKET")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    eprintln!(
        "mpt {args:?} -> {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn ok(extra: Value) -> Value {
    let mut v = json!({"version": 1, "ok": true});
    if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    v
}

fn failed(msg: &str) -> Value {
    json!({"version": 1, "ok": false, "error": msg})
}

fn status_doc(tx_bytes: u64) -> Value {
    json!({
        "tunnel": "mpt0",
        "uptime_s": 42,
        "drops": {"no_route": 0, "tun_read_errors": 0},
        "connections": [{
            "name": "site-b", "id": 1,
            "drops": {"auth": 0, "replay": 4},
            "session": {"encrypted": true, "established": true, "handshakes": 1},
            "paths": [{
                "name": "eth1", "state": "up",
                "local": "10.0.0.1:65022", "remote": "10.0.0.2:65022",
                "weight_out": 100, "weight_in": 100,
                "rtt_ms": 1.25, "rtt_min_ms": 1.0, "loss_pct": 0.0,
                "tx_packets": 10, "rx_packets": 20,
                "tx_bytes": tx_bytes, "rx_bytes": 0,
                "last_rx_ms_ago": 5.0, "last_change_ms_ago": 1000.0
            }]
        }]
    })
}

const STATUS: fn() -> Value = || json!({"version": 1, "request": "status"});

#[test]
fn status_json_prints_the_status_object() {
    let d = FakeDaemon::answering(&[ok(json!({"status": status_doc(0)}))]);
    let o = mpt(&d.sock(), &["status", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(d.requests(), [STATUS()]);
    let printed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(printed, status_doc(0));
}

#[test]
fn status_table_samples_twice_for_rates() {
    let d = FakeDaemon::answering(&[
        ok(json!({"status": status_doc(0)})),
        ok(json!({"status": status_doc(1_000_000)})),
    ]);
    let t0 = Instant::now();
    let o = mpt(&d.sock(), &["status"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(t0.elapsed() >= Duration::from_millis(500));
    assert_eq!(d.requests(), [STATUS(), STATUS()]);
    let out = stdout(&o);
    assert!(out.contains("site-b (id 1): session established"), "{out}");
    assert!(out.contains("drops: replay 4"), "{out}");
    assert!(out.contains("10.0.0.1:65022 -> 10.0.0.2:65022"), "{out}");
    assert!(out.contains("TX bit/s"), "{out}");
    // 8 Mbit over a bit more than 0.5 s: between 10 and 16 Mbit/s.
    let traffic = out
        .lines()
        .filter(|l| l.trim_start().starts_with("eth1"))
        .nth(1)
        .unwrap();
    let tx = traffic.split_whitespace().nth(5).unwrap();
    assert!(tx.ends_with('M'), "{traffic}");
    let mbit: f64 = tx.trim_end_matches('M').parse().unwrap();
    assert!((10.0..=16.0).contains(&mbit), "{traffic}");
}

#[test]
fn status_once_samples_once() {
    let d = FakeDaemon::answering(&[ok(json!({"status": status_doc(123_456)}))]);
    let o = mpt(&d.sock(), &["status", "--once"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(d.requests(), [STATUS()]);
    assert!(stdout(&o).contains("TX BYTES"));
    assert!(stdout(&o).contains("123k"));
}

#[test]
fn status_of_one_connection_asks_for_it_and_copes_with_old_daemons() {
    // The daemon filters ...
    let d = FakeDaemon::answering(&[ok(json!({"status": status_doc(7)}))]);
    let o = mpt(&d.sock(), &["status", "site-b", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        d.requests(),
        [json!({"version": 1, "request": "status", "conn": "site-b"})]
    );
    // ... an old one sends everything: the client keeps the one asked for
    // (here none matches: a usage error with the close names).
    let d = FakeDaemon::answering(&[ok(json!({"status": status_doc(7)}))]);
    let o = mpt(&d.sock(), &["status", "site-c", "--once"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("did you mean `site-b`?"),
        "{}",
        stderr(&o)
    );
    // The daemon's own refusal is shown as it is.
    let d = FakeDaemon::answering(&[failed("no connection `x`; did you mean `y`?")]);
    let o = mpt(&d.sock(), &["status", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("did you mean `y`?"), "{}", stderr(&o));
}

#[test]
fn status_without_status_object_fails() {
    let d = FakeDaemon::answering(&[ok(json!({}))]);
    let o = mpt(&d.sock(), &["status", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no \"status\" object"));
}

#[test]
fn path_state_requests() {
    for state in ["up", "down", "backup"] {
        let d = FakeDaemon::answering(&[ok(json!({}))]);
        let o = mpt(&d.sock(), &["path", "site-b", "eth1", state]);
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(
            d.requests(),
            [json!({"version": 1, "request": "path_state",
                    "conn": "site-b", "path": "eth1", "state": state})]
        );
        assert_eq!(stdout(&o), format!("site-b eth1: {state}\n"));
    }
}

#[test]
fn path_weight_requests() {
    let d = FakeDaemon::answering(&[ok(json!({}))]);
    let o = mpt(&d.sock(), &["path", "site-b", "eth1", "weight", "200"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        d.requests(),
        [json!({"version": 1, "request": "path_weight",
                "conn": "site-b", "path": "eth1", "weight_out": 200})]
    );

    let d = FakeDaemon::answering(&[ok(json!({}))]);
    let o = mpt(
        &d.sock(),
        &["path", "site-b", "eth1", "weight", "200", "50"],
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        d.requests(),
        [json!({"version": 1, "request": "path_weight",
                "conn": "site-b", "path": "eth1", "weight_out": 200, "weight_in": 50})]
    );
    assert_eq!(stdout(&o), "site-b eth1: weight_out 200, weight_in 50\n");
}

#[test]
fn path_add_and_remove_are_sent_and_answers_printed() {
    let d = FakeDaemon::answering(&[ok(json!({"path": "wifi0", "id": 2, "peer": "confirmed"}))]);
    let o = mpt(
        &d.sock(),
        &[
            "path",
            "add",
            "site-b",
            "wifi0",
            "--local",
            "192.0.2.10",
            "--remote",
            "2001:db8::7",
            "--interface",
            "wlan0",
            "--weight",
            "50",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        d.requests(),
        [
            json!({"version": 1, "request": "path_add", "conn": "site-b", "name": "wifi0",
                "local": "192.0.2.10", "remote": "2001:db8::7", "interface": "wlan0",
                "weight_out": 50})
        ]
    );
    assert_eq!(stdout(&o), "site-b wifi0: added (peer: confirmed)\n");

    const REFUSED: &str =
        "the peer refused path wifi0: cannot open a socket for the path; nothing changed";
    let d = FakeDaemon::answering(&[failed(REFUSED)]);
    let o = mpt(
        &d.sock(),
        &["path", "add", "site-b", "wifi0", "--local", "192.0.2.10"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        d.requests(),
        [
            json!({"version": 1, "request": "path_add", "conn": "site-b", "name": "wifi0",
                "local": "192.0.2.10"})
        ]
    );
    assert_eq!(stderr(&o), format!("error: mptd: {REFUSED}\n"));
    assert_eq!(stdout(&o), "");

    let d = FakeDaemon::answering(&[ok(json!({"path": "wifi0", "id": 2}))]);
    let o = mpt(&d.sock(), &["path", "remove", "site-b", "wifi0"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        d.requests(),
        [json!({"version": 1, "request": "path_remove", "conn": "site-b", "path": "wifi0"})]
    );
    assert_eq!(stdout(&o), "site-b wifi0: removed\n");

    let d = FakeDaemon::answering(&[ok(json!({"peer": "no answer yet (still trying)"}))]);
    let o = mpt(&d.sock(), &["path", "remove", "site-b", "wifi0", "--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        d.requests(),
        [
            json!({"version": 1, "request": "path_remove", "conn": "site-b", "path": "wifi0",
               "force": true})
        ]
    );
    assert_eq!(
        stdout(&o),
        "site-b wifi0: removed (peer: no answer yet (still trying))\n"
    );
}

#[test]
fn reload_prints_both_lists() {
    let d = FakeDaemon::answering(&[ok(json!({
        "changes": ["connection site-b path eth1: weight_out 100 -> 50"],
        "not_applied": ["connection site-c is new (restart to add connections)"],
    }))]);
    let o = mpt(&d.sock(), &["reload"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(d.requests(), [json!({"version": 1, "request": "reload"})]);
    assert_eq!(
        stdout(&o),
        "reloaded, applied:\n  connection site-b path eth1: weight_out 100 -> 50\n\
         not applied (restart mptd for these):\n  \
         connection site-c is new (restart to add connections)\n"
    );

    let d = FakeDaemon::answering(&[ok(json!({"changes": [], "not_applied": []}))]);
    let o = mpt(&d.sock(), &["reload"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "reloaded: no changes\n");
}

#[test]
fn daemon_errors_exit_1() {
    let d = FakeDaemon::answering(&[failed("no connection named \"nope\"")]);
    let o = mpt(&d.sock(), &["path", "nope", "eth1", "down"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "error: mptd: no connection named \"nope\"\n");
    assert_eq!(stdout(&o), "");

    let d = FakeDaemon::answering(&[failed("config: line 3: bad key")]);
    assert_eq!(mpt(&d.sock(), &["reload"]).status.code(), Some(1));
}

#[test]
fn broken_daemons_exit_1() {
    let d = FakeDaemon::start(vec![Answer::Close]);
    let o = mpt(&d.sock(), &["status", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("without answering"), "{}", stderr(&o));

    let d = FakeDaemon::start(vec![Answer::Line("hello".into())]);
    let o = mpt(&d.sock(), &["reload"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("malformed response"), "{}", stderr(&o));

    let d = FakeDaemon::answering(&[json!({"version": 2, "ok": true})]);
    assert_eq!(mpt(&d.sock(), &["reload"]).status.code(), Some(1));
}

#[test]
fn a_silent_daemon_times_out_after_5_s() {
    let d = FakeDaemon::start(vec![Answer::Hang]);
    let t0 = Instant::now();
    let o = mpt(&d.sock(), &["reload"]);
    let took = t0.elapsed();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("reading the response"),
        "{}",
        stderr(&o)
    );
    assert!(
        (Duration::from_secs(5)..Duration::from_secs(10)).contains(&took),
        "{took:?}"
    );
}

#[test]
fn no_daemon_exits_1_with_a_hint() {
    let dir = TempDir::new();
    // No socket file at all.
    let o = mpt(&dir.sock(), &["status"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "error: is mptd running? socket {}: ",
            dir.sock().display()
        )),
        "{err}"
    );
    // A stale socket file nobody listens on: connection refused.
    drop(UnixListener::bind(dir.sock()).unwrap());
    let o = mpt(&dir.sock(), &["path", "c", "p", "up"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is mptd running?"), "{}", stderr(&o));
    // The default socket is the daemon's default.
    let o = Command::new(MPT)
        .args(["status", "--help"])
        .env_remove("MPT_SOCKET")
        .output()
        .unwrap();
    assert!(stdout(&o).contains("/run/mpt/mptd.sock"));
}

#[test]
fn socket_from_env_and_after_the_subcommand() {
    let d = FakeDaemon::answering(&[ok(json!({})), ok(json!({}))]);
    let o = Command::new(MPT)
        .args(["path", "c", "p", "up"])
        .env("MPT_SOCKET", d.sock())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = Command::new(MPT)
        .args(["path", "c", "p", "down", "--socket"])
        .arg(d.sock())
        .env("MPT_SOCKET", "/nonexistent/mptd.sock")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(d.requests().len(), 2);
}

#[test]
fn bad_arguments_exit_2_without_contacting_the_daemon() {
    let d = FakeDaemon::answering(&[]);
    for args in [
        &["path", "c", "p"][..],
        &["path", "c", "p", "sideways"],
        &["path", "c", "p", "weight"],
        &["path", "c", "p", "weight", "0"],
        &["path", "c", "p", "weight", "1000001"],
        &["path", "c", "p", "weight", "10", "0"],
        &["path", "c", "p", "weight", "10", "65536"],
        &["path", "c", "p", "weight", "x"],
        &["path", "c", "p", "up", "5"],
        &["path", "c", "p", "weight", "1", "2", "3"],
        &["path", "add", "c", "n"],
        &["path", "add", "c", "n", "--local", "not-an-ip"],
        &["path", "remove", "c"],
        &["status", "--bogus"],
        &["reload", "extra"],
        &["completions", "tcsh"],
    ] {
        let o = mpt(&d.sock(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!stderr(&o).is_empty(), "{args:?}");
    }
    assert!(d.requests().is_empty());
}

#[test]
fn every_control_subcommand_has_help_with_an_example() {
    for args in [
        &["status", "--help"][..],
        &["path", "--help"],
        &["path", "add", "--help"],
        &["path", "remove", "--help"],
        &["reload", "--help"],
        &["completions", "--help"],
    ] {
        let o = Command::new(MPT).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        let help = stdout(&o);
        assert!(help.contains("Example"), "{args:?}:\n{help}");
        assert!(help.contains("mpt "), "{args:?}:\n{help}");
    }
}
