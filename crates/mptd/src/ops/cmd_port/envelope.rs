//! The envelope of the remote command port, shared with `mpt --remote`:
//! sealing a request with a connection's command key, and opening the
//! answer. Nothing here touches a socket, so the client links it as is.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use mpt_proto::crypto::cmdauth::{CmdAuthError, CmdKey, RequestFields, ResponseFields, NONCE_LEN};
use serde::Deserialize;
use serde_json::{json, Value};

/// Version of the envelope.
pub const ENVELOPE_VERSION: u64 = 1;
/// Longest request accepted (a TCP line or a datagram). Real requests are
/// a few hundred bytes.
pub const MAX_REQUEST: usize = 16 * 1024;

/// The envelope's base64 (standard, padded).
pub(super) fn b64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

/// The wall clock in Unix milliseconds (0 before 1970).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A request envelope as received.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RequestEnvelope {
    pub version: u64,
    pub connection: String,
    pub timestamp_ms: u64,
    pub nonce: String,
    pub request: String,
    pub mac: String,
}

/// Builds a signed request line (without the newline) for `body`, the
/// exact request text of the control socket.
pub fn seal_request(
    key: &CmdKey,
    body: &str,
    timestamp_ms: u64,
    nonce: &[u8; NONCE_LEN],
) -> Result<String, CmdAuthError> {
    let mac = key.sign_request(&RequestFields {
        connection: key.connection(),
        timestamp_ms,
        nonce,
        body: body.as_bytes(),
    })?;
    Ok(json!({
        "version": ENVELOPE_VERSION,
        "connection": key.connection(),
        "timestamp_ms": timestamp_ms,
        "nonce": b64().encode(nonce),
        "request": body,
        "mac": b64().encode(mac),
    })
    .to_string())
}

/// Signs `body`, the answer to the request with `nonce`, as a response
/// envelope (`None`: the key cannot sign it).
pub(super) fn seal_response(key: &CmdKey, nonce: &[u8; NONCE_LEN], body: &str) -> Option<String> {
    let mac = key
        .sign_response(&ResponseFields {
            connection: key.connection(),
            nonce,
            body: body.as_bytes(),
        })
        .ok()?;
    Some(
        json!({
            "version": ENVELOPE_VERSION,
            "connection": key.connection(),
            "nonce": b64().encode(nonce),
            "response": body,
            "mac": b64().encode(mac),
        })
        .to_string(),
    )
}

/// What came back for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A signed answer to the request with this nonce: the control
    /// socket's response text, authenticated.
    Signed {
        /// The nonce it answers.
        nonce: [u8; NONCE_LEN],
        /// The response text (a control socket response object).
        response: String,
    },
    /// A refusal the daemon could not sign (it could not authenticate the
    /// request): its error text. Unauthenticated.
    Refused(String),
}

/// Why an answer was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// Not an envelope.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// The MAC does not match.
    #[error("the answer failed authentication (wrong key, or altered on the way)")]
    BadMac,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResponseEnvelope {
    version: u64,
    connection: String,
    nonce: String,
    response: String,
    mac: String,
}

/// Opens an answer line or datagram: a signed envelope is checked with
/// `key`; a plain `{"ok":false,"error":...}` object becomes
/// [`Answer::Refused`].
pub fn open_answer(key: &CmdKey, data: &[u8]) -> Result<Answer, AnswerError> {
    let malformed = |m: &str| AnswerError::Malformed(m.to_string());
    let v: Value = serde_json::from_slice(data)
        .map_err(|e| AnswerError::Malformed(format!("not JSON ({e})")))?;
    if v.get("mac").is_none() {
        if v.get("ok") == Some(&Value::Bool(false)) {
            let msg = v.get("error").and_then(Value::as_str).unwrap_or("refused");
            return Ok(Answer::Refused(msg.to_string()));
        }
        return Err(malformed("neither a signed answer nor an error"));
    }
    let env: ResponseEnvelope =
        serde_json::from_value(v).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    if env.version != ENVELOPE_VERSION {
        return Err(AnswerError::Malformed(format!(
            "envelope version {}, this client speaks {ENVELOPE_VERSION}",
            env.version
        )));
    }
    let nonce = decode_fixed::<NONCE_LEN>(&env.nonce).ok_or_else(|| malformed("bad nonce"))?;
    let mac = b64()
        .decode(&env.mac)
        .map_err(|_| malformed("mac is not base64"))?;
    key.verify_response(
        &ResponseFields {
            connection: &env.connection,
            nonce: &nonce,
            body: env.response.as_bytes(),
        },
        &mac,
    )
    .map_err(|_| AnswerError::BadMac)?;
    Ok(Answer::Signed {
        nonce,
        response: env.response,
    })
}

/// Base64 `text` as exactly `N` bytes.
pub(super) fn decode_fixed<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = b64().decode(text).ok()?;
    <[u8; N]>::try_from(bytes.as_slice()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_proto::crypto::cmdauth::CmdVerifier;
    use mpt_proto::crypto::Psk;

    fn key(conn: &str, psk: u8) -> CmdKey {
        CmdKey::derive(&Psk::from_bytes([psk; 32]), conn).unwrap()
    }

    #[test]
    fn request_envelope_round_trip() {
        let k = key("site-b", 7);
        let nonce = [3u8; NONCE_LEN];
        let body = r#"{"version":1,"request":"status"}"#;
        let line = seal_request(&k, body, 1234, &nonce).unwrap();
        let env: RequestEnvelope = serde_json::from_str(&line).unwrap();
        assert_eq!(env.request, body);
        assert_eq!(env.connection, "site-b");
        assert_eq!(env.timestamp_ms, 1234);
        let mac = b64().decode(&env.mac).unwrap();
        let mut v = CmdVerifier::new(k.clone());
        let fields = RequestFields {
            connection: &env.connection,
            timestamp_ms: env.timestamp_ms,
            nonce: &decode_fixed(&env.nonce).unwrap(),
            body: env.request.as_bytes(),
        };
        assert_eq!(v.accept(&fields, &mac, 1234), Ok(()));
        // Unknown fields are refused, so nothing unsigned rides along.
        let mut extra: Value = serde_json::from_str(&line).unwrap();
        extra["extra"] = json!(1);
        assert!(serde_json::from_value::<RequestEnvelope>(extra).is_err());
    }

    #[test]
    fn answers_are_checked() {
        let k = key("site-b", 7);
        let nonce = [9u8; NONCE_LEN];
        let text = seal_response(&k, &nonce, r#"{"version":1,"ok":true}"#).unwrap();
        assert_eq!(
            open_answer(&k, text.as_bytes()),
            Ok(Answer::Signed {
                nonce,
                response: r#"{"version":1,"ok":true}"#.into()
            })
        );
        assert_eq!(
            open_answer(&key("site-b", 8), text.as_bytes()),
            Err(AnswerError::BadMac)
        );
        let altered = text.replace("true", "false");
        assert_eq!(
            open_answer(&k, altered.as_bytes()),
            Err(AnswerError::BadMac)
        );
        assert_eq!(
            open_answer(
                &k,
                br#"{"version":1,"ok":false,"error":"authentication failed"}"#
            ),
            Ok(Answer::Refused("authentication failed".into()))
        );
        assert!(matches!(
            open_answer(&k, b"garbage"),
            Err(AnswerError::Malformed(_))
        ));
        assert!(matches!(
            open_answer(&k, br#"{"version":1,"ok":true}"#),
            Err(AnswerError::Malformed(_))
        ));
    }
}
