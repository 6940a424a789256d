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
//! (`crate::shared`), `threads - 1` crypto helpers
//! shared by all of them when a connection is encrypted
//! (`crate::crypto_pool`), one control loop, one control
//! socket server, and when configured the metrics server and the remote
//! command port (`crate::cmd_port`). The main thread waits for
//! SIGTERM/SIGINT (shutdown) and SIGHUP. Readiness goes to systemd from the
//! control loop once the paths are up (`crate::notify`).

use std::net::SocketAddr;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use mpt_proto::path::PathParams;
use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::SchedPath;
use mpt_proto::{Session, SessionConfig};
use nix::sys::signal::{SigSet, Signal};
use tun_rs::InterruptEvent;

use crate::command::Command;
use crate::config::{Config, Prefix};
use crate::control::{self, StatusSource};
use crate::control_loop::{ControlLoop, Readiness};
use crate::crypto_pool::{CryptoPool, DEFAULT_MIN_CHUNK, DEFAULT_SPIN};
use crate::handshake::KeyExchange;
use crate::noise::{NoiseConn, NoiseDaemon, NoiseTiming};
use crate::pathset::ConnSetup;
use crate::route::Router;
use crate::rx::RxWorker;
use crate::state::{ConnCrypto, ConnShared, PathShared, PathTable};
use crate::tx::{TxStats, TxWorker};
use crate::udp::PathSocket;
use mpt_proto::crypto::Psk;

/// Control datagrams queued between receive workers and the control loop.
/// Probes arrive a few per second per path; 4096 absorbs bursts without
/// letting a flood hold much memory (each entry is ~70 bytes).
const CONTROL_QUEUE: usize = 4096;

/// Resequencing window per connection, in packets: 4096 covers a 10 ms
/// gap at ~5 Gbit/s of 1400-byte packets (5.7 MB per connection at MTU
/// 1400).
pub const REORDER_SLOTS: usize = 4096;

/// Gap timeout until the control loop has RTT samples to adapt it, and its
/// floor (the timing policy's, see `mpt_proto::session::timing`).
pub use mpt_proto::session::timing::DEFAULT_REORDER_TIMEOUT;

