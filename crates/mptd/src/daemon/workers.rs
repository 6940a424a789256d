//! Starting the daemon's threads: the netlink listener, the resolver, the crypto
//! stage, the transmit workers (one per tun queue) and the receive
//! workers (one per connection with paths, a pool for the shared ports).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tun_rs::{InterruptEvent, SyncDevice};

use crate::control::links::{Links, WAKE_CONN};
use crate::control::names::Names;
use crate::dataplane::crypto_pool::{CryptoPool, DEFAULT_MIN_CHUNK, DEFAULT_SPIN};
use crate::dataplane::rx::{InitiationGate, LaneReader, RxWorker, SharedRxWorker};
use crate::dataplane::tx::{TxStages, TxWorker};
use crate::io::netlink::NetlinkStats;
use crate::io::udp::PathSocket;
use crate::plane::route::Router;
use crate::plane::shared_port::{SessionMap, SharedStats};
use crate::plane::{
    ConnSet, ConnShared, ControlDatagram, ControlSender, TxStats, CONTROL_DATAGRAM_MAX,
};

/// The threads started so far, joined at shutdown.
#[derive(Default)]
pub(super) struct Threads {
    handles: Vec<JoinHandle<()>>,
}

impl Threads {
    /// Starts thread `name` running `f`, to be joined with the others.
    pub fn spawn(&mut self, name: String, f: impl FnOnce() + Send + 'static) -> Result<()> {
        let handle = spawn(name, f)?;
        self.handles.push(handle);
        Ok(())
    }

    /// Waits for every thread; a panicked one is logged.
    pub fn join(self) {
        for h in self.handles {
            if h.join().is_err() {
                tracing::error!("a worker thread panicked");
            }
        }
    }
}

/// Starts thread `name` running `f`.
pub(super) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .with_context(|| format!("starting thread {name}"))
}

/// Link and address events: a listener thread feeds the control loop
/// (and wakes it, so a link lost is acted on at once, not at its next
/// tick). Without netlink the paths follow their timers only.
pub(super) fn start_netlink(
    threads: &mut Threads,
    control_tx: &ControlSender,
    shutdown: &Arc<AtomicBool>,
) -> Result<(Option<Links>, Option<Arc<NetlinkStats>>)> {
    let listener = match crate::io::netlink::Listener::open() {
        Ok(listener) => listener,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen to netlink: link and address changes are not followed");
            return Ok((None, None));
        }
    };
    let stats = listener.stats.clone();
    let (net_tx, net_rx) = std::sync::mpsc::channel();
    let wake = waker(control_tx);
    let stop = shutdown.clone();
    threads.spawn("netlink".into(), move || listener.run(net_tx, wake, stop))?;
    Ok((Some(Links::new(net_rx)), Some(stats)))
}

/// Wakes the control loop (a datagram for no connection on its queue)
/// when a helper thread has left something for it.
fn waker(control_tx: &ControlSender) -> impl Fn() + Send + 'static {
    let wake_tx = control_tx.clone();
    move || {
        let _full_queue_wakes_it_anyway = wake_tx.try_send(ControlDatagram {
            conn: WAKE_CONN,
            path: 0,
            at: Instant::now(),
            from: None,
            to: None,
            port: 0,
            len: 0,
            bytes: [0; CONTROL_DATAGRAM_MAX],
        });
    }
}

/// Host-name remotes: the resolver thread does the blocking lookups and
/// wakes the control loop with each answer (`crate::control::names`). It
/// runs whether or not a path has a name now: a reload may add one.
pub(super) fn start_resolver(
    threads: &mut Threads,
    control_tx: &ControlSender,
    shutdown: &Arc<AtomicBool>,
    interval: Duration,
) -> Result<Names> {
    let (req_tx, req_rx) = std::sync::mpsc::channel();
    let (ans_tx, ans_rx) = std::sync::mpsc::channel();
    let wake = waker(control_tx);
    let stop = shutdown.clone();
    threads.spawn("resolver".into(), move || {
        crate::io::resolve::run(req_rx, ans_tx, wake, stop)
    })?;
    Ok(Names::new(req_tx, ans_rx, interval))
}

