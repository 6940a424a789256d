//! TCP acceleration at the tunnel ends: split TCP over warm legs.
//!
//! A TCP flow that the tunnel would carry end to end sees the whole
//! multipath middle as one path: its congestion window grows at the pace
//! of the slowest path's round trip and halves at every loss on any path.
//! Here the sending gateway terminates the flow instead (nftables `tproxy`
//! steers it to a transparent listener, `near`), carries its bytes over a
//! *leg* (a TCP connection between the two tunnel addresses, inside the
//! encrypted, striped tunnel, with its own congestion control: BBR by
//! default) to the far gateway (`far`), which opens the real connection.
//! The end hosts see their LAN's round trip to the gateway.
//!
//! Two kinds of legs: a *single* leg, whose packets the tunnel stripes
//! over its paths like any flow's (so it sees the tunnel as one path with
//! the slowest path's round trip), or a *pinned leg set* (`set`): one leg
//! per tunnel path, each pinned to its path, a flow's bytes striped over
//! them in sequence-numbered chunks (`chunk`) and put back in order at
//! the far end (`reorder`). Each leg of a set has its own congestion
//! control at its own path's round trip.
//!
//! Threads, not an event loop: a flow is two blocking copies at each end
//! (`pump`), whose blocking writes are the end-to-end backpressure. One
//! flow per leg at a time, so flows never wait behind each other; idle
//! legs are kept connected (`pool`) so a new flow pays no handshake over
//! the middle. The framing (`frame`) carries the destination, the far
//! end's connect result, data, half-close and reset.
//!
//! Nothing here needs root except the transparent listener itself; the
//! nftables rules and the policy routing that feed it are mptd's
//! (`mptd::io::accel_rules`).

pub mod chunk;
pub mod congestion;
pub mod direct;
pub mod far;
pub mod frame;
pub mod near;
pub mod pool;
pub mod pump;
pub mod reorder;
pub mod selector;
pub mod set;
pub mod sock;
pub mod stats;

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

pub use selector::{Selector, SelectorError};
pub use stats::{Snapshot, Stats};

/// Takes a lock whether or not a thread panicked holding it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How often an accept loop looks at the stop flag.
const ACCEPT_POLL_MS: i32 = 200;

/// The long-lived threads of the acceleration (acceptors, pool fillers),
/// stopped and joined by [`Threads::stop`]. Flow threads are not among
/// them: they end with their flows (or with the process).
#[derive(Default)]
pub struct Threads {
    /// Set at stop.
    pub stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
    wakers: Vec<Box<dyn Fn() + Send>>,
}

impl Threads {
    fn spawn(&mut self, name: String, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        self.handles
            .push(std::thread::Builder::new().name(name).spawn(f)?);
        Ok(())
    }

    /// Accepts on `l` until stop, handing each connection to `f`.
    fn spawn_acceptor(
        &mut self,
        name: String,
        l: TcpListener,
        f: impl Fn(TcpStream) + Send + 'static,
    ) -> std::io::Result<()> {
        let stop = self.stop.clone();
        self.spawn(name, move || {
            while !stop.load(Relaxed) {
                let mut pfd = libc::pollfd {
                    fd: l.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, its fd owned by `l` for the call.
                let n = unsafe { libc::poll(&mut pfd, 1, ACCEPT_POLL_MS) };
                if n <= 0 {
                    continue;
                }
                match l.accept() {
                    Ok((s, _)) => f(s),
                    Err(e) => tracing::debug!(error = %e, "acceleration accept"),
                }
            }
        })
    }

    /// Stops and joins the threads (within about [`ACCEPT_POLL_MS`]).
    pub fn stop(self) {
        self.stop.store(true, Relaxed);
        for w in &self.wakers {
            w();
        }
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// A running acceleration: its counters and threads.
pub struct Accel {
    /// The counters (both ends add to the same set).
    pub stats: Arc<Stats>,
    threads: Threads,
}

impl Accel {
    /// Starts the near end (if `near`) and the far end (if `far`).
    pub fn start(
        near: Option<&near::NearConfig>,
        far: Option<&far::FarConfig>,
    ) -> std::io::Result<Self> {
        let stats = Arc::new(Stats::default());
        let lossy = Arc::new(congestion::LossyPaths::default());
        let mut threads = Threads::default();
        let started = (|| {
            if let Some(f) = far {
                far::start(f, stats.clone(), lossy.clone(), &mut threads)?;
            }
            if let Some(n) = near {
                near::start(n, stats.clone(), lossy.clone(), &mut threads)?;
            }
            Ok(())
        })();
        if let Err(e) = started {
            threads.stop();
            return Err(e);
        }
        Ok(Accel { stats, threads })
    }

    /// Stops accepting, closes the idle legs, joins the threads.
    pub fn stop(self) {
        self.threads.stop();
    }
}
