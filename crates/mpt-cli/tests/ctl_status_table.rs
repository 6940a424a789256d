//! The `mpt status` table, the request objects and response checking,
//! from canned documents (no daemon).

use std::time::Duration;

use mpt_cli::ctl::client::{parse_response, CtlError};
use mpt_cli::ctl::request::{PathState, Request};
use mpt_cli::ctl::status::{age, bit_rate, render, shorten_addrs, si, Traffic, WIDTH};
use serde_json::{json, Value};

/// A path as the daemon reports it, with every field.
fn path(i: usize, tx_bytes: u64, rx_bytes: u64) -> Value {
    let state = ["up", "backup", "probing", "down"][i % 4];
    json!({
        "name": format!("path{i:02}"),
        "state": state,
        "local": format!("192.168.{i}.10:65022"),
        "remote": format!("203.0.113.{}:65022", 100 + i),
        "weight_out": 100 * i as u64,
        "weight_in": 65535,
        "window": 8,
        "peer_weight_in": 100,
        "rtt_ms": 612.345,
        "rtt_min_ms": 600.4,
        "loss_pct": 12.345,
        "tx_packets": 123_456_789u64,
        "rx_packets": 98_765,
        "tx_bytes": tx_bytes,
        "rx_bytes": rx_bytes,
        "tx_data_packets": 123_456_000u64,
        "rx_data_packets": 98_000,
        "last_rx_ms_ago": 12.5,
        "last_change_ms_ago": 3_723_000.0,
    })
}

fn doc(paths: Vec<Value>) -> Value {
    json!({
        "tunnel": "mpt0",
        "uptime_s": 90061,
        "drops": {"no_route": 3, "tun_read_errors": 0},
        "connections": [{
            "name": "site-b",
            "id": 7,
            "drops": {"malformed": 0, "auth": 2, "replay": 1, "unknown_connection": 0,
                      "handshake_rate_limited": 0},
            "reorder": {"in_order": 5, "held": 0, "late": 0},
            "repair": {"enabled": true, "requested": 4, "received": 3, "missed": 0},
            "handover": {"count": 2, "last": {"from": "wifi", "to": "lte", "gap_ms": 84.4, "ms_ago": 12_345.0}},
            "session": {"encrypted": true, "established": true, "handshakes": 2, "cipher": "aes-256-gcm"},
            "paths": paths,
        }],
    })
}

fn twelve(tx: u64, rx: u64) -> Value {
    doc((1..=12).map(|i| path(i, tx, rx)).collect())
}

fn assert_fits(text: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= WIDTH,
            "line of {} columns:\n{line}\nin:\n{text}",
            line.chars().count()
        );
    }
}

/// The line of the given table (0: links, 1: traffic) for a path.
fn row<'a>(text: &'a str, name: &str, table: usize) -> &'a str {
    text.lines()
        .filter(|l| l.split_whitespace().next() == Some(name))
        .nth(table)
        .unwrap_or_else(|| panic!("no row {table} for {name} in\n{text}"))
}

#[test]
fn twelve_paths_fit_80_columns_with_rates() {
    let earlier = twelve(1_000_000, 5_000);
    let later = twelve(1_000_000 + 1_250_000, 5_000 + 125);
    let text = render(
        &later,
        Traffic::Rates {
            earlier: &earlier,
            elapsed: Duration::from_secs(1),
        },
        WIDTH,
    );
    assert_fits(&text);
    // 12 paths, each in both tables.
    for i in 1..=12 {
        let name = format!("path{i:02}");
        let links = row(&text, &name, 0);
        let load = row(&text, &name, 1);
        assert!(links.contains("65535"), "{links}");
        assert!(links.contains("12ms"), "last rx: {links}");
        assert!(links.contains("1h02m"), "last change: {links}");
        assert!(load.contains("612/600"), "rtt: {load}");
        assert!(load.contains("12.3%"), "loss: {load}");
        assert!(load.contains("123M"), "tx packets: {load}");
        assert!(load.contains("98.8k"), "rx packets: {load}");
        // 1.25 MB in 1 s = 10 Mbit/s; 125 B = 1000 bit/s.
        assert!(load.contains("10.0M"), "tx rate: {load}");
        assert!(load.trim_end().ends_with("1.00k"), "rx rate: {load}");
    }
    assert!(text.contains("TX bit/s"));
    assert!(
        text.starts_with("tunnel mpt0, up 1d01h; drops: no_route 3\n"),
        "{text}"
    );
    assert!(
        text.contains("site-b (id 7): session established, encrypted, aes-256-gcm (2 handshakes)")
    );
    assert!(text.contains("drops: auth 2, replay 1\n"), "{text}");
    assert!(text.contains("repair: received 3, requested 4\n"), "{text}");
    assert!(
        text.contains("handover: 2, last wifi -> lte, gap 84 ms, 12.3 s ago\n"),
        "{text}"
    );
    assert!(!text.contains("malformed"), "zero counters are left out");
    assert!(!text.contains("tun_read_errors"));
    assert!(!text.contains("holds:"), "nothing held, no line: {text}");
}

