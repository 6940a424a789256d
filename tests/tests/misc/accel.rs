//! TCP acceleration end to end: a LAN host's TCP flows through the client
//! gateway are split there (nftables tproxy to mptd's transparent
//! listener), carried over legs inside the tunnel, and opened by the
//! concentrator towards the destination.
//!
//! ```text
//!  lan (10.78.0.2, fd78::2) ─ A (mptd, accelerate) ═ 2 paths ═ B (mptd) ─ dst (10.79.0.2, fd79::2)
//! ```
//!
//! Checked, over pinned leg sets (the default) and again over single legs
//! (`accel_legs = "single"`, a smaller transfer) and over direct legs beside the tunnel
//! (`accel_legs = "direct"`, public-key bed): 20 MB each way byte-exact with a half-close in the middle (the
//! client shuts its write side, then reads the answer), one byte each
//! way, 20 concurrent flows, IPv6; a port nobody listens on and a
//! destination that resets mid-transfer reach the client as resets,
//! quickly; the destination sees the concentrator's address for an
//! accelerated flow (the LAN host's with `accel_source = "client"`, in
//! the single-leg run) and the LAN host's for a port not selected (not
//! intercepted); ping and UDP still cross the datagram tunnel; status
//! counts the flows, legs and (pinned) each path's bytes; the route to
//! the peer's tunnel address carries the legs' initial window; and after mptd stops, no nftables table,
//! rule or route of the acceleration is left.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use mpt_e2e::*;

const ACCEL_PORT: u16 = 7411;
/// Destination ports: the checked exchange, the mid-transfer reset, a
/// closed port, "who am I" selected, "who am I" not selected, UDP echo.
const P_XCHG: u16 = 5001;
const P_RESET: u16 = 5002;
const P_CLOSED: u16 = 5003;
const P_WHO: u16 = 5004;
const P_WHO_PLAIN: u16 = 6000;
const P_UDP: u16 = 6001;

fn link(
    a: &Netns,
    here: &str,
    a_addrs: &[&str],
    b: &Netns,
    there: &str,
    b_addrs: &[&str],
) -> Result<()> {
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
    for (ns, dev, addrs) in [(a, here, a_addrs), (b, there, b_addrs)] {
        for addr in addrs {
            ns.ip(&["addr", "add", addr, "dev", dev, "nodad"])?;
        }
        ns.set_link(dev, true)?;
    }
    Ok(())
}

fn reconfigure(bed: &mut TestBed, side: Side, edit: impl Fn(String) -> String) -> Result<()> {
    let path = bed.config_path(side);
    let config = edit(std::fs::read_to_string(&path)?);
    bed.stop_daemon(side)?;
    bed.restart_daemon(side, Some(&config))
}

/// Reads exactly `len` bytes and checks them against `Prng(seed)`.
fn read_checked(s: &mut TcpStream, seed: u64, len: u64) -> Result<()> {
    let mut prng = Prng::new(seed);
    let (mut buf, mut want) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    let mut left = len;
    while left > 0 {
        let n = (left as usize).min(buf.len()) & !7;
        let n = if n == 0 { left as usize } else { n };
        s.read_exact(&mut buf[..n])
            .with_context(|| format!("{} of {len} bytes read", len - left))?;
        prng.fill(&mut want[..n]);
        ensure!(
            buf[..n] == want[..n],
            "bytes differ after {} of {len}",
            len - left
        );
        left -= n as u64;
    }
    Ok(())
}

