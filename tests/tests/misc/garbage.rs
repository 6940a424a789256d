//! Datagrams that are not valid mpt packets (random bytes, too short, wrong
//! version, unknown type or flags, oversized, unknown connection) sent to a
//! path's port are dropped and counted in the connection's `drops`, the
//! daemon survives, and tunnel traffic goes on, during and after.

use std::net::SocketAddr;
use std::time::Duration;

use mpt_e2e::*;

/// Header layout (crates/mpt-proto/src/wire/mod.rs): byte 0 is
/// version << 4 | type, byte 1 flags, then path_id, conn_id, seq, path_seq,
/// timestamp; 24 bytes. Version 1, types 1..=6, flag bits 0x01 known.
const HEADER_LEN: usize = 24;

fn header(byte0: u8, flags: u8, rng: &mut Prng) -> Vec<u8> {
    let mut h = vec![0u8; HEADER_LEN + 64];
    rng.fill(&mut h);
    h[0] = byte0;
    h[1] = flags;
    h
}

/// Named batches of invalid datagrams.
fn batches(rng: &mut Prng) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let random = (0..200)
        .map(|i| {
            let mut d = vec![0u8; 1 + (i * 7) % 1400];
            rng.fill(&mut d);
            d
        })
        .collect();
    // Lengths 1..24; the empty datagram is a batch of its own below.
    let too_short = (1..HEADER_LEN)
        .map(|n| {
            let mut d = vec![0x11u8; n];
            rng.fill(&mut d[1..]);
            d
        })
        .collect();
    let bad_version = (0u8..16)
        .filter(|v| *v != 1)
        .map(|v| header(v << 4 | 1, 0, rng))
        .collect();
    let bad_type = [0u8, 7, 8, 15]
        .iter()
        .map(|t| header(0x10 | t, 0, rng))
        .collect();
    let bad_flags = [0x02u8, 0x80, 0xff]
        .iter()
        .map(|f| header(0x11, *f, rng))
        .collect();
    // Valid header of every type, random conn_id: no such connection.
    let unknown_conn = (1u8..=6).map(|t| header(0x10 | t, 0, rng)).collect();
    let oversized = (0..4)
        .map(|_| {
            let mut d = header(0x11, 0, rng);
            d.resize(20_000, 0xa5);
            d
        })
        .collect();
    vec![
        ("random bytes", random),
        ("empty datagram", vec![Vec::new()]),
        ("too short", too_short),
        ("wrong version", bad_version),
        ("unknown type", bad_type),
        ("unknown flags", bad_flags),
        ("unknown connection", unknown_conn),
        ("oversized", oversized),
    ]
}

/// Waits until `side`'s drops have grown past `drops_before` by every
/// datagram of `sent` that reached the daemon's socket: all but what the
/// kernel counted as UDP InErrors (receive buffer full) in that namespace.
fn wait_counted(
    bed: &mut TestBed,
    side: Side,
    what: &str,
    sent: u64,
    drops_before: u64,
    kernel_before: u64,
) -> Result<u64, String> {
    let r = wait_until(
        &format!("{what} counted"),
        Duration::from_secs(2),
        POLL,
        || {
            let lost = bed.ns(side).udp_in_errors()? - kernel_before;
            // The kernel dropping most of a batch would leave nothing to test.
            if lost * 2 > sent {
                return Err(
                    Fatal(anyhow::anyhow!("kernel dropped {lost} of {sent} datagrams")).into(),
                );
            }
            let d = bed.snap(side)?.drops - drops_before;
            Ok((d >= sent - lost).then_some(d))
        },
    );
    bed.check_alive().map_err(|e| format!("{e:#}"))?;
    r.map_err(|e| {
        let grown = match bed.snap(side) {
            Ok(s) => format!("{} (drops now {})", s.drops - drops_before, s.raw["drops"]),
            Err(e) => format!("? ({e:#})"),
        };
        format!("{what} to {side:?}: {sent} sent, drops grew by {grown}: {e:#}")
    })
}