/// Runs the daemon until SIGTERM or SIGINT. `config_path` is re-read on
/// SIGHUP and `mpt reload`.
pub fn run(config: Config, config_path: std::path::PathBuf) -> Result<()> {
    // Block the signals in every thread; the main thread takes them with
    // sigwait, so no handler runs in the middle of a worker.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block().context("blocking signals")?;

    let threads = match config.daemon.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let tun = crate::tun::open(&config.tunnel, threads)
        .with_context(|| format!("creating tun interface {}", config.tunnel.name))?;
    for c in &config.connections {
        for net in &c.networks {
            add_route(net, &tun.name)
                .with_context(|| format!("connection {}: route {net}", c.name))?;
        }
    }
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
    let mut conns = Vec::new();
    let mut sessions = Vec::new();
    // Per connection: its PSK (`key_file`), if any.
    let mut psks: Vec<Option<Psk>> = Vec::new();
    // The public-key handshake's responder, when a connection has a
    // `public_key` (config validation made sure the daemon has a key).
    let mut noise = match &config.daemon.private_key_file {
        Some(file) if config.connections.iter().any(|c| c.public_key.is_some()) => {
            let secret = crate::keys::load_private(file)
                .with_context(|| format!("[daemon] private_key_file {}", file.display()))?;
            let identity = mpt_proto::noise::Identity::new(secret)
                .context("setting up the public-key handshake")?
                .with_cipher(config.daemon.cipher);
            Some(NoiseDaemon::new(identity))
        }
        _ => None,
    };
    // Control message ids start at the wall clock in µs, so a restarted
    // daemon's messages are never taken for repeats of its old ones.
    let first_control_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64);
    // Client connections (no paths): the session index map of the
    // shared ports' workers.
    let session_map = Arc::new(crate::shared::SessionMap::default());
    for (ci, c) in config.connections.iter().enumerate() {
        let mut paths = Vec::new();
        let mut params = Vec::new();
        for (pi, p) in c.paths.iter().enumerate() {
            let local = match (p.local, &p.interface) {
                (Some(ip), _) => SocketAddr::new(ip, c.port),
                (None, Some(dev)) => {
                    if c.key_file.is_none() {
                        tracing::warn!(conn = %c.name, path = %p.name, ifname = %dev, "interface-only path without key_file: the peer cannot learn its new address when it changes (it only takes cleartext from its configured remote)");
                    }
                    crate::links::initial_local(dev, p.remote, c.port)
                }
                // Config validation requires one of them.
                (None, None) => bail!("connection {} path {}: no local address", c.name, p.name),
            };
            let socket = PathSocket::bind(local, p.interface.as_deref()).with_context(|| {
                format!(
                    "connection {} path {}: binding {local}{}",
                    c.name,
                    p.name,
                    p.interface
                        .as_ref()
                        .map(|i| format!(" on {i}"))
                        .unwrap_or_default()
                )
            })?;
            let remote = p.remote.map(|r| SocketAddr::new(r, c.remote_port));
            let sched = SchedPath {
                weight: p.weight_out,
                window: p.window,
            };
            let mut shared =
                PathShared::new(pi, p.name.clone(), socket, remote, sched, p.weight_in, now);
            shared.interface = p.interface.clone();
            shared.follow = p.local.is_none();
            shared.from_config = true;
            paths.push(shared);
            params.push(PathParams {
                keepalive: c.keepalive,
                dead_timer: c.dead_timer,
                weight_out: p.weight_out,
                weight_in: p.weight_in,
                window: p.window,
                admin: p.status,
            });
        }
        sessions.push(
            Session::new(
                SessionConfig {
                    conn_id: c.id,
                    paths: params,
                    first_control_id,
                },
                now,
            )
            .with_context(|| format!("connection {}", c.name))?,
        );
        if let Some(session) = sessions.last_mut() {
            session.set_loss_repair(c.repair);
        }
        let psk = match &c.key_file {
            Some(file) => Some(
                Psk::from_bytes(
                    crate::keys::load(file).with_context(|| format!("connection {}", c.name))?,
                )
                .with_cipher(config.daemon.cipher),
            ),
            None => None,
        };
        let crypto = match (c.public_key.is_some(), &psk) {
            (true, _) => {
                let timing = NoiseTiming::new(c.keepalive, c.rekey_after);
                tracing::info!(conn = %c.name, psk = psk.is_some(), cipher = %config.daemon.cipher, "public-key handshake (Noise IK)");
                Some(ConnCrypto::new_noise(
                    psk.clone().unwrap_or_else(|| {
                        Psk::from_bytes([0; 32]).with_cipher(config.daemon.cipher)
                    }),
                    timing.grace,
                    crate::state::OLD_KEYS_MAX,
                ))
            }
            (false, Some(psk)) => {
                tracing::info!(conn = %c.name, cipher = %psk.cipher(), "pre-shared-key handshake");
                Some(ConnCrypto::new(psk.clone()))
            }
            (false, None) => {
                tracing::warn!(conn = %c.name, "no key_file or public_key: traffic is neither encrypted nor authenticated");
                None
            }
        };
        psks.push(psk);
        let mut conn = ConnShared::new(
            ci,
            c.name.clone(),
            c.id,
            now,
            PathTable::new(paths),
            crypto,
            crate::route::SourceFilter::for_connection(c),
            Resequencer::new(
                REORDER_SLOTS,
                usize::from(config.tunnel.mtu),
                DEFAULT_REORDER_TIMEOUT,
            ),
            DEFAULT_REORDER_TIMEOUT,
            crate::udp::Waker::new().context("creating a wake-up event")?,
            crate::state::TxWakes(tx_wakes.clone()),
        );
        conn.client = c.is_client();
        let conn = Arc::new(conn);
        if conn.client {
            if let Some(crypto) = &conn.crypto {
                crypto.register(session_map.clone(), Arc::downgrade(&conn));
            }
            tracing::info!(conn = %c.name, port = c.port, "client connection on the shared port");
        }
        conns.push(conn);
        if let Some(shared) = conns.last() {
            shared.adaptive.store(
                c.scheduler == crate::config::SchedulerKind::Adaptive,
                std::sync::atomic::Ordering::Relaxed,
            );
            shared
                .repair
                .store(c.repair, std::sync::atomic::Ordering::Relaxed);
            let redundancy = match c.redundancy {
                mpt_proto::sched::Redundancy::Auto => 0,
                mpt_proto::sched::Redundancy::Off => 1,
                mpt_proto::sched::Redundancy::All => 2,
            };
            shared
                .redundancy
                .store(redundancy, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let conns = Arc::new(conns);
    // The shared ports: per port of a client connection, one socket per
    // receive worker and family (SO_REUSEPORT; see `crate::shared`).
    let mut shared_ports: Vec<u16> = config
        .connections
        .iter()
        .filter(|c| c.is_client())
        .map(|c| c.port)
        .collect();
    shared_ports.sort_unstable();
    shared_ports.dedup();
    let mut shared_sockets: Vec<Vec<PathSocket>> = (0..threads).map(|_| Vec::new()).collect();
    let mut shared_send = Vec::new();
    for &port in &shared_ports {
        let mut send = crate::control_loop::SharedPort {
            port,
            v4: None,
            v6: None,
        };
        for any in [
            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port)),
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)),
        ] {
            for (w, sockets) in shared_sockets.iter_mut().enumerate() {
                match PathSocket::bind_shared(any) {
                    Ok(s) => {
                        if w == 0 {
                            let handle = s.try_clone().context("shared port socket")?;
                            if any.is_ipv4() {
                                send.v4 = Some(handle);
                            } else {
                                send.v6 = Some(handle);
                            }
                        }
                        sockets.push(s);
                    }
                    // No IPv6 on this host: clients use IPv4.
                    Err(e) if any.is_ipv6() && w == 0 => {
                        tracing::warn!(port, error = %e, "shared port: no IPv6 socket; clients reach it over IPv4 only");
                        break;
                    }
                    Err(e) => {
                        return Err(e).with_context(|| format!("shared port: binding {any}"));
                    }
                }
            }
        }
        tracing::info!(
            port,
            workers = threads,
            ipv6 = send.v6.is_some(),
            "shared port for client connections"
        );
        shared_send.push(send);
    }
    let shared_stats = Arc::new(crate::shared::SharedStats::default());
    let listener = control::bind(&config.daemon.control)
        .with_context(|| format!("control socket {}", config.daemon.control.display()))?;

    let shutdown = Arc::new(AtomicBool::new(false));
    let tx_stats = Arc::new(TxStats::default());
    let router = Arc::new(Router::from_config(&config));
    let conn_set = Arc::new(crate::state::ConnSet::new(conns.clone(), router.clone()));
    let (control_tx, control_rx) = sync_channel(CONTROL_QUEUE);
    let mut handles: Vec<JoinHandle<()>> = Vec::new();
    let spawn = |name: String, f: Box<dyn FnOnce() + Send>| -> Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name(name.clone())
            .spawn(f)
            .with_context(|| format!("starting thread {name}"))
    };

    let exchanges = config
        .connections
        .iter()
        .zip(conns.iter())
        .map(|(c, shared)| {
            shared
                .crypto
                .as_ref()
                .filter(|cr| !cr.noise)
                .map(|cr| KeyExchange::new(&cr.psk, c.id, c.keepalive))
                .transpose()
        })
        .collect::<Result<Vec<_>, _>>()
        .context("setting up key exchange")?;
    let noise_conns: Vec<Option<NoiseConn>> = config
        .connections
        .iter()
        .zip(psks)
        .enumerate()
        .map(|(ci, (c, psk))| match (c.public_key, noise.as_mut()) {
            (Some(peer), Some(nd)) => {
                nd.add_peer(peer, ci, psk.clone());
                Some(NoiseConn::new(
                    nd.identity().clone(),
                    peer,
                    psk,
                    NoiseTiming::new(c.keepalive, c.rekey_after).with_settle(c.dead_timer),
                ))
            }
            _ => None,
        })
        .collect();
    let noise_stats = noise.as_ref().map(|n| n.stats.clone());
    let noise_mac1 = noise.as_ref().map(|n| n.identity().mac1_check());
    let (command_tx, command_rx) = sync_channel(16);
    // Link and address events: a listener thread feeds the control loop
    // (and wakes it, so a link lost is acted on at once, not at its next
    // tick). Without netlink the paths follow their timers only.
    let (net_tx, net_rx) = std::sync::mpsc::channel();
    let mut netlink_stats = None;
    let links = match crate::netlink::Listener::open() {
        Ok(listener) => {
            netlink_stats = Some(listener.stats.clone());
            let wake_tx = control_tx.clone();
            let stop = shutdown.clone();
            handles.push(spawn(
                "netlink".into(),
                Box::new(move || {
                    let wake = move || {
                        let _full_queue_wakes_it_anyway =
                            wake_tx.try_send(crate::rx::ControlDatagram {
                                conn: crate::links::WAKE_CONN,
                                path: 0,
                                at: Instant::now(),
                                from: None,
                                to: None,
                                port: 0,
                                len: 0,
                                bytes: [0; crate::rx::CONTROL_DATAGRAM_MAX],
                            });
                    };
                    listener.run(net_tx, wake, stop)
                }),
            )?);
            Some(crate::links::Links::new(net_rx))
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen to netlink: link and address changes are not followed");
            None
        }
    };
    let control_loop = ControlLoop {
        conns: conns.clone(),
        sessions,
        exchanges,
        noise,
        noise_conns,
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
        shared_ports: shared_send,
        conn_set: conn_set.clone(),
        session_map: session_map.clone(),
        tx_wakes: crate::state::TxWakes(tx_wakes.clone()),
        tun_name: tun.name.clone(),
    };
    handles.push(spawn(
        "control".into(),
        Box::new(move || control_loop.run()),
    )?);
    // The crypto stage: `threads - 1` helpers shared by every worker (the
    // worker that submits a batch is the other core's worth); none for
    // cleartext-only configurations, which never use them.
    let encrypted = conns.iter().any(|c| c.crypto.is_some());
    let helpers = if encrypted {
        threads.saturating_sub(1)
    } else {
        0
    };
    let min_chunk = env_usize("MPT_CRYPTO_MIN_CHUNK").unwrap_or(DEFAULT_MIN_CHUNK);
    let spin = env_usize("MPT_CRYPTO_SPIN_US").map_or(DEFAULT_SPIN, |us| {
        std::time::Duration::from_micros(us as u64)
    });
    let crypto_pool = Arc::new(
        CryptoPool::start(helpers, min_chunk, spin).context("starting the crypto helpers")?,
    );
    tracing::debug!(
        helpers,
        min_chunk,
        spin_us = spin.as_micros() as u64,
        "crypto stage"
    );
    for (qi, queue) in tun.queues.iter().enumerate() {
        let w = TxWorker {
            tun: queue.clone(),
            conns: conns.clone(),
            set: conn_set.clone(),
            router: router.clone(),
            stats: tx_stats.clone(),
            shutdown: shutdown.clone(),
            wake: tx_wakes[qi].clone(),
            mtu: usize::from(config.tunnel.mtu),
            crypto_pool: crypto_pool.clone(),
        };
        handles.push(spawn(format!("tx{qi}"), Box::new(move || w.run()))?);
    }
    let mut path_count = 0;
    let mac1 = noise_mac1;
    for (w, sockets) in shared_sockets.into_iter().enumerate() {
        if sockets.is_empty() {
            continue;
        }
        let Some(mac1) = mac1.clone() else {
            bail!("client connections need [daemon] private_key_file");
        };
        let worker = crate::rx::SharedRxWorker {
            sockets,
            map: session_map.clone(),
            stats: shared_stats.clone(),
            tun: tun.queues[w % tun.queues.len()].clone(),
            control: control_tx.clone(),
            shutdown: shutdown.clone(),
            crypto_pool: crypto_pool.clone(),
            mac1,
        };
        handles.push(spawn(
            format!("rx-shared{w}"),
            Box::new(move || worker.run()),
        )?);
    }
    for (ci, conn) in conns.iter().enumerate() {
        if conn.client {
            continue;
        }
        path_count += conn.paths().len();
        let w = RxWorker {
            conn: conn.clone(),
            tun: tun.queues[ci % tun.queues.len()].clone(),
            control: control_tx.clone(),
            shutdown: shutdown.clone(),
            crypto_pool: crypto_pool.clone(),
        };
        handles.push(spawn(
            format!("rx-{}", conn.name),
            Box::new(move || w.run()),
        )?);
    }
    drop(control_tx);
    let source = StatusSource {
        conns: conn_set.clone(),
        tx: tx_stats.clone(),
        tun_name: tun.name.clone(),
        started: now,
        commands: command_tx.clone(),
        netlink: netlink_stats,
        noise: noise_stats,
        shared: (!shared_ports.is_empty()).then(|| shared_stats.clone()),
    };
    let metrics = match config.daemon.metrics.as_str() {
        "" => None,
        addr => {
            let listener = std::net::TcpListener::bind(addr)
                .with_context(|| format!("metrics listener on {addr}"))?;
            let local = listener.local_addr().context("metrics listener address")?;
            let src = source.clone();
            let stop = shutdown.clone();
            let handle = spawn(
                "metrics".into(),
                Box::new(move || crate::metrics::serve(listener, src, stop)),
            )?;
            tracing::info!(metrics = %local, "serving Prometheus metrics");
            Some((handle, local))
        }
    };
    // Remote command port (`[daemon] cmd_port`, 0 = off): TCP and UDP on
    // its own threads, which stop with the shutdown flag.
    let cmd_port = crate::cmd_port::start(&config, source.clone(), shutdown.clone())
        .with_context(|| format!("remote command port {}", config.daemon.cmd_port))?;
    let control_path = config.daemon.control.clone();
    let serve_shutdown = shutdown.clone();
    let serve_path = control_path.clone();
    let control_server = spawn(
        "control-socket".into(),
        Box::new(move || control::serve(listener, source, serve_shutdown, serve_path)),
    )?;

    tracing::info!(
        tun = %tun.name,
        queues = tun.queues.len(),
        connections = conns.len(),
        paths = path_count,
        control = %control_path.display(),
        "mptd running"
    );

    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => match control::execute(&command_tx, Command::Reload) {
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "reload failed; nothing changed"),
            },
            Ok(sig) => {
                if crate::fatal::cause().is_none() {
                    tracing::info!(signal = %sig, "shutting down");
                }
                crate::notify::stopping();
                break;
            }
            Err(e) => bail!("waiting for signals: {e}"),
        }
    }
    shutdown.store(true, Relaxed);
    for w in tx_wakes.iter() {
        let _ = w.trigger();
    }
    // Wake the control socket's accept().
    let _ = std::os::unix::net::UnixStream::connect(&control_path);
    for h in handles {
        if h.join().is_err() {
            tracing::error!("a worker thread panicked");
        }
    }
    // The workers that submitted to the crypto helpers are gone.
    crypto_pool.stop();
    let _ = control_server.join();
    if let Some((handle, addr)) = metrics {
        let _ = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(1));
        let _ = handle.join();
    }
    if let Some(server) = cmd_port {
        server.join();
    }
    drop(tun);
    if let Some(cause) = crate::fatal::cause() {
        bail!("{cause}");
    }
    tracing::info!("stopped");
    Ok(())
}