fn write_pattern(s: &mut TcpStream, seed: u64, len: u64) -> Result<()> {
    let mut prng = Prng::new(seed);
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = len;
    while left > 0 {
        let n = (left as usize).min(buf.len()) & !7;
        let n = if n == 0 { left as usize } else { n };
        prng.fill(&mut buf[..n]);
        s.write_all(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// The destination's servers, until `stop`.
fn serve(stop: Arc<AtomicBool>, errors: Arc<Mutex<Vec<String>>>) -> Result<()> {
    let ls: Vec<(u16, TcpListener)> = [P_XCHG, P_RESET, P_WHO, P_WHO_PLAIN]
        .iter()
        .map(|p| Ok((*p, TcpListener::bind(("::", *p))?)))
        .collect::<Result<_>>()?;
    let udp = UdpSocket::bind(("::", P_UDP))?;
    udp.set_nonblocking(true)?;
    for (_, l) in &ls {
        l.set_nonblocking(true)?;
    }
    while !stop.load(Relaxed) {
        let mut idle = true;
        let mut b = [0u8; 64];
        if let Ok((n, from)) = udp.recv_from(&mut b) {
            let _ = udp.send_to(&b[..n], from);
            idle = false;
        }
        for (port, l) in &ls {
            let Ok((mut s, peer)) = l.accept() else {
                continue;
            };
            idle = false;
            s.set_nonblocking(false)?;
            let (port, errors) = (*port, errors.clone());
            std::thread::spawn(move || {
                let r = match port {
                    P_XCHG => exchange_server(&mut s),
                    P_RESET => {
                        let mut buf = vec![0u8; 100_000];
                        let r = s.read_exact(&mut buf);
                        let _ = nix::sys::socket::setsockopt(
                            &s,
                            nix::sys::socket::sockopt::Linger,
                            &libc::linger {
                                l_onoff: 1,
                                l_linger: 0,
                            },
                        );
                        r.map_err(Into::into)
                    }
                    _ => s
                        .write_all(peer.ip().to_canonical().to_string().as_bytes())
                        .map_err(Into::into),
                };
                if let Err(e) = r {
                    errors.lock().unwrap().push(format!("port {port}: {e:#}"));
                }
            });
        }
        if idle {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(())
}

/// Header (seed, length), the client's bytes up to its FIN, then the
/// answer (seed + 1, same length) and close.
fn exchange_server(s: &mut TcpStream) -> Result<()> {
    let mut h = [0u8; 16];
    s.read_exact(&mut h)?;
    let seed = u64::from_le_bytes(h[..8].try_into()?);
    let len = u64::from_le_bytes(h[8..].try_into()?);
    read_checked(s, seed, len)?;
    let mut rest = [0u8; 1];
    ensure!(
        retry_interrupted(|| s.read(&mut rest))? == 0,
        "more than {len} bytes before the FIN"
    );
    write_pattern(s, seed + 1, len)
}

fn exchange(dst: SocketAddr, seed: u64, len: u64) -> Result<()> {
    let mut s = TcpStream::connect_timeout(&dst, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut h = [0u8; 16];
    h[..8].copy_from_slice(&seed.to_le_bytes());
    h[8..].copy_from_slice(&len.to_le_bytes());
    s.write_all(&h)?;
    write_pattern(&mut s, seed, len)?;
    s.shutdown(Shutdown::Write)?;
    read_checked(&mut s, seed + 1, len).context("the answer")?;
    let mut rest = [0u8; 1];
    ensure!(
        retry_interrupted(|| s.read(&mut rest))? == 0,
        "more than {len} bytes in the answer"
    );
    Ok(())
}

fn who(dst: SocketAddr) -> Result<String> {
    let mut s = TcpStream::connect_timeout(&dst, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Expects the flow to end in a reset within `within`.
fn expect_reset(dst: SocketAddr, send: usize, within: Duration) -> Result<Duration> {
    let t0 = Instant::now();
    // The gateway accepts at once and resets when the far end reports
    // the refusal: the reset may even beat connect()'s own check.
    let is_reset = |e: &std::io::Error| e.kind() == ErrorKind::ConnectionReset;
    let mut s = match TcpStream::connect_timeout(&dst, Duration::from_secs(3)) {
        Ok(s) => s,
        Err(e) if is_reset(&e) => return Ok(t0.elapsed()),
        Err(e) => bail!("connect: {e}"),
    };
    let _ = s.set_read_timeout(Some(within));
    let _ = s.set_write_timeout(Some(within));
    let buf = vec![7u8; send];
    let _ = s.write_all(&buf);
    let mut b = [0u8; 1024];
    loop {
        match retry_interrupted(|| s.read(&mut b)) {
            Ok(0) => bail!("a FIN instead of a reset"),
            Ok(_) => continue,
            Err(e) if is_reset(&e) => return Ok(t0.elapsed()),
            Err(e) => bail!("{e} instead of a reset after {:?}", t0.elapsed()),
        }
    }
}

fn accel_status(bed: &TestBed, side: Side) -> Result<serde_json::Value> {
    let st = bed.daemon(side).status()?;
    Ok(st["accel"].clone())
}

#[test]
fn accelerated_flows_are_exact_and_everything_else_is_untouched() -> Result<()> {
    accel_case("pinned", 20, Source::Gateway)
}

/// The same over single legs (`accel_legs = "single"`), with a smaller
/// transfer: the flows, refusals and resets are the same code above the
/// legs. The concentrator connects from the LAN host's own address
/// (`accel_source = "client"`; the destination routes it back through
/// the concentrator), so the destination sees who called.
#[test]
fn single_legs_carry_flows_exactly_too() -> Result<()> {
    accel_case("single", 4, Source::Client)
}

/// The same over direct legs (`accel_legs = "direct"` at both ends): one
/// TCP connection per path beside the tunnel, from A's path address to
/// B's at the connection's port, sealed with keys from the public-key
/// handshake's key pairs. B must see the legs there, and none between
/// the tunnel addresses.
#[test]
fn direct_legs_carry_flows_exactly_too() -> Result<()> {
    accel_case("direct", 4, Source::Gateway)
}

/// Where the concentrator's connections to the destination come from.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    Gateway,
    Client,
}

/// One run: `legs` is A's `accel_legs`, `big_mb` the large transfer each
/// way (MB), `source` B's `accel_source`.
fn accel_case(legs: &str, big_mb: u64, source: Source) -> Result<()> {
    let t_start = Instant::now();
    let mut spec = BedSpec::uniform(2, Family::V4).inner(&[Family::V4, Family::V6]);
    // Direct legs are protected by the connection's keys: the public-key
    // handshake's (the other runs are cleartext, whose legs the tunnel
    // protects).
    spec.noise = legs == "direct";
    let mut bed = TestBed::new(spec)?;
    let lan = Netns::new("lan")?;
    let dst = Netns::new("dst")?;
    link(
        &bed.a,
        "lan0",
        &["10.78.0.1/24", "fd78::1/64"],
        &lan,
        "up0",
        &["10.78.0.2/24", "fd78::2/64"],
    )?;
    link(
        &bed.b,
        "wan0",
        &["10.79.0.1/24", "fd79::1/64"],
        &dst,
        "eth0",
        &["10.79.0.2/24", "fd79::2/64"],
    )?;
    lan.ip(&["route", "add", "default", "via", "10.78.0.1"])?;
    lan.ip(&["-6", "route", "add", "default", "via", "fd78::1"])?;
    dst.ip(&["route", "add", "default", "via", "10.79.0.1"])?;
    dst.ip(&["-6", "route", "add", "default", "via", "fd79::1"])?;
    for ns in [&bed.a, &bed.b] {
        ns.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"])?;
    }
    let accelerate = format!(
        "accelerate = [\"10.79.0.0/24:{P_XCHG},{P_RESET},{P_CLOSED},{P_WHO}\", \"fd79::/64:{P_XCHG},{P_WHO}\"]\n"
    );
    reconfigure(&mut bed, Side::A, |c| {
        c.replace(
            "mtu = 1400\n",
            &format!("mtu = 1400\naccel_port = {ACCEL_PORT}\naccel_legs = \"{legs}\"\n"),
        )
        .replace(
            "networks = []\n",
            &format!("networks = [\"10.79.0.0/24\", \"fd79::/64\"]\n{accelerate}"),
        )
    })?;
    let b_source = match source {
        Source::Gateway => "",
        Source::Client => "accel_source = \"client\"\n",
    };
    // Both ends must agree on direct legs (B listens for them).
    let b_legs = if legs == "direct" {
        "accel_legs = \"direct\"\n"
    } else {
        ""
    };
    reconfigure(&mut bed, Side::B, |c| {
        c.replace(
            "mtu = 1400\n",
            &format!("mtu = 1400\naccel_port = {ACCEL_PORT}\n{b_source}{b_legs}"),
        )
        .replace(
            "networks = []\n",
            "networks = [\"10.78.0.0/24\", \"fd78::/64\"]\n",
        )
    })?;
    bed.wait_all_up(Duration::from_secs(5))?;
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let server = {
        let (stop, errors) = (stop.clone(), errors.clone());
        dst.spawn("servers", move || serve(stop, errors))?
    };
    let d4 = |p: u16| SocketAddr::from(([10, 79, 0, 2], p));
    let d6 = |p: u16| SocketAddr::new("fd79::2".parse().unwrap(), p);

    let res = lan.run_in("client", Duration::from_secs(20), move || {
        // Legs are pooled: wait until the first flow is carried.
        let t = Instant::now();
        let who_accel = loop {
            match who(d4(P_WHO)) {
                Ok(w) if !w.is_empty() => break w,
                r if t.elapsed() > Duration::from_secs(4) => bail!("no accelerated flow: {r:?}"),
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let (from4, from6) = match source {
            Source::Gateway => ("10.79.0.1", "fd79::1"),
            Source::Client => ("10.78.0.2", "fd78::2"),
        };
        ensure!(
            who_accel == from4,
            "accelerated flow arrived from {who_accel}, not {from4}"
        );
        let plain = who(d4(P_WHO_PLAIN))?;
        ensure!(
            plain == "10.78.0.2",
            "a port not selected arrived from {plain}: intercepted?"
        );
        let who6 = who(d6(P_WHO))?;
        ensure!(
            who6 == from6,
            "IPv6 accelerated flow arrived from {who6}, not {from6}"
        );
        let t = Instant::now();
        exchange(d4(P_XCHG), 1, big_mb << 20).context("the large transfer each way")?;
        let big = t.elapsed();
        exchange(d4(P_XCHG), 3, 1).context("one byte each way")?;
        exchange(d6(P_XCHG), 5, 1 << 20).context("IPv6, 1 MB each way")?;
        let flows: Vec<_> = (0..20u64)
            .map(|i| {
                std::thread::spawn(move || exchange(d4(P_XCHG), 100 + 2 * i, 200_000 + i * 1000))
            })
            .collect();
        for f in flows {
            f.join()
                .map_err(|_| anyhow::anyhow!("flow thread panicked"))?
                .context("concurrent flows")?;
        }
        let refused =
            expect_reset(d4(P_CLOSED), 0, Duration::from_secs(3)).context("closed port")?;
        let reset = expect_reset(d4(P_RESET), 300_000, Duration::from_secs(3))
            .context("reset mid-transfer")?;
        // The datagram tunnel still carries UDP.
        let u = UdpSocket::bind("0.0.0.0:0")?;
        u.set_read_timeout(Some(Duration::from_secs(2)))?;
        u.send_to(b"ping", d4(P_UDP))?;
        let mut b = [0u8; 8];
        let (n, _) =
            retry_interrupted(|| u.recv_from(&mut b)).context("UDP echo through the tunnel")?;
        ensure!(&b[..n] == b"ping");
        Ok((big, refused, reset))
    });
    stop.store(true, Relaxed);
    let _ = server.wait(Duration::from_secs(2));
    let (big, refused, reset) = res?;
    let errs = errors.lock().unwrap().clone();
    // The reset server's own read may fail when the client stops first.
    ensure!(
        errs.iter().all(|e| e.starts_with("port 5002")),
        "destination errors: {errs:?}"
    );
    lan.exec(&["ping", "-c", "1", "-W", "2", "10.79.0.2"])
        .context("ICMP through the tunnel")?;
    eprintln!("{legs} legs: {big_mb} MB each way in {big:?}; refused reset after {refused:?}, mid-transfer reset after {reset:?}");

    let a = accel_status(&bed, Side::A)?;
    let b = accel_status(&bed, Side::B)?;
    eprintln!("status A accel: {a}\nstatus B accel: {b}");
    ensure!(
        a["flows"].as_u64() >= Some(27),
        "A counted {} flows",
        a["flows"]
    );
    ensure!(
        a["refused"].as_u64() >= Some(1) && b["refused"].as_u64() >= Some(1),
        "refusals not counted"
    );
    ensure!(
        a["bytes_up"].as_u64() >= Some((big_mb + 1) << 20),
        "A's bytes up: {}",
        a["bytes_up"]
    );
    ensure!(
        b["bytes_down"].as_u64() >= Some((big_mb + 1) << 20),
        "B's bytes down: {}",
        b["bytes_down"]
    );
    ensure!(a["legs_idle"].as_u64() >= Some(1), "no idle leg at A");
    if legs != "single" {
        // Each end counts what its leg sets sent, by path: A the
        // uploads, B the answers, on the bed's two paths only.
        for (side, st) in [("A", &a), ("B", &b)] {
            let by_path = st["path_bytes"].as_array().cloned().unwrap_or_default();
            let sum: u64 = by_path.iter().filter_map(|p| p["bytes"].as_u64()).sum();
            ensure!(
                sum >= big_mb << 20 && by_path.iter().all(|p| p["path"].as_u64() < Some(2)),
                "{side}'s bytes by path: {by_path:?}"
            );
        }
    }
    if legs == "direct" {
        // B sees the legs at the connection's port, from A's paths, and
        // none at the acceleration port between the tunnel addresses.
        let at_port = bed.b.exec(&[
            "ss",
            "-Htn",
            "state",
            "established",
            &format!("( sport = :{DATA_PORT} )"),
        ])?;
        let from_paths = (0..2)
            .filter(|&i| {
                // B's listener is dual-stack: IPv4 peers show mapped.
                let a = outer_addr(i, Family::V4, Side::A);
                at_port.contains(&format!("[::ffff:{a}]:")) || at_port.contains(&format!(" {a}:"))
            })
            .count();
        if from_paths != 2 {
            let all_b = bed.b.exec(&["ss", "-Htn"])?;
            let all_a = bed.a.exec(&["ss", "-Htn"])?;
            bail!("B has no direct leg from each of A's paths: {at_port}\nB: {all_b}\nA: {all_a}");
        }
        let inside = bed.b.exec(&[
            "ss",
            "-Htn",
            "state",
            "established",
            &format!("( sport = :{ACCEL_PORT} )"),
        ])?;
        ensure!(inside.trim().is_empty(), "legs inside the tunnel: {inside}");
    }
    // The legs start with the larger first window: the route to the
    // peer's tunnel address carries it.
    let routes = bed.a.ip(&["route", "show"])?;
    ensure!(
        routes.contains("initcwnd 48 initrwnd 48"),
        "no leg route with the initial window at A: {routes}"
    );

    // Nothing left after the near end stops, nor after the far end's
    // stop when it connected from the client's address.
    stop_and_expect_nothing_left(&mut bed, Side::A)?;
    if source == Source::Client {
        stop_and_expect_nothing_left(&mut bed, Side::B)?;
    }
    eprintln!("wall time {:?}", t_start.elapsed());
    Ok(())
}

/// Checks that `side` has the acceleration's nftables table while it
/// runs, stops its mptd, and checks that the table, rule, local table
/// and the leg route with the first window are gone.
fn stop_and_expect_nothing_left(bed: &mut TestBed, side: Side) -> Result<()> {
    let tables = bed.ns(side).exec(&["nft", "list", "tables"])?;
    ensure!(
        tables.contains("mptd_accel"),
        "{side:?}: no nft table while running"
    );
    bed.stop_daemon(side)?;
    let ns = bed.ns(side);
    let tables = ns.exec(&["nft", "list", "tables"])?;
    ensure!(
        !tables.contains("mptd_accel"),
        "{side:?}: nft table left: {tables}"
    );
    for fam in ["-4", "-6"] {
        // The leg route to the peer's tunnel address went with the tun.
        let main = ns.ip(&[fam, "route", "show"])?;
        ensure!(
            !main.contains("initcwnd"),
            "{side:?}: leg route left after stop: {main}"
        );
        let rules = ns.ip(&[fam, "rule", "show"])?;
        ensure!(!rules.contains("27999"), "{side:?}: rule left: {rules}");
        let routes = ns
            .ip(&[fam, "route", "show", "table", "28015"])
            .unwrap_or_default();
        ensure!(
            routes.trim().is_empty(),
            "{side:?}: routes left in table 28015: {routes}"
        );
    }
    Ok(())
}
