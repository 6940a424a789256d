//! One bulk TCP stream whose receiver notes when each read returned, so
//! that the longest stall (the longest time without any data delivered) is
//! measured exactly, not guessed from iperf3's interval sums.
//!
//! The source writes as fast as the socket takes data, with the congestion
//! control asked for (`TCP_CONGESTION`; the system default otherwise). Both
//! ends are threads of this process placed in the testbed's namespaces,
//! like the VoIP flow; the namespaces share CLOCK_MONOTONIC.
//!
//! The same stream runs over kernel MPTCP ([`Transport::Mptcp`]: sockets
//! of protocol `IPPROTO_MPTCP`, which is all `mptcpize run` does to a
//! program's TCP sockets), so that the handover suite's MPTCP baseline is
//! measured by the same reads as mpt's: the longest stall of both is the
//! same quantity, not an estimate from iperf3's interval sums. With the
//! outage window known, the goodput before, during and after it is taken
//! from the same reads ([`AroundOutage`]).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};

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
    /// Goodput before, during and after the outage window, when the run
    /// had one (results of older builds: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub around: Option<AroundOutage>,
}

/// The stream's goodput around an outage window `[o0, o1)`, from the
/// receiver's reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct AroundOutage {
    /// From the first byte to the outage's start, Mbit/s.
    pub before_mbps: Option<f64>,
    /// Over the outage window, Mbit/s.
    pub during_mbps: Option<f64>,
    /// From the outage's end to the last byte, Mbit/s.
    pub after_mbps: Option<f64>,
    /// The longest time without data that overlaps the outage window
    /// (counted from the window's start when no read fell before it), ms.
    pub outage_stall_ms: f64,
    /// From the outage's start to the end of that stall (data flowing
    /// again, over the other path or the one come back), ms.
    pub resumed_after_ms: Option<f64>,
}

/// Plain TCP or kernel MPTCP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transport {
    #[default]
    Tcp,
    /// `IPPROTO_MPTCP` sockets: subflows as the in-kernel path manager
    /// opens them (see [`crate::bench::mptcp`]).
    Mptcp,
}

fn listen(bind: SocketAddr, t: Transport) -> io::Result<TcpListener> {
    match t {
        Transport::Tcp => TcpListener::bind(bind),
        Transport::Mptcp => {
            let s = Socket::new(
                Domain::for_address(bind),
                Type::STREAM,
                Some(Protocol::MPTCP),
            )?;
            s.set_reuse_address(true)?;
            s.bind(&bind.into())?;
            s.listen(8)?;
            Ok(s.into())
        }
    }
}

fn connect(target: SocketAddr, t: Transport) -> io::Result<TcpStream> {
    let timeout = Duration::from_secs(5);
    match t {
        Transport::Tcp => TcpStream::connect_timeout(&target, timeout),
        Transport::Mptcp => {
            let s = Socket::new(
                Domain::for_address(target),
                Type::STREAM,
                Some(Protocol::MPTCP),
            )?;
            s.connect_timeout(&target.into(), timeout)?;
            Ok(s.into())
        }
    }
}

/// The receiving end: accepts one connection and reads until it closes.
pub struct Sink {
    handle: JoinHandle<io::Result<Vec<(Instant, usize)>>>,
}

impl Sink {
    /// Listens on `bind` in namespace `ns` (plain TCP).
    pub fn start(ns: &str, bind: SocketAddr) -> anyhow::Result<Sink> {
        Sink::start_on(ns, bind, Transport::Tcp)
    }

