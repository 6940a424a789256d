//! Handshake floods against real daemons in namespaces (issue 34):
//!
//! - **the cookie-holding replayer**: from a namespace of its own, a
//!   sender with a key of its own (unknown to the daemon) drives B into
//!   cookie mode, takes the cookie reply, builds one initiation with a
//!   valid mac2 with mpt-proto's initiator and replays it as fast as it
//!   can while A pings B through the tunnel: A keeps > 95 % of its pings,
//!   and B refuses the copies at its per-source bucket
//!   (`noise.refused.source_limited`) before any Diffie-Hellman;
//! - **a stale PSK Init replayed from many source ports** while the
//!   genuine peer restarts: the replays earn Challenges at their address's
//!   bucket only, and the tunnel is back within 5 s;
//! - **junk type-11 datagrams** (168 bytes, `conn_id` 0, wrong mac1) at a
//!   connection's own port are dropped by the receive worker's mac1 filter
//!   and counted (`drops.bad_mac1`), never queued for the control loop
//!   (the responder's own mac1 refusals do not move).
//!
//! The attacker namespace is joined to B by a veth of its own
//! (10.78.0.0/24) and reaches B's path addresses through it. Traffic is
//! only sent to addresses inside the test's own namespaces; the tests take
//! one lock each.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context, Result};
use base64::Engine;
use mpt_e2e::*;
use mpt_proto::noise::{
    Entropy, Identity, Initiator, Outgoing, PublicKey, StaticSecret, Tai64n, COOKIE_REPLY_LEN,
};
use mpt_proto::wire::{Flags, Header, MsgType};
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The attacker's address, on its own veth to B.
const ATTACKER: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 2);
/// B's end of that veth.
const B_SIDE: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);
/// How soon the tunnel must work again after a restart.
const BACK_WITHIN: Duration = Duration::from_secs(5);

/// A namespace of its own joined to B's (removed with it on every exit:
/// the veth goes with the namespace).
fn attacker(bed: &TestBed) -> Result<Netns> {
    let x = Netns::new("x")?;
    x.ip(&[
        "link",
        "add",
        "vx0",
        "type",
        "veth",
        "peer",
        "name",
        "vbx",
        "netns",
        bed.b.name(),
    ])?;
    x.ip(&["addr", "add", &format!("{ATTACKER}/24"), "dev", "vx0"])?;
    bed.b
        .ip(&["addr", "add", &format!("{B_SIDE}/24"), "dev", "vbx"])?;
    x.set_link("vx0", true)?;
    bed.b.set_link("vbx", true)?;
    x.ip(&["route", "add", "10.77.0.0/16", "via", &B_SIDE.to_string()])?;
    Ok(x)
}

fn status(bed: &TestBed, side: Side) -> Value {
    bed.daemon(side)
        .status()
        .unwrap_or_else(|e| panic!("{side:?}'s status: {e:#}"))
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut at = v;
    for k in path {
        at = &at[*k];
    }
    at.as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v}"))
}

/// SplitMix64 as the test initiator's entropy.
struct TestRng(u64);

impl Entropy for TestRng {
    fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_be_bytes()[..chunk.len()]);
        }
    }
}

fn template() -> Header {
    Header {
        msg_type: MsgType::Data,
        flags: Flags::NONE,
        path_id: 0,
        conn_id: 0,
        seq: 0,
        path_seq: 0,
        timestamp_us: 0,
    }
}

