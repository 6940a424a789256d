//! The control plane with real daemons: `mpt status/path/reload` against a
//! running `mptd`, the metrics endpoint, and hostile control requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpt_e2e::*;
use serde_json::{json, Value};

/// Runs `mpt --socket SOCK ARGS`; returns (exit code, stdout, stderr).
fn mpt(socket: &Path, args: &[&str]) -> (i32, String, String) {
    mpt_ctl(socket, args).expect("run mpt")
}

fn socket(bed: &TestBed, side: Side) -> PathBuf {
    bed.control_socket(side)
}

fn status_json(sock: &Path) -> Value {
    let (code, out, err) = mpt(sock, &["status", "--json"]);
    assert_eq!(code, 0, "mpt status --json failed: {err}");
    serde_json::from_str(&out).expect("status --json is JSON")
}

fn path_field<'a>(status: &'a Value, path: &str, field: &str) -> &'a Value {
    status["connections"][0]["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .find(|p| p["name"] == path)
        .map(|p| &p[field])
        .unwrap_or(&Value::Null)
}

#[test]
fn operator_changes_show_in_status_and_steer_traffic() {
    let spec = BedSpec::uniform(2, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    let sock = socket(&bed, Side::A);
    let conn = conn_name(Side::A);
    let p1 = path_name(1);

    // The human table names both paths; --json carries the contract fields.
    let (code, table, err) = mpt(&sock, &["status", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains(&path_name(0)) && table.contains(&p1),
        "{table}"
    );
    let st = status_json(&sock);
    for field in [
        "state",
        "local",
        "remote",
        "weight_out",
        "weight_in",
        "rtt_ms",
        "loss_pct",
        "tx_packets",
        "rx_packets",
        "tx_bytes",
        "rx_bytes",
    ] {
        assert!(
            st["connections"][0]["paths"][0].get(field).is_some(),
            "status lacks {field}: {st}"
        );
    }

    // Path 1 down by hand: reported down, and it carries no data.
    let (code, _, err) = mpt(&sock, &["path", conn, &p1, "down"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(path_field(&status_json(&sock), &p1, "state"), "down");
    let before = bed.tx_data(Side::A).expect("tx");
    bed.transfer(Side::A, Family::V4, 8 << 20)
        .expect("transfer with one path down");
    let after = bed.tx_data(Side::A).expect("tx");
    assert_eq!(after[1], before[1], "path 1 carried data while down");
    assert!(after[0] > before[0]);

    // Back up, then weights 3:1 (the harness configures 100 on each path).
    let (code, _, err) = mpt(&sock, &["path", conn, &p1, "up"]);
    assert_eq!(code, 0, "{err}");
    bed.wait_path_state(Side::A, 1, "up", Instant::now(), Duration::from_secs(5))
        .expect("p1 up");
    let (code, _, err) = mpt(&sock, &["path", conn, &path_name(0), "weight", "300"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        path_field(&status_json(&sock), &path_name(0), "weight_out"),
        300
    );
    let before = bed.tx_data(Side::A).expect("tx");
    bed.transfer(Side::A, Family::V4, 16 << 20)
        .expect("transfer");
    let after = bed.tx_data(Side::A).expect("tx");
    let (d0, d1) = ((after[0] - before[0]) as f64, (after[1] - before[1]) as f64);
    let ratio = d0 / d1.max(1.0);
    assert!(
        (2.7..=3.3).contains(&ratio),
        "shares {d0}:{d1} (ratio {ratio:.2}), expected 3:1 within 10 %"
    );

    // Unknown names are errors with exit code 1 and change nothing.
    let (code, _, err) = mpt(&sock, &["path", conn, "nope", "down"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nope"), "{err}");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn reload_applies_a_valid_file_and_a_broken_one_changes_nothing() {
    let spec = BedSpec::uniform(2, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    let sock = socket(&bed, Side::A);
    let cfg = bed.config_path(Side::A);
    let original = std::fs::read_to_string(&cfg).expect("config");

    // weight_out of path 0: 100 -> 400, through `mpt reload`.
    let changed = original.replacen("weight_out = 100\n", "weight_out = 400\n", 1);
    assert_ne!(changed, original);
    std::fs::write(&cfg, &changed).expect("write config");
    let (code, out, err) = mpt(&sock, &["reload"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("weight_out 100 -> 400"), "{out}");
    assert_eq!(
        path_field(&status_json(&sock), &path_name(0), "weight_out"),
        400
    );

    // A broken file: error naming file and line, nothing changes, traffic flows.
    std::fs::write(&cfg, format!("{changed}\nthis is not toml\n")).expect("write config");
    let (code, _, err) = mpt(&sock, &["reload"]);
    assert_eq!(code, 1, "a broken reload must fail");
    assert!(
        err.contains("a.toml:"),
        "error should name the file and line: {err}"
    );
    assert_eq!(
        path_field(&status_json(&sock), &path_name(0), "weight_out"),
        400
    );
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("traffic after a failed reload");

    // SIGHUP re-reads too.
    std::fs::write(&cfg, &original).expect("write config");
    let pid = bed.daemon(Side::A).pid().expect("pid");
    run("kill", &["-HUP", &pid.to_string()]).expect("SIGHUP");
    wait_until("SIGHUP reload", Duration::from_secs(5), POLL, || {
        Ok((path_field(&status_json(&sock), &path_name(0), "weight_out") == 100).then_some(()))
    })
    .expect("weight back to 100 after SIGHUP");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn metrics_endpoint_serves_the_documented_series() {
    let spec = BedSpec::uniform(2, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    bed.stop_daemon(Side::A).expect("stop A");
    let cfg = std::fs::read_to_string(bed.config_path(Side::A)).expect("config");
    let with_metrics = cfg.replacen("[daemon]\n", "[daemon]\nmetrics = \"127.0.0.1:19469\"\n", 1);
    bed.restart_daemon(Side::A, Some(&with_metrics))
        .expect("restart with metrics");
    bed.wait_all_up(Duration::from_secs(5)).expect("paths up");
    // Paced over about a second, so the peer's feedback (every quarter
    // RTT, at least 10 ms apart) yields delivery-rate samples on both
    // paths; an unpaced 2 MB on loopback is over in a few milliseconds.
    let t = bed
        .start_transfer(Side::A, Family::V4, 8 << 20, Some(8 << 20))
        .expect("start transfer");
    t.finish(transfer_timeout(8 << 20)).expect("some traffic");
    let page = bed
        .ns(Side::A)
        .run_in("scrape metrics", Duration::from_secs(5), || {
            let mut s = std::net::TcpStream::connect("127.0.0.1:19469")?;
            s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
            let mut page = String::new();
            s.read_to_string(&mut page)?;
            Ok(page)
        })
        .expect("scrape");
    assert!(page.starts_with("HTTP/1.0 200"), "{page}");
    // The OpenMetrics text format, which names a counter family without
    // `_total` and gives its samples the suffix.
    assert!(
        page.contains("\r\nContent-Type: application/openmetrics-text; version=1.0.0"),
        "{page}"
    );
    assert!(page.ends_with("\n# EOF\n"), "{page}");
    for series in [
        "# TYPE mpt_path_up gauge",
        "# TYPE mpt_path_rtt_seconds gauge",
        "# TYPE mpt_path_loss_ratio gauge",
        "# TYPE mpt_path_tx_bytes counter",
        "# TYPE mpt_path_rx_packets counter",
        "# TYPE mpt_drops counter",
        "# TYPE mpt_path_state_changes counter",
        "mpt_drops_total{conn=",
        "reason=\"malformed\"}",
        "mpt_path_up{conn=",
    ] {
        assert!(page.contains(series), "metrics lack {series}:\n{page}");
    }
    // Every sample is labelled by connection (conn="" for what belongs to
    // none), so a server with many clients can be broken down. (A
    // histogram bucket's `le` comes first.)
    for (series, _) in samples(&page) {
        assert!(
            series.contains("{conn=\"") || series.contains(",conn=\""),
            "sample without a conn label: {series}"
        );
    }
    let tx_line = page
        .lines()
        .find(|l| {
            l.starts_with("mpt_path_tx_bytes_total{")
                && l.contains(&format!("path=\"{}\"", path_name(0)))
        })
        .expect("tx bytes of path 0");
    let value: f64 = tx_line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("number");
    assert!(value > 1e6, "{tx_line}");
    // Each path went from probing to up once at least.
    let changes_line = page
        .lines()
        .find(|l| {
            l.starts_with("mpt_path_state_changes_total{")
                && l.contains(&format!("path=\"{}\"", path_name(0)))
        })
        .expect("state changes of path 0");
    let changes: f64 = changes_line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("number");
    assert!(changes >= 1.0, "{changes_line}");
    check_estimator_and_hold_series(&page);
    // The status document carries the same histogram.
    let reorder = &status_json(&socket(&bed, Side::A))["connections"][0]["reorder"];
    assert_eq!(
        reorder["hold"]["counts"].as_array().map(Vec::len),
        Some(12),
        "{reorder}"
    );
    assert_eq!(reorder["hold"]["le_ms"][0], 1, "{reorder}");
    assert!(reorder["hold"]["le_ms"][11].is_null(), "{reorder}");
    assert!(reorder["longest_hold_ms"].as_f64().is_some(), "{reorder}");
    bed.shutdown().expect("clean shutdown");
}

/// Every sample of the page as (series with labels, value); panics on a
/// line that is neither a comment nor `name{labels} number`.
fn samples(page: &str) -> Vec<(&str, f64)> {
    let body = page.split("\r\n\r\n").nth(1).expect("HTTP body");
    body.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            let v = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|e| panic!("bad value in {l:?}: {e}")),
            };
            (series, v)
        })
        .collect()
}

/// The adaptive scheduler's per-path estimates and the resequencer's
/// per-connection figures (issue 12), after a transfer from A.
fn check_estimator_and_hold_series(page: &str) {
    for kind in [
        "# TYPE mpt_path_rate_bits_per_second gauge",
        "# TYPE mpt_path_rate_confirmed gauge",
        "# TYPE mpt_path_relative_owd_seconds gauge",
        "# TYPE mpt_path_queue_delay_seconds gauge",
        "# TYPE mpt_path_lossy gauge",
        "# TYPE mpt_path_share_ratio gauge",
        "# TYPE mpt_reorder_held_packets gauge",
        "# TYPE mpt_reorder_longest_hold_seconds gauge",
        "# TYPE mpt_reorder_hold_seconds histogram",
        "# TYPE mpt_repair counter",
        "# TYPE mpt_redundancy_copies counter",
        "# TYPE mpt_redundancy_bytes counter",
    ] {
        assert!(page.contains(kind), "metrics lack {kind}:\n{page}");
    }
    let all = samples(page);
    let of = |name: &str| -> Vec<(&str, f64)> {
        all.iter()
            .filter(|(s, _)| s.starts_with(name) && s[name.len()..].starts_with('{'))
            .copied()
            .collect()
    };
    let per_path = |name: &str| -> Vec<f64> {
        (0..2)
            .map(|i| {
                let want = format!("path=\"{}\"", path_name(i));
                of(name)
                    .iter()
                    .find(|(s, _)| s.contains(&want))
                    .map(|&(_, v)| v)
                    .unwrap_or_else(|| panic!("no {name} for {want}:\n{page}"))
            })
            .collect()
    };
    // Both paths carried the transfer: a measured rate (bit/s, so far above
    // 1e5 for MBs in a second or two on loopback), flags 0 or 1.
    for v in per_path("mpt_path_rate_bits_per_second") {
        assert!(v > 1e5 && v.is_finite(), "rate {v}:\n{page}");
    }
    for name in ["mpt_path_rate_confirmed", "mpt_path_lossy"] {
        for v in per_path(name) {
            assert!(v == 0.0 || v == 1.0, "{name} {v}");
        }
    }
    // Shares are smoothed from 0, so right after one transfer they add
    // up to less than 1; both paths carried some of it.
    let shares = per_path("mpt_path_share_ratio");
    assert!(
        shares.iter().all(|s| *s > 0.0 && *s <= 1.0) && shares.iter().sum::<f64>() <= 1.05,
        "shares {shares:?}:\n{page}"
    );
    // Relative delays and queueing delays are seconds, not ms: same-host
    // paths differ by far less than a second.
    for name in [
        "mpt_path_relative_owd_seconds",
        "mpt_path_queue_delay_seconds",
    ] {
        for (s, v) in of(name) {
            assert!((0.0..1.0).contains(&v), "{s} {v}");
        }
    }
    let held = of("mpt_reorder_held_packets");
    assert_eq!(held.len(), 1, "{page}");
    assert!(held[0].0.contains("conn=\""), "{:?}", held[0]);
    assert_eq!(of("mpt_reorder_longest_hold_seconds").len(), 1, "{page}");
    // The histogram: twelve cumulative buckets ending in +Inf = _count.
    let buckets = of("mpt_reorder_hold_seconds_bucket");
    assert_eq!(buckets.len(), 12, "{page}");
    assert!(
        buckets
            .last()
            .is_some_and(|(s, _)| s.contains("le=\"+Inf\"")),
        "{buckets:?}"
    );
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "not cumulative: {buckets:?}"
    );
    let count = of("mpt_reorder_hold_seconds_count");
    let sum = of("mpt_reorder_hold_seconds_sum");
    assert_eq!(count.len(), 1, "{page}");
    assert_eq!(sum.len(), 1, "{page}");
    assert_eq!(count[0].1, buckets[11].1, "{page}");
    assert!(sum[0].1 >= 0.0, "{page}");
}

#[test]
fn hostile_control_requests_get_errors_and_forwarding_continues() {
    let spec = BedSpec::uniform(2, Family::V4).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    let sock = socket(&bed, Side::A);
    let ask = |line: &[u8]| -> Value {
        let s = UnixStream::connect(&sock).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        (&s).write_all(line).expect("write");
        let mut reply = String::new();
        BufReader::new(&s).read_line(&mut reply).expect("reply");
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("reply {reply:?} is not JSON: {e}"))
    };
    for bad in [
        &b"not json at all\n"[..],
        b"{\"version\":99,\"request\":\"status\"}\n",
        b"{\"version\":1,\"request\":\"self_destruct\"}\n",
        b"{\"version\":1}\n",
        b"{\"version\":1,\"request\":\"path_weight\",\"conn\":\"x\",\"path\":\"y\",\"weight_out\":-5}\n",
        b"[1,2,3]\n",
        b"{\"version\":1,\"request\":\"status\",\"conn\":5}\n",
        b"{\"version\":1,\"request\":\"status\",\"conn\":\"no-such-connection\"}\n",
    ] {
        let r = ask(bad);
        assert_eq!(r["ok"], false, "{} -> {r}", String::from_utf8_lossy(bad));
        assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    }
    let mut huge = vec![b'x'; 100 * 1024];
    huge.push(b'\n');
    let r = ask(&huge);
    assert_eq!(r["ok"], false, "{r}");
    // The daemon still answers and forwards.
    let st = bed
        .daemon(Side::A)
        .request(&json!({"version": 1, "request": "status"}))
        .expect("status");
    assert_eq!(st["ok"], true);
    // One connection by name; a near miss is refused with the real name.
    let name = st["status"]["connections"][0]["name"]
        .as_str()
        .expect("a connection name")
        .to_string();
    let one =
        ask(format!("{{\"version\":1,\"request\":\"status\",\"conn\":\"{name}\"}}\n").as_bytes());
    assert_eq!(
        one["status"]["connections"].as_array().map(Vec::len),
        Some(1),
        "{one}"
    );
    let (code, out, _) = mpt(&sock, &["status", &name, "--once"]);
    assert_eq!(code, 0);
    assert!(out.contains("RTT/MIN"), "{out}");
    let (code, _, err) = mpt(&sock, &["status", &format!("{name}x")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("did you mean `{name}`?")), "{err}");
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("traffic after hostile requests");
    bed.shutdown().expect("clean shutdown");
}
