//! Loss repair with real daemons: one of two paths drops 3 % of A's
//! datagrams at random (an nftables rule in B's namespace, before any
//! queue, so every hole is a random loss). B asks A again for what was
//! lost, A answers from its copies, and the TCP transfer through the
//! tunnel hardly ever notices: its sender retransmits far fewer segments
//! than the path lost, and the bytes arrive intact.
//!
//! Alone in its test binary so that no parallel test skews the counts.

use mpt_e2e::*;
use serde_json::Value;

const LOSS_PCT: u32 = 3;

/// Drops `LOSS_PCT` % of A's datagrams arriving on path 0, at random.
fn lossy_path0(bed: &TestBed) {
    let from = outer_addr(0, Family::V4, Side::A);
    let rules = format!(
        "table ip mpte2e_loss {{
    chain pre {{
        type filter hook prerouting priority raw; policy accept;
        ip saddr {from} udp dport {DATA_PORT} numgen random mod 100 < {LOSS_PCT} drop
    }}
}}
"
    );
    // A veth hands a UDP GSO burst (up to 64 datagrams) over as one
    // packet, so the rule would drop whole bursts: an outage, not the
    // random frame loss of a radio link. One segment per packet on A's
    // side makes the rule drop single datagrams.
    bed.a
        .ip(&["link", "set", "dev", &veth(Side::A, 0), "gso_max_segs", "1"])
        .expect("gso_max_segs");
    let file = bed.dir().join("loss.nft");
    std::fs::write(&file, rules).expect("write nft rules");
    bed.b
        .exec(&["nft", "-f", &file.display().to_string()])
        .expect("nft (nftables must be installed; scripts/test.sh installs it)");
}

/// TCP segments retransmitted so far in `ns` (`/proc/net/snmp`, per
/// namespace).
fn retransmitted(ns: &Netns) -> u64 {
    let snmp = ns.exec(&["cat", "/proc/net/snmp"]).expect("read snmp");
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (Some(names), Some(values)) = (tcp.next(), tcp.next()) else {
        panic!("no Tcp lines in /proc/net/snmp:\n{snmp}");
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RetransSegs")
        .and_then(|(_, v)| v.parse().ok())
        .expect("RetransSegs")
}

fn repair_counters(bed: &TestBed, side: Side) -> Value {
    let status = bed.daemon(side).status().expect("status");
    status["connections"][0]["repair"].clone()
}

fn counter(v: &Value, name: &str) -> u64 {
    v[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name} in {v}"))
}

#[test]
fn random_losses_are_repaired_before_tcp_sees_them() {
    const BYTES: u64 = 48 << 20;
    // 48 MB at 16 MB/s: 3 s, about 17 000 datagrams on the lossy path.
    const PACE: u64 = 16 << 20;

    let spec = BedSpec::keyed(2).inner(&[Family::V4]);
    let mut bed = TestBed::new(spec).expect("test bed");
    lossy_path0(&bed);
    let retrans_before = retransmitted(&bed.a);
    let t = bed
        .start_transfer(Side::A, Family::V4, BYTES, Some(PACE))
        .expect("start transfer");
    let r = t
        .finish(transfer_timeout(BYTES))
        .expect("transfer over a lossy path");
    assert_eq!(r.bytes, BYTES);
    let retrans = retransmitted(&bed.a) - retrans_before;
    let b = repair_counters(&bed, Side::B);
    let a = repair_counters(&bed, Side::A);
    let p0 = bed.snap(Side::A).expect("status");
    let sent_p0 = p0.path(&path_name(0)).expect("p0").tx_data();
    eprintln!(
        "TCP retransmitted {retrans} segments; p0 carried {sent_p0} data datagrams; B: {b}; A: {a}"
    );
    let expected_losses = sent_p0 * u64::from(LOSS_PCT) / 100;
    assert!(
        sent_p0 > 2_000,
        "the lossy path carried only {sent_p0} datagrams"
    );
    let asked = counter(&b, "requested_datagrams");
    assert!(
        asked >= expected_losses / 2,
        "B asked for {asked} datagrams, about {expected_losses} were lost"
    );
    assert!(counter(&a, "peer_requests") > 0 && counter(&a, "sent") > 0);
    let received = counter(&b, "received");
    assert!(
        received >= asked / 2,
        "B got {received} copies of the {asked} it asked for"
    );
    // Without repair TCP retransmits about every lost segment; with it,
    // only what the first request on the path (before A keeps copies) and
    // a lost copy leave.
    assert!(
        retrans <= expected_losses / 4,
        "TCP retransmitted {retrans} segments for about {expected_losses} lost datagrams"
    );
    bed.shutdown().expect("clean shutdown");
}
