//! The flood: forged Noise initiations from spoofed sources at the server
//! ports, alone (memory) and in rounds beside the senders (see
//! `measure_flood`).

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use super::bed::{count_up, Bed};
use super::config::server_ip;
use super::options::Options;
use super::report::{proc_mem, FloodResult};
use super::traffic::tcp_at_once;
use crate::bench::process::cpu_time;
use crate::bench::stats::median_run;
use crate::bench::stop::{check_stop, sleep};
use crate::bench::testbed::mptd_status;

/// Forged Noise initiations from spoofed sources, sent from a thread in
/// the client namespace until stopped.
pub(crate) struct Flood {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    started: Instant,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Flood {
    pub(crate) fn start(ns: &str, ports: Vec<u16>) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (st, se, name) = (stop.clone(), sent.clone(), ns.to_string());
        let thread = std::thread::spawn(move || {
            mpt_emu::sys::enter_netns(&name)?;
            flood_loop(&ports, &st, &se)
        });
        Flood {
            stop,
            sent,
            started: Instant::now(),
            thread: Some(thread),
        }
    }

    /// Stops the thread; gives (datagrams sent, per second).
    pub(crate) fn finish(mut self) -> anyhow::Result<(u64, f64)> {
        self.stop.store(true, Ordering::Relaxed);
        let secs = self.started.elapsed().as_secs_f64();
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| anyhow::anyhow!("the flood thread panicked"))?
                .context("the flood thread")?;
        }
        let n = self.sent.load(Ordering::Relaxed);
        Ok((n, n as f64 / secs.max(1e-9)))
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A small xorshift generator: the flood needs volume, not secrecy.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// One forged datagram: IPv4 header (checksum, length and id left to the
/// kernel), UDP header (no checksum), then an initiation-sized message with
/// our header (type NoiseInitiation, conn_id 0) and a random body.
pub fn forged_initiation(
    rng_bytes: &mut dyn FnMut() -> u64,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    port: u16,
) -> Vec<u8> {
    use mpt_proto::noise::INITIATION_LEN;
    use mpt_proto::wire::{Flags, Header, MsgType};
    let udp_len = 8 + INITIATION_LEN;
    let mut p = vec![0u8; 20 + udp_len];
    p[0] = 0x45;
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let sport = 1024 + (rng_bytes() % 60000) as u16;
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&port.to_be_bytes());
    p[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let msg = &mut p[28..];
    for chunk in msg.chunks_mut(8) {
        let r = rng_bytes().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    let header = Header {
        msg_type: MsgType::NoiseInitiation,
        flags: Flags::NONE,
        path_id: 0,
        conn_id: 0,
        seq: 0,
        path_seq: 0,
        timestamp_us: 0,
    };
    // The buffer is INITIATION_LEN long, more than a header.
    let _ = header.emit(msg);
    p
}

fn flood_loop(ports: &[u16], stop: &AtomicBool, sent: &AtomicU64) -> std::io::Result<()> {
    // SAFETY: plain socket(2); the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut rng = XorShift(seed);
    let dst = server_ip(0);
    let mut n: u64 = 0;
    let mut result = Ok(());
    while !stop.load(Ordering::Relaxed) {
        // Spoofed sources in path 0's subnet, away from the clients'.
        let r = rng.next();
        let src = Ipv4Addr::new(10, 100, 200 + (r % 2) as u8, 1 + ((r >> 8) % 254) as u8);
        let port = ports[(n as usize) % ports.len()];
        let pkt = forged_initiation(&mut || rng.next(), src, dst, port);
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(dst.octets()),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: pkt and addr outlive the call; lengths are theirs.
        let rc = unsafe {
            libc::sendto(
                fd,
                pkt.as_ptr().cast(),
                pkt.len(),
                0,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // Queue full or the neighbour not resolved yet: go on.
                Some(libc::ENOBUFS | libc::EAGAIN | libc::EHOSTUNREACH) => continue,
                _ => {
                    result = Err(e);
                    break;
                }
            }
        }
        n += 1;
        if n % 256 == 0 {
            sent.store(n, Ordering::Relaxed);
        }
    }
    sent.store(n, Ordering::Relaxed);
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    result
}

/// A port of the server namespace nothing listens on: the control flood
/// goes there (the kernel drops it after the socket lookup; mptd never
/// sees it).
pub const CLOSED_PORT: u16 = 64022;

/// Rounds of the flood measurement: each runs the senders quiet, under
/// the flood, under the flood aimed at [`CLOSED_PORT`], and paced, quiet
/// and under the flood, one after the other; the medians are compared.
pub const FLOOD_ROUNDS: usize = 3;

/// The median of `v` (the lower middle one for an even count); 0 if empty.
fn median(v: &[f64]) -> f64 {
    median_run(v).map_or(0.0, |i| v[i])
}

/// 100 * (1 - x / base), or 0 without a base.
fn drop_pct(x: f64, base: f64) -> f64 {
    if base > 0.0 {
        100.0 * (1.0 - x / base)
    } else {
        0.0
    }
}

/// `Udp: RcvbufErrors` of namespace `ns` (datagrams the kernel dropped
/// because a socket's receive queue was full).
fn udp_rcvbuf_errors(ns: &str) -> Option<u64> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let col = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(col)?.parse().ok()
}

