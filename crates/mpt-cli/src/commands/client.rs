//! `mpt client add|list|remove`: the files the library's `branch` plans,
//! written so that a failure half-way leaves nothing behind, and the list
//! with each client's state from the daemon when it answers.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use mpt_api::Request;
use mpt_cli::branch::{check, AddRequest, Server};
use mpt_cli::ctl;

use crate::cli::client::{AddArgs, ClientCommand};
use crate::exit::{runtime, usage, Failure};

/// `mpt client ...`; `socket` is `--socket` (for `list`).
pub(crate) fn client(cmd: ClientCommand, socket: &Path) -> Result<u8, Failure> {
    match cmd {
        ClientCommand::Add(args) => add(*args),
        ClientCommand::List { config } => list(&config, socket),
        ClientCommand::Remove { name, config } => remove(&name, &config),
    }
}

/// Writes `text` to `file`, which must not exist, atomically: a hidden
/// temporary file in the same folder (no include pattern matches a
/// leading `.`), linked to its name (which fails if the name exists).
fn write_new(file: &Path, text: &str) -> anyhow::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("client");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, file)
    })();
    let _ = std::fs::remove_file(&tmp);
    result.with_context(|| format!("writing {}", file.display()))
}

/// `mpt client add`.
fn add(args: AddArgs) -> Result<u8, Failure> {
    use ring::rand::SecureRandom;
    let endpoint = check::parse_endpoint(&args.endpoint).map_err(|e| usage(anyhow!(e)))?;
    let server = Server::load(&args.config).map_err(usage)?;
    if args.key_out.exists() && !args.force {
        return Err(usage(anyhow!(
            "{} exists already; refusing to overwrite a key (use --force to replace it)",
            args.key_out.display()
        )));
    }
    let mut bytes = [0u8; mpt_proto::noise::KEY_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| runtime(anyhow!("the system random generator failed")))?;
    let secret = mpt_proto::noise::StaticSecret::from_bytes(bytes);
    let public = mptd::keys::encode_public(&secret.public_key());
    let req = AddRequest {
        key_path: args
            .key_path
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("/etc/mpt/{}.key", args.name))),
        name: args.name,
        endpoint,
        uplinks: args.uplinks,
        networks: args.networks,
        routes: (!args.routes.is_empty()).then_some(args.routes),
        ipv4: args.ipv4,
        ipv6: args.ipv6,
    };
    let plan = server.plan(&req, &public).map_err(usage)?;

    mptd::keys::write_private(&args.key_out, &secret, args.force).map_err(|e| match e {
        mptd::keys::KeyError::Exists { .. } => usage(e),
        _ => runtime(e),
    })?;
    let undo = |also_client: bool| {
        let _ = std::fs::remove_file(&args.key_out);
        if also_client {
            let _ = std::fs::remove_file(&plan.file);
        }
    };
    // The printed config must load: check it with the key just written.
    let mut check_branch = plan.branch.clone();
    check_branch.private_key_file = args.key_out.clone();
    if let Err(e) = mptd::config::parse(&check_branch.render(), "the branch's config") {
        undo(false);
        return Err(runtime(anyhow!(
            "the branch's config does not load (a bug): {e}"
        )));
    }
    if let Err(e) = write_new(&plan.file, &plan.entry.render()) {
        undo(false);
        return Err(runtime(e));
    }
    // And the server config with the new file, as the next reload reads it.
    match mptd::config::load(&args.config) {
        Ok(c) if c.connections.iter().any(|c| c.name == req.name) => {}
        Ok(_) => {
            undo(true);
            return Err(usage(anyhow!(
                "{} is not read by [daemon] include = \"{}\"; nothing written",
                plan.file.display(),
                server.config.daemon.include
            )));
        }
        Err(e) => {
            undo(true);
            return Err(usage(anyhow!(
                "the server config would not load with the new client ({e}); nothing written"
            )));
        }
    }
    print!("{}", plan.branch.render());
    let addrs: Vec<String> = [plan.entry.ipv4, plan.entry.ipv6]
        .iter()
        .flatten()
        .map(|a| a.to_string())
        .collect();
    eprintln!(
        "client {} ({}) written to {}; its private key to {} (install it on the branch as {}, mode 0600).\nRun `mpt reload` on this server to accept it.",
        req.name,
        addrs.join(", "),
        plan.file.display(),
        args.key_out.display(),
        req.key_path.display()
    );
    tracing::info!(client = %req.name, file = %plan.file.display(), "client added");
    Ok(0)
}

