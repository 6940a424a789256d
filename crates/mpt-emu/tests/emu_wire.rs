//! The real wire in throw-away namespaces: frames cross it intact, the
//! configured impairments are applied, loss repeats from the seed end to
//! end, relay custody loses nothing, and the namespaces are gone afterwards.
//!
//! Needs root (namespaces, packet sockets); CI runs as root. Timing bounds
//! here are deliberately loose: accuracy is `mpt emu selftest`'s job.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use mpt_emu::loss::LossConfig;
use mpt_emu::model::LinkConfig;
use mpt_emu::netns::Testbed;
use mpt_emu::schedule::{Schedule, Window};
use mpt_emu::selftest::run_case;
use mpt_emu::sys;
use mpt_emu::traffic::Flow;

fn lost(out: &mpt_emu::selftest::CaseOutcome) -> Vec<u64> {
    let mut got = vec![false; out.log.sent.len()];
    for r in &out.records {
        got[r.seq as usize] = true;
    }
    (0..got.len() as u64)
        .filter(|&i| !got[i as usize])
        .collect()
}

#[test]
fn wire_end_to_end_in_namespaces() {
    if !sys::is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let stop = AtomicBool::new(false);
    let bed = Testbed::build("it").unwrap_or_else(|e| panic!("testbed: {e}"));
    let names = [
        bed.a.name().to_string(),
        bed.b.name().to_string(),
        bed.m.name().to_string(),
    ];

    // Delay and loss: 400 datagrams of 200 B, 1 ms apart, 10 Mbit/s.
    let delay = Duration::from_millis(20);
    let link = LinkConfig {
        rate: Some(10_000_000),
        delay,
        loss: LossConfig {
            per: 0.1,
            gilbert_elliott: None,
        },
        ..LinkConfig::default()
    };
    let flow = Flow {
        until: None,
        payload: 200,
        gap: Duration::from_millis(1),
        count: 400,
    };
    let linger = Duration::from_millis(100);
    let first = run_case(&bed, link.clone(), flow, linger, &stop).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.log.sent_ok(), 400);
    let lost1 = lost(&first);
    assert_eq!(
        lost1.len() as u64,
        first.wire.drops.loss,
        "every loss is the model's"
    );
    assert_eq!(first.wire.drops.total(), first.wire.drops.loss);
    assert!(
        !lost1.is_empty() && lost1.len() < 100,
        "PER 10 % of 400: {}",
        lost1.len()
    );
    assert!(
        first.records.windows(2).all(|p| p[1].seq > p[0].seq),
        "order"
    );
    // 242-byte frame at 10 Mbit/s = 194 us serialization on top of the delay.
    let floor = (delay + Duration::from_micros(194)).as_nanos() as u64;
    for r in &first.records {
        let one_way = r.rx_ns - r.tx_ns;
        assert!(one_way >= floor, "seq {} early: {one_way} ns", r.seq);
        assert!(
            one_way < floor + 50_000_000,
            "seq {} held far too long: {one_way} ns",
            r.seq
        );
    }
    // Same seed, same datagrams: the same ones are lost.
    let second = run_case(&bed, link, flow, linger, &stop).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lost(&second), lost1, "loss must repeat from the seed");

    // Relay custody over an outage: nothing lost, order kept.
    let link = LinkConfig {
        rate: Some(10_000_000),
        schedule: Schedule::new(
            vec![Window {
                start: Duration::from_millis(100),
                len: Duration::from_millis(200),
            }],
            None,
        ),
        relay: Some(1_000_000),
        ..LinkConfig::default()
    };
    let out = run_case(&bed, link, flow, Duration::from_millis(300), &stop)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.records.len(), 400, "relay lost {:?}", lost(&out));
    assert!(out.records.windows(2).all(|p| p[1].seq > p[0].seq), "order");
    assert!(
        out.wire.relayed_frames >= 150,
        "held {}",
        out.wire.relayed_frames
    );

    drop(bed);
    for n in names {
        assert!(
            !std::path::Path::new(&format!("/run/netns/{n}")).exists(),
            "{n} left behind"
        );
    }
}
