//! End to end: `mpt bench lte-gateway --quick` (about 17 s) builds its
//! testbed in namespaces (root, iperf3 and a release mptd next to `mpt`
//! needed) and reports VoIP figures. `mpt bench dtn-relay` needs a BPv7
//! agent (dtn7's dtnd) that CI machines do not have and that takes long to
//! build, so here only its refusal of a missing agent is checked: at once,
//! naming the path, without installing anything.

use std::path::PathBuf;
use std::process::Command;

fn run(scenario: &str) -> serde_json::Value {
    let mpt = PathBuf::from(env!("CARGO_BIN_EXE_mpt"));
    let mptd = std::env::var_os("MPTD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| mpt.with_file_name("mptd"));
    assert!(mptd.is_file(), "mptd not found at {}", mptd.display());
    let out = std::env::temp_dir().join(format!("mpt-bench-{scenario}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let res = Command::new(&mpt)
        .args(["bench", scenario, "--quick", "--out"])
        .arg(&out)
        .arg("--mptd")
        .arg(&mptd)
        .output()
        .expect("running mpt bench");
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success(),
        "mpt bench {scenario} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    for f in ["results.json", "results.csv", "plot.svg", "index.html"] {
        assert!(out.join(f).is_file(), "{f} missing in {}", out.display());
    }
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let _ = std::fs::remove_dir_all(&out);
    serde_json::from_str(&text).expect("results.json parses")
}

#[test]
fn bench_lte_gateway_quick() {
    assert!(mpt_emu::sys::is_root(), "needs root (network namespaces)");
    let v = run("lte-gateway");
    // The run's conditions (RunMeta) are recorded.
    let m = &v["meta"];
    assert!(!m["commit"].as_str().unwrap_or("").is_empty(), "{m}");
    assert_eq!(m["scenario_source"], "preset lte-gateway", "{m}");
    assert_eq!(m["scenario_sha256"].as_str().map_or(0, str::len), 64, "{m}");
    assert!(m["load_after"]["m1"].is_number(), "{m}");
    let l = &v["rows"][0]["lte"];
    assert!(l["voip"]["received"].as_u64().unwrap_or(0) > 0, "{l}");
    assert!(
        l["voip"]["delay_p50_ms"].as_f64().unwrap_or(0.0) > 0.0,
        "{l}"
    );
}

#[test]
fn dtn_relay_refuses_a_missing_agent_at_once() {
    let mpt = PathBuf::from(env!("CARGO_BIN_EXE_mpt"));
    let res = Command::new(&mpt)
        .args([
            "bench",
            "dtn-relay",
            "--quick",
            "--dtnd",
            "/nonexistent/dtnd",
        ])
        .output()
        .expect("running mpt bench");
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(!res.status.success(), "a missing dtnd must fail: {stderr}");
    assert!(
        stderr.contains("/nonexistent/dtnd"),
        "names the path: {stderr}"
    );
}
