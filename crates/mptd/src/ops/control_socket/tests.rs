//! The control socket's answers: the connection name hints, and every
//! refusal of a malformed or hostile request compared with the daemon's
//! own request parser from before mpt-api (`legacy_respond`, kept here
//! unchanged but for its answer type).

use std::net::IpAddr;

use serde_json::{json, Value};

use super::*;
use crate::ops::testing::one_connection;

#[test]
fn near_names_find_typos_and_parts_not_everything() {
    let names = ["client-001", "client-002", "client-010", "site-b", "Office"];
    let near = near_names("client-01", &names);
    assert!(near.contains(&"`client-010`".to_string()), "{near:?}");
    assert!(near.contains(&"`client-001`".to_string()), "{near:?}");
    assert!(near_names("client-01", &names).len() <= 5);
    assert_eq!(near_names("site-c", &names), ["`site-b`"]);
    assert_eq!(near_names("office", &names), ["`Office`"]);
    assert!(near_names("zzzzzz", &names).is_empty());
    let msg = unknown_connection("zzzzzz", &names);
    assert!(msg.contains("none of the 5"), "{msg}");
    assert!(!msg.contains("client-001"), "{msg}");
    let msg = unknown_connection("site-c", &names);
    assert!(msg.contains("did you mean `site-b`?"), "{msg}");
    assert!(unknown_connection("x", &[]).contains("no connections"));
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(edit_distance("", "abc"), 3);
}

fn error(msg: &str) -> Value {
    json!({"version": CONTROL_VERSION, "ok": false, "error": msg})
}

/// The daemon's `respond` before mpt-api: its own parser of requests.
fn legacy_respond(line: &[u8], source: &StatusSource) -> Value {
    let req: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return error(&format!("request is not valid JSON: {e}")),
    };
    match req.get("version").and_then(Value::as_u64) {
        Some(CONTROL_VERSION) => {}
        Some(v) => {
            return error(&format!(
                "unsupported version {v}, this daemon speaks {CONTROL_VERSION}"
            ))
        }
        None => return error("missing \"version\""),
    }
    let text = |key: &str| req.get(key).and_then(Value::as_str).map(str::to_string);
    let conn_path = || match (text("conn"), text("path")) {
        (Some(c), Some(p)) => Ok((c, p)),
        _ => Err(error("needs \"conn\" and \"path\"")),
    };
    let command = match req.get("request").and_then(Value::as_str) {
        Some("status") => {
            // `"conn"`: that connection only (absent or null: all).
            let only = match req.get("conn") {
                None | Some(Value::Null) => None,
                Some(Value::String(c)) => Some(c.as_str()),
                Some(_) => return error("\"conn\" must be a connection name"),
            };
            if let Some(name) = only {
                let conns = source.conns.list();
                let live = || conns.iter().filter(|c| !c.removed.load(Relaxed));
                if !live().any(|c| c.name == name) {
                    let names: Vec<&str> = live().map(|c| c.name.as_str()).collect();
                    return error(&unknown_connection(name, &names));
                }
            }
            return json!({"version": CONTROL_VERSION, "ok": true, "status": status_of(source, only)});
        }
        Some("path_state") => {
            let (conn, path) = match conn_path() {
                Ok(cp) => cp,
                Err(e) => return e,
            };
            let state = match text("state").as_deref() {
                Some("up") => AdminStatus::Up,
                Some("down") => AdminStatus::Down,
                Some("backup") => AdminStatus::Backup,
                _ => return error("\"state\" must be \"up\", \"down\" or \"backup\""),
            };
            Command::PathState { conn, path, state }
        }
        Some("path_weight") => {
            let (conn, path) = match conn_path() {
                Ok(cp) => cp,
                Err(e) => return e,
            };
            let Some(weight_out) = req
                .get("weight_out")
                .and_then(Value::as_u64)
                .and_then(|w| u32::try_from(w).ok())
            else {
                return error("\"weight_out\" must be a positive integer");
            };
            let weight_in = match req.get("weight_in") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_u64().and_then(|w| u16::try_from(w).ok()) {
                    Some(w) => Some(w),
                    None => return error("\"weight_in\" must be an integer in 1..=65535"),
                },
            };
            Command::PathWeight {
                conn,
                path,
                weight_out,
                weight_in,
            }
        }
        Some("reload") => Command::Reload,
        Some("path_add") => {
            let (Some(conn), Some(name)) = (text("conn"), text("name")) else {
                return error("needs \"conn\" and \"name\"");
            };
            if name.is_empty() || name.len() > mpt_proto::wire::MAX_NAME_LEN {
                return error(&format!(
                    "\"name\" must be 1 to {} bytes",
                    mpt_proto::wire::MAX_NAME_LEN
                ));
            }
            let ip = |key: &str| -> Result<Option<IpAddr>, Value> {
                match req.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v
                        .as_str()
                        .and_then(|t| t.parse::<IpAddr>().ok())
                        .map(Some)
                        .ok_or_else(|| error(&format!("\"{key}\" must be an IP address"))),
                }
            };
            let local = match ip("local") {
                Ok(Some(a)) => a,
                Ok(None) => return error("needs \"local\""),
                Err(e) => return e,
            };
            let remote = match ip("remote") {
                Ok(a) => a,
                Err(e) => return e,
            };
            let interface = match req.get("interface") {
                None | Some(Value::Null) => None,
                Some(Value::String(i)) if !i.is_empty() && i.len() <= 15 => Some(i.clone()),
                Some(_) => return error("\"interface\" must be an interface name"),
            };
            let weight = match req.get("weight_out").or_else(|| req.get("weight")) {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_u64().and_then(|w| u32::try_from(w).ok()) {
                    Some(w) => Some(w),
                    None => return error("\"weight_out\" must be a positive integer"),
                },
            };
            Command::PathAdd {
                conn,
                name,
                local,
                remote,
                interface,
                weight,
            }
        }
        Some("path_remove") => {
            let (conn, path) = match conn_path() {
                Ok(cp) => cp,
                Err(e) => return e,
            };
            let force = req.get("force").and_then(Value::as_bool).unwrap_or(false);
            Command::PathRemove { conn, path, force }
        }
        Some(other) => return error(&format!("unknown request \"{other}\"")),
        None => return error("missing \"request\""),
    };
    match execute(&source.commands, command) {
        Ok(answer) => serde_json::to_value(answer).unwrap(),
        Err(e) => error(&e),
    }
}

