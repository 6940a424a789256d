//! The response envelope: every answer is one JSON object on one line,
//! `{"ok":true,"version":1,...}` or `{"error":"...","ok":false,"version":1}`.
//!
//! What an `ok` answer carries besides the envelope depends on the
//! request: `status` the status document, `path_add` and `path_remove`
//! the path (`path`, `id`) and the peer's verdict (`peer`), `reload` the
//! lists `changes` and `not_applied`; the others nothing. [`Response`] has
//! them all as optional fields, left out when not set, in the alphabetical
//! order the daemon has always written them in.
//!
//! A client checks the envelope before anything else ([`check`]): a
//! version-1 object with a boolean `ok`, whose `ok: false` is the
//! daemon's refusal with its `error` text. The checks read the envelope
//! as leniently as the untyped client did (a field of the wrong type is a
//! missing field), so that their messages stay the same.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::field::lenient;
use crate::status::Status;
use crate::version::CONTROL_VERSION;

/// One response line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Response {
    /// `reload`: what was applied, one line each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<String>>,
    /// `ok: false`: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `path_add`, `path_remove`: the path's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// `reload`: what needs a restart, one line each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<Vec<String>>,
    /// Whether the request was carried out.
    pub ok: bool,
    /// `path_add`, `path_remove`: the path's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `path_add`, `path_remove`: what the peer said (`confirmed`, or why
    /// it was not asked or did not answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// `status`: the status document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// [`CONTROL_VERSION`].
    pub version: u64,
}

/// Why a response line is not an answer to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseError {
    /// Not JSON (the parser's message).
    NotJson(String),
    /// JSON, but not an object.
    NotObject,
    /// Another protocol version.
    Version(u64),
    /// No numeric `version`.
    NoVersion,
    /// No boolean `ok`.
    NoOk,
    /// The envelope is right but a field is not what this version says
    /// (the decoder's message).
    Decode(String),
    /// An answer to `status` without the status document.
    NoStatus,
    /// `ok: false`: the daemon refused, with this message.
    Refused(String),
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseError::NotJson(e) => write!(f, "not JSON ({e})"),
            ResponseError::NotObject => f.write_str("not a JSON object"),
            ResponseError::Version(v) => {
                write!(f, "protocol version {v}, this mpt speaks {CONTROL_VERSION}")
            }
            ResponseError::NoVersion => f.write_str("no \"version\""),
            ResponseError::NoOk => f.write_str("no boolean \"ok\""),
            ResponseError::Decode(e) => f.write_str(e),
            ResponseError::NoStatus => f.write_str("no \"status\" object"),
            ResponseError::Refused(msg) => write!(f, "mptd: {msg}"),
        }
    }
}

impl std::error::Error for ResponseError {}

/// The envelope's fields, each `None` when missing or of the wrong type.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default, deserialize_with = "lenient")]
    version: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    ok: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    error: Option<String>,
}

/// Message of an `ok: false` answer without one.
const NO_MESSAGE: &str = "request failed (no error message)";

/// Checks a response object's envelope: a [`CONTROL_VERSION`] object with
/// a boolean `ok`; `ok: false` is [`ResponseError::Refused`].
pub fn check(value: &Value) -> Result<(), ResponseError> {
    if !value.is_object() {
        return Err(ResponseError::NotObject);
    }
    let envelope =
        Envelope::deserialize(value).map_err(|e| ResponseError::Decode(e.to_string()))?;
    match envelope.version {
        Some(CONTROL_VERSION) => {}
        Some(other) => return Err(ResponseError::Version(other)),
        None => return Err(ResponseError::NoVersion),
    }
    match envelope.ok {
        Some(true) => Ok(()),
        Some(false) => Err(ResponseError::Refused(
            envelope.error.unwrap_or_else(|| NO_MESSAGE.to_string()),
        )),
        None => Err(ResponseError::NoOk),
    }
}

/// Reads one response line as JSON and checks its envelope ([`check`]).
pub fn parse_checked(line: &[u8]) -> Result<Value, ResponseError> {
    let value: Value =
        serde_json::from_slice(line).map_err(|e| ResponseError::NotJson(e.to_string()))?;
    check(&value)?;
    Ok(value)
}

impl Response {
    /// Reads one response line: the envelope checked ([`check`]), then
    /// the whole answer.
    pub fn parse(line: &[u8]) -> Result<Response, ResponseError> {
        Response::from_value(parse_checked(line)?)
    }

    /// [`Response::parse`] of a response already read as JSON.
    pub fn from_value(value: Value) -> Result<Response, ResponseError> {
        check(&value)?;
        Response::deserialize(value).map_err(|e| ResponseError::Decode(e.to_string()))
    }

    /// An `ok` answer carrying nothing more.
    pub fn ok() -> Response {
        Response {
            ok: true,
            version: CONTROL_VERSION,
            ..Response::default()
        }
    }

