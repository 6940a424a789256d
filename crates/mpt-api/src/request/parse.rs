//! The daemon's reading of a request line.
//!
//! mptd must answer a malformed, unknown or hostile request with an error
//! and never act on it, and its error messages are what an operator (or a
//! script) sees, so the checks run in a fixed order and say exactly what
//! is wrong: the line is JSON, `version` is [`CONTROL_VERSION`], `request`
//! names a request, then that request's fields. Unknown fields are
//! ignored (a newer client may send more), a `null` optional field counts
//! as missing.

use std::net::IpAddr;

use serde::Deserialize;
use serde_json::Value;

use super::{PathState, Request};
use crate::field::present;
use crate::version::CONTROL_VERSION;

/// Longest interface name Linux accepts (`IFNAMSIZ` less the NUL).
const MAX_INTERFACE_LEN: usize = 15;

/// Why a request line was refused; its text is the daemon's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The line is not JSON.
    NotJson(String),
    /// `version` is a number other than [`CONTROL_VERSION`].
    UnsupportedVersion(u64),
    /// No numeric `version`.
    MissingVersion,
    /// No `request` string.
    MissingRequest,
    /// `request` names nothing the daemon does.
    UnknownRequest(String),
    /// `status` with a `conn` that is not a string.
    ConnNotName,
    /// A path request without `conn` or `path` strings.
    NeedsConnAndPath,
    /// `path_state` without a known `state`.
    BadState,
    /// `weight_out` (or `weight` of `path_add`) not an integer of 32 bits.
    BadWeightOut,
    /// `weight_in` not an integer of 16 bits.
    BadWeightIn,
    /// `path_add` without `conn` or `name` strings.
    NeedsConnAndName,
    /// `path_add` with an empty or too long `name`.
    BadName {
        /// The longest name the wire format carries.
        max: usize,
    },
    /// `local` or `remote` of `path_add` is not an IP address.
    BadAddress(&'static str),
    /// `path_add` without `local`.
    NeedsLocal,
    /// `path_add` with an `interface` that cannot be an interface name.
    BadInterface,
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::NotJson(e) => write!(f, "request is not valid JSON: {e}"),
            RequestError::UnsupportedVersion(v) => write!(
                f,
                "unsupported version {v}, this daemon speaks {CONTROL_VERSION}"
            ),
            RequestError::MissingVersion => f.write_str("missing \"version\""),
            RequestError::MissingRequest => f.write_str("missing \"request\""),
            RequestError::UnknownRequest(r) => write!(f, "unknown request \"{r}\""),
            RequestError::ConnNotName => f.write_str("\"conn\" must be a connection name"),
            RequestError::NeedsConnAndPath => f.write_str("needs \"conn\" and \"path\""),
            RequestError::BadState => {
                f.write_str("\"state\" must be \"up\", \"down\" or \"backup\"")
            }
            RequestError::BadWeightOut => f.write_str("\"weight_out\" must be a positive integer"),
            RequestError::BadWeightIn => {
                f.write_str("\"weight_in\" must be an integer in 1..=65535")
            }
            RequestError::NeedsConnAndName => f.write_str("needs \"conn\" and \"name\""),
            RequestError::BadName { max } => write!(f, "\"name\" must be 1 to {max} bytes"),
            RequestError::BadAddress(key) => write!(f, "\"{key}\" must be an IP address"),
            RequestError::NeedsLocal => f.write_str("needs \"local\""),
            RequestError::BadInterface => f.write_str("\"interface\" must be an interface name"),
        }
    }
}

impl std::error::Error for RequestError {}

/// Every field a request object may have, each kept as the JSON it is
/// (`Some(Value::Null)` for `null`, `None` when missing): the checks below
/// decide what a wrong type means, field by field.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Fields {
    #[serde(deserialize_with = "present")]
    version: Option<Value>,
    #[serde(deserialize_with = "present")]
    request: Option<Value>,
    #[serde(deserialize_with = "present")]
    conn: Option<Value>,
    #[serde(deserialize_with = "present")]
    path: Option<Value>,
    #[serde(deserialize_with = "present")]
    state: Option<Value>,
    #[serde(deserialize_with = "present")]
    weight_out: Option<Value>,
    #[serde(deserialize_with = "present")]
    weight_in: Option<Value>,
    /// `path_add`'s older name for `weight_out`.
    #[serde(deserialize_with = "present")]
    weight: Option<Value>,
    #[serde(deserialize_with = "present")]
    name: Option<Value>,
    #[serde(deserialize_with = "present")]
    local: Option<Value>,
    #[serde(deserialize_with = "present")]
    remote: Option<Value>,
    #[serde(deserialize_with = "present")]
    interface: Option<Value>,
    #[serde(deserialize_with = "present")]
    force: Option<Value>,
}

