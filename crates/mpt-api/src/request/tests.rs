//! Requests: the objects a client sends, and the daemon's reading of
//! them with its exact messages.

use serde_json::json;

use super::*;

/// mpt-proto's `MAX_NAME_LEN`.
const MAX_NAME: usize = 32;

fn every_request() -> Vec<Request> {
    let s = |c: &str| c.to_string();
    vec![
        Request::Status,
        Request::StatusOf { conn: s("c1") },
        Request::Reload,
        Request::PathState {
            conn: s("c"),
            path: s("p"),
            state: PathState::Backup,
        },
        Request::PathWeight {
            conn: s("c"),
            path: s("p"),
            weight_out: 7,
            weight_in: None,
        },
        Request::PathWeight {
            conn: s("c"),
            path: s("p"),
            weight_out: 7,
            weight_in: Some(9),
        },
        Request::PathAdd {
            conn: s("c"),
            name: s("n"),
            local: "2001:db8::1".parse().unwrap(),
            remote: None,
            interface: Some(s("eth2")),
            weight_out: None,
        },
        Request::PathAdd {
            conn: s("c"),
            name: s("n"),
            local: "192.0.2.1".parse().unwrap(),
            remote: Some("198.51.100.7".parse().unwrap()),
            interface: None,
            weight_out: Some(50),
        },
        Request::PathRemove {
            conn: s("c"),
            path: s("p"),
            force: false,
        },
        Request::PathRemove {
            conn: s("c"),
            path: s("p"),
            force: true,
        },
    ]
}

#[test]
fn request_objects_leave_out_what_was_not_given() {
    assert_eq!(
        Request::PathAdd {
            conn: "c".into(),
            name: "n".into(),
            local: "2001:db8::1".parse().unwrap(),
            remote: None,
            interface: Some("eth2".into()),
            weight_out: None,
        }
        .to_json(),
        json!({"version": 1, "request": "path_add", "conn": "c", "name": "n",
               "local": "2001:db8::1", "interface": "eth2"})
    );
    assert_eq!(
        Request::StatusOf { conn: "c1".into() }.to_line(),
        r#"{"conn":"c1","request":"status","version":1}"#
    );
}

#[test]
fn the_daemon_reads_back_what_a_client_sends() {
    for req in every_request() {
        let line = req.to_line();
        assert!(!line.contains('\n'));
        assert_eq!(Request::parse(line.as_bytes(), MAX_NAME), Ok(req), "{line}");
    }
}

#[test]
fn the_daemon_reads_leniently_where_it_always_did() {
    let parse = |v: serde_json::Value| Request::from_value(&v, MAX_NAME);
    // `null` is missing; unknown fields are ignored.
    assert_eq!(
        parse(json!({"version": 1, "request": "status", "conn": null, "x": 1})),
        Ok(Request::Status)
    );
    // `weight` is `weight_out`'s older name; a null `weight_out` is missing.
    let add = |extra: serde_json::Value| {
        let mut v = json!({"version": 1, "request": "path_add", "conn": "c", "name": "n",
                           "local": "192.0.2.1"});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        parse(v)
    };
    let weight = |r: Result<Request, RequestError>| match r {
        Ok(Request::PathAdd { weight_out, .. }) => weight_out,
        other => panic!("{other:?}"),
    };
    assert_eq!(weight(add(json!({"weight": 5}))), Some(5));
    assert_eq!(weight(add(json!({"weight_out": 6, "weight": 5}))), Some(6));
    assert_eq!(weight(add(json!({"weight_out": null, "weight": 5}))), None);
    // A weight of 0 passes here; the control loop refuses it.
    assert!(parse(
        json!({"version": 1, "request": "path_weight", "conn": "c", "path": "p",
               "weight_out": 0, "weight_in": 0})
    )
    .is_ok());
    // `force` that is not a boolean is not forced.
    assert_eq!(
        parse(
            json!({"version": 1, "request": "path_remove", "conn": "c", "path": "p",
                     "force": "yes"})
        ),
        Ok(Request::PathRemove {
            conn: "c".into(),
            path: "p".into(),
            force: false
        })
    );
}

