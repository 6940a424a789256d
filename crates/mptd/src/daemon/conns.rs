//! The connections as configured: their path sockets, sessions, key
//! material and the shared state the workers and the control loop meet
//! on. Built before any thread starts, so a bad address or key file stops
//! the daemon at start.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use mpt_proto::crypto::Psk;
use mpt_proto::path::PathParams;
use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::SchedPath;
use mpt_proto::{Session, SessionConfig};
use tun_rs::InterruptEvent;

use crate::config::{Config, ConnectionConfig as Connection};
use crate::control::conn_keys::ConnKeys;
use crate::control::handshake::KeyExchange;
use crate::control::noise::{NoiseConn, NoiseDaemon, NoiseTiming};
use crate::control::routing_plan::{self, UplinkKey};
use crate::io::udp::PathSocket;
use crate::plane::shared_port::SessionMap;
use crate::plane::{ConnCrypto, ConnShared, PathShared, PathTable};
use crate::plane::{DEFAULT_REORDER_TIMEOUT, REORDER_SLOTS};

/// Every configured connection, ready for the workers and the control
/// loop.
pub(super) struct Conns {
    /// The shared state, by connection index.
    pub shared: Arc<Vec<Arc<ConnShared>>>,
    /// The sessions, by connection index (the control loop takes them).
    pub sessions: Vec<Session>,
    /// Per connection: its pre-shared key (`key_file`), if any.
    pub psks: Vec<Option<Psk>>,
    /// The public-key handshake's responder, when a connection has a
    /// `public_key` (config validation made sure the daemon has a key).
    pub noise: Option<NoiseDaemon>,
    /// Client connections (no paths): the session index map of the
    /// shared ports' workers.
    pub session_map: Arc<SessionMap>,
}

/// Builds every connection of `config`.
pub(super) fn build(
    config: &Config,
    tx_wakes: &Arc<Vec<Arc<InterruptEvent>>>,
    now: Instant,
) -> Result<Conns> {
    let noise = match &config.daemon.private_key_file {
        // A concentrator awaiting its first client answers handshakes too.
        Some(file)
            if config.awaits_clients()
                || config.connections.iter().any(|c| c.public_key.is_some()) =>
        {
            let secret = crate::keys::load_private(file)
                .with_context(|| format!("[daemon] private_key_file {}", file.display()))?;
            let identity = mpt_proto::noise::Identity::new(secret)
                .context("setting up the public-key handshake")?
                .with_cipher(config.daemon.cipher);
            Some(NoiseDaemon::with_limits(
                identity,
                config.daemon.handshake.responder_limits(),
            ))
        }
        _ => None,
    };
    // Control message ids start at the wall clock in µs, so a restarted
    // daemon's messages are never taken for repeats of its old ones.
    let first_control_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64);
    let session_map = Arc::new(SessionMap::default());
    let mut shared = Vec::new();
    let mut sessions = Vec::new();
    let mut psks = Vec::new();
    for (ci, c) in config.connections.iter().enumerate() {
        let (paths, params) = bind_paths(config, c, now)?;
        let mut session = Session::new(
            SessionConfig {
                conn_id: c.id,
                paths: params,
                first_control_id,
            },
            now,
        )
        .with_context(|| format!("connection {}", c.name))?;
        session.set_loss_repair(c.repair);
        sessions.push(session);
        let psk = match &c.key_file {
            Some(file) => Some(
                Psk::from_bytes(
                    *crate::keys::load(file).with_context(|| format!("connection {}", c.name))?,
                )
                .with_cipher(config.daemon.cipher),
            ),
            None => None,
        };
        let crypto = conn_crypto(config, c, psk.as_ref());
        psks.push(psk);
        let mut conn = ConnShared::new(
            ci,
            c.name.clone(),
            c.id,
            now,
            PathTable::new(paths),
            crypto,
            crate::plane::route::SourceFilter::for_connection(c),
            Resequencer::new(
                REORDER_SLOTS,
                usize::from(config.tunnel.mtu),
                DEFAULT_REORDER_TIMEOUT,
            ),
            DEFAULT_REORDER_TIMEOUT,
            (!c.is_client())
                .then(crate::io::udp::Waker::new)
                .transpose()
                .context("creating a wake-up event")?,
            crate::plane::TxWakes(tx_wakes.clone()),
        );
        conn.client = c.is_client();
        conn.leg_pin = crate::plane::leg_pin::LegPin::for_connection(&config.tunnel, c);
        let conn = Arc::new(conn);
        if conn.client {
            if let Some(crypto) = &conn.crypto {
                crypto.register(session_map.clone(), Arc::downgrade(&conn));
            }
            tracing::info!(conn = %c.name, port = c.port, "client connection on the shared port");
        }
        conn.adaptive.store(
            c.scheduler == crate::config::SchedulerKind::Adaptive,
            Relaxed,
        );
        conn.repair.store(c.repair, Relaxed);
        conn.set_redundancy(c.redundancy);
        shared.push(conn);
    }
    Ok(Conns {
        shared: Arc::new(shared),
        sessions,
        psks,
        noise,
        session_map,
    })
}