/// The flood alone (memory), then [`FLOOD_ROUNDS`] rounds of the senders
/// quiet / flooded / flooded at a closed port / paced quiet / paced
/// flooded.
///
/// Why the control and the paced runs: every process of this testbed,
/// the flooding thread included, shares the machine's cores, and the
/// senders alone keep them busy, so any CPU the flooder takes comes off
/// the tunnels' throughput whether or not mptd ever sees a forged
/// datagram. The control flood (the same packets, same rate, to a port
/// nothing listens on) measures that cost of the testbed; flooded against
/// control is what handling the flood costs the server. The paced runs
/// offer half the quiet throughput, as clients below the server's
/// capacity do: they lose only if the server falls behind.
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure_flood(
    bed: &Bed,
    senders: &[usize],
    o: &Options,
    work: &Path,
    ports: Vec<u16>,
    first_quiet_mbps: f64,
    server_pid: u32,
    stop: &AtomicBool,
) -> anyhow::Result<FloodResult> {
    println!(
        "==> clients: the flood alone, no traffic ({} s)",
        o.duration.as_secs()
    );
    let alone_before = proc_mem(server_pid).unwrap_or_default();
    let server_cpu0 = (bed.server.cpu_time(), Instant::now());
    let flood = Flood::start(bed.c.name(), ports.clone());
    sleep(o.duration, stop)?;
    let (_, alone_per_second) = flood.finish()?;
    let alone_server_cpu_pct = match (server_cpu0.0, bed.server.cpu_time()) {
        (Some(a), Some(b)) => {
            Some(100.0 * b.saturating_sub(a).as_secs_f64() / server_cpu0.1.elapsed().as_secs_f64())
        }
        _ => None,
    };
    sleep(Duration::from_secs(2), stop)?;
    let alone_after = proc_mem(server_pid).unwrap_or_default();
    println!(
        "    {alone_per_second:.0} forged initiations/s, server RSS {} -> {} KiB, server CPU {}",
        alone_before.rss_kib,
        alone_after.rss_kib,
        alone_server_cpu_pct.map_or("-".to_string(), |p| format!("{p:.1} % of a core"))
    );
    let paced_each = ((first_quiet_mbps / 2.0) / senders.len().max(1) as f64).max(1.0) as u64;
    let mut f = FloodResult {
        rounds: FLOOD_ROUNDS,
        paced_mbps_per_sender: paced_each,
        alone_before,
        alone_after,
        alone_per_second,
        alone_server_cpu_pct,
        server_before: proc_mem(server_pid).unwrap_or_default(),
        ..FloodResult::default()
    };
    let mut flooded_aggs = Vec::new();
    let (mut flood_secs, mut flood_cpu_secs, mut control_datagrams, mut control_secs) =
        (0.0, 0.0, 0u64, 0.0);
    let rcvbuf0 = udp_rcvbuf_errors(bed.s.name());
    for round in 1..=FLOOD_ROUNDS {
        for (kind, flood_ports, pace) in [
            ("quiet", None, None),
            ("flood", Some(&ports), None),
            ("control", Some(&vec![CLOSED_PORT]), None),
            ("paced-quiet", None, Some(paced_each)),
            ("paced-flood", Some(&ports), Some(paced_each)),
        ] {
            check_stop(stop)?;
            let tag = format!("{kind}-{round}");
            println!(
                "==> clients: flood round {round}/{FLOOD_ROUNDS}: {} clients, {kind}{} ({} s)",
                senders.len(),
                pace.map_or(String::new(), |r| format!(", each paced at {r} Mbit/s")),
                o.duration.as_secs()
            );
            let cpu0 = (cpu_time(std::process::id()), Instant::now());
            let flood = flood_ports.map(|p| Flood::start(bed.c.name(), p.clone()));
            if flood.is_some() {
                sleep(Duration::from_millis(500), stop)?;
            }
            let agg = tcp_at_once(bed, senders, o, work, &tag, pace, stop);
            let sent = flood.map(Flood::finish).transpose()?;
            let secs = cpu0.1.elapsed().as_secs_f64();
            let agg = agg?;
            let mut line = format!("    {:.1} Mbit/s in all", agg.mbps);
            if let Some((n, rate)) = sent {
                let _ = write!(line, ", {rate:.0} forged initiations/s");
                if kind == "control" {
                    control_datagrams += n;
                    control_secs += secs;
                } else {
                    f.datagrams += n;
                    flood_secs += secs;
                    if let (Some(a), Some(b)) = (cpu0.0, cpu_time(std::process::id())) {
                        flood_cpu_secs += b.saturating_sub(a).as_secs_f64();
                    }
                }
            }
            println!("{line}");
            match kind {
                "quiet" => f.quiet_mbps.push(agg.mbps),
                "flood" => {
                    f.flooded_mbps.push(agg.mbps);
                    flooded_aggs.push(agg);
                }
                "control" => f.control_mbps.push(agg.mbps),
                "paced-quiet" => f.paced_quiet_mbps.push(agg.mbps),
                _ => f.paced_flooded_mbps.push(agg.mbps),
            }
        }
    }
    f.udp_rcvbuf_errors = match (rcvbuf0, udp_rcvbuf_errors(bed.s.name())) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    // Half-done handshakes and cookies time out within seconds.
    sleep(Duration::from_secs(2), stop)?;
    let status = mptd_status(&bed.server_control).unwrap_or_default();
    f.server_after = proc_mem(server_pid).unwrap_or_default();
    f.up_after = count_up(&status, o.paths_per_client);
    f.server_noise = status.noise.flatten();
    f.per_second = f.datagrams as f64 / flood_secs.max(1e-9);
    f.control_per_second = control_datagrams as f64 / control_secs.max(1e-9);
    f.flood_cpu_pct = (flood_cpu_secs > 0.0).then(|| 100.0 * flood_cpu_secs / flood_secs.max(1e-9));
    let quiet = median(&f.quiet_mbps);
    let flooded = median(&f.flooded_mbps);
    let control = median(&f.control_mbps);
    f.drop_pct = drop_pct(flooded, quiet);
    f.control_drop_pct = drop_pct(control, quiet);
    f.server_drop_pct = drop_pct(flooded, control);
    f.paced_drop_pct = drop_pct(median(&f.paced_flooded_mbps), median(&f.paced_quiet_mbps));
    if let Some(i) = median_run(&f.flooded_mbps) {
        f.senders = flooded_aggs.swap_remove(i);
    }
    println!(
        "    medians: quiet {quiet:.1}, flooded {flooded:.1} ({:.1} % less), control {control:.1} ({:.1} % less); \
         flooded vs control {:.1} % less; paced {:.1} % less",
        f.drop_pct, f.control_drop_pct, f.server_drop_pct, f.paced_drop_pct
    );
    Ok(f)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forged_initiations_have_the_right_shape() {
        let mut x = XorShift(7);
        let p = forged_initiation(
            &mut || x.next(),
            Ipv4Addr::new(10, 100, 200, 9),
            server_ip(0),
            20001,
        );
        let msg = &p[28..];
        assert_eq!(msg.len(), mpt_proto::noise::INITIATION_LEN);
        let (h, _) = mpt_proto::wire::Header::parse(msg).expect("our header");
        assert_eq!(h.msg_type, mpt_proto::wire::MsgType::NoiseInitiation);
        assert_eq!(h.conn_id, 0);
        assert_eq!(&p[12..16], &[10, 100, 200, 9]);
        assert_eq!(u16::from_be_bytes([p[22], p[23]]), 20001);
        assert_eq!(
            usize::from(u16::from_be_bytes([p[24], p[25]])),
            8 + msg.len()
        );
        // It parses as an initiation (the responder then refuses its MAC).
        assert!(mpt_proto::noise::parse_initiation(msg).is_ok());
    }
}
