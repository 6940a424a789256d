//! Encrypted connections end to end: a `key_file` on both sides of a
//! connection makes the daemons run a handshake, then seal every data,
//! probe and reply message (the 24-byte header stays in clear, with flag
//! 0x01 set; a 16-byte tag follows the ciphertext).
//!
//! What is checked here, each against real daemons in namespaces:
//! - the bytes on the wire are not the plaintext, and transfers stay intact;
//! - a peer with another key gets nothing through (`drops.auth` grows);
//! - captured datagrams replayed later are dropped (`drops.replay`) and
//!   never reach the tun;
//! - a restarted peer handshakes again by itself;
//! - a peer whose source address changes is followed (remotes learnt only
//!   from authenticated datagrams);
//! - a flood of junk and of forged sealed datagrams neither stops a
//!   transfer nor grows the daemon's memory;
//! - a key file others can read is refused at start-up.
//!
//! The tests take one lock each, so they run one at a time: the flood, the
//! restart deadline and the memory reading must not share two cores with
//! another test's transfers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Result;
use mpt_e2e::*;

/// Header layout (crates/mpt-proto/src/wire/mod.rs): byte 0 is
/// version << 4 | type, byte 1 flags, bytes 4..8 the connection id.
const HEADER_LEN: usize = 24;
/// The AEAD tag after a sealed payload.
const TAG_LEN: usize = 16;
/// Flag bit: the payload is sealed.
const SEALED: u8 = 0x01;
/// Byte 0 of a data message (version 1, type 1).
const DATA: u8 = 0x11;
/// The connection id the harness configs use (the daemon's default).
const CONN_ID: u32 = 1;

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs the tests of this file one at a time (see the module docs). A
/// test that failed while holding the lock does not stop the others.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The remote address `side` reports for path `i` (`None` if it knows
/// none). The status may give an address or an address with port.
fn remote_of(bed: &TestBed, side: Side, i: usize) -> Result<Option<IpAddr>> {
    let s = bed.snap(side)?;
    let v = &s.path(&path_name(i))?.raw["remote"];
    if v.is_null() {
        return Ok(None);
    }
    let text = v
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("remote of p{i} is not a string: {v}"))?;
    text.parse::<SocketAddr>()
        .map(|a| a.ip())
        .or_else(|_| text.parse::<IpAddr>())
        .map(Some)
        .map_err(|_| anyhow::anyhow!("remote of p{i} is not an address: {text:?}"))
}

/// Waits for a transfer; a failure also says whether a daemon died under
/// it (and how: a SIGTERM from outside the test shows in its log).
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
            panic!("{what}: {e:#}\n{alive}")
        }
    }
}

/// Requires an established session on both sides; returns B's handshakes.
fn check_sessions(bed: &TestBed) -> Result<u64> {
    let mut hs = 0;
    for side in [Side::A, Side::B] {
        let s = bed.snap(side)?.session()?;
        anyhow::ensure!(s.established, "{side:?} has no established session: {s:?}");
        hs = s.handshakes;
    }
    Ok(hs)
}

// ---------------------------------------------------------------------------
// 1. Nothing in clear

/// 16 bytes no ciphertext will contain by chance.
const MARKER: &[u8; 16] = b"mpt-e2e:PLAIN!!!";

/// Transfer bytes in 32-byte blocks: the marker, then 16 random bytes. Any
/// 47 consecutive bytes of the stream hold a whole marker, so every TCP
/// segment of the transfer would show it if it crossed the wire in clear.
fn marker_fill() -> Fill {
    Arc::new(|rng: &mut Prng, offset: u64, buf: &mut [u8]| {
        rng.fill(buf);
        for (j, b) in buf.iter_mut().enumerate() {
            let at = ((offset + j as u64) % 32) as usize;
            if at < 16 {
                *b = MARKER[at];
            }
        }
    })
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w[0] == needle[0] && w == needle)
}

/// What the capture of test 1 saw.
#[derive(Debug, Default)]
struct Seen {
    /// Datagrams received / sent by B on the path.
    received: u64,
    sent: u64,
    /// Per message type (low nibble of byte 0), version-1 datagrams only.
    by_type: [u64; 16],
    /// Datagrams holding the marker.
    marker: u64,
    /// Data, probe or reply messages without the SEALED flag or too short
    /// to hold a header and a tag.
    unsealed: u64,
    /// The first few offenders, for the failure message.
    examples: Vec<String>,
}

