//! One bulk TCP stream whose receiver notes when each read returned, so
//! that the longest stall (the longest time without any data delivered) is
//! measured exactly, not guessed from iperf3's interval sums.
//!
//! The source writes as fast as the socket takes data, with the congestion
//! control asked for (`TCP_CONGESTION`; the system default otherwise). Both
//! ends are threads of this process placed in the testbed's namespaces,
//! like the VoIP flow; the namespaces share CLOCK_MONOTONIC.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use mpt_emu::sys;

/// What the stream saw.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct StallStats {
    /// Congestion control of the source.
    pub cc: String,
    /// Bytes received.
    pub bytes: u64,
    /// Goodput over the receiving time, Mbit/s.
    pub mbps: f64,
    /// Longest time between two reads that returned data, ms.
    pub longest_stall_ms: f64,
    /// When that stall began, s since the first byte.
    pub longest_stall_at_s: f64,
    /// Goodput in each second since the first byte, Mbit/s (the
    /// report's time series).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mbps_per_s: Vec<f64>,
}

/// The receiving end: accepts one connection and reads until it closes.
pub struct Sink {
    handle: JoinHandle<io::Result<Vec<(Instant, usize)>>>,
}

impl Sink {
    /// Listens on `bind` in namespace `ns`.
    pub fn start(ns: &str, bind: SocketAddr) -> anyhow::Result<Sink> {
        let (tx, rx) = mpsc::channel();
        let ns_thread = ns.to_string();
        let handle = std::thread::Builder::new()
            .name("stall-sink".into())
            .spawn(move || -> io::Result<Vec<(Instant, usize)>> {
                let listener =
                    match sys::enter_netns(&ns_thread).and_then(|()| TcpListener::bind(bind)) {
                        Ok(l) => {
                            let _ = tx.send(Ok(()));
                            l
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return Err(e);
                        }
                    };
                let (mut conn, _) = listener.accept()?;
                let mut log = Vec::with_capacity(1 << 16);
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    match conn.read(&mut buf) {
                        Ok(0) => return Ok(log),
                        Ok(n) => log.push((Instant::now(), n)),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(log),
                        Err(e) => return Err(e),
                    }
                }
            })
            .context("spawning the TCP sink")?;
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => Ok(Sink { handle }),
            Ok(Err(e)) => anyhow::bail!("TCP sink in {ns}: {e}"),
            Err(_) => anyhow::bail!("TCP sink did not start"),
        }
    }

    /// Waits for the connection to close and sums up what arrived.
    pub fn finish(self, cc: &str) -> anyhow::Result<StallStats> {
        let log = match self.handle.join() {
            Ok(r) => r.context("TCP sink")?,
            Err(_) => anyhow::bail!("TCP sink thread panicked"),
        };
        Ok(analyse(&log, cc))
    }
}

/// Sums up a sink's read log.
pub fn analyse(log: &[(Instant, usize)], cc: &str) -> StallStats {
    let mut st = StallStats {
        cc: cc.to_string(),
        ..StallStats::default()
    };
    let (Some(first), Some(last)) = (log.first(), log.last()) else {
        return st;
    };
    st.bytes = log.iter().map(|&(_, n)| n as u64).sum();
    let span = last.0.duration_since(first.0).as_secs_f64();
    if span > 0.0 {
        st.mbps = st.bytes as f64 * 8.0 / span / 1e6;
    }
    for &(t, n) in log {
        let s = t.duration_since(first.0).as_secs() as usize;
        if st.mbps_per_s.len() <= s {
            st.mbps_per_s.resize(s + 1, 0.0);
        }
        st.mbps_per_s[s] += n as f64 * 8.0 / 1e6;
    }
    for w in log.windows(2) {
        let gap = w[1].0.duration_since(w[0].0).as_secs_f64() * 1e3;
        if gap > st.longest_stall_ms {
            st.longest_stall_ms = gap;
            st.longest_stall_at_s = w[0].0.duration_since(first.0).as_secs_f64();
        }
    }
    st
}

/// Connects from namespace `ns` to `target` and writes until `until` or
/// `stop`, with congestion control `cc` (empty: the system's default).
pub fn spawn_source(
    ns: &str,
    target: SocketAddr,
    cc: &str,
    until: Instant,
    stop: Arc<AtomicBool>,
) -> JoinHandle<io::Result<u64>> {
    let ns = ns.to_string();
    let cc = cc.to_string();
    std::thread::spawn(move || {
        sys::enter_netns(&ns)?;
        let mut conn = TcpStream::connect_timeout(&target, Duration::from_secs(5))?;
        if !cc.is_empty() {
            set_congestion(&conn, &cc)?;
        }
        conn.set_write_timeout(Some(Duration::from_millis(100)))?;
        let buf = vec![0x5au8; 1 << 16];
        let mut sent = 0u64;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            match conn.write(&buf) {
                Ok(n) => sent += n as u64,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        // Closing drops what is still queued; the sink's log ends there.
        let _ = conn.shutdown(std::net::Shutdown::Both);
        Ok(sent)
    })
}

fn set_congestion(conn: &TcpStream, cc: &str) -> io::Result<()> {
    // SAFETY: a valid socket and a buffer of the given length.
    let r = unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("congestion control {cc:?}: {e} (is its module loaded?)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_stall_is_the_longest_time_between_reads() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let log = vec![
            (t0, 1000),
            (t0 + ms(10), 1000),
            (t0 + ms(400), 1000),
            (t0 + ms(410), 1000),
            (t0 + ms(1000), 1000),
        ];
        let st = analyse(&log, "cubic");
        assert_eq!(st.bytes, 5000);
        assert!((st.longest_stall_ms - 590.0).abs() < 1e-6);
        assert!((st.longest_stall_at_s - 0.41).abs() < 1e-9);
        assert!((st.mbps - 0.04).abs() < 1e-9);
        // Per second: 4000 B in the first, 1000 B in the second.
        assert_eq!(st.mbps_per_s, [0.032, 0.008]);
        assert_eq!(analyse(&[], "bbr").bytes, 0);
    }
}