/// The crypto stage: `threads - 1` helpers shared by every worker (the
/// worker that submits a batch is the other core's worth); none for
/// cleartext-only configurations, which never use them.
pub(super) fn start_crypto_pool(
    conns: &[Arc<ConnShared>],
    threads: usize,
) -> Result<Arc<CryptoPool>> {
    let encrypted = conns.iter().any(|c| c.crypto.is_some());
    let helpers = if encrypted {
        threads.saturating_sub(1)
    } else {
        0
    };
    let min_chunk = env_usize("MPT_CRYPTO_MIN_CHUNK").unwrap_or(DEFAULT_MIN_CHUNK);
    let spin =
        env_usize("MPT_CRYPTO_SPIN_US").map_or(DEFAULT_SPIN, |us| Duration::from_micros(us as u64));
    let pool =
        CryptoPool::start(helpers, min_chunk, spin).context("starting the crypto helpers")?;
    tracing::debug!(
        helpers,
        min_chunk,
        spin_us = spin.as_micros() as u64,
        "crypto stage"
    );
    Ok(Arc::new(pool))
}

/// What every data-plane worker is started with.
pub(super) struct DataPlane {
    pub queues: Vec<Arc<SyncDevice>>,
    pub conns: Arc<Vec<Arc<ConnShared>>>,
    pub conn_set: Arc<ConnSet>,
    pub router: Arc<Router>,
    pub tx_stats: Arc<TxStats>,
    pub tx_wakes: Arc<Vec<Arc<InterruptEvent>>>,
    pub control_tx: ControlSender,
    pub shutdown: Arc<AtomicBool>,
    pub crypto_pool: Arc<CryptoPool>,
    pub mtu: usize,
    /// `[tunnel] mss_clamp`.
    pub mss_clamp: bool,
}

impl DataPlane {
    /// One transmit worker per tun queue.
    pub fn start_tx(&self, threads: &mut Threads) -> Result<()> {
        for (qi, queue) in self.queues.iter().enumerate() {
            let w = TxWorker {
                tun: queue.clone(),
                stages: TxStages {
                    conns: self.conns.clone(),
                    router: self.router.clone(),
                    stats: self.tx_stats.clone(),
                    mtu: self.mtu,
                    mss_clamp: self.mss_clamp,
                },
                set: self.conn_set.clone(),
                shutdown: self.shutdown.clone(),
                wake: self.tx_wakes[qi].clone(),
                crypto_pool: self.crypto_pool.clone(),
            };
            threads.spawn(format!("tx{qi}"), move || w.run())?;
        }
        Ok(())
    }

    /// The shared ports' receive workers (one per socket set), each
    /// writing to a tun queue in turn.
    pub fn start_shared_rx(
        &self,
        threads: &mut Threads,
        sockets: Vec<Vec<PathSocket>>,
        lanes: Vec<PathSocket>,
        map: &Arc<SessionMap>,
        stats: &Arc<SharedStats>,
        mac1: Option<mpt_proto::noise::Mac1Check>,
    ) -> Result<()> {
        if sockets.iter().all(Vec::is_empty) {
            return Ok(());
        }
        let Some(mac1) = mac1 else {
            bail!("client connections need [daemon] private_key_file");
        };
        let gate = InitiationGate {
            mac1,
            control: self.control_tx.clone(),
            stats: stats.clone(),
        };
        for (w, sockets) in sockets.into_iter().enumerate() {
            if sockets.is_empty() {
                continue;
            }
            let worker = SharedRxWorker {
                sockets,
                map: map.clone(),
                stats: stats.clone(),
                tun: self.queues[w % self.queues.len()].clone(),
                control: self.control_tx.clone(),
                shutdown: self.shutdown.clone(),
                crypto_pool: self.crypto_pool.clone(),
                gate: gate.clone(),
            };
            threads.spawn(format!("rx-shared{w}"), move || worker.run())?;
        }
        if !lanes.is_empty() {
            let reader = LaneReader {
                sockets: lanes,
                gate,
                shutdown: self.shutdown.clone(),
            };
            threads.spawn("rx-lane".into(), move || reader.run())?;
        }
        Ok(())
    }

    /// One receive worker per connection with paths of its own; returns
    /// how many paths they serve.
    pub fn start_conn_rx(&self, threads: &mut Threads) -> Result<usize> {
        let mut path_count = 0;
        for (ci, conn) in self.conns.iter().enumerate() {
            if conn.client {
                continue;
            }
            path_count += conn.paths().len();
            let w = RxWorker {
                conn: conn.clone(),
                tun: self.queues[ci % self.queues.len()].clone(),
                control: self.control_tx.clone(),
                shutdown: self.shutdown.clone(),
                crypto_pool: self.crypto_pool.clone(),
            };
            threads.spawn(format!("rx-{}", conn.name), move || w.run())?;
        }
        Ok(path_count)
    }
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
