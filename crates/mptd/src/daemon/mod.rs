//! Wiring: builds the tun device, sockets, sessions and workers from a
//! validated config, runs until a signal, and tears everything down.
//!
//! Everything that can fail at start (tun, addresses, routes, sockets,
//! control socket) is created before any thread starts, so the daemon
//! either starts whole or not at all.
//!
//! Threads: one transmit worker per tun queue (`threads`, default one per
//! core), one receive worker per connection with paths, `threads` shared
//! receive workers for all client connections when there are any
//! (`crate::plane::shared_port`), `threads - 1` crypto helpers
//! shared by all of them when a connection is encrypted
//! (`crate::dataplane::crypto_pool`), one control loop, the netlink
//! listener and the host-name resolver that feed it, one control
//! socket server, and when configured the metrics server and the remote
//! command port (`crate::ops::cmd_port`); with `[tunnel] accel_port`, TCP
//! acceleration's acceptors, leg pools and per-flow copies (`accel`). The
//! main thread waits for
//! SIGTERM/SIGINT (shutdown) and SIGHUP. Readiness goes to systemd from the
//! control loop once the paths are up (`crate::io::notify`).

mod accel;
mod conns;
mod ports;
mod servers;
mod workers;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nix::sys::signal::{SigSet, Signal};
use tun_rs::InterruptEvent;

use crate::config::Config;
use crate::control::command::{Command, Request};
use crate::control::control_loop::{ControlLoop, Readiness};
use crate::control::links::NetTable;
use crate::control::pathset::ConnSetup;
use crate::control::routing::{CleanupGuard, Installed, Routing};
use crate::control::routing_plan;
use crate::io::hook::{HookCommand, HookEvent, HookRunner, Hooks};
use crate::io::policy::Ownership;
use crate::ops::control_socket::{self, StatusSource};
use crate::plane::route::Router;
use crate::plane::routing::SharedRouting;
use crate::plane::shared_port::SharedStats;
use crate::plane::{ConnSet, TxStats, TxWakes, CONTROL_QUEUE};

