//! Handling one request, whatever the transport: the envelope checked
//! (form, connection, key, MAC, freshness, replay), the request's scope
//! checked, then answered through the control socket's
//! [`control_socket::respond`] and signed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use base64::Engine;
use mpt_api::{Request, Response};
use mpt_proto::crypto::cmdauth::{CmdAuthError, CmdVerifier, RequestFields, MAC_LEN, NONCE_LEN};
use mpt_proto::crypto::RateLimiter;
use serde_json::Value;

use crate::ops::cmd_port::envelope::{
    b64, decode_fixed, seal_response, unix_ms, RequestEnvelope, ENVELOPE_VERSION, MAX_REQUEST,
};
use crate::ops::cmd_port::stats::Stats;
use crate::ops::control_socket;
use crate::ops::source::StatusSource;
use crate::sync::lock_unpoisoned;

/// A connection the port knows, with its command key.
pub(super) struct Conn {
    /// Its name.
    pub name: String,
    /// `None`: the connection has no `key_file`.
    pub verifier: Option<Mutex<CmdVerifier>>,
}

/// What the port's threads share.
pub(super) struct Shared {
    /// The configured connections.
    pub conns: Vec<Conn>,
    /// `[daemon] cmd_port_admin`: keys may also reload and add or remove
    /// paths.
    pub admin: bool,
    /// Where requests are answered (as on the control socket).
    pub source: StatusSource,
    /// The counters.
    pub stats: Stats,
    /// Limits the refusals answered over UDP.
    pub refusals: Mutex<RateLimiter>,
}

/// The outcome of one request.
pub(super) enum Reply {
    /// The signed answer of an executed request (authentic, fresh, new).
    Answer(String),
    /// A signed refusal of an authentic request (stale, replayed, out of
    /// scope, answer too large for UDP).
    Refusal(String),
    /// A plain refusal of a request that could not be authenticated.
    Plain(String),
}

/// A plain (unsigned) refusal.
fn plain(msg: &str) -> Reply {
    Reply::Plain(Response::error(msg).to_line())
}

