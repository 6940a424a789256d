//! The public-key handshake (Noise IK) against real daemons in namespaces:
//! each side has a key pair (`mpt keypair`), `[daemon] private_key_file`
//! and the other side's `public_key`, no PSK.
//!
//! - ping and TCP transfers in both directions arrive intact, and the
//!   status shows the handshake and its counters;
//! - a peer that lists a key the other side does not hold, or is not
//!   listed itself, gets no tunnel; the refusals are counted by reason
//!   (`drops.bad_mac1`: it does not know our key; `unknown_peer`: we do
//!   not know its);
//! - rekeying every few seconds under a running transfer and a ping loses
//!   nothing: the transfer is intact, every ping comes back, no datagram
//!   is refused for want of keys, and TCP retransmits nothing;
//! - ends set to different `[daemon] cipher`s get no session (each side
//!   refuses the other's initiations as `decrypt` and warns once that the
//!   ends' keys or ciphers differ), the same cipher on both ends
//!   (ChaCha20-Poly1305 here) works.
//!
//! Traffic is only sent to addresses inside the test's own namespaces. The
//! tests take one lock each, so they run one at a time.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use mpt_e2e::*;
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `side`'s whole status.
fn status(bed: &TestBed, side: Side) -> Value {
    bed.daemon(side)
        .status()
        .unwrap_or_else(|e| panic!("{side:?}'s status: {e:#}"))
}

/// A number at `path` (e.g. `["noise", "refused", "mac1"]`) in `v`.
fn num(v: &Value, path: &[&str]) -> u64 {
    let mut at = v;
    for k in path {
        at = &at[*k];
    }
    at.as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v}"))
}

/// `side`'s connection object.
fn conn(bed: &TestBed, side: Side) -> Value {
    bed.snap(side)
        .unwrap_or_else(|e| panic!("{side:?}'s connection: {e:#}"))
        .raw
}

/// TCP segments retransmitted in `ns` so far (its own /proc/net/snmp).
fn tcp_retransmits(ns: &Netns) -> Result<u64> {
    let snmp = ns.exec(&["cat", "/proc/net/snmp"])?;
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (
        tcp.next().context("no Tcp header")?,
        tcp.next().context("no Tcp values")?,
    );
    let i = names
        .split_whitespace()
        .position(|n| n == "RetransSegs")
        .context("no RetransSegs")?;
    values
        .split_whitespace()
        .nth(i)
        .context("short Tcp line")?
        .parse()
        .context("RetransSegs")
}

/// Waits for a transfer; a failure also says whether a daemon died.
fn finish(bed: &mut TestBed, t: Transfer, bytes: u64, what: &str) -> TransferReport {
    match t.finish(transfer_timeout(bytes)) {
        Ok(r) => {
            assert_eq!(r.bytes, bytes, "{what}");
            r
        }
        Err(e) => {
            let alive = match bed.check_alive() {
                Ok(()) => "both daemons alive".to_owned(),
                Err(d) => format!("{d:#}"),
            };
            panic!(
                "{what}: {e:#}\n{alive}\nA's log:\n{}\nB's log:\n{}",
                bed.daemon(Side::A).log_tail(30),
                bed.daemon(Side::B).log_tail(30)
            )
        }
    }
}

