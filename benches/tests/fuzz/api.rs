//! The control API's request and response decoding (mpt-api): what the
//! control socket and the remote command port read from clients, and
//! what `mpt` reads back.

use mpt_api::{Request, Response};
use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::harness::fuzz;

/// The wire format's longest path name (mpt-proto's `MAX_NAME_LEN`).
const MAX_NAME: usize = mpt_proto::wire::MAX_NAME_LEN;

/// JSON scalars a request field could plausibly hold, and some that it
/// should not.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (0u64..70_000).prop_map(Value::from),
        prop_oneof![
            Just("status"),
            Just("path_state"),
            Just("path_weight"),
            Just("path_add"),
            Just("path_remove"),
            Just("reload"),
            Just("up"),
            Just("down"),
            Just("backup"),
            Just("site-b"),
            Just("lte"),
            Just("10.0.0.1"),
            Just("fd00::1"),
            Just(""),
            Just("eth0"),
            Just("x\u{0}y"),
            Just("a-very-long-path-name-that-goes-on-and-on"),
        ]
        .prop_map(|s| Value::from(s.to_string())),
        ".{0,24}".prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(2, 8, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(Value::Array)
    })
}

/// A JSON object of (mostly) the request's fields.
fn request_object() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("version"),
        Just("request"),
        Just("conn"),
        Just("path"),
        Just("state"),
        Just("weight_out"),
        Just("weight_in"),
        Just("weight"),
        Just("name"),
        Just("local"),
        Just("remote"),
        Just("interface"),
        Just("force"),
        Just("id"),
        Just("other"),
    ];
    (any::<bool>(), prop::collection::vec((key, value()), 0..8)).prop_map(|(v1, fields)| {
        let mut m = Map::new();
        if v1 {
            m.insert("version".into(), Value::from(mpt_api::CONTROL_VERSION));
        }
        for (k, v) in fields {
            m.insert(k.to_string(), v);
        }
        Value::Object(m)
    })
}

fn roundtrip(line: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(r) = Request::parse(line, MAX_NAME) {
        let again = Request::parse(r.to_line().as_bytes(), MAX_NAME);
        prop_assert_eq!(again.as_ref(), Ok(&r), "line {}", r.to_line());
    }
    Ok(())
}

#[test]
fn api_request() {
    let input = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        request_object().prop_map(|v| serde_json::to_vec(&v).expect("json")),
    ];
    fuzz("api_request", 512, input, |line| roundtrip(&line));
}

#[test]
fn api_response() {
    let key = prop_oneof![
        Just("changes"),
        Just("error"),
        Just("id"),
        Just("not_applied"),
        Just("ok"),
        Just("path"),
        Just("peer"),
        Just("version"),
        Just("status"),
        Just("x"),
    ];
    let object = prop::collection::vec((key, value()), 0..8).prop_map(|fields| {
        let mut m = Map::new();
        for (k, v) in fields {
            m.insert(k.to_string(), v);
        }
        serde_json::to_vec(&Value::Object(m)).expect("json")
    });
    let input = prop_oneof![prop::collection::vec(any::<u8>(), 0..64), object];
    fuzz("api_response", 512, input, |line| {
        if let Ok(r) = Response::parse(&line) {
            let text = serde_json::to_vec(&r).expect("a response serialises");
            prop_assert_eq!(Response::parse(&text), Ok(r));
        }
        Ok(())
    });
}
