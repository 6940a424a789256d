//! The concentrator forwards, and TCP MSS is clamped: a host on the
//! client's LAN reaches a host on the internet behind the concentrator.
//!
//! ```text
//!  lan (10.78.0.2) ─ A (client mptd) ═ tunnel, MTU 1400 ═ B (concentrator mptd) ─ inet (10.79.0.2)
//!       MTU 9000 veth                                              MTU 9000 veth
//! ```
//!
//! A routes the internet host's prefix (and only that, `networks`) into
//! the tunnel; B routes the LAN's prefix back, forwards, and masquerades
//! what comes from the tunnel out of its WAN link with the two-line recipe
//! of docs/DEPLOY.md ("The concentrator forwards"), run here as written.
//! Both end hosts sit on 9000-byte links, so without clamping they
//! announce an MSS of 8960 and only path-MTU discovery could save them;
//! B drops its ICMP "fragmentation needed" messages, as firewalls do.
//!
//! Checked: the internet host sees the concentrator's address; with
//! `mss_clamp` on (the default) the SYN the internet host receives
//! announces at most 1360 (1400 - 40), both daemons count clamped SYNs,
//! and a bulk download goes through the black hole; with `mss_clamp =
//! false` on the client the MSS is the LAN's and the same download
//! stalls (the black hole is real).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use mpt_e2e::*;

const LAN_HOST: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 2);
const LAN_GW: &str = "10.78.0.1";
const INET_HOST: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 2);
const WAN_ADDR: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);
const WAN_IF: &str = "wan0";
const BIG_MTU: &str = "9000";

/// The recipe of docs/DEPLOY.md with the concentrator's names filled in:
/// the tunnel prefix and the client's LAN, out of `wan0`.
fn concentrator_recipe(b: &Netns) -> Result<()> {
    b.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    b.exec(&[
        "nft",
        "add table ip mpt_nat; \
         add chain ip mpt_nat post { type nat hook postrouting priority srcnat; }; \
         add rule ip mpt_nat post ip saddr { 192.168.77.0/24, 10.78.0.0/24 } oifname \"wan0\" masquerade",
    ])
    .context("nft (nftables must be installed)")?;
    Ok(())
}

/// Drops (and counts) the ICMP "fragmentation needed" messages B sends:
/// path-MTU discovery through B is a black hole.
fn block_pmtu_discovery(b: &Netns) -> Result<()> {
    b.exec(&[
        "nft",
        "add table ip mpte2e_pmtu; \
         add chain ip mpte2e_pmtu out { type filter hook output priority 0; policy accept; }; \
         add rule ip mpte2e_pmtu out icmp type destination-unreachable icmp code frag-needed counter drop",
    ])?;
    Ok(())
}

/// ICMP "fragmentation needed" messages B dropped so far.
fn blocked_icmp(b: &Netns) -> Result<u64> {
    let out = b.exec(&["nft", "list", "table", "ip", "mpte2e_pmtu"])?;
    let n = out
        .split("counter packets ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    n.with_context(|| format!("no counter in {out}"))
}

/// A veth pair `here`/`there` between two namespaces, MTU 9000, with an
/// address on each end, up.
fn link(a: &Netns, here: &str, a_addr: &str, b: &Netns, there: &str, b_addr: &str) -> Result<()> {
    a.ip(&[
        "link",
        "add",
        here,
        "type",
        "veth",
        "peer",
        "name",
        there,
        "netns",
        b.name(),
    ])?;
    for (ns, dev, addr) in [(a, here, a_addr), (b, there, b_addr)] {
        ns.ip(&["link", "set", "dev", dev, "mtu", BIG_MTU])?;
        ns.ip(&["addr", "add", addr, "dev", dev])?;
        ns.set_link(dev, true)?;
    }
    Ok(())
}

/// Rewrites `side`'s config with `edit` and restarts its daemon.
fn reconfigure(bed: &mut TestBed, side: Side, edit: impl Fn(String) -> String) -> Result<()> {
    let path = bed.config_path(side);
    let config = edit(std::fs::read_to_string(&path)?);
    bed.stop_daemon(side)?;
    bed.restart_daemon(side, Some(&config))
}

/// `TCP_MAXSEG` of a connected socket: the MSS it sends with (the peer's
/// announced MSS, less the options every segment carries).
fn max_segment(s: &TcpStream) -> Result<u32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid socket, and a c_int buffer of the length passed.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    ensure!(
        r == 0,
        "getsockopt(TCP_MAXSEG): {}",
        std::io::Error::last_os_error()
    );
    Ok(u32::try_from(v)?)
}

/// What one connection from the LAN host to the internet host saw.
struct Download {
    /// The client address the internet host's listener reported.
    peer: SocketAddr,
    /// The internet host's `TCP_MAXSEG` on the accepted socket.
    inet_mss: u32,
    /// Bytes the LAN host received of `bytes` sent.
    received: u64,
    took: Duration,
}

