//! The status document against the JSON mptd wrote before it was typed:
//! a document built the way `mptd::ops::control_socket::status_of` built it, key by
//! key, must read into [`Status`] and write back to the same bytes.

use serde_json::{json, Value};

use super::*;
use crate::Response;

/// A handshake object as `mptd::ops::control_socket::handshake_json` built it.
fn handshake(base: u64) -> Value {
    json!({
        "initiations_sent": base,
        "initiations_processed": base + 1,
        "responses_sent": base + 2,
        "responses_received": base + 3,
        "completed": base + 4,
        "rekeys": base + 5,
        "expired": 0,
        "cookies_sent": 0,
        "cookies_received": 1,
        "refused": {
            "malformed": 1,
            "mac1": 2,
            "stale_mac2": 0,
            "decrypt": 3,
            "unknown_peer": 0,
            "replay": 4,
            "rate_limited": 0,
            "unknown_index": 5,
            "bad_cookie_reply": 0,
        },
    })
}

/// A path as `status_of` built it; `learnt`: the remote is not known yet
/// and nothing was received (the nulls a path starts with).
fn path(id: u64, learnt: bool) -> Value {
    json!({
        "name": format!("path{id}"),
        "id": id,
        "state": if learnt { "probing" } else { "up" },
        "local": format!("10.0.{id}.1:65022"),
        "remote": if learnt { Value::Null } else { json!(format!("10.0.{id}.2:65022")) },
        "weight_out": 100,
        "weight_in": 65535,
        "window": 1,
        "peer_weight_in": if learnt { Value::Null } else { json!(100) },
        "rtt_ms": if learnt { Value::Null } else { json!(1.234) },
        "rtt_min_ms": if learnt { Value::Null } else { json!(0.9) },
        "loss_pct": if learnt { Value::Null } else { json!(0.0) },
        "rate_bps": if learnt { Value::Null } else { json!(96_000_000u64) },
        "rate_confirmed": !learnt,
        "owd_ms": if learnt { Value::Null } else { json!(0.125) },
        "queue_ms": Value::Null,
        "rx_owd_ms": if learnt { Value::Null } else { json!(0.0) },
        "lossy": false,
        "share": if learnt { 0.0 } else { 0.5 },
        "rx_share": if learnt { 0.0 } else { 0.499 },
        "tx_packets": 12_345_678u64,
        "rx_packets": 2_345_678u64,
        "tx_bytes": 18_000_000_000u64,
        "rx_bytes": 300_000_000u64,
        "tx_data_packets": 12_300_000u64,
        "rx_data_packets": 2_300_000u64,
        "tx_data_bytes": 17_900_000_000u64,
        "rx_data_bytes": 290_000_000u64,
        "state_changes": 3,
        "last_rx_ms_ago": if learnt { Value::Null } else { json!(4.321) },
        "last_change_ms_ago": 61_234.5,
    })
}

/// A connection as `status_of` built it; `noise`: with the public-key
/// handshake (else a pre-shared key).
fn connection(name: &str, id: u32, noise: bool) -> Value {
    let le_ms: Vec<Value> = (0..12)
        .map(|k| {
            if k < 11 {
                json!(1u64 << k)
            } else {
                Value::Null
            }
        })
        .collect();
    json!({
        "name": name,
        "id": id,
        "reorder": {
            "in_order": 1_000_000,
            "held": 931,
            "late": 2,
            "duplicates": 0,
            "gaps_skipped": 1,
            "resets": 0,
            "held_now": 2,
            "longest_hold_ms": 0.0,
            "flow_bypass": 17,
            "grace_ms": 2.5,
            "timeout_ms": 52.0,
            "spread_ms": if noise { Value::Null } else { json!(3.75) },
            "hold": {
                "le_ms": le_ms,
                "counts": [900, 20, 5, 3, 2, 1, 0, 0, 0, 0, 0, 0],
                "sum_ms": 679.631,
                "max_ms": 17.002,
            },
        },
        "equalize": {
            "hold_ms": 3.6,
            "bulk_hold_ms": 287.0,
            "held": 120,
            "held_ms": 384.0,
        },
        "redundancy": {
            "mode": "auto",
            "copies_sent": 10,
            "copy_bytes": 14_000,
            "copies_first": 1,
            "duplicates": 9,
        },
        "handover": {
            "count": if noise { 0 } else { 2 },
            "last": if noise { Value::Null } else {
                json!({"from": "wifi", "to": "lte", "gap_ms": 84.4, "ms_ago": 12_345.0})
            },
        },
        "repair": {
            "enabled": true,
            "requested": 4,
            "requested_datagrams": 6,
            "congestion_holes": 0,
            "unrequested": 0,
            "reordered_holes": 2,
            "needless": 1,
            "received": 3,
            "duplicates": 0,
            "peer_requests": 5,
            "sent": 5,
            "missed": 0,
        },
        "drops": {
            "malformed": 0,
            "too_short": 0,
            "bad_version": 0,
            "unknown_connection": 0,
            "auth": 2,
            "replay": 1,
            "unsupported": 0,
            "no_path": 0,
            "no_remote": 0,
            "send_error": 0,
            "control_queue_full": 0,
            "no_session": 0,
            "handshake_rate_limited": 0,
            "tun_write": 0,
            "wrong_source": 0,
            "unauthenticated_control": 0,
            "inner_source": 0,
            "handshake_reflected": 0,
            "handshake_challenged": 0,
        },
        "session": {
            "encrypted": true,
            "handshake": if noise { "noise_ik" } else { "psk" },
            "cipher": "aes-256-gcm",
            "established": true,
            "handshakes": 2,
            "rekeys": 1,
            "key_age_s": 75.25,
            "noise": if noise { handshake(10) } else { Value::Null },
        },
        "paths": [path(0, false), path(1, true)],
    })
}

