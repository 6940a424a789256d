//! Weighted striping: each side sends on each path in proportion to its own
//! `weight_out` (±10 %), counted by the daemon and by the kernel.

use mpt_e2e::*;

#[test]
fn shares_follow_weight_out_on_each_side() {
    // A sends 2:1:1, B sends 1:1:2 (each side's weight_in is the peer's weight_out).
    let paths = vec![
        PathSpec::new(Family::V4).weights(100, 50),
        PathSpec::new(Family::V4).weights(50, 50),
        PathSpec::new(Family::V4).weights(50, 100),
    ];
    let mut bed =
        TestBed::new(BedSpec::with_paths(paths.clone()).inner(&[Family::V4])).expect("test bed");

    // The status reports the configured weights.
    for side in [Side::A, Side::B] {
        let s = bed.snap(side).expect("status");
        for (i, p) in paths.iter().enumerate() {
            let raw = &s.path(&path_name(i)).expect("path").raw;
            assert_eq!(
                raw["weight_out"],
                p.weight_out(side),
                "{side:?}/p{i}: {raw}"
            );
            assert_eq!(
                raw["weight_in"],
                p.weight_out(side.other()),
                "{side:?}/p{i}: {raw}"
            );
        }
    }

    // 50 MB A->B: A's data 2:1:1 and B's ACKs 1:1:2; then the other way.
    bed.transfer_checking_shares(Side::A, Family::V4, 50 << 20)
        .expect("A->B");
    bed.transfer_checking_shares(Side::B, Family::V4, 16 << 20)
        .expect("B->A");
    bed.shutdown().expect("clean shutdown");
}