#[test]
fn what_the_receiver_held_back_gets_a_line() {
    let mut status = doc(vec![path(0, 1000, 2000)]);
    let conn = &mut status["connections"][0];
    conn["reorder"] = json!({"in_order": 5, "held": 400, "held_now": 2,
                             "hold": {"sum_ms": 292.0}});
    conn["equalize"] = json!({"hold_ms": 3.6, "held": 120, "held_ms": 384.0});
    let wide = render(&status, Traffic::Totals, 200);
    assert!(
        wide.contains(
            "holds: resequencer 400 held (mean 0.73 ms, 2 now), equalise 3.60 ms (120 held, mean 3.20 ms)\n"
        ),
        "{wide}"
    );
    // At 80 columns the line wraps instead of overflowing.
    assert_fits(&render(&status, Traffic::Totals, WIDTH));
    // Equalisation that held nothing yet, resequencer idle.
    let conn = &mut status["connections"][0];
    conn["reorder"] = json!({"in_order": 5, "held": 0});
    conn["equalize"] = json!({"hold_ms": 1.5, "held": 0, "held_ms": 0.0});
    let text = render(&status, Traffic::Totals, WIDTH);
    assert!(text.contains("holds: equalise 1.50 ms\n"), "{text}");
}

#[test]
fn addresses_fit_or_are_shortened() {
    // Typical IPv4 addresses with ports and weights fit whole.
    let typical: Vec<Value> = (1..=12)
        .map(|i| {
            let mut p = path(i, 0, 0);
            p["local"] = json!(format!("10.0.{i}.1:65022"));
            p["remote"] = json!(format!("10.0.{i}.2:65022"));
            p["weight_out"] = json!(100);
            p["weight_in"] = json!(100);
            p
        })
        .collect();
    let text = render(&doc(typical), Traffic::Totals, WIDTH);
    assert!(
        row(&text, "path12", 0).contains("10.0.12.1:65022 -> 10.0.12.2:65022"),
        "{text}"
    );
    // Wide weights leave less room: the ports go first.
    let text = render(&twelve(0, 0), Traffic::Totals, WIDTH);
    assert!(
        row(&text, "path12", 0).contains(" 192.168.12.10 -> 203.0.113.112 "),
        "{text}"
    );
    // Long IPv6 addresses are shortened to fit.
    let mut p = path(1, 0, 0);
    p["local"] = json!("[2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:65022");
    p["remote"] = json!("[2001:db8:1111:2222:3333:4444:5555:6666]:65022");
    let text = render(&doc(vec![p.clone(); 12]), Traffic::Totals, WIDTH);
    assert_fits(&text);
    assert!(row(&text, "path01", 0).contains('…'));
    // Without the pressure of a narrow table it is left whole.
    let wide = render(&doc(vec![p]), Traffic::Totals, 200);
    assert!(wide.contains("[2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:65022 -> "));
}

