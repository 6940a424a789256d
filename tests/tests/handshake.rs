//! The PSK handshake (version 2) against real daemons in namespaces:
//!
//! - a flood of junk Inits (right type, connection id and lengths, wrong
//!   MAC) at one side's path sockets does not keep either side out after a
//!   restart: forgeries are dropped before any rate limiter is asked;
//! - a genuine Init captured earlier and replayed to a restarted daemon
//!   earns a Challenge, never keys (its handshake counter does not move),
//!   and the tunnel comes back once the real peer is there;
//! - a daemon's own Init sent back to it is refused (`handshake_reflected`).
//!
//! Traffic is only sent to addresses inside the test's own namespaces. The
//! tests take one lock each, so they run one at a time: the restart
//! deadlines must not share two cores with another test's daemons.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mpt_e2e::*;

/// Byte 0 of a handshake Init (version 1 header, type 5).
const INIT: u8 = 0x15;
/// Byte 0 of a handshake Challenge (type 7).
const CHALLENGE: u8 = 0x17;
/// Length of an Init datagram (24-byte header, 80-byte body).
const INIT_LEN: usize = 104;
/// Length of a Challenge datagram.
const CHALLENGE_LEN: usize = 80;
/// Length of the previous version's Init: the flood sends both sizes.
const OLD_INIT_LEN: usize = 96;
/// The connection id the harness configs use.
const CONN_ID: u32 = 1;
/// How soon the tunnel must work again after a restart.
const BACK_WITHIN: Duration = Duration::from_secs(5);

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn drop_count(bed: &TestBed, side: Side, reason: &str) -> u64 {
    bed.snap(side)
        .and_then(|s| s.drop_reason(reason))
        .unwrap_or_else(|e| panic!("{side:?}'s drops.{reason}: {e:#}"))
}

fn session(bed: &TestBed, side: Side) -> SessionSnap {
    bed.snap(side)
        .and_then(|s| s.session())
        .unwrap_or_else(|e| panic!("{side:?}'s session: {e:#}"))
}

/// Sends junk handshake Inits from `ns` until stopped, ~`per_sec` of each
/// length (current and previous version) per second, spread over `targets`
/// (each from the source address given with it). Returns how many were sent.
struct Flood {
    stop: Arc<AtomicBool>,
    task: Task<u64>,
}

impl Flood {
    fn start(ns: &Netns, targets: Vec<(SocketAddr, SocketAddr)>, per_sec: u32) -> Result<Flood> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_thread = stop.clone();
        let task = ns.spawn("junk init flood", move || {
            let socks = targets
                .iter()
                .map(|(from, to)| {
                    let s = UdpSocket::bind(from).with_context(|| format!("bind {from}"))?;
                    Ok((s, *to))
                })
                .collect::<Result<Vec<_>>>()?;
            let mut rng = Prng::new(0x1417);
            let gap = Duration::from_secs(1) / per_sec.max(1);
            let mut sent = 0u64;
            let mut next = Instant::now();
            while !stop_thread.load(Ordering::Relaxed) {
                for len in [INIT_LEN, OLD_INIT_LEN] {
                    let (sock, to) = &socks[(sent as usize / 2) % socks.len()];
                    let mut d = vec![0u8; len];
                    rng.fill(&mut d);
                    d[0] = INIT;
                    d[1] = 0;
                    d[4..8].copy_from_slice(&CONN_ID.to_be_bytes());
                    // The receiver may be restarting: errors do not matter.
                    let _ = sock.send_to(&d, to);
                    sent += 1;
                }
                next += gap;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            Ok(sent)
        })?;
        Ok(Flood { stop, task })
    }

    fn stop(self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.wait(Duration::from_secs(5))
    }
}

/// Restarts `side` and returns how long until a datagram passes the
/// tunnel (from A) again.
fn restart_and_time(bed: &mut TestBed, side: Side) -> Duration {
    bed.stop_daemon(side)
        .unwrap_or_else(|e| panic!("stop {side:?}: {e:#}"));
    let t0 = Instant::now();
    bed.restart_daemon(side, None)
        .unwrap_or_else(|e| panic!("start {side:?} again: {e:#}"));
    let left = BACK_WITHIN.saturating_sub(t0.elapsed());
    match bed.wait_tunnel(Side::A, Family::V4, left) {
        Ok(_) => t0.elapsed(),
        Err(e) => {
            let logs = format!(
                "A's log:\n{}\nB's log:\n{}",
                bed.daemon(Side::A).log_tail(30),
                bed.daemon(Side::B).log_tail(30)
            );
            panic!("tunnel not back within {BACK_WITHIN:?} of restarting {side:?}: {e:#}\n{logs}")
        }
    }
}