    /// A refusal.
    pub fn error(msg: impl Into<String>) -> Response {
        Response {
            error: Some(msg.into()),
            ok: false,
            version: CONTROL_VERSION,
            ..Response::default()
        }
    }

    /// The answer to `status`.
    pub fn status(status: Status) -> Response {
        Response {
            status: Some(status),
            ..Response::ok()
        }
    }

    /// The answer as one line of text (no newline).
    pub fn to_line(&self) -> String {
        // A struct of strings, numbers and maps with string keys always
        // serialises.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Status {
    /// The status document of a response line to `status` (what a tool
    /// that asked the socket itself, such as the benchmark harness,
    /// needs): the envelope checked, then the document.
    pub fn from_response(line: &str) -> Result<Status, ResponseError> {
        Response::parse(line.as_bytes())?
            .status
            .ok_or(ResponseError::NoStatus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelopes_are_checked_with_the_clients_messages() {
        let ok = parse_checked(br#"{"version":1,"ok":true,"status":{}}"#).unwrap();
        assert_eq!(ok, json!({"version": 1, "ok": true, "status": {}}));
        let err = |line: &[u8]| parse_checked(line).unwrap_err();
        assert_eq!(
            err(br#"{"version":1,"ok":false,"error":"no connection named \"x\""}"#),
            ResponseError::Refused("no connection named \"x\"".into())
        );
        assert_eq!(
            err(br#"{"version":1,"ok":false}"#),
            ResponseError::Refused(NO_MESSAGE.into())
        );
        assert!(matches!(err(b"not json"), ResponseError::NotJson(_)));
        assert_eq!(err(b"[1]"), ResponseError::NotObject);
        assert_eq!(err(br#"{"ok":true}"#), ResponseError::NoVersion);
        assert_eq!(
            err(br#"{"version":"1","ok":true}"#),
            ResponseError::NoVersion
        );
        assert_eq!(
            err(br#"{"version":2,"ok":true}"#),
            ResponseError::Version(2)
        );
        assert_eq!(err(br#"{"version":1}"#), ResponseError::NoOk);
        assert_eq!(err(br#"{"version":1,"ok":"yes"}"#), ResponseError::NoOk);
        assert_eq!(
            ResponseError::Version(2).to_string(),
            "protocol version 2, this mpt speaks 1"
        );
    }

    #[test]
    fn answers_read_into_their_fields() {
        let r =
            Response::parse(br#"{"id":2,"ok":true,"path":"wifi0","peer":"confirmed","version":1}"#)
                .unwrap();
        assert_eq!(r.peer.as_deref(), Some("confirmed"));
        assert_eq!((r.id, r.path.as_deref()), (Some(2), Some("wifi0")));
        let r = Response::parse(
            br#"{"changes":["a"],"not_applied":[],"ok":true,"version":1,"later":1}"#,
        )
        .unwrap();
        assert_eq!(r.changes, Some(vec!["a".to_string()]));
        assert_eq!(r.not_applied, Some(vec![]));
        assert_eq!(r.status, None);
        assert!(matches!(
            Response::parse(br#"{"ok":true,"version":1,"status":{"uptime_s":"x"}}"#),
            Err(ResponseError::Decode(_))
        ));
        assert_eq!(
            Status::from_response(r#"{"ok":true,"version":1}"#),
            Err(ResponseError::NoStatus)
        );
        assert_eq!(
            Status::from_response(r#"{"ok":false,"version":1,"error":"busy"}"#),
            Err(ResponseError::Refused("busy".into()))
        );
    }

    #[test]
    fn answers_are_written_as_the_daemon_always_wrote_them() {
        // The daemon built these with `json!`, whose maps sort their keys.
        assert_eq!(
            Response::error("busy").to_line(),
            json!({"version": CONTROL_VERSION, "ok": false, "error": "busy"}).to_string()
        );
        assert_eq!(
            Response::ok().to_line(),
            json!({"version": CONTROL_VERSION, "ok": true}).to_string()
        );
        let reload = Response {
            changes: Some(vec!["x".into()]),
            not_applied: Some(vec![]),
            ..Response::ok()
        };
        assert_eq!(
            reload.to_line(),
            json!({"version": 1, "ok": true, "changes": ["x"], "not_applied": []}).to_string()
        );
        let added = Response {
            path: Some("wifi0".into()),
            id: Some(2),
            peer: Some("confirmed".into()),
            ..Response::ok()
        };
        assert_eq!(
            added.to_line(),
            json!({"version": 1, "ok": true, "path": "wifi0", "id": 2, "peer": "confirmed"})
                .to_string()
        );
        assert_eq!(
            Response::status(Status::default()).to_line(),
            json!({"version": 1, "ok": true, "status": {}}).to_string()
        );
    }
}