#[test]
fn shorten_addrs_drops_ports_then_cuts_the_middle() {
    let cell = "192.168.100.200:65022 -> 192.168.100.201:65022";
    assert_eq!(shorten_addrs(cell, 80), cell);
    assert_eq!(
        shorten_addrs(cell, 36),
        "192.168.100.200 -> 192.168.100.201"
    );
    let cut = shorten_addrs(cell, 20);
    assert_eq!(cut.chars().count(), 20, "{cut}");
    assert!(cut.contains(" -> "), "{cut}");
    assert_eq!(shorten_addrs("[fe80::1]:1 -> ?", 12), "fe80::1 -> ?");
    // A short side lends its room to the other.
    let cut = shorten_addrs("2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff -> ?", 24);
    assert_eq!(cut.chars().count(), 24, "{cut}");
    assert!(cut.ends_with(" -> ?"), "{cut}");
    // A named remote keeps its name and loses the port in parentheses.
    assert_eq!(
        shorten_addrs("10.0.0.1:65022 -> hub.example.net (192.0.2.7:65022)", 40),
        "10.0.0.1 -> hub.example.net (192.0.2.7)"
    );
}

#[test]
fn long_path_names_are_cut() {
    let mut p = path(1, 0, 0);
    p["name"] = json!("a-very-long-path-name-indeed");
    let text = render(&doc(vec![p]), Traffic::Totals, WIDTH);
    assert!(text.contains("a-very-long…"), "{text}");
    assert_fits(&text);
}

#[test]
fn missing_and_null_fields_show_as_dash() {
    let text = render(
        &json!({"connections": [{"name": "c", "paths": [{"name": "p"}]}]}),
        Traffic::Totals,
        WIDTH,
    );
    assert!(text.starts_with("tunnel -, up -\n"), "{text}");
    assert!(text.contains("c: session -"), "{text}");
    let links: Vec<&str> = row(&text, "p", 0).split_whitespace().collect();
    assert_eq!(links, ["p", "-", "-", "->", "-", "-/-", "-", "-"]);
    let load: Vec<&str> = row(&text, "p", 1).split_whitespace().collect();
    assert_eq!(load, ["p", "-", "-", "-", "-", "-", "-"]);

    // Nulls mean something: remote not learnt yet, nothing received yet,
    // loss not measured yet.
    let mut p = path(1, 0, 0);
    p["remote"] = Value::Null;
    p["last_rx_ms_ago"] = Value::Null;
    p["loss_pct"] = Value::Null;
    p["rtt_min_ms"] = Value::Null;
    let mut d = doc(vec![p]);
    d["connections"][0]["session"] = json!({"encrypted": false, "established": false});
    let text = render(&d, Traffic::Totals, WIDTH);
    assert!(
        row(&text, "path01", 0).contains("192.168.1.10:65022 -> ?"),
        "{text}"
    );
    assert!(row(&text, "path01", 0).contains("never"), "{text}");
    assert!(row(&text, "path01", 1).contains("612/-"), "{text}");
    assert!(text.contains("site-b (id 7): unencrypted"), "{text}");

    // Degenerate documents do not panic.
    for d in [
        json!({}),
        json!({"connections": []}),
        json!({"connections": [{}]}),
        json!(null),
    ] {
        let t = render(&d, Traffic::Totals, WIDTH);
        assert!(!t.is_empty());
    }
    assert!(render(&json!({}), Traffic::Totals, WIDTH).contains("no connections"));
    assert!(render(
        &json!({"connections": [{"name": "x"}]}),
        Traffic::Totals,
        WIDTH
    )
    .contains("no paths"));
}

#[test]
fn totals_with_once() {
    let text = render(&twelve(9_876_543_210, 0), Traffic::Totals, WIDTH);
    assert!(text.contains("TX BYTES"), "{text}");
    let load: Vec<&str> = row(&text, "path03", 1).split_whitespace().collect();
    assert_eq!(load[5..], ["9.88G", "0"]);
}