    /// Listens on `bind` in namespace `ns` with transport `t`.
    pub fn start_on(ns: &str, bind: SocketAddr, t: Transport) -> anyhow::Result<Sink> {
        let (tx, rx) = mpsc::channel();
        let ns_thread = ns.to_string();
        let handle = std::thread::Builder::new()
            .name("stall-sink".into())
            .spawn(move || -> io::Result<Vec<(Instant, usize)>> {
                let listener = match sys::enter_netns(&ns_thread).and_then(|()| listen(bind, t)) {
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

    /// Waits for the connection to close and sums up what arrived, with
    /// the goodput around `outage` (start, end) when given.
    pub fn finish(
        self,
        cc: &str,
        outage: Option<(Instant, Instant)>,
    ) -> anyhow::Result<StallStats> {
        let log = match self.handle.join() {
            Ok(r) => r.context("TCP sink")?,
            Err(_) => anyhow::bail!("TCP sink thread panicked"),
        };
        let mut st = analyse(&log, cc);
        st.around = outage.and_then(|(o0, o1)| around_outage(&log, o0, o1));
        Ok(st)
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

/// Goodput before, during and after `[o0, o1)` from a read log; `None`
/// for an empty log or an empty window.
pub fn around_outage(log: &[(Instant, usize)], o0: Instant, o1: Instant) -> Option<AroundOutage> {
    let (first, last) = (log.first()?.0, log.last()?.0);
    if o1 <= o0 {
        return None;
    }
    let mbps = |from: Instant, to: Instant| -> Option<f64> {
        let span = to.checked_duration_since(from)?.as_secs_f64();
        (span > 0.0).then(|| {
            let bytes: usize = log
                .iter()
                .filter(|(t, _)| *t >= from && *t < to)
                .map(|(_, n)| n)
                .sum();
            bytes as f64 * 8.0 / span / 1e6
        })
    };
    let mut a = AroundOutage {
        before_mbps: mbps(first, o0),
        during_mbps: (first <= o0 && last >= o1).then(|| mbps(o0, o1)).flatten(),
        after_mbps: mbps(o1, last),
        ..AroundOutage::default()
    };
    // Gaps between reads, and from the window's start to the first read
    // after it when none fell between the last read before and o0.
    let mut prev = log.iter().rev().find(|(t, _)| *t <= o0).map_or(o0, |r| r.0);
    for &(t, _) in log.iter().filter(|(t, _)| *t > o0) {
        if prev >= o1 {
            break;
        }
        let gap = t.duration_since(prev).as_secs_f64() * 1e3;
        if gap > a.outage_stall_ms {
            a.outage_stall_ms = gap;
            a.resumed_after_ms = Some(t.duration_since(o0).as_secs_f64() * 1e3);
        }
        prev = t;
    }
    Some(a)
}

/// Connects from namespace `ns` to `target` over `transport` and writes
/// until `until` or `stop`, with congestion control `cc` (empty: the
/// system's default).
pub fn spawn_source(
    ns: &str,
    target: SocketAddr,
    transport: Transport,
    cc: &str,
    until: Instant,
    stop: Arc<AtomicBool>,
) -> JoinHandle<io::Result<u64>> {
    let ns = ns.to_string();
    let cc = cc.to_string();
    std::thread::spawn(move || {
        sys::enter_netns(&ns)?;
        let mut conn = connect(target, transport)?;
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

    #[test]
    fn goodput_and_stall_around_an_outage() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // 1000 B every 100 ms for 1 s, nothing until 1.6 s, then every
        // 100 ms to 3 s; the outage is 1.0 .. 2.0 s.
        let mut log: Vec<(Instant, usize)> = (0..10).map(|i| (t0 + ms(100 * i), 1000)).collect();
        log.extend((16..=30).map(|i| (t0 + ms(100 * i), 1000)));
        let a = around_outage(&log, t0 + ms(1000), t0 + ms(2000)).expect("window");
        // 10 reads before 1.0 s over 1.0 s.
        assert!((a.before_mbps.unwrap() - 0.08).abs() < 1e-9, "{a:?}");
        // 4 reads in 1.6 .. 1.9 s over 1 s.
        assert!((a.during_mbps.unwrap() - 0.032).abs() < 1e-9, "{a:?}");
        // 10 reads in 2.0 .. 3.0 s (the last read ends the span).
        assert!((a.after_mbps.unwrap() - 0.08).abs() < 1e-9, "{a:?}");
        // From the last read at 0.9 s to 1.6 s.
        assert!((a.outage_stall_ms - 700.0).abs() < 1e-6, "{a:?}");
        assert!((a.resumed_after_ms.unwrap() - 600.0).abs() < 1e-6, "{a:?}");
        assert_eq!(around_outage(&[], t0, t0 + ms(1)), None);
        assert_eq!(around_outage(&log, t0 + ms(5), t0 + ms(5)), None);
        // A stream that ended inside the window has no "during" figure.
        let short = &log[..5];
        let a = around_outage(short, t0 + ms(1000), t0 + ms(2000)).expect("window");
        assert_eq!((a.during_mbps, a.after_mbps), (None, None));
    }
}