#[test]
fn malformed_requests_get_the_daemons_messages() {
    let msg = |line: &str| {
        Request::parse(line.as_bytes(), MAX_NAME)
            .unwrap_err()
            .to_string()
    };
    assert!(msg("{").starts_with("request is not valid JSON: "));
    assert_eq!(msg("[1]"), "missing \"version\"");
    assert_eq!(msg(r#"{"request":"status"}"#), "missing \"version\"");
    assert_eq!(msg(r#"{"version":"1"}"#), "missing \"version\"");
    assert_eq!(
        msg(r#"{"version":2,"request":"status"}"#),
        "unsupported version 2, this daemon speaks 1"
    );
    assert_eq!(msg(r#"{"version":1}"#), "missing \"request\"");
    assert_eq!(
        msg(r#"{"version":1,"request":"fly"}"#),
        "unknown request \"fly\""
    );
    assert_eq!(
        msg(r#"{"version":1,"request":"status","conn":3}"#),
        "\"conn\" must be a connection name"
    );
    assert_eq!(
        msg(r#"{"version":1,"request":"path_state","conn":"c","state":"up"}"#),
        "needs \"conn\" and \"path\""
    );
    assert_eq!(
        msg(r#"{"version":1,"request":"path_state","conn":"c","path":"p","state":"sideways"}"#),
        "\"state\" must be \"up\", \"down\" or \"backup\""
    );
    assert_eq!(
        msg(r#"{"version":1,"request":"path_weight","conn":"c","path":"p","weight_out":-1}"#),
        "\"weight_out\" must be a positive integer"
    );
    assert_eq!(
        msg(
            r#"{"version":1,"request":"path_weight","conn":"c","path":"p","weight_out":1,"weight_in":70000}"#
        ),
        "\"weight_in\" must be an integer in 1..=65535"
    );
    assert_eq!(
        msg(r#"{"version":1,"request":"path_add","conn":"c","local":"192.0.2.1"}"#),
        "needs \"conn\" and \"name\""
    );
    let long = "n".repeat(MAX_NAME + 1);
    assert_eq!(
        msg(&format!(
            r#"{{"version":1,"request":"path_add","conn":"c","name":"{long}","local":"x"}}"#
        )),
        "\"name\" must be 1 to 32 bytes"
    );
    assert_eq!(
        msg(r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"x"}"#),
        "\"local\" must be an IP address"
    );
    assert_eq!(
        msg(r#"{"version":1,"request":"path_add","conn":"c","name":"n"}"#),
        "needs \"local\""
    );
    assert_eq!(
        msg(
            r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"192.0.2.1","remote":7}"#
        ),
        "\"remote\" must be an IP address"
    );
    assert_eq!(
        msg(
            r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"192.0.2.1","interface":"a-very-long-interface"}"#
        ),
        "\"interface\" must be an interface name"
    );
    assert_eq!(
        msg(
            r#"{"version":1,"request":"path_add","conn":"c","name":"n","local":"192.0.2.1","weight":"x"}"#
        ),
        "\"weight_out\" must be a positive integer"
    );
}

#[test]
fn path_states_by_name() {
    for s in [PathState::Up, PathState::Down, PathState::Backup] {
        assert_eq!(PathState::from_name(s.as_str()), Some(s));
    }
    assert_eq!(PathState::from_name("probing"), None);
}

#[test]
fn the_names_are_those_of_the_requests_and_no_other() {
    let mut named: Vec<&str> = every_request().iter().map(Request::name).collect();
    named.sort_unstable();
    named.dedup();
    let mut names = Request::NAMES.to_vec();
    names.sort_unstable();
    assert_eq!(named, names);
    for name in Request::NAMES {
        let err = Request::from_value(&json!({"version": 1, "request": name}), MAX_NAME);
        assert!(
            !matches!(err, Err(RequestError::UnknownRequest(_))),
            "{name}"
        );
    }
}