/// A daemon's whole document; `busy`: netlink, the public-key responder
/// and a shared port are on (else their objects are `null`).
fn document(busy: bool) -> Value {
    let mut noise = handshake(100);
    noise["refused"]["wrong_connection"] = json!(1);
    noise["refused"]["lost_race"] = json!(2);
    noise["refused"]["entropy"] = json!(0);
    json!({
        "tunnel": "mpt0",
        "uptime_s": 90_061,
        "drops": {"no_route": 3, "tun_read_errors": 0},
        "netlink": if busy {
            json!({"events": 12, "malformed": 0, "overruns": 1, "errors": 0})
        } else {
            Value::Null
        },
        "noise": if busy { noise } else { Value::Null },
        "shared_port": if busy {
            json!({
                "unknown_session": 1,
                "malformed": 2,
                "bad_mac1": 3,
                "initiations": 4,
                "queue_full": 0,
                "tun_write_errors": 0,
            })
        } else {
            Value::Null
        },
        "connections": if busy {
            json!([connection("site-b", 7, false), connection("client-001", 8, true)])
        } else {
            json!([connection("site-b", 7, false)])
        },
    })
}

/// The remote command port's counters, as `mptd::ops::cmd_port` adds them.
fn cmd_port() -> Value {
    json!({
        "accepted": 5,
        "refused": {
            "malformed": 0,
            "oversized": 0,
            "unknown_connection": 1,
            "no_key": 0,
            "auth": 2,
            "stale": 0,
            "replay": 0,
            "replay_full": 0,
            "forbidden": 1,
        },
        "udp_too_large": 0,
        "unanswered": 0,
        "tcp_busy": 0,
    })
}

#[test]
fn the_daemons_documents_read_and_write_back_byte_for_byte() {
    let mut over_cmd_port = document(true);
    over_cmd_port["cmd_port"] = cmd_port();
    for doc in [document(true), document(false), over_cmd_port] {
        // What the daemon wrote: a serde_json map, keys sorted.
        let written = doc.to_string();
        let status: Status = serde_json::from_str(&written).unwrap();
        assert!(status.other.is_empty(), "{:?}", status.other);
        assert_eq!(serde_json::to_string(&status).unwrap(), written);
        assert_eq!(serde_json::to_value(&status).unwrap(), doc);
        // Pretty (`mpt status --json`) too.
        assert_eq!(
            serde_json::to_string_pretty(&status).unwrap(),
            serde_json::to_string_pretty(&doc).unwrap()
        );
    }
}

#[test]
fn every_field_is_declared_in_key_order() {
    // A `Value` sorts its keys; the typed document must come out the same
    // with every optional part present.
    let mut doc = document(true);
    doc["cmd_port"] = cmd_port();
    let status: Status = serde_json::from_value(doc).unwrap();
    let typed = serde_json::to_string(&status).unwrap();
    let sorted = serde_json::to_value(&status).unwrap().to_string();
    assert_eq!(typed, sorted);
}

