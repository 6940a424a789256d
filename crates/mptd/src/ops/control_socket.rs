//! The control socket: a unix socket speaking JSON lines.
//!
//! Each request is one JSON object on one line, each response one line:
//! `{"version":1,"request":"status"}` →
//! `{"version":1,"ok":true,"status":{…}}`; failures answer
//! `{"version":1,"ok":false,"error":"…"}`. A malformed, unknown or
//! oversized request gets an error and never touches the data plane. The
//! socket is created with mode 0600: it controls the tunnel.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use mpt_proto::path::AdminStatus;
use serde_json::{json, Value};

use crate::control::command::{Command, Request};
use crate::ops::status::status_of;

/// Version of the request/response protocol.
pub use mpt_api::CONTROL_VERSION;

/// Longest request line accepted.
const MAX_REQUEST: usize = 64 * 1024;

/// What the requests read, shared with the other operator servers.
pub use crate::ops::source::StatusSource;

/// Binds the socket (mode 0600), replacing a stale socket file.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is in use by a running daemon", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves requests until shutdown. The daemon wakes a blocked `accept` at
/// shutdown by connecting once.
pub fn serve(
    listener: UnixListener,
    source: StatusSource,
    shutdown: Arc<AtomicBool>,
    path: PathBuf,
) {
    for stream in listener.incoming() {
        if shutdown.load(Relaxed) {
            break;
        }
        let Ok(stream) = stream else { continue };
        // One client at a time; a slow client is cut off by the timeout.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
        handle_client(stream, &source);
    }
    let _ = std::fs::remove_file(path);
}

fn handle_client(stream: UnixStream, source: &StatusSource) {
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut out = std::io::BufWriter::new(write_half);
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_REQUEST as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_REQUEST {
            let _ = writeln!(out, "{}", error("request longer than 64 KiB"));
            let _ = out.flush();
            return;
        }
        let response = respond(&line, source);
        if writeln!(out, "{response}")
            .and_then(|_| out.flush())
            .is_err()
        {
            return;
        }
    }
}

fn error(msg: &str) -> Value {
    json!({"version": CONTROL_VERSION, "ok": false, "error": msg})
}

/// Answers one request line.
pub fn respond(line: &[u8], source: &StatusSource) -> Value {
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
        Ok(Value::Object(mut fields)) => {
            fields.insert("version".into(), json!(CONTROL_VERSION));
            fields.insert("ok".into(), json!(true));
            Value::Object(fields)
        }
        Ok(_) => json!({"version": CONTROL_VERSION, "ok": true}),
        Err(e) => error(&e),
    }
}

/// Hands a command to the control loop and waits for its answer.
pub fn execute(commands: &SyncSender<Request>, command: Command) -> Result<Value, String> {
    let (tx, rx) = sync_channel(1);
    commands
        .try_send((command, tx))
        .map_err(|_| "the daemon is busy or shutting down; try again".to_string())?;
    rx.recv_timeout(Duration::from_secs(5))
        .map_err(|_| "the daemon did not answer in time".to_string())?
}

/// "no connection `x`", with the configured names that look like it
/// (never the whole list: a server may have hundreds).
pub fn unknown_connection(name: &str, names: &[&str]) -> String {
    let near = near_names(name, names);
    if names.is_empty() {
        format!("no connection `{name}`: the daemon has no connections")
    } else if near.is_empty() {
        format!(
            "no connection `{name}` (none of the {} connection names is close; `mpt status` lists them)",
            names.len()
        )
    } else {
        format!("no connection `{name}`; did you mean {}?", near.join(", "))
    }
}

/// Up to five of `names` close to `name`: equal ignoring case, one
/// containing the other, or within a small edit distance; closest first.
pub fn near_names(name: &str, names: &[&str]) -> Vec<String> {
    let want = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = names
        .iter()
        .filter_map(|&n| {
            let low = n.to_lowercase();
            let d = edit_distance(&want, &low);
            let close = d <= (want.chars().count() / 3).max(1)
                || (want.len() >= 2 && (low.contains(&want) || want.contains(&low)));
            close.then_some((d, n))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(5)
        .map(|(_, n)| format!("`{n}`"))
        .collect()
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