/// Requests a client should not send, each refused with its own message.
const HOSTILE: &[&str] = &[
    "",
    "garbage",
    "{",
    "[]",
    "[1, \"status\"]",
    "\"status\"",
    "null",
    "{}",
    r#"{"version":2,"request":"status"}"#,
    r#"{"version":"1","request":"status"}"#,
    r#"{"version":-1,"request":"status"}"#,
    r#"{"version":1.0,"request":"status"}"#,
    r#"{"version":1}"#,
    r#"{"version":1,"request":5}"#,
    r#"{"version":1,"request":"shutdown"}"#,
    r#"{"version":1,"request":"STATUS"}"#,
    r#"{"version":1,"request":"status","conn":5}"#,
    r#"{"version":1,"request":"status","conn":["c"]}"#,
    r#"{"version":1,"request":"status","conn":"nope"}"#,
    r#"{"version":1,"request":"status","conn":"C"}"#,
    r#"{"version":1,"request":"status","conn":""}"#,
    r#"{"version":1,"request":"path_state","conn":"c"}"#,
    r#"{"version":1,"request":"path_state","conn":"c","path":1,"state":"up"}"#,
    r#"{"version":1,"request":"path_state","conn":"c","path":"p0"}"#,
    r#"{"version":1,"request":"path_state","conn":"c","path":"p0","state":"UP"}"#,
    r#"{"version":1,"request":"path_state","conn":"c","path":"p0","state":"probing"}"#,
    r#"{"version":1,"request":"path_weight","conn":"c","path":"p0"}"#,
    r#"{"version":1,"request":"path_weight","conn":"c","path":"p0","weight_out":-1}"#,
    r#"{"version":1,"request":"path_weight","conn":"c","path":"p0","weight_out":4294967296}"#,
    r#"{"version":1,"request":"path_weight","conn":"c","path":"p0","weight_out":"3"}"#,
    r#"{"version":1,"request":"path_weight","conn":"c","path":"p0","weight_out":3,"weight_in":65536}"#,
    r#"{"version":1,"request":"path_weight","conn":"c","path":"p0","weight_out":3,"weight_in":1.5}"#,
    r#"{"version":1,"request":"path_add","conn":"c"}"#,
    r#"{"version":1,"request":"path_add","name":"n","local":"127.0.0.1"}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"","local":"127.0.0.1"}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn","local":"127.0.0.1"}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n"}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":null}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"here"}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"127.0.0.1:5"}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"127.0.0.1","remote":7}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"127.0.0.1","interface":""}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"127.0.0.1","interface":"abcdefghijklmnop"}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"127.0.0.1","interface":3}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"127.0.0.1","weight":"x"}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"127.0.0.1","weight_out":-2}"#,
    r#"{"version":1,"request":"path_remove","conn":"c"}"#,
    r#"{"version":1,"request":"path_remove","path":"p0"}"#,
    r#"{"version":1,"version":2,"request":"status"}"#,
    "{\"version\":1,\"request\":\"st\\u00e4tus\"}",
    "{\"version\":1,\"request\":\"status\"} trailing",
    "\u{feff}{\"version\":1,\"request\":\"status\"}",
];