/// One response line exactly as mptd writes it (the daemon's own bytes:
/// sorted keys, no spaces), with one connection and one path whose remote
/// is not learnt yet.
const LINE: &str = concat!(
    r#"{"ok":true,"status":{"connections":[{"drops":{"auth":0,"bad_version":0,"#,
    r#""control_queue_full":0,"handshake_challenged":0,"handshake_rate_limited":0,"#,
    r#""handshake_reflected":0,"inner_source":0,"malformed":0,"no_path":0,"#,
    r#""no_remote":5,"no_session":0,"replay":0,"send_error":0,"too_short":0,"#,
    r#""tun_write":0,"unauthenticated_control":0,"unknown_connection":0,"#,
    r#""unsupported":0,"wrong_source":0},"equalize":{"bulk_hold_ms":0.0,"held":0,"#,
    r#""held_ms":0.0,"hold_ms":0.0},"handover":{"count":0,"last":null},"id":1,"#,
    r#""name":"site-b","paths":[{"id":0,"last_change_ms_ago":1503.117,"#,
    r#""last_rx_ms_ago":null,"local":"192.0.2.1:65022","loss_pct":null,"#,
    r#""lossy":false,"name":"eth1","owd_ms":null,"peer_weight_in":null,"#,
    r#""queue_ms":null,"rate_bps":null,"rate_confirmed":false,"remote":null,"#,
    r#""rtt_min_ms":null,"rtt_ms":null,"rx_bytes":0,"rx_data_bytes":0,"#,
    r#""rx_data_packets":0,"rx_owd_ms":null,"rx_packets":0,"rx_share":0.0,"#,
    r#""share":0.0,"state":"probing","state_changes":0,"tx_bytes":960,"#,
    r#""tx_data_bytes":0,"tx_data_packets":0,"tx_packets":12,"weight_in":1,"#,
    r#""weight_out":1,"window":1}],"redundancy":{"copies_first":0,"#,
    r#""copies_sent":0,"copy_bytes":0,"duplicates":0,"mode":"auto"},"#,
    r#""reorder":{"duplicates":0,"flow_bypass":0,"gaps_skipped":0,"#,
    r#""grace_ms":1.0,"held":0,"held_now":0,"hold":{"counts":[0,0,0,0,0,0,0,0,"#,
    r#"0,0,0,0],"le_ms":[1,2,4,8,16,32,64,128,256,512,1024,null],"max_ms":0.0,"#,
    r#""sum_ms":0.0},"in_order":0,"late":0,"longest_hold_ms":0.0,"resets":0,"#,
    r#""spread_ms":null,"timeout_ms":100.0},"repair":{"congestion_holes":0,"#,
    r#""duplicates":0,"enabled":false,"missed":0,"needless":0,"#,
    r#""peer_requests":0,"received":0,"reordered_holes":0,"requested":0,"#,
    r#""requested_datagrams":0,"sent":0,"unrequested":0},"session":{"#,
    r#""cipher":"chacha20-poly1305","encrypted":true,"established":false,"#,
    r#""handshake":"psk","handshakes":0,"key_age_s":null,"noise":null,"#,
    r#""rekeys":0}}],"drops":{"no_route":0,"tun_read_errors":0},"#,
    r#""netlink":null,"noise":null,"shared_port":null,"tunnel":"mpt0","#,
    r#""uptime_s":1},"version":1}"#
);

#[test]
fn a_response_line_of_the_daemon_reads_field_by_field() {
    let status = Status::from_response(LINE).unwrap();
    assert_eq!(status.tunnel.as_deref(), Some("mpt0"));
    assert_eq!(status.uptime_s, Some(1));
    assert_eq!(status.netlink, Some(None), "null, not missing");
    assert_eq!(status.noise, Some(None));
    assert_eq!(status.cmd_port, None, "only over the command port");
    let conn = status.connection("site-b").unwrap();
    assert_eq!(conn.id, Some(1));
    assert_eq!(conn.drops.as_ref().unwrap().no_remote, Some(5));
    assert_eq!(conn.handover.as_ref().unwrap().last, Some(None));
    let reorder = conn.reorder.as_ref().unwrap();
    assert_eq!(reorder.spread_ms, Some(None));
    let hold = reorder.hold.as_ref().unwrap();
    assert_eq!(hold.le_ms.as_ref().unwrap()[10], Some(1024));
    assert_eq!(hold.le_ms.as_ref().unwrap()[11], None);
    let session = conn.session.as_ref().unwrap();
    assert_eq!(session.cipher, Some(Some("chacha20-poly1305".into())));
    assert_eq!(session.established, Some(false));
    assert_eq!(session.key_age_s, Some(None));
    let [path] = conn.paths() else {
        panic!("{:?}", conn.paths)
    };
    assert_eq!(path.name.as_deref(), Some("eth1"));
    assert_eq!(path.remote, Some(None), "not learnt yet");
    assert_eq!(path.last_rx_ms_ago, Some(None), "nothing received yet");
    assert_eq!(path.tx_bytes, Some(960));
    assert_eq!(path.weight_in, Some(1));
    // Written back inside a response: the same line.
    assert_eq!(Response::status(status).to_line(), LINE);
}