/// Binds the sockets of connection `c`'s configured paths; returns the
/// paths' shared state and their session parameters.
fn bind_paths(
    config: &Config,
    c: &Connection,
    now: Instant,
) -> Result<(Vec<PathShared>, Vec<PathParams>)> {
    let mut paths = Vec::new();
    let mut params = Vec::new();
    for (pi, p) in c.paths.iter().enumerate() {
        let local = match (p.local, &p.interface) {
            (Some(ip), _) => SocketAddr::new(ip, c.port),
            (None, Some(dev)) => {
                if c.key_file.is_none() {
                    tracing::warn!(conn = %c.name, path = %p.name, ifname = %dev, "interface-only path without key_file: the peer cannot learn its new address when it changes (it only takes cleartext from its configured remote)");
                }
                crate::control::links::initial_local(dev, p.remote, c.port)
            }
            // Config validation requires one of them.
            (None, None) => bail!("connection {} path {}: no local address", c.name, p.name),
        };
        let uplink = UplinkKey::of(p.interface.as_deref(), p.local);
        let mark = routing_plan::mark(config, uplink.as_ref());
        let socket =
            PathSocket::bind_marked(local, p.interface.as_deref(), mark).with_context(|| {
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
        if p.remote_name.is_some() {
            // Resolved by the control loop once it runs.
            shared.remote_fixed = true;
            shared.remote_name.clone_from(&p.remote_name);
        }
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
    Ok((paths, params))
}

/// The key sets of connection `c`: public-key (Noise, the PSK mixed in
/// when there is one), pre-shared key, or none (cleartext, with a
/// warning).
fn conn_crypto(config: &Config, c: &Connection, psk: Option<&Psk>) -> Option<ConnCrypto> {
    match (c.public_key.is_some(), psk) {
        (true, _) => {
            let timing = NoiseTiming::new(c.keepalive, c.rekey_after);
            tracing::info!(conn = %c.name, psk = psk.is_some(), cipher = %config.daemon.cipher, "public-key handshake (Noise IK)");
            Some(ConnCrypto::new_noise(
                psk.cloned()
                    .unwrap_or_else(|| Psk::from_bytes([0; 32]).with_cipher(config.daemon.cipher)),
                timing.grace,
                crate::plane::OLD_KEYS_MAX,
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
    }
}

/// Sets up every connection's key exchange, by connection index: a PSK
/// handshake for a connection with a pre-shared key and no public key, a
/// Noise handshake (registered with the daemon's responder) for one with
/// a public key. Takes `conns.psks`.
pub(super) fn key_exchanges(config: &Config, conns: &mut Conns) -> Result<Vec<ConnKeys>> {
    let exchanges = config
        .connections
        .iter()
        .zip(conns.shared.iter())
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
    let psks = std::mem::take(&mut conns.psks);
    let noise_conns = config
        .connections
        .iter()
        .zip(psks)
        .enumerate()
        .map(
            |(ci, (c, psk))| match (c.public_key, conns.noise.as_mut()) {
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
            },
        )
        .collect::<Vec<Option<NoiseConn>>>();
    Ok(exchanges
        .into_iter()
        .zip(noise_conns)
        .map(|keys| match keys {
            (Some(psk), _) => ConnKeys::Psk(Box::new(psk)),
            (None, Some(noise)) => ConnKeys::Noise(Box::new(noise)),
            (None, None) => ConnKeys::None,
        })
        .collect())
}