/// Counts one event.
pub(super) fn count(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

impl Shared {
    /// Answers one request (a TCP line or a datagram) from `peer`; an
    /// answer longer than `max_answer` is replaced by a refusal.
    pub fn handle(&self, input: &[u8], peer: SocketAddr, max_answer: Option<usize>) -> Reply {
        let s = &self.stats;
        let refuse = |counter: &AtomicU64, msg: &str| {
            count(counter);
            tracing::debug!(%peer, reason = msg, "remote command refused");
            plain(msg)
        };
        if input.len() > MAX_REQUEST {
            return refuse(&s.oversized, "request too long");
        }
        let env: RequestEnvelope = match serde_json::from_slice(input) {
            Ok(e) => e,
            Err(_) => return refuse(&s.malformed, "malformed request"),
        };
        if env.version != ENVELOPE_VERSION {
            return refuse(&s.malformed, "unsupported envelope version");
        }
        let (Some(nonce), Ok(mac)) = (
            decode_fixed::<NONCE_LEN>(&env.nonce),
            b64().decode(&env.mac),
        ) else {
            return refuse(&s.malformed, "malformed nonce or mac");
        };
        if mac.len() != MAC_LEN {
            return refuse(&s.malformed, "malformed nonce or mac");
        }
        let Some(conn) = self.conns.iter().find(|c| c.name == env.connection) else {
            return refuse(&s.unknown_connection, "unknown connection");
        };
        // The running set, not the one at start: a connection a reload
        // removed is gone for this port too.
        if !self
            .source
            .conns
            .list()
            .iter()
            .any(|c| c.name == conn.name && !c.removed.load(Relaxed))
        {
            return refuse(&s.unknown_connection, "unknown connection");
        }
        let Some(verifier) = &conn.verifier else {
            return refuse(
                &s.no_key,
                "connection has no key_file: it cannot be managed remotely",
            );
        };
        let fields = RequestFields {
            connection: &env.connection,
            timestamp_ms: env.timestamp_ms,
            nonce: &nonce,
            body: env.request.as_bytes(),
        };
        let now = unix_ms();
        let (key, checked) = {
            let mut v = lock_unpoisoned(verifier);
            (v.key().clone(), v.accept(&fields, &mac, now))
        };
        let signed = |text: String, answer: bool| match seal_response(&key, &nonce, &text) {
            Some(text) if answer => Reply::Answer(text),
            Some(text) => Reply::Refusal(text),
            None => plain("internal error signing the answer"),
        };
        let error = |msg: &str| Response::error(msg).to_line();
        match checked {
            Ok(()) => {}
            Err(CmdAuthError::BadMac) | Err(CmdAuthError::WrongConnection) => {
                return refuse(&s.auth, "authentication failed");
            }
            Err(e) => {
                let counter = match e {
                    CmdAuthError::Stale { .. } => &s.stale,
                    CmdAuthError::Replayed => &s.replay,
                    CmdAuthError::ReplayCacheFull => &s.replay_full,
                    _ => &s.malformed,
                };
                count(counter);
                let msg = match e {
                    CmdAuthError::Stale {
                        timestamp_ms,
                        now_ms,
                    } => format!(
                        "stale request: clocks differ by {:.1} s (max {} s)",
                        timestamp_ms.abs_diff(now_ms) as f64 / 1e3,
                        mpt_proto::crypto::cmdauth::MAX_SKEW_MS / 1000
                    ),
                    other => other.to_string(),
                };
                tracing::debug!(%peer, conn = %conn.name, reason = %msg, "remote command refused");
                return signed(error(&msg), false);
            }
        }
        // Authentic, fresh and new: check the scope, then run it.
        let inner: Value = serde_json::from_str(&env.request).unwrap_or(Value::Null);
        let name = inner.get("request").and_then(Value::as_str).unwrap_or("");
        if let Err(msg) = scope(&conn.name, &inner, self.admin) {
            count(&s.forbidden);
            tracing::info!(%peer, conn = %conn.name, request = name, reason = %msg, "remote command refused");
            return signed(error(&msg), false);
        }
        count(&s.accepted);
        if name == "status" {
            tracing::debug!(%peer, conn = %conn.name, request = name, "remote command");
        } else {
            tracing::info!(%peer, conn = %conn.name, request = name, "remote command");
        }
        let mut response = control_socket::respond(env.request.as_bytes(), &self.source);
        // Only the answer to `status` has the document: the key's own
        // connection, and this port's counters.
        if let Some(status) = &mut response.status {
            if let Some(conns) = &mut status.connections {
                conns.retain(|c| c.name.as_deref() == Some(conn.name.as_str()));
            }
            status.cmd_port = Some(s.to_status());
        }
        let reply = signed(response.to_line(), true);
        match (reply, max_answer) {
            (Reply::Answer(text), Some(max)) if text.len() > max => {
                count(&s.udp_too_large);
                signed(
                    error(&format!(
                        "the answer ({} bytes) is too large for a UDP datagram; use TCP (leave out --udp)",
                        text.len()
                    )),
                    false,
                )
            }
            (reply, _) => reply,
        }
    }
}

/// Requests any key may make (on its own connection).
const ANY_KEY: [&str; 3] = ["status", "path_state", "path_weight"];

/// Whether a key for connection `conn` may make request `inner` (`admin`:
/// `[daemon] cmd_port_admin`).
///
/// Checked on the request object as sent, before it is parsed: a request
/// that names anything but the key's own connection in `conn` (another
/// name, `null`, a number) or asks for something the port does not offer
/// is refused as out of scope, whatever else is wrong with it.
fn scope(conn: &str, inner: &Value, admin: bool) -> Result<(), String> {
    let name = inner.get("request").and_then(Value::as_str).unwrap_or("");
    match inner.get("conn") {
        None => {}
        Some(Value::String(c)) if c == conn => {}
        Some(other) => {
            return Err(format!(
                "this key manages connection {conn:?} only; the request names {other}"
            ))
        }
    }
    match name {
        // Every request the control socket understands goes through
        // `respond`, which answers malformed ones.
        name if ANY_KEY.contains(&name) => Ok(()),
        name if Request::NAMES.contains(&name) && admin => Ok(()),
        name if Request::NAMES.contains(&name) => Err(format!(
            "request {name:?} changes the server beyond this key's own paths: \
             allowed only with `[daemon] cmd_port_admin = true` on the server"
        )),
        // Not JSON, no "request": let `respond` say what is wrong.
        "" => Ok(()),
        other => Err(format!(
            "request {other:?} is not available over the remote command port"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scope_is_the_key_s_connection() {
        let ok = |v: Value| scope("a", &v, true);
        assert!(ok(json!({"version":1,"request":"status"})).is_ok());
        assert!(ok(json!({"version":1,"request":"reload"})).is_ok());
        assert!(ok(
            json!({"version":1,"request":"path_state","conn":"a","path":"p0","state":"down"})
        )
        .is_ok());
        assert!(ok(
            json!({"version":1,"request":"path_state","conn":"b","path":"p0","state":"down"})
        )
        .is_err());
        assert!(ok(json!({"version":1,"request":"path_weight","conn":1})).is_err());
        assert!(ok(json!({"version":1,"request":"shutdown"})).is_err());
        assert!(ok(Value::Null).is_ok());
    }

    #[test]
    fn without_admin_a_key_reads_and_steers_its_own_paths_only() {
        let ok = |v: Value| scope("a", &v, false);
        assert!(ok(json!({"version":1,"request":"status"})).is_ok());
        assert!(ok(
            json!({"version":1,"request":"path_state","conn":"a","path":"p0","state":"down"})
        )
        .is_ok());
        assert!(
            ok(json!({"version":1,"request":"path_weight","conn":"a","path":"p0","out":5})).is_ok()
        );
        for name in ["reload", "path_add", "path_remove"] {
            let e = ok(json!({"version":1,"request":name,"conn":"a"})).unwrap_err();
            assert!(e.contains("cmd_port_admin"), "{name}: {e}");
        }
        // Another connection is refused for its own reason first.
        let e = ok(json!({"version":1,"request":"status","conn":"b"})).unwrap_err();
        assert!(e.contains("manages connection"), "{e}");
    }
}