impl Seen {
    fn inspect(&mut self, d: &Captured<'_>) {
        if d.outgoing {
            self.sent += 1;
        } else {
            self.received += 1;
        }
        let p = d.payload;
        let mut bad = None;
        if contains(p, MARKER) {
            self.marker += 1;
            bad = Some("holds the plaintext marker");
        }
        if p.len() >= 2 && p[0] >> 4 == 1 {
            let t = usize::from(p[0] & 0x0f);
            self.by_type[t] += 1;
            // Data, probe, probe reply: sealed, header + tag at least.
            if (1..=3).contains(&t) && (p[1] & SEALED == 0 || p.len() < HEADER_LEN + TAG_LEN) {
                self.unsealed += 1;
                bad = Some("not sealed");
            }
        }
        if let Some(why) = bad {
            if self.examples.len() < 5 {
                let head = &p[..p.len().min(48)];
                self.examples.push(format!(
                    "{} -> {} len {} {why}: {}",
                    d.src,
                    d.dst,
                    p.len(),
                    hex(head)
                ));
            }
        }
    }
}

#[test]
fn encrypted_transfer_is_intact_and_not_plaintext() {
    const BYTES: u64 = 20 << 20;
    let _serial = serial();
    let mut bed = TestBed::new(BedSpec::keyed(2)).expect("test bed");
    check_sessions(&bed).expect("sessions after start");

    let cap = Capture::start(
        &bed.b,
        &veth(Side::B, 0),
        DATA_PORT,
        Seen::default(),
        Seen::inspect,
    )
    .expect("capture on B's veth of p0");
    for from in [Side::A, Side::B] {
        let t = bed
            .start_transfer_with(from, Family::V4, BYTES, None, marker_fill())
            .expect("start transfer");
        let what = format!("transfer {from:?}->{:?}", from.other());
        let r = finish(&mut bed, t, BYTES, &what);
        eprintln!(
            "transfer {from:?}->{:?}: {} bytes in {:.2?}, sha256 {}",
            from.other(),
            r.bytes,
            r.elapsed,
            hex(&r.sha256)
        );
    }
    let (seen, stats) = cap.stop().expect("capture");
    eprintln!(
        "captured on vb0: {stats:?}; received {}, sent {}; per type {:?}",
        seen.received, seen.sent, seen.by_type
    );
    // Each direction carried ~15 000 data datagrams over two paths; a
    // capture that saw few of them proves nothing.
    assert!(
        seen.received >= 2000 && seen.sent >= 2000 && seen.by_type[1] >= 4000,
        "capture saw too little to judge: {seen:?}, {stats:?}"
    );
    assert!(
        seen.marker == 0 && seen.unsealed == 0,
        "{} datagrams hold the plaintext marker, {} data/probe/reply messages are not sealed; e.g.:\n{}",
        seen.marker,
        seen.unsealed,
        seen.examples.join("\n")
    );
    check_sessions(&bed).expect("sessions after the transfers");
    bed.shutdown().expect("clean shutdown");
}

