//! The near end's warm legs to one peer: a few connected, idle legs (or
//! pinned leg sets, `crate::set`) kept ready, so that a new flow pays no
//! TCP handshake over the satellite, and handed back after a clean flow
//! for the next one.
//!
//! A filler thread keeps [`Pool::want`] of them idle, connecting one at a
//! time (a second later after a failure). One that died while idle (the
//! far end restarted) is noticed when taken (an idle leg has nothing to
//! read; a dead set's readers have closed it) and replaced by a fresh one.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::congestion::{self, LossyPaths, Watch};
use crate::direct::{self, DirectAuth, DirectRoute};
use crate::frame::{self, Join};
use crate::near::LegPath;
use crate::set::{LegSet, PinnedLeg};
use crate::sock;
use crate::stats::Stats;

/// A warm way to the far end: one leg, or a pinned leg set.
pub enum Warm {
    /// One leg, the tunnel striping its packets.
    Leg(TcpStream),
    /// One leg per path.
    Set(LegSet),
}

impl Warm {
    /// Whether it died while idle.
    fn dead(&self) -> bool {
        match self {
            Warm::Leg(l) => sock::looks_dead(l),
            Warm::Set(s) => !s.alive(),
        }
    }
}

/// Set ids: unique per process (the far end keys them by peer address).
static NEXT_SET: AtomicU64 = AtomicU64::new(1);

/// How long a leg's connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle legs to one peer.
pub struct Pool {
    /// The far end's listener (peer tunnel address, `accel_port`).
    pub peer: SocketAddr,
    /// Idle legs kept ready.
    pub want: usize,
    /// Pinned leg sets: the tunnel paths, one leg each (empty: single
    /// legs).
    paths: Vec<LegPath>,
    /// Direct legs' connection id and keys (`None`: legs inside the
    /// tunnel).
    direct: Option<DirectAuth>,
    idle: Mutex<Vec<Warm>>,
    wake: Condvar,
    congestion: String,
    /// Paths found lossy (`crate::congestion`).
    lossy: Arc<LossyPaths>,
    stats: Arc<Stats>,
    warned: AtomicBool,
}

impl Pool {
    /// A pool with no legs yet; [`Pool::fill`] connects them.
    pub fn new(
        peer: SocketAddr,
        want: usize,
        paths: Vec<LegPath>,
        direct: Option<DirectAuth>,
        congestion: &str,
        lossy: Arc<LossyPaths>,
        stats: Arc<Stats>,
    ) -> Self {
        Pool {
            peer,
            want,
            paths,
            direct,
            idle: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            congestion: congestion.into(),
            lossy,
            stats,
            warned: AtomicBool::new(false),
        }
    }

    /// An idle leg or set that is still alive, if there is one.
    pub fn take(&self) -> Option<Warm> {
        loop {
            let warm = crate::lock(&self.idle).pop()?;
            self.stats.legs_idle.fetch_sub(1, Relaxed);
            self.wake.notify_one();
            if !warm.dead() {
                return Some(warm);
            }
        }
    }

    /// Hands back a leg whose flow ended cleanly (closed if the pool has
    /// twice what it keeps).
    pub fn put(&self, leg: Warm) {
        let mut idle = crate::lock(&self.idle);
        if idle.len() < self.want * 2 {
            idle.push(leg);
            self.stats.legs_idle.fetch_add(1, Relaxed);
        }
    }

    /// Connects a new leg, or a new set of pinned legs.
    pub fn connect(&self) -> std::io::Result<Warm> {
        if self.paths.is_empty() {
            return self.connect_leg().map(Warm::Leg);
        }
        let set = NEXT_SET.fetch_add(1, Relaxed) ^ (u64::from(std::process::id()) << 40);
        let count = u8::try_from(self.paths.len().min(usize::from(frame::MAX_SET_LEGS)))
            .unwrap_or(frame::MAX_SET_LEGS);
        let mut legs = Vec::with_capacity(self.paths.len());
        for (index, lp) in self.paths.iter().take(usize::from(count)).enumerate() {
            let path = lp.id;
            let join = Join {
                set,
                index: index as u8,
                count,
                path,
            };
            let configured = if lp.congestion.is_empty() {
                self.congestion.as_str()
            } else {
                &lp.congestion
            };
            if let (Some(auth), Some(route)) = (&self.direct, &lp.route) {
                let key = (self.peer.ip(), path);
                let cc = self.lossy.resolve(configured, key);
                let mut leg = self.connect_direct(auth, route, join, cc)?;
                if configured == congestion::AUTO {
                    leg.watch = Watch::new(key, self.lossy.clone(), cc);
                }
                legs.push(leg);
                continue;
            }
            let mut leg = self.connect_leg()?;
            sock::pin_leg(&leg, path, congestion::inside_tunnel(configured))?;
            leg.write_all(&frame::encode_join(join))?;
            legs.push(PinnedLeg::plain(leg, path));
        }
        Ok(Warm::Set(LegSet::start(legs, self.stats.clone())?))
    }

    /// A direct leg over `route`, its handshake done and its JOIN sent.
    fn connect_direct(
        &self,
        auth: &DirectAuth,
        route: &DirectRoute,
        join: Join,
        congestion: &str,
    ) -> std::io::Result<PinnedLeg> {
        let (stream, seals) =
            direct::connect(route, auth, join, CONNECT_TIMEOUT).inspect_err(|_| {
                self.stats.leg_failures.fetch_add(1, Relaxed);
            })?;
        let cc = congestion;
        if let Err(e) = sock::tune_direct_leg(&stream, cc) {
            if !self.warned.swap(true, Relaxed) {
                tracing::warn!(remote = %route.remote, congestion = %cc, error = %e,
                    "cannot tune the direct acceleration legs (congestion control not loaded?); using the defaults");
            }
        }
        self.stats.legs_opened.fetch_add(1, Relaxed);
        Ok(PinnedLeg {
            stream,
            path: join.path,
            seals,
            watch: None,
        })
    }

    fn connect_leg(&self) -> std::io::Result<TcpStream> {
        let leg = sock::connect(self.peer, CONNECT_TIMEOUT).inspect_err(|_| {
            self.stats.leg_failures.fetch_add(1, Relaxed);
        })?;
        let cc = congestion::inside_tunnel(&self.congestion);
        if let Err(e) = sock::tune_leg(&leg, cc) {
            if !self.warned.swap(true, Relaxed) {
                tracing::warn!(peer = %self.peer, congestion = %cc, error = %e,
                    "cannot tune the acceleration legs (congestion control not loaded?); using the defaults");
            }
        }
        self.stats.legs_opened.fetch_add(1, Relaxed);
        Ok(leg)
    }

    /// Keeps `want` legs idle until `stop`.
    pub fn fill(&self, stop: &AtomicBool) {
        let mut failing = false;
        while !stop.load(Relaxed) {
            let short = crate::lock(&self.idle).len() < self.want;
            if short && !failing {
                match self.connect() {
                    Ok(leg) => self.put(leg),
                    Err(e) => {
                        tracing::debug!(peer = %self.peer, error = %e, "acceleration leg connect failed");
                        failing = true;
                    }
                }
                continue;
            }
            let idle = crate::lock(&self.idle);
            let _ = self.wake.wait_timeout(idle, Duration::from_secs(1));
            failing = false;
        }
        let mut idle = crate::lock(&self.idle);
        self.stats.legs_idle.fetch_sub(idle.len() as u64, Relaxed);
        idle.clear();
    }

    /// Wakes the filler (at stop).
    pub fn wake(&self) {
        self.wake.notify_all();
    }
}
