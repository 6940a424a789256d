//! Service integration: the systemd unit in conf/ and the readiness
//! notification mptd sends (`Type=notify`).
//!
//! The daemons inherit `NOTIFY_SOCKET` from this test process (one test per
//! binary, so setting it cannot leak into other tests) and report to a
//! datagram socket the test reads, as systemd would.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mpt_e2e::*;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// Reads one notification, waiting at most `timeout`.
fn next_message(sock: &UnixDatagram, timeout: Duration) -> Option<String> {
    sock.set_read_timeout(Some(timeout)).expect("timeout");
    let mut buf = [0u8; 512];
    match retry_interrupted(|| sock.recv(&mut buf)) {
        Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(_) => None,
    }
}

#[test]
fn unit_file_verifies_and_readiness_waits_for_the_paths() {
    // The unit: Type=notify, and systemd-analyze accepts it (with the
    // binaries pointed at this build).
    let unit = std::fs::read_to_string(repo_root().join("conf/mptd.service")).expect("unit");
    assert!(unit.contains("Type=notify"), "{unit}");
    assert!(
        unit.contains("ExecReload=/bin/kill -HUP $MAINPID"),
        "{unit}"
    );
    let dir = TempDir::new("unit").expect("temp dir");
    let mptd = mptd_bin().expect("mptd");
    // The binaries as this build has them; the man pages are the
    // package's (tests/tests/misc/package.rs verifies the unit with them in
    // place), not installed here.
    let local = unit
        .replace("/usr/bin/mptd", &mptd.display().to_string())
        .replace("man:mptd(8) man:mpt(1) ", "");
    assert!(
        !local.contains("/usr/bin/mptd") && !local.contains("man:"),
        "the unit names mptd or its man pages elsewhere now: {local}"
    );
    let unit_path = dir.path().join("mptd.service");
    std::fs::write(&unit_path, local).expect("write unit");
    match Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit_path)
        .output()
    {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            // Lines about other units on the host are not ours to judge.
            let ours: Vec<&str> = text.lines().filter(|l| l.contains("mptd")).collect();
            assert!(
                out.status.success() && ours.is_empty(),
                "systemd-analyze verify: {text}"
            );
        }
        Err(e) => eprintln!("systemd-analyze not available ({e}); unit checked by content only"),
    }

    // Readiness: both daemons report READY once their path is up.
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("notify socket");
    std::env::set_var("NOTIFY_SOCKET", &notify_path);
    let t0 = Instant::now();
    let spec = BedSpec::uniform(1, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::start(spec).expect("test bed");
    let mut ready = Vec::new();
    while ready.len() < 2 {
        let Some(m) = next_message(&notify, Duration::from_secs(15)) else {
            panic!("only {} READY messages: {ready:?}", ready.len());
        };
        if m.contains("READY=1") {
            ready.push(m);
        }
    }
    let took = t0.elapsed();
    for m in &ready {
        assert!(m.contains("STATUS=tunnel up"), "{m}");
    }
    // READY came after each daemon's own path was usable. The peer learns
    // that from a probe sent at once (a veth may get its carrier only after
    // the daemon started, so one side can come up late), so both sides show
    // the path up a round trip later; the second allows for a loaded
    // machine. The round trip itself is the unit test
    // `the_peer_learns_we_hear_it_one_round_trip_after_we_do`.
    bed.wait_all_up(Duration::from_secs(1))
        .expect("paths up on both sides after READY");
    assert!(took < Duration::from_secs(5), "READY after {took:?}");

    // A daemon whose peer is away still reports ready, after its wait,
    // saying so; the service does not fail to start.
    bed.stop_daemon(Side::B).expect("stop B");
    bed.stop_daemon(Side::A).expect("stop A");
    while next_message(&notify, Duration::from_millis(100)).is_some() {}
    let t1 = Instant::now();
    bed.restart_daemon(Side::A, None).expect("restart A");
    let m = loop {
        let m = next_message(&notify, Duration::from_secs(20)).expect("READY without a peer");
        if m.contains("READY=1") {
            break m;
        }
    };
    let waited = t1.elapsed();
    assert!(m.contains("waiting for peers"), "{m}");
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(16),
        "READY without a peer after {waited:?}"
    );
    std::env::remove_var("NOTIFY_SOCKET");
    bed.restart_daemon(Side::B, None).expect("restart B");
    bed.shutdown().expect("clean shutdown");
}
