//! The far end: accepts legs from the peers' tunnel addresses and, for
//! each OPEN, connects to the destination and runs the flow.
//!
//! One thread per leg, blocked reading its next OPEN while idle; the
//! destination's side of a flow takes a second thread (`crate::pump`).
//! After a clean flow the leg waits for the next OPEN. A leg whose first
//! frame is JOIN belongs to a pinned leg set (`crate::set`): it waits in
//! [`Joins`] until the set's other legs have joined (they are pinned to
//! other paths, so they may arrive in any order), then the set serves
//! flows like a leg. A refused connect is answered with RESULT and the
//! leg or set is closed (the near end did not wait for the answer, so
//! the client's first bytes may follow the OPEN). A leg from an address
//! that is not a configured peer, or one that sends something other than
//! OPEN or JOIN, is counted and closed. With `client_source` the far end
//! connects from the client's own address (a transparent socket), so the
//! destination sees the client rather than the gateway.
//!
//! Direct legs (`crate::direct`) come to a wildcard listener at each
//! connection's port instead; they are admitted by their handshake (or,
//! cleartext, by their source address), then join sets as above.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::chunk::Msg;
use crate::congestion::{self, LossyPaths, Watch};
use crate::direct::{self, DirectPeer, RefusedLeg, Seals};
use crate::frame::{self, ConnectResult, Frame, Join};
use crate::pump::{self, Carrier, Ending, Leg};
use crate::set::{LegSet, PinnedLeg};
use crate::stats::{Gauge, Stats};
use crate::{sock, Threads};