/// The field as a string, if it is one.
fn text(v: &Option<Value>) -> Option<String> {
    v.as_ref().and_then(Value::as_str).map(str::to_string)
}

/// Missing or `null`.
fn absent(v: &Option<Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

impl Request {
    /// Reads one request line as the daemon does. `max_name_len` is the
    /// longest path name the wire format carries (mpt-proto's
    /// `MAX_NAME_LEN`, which this crate does not link).
    pub fn parse(line: &[u8], max_name_len: usize) -> Result<Request, RequestError> {
        let value: Value =
            serde_json::from_slice(line).map_err(|e| RequestError::NotJson(e.to_string()))?;
        Request::from_value(&value, max_name_len)
    }

    /// [`Request::parse`] of a request already read as JSON.
    pub fn from_value(value: &Value, max_name_len: usize) -> Result<Request, RequestError> {
        // Only an object has fields (an array would fill them in order).
        let f = match value {
            Value::Object(_) => Fields::deserialize(value).unwrap_or_default(),
            _ => Fields::default(),
        };
        match f.version.as_ref().and_then(Value::as_u64) {
            Some(CONTROL_VERSION) => {}
            Some(v) => return Err(RequestError::UnsupportedVersion(v)),
            None => return Err(RequestError::MissingVersion),
        }
        let conn_path = || match (text(&f.conn), text(&f.path)) {
            (Some(conn), Some(path)) => Ok((conn, path)),
            _ => Err(RequestError::NeedsConnAndPath),
        };
        match f.request.as_ref().and_then(Value::as_str) {
            Some("status") => match &f.conn {
                None | Some(Value::Null) => Ok(Request::Status),
                Some(Value::String(conn)) => Ok(Request::StatusOf { conn: conn.clone() }),
                Some(_) => Err(RequestError::ConnNotName),
            },
            Some("path_state") => {
                let (conn, path) = conn_path()?;
                let state = text(&f.state)
                    .as_deref()
                    .and_then(PathState::from_name)
                    .ok_or(RequestError::BadState)?;
                Ok(Request::PathState { conn, path, state })
            }
            Some("path_weight") => {
                let (conn, path) = conn_path()?;
                let weight_out = f
                    .weight_out
                    .as_ref()
                    .and_then(Value::as_u64)
                    .and_then(|w| u32::try_from(w).ok())
                    .ok_or(RequestError::BadWeightOut)?;
                let weight_in = match &f.weight_in {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(
                        v.as_u64()
                            .and_then(|w| u16::try_from(w).ok())
                            .ok_or(RequestError::BadWeightIn)?,
                    ),
                };
                Ok(Request::PathWeight {
                    conn,
                    path,
                    weight_out,
                    weight_in,
                })
            }
            Some("reload") => Ok(Request::Reload),
            Some("path_add") => path_add(&f, max_name_len),
            Some("path_remove") => {
                let (conn, path) = conn_path()?;
                let force = f.force.as_ref().and_then(Value::as_bool).unwrap_or(false);
                Ok(Request::PathRemove { conn, path, force })
            }
            Some(other) => Err(RequestError::UnknownRequest(other.to_string())),
            None => Err(RequestError::MissingRequest),
        }
    }
}

fn path_add(f: &Fields, max_name_len: usize) -> Result<Request, RequestError> {
    let (Some(conn), Some(name)) = (text(&f.conn), text(&f.name)) else {
        return Err(RequestError::NeedsConnAndName);
    };
    if name.is_empty() || name.len() > max_name_len {
        return Err(RequestError::BadName { max: max_name_len });
    }
    let ip = |v: &Option<Value>, key: &'static str| -> Result<Option<IpAddr>, RequestError> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_str()
                .and_then(|t| t.parse::<IpAddr>().ok())
                .map(Some)
                .ok_or(RequestError::BadAddress(key)),
        }
    };
    let local = ip(&f.local, "local")?.ok_or(RequestError::NeedsLocal)?;
    let remote = ip(&f.remote, "remote")?;
    let interface = match &f.interface {
        None | Some(Value::Null) => None,
        Some(Value::String(i)) if !i.is_empty() && i.len() <= MAX_INTERFACE_LEN => Some(i.clone()),
        Some(_) => return Err(RequestError::BadInterface),
    };
    // `weight_out`, else the older `weight`; a `null` `weight_out` is
    // missing and does not fall back.
    let weight = if f.weight_out.is_some() {
        &f.weight_out
    } else {
        &f.weight
    };
    let weight_out = if absent(weight) {
        None
    } else {
        Some(
            weight
                .as_ref()
                .and_then(Value::as_u64)
                .and_then(|w| u32::try_from(w).ok())
                .ok_or(RequestError::BadWeightOut)?,
        )
    };
    Ok(Request::PathAdd {
        conn,
        name,
        local,
        remote,
        interface,
        weight_out,
    })
}
