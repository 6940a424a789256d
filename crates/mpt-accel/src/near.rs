//! The near end: takes the flows nftables `tproxy` steered to the
//! transparent listeners and carries each over a leg to the far end.
//!
//! Per flow: one thread that opens it on a leg or pinned leg set (an idle
//! one from the pool, else a fresh one) and at once runs the flow
//! (`crate::pump`, a second thread for the other direction): the client's
//! first bytes follow the OPEN without waiting for the far end's connect
//! result, which is the first message back. A destination that refused
//! or could not be reached is answered with a reset: the client's connect
//! itself succeeded (the gateway accepted it), so a refusal shows as a
//! reset on the first read or write.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::chunk::Msg;
use crate::congestion::LossyPaths;
use crate::direct::{DirectAuth, DirectRoute};
use crate::frame;
use crate::pool::{Pool, Warm};
use crate::pump::{self, Ending, Leg};
use crate::selector::Selector;
use crate::stats::{Gauge, Stats};
use crate::{sock, Threads};

/// Where the flows to some destinations go.
#[derive(Debug, Clone)]
pub struct Target {
    /// The destinations (`accelerate`).
    pub selectors: Vec<Selector>,
    /// The far end's leg listener for IPv4 destinations.
    pub peer_v4: Option<SocketAddr>,
    /// ... and for IPv6 destinations.
    pub peer_v6: Option<SocketAddr>,
    /// Pinned leg sets over these tunnel paths, one leg each (empty:
    /// single legs).
    pub paths: Vec<LegPath>,
    /// Direct legs (`crate::direct`): the connection's id and keys; then
    /// every path has a [`LegPath::route`].
    pub direct: Option<DirectAuth>,
}

/// One tunnel path of a pinned leg set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegPath {
    /// The path's id in the tunnel (its place in the connection's config,
    /// the same at both ends).
    pub id: u8,
    /// Its leg's congestion control ("" = the legs' default).
    pub congestion: String,
    /// For direct legs: where the path's leg goes and how it leaves.
    pub route: Option<DirectRoute>,
}

/// The near end's settings.
#[derive(Debug, Clone)]
pub struct NearConfig {
    /// The transparent listeners' port (on 127.0.0.1 and ::1).
    pub port: u16,
    /// Listen on IPv6 too.
    pub v6: bool,
    /// Destinations and their far ends, first match wins.
    pub targets: Vec<Target>,
    /// The legs' congestion control ("" = the system's).
    pub congestion: String,
    /// Idle legs kept per far end.
    pub pool: usize,
    /// Most flows at once (each is two threads here).
    pub max_flows: u64,
}

/// A target's selectors and its pools for IPv4 and IPv6 destinations.
type Route = (Vec<Selector>, Option<Arc<Pool>>, Option<Arc<Pool>>);

struct Shared {
    routes: Vec<Route>,
    stats: Arc<Stats>,
    max_flows: u64,
}

/// Starts the near end's listeners and pool fillers on `threads`.
pub fn start(
    cfg: &NearConfig,
    stats: Arc<Stats>,
    lossy: Arc<LossyPaths>,
    threads: &mut Threads,
) -> std::io::Result<()> {
    let mut pools: Vec<Arc<Pool>> = Vec::new();
    let mut pool_for =
        |peer: Option<SocketAddr>, paths: &[LegPath], direct: &Option<DirectAuth>| {
            peer.map(|p| {
                if let Some(found) = pools.iter().find(|x| x.peer == p) {
                    return found.clone();
                }
                let pool = Arc::new(Pool::new(
                    p,
                    cfg.pool,
                    paths.to_vec(),
                    direct.clone(),
                    &cfg.congestion,
                    lossy.clone(),
                    stats.clone(),
                ));
                pools.push(pool.clone());
                pool
            })
        };
    let routes = cfg
        .targets
        .iter()
        .map(|t| {
            (
                t.selectors.clone(),
                pool_for(t.peer_v4, &t.paths, &t.direct),
                pool_for(t.peer_v6, &t.paths, &t.direct),
            )
        })
        .collect();
    let shared = Arc::new(Shared {
        routes,
        stats,
        max_flows: cfg.max_flows,
    });
    // On loopback: nothing reaches them but what tproxy steers there (and
    // the far end's listener may use the same port on the tunnel address).
    let mut addrs = vec![SocketAddr::from(([127, 0, 0, 1], cfg.port))];
    if cfg.v6 {
        addrs.push(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, cfg.port)));
    }
    for addr in addrs {
        let l = sock::transparent_listener(addr)?;
        let sh = shared.clone();
        threads.spawn_acceptor(format!("accel-near-{addr}"), l, move |client| {
            accept(&sh, client)
        })?;
    }
    for pool in pools {
        let p = pool.clone();
        let stop = threads.stop.clone();
        threads.spawn("accel-pool".into(), move || p.fill(&stop))?;
        threads.wakers.push(Box::new(move || pool.wake()));
    }
    Ok(())
}