/// How long the first legs of a set wait for the rest.
const JOIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Most sets joining at once (a peer that opens sets and never completes
/// them cannot make this grow without bound).
const MAX_JOINING: usize = 1024;
/// Most direct legs in their handshake at once (each holds a thread for
/// at most `direct::HANDSHAKE_TIMEOUT`); more are closed and counted.
const MAX_HANDSHAKES: usize = 256;

/// The far end's settings.
#[derive(Debug, Clone)]
pub struct FarConfig {
    /// Leg listeners (the tunnel addresses, `accel_port`).
    pub listen: Vec<SocketAddr>,
    /// Addresses legs may come from (the peers' tunnel addresses).
    pub peers: Vec<IpAddr>,
    /// The legs' congestion control ("" = the system's).
    pub congestion: String,
    /// A pinned leg's own congestion control, by peer tunnel address and
    /// path id (`accel_congestion` of that path; absent: `congestion`).
    pub path_congestion: HashMap<(IpAddr, u8), String>,
    /// How long a connect to a destination may take.
    pub connect_timeout: Duration,
    /// Open the destination connection from the client's address (the
    /// OPEN's source) instead of this gateway's: the destination sees
    /// who is calling. It works only where the destination's answers to
    /// that address are routed back through this gateway.
    pub client_source: bool,
    /// Direct legs' listeners and the connections they may name (`None`:
    /// legs only inside the tunnel).
    pub direct: Option<FarDirect>,
}

/// The far end of direct legs.
#[derive(Debug, Clone, Default)]
pub struct FarDirect {
    /// The TCP ports to listen on (the connections' UDP port numbers), on
    /// the wildcard address.
    pub ports: Vec<u16>,
    /// The connections, by id.
    pub peers: HashMap<u32, DirectPeer>,
}

/// Sets whose legs are still joining, by peer and set id.
#[derive(Default)]
struct Joins(Mutex<HashMap<(IpAddr, u64), Joining>>);

/// A whole set's legs, each with its path id, in index order.
type Joined = Vec<PinnedLeg>;

struct Joining {
    /// Each joined leg with its path id, by index.
    legs: Vec<Option<PinnedLeg>>,
    since: Instant,
}

impl Joins {
    /// Adds `leg`; returns the set's legs with their path ids once all
    /// have joined.
    fn add(&self, peer: IpAddr, j: Join, leg: PinnedLeg) -> Result<Option<Joined>, ()> {
        let mut m = crate::lock(&self.0);
        m.retain(|_, p| p.since.elapsed() < JOIN_TIMEOUT);
        if m.len() >= MAX_JOINING && !m.contains_key(&(peer, j.set)) {
            return Err(());
        }
        let p = m.entry((peer, j.set)).or_insert_with(|| Joining {
            legs: (0..j.count).map(|_| None).collect(),
            since: Instant::now(),
        });
        let same_count = p.legs.len() == usize::from(j.count);
        let slot = match p.legs.get_mut(usize::from(j.index)) {
            Some(s) if s.is_none() && same_count => s,
            _ => return Err(()),
        };
        *slot = Some(leg);
        if p.legs.iter().any(Option::is_none) {
            return Ok(None);
        }
        let legs = m
            .remove(&(peer, j.set))
            .map(|p| p.legs.into_iter().flatten().collect());
        Ok(legs)
    }
}

struct Far {
    cfg: FarConfig,
    stats: Arc<Stats>,
    joins: Joins,
    /// Direct legs in their handshake now.
    handshakes: AtomicUsize,
    /// Paths found lossy (`crate::congestion`).
    lossy: Arc<LossyPaths>,
}

impl Far {
    /// The congestion control a set's leg on `path` of `peer` starts
    /// with, and its loss watch if that is `"auto"`'s clean choice (legs
    /// inside the tunnel: `"auto"` is BBR, no watch).
    fn leg_congestion(&self, peer: IpAddr, path: u8, direct: bool) -> (&str, Option<Watch>) {
        let configured = self
            .cfg
            .path_congestion
            .get(&(peer, path))
            .unwrap_or(&self.cfg.congestion);
        if !direct {
            return (congestion::inside_tunnel(configured), None);
        }
        let key = (peer, path);
        let cc = self.lossy.resolve(configured, key);
        let watch = if configured == congestion::AUTO {
            Watch::new(key, self.lossy.clone(), cc)
        } else {
            None
        };
        (cc, watch)
    }
}

/// Starts the far end's listeners on `threads`.
pub fn start(
    cfg: &FarConfig,
    stats: Arc<Stats>,
    lossy: Arc<LossyPaths>,
    threads: &mut Threads,
) -> std::io::Result<()> {
    let far = Arc::new(Far {
        cfg: cfg.clone(),
        stats,
        lossy,
        joins: Joins::default(),
        handshakes: AtomicUsize::new(0),
    });
    for addr in cfg.listen.clone() {
        let l = sock::listener(addr)?;
        let f = far.clone();
        threads.spawn_acceptor(format!("accel-far-{addr}"), l, move |leg| accept(&f, leg))?;
    }
    for port in cfg.direct.iter().flat_map(|d| d.ports.clone()) {
        let l = direct::listener(port).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("direct leg listener on TCP port {port}: {e}"),
            )
        })?;
        let f = far.clone();
        threads.spawn_acceptor(format!("accel-direct-{port}"), l, move |leg| {
            accept_direct(&f, leg)
        })?;
    }
    Ok(())
}

/// A direct leg: its handshake on a thread of its own, then its set.
fn accept_direct(far: &Arc<Far>, leg: TcpStream) {
    let stats = &far.stats;
    if far.handshakes.fetch_add(1, Relaxed) >= MAX_HANDSHAKES {
        far.handshakes.fetch_sub(1, Relaxed);
        stats.dropped.fetch_add(1, Relaxed);
        return;
    }
    let f = far.clone();
    let spawned = std::thread::Builder::new()
        .name("accel-direct".into())
        .spawn(move || {
            let mut leg = leg;
            let admitted = f
                .cfg
                .direct
                .as_ref()
                .map(|d| direct::accept(&mut leg, &d.peers));
            f.handshakes.fetch_sub(1, Relaxed);
            match admitted {
                Some(Ok(a)) => {
                    let (cc, watch) = f.leg_congestion(a.peer, a.join.path, true);
                    let _ = sock::tune_direct_leg(&leg, cc);
                    f.stats.legs_opened.fetch_add(1, Relaxed);
                    join_set(&f, a.peer, a.join, leg, a.seals, watch);
                }
                Some(Err(RefusedLeg::Io(e))) => {
                    tracing::debug!(error = %e, "direct acceleration leg ended in its handshake")
                }
                Some(Err(e)) => {
                    f.stats.bad_frames.fetch_add(1, Relaxed);
                    tracing::debug!(error = %e, "direct acceleration leg refused");
                }
                None => {}
            }
        });
    if spawned.is_err() {
        far.handshakes.fetch_sub(1, Relaxed);
        stats.dropped.fetch_add(1, Relaxed);
    }
}

