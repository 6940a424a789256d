//! `mpt bench clients` on a small instance: one server mptd, 24 client
//! mptds of two paths each in two namespaces of its own, two senders, the
//! flood and a rekeying client, short measurements. Checks that every
//! client came up, that the results files are well formed with figures in
//! them, and that the run left no namespace or daemon behind.
//!
//! The server runs under `ulimit -n 32` (`--nofile`): the learnt paths of
//! the shared port share one socket and client connections keep no
//! eventfd, so a concentrator needs about 17 descriptors whatever number
//! of clients it serves. A descriptor per client or per path (as before
//! issue 34) would need 41-65 here and the clients would not come up.
//!
//! Traffic stays inside the bench's own namespaces.

use std::process::Command;
use std::time::{Duration, Instant};

use mpt_e2e::{mpt_bin, mptd_bin};
use serde_json::Value;

/// Namespaces of this bench run (`mptemu-<pid>-clients-*`).
fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("mptemu-{pid}-clients");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn num(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{pointer} is not a number in {v:#}"))
}

#[test]
fn bench_clients_small_instance() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (network namespaces); run the tests as root"
    );
    let (mpt, mptd) = (mpt_bin().expect("mpt"), mptd_bin().expect("mptd"));
    let out = std::env::temp_dir().join(format!("mpt-bench-clients-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let start = Instant::now();
    let child = Command::new(&mpt)
        .args([
            "bench",
            "clients",
            "--clients",
            "24",
            "--nofile",
            "32",
            "--senders",
            "2",
            "--duration",
            "2",
            "--flood",
            "--rekey-after",
            "2",
            "--out",
        ])
        .arg(&out)
        .arg("--mptd")
        .arg(&mptd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running mpt bench clients");
    let pid = child.id();
    let res = child.wait_with_output().expect("waiting for mpt bench");
    let stdout = String::from_utf8_lossy(&res.stdout);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        res.status.success(),
        "mpt bench clients failed ({}):\n{stdout}\n{stderr}",
        res.status
    );
    assert!(
        start.elapsed() < Duration::from_secs(120),
        "took {:?}",
        start.elapsed()
    );
    assert!(
        stdout.contains("all up:            yes (24 of 24"),
        "{stdout}"
    );
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("results.json is JSON");
    assert_eq!(v["scenario"], "clients");
    assert_eq!(v["mode"], "shared-port");
    assert_eq!(v["complete"], true, "{v:#}");
    assert_eq!(v["all_up"], true, "{v:#}");
    assert_eq!(v["up_count"], 24);
    let up_s = num(&v, "/up_s");
    assert!(up_s > 0.0 && up_s < 60.0, "{up_s}");
    for tag in ["server_idle", "server_end"] {
        assert!(num(&v, &format!("/{tag}/threads")) >= 1.0, "{v:#}");
        assert!(num(&v, &format!("/{tag}/rss_kib")) > 0.0, "{v:#}");
        assert!(
            num(&v, &format!("/{tag}/hwm_kib")) >= num(&v, &format!("/{tag}/rss_kib")),
            "{v:#}"
        );
        let fds = num(&v, &format!("/{tag}/fds"));
        assert!(
            (3.0..=32.0).contains(&fds),
            "{tag}: {fds} fds under ulimit -n 32"
        );
    }
    assert!(num(&v, "/single/mbps") > 0.0, "{v:#}");
    let senders = v["aggregate"]["per_sender"].as_array().expect("per_sender");
    assert_eq!(senders.len(), 2);
    for s in senders {
        assert!(num(s, "/mbps") > 0.0, "{v:#}");
    }
    assert!(num(&v, "/aggregate_ratio") > 0.0);
    // The flood was sent and refused; the senders still got through.
    assert!(num(&v, "/flood/datagrams") > 100.0, "{v:#}");
    assert!(num(&v, "/flood/senders/mbps") > 0.0, "{v:#}");
    assert_eq!(v["flood"]["up_after"], 24, "{v:#}");
    // The last client renewed its keys while it sent (2 s at 2 s: one at least).
    assert_eq!(v["rekey"]["client"], "client-023");
    assert!(num(&v, "/rekey/rekeys") >= 1.0, "{v:#}");
    let csv = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("key,value"));
    for line in lines {
        let (k, _) = line
            .split_once(',')
            .unwrap_or_else(|| panic!("bad csv line {line:?}"));
        assert!(!k.is_empty(), "{csv}");
    }
    for key in ["up_s,", "aggregate_ratio,", "flood_drop_pct,", "rekeys,"] {
        assert!(csv.contains(key), "{key} missing:\n{csv}");
    }
    assert!(out.join("work/server.toml").is_file());
    assert!(
        namespaces_of(pid).is_empty(),
        "namespaces left: {:?}",
        namespaces_of(pid)
    );
    let _ = std::fs::remove_dir_all(&out);
}