/// Requests that reach the control loop, which in these tests is gone
/// (the daemon is shutting down): the parser took them.
const ACCEPTED: &[&str] = &[
    "{\"version\":1,\"request\":\"reload\"}\n",
    r#"{"version":1,"request":"reload","conn":5,"extra":[1]}"#,
    r#"{"version":1,"request":"path_state","conn":"c","path":"p0","state":"backup"}"#,
    r#"{"version":1,"request":"path_weight","conn":"c","path":"p0","weight_out":3,"weight_in":null}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"::1","remote":null,"interface":"eth0","weight":4}"#,
    r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"127.0.0.1","weight_out":null,"weight":"x"}"#,
    r#"{"version":1,"request":"path_remove","conn":"c","path":"p0","force":"yes"}"#,
];

#[test]
fn requests_are_refused_and_accepted_as_the_daemon_always_did() {
    let source = one_connection("c");
    let deep = "[".repeat(200) + &"]".repeat(200);
    let lines = HOSTILE
        .iter()
        .chain(ACCEPTED)
        .map(|l| l.as_bytes().to_vec())
        .chain([
            deep.into_bytes(),
            vec![0xff, 0xfe],
            b"{\"version\":1}\x00".to_vec(),
        ]);
    for line in lines {
        let text = String::from_utf8_lossy(&line).into_owned();
        let answer = respond(&line, &source);
        assert!(!answer.ok, "{text}");
        assert_eq!(
            answer.to_line(),
            legacy_respond(&line, &source).to_string(),
            "{text}"
        );
    }
    for line in ACCEPTED {
        assert_eq!(
            respond(line.as_bytes(), &source).error.as_deref(),
            Some("the daemon is busy or shutting down; try again"),
            "{line}"
        );
    }
    let unknown = respond(br#"{"version":1,"request":"status","conn":"C"}"#, &source);
    assert_eq!(
        unknown.error.as_deref(),
        Some("no connection `C`; did you mean `c`?")
    );
}

#[test]
fn status_is_answered_with_the_document() {
    let source = one_connection("c");
    for line in [
        r#"{"version":1,"request":"status"}"#,
        r#"{"version":1,"request":"status","conn":null}"#,
        r#"{"version":1,"request":"status","conn":"c"}"#,
    ] {
        let answer = respond(line.as_bytes(), &source);
        let text = answer.to_line();
        assert!(
            text.starts_with(r#"{"ok":true,"status":{"connections":[{"#),
            "{text}"
        );
        assert!(text.contains(r#""tunnel":"mpt0","uptime_s":"#), "{text}");
        assert!(text.ends_with(r#"},"version":1}"#), "{text}");
        let status = answer.status.unwrap();
        assert_eq!(status.connections().len(), 1);
        assert_eq!(status.cmd_port, None);
    }
}

#[test]
fn the_control_loop_s_answers_are_written_in_the_envelope() {
    let mut source = one_connection("c");
    let (commands, requests) = std::sync::mpsc::sync_channel::<command::Request>(1);
    source.commands = commands;
    let answers = [
        Ok(Response::ok()),
        Ok(Response {
            path: Some("wifi0".into()),
            id: Some(2),
            peer: Some("confirmed".into()),
            ..Response::ok()
        }),
        Ok(Response {
            changes: Some(vec!["connection c: added (client)".into()]),
            not_applied: Some(vec![]),
            ..Response::ok()
        }),
        Err("no connection named \"x\"".to_string()),
    ];
    let loop_thread = std::thread::spawn(move || {
        for answer in answers {
            let (command, reply) = requests.recv().unwrap();
            assert!(matches!(command, Command::Reload), "{command:?}");
            reply.send(answer).unwrap();
        }
    });
    let reload = br#"{"version":1,"request":"reload"}"#;
    let lines: Vec<String> = (0..4).map(|_| respond(reload, &source).to_line()).collect();
    loop_thread.join().unwrap();
    assert_eq!(
        lines,
        [
            r#"{"ok":true,"version":1}"#,
            r#"{"id":2,"ok":true,"path":"wifi0","peer":"confirmed","version":1}"#,
            r#"{"changes":["connection c: added (client)"],"not_applied":[],"ok":true,"version":1}"#,
            r#"{"error":"no connection named \"x\"","ok":false,"version":1}"#,
        ]
    );
}
