//! A Mahimahi trace of known mean rate shapes a real UDP flow through the
//! real wire in throw-away namespaces: the mean arrives within 2 % and the
//! gaps between delivery opportunities queue packets instead of dropping
//! them as outages. About 2.5 s.
//!
//! Needs root (namespaces, packet sockets); CI runs as root.

use std::sync::atomic::AtomicBool;

use mpt_emu::netns::Testbed;
use mpt_emu::selftest::mahimahi_check;
use mpt_emu::sys;

#[test]
fn mahimahi_trace_shapes_a_real_flow() {
    if !sys::is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let stop = AtomicBool::new(false);
    let bed = Testbed::build("mm").unwrap_or_else(|e| panic!("testbed: {e}"));
    let check = mahimahi_check(&bed, &stop).unwrap_or_else(|e| panic!("{e}"));
    drop(bed);
    assert_eq!(
        check.pass,
        Some(true),
        "{}: {} (bound {})",
        check.requested,
        check.measured,
        check.bound
    );
}
