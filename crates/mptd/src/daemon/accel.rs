//! Wiring of TCP acceleration (`mpt_accel`, docs/ACCELERATION.md): from
//! the config to the far end's leg listeners, the near end's transparent
//! listeners and pools, and the nftables and routing rules that feed
//! them. Nothing runs and nothing is installed unless `[tunnel]
//! accel_port` is set.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use mpt_accel::direct::{DirectAuth, DirectPeer, DirectRoute, LegKey, Secret};
use mpt_accel::far::{FarConfig, FarDirect};
use mpt_accel::near::{LegPath, NearConfig, Target};
use mpt_accel::Accel;
use zeroize::Zeroizing;

use crate::config::accel::{any_near, LegMode};
use crate::config::{Config, ConnectionConfig};
use crate::control::routing_plan::{self, UplinkKey};
use crate::io::accel_rules::{self, AccelNumbers, RulesGuard};

/// How long the far end's connect to a destination may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most accelerated flows at once at the near end (two threads each).
const MAX_FLOWS: u64 = 4096;

/// A running acceleration; [`Running::stop`] ends it and removes the
/// rules (dropping it removes the rules too).
pub(super) struct Running {
    pub(super) accel: Accel,
    rules: Option<RulesGuard>,
}

impl Running {
    pub(super) fn stop(self) {
        // The rules first: no new flow is steered to a closing listener.
        drop(self.rules);
        self.accel.stop();
    }
}

/// Starts what the config asks for (`None`: acceleration off).
pub(super) fn start(config: &Config, tun: &str) -> Result<Option<Running>> {
    let settings = &config.tunnel.accel;
    let numbers = AccelNumbers::new(config.daemon.routing);
    if settings.port == 0 {
        return Ok(None);
    }
    let port = settings.port;
    let listen: Vec<SocketAddr> = [config.tunnel.ipv4, config.tunnel.ipv6]
        .into_iter()
        .flatten()
        .map(|p| SocketAddr::new(p.addr, port))
        .collect();
    let peers: Vec<IpAddr> = config
        .connections
        .iter()
        .flat_map(|c| [c.peer_ipv4, c.peer_ipv6])
        .flatten()
        .collect();
    // A path's own leg congestion control, by the peer's tunnel
    // addresses (the far end knows a leg's peer and path id).
    let path_congestion = config
        .connections
        .iter()
        .flat_map(|c| {
            let peers = [c.peer_ipv4, c.peer_ipv6].into_iter().flatten();
            peers.flat_map(move |peer| {
                c.paths
                    .iter()
                    .take(63)
                    .enumerate()
                    .filter_map(move |(i, p)| {
                        let cc = p.accel_congestion.clone()?;
                        Some(((peer, i as u8), cc))
                    })
            })
        })
        .collect();
    let direct = settings.legs == LegMode::Direct;
    let keys = if direct {
        direct_keys(config)?
    } else {
        Vec::new()
    };
    let far = FarConfig {
        direct: direct.then(|| far_direct(config, &keys)),
        listen,
        peers,
        congestion: settings.congestion.clone(),
        path_congestion,
        connect_timeout: CONNECT_TIMEOUT,
        client_source: settings.client_source,
    };
    let selectors: Vec<_> = config
        .connections
        .iter()
        .flat_map(|c| c.accelerate.iter().cloned())
        .collect();
    let near = any_near(&config.connections).then(|| NearConfig {
        port,
        v6: selectors.iter().any(|s| s.addr.is_ipv6()),
        targets: config
            .connections
            .iter()
            .zip(&keys_or_none(&keys, config.connections.len()))
            .filter(|(c, _)| !c.accelerate.is_empty())
            .map(|(c, key)| Target {
                direct: key.clone().map(|key| DirectAuth { conn_id: c.id, key }),
                selectors: c.accelerate.clone(),
                peer_v4: c.peer_ipv4.map(|a| SocketAddr::new(a, port)),
                peer_v6: c.peer_ipv6.map(|a| SocketAddr::new(a, port)),
                // Path ids are the paths' places in the config (the same
                // at both ends); a set of one leg would gain nothing.
                paths: match settings.legs {
                    // Direct legs gain their header even on one path.
                    LegMode::Direct => direct_paths(config, c),
                    LegMode::Pinned if c.paths.len() > 1 => c
                        .paths
                        .iter()
                        .take(63)
                        .enumerate()
                        .map(|(i, p)| LegPath {
                            id: i as u8,
                            congestion: p.accel_congestion.clone().unwrap_or_default(),
                            route: None,
                        })
                        .collect(),
                    _ => Vec::new(),
                },
            })
            .collect(),
        congestion: settings.congestion.clone(),
        pool: settings.pool,
        max_flows: MAX_FLOWS,
    });
    if settings.initial_window > 0 {
        leg_routes(&far.peers, tun, settings.initial_window);
    }
    // The far end's connections from clients' addresses need the local
    // delivery of transparent sockets' packets, in the tunnel's families.
    let transparent = if settings.client_source {
        (config.tunnel.ipv4.is_some(), config.tunnel.ipv6.is_some())
    } else {
        (false, false)
    };
    let needs_rules = near.is_some() || settings.client_source;
    if !needs_rules {
        // A far end only: remove what a killed near-end run left.
        accel_rules::remove(tun, numbers);
    }
    let near_runs = near.is_some();
    let accel = Accel::start(near.as_ref(), Some(&far))
        .with_context(|| format!("starting TCP acceleration on port {port}"))?;
    let rules = if needs_rules {
        match accel_rules::install(tun, port, numbers, &selectors, transparent) {
            Ok(g) => Some(g),
            Err(e) => {
                accel.stop();
                return Err(e).context("installing the acceleration's nftables and routing rules");
            }
        }
    } else {
        None
    };
    tracing::info!(
        port,
        near = near_runs,
        client_source = settings.client_source,
        legs = ?settings.legs,
        selectors = selectors.len(),
        mark = format_args!("{:#x}", numbers.mark),
        table = numbers.table,
        priority = numbers.priority,
        "TCP acceleration running"
    );
    Ok(Some(Running { accel, rules }))
}