/// The number after `key=` in a log line holding `marker`, if any.
fn logged_number(log: &str, marker: &str, key: &str) -> Option<u64> {
    let line = log.lines().rev().find(|l| l.contains(marker))?;
    let at = line.find(&format!("{key}="))? + key.len() + 1;
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The crypto stage (crates/mptd/src/crypto_pool.rs) opens and seals
/// large batches on helper threads: with `threads = 4` (three helpers,
/// whatever the machine's cores) a bulk transfer's batches are split, and
/// what arrives is still intact and in order (the sha256 of the TCP
/// stream), both ways. Each daemon's log says how much the helpers did.
#[test]
fn encrypted_transfer_across_the_crypto_stage_is_intact() {
    const BYTES: u64 = 32 << 20;
    let _serial = serial();
    let mut spec = BedSpec::keyed(2);
    spec.threads = Some(4);
    let mut bed = TestBed::new(spec).expect("test bed");
    check_sessions(&bed).expect("sessions after start");
    let before =
        [Side::A, Side::B].map(|side| bed.snap(side).expect("status").raw["drops"].clone());
    for from in [Side::A, Side::B] {
        let t = bed
            .start_transfer(from, Family::V4, BYTES, None)
            .expect("start transfer");
        let what = format!("transfer {from:?}->{:?}", from.other());
        let r = finish(&mut bed, t, BYTES, &what);
        eprintln!("{what}: {} bytes in {:.2?}", r.bytes, r.elapsed);
    }
    // Nothing of our own traffic failed to open or looked replayed once the
    // session was up (a chunk opened with the wrong item's bytes would).
    for side in [Side::A, Side::B] {
        let drops = bed.snap(side).expect("status").raw["drops"].clone();
        eprintln!("{side:?} drops: {drops}");
        for key in ["auth", "replay"] {
            assert_eq!(
                drops[key].as_u64(),
                before[side.index()][key].as_u64(),
                "{side:?} drops.{key} grew during the transfers: {drops}"
            );
        }
    }
    check_sessions(&bed).expect("sessions after the transfers");
    for side in [Side::A, Side::B] {
        bed.stop_daemon(side).expect("clean stop");
        let log = std::fs::read_to_string(bed.dir().join(format!("{}.log", side.letter())))
            .expect("daemon log");
        let split = logged_number(&log, "crypto stage stopped", "split_batches");
        let helped = logged_number(&log, "crypto stage stopped", "helper_chunks");
        eprintln!("{side:?}: batches split {split:?}, chunks run by helpers {helped:?}");
        assert!(
            split.is_some_and(|n| n > 0) && helped.is_some_and(|n| n > 0),
            "{side:?}: the crypto stage did not take part (split {split:?}, by helpers {helped:?})"
        );
    }
    bed.shutdown().expect("clean shutdown");
}

// ---------------------------------------------------------------------------
// 2. Another key

#[test]
fn wrong_key_gets_nothing_through() {
    let _serial = serial();
    let spec = BedSpec::uniform(2, Family::V4)
        .inner(&[Family::V4])
        .key(Side::A, random_key().expect("key"))
        .key(Side::B, random_key().expect("key"));
    let mut bed = TestBed::start(spec).expect("test bed");
    let auth0 = bed
        .snap(Side::B)
        .and_then(|s| s.drop_reason("auth"))
        .expect("B's drops.auth");
    let tun_rx0 = bed.b.link_stats(TUN).expect("B's tun counters").rx_packets;

    // A listener in B, so that anything getting through would connect.
    let server = SocketAddr::new(inner_addr(Family::V4, Side::B), 5999);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_l = stop.clone();
    let listener = bed
        .b
        .spawn("listener in B", move || {
            let l = wait_until("bind", Duration::from_secs(5), POLL, || {
                Ok(Some(TcpListener::bind(server)?))
            })?;
            l.set_nonblocking(true)?;
            let mut accepted = 0u32;
            while !stop_l.load(Ordering::Relaxed) {
                if l.accept().is_ok() {
                    accepted += 1;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(accepted)
        })
        .expect("listener");
    let t0 = Instant::now();
    let connect = bed
        .a
        .run_in("connect from A", Duration::from_secs(6), move || {
            Ok(TcpStream::connect_timeout(&server, Duration::from_secs(3)).map(drop))
        })
        .expect("connect attempt");
    stop.store(true, Ordering::Relaxed);
    let accepted = listener.wait(Duration::from_secs(3)).expect("listener");
    assert!(
        connect.is_err() && accepted == 0,
        "TCP through a tunnel with mismatched keys: connect {connect:?} after {:?}, {accepted} accepted",
        t0.elapsed()
    );
    eprintln!("connect failed as it should: {connect:?}");

    // The handshakes (or anything sealed) from A fail authentication at B.
    let grown = wait_until(
        "B's drops.auth to grow",
        Duration::from_secs(5),
        POLL,
        || {
            bed.check_alive()?;
            let a = bed.snap(Side::B)?.drop_reason("auth")?;
            Ok((a > auth0).then_some(a - auth0))
        },
    )
    .expect("auth failures counted");
    eprintln!("B's drops.auth grew by {grown}");
    let tun_rx = bed.b.link_stats(TUN).expect("B's tun counters").rx_packets;
    assert_eq!(
        tun_rx,
        tun_rx0,
        "B wrote {} packets to its tun without a session",
        tun_rx - tun_rx0
    );
    for side in [Side::A, Side::B] {
        let s = bed.snap(side).and_then(|s| s.session()).expect("session");
        assert!(
            !s.established,
            "{side:?} reports a session with the wrong key: {s:?}"
        );
    }
    bed.shutdown().expect("clean shutdown");
}

// ---------------------------------------------------------------------------
// 3. Replays

#[test]
fn replayed_datagrams_are_dropped_and_counted() {
    const REPLAYS: usize = 200;
    let _serial = serial();
    let mut bed = TestBed::new(BedSpec::keyed(2)).expect("test bed");

    // Record data messages arriving at B on p0 while a transfer runs.
    let cap = Capture::start(
        &bed.b,
        &veth(Side::B, 0),
        DATA_PORT,
        Vec::<Vec<u8>>::new(),
        |kept, d| {
            let p = d.payload;
            if !d.outgoing && kept.len() < REPLAYS && p.len() > HEADER_LEN + TAG_LEN && p[0] == DATA
            {
                kept.push(p.to_vec());
            }
        },
    )
    .expect("capture on B's veth of p0");
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("transfer to record");
    let (recorded, stats) = cap.stop().expect("capture");
    assert_eq!(
        recorded.len(),
        REPLAYS,
        "recorded too few data messages: {stats:?}"
    );
    let sealed = recorded.iter().filter(|p| p[1] & SEALED != 0).count();
    assert_eq!(sealed, REPLAYS, "recorded data messages not sealed");

    // Quiet tunnel: the transfer's last ACKs are through.
    std::thread::sleep(Duration::from_millis(300));
    let s0 = bed.snap(Side::B).expect("status");
    let (replay0, auth0) = (
        s0.drop_reason("replay").expect("drops.replay"),
        s0.drop_reason("auth").expect("drops.auth"),
    );
    let tun0 = bed.b.link_stats(TUN).expect("tun counters").rx_packets;
    let lost0 = bed.b.udp_in_errors().expect("udp counters");

    // Same source address as A's path (another port), to B's path port.
    let sent = send_datagrams(
        &bed.a,
        outer_addr(0, Family::V4, Side::A),
        path_sockaddr(0, Side::B),
        recorded,
    )
    .expect("replay") as u64;
    let mut last = (0, 0);
    let counted = wait_until(
        "the replays to be counted",
        Duration::from_secs(3),
        POLL,
        || {
            bed.check_alive()?;
            let lost = bed.b.udp_in_errors()? - lost0;
            let s = bed.snap(Side::B)?;
            let replay = s.drop_reason("replay")? - replay0;
            last = (replay, lost);
            // All but what the kernel dropped, less 2 % for slack.
            Ok((replay * 100 >= (sent - lost) * 98).then_some(replay))
        },
    );
    let s1 = bed.snap(Side::B).expect("status");
    let counted = counted.unwrap_or_else(|e| {
        panic!(
            "{sent} replayed, drops.replay grew by {} (kernel dropped {}); drops now {}, reorder {}, p0 rx_packets {} -> {}: {e:#}",
            last.0,
            last.1,
            s1.raw["drops"],
            s1.raw["reorder"],
            s0.paths[0].rx_packets,
            s1.paths[0].rx_packets,
        )
    });
    std::thread::sleep(Duration::from_millis(200));
    let tun = bed.b.link_stats(TUN).expect("tun counters").rx_packets;
    let s2 = bed.snap(Side::B).expect("status");
    let replay = s2.drop_reason("replay").expect("drops.replay") - replay0;
    let auth = s2.drop_reason("auth").expect("drops.auth") - auth0;
    eprintln!(
        "{sent} replayed: drops.replay +{replay} (+{counted} when first complete), drops.auth +{auth}, tun rx +{}",
        tun - tun0
    );
    assert!(
        replay <= sent,
        "more replays counted ({replay}) than sent ({sent})"
    );
    // Nothing else runs through the tunnel now: the tun gets no packet.
    assert!(
        tun - tun0 <= 5,
        "B's tun received {} packets while only replays arrived",
        tun - tun0
    );
    // And the tunnel still works.
    bed.transfer(Side::A, Family::V4, 1 << 20)
        .expect("transfer after the replays");
    bed.shutdown().expect("clean shutdown");
}

// ---------------------------------------------------------------------------
// 4. Restart

#[test]
fn restarted_client_re_establishes() {
    let _serial = serial();
    let mut bed = TestBed::new(BedSpec::keyed(2)).expect("test bed");
    bed.transfer(Side::A, Family::V4, 1 << 20)
        .expect("transfer before the restart");
    let hs0 = check_sessions(&bed).expect("sessions before the restart");

    bed.stop_daemon(Side::A).expect("stop A");
    let t0 = Instant::now();
    bed.restart_daemon(Side::A, None).expect("start A again");
    let budget = Duration::from_secs(5);
    let through = bed
        .wait_tunnel(Side::A, Family::V4, budget.saturating_sub(t0.elapsed()))
        .map(|_| t0.elapsed())
        .expect("tunnel working again within 5 s of the restart");
    eprintln!("tunnel through again {through:?} after A restarted");
    for from in [Side::A, Side::B] {
        bed.transfer(from, Family::V4, 2 << 20)
            .unwrap_or_else(|e| panic!("transfer {from:?} after the restart: {e:#}"));
    }
    let hs = check_sessions(&bed).expect("sessions after the restart");
    eprintln!("B's handshakes: {hs0} before A's restart, {hs} after");
    assert!(
        hs >= 2 && hs > hs0,
        "B reports {hs} handshakes after A's restart (had {hs0})"
    );
    bed.shutdown().expect("clean shutdown");
}

// ---------------------------------------------------------------------------
// 5. Roaming

/// A's new source address on p0.
const ROAMED: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3));

/// Makes A's datagrams on p0 leave from [`ROAMED`] instead of 10.77.0.1,
/// statelessly (a NAT rule would not touch the flow's existing conntrack
/// entry): rewrite the source on output, the destination of the answers on
/// input, and drop anything still sent to the old address, so B has to
/// follow.
fn roam_with_nft(bed: &TestBed) -> Result<()> {
    let old = outer_addr(0, Family::V4, Side::A);
    let rules = format!(
        "table ip mpte2e_roam {{
    chain out {{
        type filter hook output priority raw; policy accept;
        ip saddr {old} udp sport {DATA_PORT} ip saddr set {ROAMED}
    }}
    chain pre {{
        type filter hook prerouting priority raw; policy accept;
        ip daddr {old} udp dport {DATA_PORT} drop
        ip daddr {ROAMED} udp dport {DATA_PORT} ip daddr set {old}
    }}
}}
"
    );
    let file = bed.dir().join("roam.nft");
    std::fs::write(&file, rules)?;
    bed.a.exec(&["nft", "-f", &file.display().to_string()])?;
    Ok(())
}

