//! The control socket: a unix socket speaking JSON lines.
//!
//! Each request is one JSON object on one line, each response one line:
//! `{"version":1,"request":"status"}` →
//! `{"version":1,"ok":true,"status":{…}}`; failures answer
//! `{"version":1,"ok":false,"error":"…"}`. A malformed, unknown or
//! oversized request gets an error and never touches the data plane. The
//! socket is created with mode 0660: it controls the tunnel, so only the
//! daemon's user and group may connect (the packaged service runs as user
//! and group `mpt`; an operator in that group needs no root).
//!
//! Requests and answers are mpt-api's types, which the CLI uses too:
//! [`Request::parse`] reads a line with the daemon's checks and messages,
//! [`answer`] runs it (the status document from [`crate::ops::status`],
//! changes through the control loop as a [`Command`]), and the
//! [`Response`] is written as one line.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use mpt_api::{PathState, Request, Response};
use mpt_proto::path::AdminStatus;
use mpt_proto::wire::MAX_NAME_LEN;

use crate::control::command::{self, Answer, Command};
use crate::ops::status::status_of;

/// Version of the request/response protocol.
pub use mpt_api::CONTROL_VERSION;

/// Longest request line accepted.
const MAX_REQUEST: usize = 64 * 1024;

/// What the requests read, shared with the other operator servers.
pub use crate::ops::source::StatusSource;

/// Binds the socket (mode 0660), replacing a stale socket file.
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
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
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
            let refusal = Response::error("request longer than 64 KiB");
            let _ = writeln!(out, "{}", refusal.to_line());
            let _ = out.flush();
            return;
        }
        let response = respond(&line, source).to_line();
        if writeln!(out, "{response}")
            .and_then(|_| out.flush())
            .is_err()
        {
            return;
        }
    }
}

/// Answers one request line.
pub fn respond(line: &[u8], source: &StatusSource) -> Response {
    match Request::parse(line, MAX_NAME_LEN) {
        Ok(request) => answer(request, source),
        Err(e) => Response::error(e.to_string()),
    }
}

/// Answers one request: the status document here, changes by the control
/// loop.
pub fn answer(request: Request, source: &StatusSource) -> Response {
    let command = match request {
        Request::Status => return Response::status(status_of(source, None)),
        Request::StatusOf { conn } => return status_of_one(source, &conn),
        Request::PathState { conn, path, state } => Command::PathState {
            conn,
            path,
            state: admin_status(state),
        },
        Request::PathWeight {
            conn,
            path,
            weight_out,
            weight_in,
        } => Command::PathWeight {
            conn,
            path,
            weight_out,
            weight_in,
        },
        Request::PathAdd {
            conn,
            name,
            local,
            remote,
            interface,
            weight_out,
        } => Command::PathAdd {
            conn,
            name,
            local,
            remote,
            interface,
            weight: weight_out,
        },
        Request::PathRemove { conn, path, force } => Command::PathRemove { conn, path, force },
        Request::Reload => Command::Reload,
    };
    execute(&source.commands, command).unwrap_or_else(Response::error)
}

/// The status document with connection `name` alone, or an error naming
/// the connections whose names are close.
fn status_of_one(source: &StatusSource, name: &str) -> Response {
    let conns = source.conns.list();
    let live = || conns.iter().filter(|c| !c.removed.load(Relaxed));
    if !live().any(|c| c.name == name) {
        let names: Vec<&str> = live().map(|c| c.name.as_str()).collect();
        return Response::error(unknown_connection(name, &names));
    }
    Response::status(status_of(source, Some(name)))
}

/// The configured status a request sets.
fn admin_status(state: PathState) -> AdminStatus {
    match state {
        PathState::Up => AdminStatus::Up,
        PathState::Down => AdminStatus::Down,
        PathState::Backup => AdminStatus::Backup,
    }
}

/// Hands a command to the control loop and waits for its answer.
pub fn execute(commands: &SyncSender<command::Request>, command: Command) -> Answer {
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
mod tests;