/// The state of each connection the daemon on `socket` runs, or why it
/// did not answer.
fn live_states(socket: &Path) -> Result<Vec<(String, &'static str)>, String> {
    let response = ctl::client::call(socket, &Request::Status).map_err(|e| e.to_string())?;
    let status = response
        .status
        .ok_or_else(|| "no status in mptd's answer".to_string())?;
    Ok(status
        .connections
        .unwrap_or_default()
        .iter()
        .filter_map(|c| Some((c.name.clone()?, ctl::status::conn_state(c))))
        .collect())
}

/// `mpt client list`.
fn list(config: &Path, socket: &Path) -> Result<u8, Failure> {
    let server = Server::load(config).map_err(usage)?;
    // --socket when given, else the server's own control socket.
    let socket = if socket == Path::new(ctl::DEFAULT_SOCKET) {
        server.config.daemon.control.clone()
    } else {
        socket.to_path_buf()
    };
    let live = live_states(&socket);
    let mut rows = vec![vec![
        "NAME".to_string(),
        "ADDRESS".into(),
        "PUBLIC KEY".into(),
        "NETWORKS".into(),
    ]];
    if live.is_ok() {
        rows[0].push("STATE".into());
    }
    for c in server.clients() {
        let addrs: Vec<String> = c
            .peer_ipv4
            .iter()
            .chain(&c.peer_ipv6)
            .map(|a| a.to_string())
            .collect();
        let nets: Vec<String> = c.networks.iter().map(|n| n.to_string()).collect();
        let mut row = vec![
            c.name.clone(),
            if addrs.is_empty() {
                "-".into()
            } else {
                addrs.join(",")
            },
            c.public_key
                .map_or("-".into(), |k| mptd::keys::encode_public(&k)),
            if nets.is_empty() {
                "-".into()
            } else {
                nets.join(",")
            },
        ];
        if let Ok(states) = &live {
            let state = states
                .iter()
                .find(|(n, _)| *n == c.name)
                .map_or("not loaded", |(_, s)| s);
            row.push(state.into());
        }
        rows.push(row);
    }
    let cols = rows[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    print!("{out}");
    if let Err(e) = live {
        eprintln!("note: no connection states: {e}");
    }
    Ok(0)
}

/// `mpt client remove`.
fn remove(name: &str, config: &Path) -> Result<u8, Failure> {
    let server = Server::load(config).map_err(usage)?;
    let Some(file) = server
        .config
        .includes
        .iter()
        .find(|f| f.connections.iter().any(|c| c == name))
    else {
        return Err(usage(
            if server.config.connections.iter().any(|c| c.name == name) {
                anyhow!(
                    "connection `{name}` is in {} itself, not in a client file: edit it there",
                    config.display()
                )
            } else {
                anyhow!("no client `{name}` in {} or its include files (`mpt client list --config {}` lists them)", config.display(), config.display())
            },
        ));
    };
    if file.connections.len() > 1 {
        return Err(usage(anyhow!(
            "{} holds other connections besides `{name}` ({}): edit it by hand",
            file.path.display(),
            file.connections.join(", ")
        )));
    }
    std::fs::remove_file(&file.path)
        .with_context(|| format!("removing {}", file.path.display()))
        .map_err(runtime)?;
    eprintln!(
        "removed {}; run `mpt reload` on this server to cut `{name}` off.",
        file.path.display()
    );
    if server.config.connections.len() == 1 {
        eprintln!("warning: the server has no connection left: mptd refuses such a config (a reload fails and keeps `{name}`; a restart fails)");
    }
    Ok(0)
}