/// An attacker on p1's link sends, from an address of its own, forged
/// sealed data messages and replays of A's real ones to B (whose remotes
/// are learnt): B must count them (auth, replay) and keep A's address.
fn spoofing_does_not_move_a_path(bed: &mut TestBed) {
    const EACH: usize = 50;
    let spoofer = IpAddr::V4(Ipv4Addr::new(10, 77, 1, 9));
    let cap = Capture::start(
        &bed.b,
        &veth(Side::B, 1),
        DATA_PORT,
        Vec::<Vec<u8>>::new(),
        |kept, d| {
            let p = d.payload;
            if !d.outgoing && kept.len() < EACH && p.len() > HEADER_LEN + TAG_LEN && p[0] == DATA {
                kept.push(p.to_vec());
            }
        },
    )
    .expect("capture on B's veth of p1");
    bed.transfer(Side::A, Family::V4, 1 << 20)
        .expect("transfer to record");
    let (mut datagrams, _) = cap.stop().expect("capture");
    assert_eq!(
        datagrams.len(),
        EACH,
        "recorded too few data messages on p1"
    );
    let mut rng = Prng::new(0xbad);
    for _ in 0..EACH {
        let mut d = vec![0u8; 200];
        rng.fill(&mut d);
        d[0] = DATA;
        d[1] = SEALED;
        d[2..4].copy_from_slice(&1u16.to_be_bytes());
        d[4..8].copy_from_slice(&CONN_ID.to_be_bytes());
        datagrams.push(d);
    }
    bed.a
        .ip(&[
            "addr",
            "add",
            &format!("{spoofer}/24"),
            "dev",
            &veth(Side::A, 1),
        ])
        .expect("spoofer's address on va1");
    let s0 = bed.snap(Side::B).expect("status");
    let rejected =
        |s: &ConnSnap| -> Result<u64> { Ok(s.drop_reason("auth")? + s.drop_reason("replay")?) };
    let before = rejected(&s0).expect("drops");
    let sent = send_datagrams(&bed.a, spoofer, path_sockaddr(1, Side::B), datagrams)
        .expect("spoofed datagrams") as u64;
    let got = wait_until(
        "the spoofed datagrams to be rejected",
        Duration::from_secs(3),
        POLL,
        || {
            let n = rejected(&bed.snap(Side::B)?)? - before;
            Ok((n * 100 >= sent * 95).then_some(n))
        },
    )
    .unwrap_or_else(|e| {
        let s = bed.snap(Side::B).map(|s| s.raw["drops"].clone());
        panic!("{sent} spoofed datagrams; B's drops now {s:?}: {e:#}")
    });
    let remote = remote_of(bed, Side::B, 1).expect("status");
    eprintln!("{sent} spoofed datagrams from {spoofer}: {got} rejected; B's p1 remote {remote:?}");
    assert_eq!(
        remote,
        Some(outer_addr(1, Family::V4, Side::A)),
        "B moved p1 to an address that sent only forged and replayed datagrams"
    );
    bed.a
        .ip(&[
            "addr",
            "del",
            &format!("{spoofer}/24"),
            "dev",
            &veth(Side::A, 1),
        ])
        .expect("remove the spoofer's address");
}