/// Each connection's direct-leg keys (`accel_legs = "direct"`): its
/// public keys, else its PSK, else none (a cleartext connection), read
/// from the same files as the tunnel's.
fn direct_keys(config: &Config) -> Result<Vec<LegKey>> {
    let private: Option<Secret> = match &config.daemon.private_key_file {
        Some(file) if config.connections.iter().any(|c| c.public_key.is_some()) => {
            let secret = crate::keys::load_private(file)
                .with_context(|| format!("[daemon] private_key_file {}", file.display()))?;
            Some(Arc::new(Zeroizing::new(*secret.as_bytes())))
        }
        _ => None,
    };
    config
        .connections
        .iter()
        .map(|c| {
            let psk = match &c.key_file {
                Some(file) => Some(Arc::new(
                    crate::keys::load(file).with_context(|| format!("connection {}", c.name))?,
                )),
                None => None,
            };
            Ok(match (&c.public_key, &private, psk) {
                (Some(peer), Some(private), psk) => LegKey::Static {
                    private: private.clone(),
                    peer_public: *peer.as_bytes(),
                    psk,
                },
                (_, _, Some(psk)) => LegKey::Psk(psk),
                _ => LegKey::Clear,
            })
        })
        .collect()
}

/// `keys` by connection, or `None` for each when legs are not direct.
fn keys_or_none(keys: &[LegKey], n: usize) -> Vec<Option<LegKey>> {
    if keys.is_empty() {
        vec![None; n]
    } else {
        keys.iter().cloned().map(Some).collect()
    }
}

/// The far end of direct legs: a listener at each connection's port, and
/// every connection with a peer tunnel address by id.
fn far_direct(config: &Config, keys: &[LegKey]) -> FarDirect {
    let mut ports: Vec<u16> = config.connections.iter().map(|c| c.port).collect();
    ports.sort_unstable();
    ports.dedup();
    let peers: HashMap<u32, DirectPeer> = config
        .connections
        .iter()
        .zip(keys)
        .filter_map(|(c, key)| {
            let peer = c.peer_ipv4.or(c.peer_ipv6)?;
            Some((
                c.id,
                DirectPeer {
                    peer,
                    key: key.clone(),
                    remotes: c.paths.iter().filter_map(|p| p.remote).collect(),
                },
            ))
        })
        .collect();
    FarDirect { ports, peers }
}

/// A connection's paths as direct legs: each to its remote at the
/// connection's remote port, leaving as the path's UDP socket does (local
/// address, device, uplink mark). Config validation made sure every path
/// of an accelerating connection has a remote address.
fn direct_paths(config: &Config, c: &ConnectionConfig) -> Vec<LegPath> {
    c.paths
        .iter()
        .take(63)
        .enumerate()
        .filter_map(|(i, p)| {
            let uplink = UplinkKey::of(p.interface.as_deref(), p.local);
            Some(LegPath {
                id: i as u8,
                congestion: p.accel_congestion.clone().unwrap_or_default(),
                route: Some(DirectRoute {
                    remote: SocketAddr::new(p.remote?, c.remote_port),
                    local: p.local,
                    device: p.interface.clone(),
                    mark: routing_plan::mark(config, uplink.as_ref()),
                }),
            })
        })
        .collect()
}

/// Routes each peer's tunnel address with the legs' initial windows
/// before the first leg connects (`crate::io::routes::add_leg_route`),
/// unless a route to it is there already. A failure costs a slower
/// start, not the acceleration: logged, not fatal.
fn leg_routes(peers: &[IpAddr], tun: &str, packets: u32) {
    for &peer in peers {
        match crate::io::routes::add_leg_route(peer, tun, packets) {
            Ok(()) => tracing::debug!(%peer, packets, "acceleration legs' initial window set"),
            Err(crate::io::routes::RouteError::Refused { errno, .. }) if errno == libc::EEXIST => {
                tracing::warn!(%peer, "a route to the peer's tunnel address exists already: left alone (mptd replaces no route it did not create); the legs start at its windows")
            }
            Err(e) => tracing::warn!(%peer, packets, error = %e,
                "cannot set the acceleration legs' initial window on the route to the peer; legs start at the kernel's"),
        }
    }
}
