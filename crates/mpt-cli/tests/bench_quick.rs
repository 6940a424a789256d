//! End to end: `mpt bench ethernet --quick` builds a real 2-path testbed in
//! namespaces (root, iperf3 and a release mptd next to `mpt` needed), and
//! writes results with non-zero UDP and TCP throughput through the tunnel.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn mptd_next_to_mpt() -> PathBuf {
    let mpt = PathBuf::from(env!("CARGO_BIN_EXE_mpt"));
    mpt.parent()
        .map(|d| d.join("mptd"))
        .unwrap_or_else(|| PathBuf::from("mptd"))
}

#[test]
fn bench_ethernet_quick() {
    assert!(
        mpt_emu::sys::is_root(),
        "bench_quick needs root (network namespaces); run the tests as root"
    );
    let mptd = std::env::var_os("MPTD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(mptd_next_to_mpt);
    assert!(
        mptd.is_file(),
        "mptd not found at {}: build all binaries first \
         (cargo build --release --workspace --bins) or set MPTD_BIN",
        mptd.display()
    );
    let out = std::env::temp_dir().join(format!("mpt-bench-quick-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let start = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_mpt"))
        .args(["bench", "ethernet", "--quick", "--out"])
        .arg(&out)
        .arg("--mptd")
        .arg(&mptd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running mpt bench");
    let pid = child.id();
    let res = child.wait_with_output().expect("waiting for mpt bench");
    let stdout = String::from_utf8_lossy(&res.stdout);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        res.status.success(),
        "mpt bench failed ({}):\n{stdout}\n{stderr}",
        res.status
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
    for f in ["results.json", "results.csv", "plot.svg"] {
        assert!(out.join(f).is_file(), "{f} missing in {}", out.display());
    }
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("results.json parses");
    let row = &v["rows"][0];
    let tcp = row["tcp"]["mbps"].as_f64().unwrap_or(0.0);
    let udp = row["udp"]["mbps"].as_f64().unwrap_or(0.0);
    assert!(tcp > 0.0, "TCP through the tunnel: {tcp} Mbit/s\n{stdout}");
    assert!(
        udp > 0.0,
        "UDP received through the tunnel: {udp} Mbit/s\n{stdout}"
    );
    assert_eq!(v["complete"], serde_json::Value::Bool(true));
    // No namespace of this run may be left behind.
    let ns = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains(&format!("mptemu-{pid}-bench")),
        "a bench namespace was left behind"
    );
    let _ = std::fs::remove_dir_all(&out);
}