/// The LAN host connects to a listener on the internet host, which sends
/// `bytes` (a byte pattern) and closes; the LAN host reads until the end
/// or `deadline`, checking the pattern.
fn download(lan: &Netns, inet: &Netns, bytes: u64, deadline: Duration) -> Result<Download> {
    let listener = inet.run_in("listen", Duration::from_secs(5), || {
        Ok(TcpListener::bind(SocketAddrV4::new(INET_HOST, 0))?)
    })?;
    let to = listener.local_addr()?;
    let client = lan.run_in("connect", Duration::from_secs(5), move || {
        Ok(TcpStream::connect_timeout(&to, Duration::from_secs(3))?)
    })?;
    let (server, peer) = listener.accept()?;
    let inet_mss = max_segment(&server)?;
    let sender = std::thread::spawn(move || {
        let mut server = server;
        let chunk: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
        let mut left = bytes;
        server.set_write_timeout(Some(deadline)).ok();
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            if server.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
    });
    let start = Instant::now();
    let mut client = client;
    let mut buf = vec![0u8; 65536];
    let mut received = 0u64;
    loop {
        let left = deadline.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        client.set_read_timeout(Some(left))?;
        match client.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                for (i, b) in buf[..n].iter().enumerate() {
                    let at = received + i as u64;
                    ensure!(u64::from(*b) == at % 65536 % 251, "byte {at} corrupted");
                }
                received += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            Err(e) => return Err(e.into()),
        }
    }
    let took = start.elapsed();
    // Unblocks a sender still writing into a stalled connection.
    drop(client);
    sender.join().ok();
    Ok(Download {
        peer,
        inet_mss,
        received,
        took,
    })
}

fn mss_clamped(bed: &TestBed, side: Side) -> Result<u64> {
    let status = bed.daemon(side).status()?;
    status["connections"][0]["tcp"]["mss_clamped"]
        .as_u64()
        .with_context(|| format!("no tcp.mss_clamped in {status}"))
}

#[test]
fn the_concentrator_forwards_and_clamps_the_mss() -> Result<()> {
    let mut bed = TestBed::new(BedSpec::uniform(1, Family::V4).inner(&[Family::V4]))?;
    let lan = Netns::new("lan")?;
    let inet = Netns::new("inet")?;
    link(
        &bed.a,
        "lan0",
        &format!("{LAN_GW}/24"),
        &lan,
        "up0",
        &format!("{LAN_HOST}/24"),
    )?;
    lan.ip(&["route", "add", "default", "via", LAN_GW])?;
    bed.a.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    link(
        &bed.b,
        WAN_IF,
        &format!("{WAN_ADDR}/24"),
        &inet,
        "eth0",
        &format!("{INET_HOST}/24"),
    )?;
    // The internet host knows nothing of the tunnel or the LAN: without
    // the masquerade its answers would have nowhere to go.
    concentrator_recipe(&bed.b)?;
    block_pmtu_discovery(&bed.b)?;
    // Only the internet host's prefix goes through the tunnel; the
    // concentrator routes the client's LAN back.
    reconfigure(&mut bed, Side::A, |c| {
        c.replace("networks = []", "networks = [\"10.79.0.0/24\"]")
    })?;
    reconfigure(&mut bed, Side::B, |c| {
        c.replace("networks = []", "networks = [\"10.78.0.0/24\"]")
    })?;
    bed.wait_all_up(Duration::from_secs(5))?;

    // Clamping on (the default): 16 MB through the black hole.
    const BULK: u64 = 16 << 20;
    let d = download(&lan, &inet, BULK, Duration::from_secs(20))?;
    let icmp = blocked_icmp(&bed.b)?;
    eprintln!(
        "clamped: peer {}, inet MSS {}, {} of {BULK} bytes in {:?}, ICMP blocked {icmp}",
        d.peer, d.inet_mss, d.received, d.took
    );
    ensure!(
        d.peer.ip() == WAN_ADDR,
        "the internet host saw {} and not the concentrator's {WAN_ADDR}",
        d.peer
    );
    ensure!(
        d.inet_mss <= 1360,
        "MSS {} > 1400 - 40 with mss_clamp on",
        d.inet_mss
    );
    ensure!(
        d.received == BULK,
        "only {} of {BULK} bytes arrived with clamping",
        d.received
    );
    ensure!(
        icmp == 0,
        "{icmp} segments were too big for the tunnel despite clamping"
    );
    let (a, b) = (mss_clamped(&bed, Side::A)?, mss_clamped(&bed, Side::B)?);
    ensure!(
        a >= 1 && b >= 1,
        "clamped SYNs counted: client {a}, concentrator {b}"
    );

    // Clamping off on the client: the LAN host's SYN keeps its 8960, the
    // internet host sends segments the tunnel cannot carry, and the ICMP
    // that would tell it so is dropped: the download stalls.
    reconfigure(&mut bed, Side::A, |c| {
        c.replace("mtu = 1400\n", "mtu = 1400\nmss_clamp = false\n")
    })?;
    bed.wait_all_up(Duration::from_secs(5))?;
    const SMALL: u64 = 4 << 20;
    let icmp_before = blocked_icmp(&bed.b)?;
    let d = download(&lan, &inet, SMALL, Duration::from_millis(1500))?;
    let icmp = blocked_icmp(&bed.b)? - icmp_before;
    eprintln!(
        "unclamped: inet MSS {}, {} of {SMALL} bytes in {:?}, ICMP blocked {icmp}",
        d.inet_mss, d.received, d.took
    );
    ensure!(
        d.inet_mss > 1360,
        "MSS {} without clamping: the LAN's 9000-byte link should show",
        d.inet_mss
    );
    ensure!(icmp > 0, "no ICMP fragmentation-needed was blocked");
    ensure!(
        d.received < SMALL / 2,
        "{} of {SMALL} bytes arrived through the black hole",
        d.received
    );
    ensure!(
        mss_clamped(&bed, Side::A)? == 0,
        "client counts clamps with mss_clamp off"
    );
    bed.shutdown()
}