fn wall() -> Tai64n {
    Tai64n::from_unix(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

/// What the replayer did.
#[derive(Debug)]
struct Replay {
    cookie_replies: u64,
    sent: u64,
}

/// In `x`: drives the daemon at `to` into cookie mode, takes a cookie and
/// replays one initiation carrying a valid mac2 until `stop`.
fn cookie_replayer(
    x: &Netns,
    server: PublicKey,
    to: SocketAddr,
    stop: Arc<AtomicBool>,
) -> Result<Task<Replay>> {
    x.spawn("cookie replayer", move || {
        let sock = UdpSocket::bind(SocketAddr::new(IpAddr::V4(ATTACKER), 0))?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        let mut rng = TestRng(0x3434);
        let mut secret = [0u8; 32];
        rng.fill(&mut secret);
        let me = Identity::new(StaticSecret::from_bytes(secret))?;
        let mut i = Initiator::new(me, server, None);
        let mut out = [0u8; 256];
        let n = i.initiate(
            0x1234,
            wall(),
            Instant::now(),
            Outgoing {
                template: template(),
                entropy: &mut rng,
                out: &mut out,
            },
        )?;
        let first = out[..n].to_vec();
        // Without mac2, fast enough to put the daemon under load (more
        // than 64 initiations a second): it answers with cookie replies.
        let mut cookie_replies = 0;
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut buf = [0u8; 256];
        while cookie_replies == 0 {
            ensure!(Instant::now() < deadline, "no cookie reply from {to}");
            for _ in 0..100 {
                sock.send_to(&first, to)?;
            }
            while let Ok((n, _)) = sock.recv_from(&mut buf) {
                if n == COOKIE_REPLY_LEN && i.handle_cookie_reply(&buf[..n], Instant::now()).is_ok()
                {
                    cookie_replies += 1;
                }
            }
        }
        let n = i.initiate(
            0x5678,
            wall(),
            Instant::now(),
            Outgoing {
                template: template(),
                entropy: &mut rng,
                out: &mut out,
            },
        )?;
        let replayed = out[..n].to_vec();
        ensure!(replayed[n - 16..] != [0u8; 16], "mac2 not set");
        sock.set_nonblocking(true)?;
        let mut sent = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..32 {
                if sock.send_to(&replayed, to).is_ok() {
                    sent += 1;
                }
            }
            // Drain what comes back (refusals get no answer; cookies
            // might).
            while sock.recv_from(&mut buf).is_ok() {}
            std::thread::sleep(Duration::from_micros(500));
        }
        Ok(Replay {
            cookie_replies,
            sent,
        })
    })
}

fn public_key(b64: &str) -> PublicKey {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64 key");
    PublicKey::from_bytes(bytes.try_into().expect("32 bytes"))
}

#[test]
fn a_cookie_holding_replayer_does_not_take_established_clients_down() {
    const PINGS: u32 = 250;
    let _serial = serial();
    let mut bed = TestBed::start(BedSpec::noise(1)).expect("test bed");
    bed.wait_tunnel(Side::A, Family::V4, Duration::from_secs(10))
        .expect("tunnel up");
    let x = attacker(&bed).expect("attacker namespace");
    let server = public_key(bed.spec.public_keys[Side::B.index()].as_deref().unwrap());
    let before = status(&bed, Side::B);
    let stop = Arc::new(AtomicBool::new(false));
    let replayer =
        cookie_replayer(&x, server, path_sockaddr(0, Side::B), stop.clone()).expect("replayer");
    std::thread::sleep(Duration::from_millis(300));
    let ping = start_ping(&bed, Side::A, "0.02", PINGS);
    let (sent, got, text) = ping_result(ping);
    stop.store(true, Ordering::Relaxed);
    let replay = replayer
        .wait(Duration::from_secs(10))
        .expect("replayer ran");
    bed.check_alive().expect("daemons alive");
    let after = status(&bed, Side::B);
    let grown = |path: &[&str]| num(&after, path) - num(&before, path);
    let limited = grown(&["noise", "refused", "source_limited"]);
    let overloaded = grown(&["noise", "refused", "overloaded"]);
    let processed = grown(&["noise", "initiations_processed"]);
    let unknown =
        grown(&["noise", "refused", "unknown_peer"]) + grown(&["noise", "refused", "decrypt"]);
    let queue_full = grown(&["drops", "handshake_queue_full"]);
    eprintln!(
        "replayer {replay:?}; A's pings {got}/{sent}; B: source_limited {limited}, overloaded {overloaded}, \
         initiations_processed {processed} (unknown_peer {unknown}), handshake_queue_full {queue_full}"
    );
    assert!(
        got * 100 > sent * 95,
        "A kept {got} of {sent} pings under the flood:\n{text}"
    );
    assert!(replay.cookie_replies >= 1, "{replay:?}");
    assert!(replay.sent > 5000, "the replayer sent only {}", replay.sent);
    assert!(
        limited + queue_full > replay.sent / 2,
        "B refused only {limited} copies at the source bucket (+{queue_full} queue drops) of {}",
        replay.sent
    );
    // Diffie-Hellman only within the source's burst and refill (20/s)
    // over the few seconds of the flood.
    assert!(
        processed < 400,
        "B ran the Noise layer {processed} times for one replayed initiation"
    );
    bed.shutdown().expect("clean shutdown");
}

/// Byte 0 of a PSK handshake Init (version 1 header, type 5).
const PSK_INIT: u8 = 0x15;
/// Length of a PSK Init datagram.
const PSK_INIT_LEN: usize = 104;

#[test]
fn a_stale_psk_init_from_rotating_ports_does_not_keep_a_restarted_peer_out() {
    let _serial = serial();
    let mut bed = TestBed::new(BedSpec::keyed(1)).expect("test bed");
    // A's Inits as B receives them, while A restarts: genuine, soon stale.
    let cap = Capture::start(
        bed.ns(Side::B),
        &veth(Side::B, 0),
        DATA_PORT,
        Vec::<Vec<u8>>::new(),
        |kept, d| {
            let p = d.payload;
            // Without a cookie (bytes 72..88): a captured Init with a
            // cookie is refused as `auth` once its cookie is used.
            let plain = p.get(72..88).is_some_and(|c| c.iter().all(|&b| b == 0));
            if !d.outgoing && p.len() == PSK_INIT_LEN && p[0] == PSK_INIT && plain && kept.len() < 4
            {
                kept.push(p.to_vec());
            }
        },
    )
    .expect("capture");
    bed.stop_daemon(Side::A).expect("stop A");
    bed.restart_daemon(Side::A, None).expect("start A");
    bed.wait_tunnel(Side::A, Family::V4, BACK_WITHIN)
        .expect("tunnel back");
    let (captured, stats) = cap.stop().expect("capture");
    assert!(!captured.is_empty(), "no Init captured: {stats:?}");
    let x = attacker(&bed).expect("attacker namespace");
    let limited0 = bed
        .snap(Side::B)
        .and_then(|s| s.drop_reason("handshake_rate_limited"))
        .expect("drops");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_thread = stop.clone();
    let to = path_sockaddr(0, Side::B);
    // Replayed from a new source port every 8 datagrams.
    let replayer = x
        .spawn("stale init replayer", move || {
            let mut sent = 0u64;
            while !stop_thread.load(Ordering::Relaxed) {
                let sock =
                    UdpSocket::bind(SocketAddr::new(IpAddr::V4(ATTACKER), 0)).context("bind")?;
                for _ in 0..8 {
                    let d = &captured[sent as usize % captured.len()];
                    if sock.send_to(d, to).is_ok() {
                        sent += 1;
                    }
                }
                std::thread::sleep(Duration::from_micros(400));
            }
            Ok(sent)
        })
        .expect("replayer");
    std::thread::sleep(Duration::from_millis(500));
    // The genuine peer restarts under the replay.
    bed.stop_daemon(Side::A).expect("stop A");
    let t0 = Instant::now();
    bed.restart_daemon(Side::A, None).expect("start A again");
    let back = bed.wait_tunnel(Side::A, Family::V4, BACK_WITHIN);
    let took = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let sent = replayer.wait(Duration::from_secs(5)).expect("replayer");
    let snap = bed.snap(Side::B).expect("B");
    let limited = snap.drop_reason("handshake_rate_limited").expect("drops") - limited0;
    let challenged = snap.drop_reason("handshake_challenged").expect("drops");
    eprintln!(
        "{sent} stale Inits replayed from rotating ports; tunnel back after {took:?}; \
         B: handshake_rate_limited +{limited}, handshake_challenged {challenged}; drops {}, daemon drops {}",
        snap.raw["drops"],
        status(&bed, Side::B)["drops"]
    );
    back.unwrap_or_else(|e| {
        panic!(
            "tunnel not back within {BACK_WITHIN:?}: {e:#}\nB's log:\n{}",
            bed.daemon(Side::B).log_tail(30)
        )
    });
    assert!(
        limited > sent / 2,
        "the replays were not limited at their address: +{limited} of {sent}"
    );
    bed.transfer(Side::A, Family::V4, 1 << 20)
        .expect("transfer after the restart");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn junk_initiations_at_a_connections_own_port_are_dropped_by_the_mac1_filter() {
    const JUNK: u64 = 2000;
    let _serial = serial();
    let mut bed = TestBed::new(BedSpec::noise(1)).expect("test bed");
    let x = attacker(&bed).expect("attacker namespace");
    let before = status(&bed, Side::B);
    let bad0 = bed
        .snap(Side::B)
        .and_then(|s| s.drop_reason("bad_mac1"))
        .expect("drops.bad_mac1");
    let mut rng = Prng::new(0x1111);
    let sent = send_flood(
        &x,
        IpAddr::V4(ATTACKER),
        path_sockaddr(0, Side::B),
        JUNK,
        64,
        Duration::from_secs(10),
        move |_, buf| {
            buf.resize(168, 0);
            rng.fill(buf);
            buf[0] = 0x10 | 11;
            buf[1] = 0;
            buf[4..8].copy_from_slice(&0u32.to_be_bytes());
        },
    )
    .expect("junk");
    let bad = wait_until("B to count the junk", Duration::from_secs(3), POLL, || {
        let n = bed.snap(Side::B)?.drop_reason("bad_mac1")? - bad0;
        Ok((n >= sent * 9 / 10).then_some(n))
    })
    .unwrap_or_else(|e| panic!("B's drops.bad_mac1: {e:#}"));
    let after = status(&bed, Side::B);
    let mac1 =
        num(&after, &["noise", "refused", "mac1"]) - num(&before, &["noise", "refused", "mac1"]);
    eprintln!("{sent} junk initiations: B drops.bad_mac1 +{bad}, responder mac1 refusals +{mac1}");
    assert_eq!(mac1, 0, "junk reached the control loop's responder");
    bed.check_alive().expect("daemons alive");
    bed.wait_tunnel(Side::A, Family::V4, Duration::from_secs(3))
        .expect("tunnel still up");
    bed.shutdown().expect("clean shutdown");
}
