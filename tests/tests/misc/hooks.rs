//! The operator's hook (`[daemon] hook`): a real mptd runs a real program
//! on tunnel, connection and path events, and a hook that hangs is killed
//! at its timeout without hurting the tunnel.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mpt_e2e::*;

/// Writes `body` as a shell script in `dir` and returns its path.
fn script(dir: &Path, name: &str, body: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Side A's config with `keys` added to its `[daemon]` table.
fn config_with(bed: &TestBed, keys: &str) -> String {
    let base = bed.spec.config(Side::A, &bed.control_socket(Side::A));
    base.replacen("[daemon]\n", &format!("[daemon]\n{keys}\n"), 1)
}

/// The hook's log, one event per line.
fn lines(events: &Path) -> Vec<String> {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until a line of `events` starts with `prefix`; returns its index.
fn wait_line(events: &Path, prefix: &str) -> Result<usize> {
    wait_until(
        &format!("hook event `{prefix}`"),
        Duration::from_secs(10),
        Duration::from_millis(20),
        || Ok(lines(events).iter().rposition(|l| l.starts_with(prefix))),
    )
    .with_context(|| format!("events so far: {:#?}", lines(events)))
}

#[test]
fn hook_is_told_of_tunnel_connection_and_path_changes() {
    let spec = BedSpec::uniform(2, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    let events = bed.dir().join("events");
    let hook = script(
        bed.dir(),
        "hook.sh",
        &format!(
            "echo \"$MPT_EVENT|$MPT_TUN|$MPT_CONN|$MPT_PATH|$MPT_FROM|$MPT_STATE|$MPT_PATHS_ALIVE\" >> {}",
            events.display()
        ),
    )
    .expect("hook");
    let config = config_with(
        &bed,
        &format!("hook = [\"/bin/sh\", {:?}]", hook.display().to_string()),
    );
    bed.stop_daemon(Side::A).expect("stop");
    bed.restart_daemon(Side::A, Some(&config))
        .expect("restart with hook");
    bed.wait_all_up(Duration::from_secs(10)).expect("paths up");

    let conn = conn_name(Side::A);
    let up = wait_line(&events, &format!("connection-up|mpt0|{conn}|")).expect("connection-up");
    let tunnel_up = wait_line(&events, "tunnel-up|mpt0|").expect("tunnel-up");
    assert!(
        tunnel_up < up,
        "tunnel-up comes first: {:#?}",
        lines(&events)
    );

    // One path's link goes: a path change, the connection stays up.
    bed.set_path_link(0, false).expect("link down");
    let p0 = path_name(0);
    wait_line(&events, &format!("path-change|mpt0|{conn}|{p0}|up|down|")).expect("path 0 down");
    // The other goes too: the connection is down, with no live path.
    bed.set_path_link(1, false).expect("link down");
    let down =
        wait_line(&events, &format!("connection-down|mpt0|{conn}||||0")).expect("connection-down");
    assert!(
        !lines(&events)[up + 1..down]
            .iter()
            .any(|l| l.starts_with("connection-")),
        "one path going is no connection event: {:#?}",
        lines(&events)
    );
    bed.set_path_link(0, true).expect("link up");
    bed.set_path_link(1, true).expect("link up");
    let poll = Duration::from_millis(20);
    wait_until("connection up again", Duration::from_secs(10), poll, || {
        let n = lines(&events)
            .iter()
            .filter(|l| l.starts_with("connection-up|"))
            .count();
        Ok((n == 2).then_some(()))
    })
    .expect("second connection-up");

    bed.stop_daemon(Side::A).expect("stop");
    let all = lines(&events);
    assert!(
        all.last()
            .is_some_and(|l| l.starts_with("tunnel-down|mpt0|")),
        "tunnel-down is the last event: {all:#?}"
    );
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn a_hanging_hook_is_killed_and_the_tunnel_carries_on() {
    let spec = BedSpec::uniform(2, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    let events = bed.dir().join("events");
    // Records each event, then hangs on path changes.
    let hook = script(
        bed.dir(),
        "hang.sh",
        &format!(
            "echo \"$MPT_EVENT\" >> {}\ncase \"$MPT_EVENT\" in path-change) sleep 60 ;; esac",
            events.display()
        ),
    )
    .expect("hook");
    let config = config_with(
        &bed,
        &format!(
            "hook = [\"/bin/sh\", {:?}]\nhook_timeout = \"300ms\"",
            hook.display().to_string()
        ),
    );
    bed.stop_daemon(Side::A).expect("stop");
    bed.restart_daemon(Side::A, Some(&config))
        .expect("restart with hook");
    bed.wait_all_up(Duration::from_secs(10)).expect("paths up");

    // Path changes: each one's hook hangs until it is killed.
    bed.set_path_link(0, false).expect("link down");
    wait_line(&events, "path-change").expect("hook ran");
    // The tunnel carries on over path 1 while the hook hangs.
    bed.wait_tunnel(Side::A, Family::V4, Duration::from_secs(3))
        .expect("tunnel works while the hook hangs");
    bed.set_path_link(0, true).expect("link up");
    let poll = Duration::from_millis(50);
    let status = wait_until(
        "a hook run timed out",
        Duration::from_secs(10),
        poll,
        || {
            let s = bed.daemon(Side::A).status()?;
            Ok((s["hooks"]["timed_out"].as_u64().unwrap_or(0) >= 1).then_some(s))
        },
    )
    .expect("timed out run counted");
    assert_eq!(status["hooks"]["failed"], 0, "{}", status["hooks"]);
    bed.wait_all_up(Duration::from_secs(10))
        .expect("paths up again");
    bed.wait_tunnel(Side::A, Family::V4, Duration::from_secs(3))
        .expect("tunnel after the hook was killed");

    // Stopping does not wait for queued hangs: queued events are dropped,
    // only tunnel-down runs.
    let t = Instant::now();
    bed.stop_daemon(Side::A).expect("stop");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "stop took {:?}",
        t.elapsed()
    );
    assert_eq!(
        lines(&events).last().map(String::as_str),
        Some("tunnel-down")
    );
    bed.shutdown().expect("clean shutdown");
}
