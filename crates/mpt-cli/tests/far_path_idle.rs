//! End to end: a far path (a satellite beside DSL) must not slow down the
//! tunnel while nothing uses it.
//!
//! The receiver holds data to the delay of a path that is far slower than
//! the fastest only while that path brings a real share of the data. The
//! share once counted every byte received, probes and keepalives
//! included, so an idle far path carried about half of "the data" and
//! every ping through an idle GEO + DSL tunnel took the satellite's 600 ms.
//! This test builds the bench's testbed (namespaces, the link emulator in
//! a middle namespace, mptd on both sides; root, a release mptd next to
//! `mpt` or in MPTD_BIN), gives path 0 a 150 ms one-way delay and path 1
//! 2 ms, and checks that short pings through the idle tunnel see the near
//! path's RTT while full-size ones are held to the far path's delay (as a
//! bulk flow's packets are, from its first on).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use mpt_api::status::PathStatus;
use mpt_api::Status;
use mpt_cli::bench::scenario::{load, Overrides};
use mpt_cli::bench::testbed::{mptd_status, Testbed};

fn mptd_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MPTD_BIN") {
        return PathBuf::from(p);
    }
    let mpt = PathBuf::from(env!("CARGO_BIN_EXE_mpt"));
    mpt.parent()
        .map(|d| d.join("mptd"))
        .unwrap_or_else(|| PathBuf::from("mptd"))
}

/// Path `name`'s entry in a status document.
fn path<'a>(status: &'a Status, name: &str) -> &'a PathStatus {
    status
        .connections()
        .first()
        .and_then(|c| c.paths().iter().find(|p| p.name.as_deref() == Some(name)))
        .unwrap_or_else(|| panic!("no path {name} in {status:?}"))
}

/// The RTTs (ms) of `count` pings of `size` bytes of payload from
/// namespace `ns` to `to`.
fn ping(ns: &str, to: &str, count: u32, size: u32) -> Vec<f64> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-n", "-i", "0.2", "-W", "2"])
        .args(["-s", &size.to_string(), "-c", &count.to_string(), to])
        .output()
        .expect("running ping");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn an_idle_far_path_does_not_delay_the_tunnel() {
    assert!(
        mpt_emu::sys::is_root(),
        "this test needs root (network namespaces)"
    );
    let mptd = mptd_bin();
    assert!(
        mptd.is_file(),
        "mptd not found at {}: build all binaries first \
         (cargo build --release --workspace --bins) or set MPTD_BIN",
        mptd.display()
    );
    let work = std::env::temp_dir().join(format!("mpt-far-idle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");
    let scenario_file = work.join("far.toml");
    std::fs::write(
        &scenario_file,
        r#"
description = "a far path beside a near one, idle"
duration = 1
combos = ["4in4"]
[unlike]
cc = ["cubic"]
[[unlike.case]]
name = "far+near"
target = "best"
ratio = 1.0
[[unlike.case.path]]
name = "far"
emu = { rate = "20mbit", delay = "150ms", queue = "800kB" }
[[unlike.case.path]]
name = "near"
emu = { rate = "20mbit", delay = "2ms", queue = "128kB" }
"#,
    )
    .expect("writing the scenario");
    let scenario = load(
        scenario_file.to_str().expect("utf-8 path"),
        &Overrides::default(),
    )
    .expect("loading the scenario");
    let stop = AtomicBool::new(false);
    let tb = Testbed::build(0, &scenario.cases[0], &work, &mptd, &stop).expect("testbed");

    // Both ends must know the far path's RTT (probes), so that it counts
    // as far, before the pings mean anything.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let known = [&tb.control_a, &tb.control_b].iter().all(|c| {
            mptd_status(c).is_ok_and(|s| {
                path(&s, "p0")
                    .rtt_min_ms
                    .flatten()
                    .is_some_and(|r| r > 250.0)
                    && path(&s, "p0").state.as_deref() == Some("up")
                    && path(&s, "p1").state.as_deref() == Some("up")
            })
        });
        if known {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "paths not up with the far path's RTT measured: {:?}",
            mptd_status(&tb.control_a)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Keepalives and probes have been flowing on both paths meanwhile.
    std::thread::sleep(Duration::from_secs(2));

    let median = |rtts: &[f64]| {
        let mut sorted = rtts.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    };
    let rtts = ping(tb.a.name(), &tb.plan.inner(2), 10, 56);
    assert!(rtts.len() >= 8, "pings lost: {rtts:?}");
    // The near path's RTT is 4 ms, the far one's 300 ms; holding for the
    // far path would add at least 150 ms on each side.
    assert!(
        median(&rtts) < 60.0,
        "short pings through the idle tunnel took the far path's delay: {rtts:?} ms"
    );
    for (side, control) in [("A", &tb.control_a), ("B", &tb.control_b)] {
        let s = mptd_status(control).expect("status");
        let share = path(&s, "p0").rx_share.expect("rx_share");
        assert!(
            share < 0.05,
            "{side}: the idle far path counts as bringing data (rx_share {share})"
        );
        let eq = s.connections().first().and_then(|c| c.equalize.as_ref());
        let hold = eq.and_then(|e| e.hold_ms).unwrap_or(0.0);
        assert!(
            hold < 60.0,
            "{side}: short datagrams held {hold} ms while idle"
        );
        let bulk = eq.and_then(|e| e.bulk_hold_ms).unwrap_or(0.0);
        assert!(
            (120.0..200.0).contains(&bulk),
            "{side}: full-size datagrams held {bulk} ms, not the far path's extra 148 ms"
        );
    }
    // Full-size datagrams are held to the far path's delay even while it
    // carries nothing, so that a bulk flow meets one RTT from its start.
    let big = ping(tb.a.name(), &tb.plan.inner(2), 5, 1200);
    assert!(big.len() >= 4, "pings lost: {big:?}");
    assert!(
        median(&big) > 250.0,
        "full-size pings were not held to the far path's delay: {big:?} ms"
    );
    drop(tb);
    let _ = std::fs::remove_dir_all(&work);
}