fn accept(far: &Arc<Far>, leg: TcpStream) {
    let stats = &far.stats;
    let peer = leg.peer_addr().map(|a| a.ip());
    let peer = match peer {
        Ok(p) if far.cfg.peers.contains(&p) => p,
        _ => {
            stats.bad_frames.fetch_add(1, Relaxed);
            tracing::debug!(peer = ?peer, "acceleration leg from an address that is no peer: closed");
            return;
        }
    };
    let _ = sock::tune_leg(&leg, congestion::inside_tunnel(&far.cfg.congestion));
    stats.legs_opened.fetch_add(1, Relaxed);
    let f = far.clone();
    let spawned = std::thread::Builder::new()
        .name("accel-leg".into())
        .spawn(move || first_frame(&f, peer, leg));
    if spawned.is_err() {
        stats.dropped.fetch_add(1, Relaxed);
    }
}

/// A leg's first frame decides: OPEN, a single leg; JOIN, part of a set.
fn first_frame(far: &Far, peer: IpAddr, mut leg: TcpStream) {
    let stats = &*far.stats;
    let mut buf = [0u8; 16];
    let idle = Gauge::up(&stats.legs_idle);
    let first = frame::read_frame(&mut leg, &mut buf);
    drop(idle);
    match first {
        Ok(Frame::Open { src, dst }) => serve_leg(far, leg, src, dst),
        Ok(Frame::Join(j)) => {
            let (cc, watch) = far.leg_congestion(peer, j.path, false);
            let _ = sock::pin_leg(&leg, j.path, cc);
            join_set(far, peer, j, leg, None, watch);
        }
        Err(e) if e.is_io() => {}
        other => {
            stats.bad_frames.fetch_add(1, Relaxed);
            tracing::debug!(?other, "acceleration leg sent no OPEN: closed");
        }
    }
}

/// Adds a leg to its set; the leg that completes the set serves it.
fn join_set(
    far: &Far,
    peer: IpAddr,
    j: Join,
    leg: TcpStream,
    seals: Option<Seals>,
    watch: Option<Watch>,
) {
    let leg = PinnedLeg {
        stream: leg,
        path: j.path,
        seals,
        watch,
    };
    match far.joins.add(peer, j, leg) {
        Ok(Some(legs)) => match LegSet::start(legs, far.stats.clone()) {
            Ok(set) => serve_set(far, &set),
            Err(e) => tracing::debug!(error = %e, "cannot start a leg set"),
        },
        Ok(None) => {}
        Err(()) => {
            far.stats.bad_frames.fetch_add(1, Relaxed);
            tracing::debug!(?j, "acceleration leg set join refused");
        }
    }
}

/// Connects to `dst` for a flow; on failure counts it and returns the
/// result to report.
fn connect(far: &Far, src: SocketAddr, dst: SocketAddr) -> Result<TcpStream, ConnectResult> {
    let timeout = far.cfg.connect_timeout;
    let connected = if far.cfg.client_source && src.is_ipv4() == dst.is_ipv4() {
        sock::connect_from(src.ip(), dst, timeout)
    } else {
        sock::connect(dst, timeout)
    };
    match connected {
        Ok(d) => {
            let _ = d.set_nodelay(true);
            Ok(d)
        }
        Err(e) => {
            far.stats.refused.fetch_add(1, Relaxed);
            tracing::debug!(%src, %dst, error = %e, "accelerated flow: destination refused");
            Err(ConnectResult::from_error(&e))
        }
    }
}

/// Runs one flow on `carrier` once its result is sent; whether the
/// carrier may take the next one.
fn run_flow(far: &Far, dest: &TcpStream, carrier: &impl Carrier) -> bool {
    let stats = &*far.stats;
    let end = pump::run(
        dest,
        carrier,
        (&stats.bytes_down, &stats.bytes_up),
        stats,
        false,
    );
    end == Ending::Clean
}