#[test]
fn rates_need_both_samples_and_a_forward_counter() {
    let s = Duration::from_millis(500);
    assert_eq!(
        bit_rate(Some(&json!(1000)), Some(&json!(1500)), s),
        Some(8000.0)
    );
    assert_eq!(bit_rate(Some(&json!(1500)), Some(&json!(1000)), s), None);
    assert_eq!(bit_rate(None, Some(&json!(1000)), s), None);
    assert_eq!(
        bit_rate(Some(&json!(0)), Some(&json!(1)), Duration::ZERO),
        None
    );

    // A path new in the second sample, and a daemon restart between the
    // samples (counter went back), show '-'.
    let earlier = doc(vec![path(1, 5_000, 5_000)]);
    let later = doc(vec![path(1, 1_000, 6_000), path(2, 1_000, 1_000)]);
    let text = render(
        &later,
        Traffic::Rates {
            earlier: &earlier,
            elapsed: Duration::from_secs(1),
        },
        WIDTH,
    );
    let p1: Vec<&str> = row(&text, "path01", 1).split_whitespace().collect();
    assert_eq!(p1[5..], ["-", "8.00k"]);
    let p2: Vec<&str> = row(&text, "path02", 1).split_whitespace().collect();
    assert_eq!(p2[5..], ["-", "-"]);
}

#[test]
fn number_and_age_formats() {
    assert_eq!(si(0.0), "0");
    assert_eq!(si(999.0), "999");
    assert_eq!(si(1234.0), "1.23k");
    assert_eq!(si(99_960.0), "100k");
    assert_eq!(si(1e15 * 5.0), "5.00P");
    assert_eq!(age(0.4), "0ms");
    assert_eq!(age(850.0), "850ms");
    assert_eq!(age(4_200.0), "4.2s");
    assert_eq!(age(37_000.0), "37s");
    assert_eq!(age(307_000.0), "5m07s");
    assert_eq!(age(11_100_000.0), "3h05m");
    assert_eq!(age(187_200_000.0), "2d04h");
}

#[test]
fn request_objects() {
    let s = |c: &str| c.to_string();
    let cases = [
        (Request::Status, json!({"version": 1, "request": "status"})),
        (Request::Reload, json!({"version": 1, "request": "reload"})),
        (
            Request::PathState {
                conn: s("c"),
                path: s("p"),
                state: PathState::Backup,
            },
            json!({"version": 1, "request": "path_state", "conn": "c", "path": "p", "state": "backup"}),
        ),
        (
            Request::PathWeight {
                conn: s("c"),
                path: s("p"),
                weight_out: 7,
                weight_in: None,
            },
            json!({"version": 1, "request": "path_weight", "conn": "c", "path": "p", "weight_out": 7}),
        ),
        (
            Request::PathWeight {
                conn: s("c"),
                path: s("p"),
                weight_out: 7,
                weight_in: Some(9),
            },
            json!({"version": 1, "request": "path_weight", "conn": "c", "path": "p",
                   "weight_out": 7, "weight_in": 9}),
        ),
        (
            Request::PathAdd {
                conn: s("c"),
                name: s("n"),
                local: "2001:db8::1".parse().unwrap(),
                remote: None,
                interface: Some(s("eth2")),
                weight_out: None,
            },
            json!({"version": 1, "request": "path_add", "conn": "c", "name": "n",
                   "local": "2001:db8::1", "interface": "eth2"}),
        ),
        (
            Request::PathRemove {
                conn: s("c"),
                path: s("p"),
                force: false,
            },
            json!({"version": 1, "request": "path_remove", "conn": "c", "path": "p"}),
        ),
        (
            Request::PathRemove {
                conn: s("c"),
                path: s("p"),
                force: true,
            },
            json!({"version": 1, "request": "path_remove", "conn": "c", "path": "p", "force": true}),
        ),
    ];
    for (req, want) in cases {
        assert_eq!(req.to_json(), want, "{req:?}");
        assert!(!req.to_json().to_string().contains('\n'));
    }
}

