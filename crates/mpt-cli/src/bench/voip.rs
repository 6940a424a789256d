//! A VoIP-like flow: fixed-size UDP packets at a fixed interval (G.711 at
//! 20 ms: 160 bytes every 20 ms), sender and receiver threads of this process
//! placed in the two end namespaces with setns. Each packet carries a
//! sequence number and its CLOCK_MONOTONIC send time; namespaces share the
//! clock, so the receiver measures one-way delay directly.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::stats::quantile;
use mpt_emu::sys;

/// A loss-free stretch this long (of send time) counts as "flowing again".
const CLEAN_RUN_NS: u64 = 1_000_000_000;

/// Header: sequence (u32 BE) + send time in ns (u64 BE).
const HEADER: usize = 12;

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `at` on the CLOCK_MONOTONIC ns scale (Instant is CLOCK_MONOTONIC on
/// Linux, but opaque; map through a simultaneous reading of both).
pub fn instant_to_mono_ns(at: Instant) -> u64 {
    let (now_i, now_ns) = (Instant::now(), mono_ns());
    if at >= now_i {
        now_ns + (at - now_i).as_nanos() as u64
    } else {
        now_ns.saturating_sub((now_i - at).as_nanos() as u64)
    }
}

/// One received packet.
#[derive(Debug, Clone, Copy)]
pub struct Rx {
    pub seq: u32,
    pub sent_ns: u64,
    pub recv_ns: u64,
}

/// The receiving end, bound in its namespace; stops on [`Receiver::finish`].
pub struct Receiver {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<Vec<Rx>>>>,
}

impl Receiver {
    pub fn start(ns: &str, bind: SocketAddr) -> anyhow::Result<Receiver> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let ns = ns.to_string();
        let ns_thread = ns.clone();
        let st = stop.clone();
        let handle = std::thread::Builder::new()
            .name("voip-rx".into())
            .spawn(move || -> io::Result<Vec<Rx>> {
                let sock = match sys::enter_netns(&ns_thread).and_then(|()| UdpSocket::bind(bind)) {
                    Ok(s) => {
                        let _ = tx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return Err(e);
                    }
                };
                sock.set_read_timeout(Some(Duration::from_millis(50)))?;
                let mut log = Vec::with_capacity(1 << 14);
                let mut buf = [0u8; 2048];
                while !st.load(Ordering::Relaxed) {
                    match sock.recv(&mut buf) {
                        Ok(n) if n >= HEADER => {
                            let recv_ns = mono_ns();
                            let seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                            let mut t = [0u8; 8];
                            t.copy_from_slice(&buf[4..12]);
                            log.push(Rx {
                                seq,
                                sent_ns: u64::from_be_bytes(t),
                                recv_ns,
                            });
                        }
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                            ) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(log)
            })
            .context("spawning the VoIP receiver")?;
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => anyhow::bail!("VoIP receiver in {ns}: {e}"),
            Err(_) => anyhow::bail!("VoIP receiver did not start"),
        }
        Ok(Receiver {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops and returns the log, in arrival order.
    pub fn finish(mut self) -> anyhow::Result<Vec<Rx>> {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(r)) => r.context("VoIP receiver"),
            _ => anyhow::bail!("VoIP receiver thread panicked"),
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Sends `size`-byte packets every `interval` until `until` or `stop`,
/// marked with `dscp` (0: unmarked); returns the send times (ns,
/// CLOCK_MONOTONIC) indexed by sequence number. Packets the kernel refused
/// (e.g. no route for a moment) count as sent.
pub fn spawn_sender(
    ns: &str,
    target: SocketAddr,
    size: usize,
    interval: Duration,
    dscp: u8,
    until: Instant,
    stop: Arc<AtomicBool>,
) -> JoinHandle<io::Result<Vec<u64>>> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        sys::enter_netns(&ns)?;
        let bind: SocketAddr = if target.is_ipv4() {
            "0.0.0.0:0".parse().map_err(io::Error::other)?
        } else {
            "[::]:0".parse().map_err(io::Error::other)?
        };
        let sock = UdpSocket::bind(bind)?;
        if dscp != 0 {
            set_dscp(&sock, target.is_ipv6(), dscp)?;
        }
        let mut buf = vec![0u8; size.max(HEADER)];
        let mut sent = Vec::new();
        let start = Instant::now();
        let mut seq: u32 = 0;
        loop {
            let due = start + interval * seq;
            if due >= until || stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let t = mono_ns();
            buf[0..4].copy_from_slice(&seq.to_be_bytes());
            buf[4..12].copy_from_slice(&t.to_be_bytes());
            let _ = sock.send_to(&buf, target);
            sent.push(t);
            seq += 1;
        }
        Ok(sent)
    })
}

/// Marks the socket's packets with `dscp` (the upper six bits of the IPv4
/// TOS or IPv6 traffic class byte).
fn set_dscp(sock: &UdpSocket, v6: bool, dscp: u8) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let value: libc::c_int = libc::c_int::from(dscp) << 2;
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS)
    };
    // SAFETY: a valid socket and an int option of the right size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What the flow saw.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct VoipStats {
    pub sent: u64,
    pub received: u64,
    pub loss_pct: f64,
    pub delay_p50_ms: Option<f64>,
    pub delay_p99_ms: Option<f64>,
    pub delay_max_ms: Option<f64>,
    /// Longest stretch of consecutive lost packets, in ms of send time.
    pub longest_gap_ms: f64,
    /// Longest time without any packet arriving, ms (receiver clock): the
    /// gap a listener hears.
    pub longest_silence_ms: f64,
    /// Packets lost whose send time falls in the outage window.
    pub lost_in_outage: u64,
    /// Outage start until VoIP flows again without loss: from the outage
    /// start to the send time of the first packet that begins a loss-free
    /// second (all packets sent in the next 1 s received); 0 if the flow
    /// never broke.
    pub switch_ms: Option<f64>,
    /// The same from the outage end (WiFi back; the move back).
    pub switch_back_ms: Option<f64>,
}