/// Sends `datagrams` from `from` (an ephemeral port, inside `ns`) to `to`
/// and collects what comes back within `wait` of the last one.
fn send_and_listen(
    ns: &Netns,
    from: std::net::IpAddr,
    to: SocketAddr,
    datagrams: Vec<Vec<u8>>,
    wait: Duration,
) -> Result<Vec<Vec<u8>>> {
    ns.run_in(
        "send and listen",
        wait + Duration::from_secs(5),
        move || {
            let sock = UdpSocket::bind(SocketAddr::new(from, 0))
                .with_context(|| format!("bind {from}"))?;
            sock.set_read_timeout(Some(Duration::from_millis(50)))?;
            for d in &datagrams {
                sock.send_to(d, to)
                    .with_context(|| format!("send_to {to}"))?;
                std::thread::sleep(Duration::from_millis(20));
            }
            let deadline = Instant::now() + wait;
            let mut got = Vec::new();
            let mut buf = [0u8; 2048];
            while Instant::now() < deadline {
                if let Ok((n, _)) = sock.recv_from(&mut buf) {
                    got.push(buf[..n].to_vec());
                }
            }
            Ok(got)
        },
    )
}

/// Captures handshake Inits on `side`'s veth of path 0: sent by `side`
/// (`outgoing`) or received by it. Inits of the previous version's length
/// are kept too, so that these tests show what an old daemon would do.
fn capture_inits(bed: &TestBed, side: Side, outgoing: bool) -> Capture<Vec<Vec<u8>>> {
    Capture::start(
        bed.ns(side),
        &veth(side, 0),
        DATA_PORT,
        Vec::<Vec<u8>>::new(),
        move |kept, d| {
            let p = d.payload;
            let len_ok = p.len() == INIT_LEN || p.len() == OLD_INIT_LEN;
            if d.outgoing == outgoing && len_ok && p[0] == INIT && kept.len() < 16 {
                kept.push(p.to_vec());
            }
        },
    )
    .expect("capture")
}

// ---------------------------------------------------------------------------