fn have_nft() -> bool {
    Command::new("nft")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn roaming_client_keeps_working() {
    const BYTES: u64 = 12 << 20;
    let _serial = serial();
    let spec = BedSpec::keyed(2).learn_remote(Side::B);
    let mut bed = TestBed::new(spec.clone()).expect("test bed");
    let old = outer_addr(0, Family::V4, Side::A);
    assert_eq!(
        remote_of(&bed, Side::B, 0).expect("status"),
        Some(old),
        "B did not learn A's address on p0"
    );
    spoofing_does_not_move_a_path(&mut bed);

    // A's veth answers ARP for the new address.
    bed.a
        .ip(&[
            "addr",
            "add",
            &format!("{ROAMED}/24"),
            "dev",
            &veth(Side::A, 0),
        ])
        .expect("second address on va0");

    if have_nft() {
        // 12 MB at 4 MB/s: the address changes a second into the transfer.
        let t = bed
            .start_transfer(Side::A, Family::V4, BYTES, Some(4 << 20))
            .expect("start transfer");
        wait_until(
            "a quarter of the transfer",
            Duration::from_secs(20),
            POLL,
            || Ok((t.progress.load(Ordering::Relaxed) >= BYTES / 4).then_some(())),
        )
        .expect("transfer under way");
        roam_with_nft(&bed).expect("nft rules in A");
        finish(&mut bed, t, BYTES, "transfer across the address change");
    } else {
        // No nft: A's daemon comes back on the new address, and the old
        // one is gone, so B has to follow.
        eprintln!("nft not found: roaming by restarting A with local = {ROAMED}");
        bed.stop_daemon(Side::A).expect("stop A");
        let cfg = spec.config(Side::A, &bed.daemon(Side::A).control).replacen(
            &format!("local = \"{old}\""),
            &format!("local = \"{ROAMED}\""),
            1,
        );
        bed.restart_daemon(Side::A, Some(&cfg)).expect("restart A");
        // Deleting a primary address deletes its secondaries unless they
        // are promoted.
        let promote = format!("net.ipv4.conf.{}.promote_secondaries=1", veth(Side::A, 0));
        bed.a
            .exec(&["sysctl", "-qw", &promote])
            .expect("promote_secondaries");
        bed.a
            .ip(&[
                "addr",
                "del",
                &format!("{old}/24"),
                "dev",
                &veth(Side::A, 0),
            ])
            .expect("remove the old address");
    }

    let mut seen = vec![Some(old)];
    wait_until(
        "B to learn A's new address on p0",
        Duration::from_secs(3),
        POLL,
        || {
            bed.check_alive()?;
            let r = remote_of(&bed, Side::B, 0)?;
            if seen.last() != Some(&r) {
                seen.push(r);
            }
            Ok((r == Some(ROAMED)).then_some(()))
        },
    )
    .unwrap_or_else(|e| panic!("B's remote for p0 went {seen:?}: {e:#}"));
    eprintln!("B's remote for p0 went {seen:?}");
    bed.wait_all_up(Duration::from_secs(3))
        .expect("all paths up after roaming");

    // B's traffic on p0 must reach A at the new address (the old is dropped).
    let a_rx0 = bed
        .snap(Side::A)
        .expect("status")
        .path("p0")
        .expect("p0")
        .rx_data();
    bed.transfer(Side::B, Family::V4, 4 << 20)
        .expect("transfer B->A after roaming");
    bed.transfer(Side::A, Family::V4, 2 << 20)
        .expect("transfer A->B after roaming");
    let a_rx = bed
        .snap(Side::A)
        .expect("status")
        .path("p0")
        .expect("p0")
        .rx_data();
    assert!(
        a_rx > a_rx0 + 100,
        "A received only {} data packets on p0 during the B->A transfer",
        a_rx - a_rx0
    );
    assert_eq!(remote_of(&bed, Side::B, 0).expect("status"), Some(ROAMED));
    check_sessions(&bed).expect("sessions after roaming");
    bed.shutdown().expect("clean shutdown");
}

// ---------------------------------------------------------------------------
// 6. Flood

#[test]
fn flood_leaves_tunnel_working_and_memory_flat() {
    const BYTES: u64 = 16 << 20;
    const FLOOD: u64 = 250_000;
    /// Every fifth flood datagram looks like a sealed data message of the
    /// connection (50 000), the rest are random bytes (200 000).
    const FORGED_EVERY: u64 = 5;
    const RSS_SLACK_KIB: u64 = 4096;
    let _serial = serial();
    let mut bed = TestBed::new(BedSpec::keyed(2)).expect("test bed");
    // Warm up, so buffers a transfer needs are in the first reading.
    bed.transfer(Side::A, Family::V4, 8 << 20).expect("warm-up");
    bed.transfer(Side::B, Family::V4, 2 << 20).expect("warm-up");
    let rss0 = bed.daemon(Side::B).vm_rss_kib().expect("B's VmRSS");
    let s0 = bed.snap(Side::B).expect("status");
    let (drops0, auth0) = (s0.drops, s0.drop_reason("auth").expect("drops.auth"));
    let lost0 = bed.b.udp_in_errors().expect("udp counters");

    // 16 MB at 4 MB/s: ~4 s, about as long as the flood.
    let t = bed
        .start_transfer(Side::A, Family::V4, BYTES, Some(4 << 20))
        .expect("start transfer");
    let mut rng = Prng::new(0x5eed);
    let started = Instant::now();
    let sent = send_flood(
        &bed.a,
        outer_addr(0, Family::V4, Side::A),
        path_sockaddr(0, Side::B),
        FLOOD,
        64,
        Duration::from_secs(40),
        move |i, buf| {
            let r = rng.next_u64();
            if i % FORGED_EVERY == FORGED_EVERY - 1 {
                buf.resize(HEADER_LEN + TAG_LEN + (r % 1300) as usize, 0);
                rng.fill(buf);
                buf[0] = DATA;
                buf[1] = SEALED;
                buf[2..4].copy_from_slice(&0u16.to_be_bytes());
                buf[4..8].copy_from_slice(&CONN_ID.to_be_bytes());
            } else {
                buf.resize(1 + (r % 1400) as usize, 0);
                rng.fill(buf);
            }
        },
    )
    .expect("flood");
    let flood_time = started.elapsed();
    let r = finish(&mut bed, t, BYTES, "transfer during the flood");
    bed.check_alive().expect("daemons alive after the flood");
    std::thread::sleep(Duration::from_millis(500));
    let rss = bed.daemon(Side::B).vm_rss_kib().expect("B's VmRSS");
    let lost = bed.b.udp_in_errors().expect("udp counters") - lost0;
    let s = bed.snap(Side::B).expect("status");
    let drops = s.drops - drops0;
    let auth = s.drop_reason("auth").expect("drops.auth") - auth0;
    eprintln!(
        "flood of {sent} in {flood_time:.2?}: kernel dropped {lost}, drops +{drops} (auth +{auth}), {}; VmRSS {rss0} -> {rss} KiB; transfer {:.2?}",
        s.raw["drops"], r.elapsed
    );
    assert!(
        lost * 2 < sent,
        "the kernel dropped {lost} of {sent}: the flood tested nothing"
    );
    assert!(
        rss <= rss0 + RSS_SLACK_KIB,
        "B's VmRSS grew from {rss0} to {rss} KiB under the flood"
    );
    // Every datagram that reached the socket is dropped and counted (a few
    // % slack for the counting's own pace); the forged ones fail auth.
    assert!(
        drops * 100 >= (sent - lost) * 95,
        "drops grew by {drops} for {} flood datagrams delivered: {}",
        sent - lost,
        s.raw["drops"]
    );
    let forged = sent / FORGED_EVERY;
    assert!(
        auth * 2 >= forged.saturating_sub(lost),
        "drops.auth grew by {auth} for {forged} forged sealed datagrams"
    );
    for side in [Side::A, Side::B] {
        for p in &bed.snap(side).expect("status").paths {
            assert_eq!(
                p.state, "up",
                "{side:?}/{} after the flood: {}",
                p.name, p.raw
            );
        }
    }
    bed.transfer(Side::B, Family::V4, 2 << 20)
        .expect("transfer after the flood");
    bed.shutdown().expect("clean shutdown");
}

// ---------------------------------------------------------------------------
// 7. Key file permissions

#[test]
fn loose_key_file_is_refused() {
    let _serial = serial();
    let dir = TempDir::new("key").expect("temp dir");
    let ns = Netns::new("key").expect("netns");
    // The path's local address, so that only the key can stop the daemon.
    let local = outer_addr(0, Family::V4, Side::A);
    ns.ip(&["addr", "add", &format!("{local}/24"), "dev", "lo"])
        .expect("path address on lo");
    let control = dir.path().join("a.sock");
    let key = random_key().expect("key");
    let cfg = dir.path().join("a.toml");
    let key_file = BedSpec::key_path(Side::A, &control);
    std::fs::write(
        &cfg,
        BedSpec::uniform(1, Family::V4)
            .key(Side::A, key)
            .config(Side::A, &control),
    )
    .expect("write config");
    // Readable by others, readable by the group.
    for mode in [0o644, 0o640] {
        write_key_file(&key_file, &key, mode).expect("write key file");
        let t0 = Instant::now();
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns.name()])
            .arg(mptd_bin().expect("mptd binary"))
            .arg("--config")
            .arg(&cfg)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mptd");
        let status = wait_until("mptd to exit", Duration::from_secs(5), POLL, || {
            Ok(child.try_wait()?)
        });
        let status = match status {
            Ok(s) => s,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("mptd kept running with a mode {mode:o} key file: {e:#}");
            }
        };
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read as _;
            e.read_to_string(&mut err).expect("read stderr");
        }
        let err = strip_ansi(&err);
        eprintln!(
            "mode {mode:o}: {status} after {:?}: {}",
            t0.elapsed(),
            err.trim()
        );
        assert!(
            !status.success() && status.code().is_some(),
            "mode {mode:o}: mptd exit status {status}, stderr:\n{err}"
        );
        let name = key_file.display().to_string();
        assert!(
            err.contains(&name) && err.contains("chmod 600"),
            "mode {mode:o}: stderr does not name {name} and \"chmod 600\":\n{err}"
        );
        assert!(!ns.link_exists(TUN), "mode {mode:o}: {TUN} left behind");
        assert!(
            !control.exists(),
            "mode {mode:o}: control socket left behind"
        );
    }
    // The same files with the key at mode 0600: the daemon runs.
    write_key_file(&key_file, &key, 0o600).expect("write key file");
    let mut d =
        Daemon::start(&ns, "a", &cfg, &control, &dir.path().join("a.log")).expect("start mptd");
    d.wait_ready(&ns, TUN, Duration::from_secs(10))
        .expect("mptd runs with a mode 600 key file");
    d.stop_clean(&ns, TUN).expect("clean shutdown");
}
