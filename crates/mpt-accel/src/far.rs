//! The far end: accepts legs from the peers' tunnel addresses and, for
//! each OPEN, connects to the destination and runs the flow.
//!
//! One thread per leg, blocked reading its next OPEN while idle; the
//! destination's side of a flow takes a second thread (`crate::pump`).
//! After a clean flow, or a refused connect, the leg waits for the next
//! OPEN. A leg from an address that is not a configured peer, or one that
//! sends something other than OPEN, is counted and closed.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use crate::frame::{self, ConnectResult, Frame};
use crate::pump::{self, Ending};
use crate::stats::{Gauge, Stats};
use crate::{sock, Threads};

/// The far end's settings.
#[derive(Debug, Clone)]
pub struct FarConfig {
    /// Leg listeners (the tunnel addresses, `accel_port`).
    pub listen: Vec<SocketAddr>,
    /// Addresses legs may come from (the peers' tunnel addresses).
    pub peers: Vec<IpAddr>,
    /// The legs' congestion control ("" = the system's).
    pub congestion: String,
    /// How long a connect to a destination may take.
    pub connect_timeout: Duration,
}

/// Starts the far end's listeners on `threads`.
pub fn start(cfg: &FarConfig, stats: Arc<Stats>, threads: &mut Threads) -> std::io::Result<()> {
    let cfg = Arc::new(cfg.clone());
    for addr in cfg.listen.clone() {
        let l = sock::listener(addr)?;
        let (c, st) = (cfg.clone(), stats.clone());
        threads.spawn_acceptor(format!("accel-far-{addr}"), l, move |leg| {
            accept(&c, &st, leg)
        })?;
    }
    Ok(())
}

fn accept(cfg: &Arc<FarConfig>, stats: &Arc<Stats>, leg: TcpStream) {
    let peer = leg.peer_addr().map(|a| a.ip());
    if !peer.as_ref().is_ok_and(|p| cfg.peers.contains(p)) {
        stats.bad_frames.fetch_add(1, Relaxed);
        tracing::debug!(peer = ?peer, "acceleration leg from an address that is no peer: closed");
        return;
    }
    let _ = sock::tune_leg(&leg, &cfg.congestion);
    stats.legs_opened.fetch_add(1, Relaxed);
    let (c, st) = (cfg.clone(), stats.clone());
    let spawned = std::thread::Builder::new()
        .name("accel-leg".into())
        .spawn(move || serve_leg(&c, &st, leg));
    if spawned.is_err() {
        stats.dropped.fetch_add(1, Relaxed);
    }
}

fn serve_leg(cfg: &FarConfig, stats: &Stats, mut leg: TcpStream) {
    let mut buf = [0u8; 16];
    loop {
        let idle = Gauge::up(&stats.legs_idle);
        let (src, dst) = match frame::read_frame(&mut leg, &mut buf) {
            Ok(Frame::Open { src, dst }) => (src, dst),
            Err(e) if e.is_io() => return,
            other => {
                stats.bad_frames.fetch_add(1, Relaxed);
                tracing::debug!(?other, "acceleration leg sent no OPEN: closed");
                return;
            }
        };
        drop(idle);
        let _busy = Gauge::up(&stats.legs_busy);
        stats.flows.fetch_add(1, Relaxed);
        let _active = Gauge::up(&stats.flows_active);
        let dest = match sock::connect(dst, cfg.connect_timeout) {
            Ok(d) => d,
            Err(e) => {
                let r = ConnectResult::from_error(&e);
                stats.refused.fetch_add(1, Relaxed);
                tracing::debug!(%src, %dst, error = %e, "accelerated flow: destination refused");
                if leg.write_all(&frame::encode_result(r)).is_err() {
                    return;
                }
                continue;
            }
        };
        let _ = dest.set_nodelay(true);
        if leg
            .write_all(&frame::encode_result(ConnectResult::Ok))
            .is_err()
        {
            sock::arm_reset(&dest);
            return;
        }
        let end = pump::run(&dest, &leg, (&stats.bytes_down, &stats.bytes_up), stats);
        if end == Ending::Aborted {
            return;
        }
    }
}