/// Both sides run the Noise handshake and have keys.
fn check_sessions(bed: &TestBed) -> Result<()> {
    for side in [Side::A, Side::B] {
        let c = bed.snap(side)?.raw;
        let s = &c["session"];
        ensure!(
            s["handshake"] == "noise_ik" && s["established"] == true,
            "{side:?}'s session: {s}"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------

#[test]
fn noise_tunnel_carries_ping_and_tcp_intact() {
    const BYTES: u64 = 16 << 20;
    let _serial = serial();
    let t0 = Instant::now();
    let mut bed = TestBed::start(BedSpec::noise(2)).expect("test bed");
    let first = bed
        .wait_tunnel(Side::A, Family::V4, Duration::from_secs(10))
        .expect("tunnel up");
    eprintln!(
        "first datagram through the tunnel {:?} after both daemons were ready ({:?} after the bed started)",
        first,
        t0.elapsed()
    );
    bed.wait_all_up(Duration::from_secs(5)).expect("paths up");
    check_sessions(&bed).expect("sessions");

    let ping = start_ping(&bed, Side::A, "0.05", 20);
    let (sent, got, text) = ping_result(ping);
    assert_eq!((sent, got), (20, 20), "ping through the tunnel: {text}");

    for from in [Side::A, Side::B] {
        let t = bed
            .start_transfer(from, Family::V4, BYTES, None)
            .expect("start transfer");
        let what = format!("transfer {from:?}->{:?}", from.other());
        let r = finish(&mut bed, t, BYTES, &what);
        eprintln!(
            "{what}: {} bytes in {:.2?} ({:.0} Mbit/s), sha256 {}",
            r.bytes,
            r.elapsed,
            r.mbit_per_s(),
            hex(&r.sha256)
        );
    }
    check_sessions(&bed).expect("sessions after the transfers");
    for side in [Side::A, Side::B] {
        let c = conn(&bed, side);
        let n = &c["session"]["noise"];
        eprintln!("{side:?}'s handshake counters: {n}");
        assert!(
            num(n, &["initiations_sent"]) + num(n, &["responses_sent"]) >= 1,
            "{side:?} took part in no handshake: {n}"
        );
        assert!(num(n, &["completed"]) >= 1, "{side:?}: {n}");
        for reason in ["auth", "replay", "unknown_connection", "unsupported"] {
            assert_eq!(
                num(&c, &["drops", reason]),
                0,
                "{side:?}'s drops: {}",
                c["drops"]
            );
        }
        let d = status(&bed, side);
        assert_eq!(
            num(&d, &["noise", "refused", "unknown_peer"]),
            0,
            "{}",
            d["noise"]
        );
    }
    // The human status names the handshake too.
    let (code, out, err) = mpt_ctl(&bed.control_socket(Side::A), &["status"]).expect("mpt status");
    assert_eq!(code, 0, "mpt status: {err}");
    assert!(
        out.contains("noise"),
        "mpt status does not show the handshake:\n{out}"
    );
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn unlisted_or_wrong_public_keys_get_no_tunnel_and_are_counted() {
    let _serial = serial();
    // B lists a key that is not A's: A's authentic initiations come from a
    // key B does not know (`unknown_peer`), and B's are made for a key A
    // does not hold (A's receive worker drops them at mac1, before the
    // control loop: the connection's `drops.bad_mac1`).
    let dir = TempDir::new("stranger").expect("temp dir");
    let stranger = keypair(&dir.path().join("stranger.private")).expect("stranger's key pair");
    let spec = BedSpec::noise(2).peer_key(Side::B, &stranger);
    let mut bed = TestBed::start(spec).expect("test bed");
    let tun_rx0 = bed.b.link_stats(TUN).expect("B's tun").rx_packets;
    let ping = start_ping(&bed, Side::A, "0.2", 10);
    let (sent, got, _) = ping_result(ping);
    assert_eq!((sent, got), (10, 0), "ping got through without a session");
    let counted = wait_until(
        "refusals counted on both sides",
        Duration::from_secs(5),
        POLL,
        || {
            bed.check_alive()?;
            let (a, b) = (status(&bed, Side::A), status(&bed, Side::B));
            let unknown = num(&b, &["noise", "refused", "unknown_peer"]);
            let mac1 = num(&a, &["noise", "refused", "mac1"])
                + num(&conn(&bed, Side::A), &["drops", "bad_mac1"]);
            Ok((unknown > 0 && mac1 > 0).then_some((unknown, mac1)))
        },
    )
    .expect("refusals");
    eprintln!(
        "B refused {} initiations from an unknown key, A {} at mac1",
        counted.0, counted.1
    );
    for side in [Side::A, Side::B] {
        let c = conn(&bed, side);
        let s = &c["session"];
        assert_eq!(s["established"], false, "{side:?} has keys: {s}");
        assert_eq!(
            num(s, &["noise", "responses_sent"]),
            0,
            "{side:?} answered: {s}"
        );
        assert_eq!(num(&status(&bed, side), &["noise", "responses_sent"]), 0);
    }
    let tun_rx = bed.b.link_stats(TUN).expect("B's tun").rx_packets;
    assert_eq!(
        tun_rx, tun_rx0,
        "B wrote packets to its tun without a session"
    );
    bed.shutdown().expect("clean shutdown");
}

/// What a paced transfer A->B with a ping B->A alongside saw.
#[derive(Debug)]
struct Run {
    rekeys: u64,
    retransmits: u64,
    pings: (u64, u64),
    /// Per side: drop counters that grew during the transfer.
    drops_grown: Vec<String>,
}

/// Builds a bed (keys renewed every `rekey_after`, if given), runs 48 MB
/// A->B at 4 MB/s (12 s) with a ping every 20 ms B->A, and reports.
fn paced_transfer(rekey_after: Option<Duration>) -> Run {
    const BYTES: u64 = 48 << 20;
    const PACE: u64 = 4 << 20;
    const PINGS: u32 = 500;
    let mut spec = BedSpec::noise(2);
    spec.rekey_after = rekey_after;
    let mut bed = TestBed::start(spec).expect("test bed");
    bed.wait_tunnel(Side::A, Family::V4, Duration::from_secs(10))
        .expect("tunnel up");
    bed.wait_all_up(Duration::from_secs(5)).expect("paths up");
    let drops0: Vec<Value> = [Side::A, Side::B]
        .iter()
        .map(|s| conn(&bed, *s)["drops"].clone())
        .collect();
    let rekeys = |bed: &TestBed| -> u64 {
        [Side::A, Side::B]
            .iter()
            .map(|s| num(&conn(bed, *s), &["session", "rekeys"]))
            .sum()
    };
    let rekeys0 = rekeys(&bed);
    let retrans0 = tcp_retransmits(&bed.a).expect("retransmits");
    let ping = start_ping(&bed, Side::B, "0.02", PINGS);
    let t = bed
        .start_transfer(Side::A, Family::V4, BYTES, Some(PACE))
        .expect("start transfer");
    let what = format!("transfer A->B, rekey_after {rekey_after:?}");
    let r = finish(&mut bed, t, BYTES, &what);
    let (sent, got, _) = ping_result(ping);
    let run = Run {
        rekeys: rekeys(&bed) - rekeys0,
        retransmits: tcp_retransmits(&bed.a).expect("retransmits") - retrans0,
        pings: (sent, got),
        drops_grown: [Side::A, Side::B]
            .iter()
            .zip(&drops0)
            .flat_map(|(side, before)| {
                let after = conn(&bed, *side)["drops"].clone();
                after
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, v)| v.as_u64() > before[k.as_str()].as_u64())
                    .map(|(k, v)| format!("{side:?} {k} {} -> {v}", before[k.as_str()]))
                    .collect::<Vec<_>>()
            })
            .collect(),
    };
    eprintln!(
        "{what}: {} bytes in {:.2?}, sha256 {}; {run:?}",
        r.bytes,
        r.elapsed,
        hex(&r.sha256)
    );
    for side in [Side::A, Side::B] {
        eprintln!("{side:?}'s session: {}", conn(&bed, side)["session"]);
    }
    check_sessions(&bed).expect("sessions after the transfer");
    bed.shutdown().expect("clean shutdown");
    run
}

#[test]
fn rekeying_under_a_transfer_loses_nothing() {
    let _serial = serial();
    // The same transfer without rekeying first: what two paths cost TCP
    // anyway (reordering across paths makes it retransmit a little).
    let base = paced_transfer(None);
    let run = paced_transfer(Some(Duration::from_secs(2)));
    assert_eq!(base.rekeys, 0, "{base:?}");
    assert!(
        run.rekeys >= 3,
        "only {} rekeys during the transfer",
        run.rekeys
    );
    // Nothing refused on the way: no datagram under keys the receiver did
    // not have (auth), addressed to an index it did not know
    // (unknown_connection), or dropped for want of keys (no_session).
    let bad: Vec<&String> = run
        .drops_grown
        .iter()
        .filter(|d| !d.contains("no_path"))
        .collect();
    assert!(bad.is_empty(), "drops while rekeying: {bad:?}");
    assert_eq!(
        run.pings.0, run.pings.1,
        "pings lost while rekeying: {run:?}"
    );
    assert!(
        run.retransmits <= base.retransmits + 5 + base.retransmits / 4,
        "rekeying made TCP retransmit: {} segments, {} without rekeys",
        run.retransmits,
        base.retransmits
    );
}

#[test]
fn a_server_without_remotes_learns_them_and_a_restarted_peer_comes_back() {
    let _serial = serial();
    // B names no remote on any path: it learns A's addresses from A's
    // authenticated datagrams (it can answer initiations, never start one).
    let mut bed = TestBed::new(BedSpec::noise(2).learn_remote(Side::B)).expect("test bed");
    check_sessions(&bed).expect("sessions");
    let ping = start_ping(&bed, Side::B, "0.05", 10);
    let (sent, got, text) = ping_result(ping);
    assert_eq!((sent, got), (10, 10), "ping from the server side: {text}");
    // A restarts with no keys: it handshakes again by itself.
    for side in [Side::A, Side::B] {
        bed.stop_daemon(side).expect("stop");
        let t0 = Instant::now();
        bed.restart_daemon(side, None).expect("restart");
        let back = bed
            .wait_tunnel(Side::A, Family::V4, Duration::from_secs(10))
            .unwrap_or_else(|e| {
                panic!(
                    "tunnel not back after restarting {side:?}: {e:#}\nA's log:\n{}\nB's log:\n{}",
                    bed.daemon(Side::A).log_tail(30),
                    bed.daemon(Side::B).log_tail(30)
                )
            });
        eprintln!(
            "tunnel back {:?} after restarting {side:?} ({back:?} after it was ready)",
            t0.elapsed()
        );
        check_sessions(&bed).expect("sessions after a restart");
    }
    bed.shutdown().expect("clean shutdown");
}

/// Both ends must set the same `[daemon] cipher`: with A on AES-256-GCM
/// (the default) and B on ChaCha20-Poly1305 the handshake fails (each
/// side's prologue differs, so neither can decrypt the other's initiation)
/// and nothing gets through; with both on ChaCha20-Poly1305 the tunnel
/// works.
#[test]
fn ends_with_different_ciphers_get_no_session_and_the_refusals_are_counted() {
    let _serial = serial();
    let mut spec = BedSpec::noise(1);
    spec.cipher = [None, Some("chacha20-poly1305")];
    let mut bed = TestBed::start(spec).expect("test bed");
    let ping = start_ping(&bed, Side::A, "0.2", 10);
    let (sent, got, _) = ping_result(ping);
    assert_eq!((sent, got), (10, 0), "ping got through across ciphers");
    wait_until(
        "decrypt refusals counted on both sides",
        Duration::from_secs(5),
        POLL,
        || {
            bed.check_alive()?;
            let a = num(&status(&bed, Side::A), &["noise", "refused", "decrypt"]);
            let b = num(&status(&bed, Side::B), &["noise", "refused", "decrypt"]);
            Ok((a > 0 && b > 0).then_some(()))
        },
    )
    .expect("refusals");
    for side in [Side::A, Side::B] {
        let s = &conn(&bed, side)["session"];
        assert_eq!(s["established"], false, "{side:?} has keys: {s}");
        // The default log says what to check, once.
        let log = bed.daemon(side).log_tail(200);
        let warnings = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("[daemon] cipher"))
            .count();
        assert_eq!(warnings, 1, "{side:?}'s log:\n{log}");
    }
    bed.shutdown().expect("clean shutdown");

    let mut spec = BedSpec::noise(1);
    spec.cipher = [Some("chacha20-poly1305"), Some("chacha20-poly1305")];
    let mut bed = TestBed::start(spec).expect("test bed");
    bed.wait_tunnel(Side::A, Family::V4, Duration::from_secs(10))
        .expect("tunnel up with ChaCha20-Poly1305 on both ends");
    let ping = start_ping(&bed, Side::A, "0.05", 20);
    let (sent, got, text) = ping_result(ping);
    assert_eq!((sent, got), (20, 20), "ping with ChaCha20-Poly1305: {text}");
    bed.shutdown().expect("clean shutdown");
}
