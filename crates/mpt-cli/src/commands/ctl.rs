//! `mpt status`, `mpt path` and `mpt reload`: one request each (two
//! samples for the rates of `mpt status`) to the local socket or a remote
//! command port, and what the answer prints.

use std::time::{Duration, Instant};

use clap::CommandFactory;
use mpt_api::status::Status;
use mpt_api::{PathState, Request, Response};
use mpt_cli::ctl::remote::Endpoint;
use mpt_cli::ctl::status::{only_connection, render_layout, Layout, Traffic, WIDTH};

use crate::cli::{Cli, PathAction, PathArgs, PathCommand, StatusArgs};
use crate::exit::{runtime, usage, Failure};

/// Time between the two status samples that rates are computed from.
const RATE_INTERVAL: Duration = Duration::from_millis(500);

/// `mpt status`.
pub(crate) fn status(endpoint: &Endpoint, args: &StatusArgs) -> Result<u8, Failure> {
    let doc = |response: Response| -> Result<Status, Failure> {
        let Some(status) = response.status else {
            return Err(runtime(anyhow::anyhow!(
                "malformed response from mptd: no \"status\" object"
            )));
        };
        // A daemon older than the `conn` field sends every connection.
        match &args.conn {
            None => Ok(status),
            Some(name) => only_connection(status, name).map_err(|e| usage(anyhow::anyhow!(e))),
        }
    };
    let request = match &args.conn {
        None => Request::Status,
        Some(conn) => Request::StatusOf { conn: conn.clone() },
    };
    let layout = match (args.full || args.conn.is_some(), args.brief) {
        (true, _) => Layout::Full,
        (false, true) => Layout::Compact,
        (false, false) => Layout::Auto,
    };
    let mut client = endpoint.connect().map_err(runtime)?;
    let first = doc(client.call(&request).map_err(runtime)?)?;
    let text = if args.json {
        // Through a JSON value, whose keys are sorted at every level: the
        // bytes `mpt status --json` always printed, a newer daemon's
        // fields included.
        let doc = serde_json::to_value(&first).map_err(runtime)?;
        serde_json::to_string_pretty(&doc).map_err(runtime)? + "\n"
    } else if args.once {
        render_layout(&first, Traffic::Totals, WIDTH, layout)
    } else {
        let t0 = Instant::now();
        std::thread::sleep(RATE_INTERVAL);
        let second = doc(client.call(&request).map_err(runtime)?)?;
        let traffic = Traffic::Rates {
            earlier: &first,
            elapsed: t0.elapsed(),
        };
        render_layout(&second, traffic, WIDTH, layout)
    };
    print!("{text}");
    Ok(0)
}

/// `mpt path ...`.
pub(crate) fn path(socket: &Endpoint, args: PathArgs) -> Result<u8, Failure> {
    let req = match args.cmd {
        Some(PathCommand::Add(a)) => Request::PathAdd {
            conn: a.conn,
            name: a.name,
            local: a.local,
            remote: a.remote,
            interface: a.interface,
            weight_out: a.weight,
        },
        Some(PathCommand::Remove { conn, path, force }) => {
            Request::PathRemove { conn, path, force }
        }
        None => {
            let (Some(conn), Some(path), Some(action)) = (args.conn, args.path, args.action) else {
                // clap enforces these (required unless a subcommand is given).
                return Err(usage(anyhow::anyhow!("usage: mpt path CONN PATH ACTION")));
            };
            let state = match action {
                PathAction::Up => PathState::Up,
                PathAction::Down => PathState::Down,
                PathAction::Backup => PathState::Backup,
                PathAction::Weight => {
                    let Some(weight_out) = args.weight_out else {
                        path_usage_error(
                            clap::error::ErrorKind::MissingRequiredArgument,
                            "`mpt path CONN PATH weight` needs OUT (and optionally IN)".into(),
                        )
                    };
                    return path_call(
                        socket,
                        &Request::PathWeight {
                            conn,
                            path,
                            weight_out,
                            weight_in: args.weight_in,
                        },
                    );
                }
            };
            if args.weight_out.is_some() {
                path_usage_error(
                    clap::error::ErrorKind::TooManyValues,
                    format!("`mpt path CONN PATH {}` takes no OUT/IN", state.as_str()),
                )
            }
            Request::PathState { conn, path, state }
        }
    };
    path_call(socket, &req)
}

/// A usage error clap cannot see (values that depend on ACTION): printed
/// with `mpt path`'s usage, exit code 2 like every other usage error.
fn path_usage_error(kind: clap::error::ErrorKind, msg: String) -> ! {
    let mut cmd = Cli::command();
    cmd.build();
    match cmd.find_subcommand_mut("path") {
        Some(path) => path.error(kind, msg).exit(),
        None => cmd.error(kind, msg).exit(),
    }
}

fn path_call(endpoint: &Endpoint, req: &Request) -> Result<u8, Failure> {
    let resp = endpoint.call(req).map_err(runtime)?;
    let peer = resp
        .peer
        .map(|p| format!(" (peer: {p})"))
        .unwrap_or_default();
    match req {
        Request::PathState { conn, path, state } => {
            println!("{conn} {path}: {}", state.as_str());
        }
        Request::PathWeight {
            conn,
            path,
            weight_out,
            weight_in,
        } => match weight_in {
            Some(w) => println!("{conn} {path}: weight_out {weight_out}, weight_in {w}"),
            None => println!("{conn} {path}: weight_out {weight_out}"),
        },
        Request::PathAdd { conn, name, .. } => println!("{conn} {name}: added{peer}"),
        Request::PathRemove { conn, path, .. } => println!("{conn} {path}: removed{peer}"),
        Request::Status | Request::StatusOf { .. } | Request::Reload => {}
    }
    Ok(0)
}

/// `mpt reload`: prints what changed and what needs a restart.
pub(crate) fn reload(endpoint: &Endpoint) -> Result<u8, Failure> {
    let resp = endpoint.call(&Request::Reload).map_err(runtime)?;
    let changes = resp.changes.unwrap_or_default();
    let not_applied = resp.not_applied.unwrap_or_default();
    if changes.is_empty() {
        println!("reloaded: no changes");
    } else {
        println!("reloaded, applied:");
        changes.iter().for_each(|c| println!("  {c}"));
    }
    if !not_applied.is_empty() {
        println!("not applied (restart mptd for these):");
        not_applied.iter().for_each(|c| println!("  {c}"));
    }
    Ok(0)
}