/// Runs the daemon until SIGTERM or SIGINT. `config_path` is re-read on
/// SIGHUP and `mpt reload`.
pub fn run(config: Config, config_path: std::path::PathBuf) -> Result<()> {
    let signals = block_signals()?;
    let threads = match config.daemon.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let tun = crate::io::tun::open(&config.tunnel, threads)
        .with_context(|| format!("creating tun interface {}", config.tunnel.name))?;
    // From here on, whatever way `run` returns, what was installed is
    // removed (the guard is dropped last but one, before the tun).
    let installed = Arc::new(Mutex::new(Installed::default()));
    let cleanup = CleanupGuard(installed.clone());
    let routing_view = SharedRouting::default();
    let routing = install_routing(&config, &tun.name, installed, &routing_view)?;
    // One wake-up event per transmit worker: shutdown, and path-table
    // changes (an idle worker must let go of a removed path's socket).
    let tx_wakes: Arc<Vec<Arc<InterruptEvent>>> = Arc::new(
        tun.queues
            .iter()
            .map(|_| InterruptEvent::new().map(Arc::new))
            .collect::<std::io::Result<_>>()
            .context("creating wake-up events")?,
    );
    let now = Instant::now();
    let mut conns = conns::build(&config, &tx_wakes, now)?;
    let shared_ports = ports::bind(&config, threads)?;
    let shared_stats = Arc::new(SharedStats::default());
    let listener = control_socket::bind(&config.daemon.control)
        .with_context(|| format!("control socket {}", config.daemon.control.display()))?;

    let shutdown = Arc::new(AtomicBool::new(false));
    let tx_stats = Arc::new(TxStats::default());
    let router = Arc::new(Router::from_config(&config));
    let conn_set = Arc::new(ConnSet::new(conns.shared.clone(), router.clone()));
    let (control_tx, control_rx) = crate::plane::control_queues(
        CONTROL_QUEUE,
        config.daemon.handshake.queue,
        tx_stats.clone(),
    );
    let mut workers = workers::Threads::default();

    let keys = conns::key_exchanges(&config, &mut conns)?;
    let noise_stats = conns.noise.as_ref().map(|n| n.stats.clone());
    let mac1 = conns.noise.as_ref().map(|n| n.identity().mac1_check());
    if let Some(check) = &mac1 {
        // Initiations on a connection's own sockets pass the same filter
        // as on the shared ports.
        for c in conns.shared.iter().filter_map(|c| c.crypto.as_ref()) {
            c.set_mac1(check.clone());
        }
    }
    let (command_tx, command_rx) = sync_channel(16);
    let (links, netlink_stats) = workers::start_netlink(&mut workers, &control_tx, &shutdown)?;
    let hooks = start_hooks(&config, &tun.name)?;
    if let Some((h, _)) = &hooks {
        // The tun and its routes exist; the connections come up later.
        h.send(HookEvent::new("tunnel-up").with("MPT_CONNECTIONS", conns.shared.len()));
    }
    let names = workers::start_resolver(
        &mut workers,
        &control_tx,
        &shutdown,
        config.daemon.resolve_interval,
    )?;
    if links.is_none() {
        tracing::warn!("without netlink events, the uplinks' routing is not updated when addresses, links or gateways change");
    }
    let links = links.map(|l| l.with_routing(routing));
    let control_loop = ControlLoop {
        conns: conns.shared.clone(),
        sessions: std::mem::take(&mut conns.sessions),
        keys,
        noise: conns.noise.take(),
        input: control_rx,
        shutdown: shutdown.clone(),
        commands: command_rx,
        config_path,
        config: config.clone(),
        setups: config
            .connections
            .iter()
            .map(|c| ConnSetup {
                port: c.port,
                remote_port: c.remote_port,
                keepalive: c.keepalive,
                dead_timer: c.dead_timer,
            })
            .collect(),
        peer_locals: config.connections.iter().map(|c| c.peer_locals()).collect(),
        draining: Vec::new(),
        pending: Vec::new(),
        readiness: Some(Readiness::new(now)),
        models: Vec::new(),
        links,
        names: Some(names),
        shared_ports: shared_ports.send,
        conn_set: conn_set.clone(),
        session_map: conns.session_map.clone(),
        tx_wakes: TxWakes(tx_wakes.clone()),
        tun_name: tun.name.clone(),
        hooks: hooks.as_ref().map(|(h, _)| h.clone()),
        conn_alive: Vec::new(),
    };
    workers.spawn("control".into(), move || control_loop.run())?;
    let crypto_pool = workers::start_crypto_pool(&conns.shared, threads)?;
    let data_plane = workers::DataPlane {
        queues: tun.queues.clone(),
        conns: conns.shared.clone(),
        conn_set: conn_set.clone(),
        router,
        tx_stats: tx_stats.clone(),
        tx_wakes: tx_wakes.clone(),
        control_tx,
        shutdown: shutdown.clone(),
        crypto_pool: crypto_pool.clone(),
        mtu: usize::from(config.tunnel.mtu),
        mss_clamp: config.tunnel.mss_clamp,
    };
    data_plane.start_tx(&mut workers)?;
    data_plane.start_shared_rx(
        &mut workers,
        shared_ports.sockets,
        shared_ports.lanes,
        &conns.session_map,
        &shared_stats,
        mac1,
    )?;
    let path_count = data_plane.start_conn_rx(&mut workers)?;
    // The workers hold their own senders; the queue closes when they end.
    drop(data_plane);
    let accel = accel::start(&config, &tun.name)?;
    let source = StatusSource {
        conns: conn_set,
        tx: tx_stats,
        tun_name: tun.name.clone(),
        started: now,
        commands: command_tx.clone(),
        netlink: netlink_stats,
        noise: noise_stats,
        shared: (!shared_ports.ports.is_empty()).then(|| shared_stats.clone()),
        hooks: hooks.as_ref().map(|(h, _)| h.stats.clone()),
        routing: routing_view,
        accel: accel.as_ref().map(|a| a.accel.stats.clone()),
    };
    let servers = servers::Servers::start(&config, listener, source, &shutdown)?;

    tracing::info!(
        tun = %tun.name,
        queues = tun.queues.len(),
        connections = conns.shared.len(),
        paths = path_count,
        control = %servers.control_path().display(),
        "mptd running"
    );

    let stopped = wait_for_stop(&signals, &command_tx);
    if let Some(a) = accel {
        a.stop();
    }
    stopped?;
    shutdown.store(true, Relaxed);
    for w in tx_wakes.iter() {
        let _ = w.trigger();
    }
    servers.wake();
    workers.join();
    // The workers that submitted to the crypto helpers are gone.
    crypto_pool.stop();
    servers.join();
    // Before the tun goes, as the hook may want to undo what it did.
    if let Some((h, runner)) = hooks {
        h.finish(runner, HookEvent::new("tunnel-down"));
    }
    drop(cleanup);
    drop(tun);
    if let Some(cause) = crate::io::fatal::cause() {
        bail!("{cause}");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Starts the hook's runner when `[daemon] hook` names a program.
fn start_hooks(config: &Config, tun: &str) -> Result<Option<(Hooks, HookRunner)>> {
    if config.daemon.hook.is_empty() {
        return Ok(None);
    }
    let command = HookCommand {
        argv: config.daemon.hook.clone(),
        timeout: config.daemon.hook_timeout,
    };
    let started = Hooks::start(command, tun).context("starting the hook thread")?;
    Ok(Some(started))
}

/// Installs the plan of `crate::control::routing_plan` for `config`
/// (after removing what a killed earlier run left) and returns what keeps
/// it in line with the kernel's changes. Marks the daemon's sockets from
/// now on when there is policy routing.
fn install_routing(
    config: &Config,
    tun: &str,
    installed: Arc<Mutex<Installed>>,
    view: &SharedRouting,
) -> Result<Routing> {
    let n = config.daemon.routing;
    let own = Ownership {
        priority: n.priority_base,
        table: n.table_base,
        tables: routing_plan::uplinks(config).len().max(64) as u32,
    };
    match crate::io::policy::remove_leftovers(&own) {
        Ok(0) => {}
        Ok(removed) => tracing::info!(removed, "removed the rules and routes an earlier run left"),
        Err(e) => {
            tracing::warn!(error = %e, "cannot look for rules and routes an earlier run left")
        }
    }
    if routing_plan::active(config) {
        crate::io::udp::set_default_mark(n.fwmark_base);
    }
    let index = nix::net::if_::if_nametoindex(tun).with_context(|| format!("interface {tun}"))?;
    let mut routing = Routing::new(config.clone(), index, installed, view.clone());
    let mut table = NetTable::default();
    table.watch(routing.watched());
    for e in crate::io::netlink::snapshot().context("reading links, addresses and routes")? {
        table.apply(&e);
    }
    routing
        .apply(&table)
        .context("installing the routing rules and routes")?;
    Ok(routing)
}

/// Blocks SIGTERM, SIGINT and SIGHUP in every thread (the threads started
/// later inherit the mask); the main thread takes them with sigwait, so no
/// handler runs in the middle of a worker.
fn block_signals() -> Result<SigSet> {
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block().context("blocking signals")?;
    Ok(signals)
}

/// Waits for SIGTERM or SIGINT; a SIGHUP meanwhile reloads the config.
fn wait_for_stop(signals: &SigSet, commands: &SyncSender<Request>) -> Result<()> {
    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => match control_socket::execute(commands, Command::Reload) {
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "reload failed; nothing changed"),
            },
            Ok(sig) => {
                if crate::io::fatal::cause().is_none() {
                    tracing::info!(signal = %sig, "shutting down");
                }
                crate::io::notify::stopping();
                return Ok(());
            }
            Err(e) => bail!("waiting for signals: {e}"),
        }
    }
}