#[test]
fn responses_are_checked() {
    let ok = parse_response(br#"{"version":1,"ok":true,"status":{}}"#).unwrap();
    assert_eq!(ok["status"], json!({}));
    match parse_response(br#"{"version":1,"ok":false,"error":"no connection named \"x\""}"#) {
        Err(CtlError::Daemon(m)) => assert_eq!(m, "no connection named \"x\""),
        other => panic!("{other:?}"),
    }
    for bad in [
        &b"not json"[..],
        br#"[1]"#,
        br#"{"ok":true}"#,
        br#"{"version":2,"ok":true}"#,
        br#"{"version":1}"#,
    ] {
        assert!(
            matches!(parse_response(bad), Err(CtlError::Malformed(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// A server with `n` clients of two paths each; client `i` sent
/// `i * tx` bytes on each path.
fn many(n: usize, tx: u64) -> Value {
    let conns: Vec<Value> = (0..n)
        .map(|i| {
            let state = if i == 3 { "down" } else { "up" };
            let paths: Vec<Value> = (0..2)
                .map(|k| {
                    json!({
                        "name": format!("p{k}"),
                        "state": state,
                        "local": "0.0.0.0:65022",
                        "remote": format!("198.51.100.{}:{}", i + 1, 40000 + k),
                        "tx_bytes": tx * i as u64,
                        "rx_bytes": tx * i as u64 / 1000,
                    })
                })
                .collect();
            json!({
                "name": format!("client-with-a-long-name-{i:03}"),
                "session": {"encrypted": true, "established": i != 5, "key_age_s": 75.0},
                "paths": if i == 7 { vec![] } else { paths },
            })
        })
        .collect();
    json!({"tunnel": "mpt0", "uptime_s": 60, "connections": conns})
}

#[test]
fn many_connections_get_one_line_each() {
    use mpt_cli::ctl::status::{render_layout, Layout};
    let earlier = many(200, 0);
    let later = many(200, 1_000_000);
    let traffic = Traffic::Rates {
        earlier: &earlier,
        elapsed: Duration::from_secs(1),
    };
    let text = render(&later, traffic, WIDTH);
    assert_fits(&text);
    // Header, summary, column heads, 200 rows, the hint.
    assert_eq!(
        text.lines().filter(|l| l.starts_with("client-")).count(),
        200,
        "{text}"
    );
    assert!(!text.contains("RTT/MIN"), "no path tables:\n{text}");
    assert!(
        text.contains("200 connections: 197 up, 1 down, 1 keying, 1 waiting"),
        "{text}"
    );
    // Client 10: two paths of 10 MB/s each = 160 Mbit/s out, two paths
    // to one address (same IP, two ports: no "+N").
    let line = text
        .lines()
        .find(|l| l.starts_with("client-wi…name-000 "))
        .expect("names cut in the middle at 18");
    assert!(line.contains("2/2"), "{line}");
    let row10 = text.lines().nth(14).expect("row of client 10");
    assert!(row10.contains("198.51.100.11:40000"), "{row10}");
    assert!(row10.contains("160M"), "{row10}");
    assert!(row10.contains("160k"), "{row10}");
    assert!(row10.contains("1m15s"), "{row10}");
    assert!(!row10.contains('+'), "{row10}");
    let row3 = text.lines().nth(7).expect("row of client 3");
    assert!(row3.contains("down") && row3.contains("0/2"), "{row3}");
    // Few connections: full detail; either layout can be forced.
    let few = many(8, 5);
    assert!(render(&few, Traffic::Totals, WIDTH).contains("RTT/MIN"));
    let brief = render_layout(&few, Traffic::Totals, WIDTH, Layout::Compact);
    assert!(
        !brief.contains("RTT/MIN") && brief.contains("TX BYTES"),
        "{brief}"
    );
    let full = render_layout(&later, Traffic::Totals, WIDTH, Layout::Full);
    assert!(full.contains("RTT/MIN"));
}

#[test]
fn one_connection_is_picked_or_close_names_suggested() {
    use mpt_cli::ctl::status::only_connection;
    let all = many(20, 1);
    let one = only_connection(all.clone(), "client-with-a-long-name-007").expect("known");
    assert_eq!(one["connections"].as_array().map(Vec::len), Some(1));
    let e = only_connection(all.clone(), "client-with-a-long-name-07").unwrap_err();
    assert!(
        e.contains("did you mean `client-with-a-long-name-007`"),
        "{e}"
    );
    let e = only_connection(all, "zzz").unwrap_err();
    assert!(
        e.contains("no connection `zzz`") && !e.contains("client-"),
        "{e}"
    );
    assert_eq!(
        Request::StatusOf { conn: "c1".into() }.to_json(),
        json!({"version": 1, "request": "status", "conn": "c1"})
    );
}