#[test]
fn garbage_is_dropped_and_counted_and_traffic_continues() {
    let paths = vec![PathSpec::new(Family::V4), PathSpec::new(Family::V6)];
    // With a key, so garbage sent from any port reaches the parsers (a
    // cleartext path drops everything not from its configured remote
    // before parsing; tests/tests/hardening.rs covers that).
    let spec = BedSpec::with_paths(paths.clone())
        .inner(&[Family::V4])
        .shared_key()
        .expect("key");
    let mut bed = TestBed::new(spec).expect("test bed");
    let mut rng = Prng::new(99);

    // Each batch to each of A's paths (IPv4 and IPv6), from the peer's
    // namespace; every datagram must show up in A's drops.
    let mut failures = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let target = SocketAddr::new(outer_addr(i, p.outer, Side::A), DATA_PORT);
        for (what, batch) in batches(&mut rng) {
            let n = batch.len() as u64;
            let before = bed.snap(Side::A).expect("status").drops;
            let kernel = bed.a.udp_in_errors().expect("udp counters");
            send_datagrams(&bed.b, outer_addr(i, p.outer, Side::B), target, batch)
                .expect("send garbage");
            let what = format!("{what} via {target}");
            if let Err(e) = wait_counted(&mut bed, Side::A, &what, n, before, kernel) {
                failures.push(e);
            }
        }
    }
    // Counting failures are collected and reported at the end, so one
    // uncounted kind does not hide how the rest of the test went.

    // Keep flooding both daemons' ports with random datagrams while a
    // transfer runs; it must arrive intact.
    let t = bed
        .start_transfer(Side::A, Family::V4, 16 << 20, Some(16 << 20))
        .expect("start transfer");
    let mut before = [(0, 0); 2];
    for (k, side) in [Side::A, Side::B].into_iter().enumerate() {
        before[k] = (
            bed.snap(side).expect("status").drops,
            bed.ns(side).udp_in_errors().expect("udp counters"),
        );
    }
    let mut sent = [0u64; 2];
    for round in 0..20 {
        for (k, to) in [Side::A, Side::B].into_iter().enumerate() {
            let i = round % paths.len();
            let target = SocketAddr::new(outer_addr(i, paths[i].outer, to), DATA_PORT);
            let batch: Vec<Vec<u8>> = (0..50)
                .map(|j| {
                    let mut d = vec![0u8; 1 + (j * 29) % 1300];
                    rng.fill(&mut d);
                    d
                })
                .collect();
            sent[k] += batch.len() as u64;
            send_datagrams(
                bed.ns(to.other()),
                outer_addr(i, paths[i].outer, to.other()),
                target,
                batch,
            )
            .expect("flood");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = t
        .finish(transfer_timeout(16 << 20))
        .expect("transfer during the flood");
    assert_eq!(r.bytes, 16 << 20);
    for (k, side) in [Side::A, Side::B].into_iter().enumerate() {
        let (drops, kernel) = before[k];
        if let Err(e) = wait_counted(&mut bed, side, "flood", sent[k], drops, kernel) {
            failures.push(e);
        }
    }

    // Paths stayed up and traffic continues afterwards, both ways.
    for side in [Side::A, Side::B] {
        for p in &bed.snap(side).expect("status").paths {
            assert_eq!(
                p.state, "up",
                "{side:?}/{} after garbage: {}",
                p.name, p.raw
            );
        }
    }
    bed.transfer(Side::A, Family::V4, 4 << 20)
        .expect("transfer after garbage");
    bed.transfer(Side::B, Family::V4, 4 << 20)
        .expect("transfer after garbage, reverse");
    let shutdown = bed.shutdown();
    assert!(
        failures.is_empty(),
        "garbage not counted as drops (everything else passed):\n{}",
        failures.join("\n")
    );
    shutdown.expect("clean shutdown");
}
