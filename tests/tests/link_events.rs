//! Link and address events (netlink) under traffic, with real daemons:
//!
//! - a path's link goes down while pings run through the tunnel: the path
//!   is `down` in the status well before any timer would say so, the pings
//!   go on over the other path losing at most a couple, and when the link
//!   comes back the path is `up` and carrying pings again at once;
//! - an interface-only path (`interface`, no `local`) whose interface gets
//!   a new address moves to it: it carries traffic from the new address,
//!   and the peer shows the new remote address (learnt from the
//!   authenticated datagrams, as for a roaming client).
//!
//! The tests run one at a time (timings on a 2-core machine).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mpt_e2e::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keepalive and dead timer far longer than anything asserted here, so
/// only a link event can explain a fast transition.
const KEEPALIVE: Duration = Duration::from_secs(2);
const DEAD_TIMER: Duration = Duration::from_secs(5);

/// Ping interval: 50 packets/s, like a VoIP flow.
const PING_INTERVAL: &str = "0.02";

fn spec(n: usize) -> BedSpec {
    let mut s = BedSpec::keyed(n);
    s.keepalive = KEEPALIVE;
    s.dead_timer = DEAD_TIMER;
    s
}

/// Path `name`'s data packets sent by `side` and received by the other.
fn data_counts(bed: &TestBed, side: Side, name: &str) -> (u64, u64) {
    let tx = bed
        .snap(side)
        .expect("status")
        .path(name)
        .expect("path")
        .tx_data();
    let rx = bed
        .snap(side.other())
        .expect("status")
        .path(name)
        .expect("path")
        .rx_data();
    (tx, rx)
}

#[test]
fn link_down_takes_the_path_down_at_once_and_back_up_fast() {
    const VICTIM: usize = 1;
    let _serial = serial();
    let mut bed = TestBed::new(spec(2)).expect("test bed");
    let victim = path_name(VICTIM);
    // 6 s of pings: ~1.5 s before, 2 s down, the rest after.
    let ping = start_ping(&bed, Side::A, PING_INTERVAL, 300);
    std::thread::sleep(Duration::from_millis(1500));
    let (before, _) = data_counts(&bed, Side::A, &victim);
    assert!(before > 0, "{victim} carried no data before the failure");

    // Timed from before the `ip` command (which takes a few ms itself).
    let down_at = Instant::now();
    bed.set_path_link(VICTIM, false).expect("link down");
    let mut took = [Duration::ZERO; 2];
    for side in [Side::A, Side::B] {
        took[side.index()] = bed
            .wait_path_state(side, VICTIM, "down", down_at, Duration::from_secs(2))
            .expect("path down after its link");
    }
    eprintln!(
        "{victim} down after: A {:?}, B {:?} (keepalive {KEEPALIVE:?}, dead timer {DEAD_TIMER:?})",
        took[0], took[1]
    );
    for t in took {
        assert!(t < Duration::from_secs(1), "down after {t:?}");
    }
    let p0 = path_name(0);
    assert_eq!(
        bed.snap(Side::A)
            .expect("status")
            .path(&p0)
            .expect("p0")
            .state,
        "up"
    );
    // While down it carries nothing.
    let (at_down, _) = data_counts(&bed, Side::A, &victim);
    std::thread::sleep(Duration::from_millis(1500));
    let (later, _) = data_counts(&bed, Side::A, &victim);
    assert!(
        later <= at_down + 2,
        "{victim} sent {} data packets with its link down",
        later - at_down
    );

    let up_at = Instant::now();
    bed.set_path_link(VICTIM, true).expect("link up");
    for side in [Side::A, Side::B] {
        took[side.index()] = bed
            .wait_path_state(side, VICTIM, "up", up_at, Duration::from_secs(3))
            .expect("path up after its link");
    }
    eprintln!("{victim} up again after: A {:?}, B {:?}", took[0], took[1]);
    for t in took {
        assert!(t < Duration::from_secs(3), "up after {t:?}");
    }
    let (back_tx, back_rx) = data_counts(&bed, Side::A, &victim);
    let (tx, rx, text) = ping_result(ping);
    let (end_tx, end_rx) = data_counts(&bed, Side::A, &victim);
    eprintln!(
        "pings: {tx} sent, {rx} answered; {victim} carried {} after coming back",
        end_tx - back_tx
    );
    assert!(
        end_tx > back_tx + 10 && end_rx > back_rx + 10,
        "{victim} carried no pings after it came back ({back_tx} -> {end_tx} sent, {back_rx} -> {end_rx} received)"
    );
    assert!(
        tx - rx <= 3,
        "{} pings lost across the link change:\n{text}",
        tx - rx
    );
    // The events were counted, and none was malformed.
    let st = bed.daemon(Side::A).status().expect("status");
    let nl = &st["netlink"];
    assert!(
        nl["events"].as_u64().unwrap_or(0) >= 2,
        "netlink counters: {nl}"
    );
    assert_eq!(nl["malformed"].as_u64(), Some(0), "netlink counters: {nl}");
    bed.shutdown().expect("clean shutdown");
}