/// One flow on `carrier`: connects to `dst`, answers with the result and
/// runs the flow; whether the carrier may take the next one.
fn serve_flow(far: &Far, carrier: &impl Carrier, src: SocketAddr, dst: SocketAddr) -> bool {
    let stats = &*far.stats;
    let _busy = Gauge::up(&stats.legs_busy);
    stats.flows.fetch_add(1, Relaxed);
    let _active = Gauge::up(&stats.flows_active);
    let dest = match connect(far, src, dst) {
        Ok(d) => d,
        Err(r) => {
            // The client's bytes may follow the OPEN: the carrier is not
            // reused.
            let _ = carrier.send_result(r);
            return false;
        }
    };
    if carrier.send_result(ConnectResult::Ok).is_err() {
        sock::arm_reset(&dest);
        return false;
    }
    run_flow(far, &dest, carrier)
}

fn serve_leg(far: &Far, mut leg: TcpStream, mut src: SocketAddr, mut dst: SocketAddr) {
    let stats = &*far.stats;
    let mut buf = [0u8; 16];
    while serve_flow(far, &Leg::new(&leg), src, dst) {
        let idle = Gauge::up(&stats.legs_idle);
        match frame::read_frame(&mut leg, &mut buf) {
            Ok(Frame::Open { src: s, dst: d }) => (src, dst) = (s, d),
            Err(e) if e.is_io() => return,
            other => {
                stats.bad_frames.fetch_add(1, Relaxed);
                tracing::debug!(?other, "acceleration leg sent no OPEN: closed");
                return;
            }
        }
        drop(idle);
    }
}

fn serve_set(far: &Far, set: &LegSet) {
    let stats = &*far.stats;
    loop {
        let idle = Gauge::up(&stats.legs_idle);
        let (src, dst) = match set.recv() {
            Some(Msg::Open { src, dst }) => (src, dst),
            None => return,
            Some(other) => {
                stats.bad_frames.fetch_add(1, Relaxed);
                tracing::debug!(?other, "acceleration leg set sent no OPEN: closed");
                return;
            }
        };
        drop(idle);
        if !serve_flow(far, set, src, dst) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn legs(n: usize) -> Vec<TcpStream> {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        (0..n)
            .map(|_| {
                let _c = TcpStream::connect(addr).unwrap();
                l.accept().unwrap().0
            })
            .collect()
    }

    fn leg(l: &mut Vec<TcpStream>, path: u8) -> PinnedLeg {
        PinnedLeg::plain(l.pop().unwrap(), path)
    }

    fn join(set: u64, index: u8, count: u8) -> Join {
        Join {
            set,
            index,
            count,
            path: index,
        }
    }

    #[test]
    fn a_set_is_whole_once_every_leg_joined_in_any_order() {
        let joins = Joins::default();
        let peer: IpAddr = "10.99.0.2".parse().unwrap();
        let mut l = legs(4);
        assert!(joins
            .add(peer, join(1, 2, 3), leg(&mut l, 2))
            .unwrap()
            .is_none());
        assert!(joins
            .add(peer, join(1, 0, 3), leg(&mut l, 0))
            .unwrap()
            .is_none());
        // The same set id from another peer is another set.
        let other: IpAddr = "10.99.0.3".parse().unwrap();
        assert!(joins
            .add(other, join(1, 0, 2), leg(&mut l, 0))
            .unwrap()
            .is_none());
        let whole = joins.add(peer, join(1, 1, 3), leg(&mut l, 1)).unwrap();
        // In index order, each with the path its JOIN named.
        let paths: Vec<u8> = whole.unwrap().iter().map(|l| l.path).collect();
        assert_eq!(paths, [0, 1, 2]);
    }

    #[test]
    fn duplicate_legs_and_counts_that_disagree_are_refused() {
        let joins = Joins::default();
        let peer: IpAddr = "10.99.0.2".parse().unwrap();
        let mut l = legs(3);
        assert!(joins
            .add(peer, join(7, 0, 2), leg(&mut l, 0))
            .unwrap()
            .is_none());
        assert!(joins.add(peer, join(7, 0, 2), leg(&mut l, 0)).is_err());
        assert!(joins.add(peer, join(7, 1, 3), leg(&mut l, 1)).is_err());
    }
}