/// Per-packet result: (send time from start in s, delay ms or None if lost).
pub type Timeline = Vec<(f64, Option<f64>)>;

/// Analyses a run; `outage` = (start, end) in CLOCK_MONOTONIC ns.
pub fn analyse(sent: &[u64], rx: &[Rx], outage: Option<(u64, u64)>) -> (VoipStats, Timeline) {
    let mut delay: Vec<Option<f64>> = vec![None; sent.len()];
    for r in rx {
        if let Some(d) = delay.get_mut(r.seq as usize) {
            if d.is_none() {
                *d = Some(r.recv_ns.saturating_sub(r.sent_ns) as f64 / 1e6);
            }
        }
    }
    let mut ds: Vec<f64> = delay.iter().flatten().copied().collect();
    ds.sort_by(f64::total_cmp);
    let received = ds.len() as u64;
    let n = sent.len() as u64;
    let t0 = sent.first().copied().unwrap_or(0);
    let mut st = VoipStats {
        sent: n,
        received,
        loss_pct: if n > 0 {
            100.0 * (n - received) as f64 / n as f64
        } else {
            0.0
        },
        delay_p50_ms: quantile(&ds, 0.5),
        delay_p99_ms: quantile(&ds, 0.99),
        delay_max_ms: ds.last().copied(),
        ..VoipStats::default()
    };
    // Longest loss run.
    let mut run_start: Option<usize> = None;
    for (i, d) in delay.iter().enumerate() {
        match (d, run_start) {
            (None, None) => run_start = Some(i),
            (Some(_), Some(s)) => {
                let gap = (sent[i] - sent[s]) as f64 / 1e6;
                st.longest_gap_ms = st.longest_gap_ms.max(gap);
                run_start = None;
            }
            _ => {}
        }
    }
    if let (Some(s), Some(&last)) = (run_start, sent.last()) {
        st.longest_gap_ms = st.longest_gap_ms.max((last - sent[s]) as f64 / 1e6);
    }
    let mut arrivals: Vec<u64> = rx.iter().map(|r| r.recv_ns).collect();
    arrivals.sort_unstable();
    st.longest_silence_ms = arrivals
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e6)
        .fold(0.0, f64::max);
    if let Some((o0, o1)) = outage {
        // First send time at or after `from` that starts a loss-free second
        // (every packet sent in [t, t + 1 s) received), minus `from`.
        let clean_from = |from: u64| -> Option<f64> {
            let first = sent.partition_point(|&t| t < from);
            (first..sent.len())
                .find(|&i| {
                    let end = sent.partition_point(|&t| t < sent[i] + CLEAN_RUN_NS);
                    end < sent.len() && (i..end).all(|j| delay[j].is_some())
                })
                .map(|i| sent[i].saturating_sub(from) as f64 / 1e6)
        };
        st.lost_in_outage = (0..sent.len())
            .filter(|&i| sent[i] >= o0 && sent[i] < o1 && delay[i].is_none())
            .count() as u64;
        st.switch_ms = clean_from(o0);
        st.switch_back_ms = clean_from(o1);
    }
    let timeline = sent
        .iter()
        .zip(&delay)
        .map(|(&t, d)| (t.saturating_sub(t0) as f64 / 1e9, *d))
        .collect();
    (st, timeline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyse_counts_loss_and_switch() {
        let ms = 1_000_000u64;
        let sent: Vec<u64> = (0..200).map(|i| 1_000 * ms + i * 20 * ms).collect();
        // Lose seq 10..=24 (outage from seq 10 on, switch after 15 packets).
        let rx: Vec<Rx> = (0..200u32)
            .filter(|s| !(10..=24).contains(s) && *s != 40)
            .map(|s| Rx {
                seq: s,
                sent_ns: sent[s as usize],
                recv_ns: sent[s as usize] + 30 * ms,
            })
            .collect();
        let outage = (sent[10], sent[10] + 1_000 * ms);
        let (st, tl) = analyse(&sent, &rx, Some(outage));
        // Lost 10..=24 and 40: the first clean second starts at seq 41.
        assert_eq!((st.sent, st.received, st.lost_in_outage), (200, 184, 16));
        assert_eq!(st.switch_ms, Some(620.0));
        assert_eq!(st.switch_back_ms, Some(0.0));
        assert_eq!(st.delay_p50_ms, Some(30.0));
        assert_eq!(st.longest_gap_ms, 300.0);
        // Seq 9 arrived at +210 ms, seq 25 at +530 ms.
        assert_eq!(st.longest_silence_ms, 320.0);
        assert_eq!(tl.len(), 200);
        assert!(mono_ns() > 0);
    }
}