fn accept(sh: &Arc<Shared>, client: TcpStream) {
    if sh.stats.flows_active.load(Relaxed) >= sh.max_flows {
        sh.stats.dropped.fetch_add(1, Relaxed);
        sock::arm_reset(&client);
        return;
    }
    let sh2 = sh.clone();
    let spawned = std::thread::Builder::new()
        .name("accel-flow".into())
        .spawn(move || serve(&sh2, client));
    if spawned.is_err() {
        sh.stats.dropped.fetch_add(1, Relaxed);
    }
}

fn serve(sh: &Shared, client: TcpStream) {
    let (Ok(dst), Ok(src)) = (client.local_addr(), client.peer_addr()) else {
        return;
    };
    let stats = &*sh.stats;
    let pool = sh.routes.iter().find_map(|(sel, v4, v6)| {
        sel.iter()
            .any(|s| s.matches(dst))
            .then(|| if dst.is_ipv4() { v4 } else { v6 }.clone())
            .flatten()
    });
    let Some(pool) = pool else {
        // nftables steered a flow no `accelerate` entry selects (the rules
        // and the config disagree): refuse it rather than guess a peer.
        stats.dropped.fetch_add(1, Relaxed);
        sock::arm_reset(&client);
        return;
    };
    stats.flows.fetch_add(1, Relaxed);
    let _active = Gauge::up(&stats.flows_active);
    let Some(warm) = open(&pool, src, dst) else {
        stats.dropped.fetch_add(1, Relaxed);
        tracing::debug!(%src, %dst, "accelerated flow: no leg to the far end");
        sock::arm_reset(&client);
        return;
    };
    let _ = client.set_nodelay(true);
    let busy = Gauge::up(&stats.legs_busy);
    let counters = (&stats.bytes_up, &stats.bytes_down);
    let end = match &warm {
        Warm::Leg(leg) => pump::run(&client, &Leg::new(leg), counters, stats, true),
        Warm::Set(set) => pump::run(&client, set, counters, stats, true),
    };
    drop(busy);
    tracing::trace!(%src, %dst, ?end, "accelerated flow ended");
    if end == Ending::Clean {
        pool.put(warm);
    }
}

/// Sends the flow's OPEN on a leg or set: an idle one first, a fresh one
/// if that fails. Does not wait for the far end's answer (the flow's
/// first message back).
fn open(pool: &Pool, src: SocketAddr, dst: SocketAddr) -> Option<Warm> {
    let mut msg = Vec::with_capacity(48);
    frame::encode_open(src, dst, &mut msg);
    for attempt in 0..2 {
        let warm = match pool.take().filter(|_| attempt == 0) {
            Some(w) => w,
            None => pool.connect().ok()?,
        };
        let sent = match &warm {
            Warm::Leg(leg) => (&mut &*leg).write_all(&msg),
            Warm::Set(set) => set.send(&Msg::Open { src, dst }),
        };
        if sent.is_ok() {
            return Some(warm);
        }
    }
    None
}