#[test]
fn missing_fields_read_as_none_and_stay_missing() {
    // An older daemon, or a hand-made document.
    let doc = json!({"connections": [{"name": "c", "paths": [{"name": "p"}]}]});
    let status: Status = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(status.tunnel, None);
    assert_eq!(status.netlink, None, "missing, not null");
    let p = &status.connections()[0].paths()[0];
    assert_eq!(p.remote, None);
    assert_eq!(p.last_rx_ms_ago, None);
    assert_eq!(p.tx_bytes, None);
    assert_eq!(serde_json::to_value(&status).unwrap(), doc);
    // Nothing at all is an empty document.
    assert_eq!(
        serde_json::from_str::<Status>("{}").unwrap(),
        Status::default()
    );
    assert_eq!(serde_json::to_string(&Status::default()).unwrap(), "{}");
}

#[test]
fn unknown_fields_are_tolerated_and_kept() {
    // A newer daemon: a field at every level this version does not know.
    let mut doc = document(true);
    doc["threads"] = json!(4);
    doc["drops"]["new_reason"] = json!(9);
    doc["connections"][0]["mtu"] = json!(1400);
    doc["connections"][0]["drops"]["future"] = json!(1);
    doc["connections"][0]["paths"][0]["ecn"] = json!({"ce": 3});
    doc["connections"][0]["session"]["noise"] = handshake(1);
    doc["connections"][0]["session"]["noise"]["refused"]["other"] = json!(2);
    let status: Status = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(status.other["threads"], json!(4));
    assert_eq!(status.drops.as_ref().unwrap().other["new_reason"], json!(9));
    let conn = &status.connections()[0];
    assert_eq!(conn.other["mtu"], json!(1400));
    assert_eq!(conn.paths()[0].other["ecn"], json!({"ce": 3}));
    assert_eq!(serde_json::to_value(&status).unwrap(), doc);
}

#[test]
fn a_field_of_another_type_is_refused() {
    let mut doc = document(false);
    doc["connections"][0]["paths"][0]["tx_bytes"] = json!("many");
    let err = serde_json::from_value::<Status>(doc).unwrap_err();
    assert!(err.to_string().contains("invalid type"), "{err}");
}

#[test]
fn connection_level_refusals_have_no_daemon_wide_reasons() {
    let status: Status = serde_json::from_value(document(true)).unwrap();
    let conn = status.connection("client-001").unwrap();
    let noise = conn
        .session
        .as_ref()
        .unwrap()
        .noise
        .clone()
        .flatten()
        .unwrap();
    let refused = noise.refused.unwrap();
    assert_eq!(refused.mac1, Some(2));
    assert_eq!(refused.wrong_connection, None);
    let daemon = status.noise.clone().flatten().unwrap().refused.unwrap();
    assert_eq!(daemon.wrong_connection, Some(1));
    assert_eq!(daemon.entropy, Some(0));
    assert!(status.connection("nope").is_none());
}

/// Response lines captured from a running mptd (two daemons in network
/// namespaces, the public-key handshake, one path): before the peer
/// answered, and up with some traffic.
const CAPTURED: [&str; 2] = [
    include_str!("../../testdata/status-noise-keying.json"),
    include_str!("../../testdata/status-noise-up.json"),
];

#[test]
fn responses_captured_from_a_daemon_read_and_write_back_byte_for_byte() {
    for line in CAPTURED {
        let line = line.trim_end();
        let status = Status::from_response(line).unwrap();
        let conn = status.connection("site-a").unwrap();
        let session = conn.session.as_ref().unwrap();
        assert_eq!(session.handshake.as_deref(), Some("noise_ik"));
        assert!(matches!(session.noise, Some(Some(_))));
        assert!(matches!(status.noise, Some(Some(_))));
        assert_eq!(status.shared_port, Some(None));
        let path = &conn.paths()[0];
        assert_eq!(path.remote, Some(Some("10.77.0.2:65022".into())));
        assert_eq!(Response::status(status).to_line(), line);
    }
    let keying = Status::from_response(CAPTURED[0]).unwrap();
    let path = &keying.connections()[0].paths()[0];
    assert_eq!(path.last_rx_ms_ago, Some(None));
    assert_eq!(path.rtt_ms, Some(None));
}
