//! The near end's warm legs to one peer: a few connected, idle legs kept
//! ready, so that a new flow pays no TCP handshake over the satellite, and
//! legs handed back after a clean flow for the next one.
//!
//! A filler thread keeps [`Pool::want`] legs idle, connecting one at a
//! time (a second later after a failure). A leg that died while idle (the
//! far end restarted) is found when a flow tries it: the flow then takes a
//! fresh leg (`crate::near`).

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::sock;
use crate::stats::Stats;

/// How long a leg's connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle legs to one peer.
pub struct Pool {
    /// The far end's listener (peer tunnel address, `accel_port`).
    pub peer: SocketAddr,
    /// Idle legs kept ready.
    pub want: usize,
    idle: Mutex<Vec<TcpStream>>,
    wake: Condvar,
    congestion: String,
    stats: Arc<Stats>,
    warned: AtomicBool,
}

impl Pool {
    /// A pool with no legs yet; [`Pool::fill`] connects them.
    pub fn new(peer: SocketAddr, want: usize, congestion: &str, stats: Arc<Stats>) -> Self {
        Pool {
            peer,
            want,
            idle: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            congestion: congestion.into(),
            stats,
            warned: AtomicBool::new(false),
        }
    }

    /// An idle leg, if there is one.
    pub fn take(&self) -> Option<TcpStream> {
        let leg = crate::lock(&self.idle).pop();
        if leg.is_some() {
            self.stats.legs_idle.fetch_sub(1, Relaxed);
            self.wake.notify_one();
        }
        leg
    }

    /// Hands back a leg whose flow ended cleanly (closed if the pool has
    /// twice what it keeps).
    pub fn put(&self, leg: TcpStream) {
        let mut idle = crate::lock(&self.idle);
        if idle.len() < self.want * 2 {
            idle.push(leg);
            self.stats.legs_idle.fetch_add(1, Relaxed);
        }
    }

    /// Connects a new leg.
    pub fn connect(&self) -> std::io::Result<TcpStream> {
        let leg = sock::connect(self.peer, CONNECT_TIMEOUT).inspect_err(|_| {
            self.stats.leg_failures.fetch_add(1, Relaxed);
        })?;
        if let Err(e) = sock::tune_leg(&leg, &self.congestion) {
            if !self.warned.swap(true, Relaxed) {
                tracing::warn!(peer = %self.peer, congestion = %self.congestion, error = %e,
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