#[test]
fn interface_only_path_follows_a_new_address() {
    let _serial = serial();
    let spec = spec(2).learn_remote(Side::B);
    // A's p0 names only its interface; the bed starts with the configured
    // address, then A's path must find it by itself.
    let mut bed = TestBed::start(spec.clone()).expect("test bed");
    let old = outer_addr(0, Family::V4, Side::A);
    let dev = veth(Side::A, 0);
    bed.stop_daemon(Side::A).expect("stop A");
    let cfg = spec.config(Side::A, &bed.daemon(Side::A).control).replacen(
        &format!("local = \"{old}\"\n"),
        &format!("interface = \"{dev}\"\n"),
        1,
    );
    assert!(cfg.contains(&format!("interface = \"{dev}\"")), "{cfg}");
    bed.restart_daemon(Side::A, Some(&cfg))
        .expect("A with an interface-only path");
    bed.wait_all_up(Duration::from_secs(5))
        .expect("all paths up");
    let status = bed.snap(Side::A).expect("status");
    let p0 = status.path("p0").expect("p0");
    assert_eq!(
        p0.raw["local"].as_str(),
        Some(SocketAddr::new(old, DATA_PORT).to_string().as_str()),
        "A's p0 took its interface's address: {}",
        p0.raw
    );

    // The new address, in the same subnet, so B reaches it without a
    // route of its own.
    let new = match old {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 111))
        }
        IpAddr::V6(_) => unreachable!("IPv4 bed"),
    };
    let ping = start_ping(&bed, Side::A, PING_INTERVAL, 200);
    std::thread::sleep(Duration::from_millis(1000));
    let moved_at = Instant::now();
    bed.a
        .ip(&["addr", "del", &format!("{old}/24"), "dev", &dev])
        .expect("remove the old address");
    bed.a
        .ip(&["addr", "add", &format!("{new}/24"), "dev", &dev])
        .expect("add the new address");
    let want_local = SocketAddr::new(new, DATA_PORT).to_string();
    let mut seen = Vec::new();
    let took = wait_until(
        "A's p0 on the new address and B's p0 towards it, up on both sides",
        Duration::from_secs(3),
        POLL,
        || {
            bed.check_alive()?;
            let a = bed.snap(Side::A)?;
            let b = bed.snap(Side::B)?;
            let (pa, pb) = (a.path("p0")?, b.path("p0")?);
            let now = format!(
                "A {} {} / B {} {}",
                pa.state, pa.raw["local"], pb.state, pb.raw["remote"]
            );
            if seen.last() != Some(&now) {
                seen.push(now);
            }
            let done = pa.raw["local"].as_str() == Some(&want_local)
                && pb.raw["remote"].as_str() == Some(&want_local)
                && pa.state == "up"
                && pb.state == "up";
            Ok(done.then(|| moved_at.elapsed()))
        },
    )
    .unwrap_or_else(|e| panic!("{e:#}; seen {seen:#?}"));
    eprintln!("p0 moved to {new} and up after {took:?}; seen {seen:#?}");
    let (tx0, rx0) = data_counts(&bed, Side::A, "p0");
    let (btx0, arx0) = data_counts(&bed, Side::B, "p0");
    let (tx, rx, text) = ping_result(ping);
    let (tx1, rx1) = data_counts(&bed, Side::A, "p0");
    let (btx1, arx1) = data_counts(&bed, Side::B, "p0");
    eprintln!(
        "pings: {tx} sent, {rx} answered; after the move p0 carried A->B {} / {}, B->A {} / {}",
        tx1 - tx0,
        rx1 - rx0,
        btx1 - btx0,
        arx1 - arx0
    );
    assert!(
        rx1 > rx0 + 10 && arx1 > arx0 + 10,
        "p0 carried too little from the new address: A->B {rx0} -> {rx1}, B->A {arx0} -> {arx1}"
    );
    assert!(
        tx - rx <= 5,
        "{} pings lost across the address change:\n{text}",
        tx - rx
    );
    // Nothing still goes to the old address: B's p0 remote stays the new one.
    let b = bed.snap(Side::B).expect("status");
    assert_eq!(
        b.path("p0").expect("p0").raw["remote"].as_str(),
        Some(want_local.as_str())
    );
    bed.shutdown().expect("clean shutdown");
}