#[test]
fn init_flood_does_not_keep_a_restarted_peer_out() {
    const PER_SEC: u32 = 200;
    let _serial = serial();
    let mut bed = TestBed::new(BedSpec::keyed(2)).expect("test bed");
    let auth0 = drop_count(&bed, Side::B, "auth");
    let targets = (0..2)
        .map(|i| {
            (
                SocketAddr::new(outer_addr(i, Family::V4, Side::A), 0),
                path_sockaddr(i, Side::B),
            )
        })
        .collect();
    let flood = Flood::start(&bed.a, targets, PER_SEC).expect("flood");
    std::thread::sleep(Duration::from_millis(500));

    // A restarts: B, flooded, must answer A's Init.
    let a_back = restart_and_time(&mut bed, Side::A);
    // B restarts under the flood: it must answer (and be answered) too.
    let b_back = restart_and_time(&mut bed, Side::B);
    std::thread::sleep(Duration::from_millis(500));
    let auth = drop_count(&bed, Side::B, "auth");
    let limited = drop_count(&bed, Side::B, "handshake_rate_limited");
    let sent = flood.stop().expect("flood");
    eprintln!(
        "flood of {sent} junk inits: tunnel back {a_back:?} after A's restart, {b_back:?} after B's; \
         B's new daemon counted drops.auth {auth}, handshake_rate_limited {limited} (old daemon auth {auth0})"
    );
    // The new B saw the flood and refused it on the MAC...
    assert!(
        auth >= 100,
        "B's drops.auth is {auth}: the flood did not reach it"
    );
    // ...without spending rate-limiter tokens on it.
    assert!(
        limited < 10,
        "B rate-limited {limited} handshake messages: junk spends tokens"
    );
    for side in [Side::A, Side::B] {
        let s = session(&bed, side);
        assert!(s.established && s.handshakes >= 1, "{side:?}: {s:?}");
    }
    bed.transfer(Side::A, Family::V4, 1 << 20)
        .expect("transfer after the restarts");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn replayed_init_gives_a_restarted_daemon_no_keys() {
    let _serial = serial();
    // B learns A's address from authenticated datagrams: restarted, it
    // knows none and sends no Init of its own (which, being newer, would
    // win over the replayed one and leave it unanswered).
    let mut bed = TestBed::new(BedSpec::keyed(1).learn_remote(Side::B)).expect("test bed");

    // Record A's Inits as B receives them while A restarts.
    let cap = capture_inits(&bed, Side::B, false);
    restart_and_time(&mut bed, Side::A);
    let (recorded, stats) = cap.stop().expect("capture");
    assert!(
        !recorded.is_empty(),
        "no Init from A captured on B's veth: {stats:?}"
    );

    // B restarts while A is away: nothing but the replay can reach it.
    bed.stop_daemon(Side::A).expect("stop A");
    bed.stop_daemon(Side::B).expect("stop B");
    bed.restart_daemon(Side::B, None).expect("start B again");
    let challenged0 = drop_count(&bed, Side::B, "handshake_challenged");
    let s0 = session(&bed, Side::B);
    assert!(!s0.established && s0.handshakes == 0, "B fresh: {s0:?}");

    let n = recorded.len();
    let replies = send_and_listen(
        &bed.a,
        outer_addr(0, Family::V4, Side::A),
        path_sockaddr(0, Side::B),
        recorded,
        Duration::from_millis(500),
    )
    .expect("replay");
    let kinds: Vec<(u8, usize)> = replies.iter().map(|r| (r[0], r.len())).collect();
    eprintln!("replayed {n} captured Inits; answers (type byte, length): {kinds:?}");
    assert!(
        !replies.is_empty() && replies.len() <= n,
        "{} answers to {n} replayed Inits",
        replies.len()
    );
    for (kind, len) in &kinds {
        assert_eq!(
            (*kind, *len),
            (CHALLENGE, CHALLENGE_LEN),
            "a replayed Init got something else than a Challenge"
        );
    }
    let challenged = wait_until(
        "B to count the challenged Inits",
        Duration::from_secs(2),
        POLL,
        || {
            let c = drop_count(&bed, Side::B, "handshake_challenged") - challenged0;
            Ok((c >= replies.len() as u64).then_some(c))
        },
    )
    .expect("challenged Inits counted");
    std::thread::sleep(Duration::from_millis(300));
    let s = session(&bed, Side::B);
    assert!(
        !s.established && s.handshakes == 0,
        "B took keys from a replayed Init: {s:?}"
    );
    eprintln!("B: {challenged} Inits challenged, session {s:?}");

    // The real A comes back; the tunnel works.
    let t0 = Instant::now();
    bed.restart_daemon(Side::A, None).expect("start A again");
    bed.wait_tunnel(Side::A, Family::V4, BACK_WITHIN)
        .expect("tunnel back with the real peer");
    eprintln!("tunnel back {:?} after A returned", t0.elapsed());
    let s = session(&bed, Side::B);
    assert!(
        s.established && s.handshakes >= 1,
        "B after A returned: {s:?}"
    );
    bed.transfer(Side::B, Family::V4, 1 << 20)
        .expect("transfer after the replay");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn reflected_init_is_refused() {
    let _serial = serial();
    let mut bed = TestBed::new(BedSpec::keyed(1)).expect("test bed");

    // A's own Inits, as A sends them, while A restarts.
    let cap = capture_inits(&bed, Side::A, true);
    restart_and_time(&mut bed, Side::A);
    let (own, stats) = cap.stop().expect("capture");
    assert!(!own.is_empty(), "no Init from A captured: {stats:?}");
    std::thread::sleep(Duration::from_millis(300));
    let reflected0 = drop_count(&bed, Side::A, "handshake_reflected");
    let hs0 = session(&bed, Side::A).handshakes;

    // Back to A's path socket, from B's side of the link.
    let n = own.len();
    let replies = send_and_listen(
        &bed.b,
        outer_addr(0, Family::V4, Side::B),
        path_sockaddr(0, Side::A),
        own,
        Duration::from_millis(300),
    )
    .expect("reflect");
    assert!(
        replies.is_empty(),
        "A answered its own Init: {} replies",
        replies.len()
    );
    let reflected = wait_until(
        "A to count its reflected Inits",
        Duration::from_secs(2),
        POLL,
        || {
            let r = drop_count(&bed, Side::A, "handshake_reflected") - reflected0;
            Ok((r >= n as u64).then_some(r))
        },
    )
    .expect("reflected Inits counted");
    let hs = session(&bed, Side::A).handshakes;
    eprintln!(
        "{n} own Inits sent back to A: handshake_reflected +{reflected}, handshakes {hs0} -> {hs}"
    );
    assert_eq!(hs, hs0, "A took keys from its own Init");
    bed.transfer(Side::A, Family::V4, 1 << 20)
        .expect("transfer after the reflection");
    bed.shutdown().expect("clean shutdown");
}