/// A tuning knob from the environment (benchmarks only; see
/// docs/ARCHITECTURE.md, "Scaling").
fn env_usize(name: &str) -> Option<usize> {
    let v = std::env::var(name).ok()?;
    match v.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => {
            tracing::warn!(var = name, value = %v, "not a number; ignored");
            None
        }
    }
}

/// Routes `net` into the tunnel. The route disappears with the interface.
pub fn add_route(net: &Prefix, dev: &str) -> Result<()> {
    let family = if net.addr.is_ipv4() { "-4" } else { "-6" };
    let out = std::process::Command::new("ip")
        .args([family, "route", "replace", &net.to_string(), "dev", dev])
        .output()
        .context("running `ip route` (is iproute2 installed?)")?;
    if !out.status.success() {
        bail!(
            "ip route replace failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Takes the route to `net` out of the tunnel (a removed client's
/// `networks`).
pub fn del_route(net: &Prefix, dev: &str) -> Result<()> {
    let family = if net.addr.is_ipv4() { "-4" } else { "-6" };
    let out = std::process::Command::new("ip")
        .args([family, "route", "del", &net.to_string(), "dev", dev])
        .output()
        .context("running `ip route` (is iproute2 installed?)")?;
    if !out.status.success() {
        bail!(
            "ip route del failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
