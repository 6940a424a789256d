//! The tunnel carries real kernel TCP, bytes checked with SHA-256 end to
//! end, for 1, 2 and 12 paths and every inner/outer IP version pairing; every
//! path carries traffic in proportion to its weight (±10 %) on both sides.

use mpt_e2e::*;

const MB: u64 = 1 << 20;

/// Builds a bed of `paths` paths of `outer` family with only `inner`
/// configured on the tunnel, sends `bytes` A->B and half that B->A.
fn run(paths: Vec<PathSpec>, inner: &[Family], bytes: u64) {
    let mut bed = TestBed::new(BedSpec::with_paths(paths).inner(inner)).expect("test bed");
    for &f in inner {
        bed.transfer_checking_shares(Side::A, f, bytes)
            .expect("transfer A->B");
        bed.transfer_checking_shares(Side::B, f, bytes / 2)
            .expect("transfer B->A");
    }
    bed.shutdown().expect("clean shutdown");
}

fn uniform(n: usize, outer: Family) -> Vec<PathSpec> {
    (0..n).map(|_| PathSpec::new(outer)).collect()
}

#[test]
fn one_path_ipv4_in_ipv4() {
    run(uniform(1, Family::V4), &[Family::V4], 16 * MB);
}

#[test]
fn two_paths_ipv4_in_ipv4() {
    run(uniform(2, Family::V4), &[Family::V4], 16 * MB);
}

#[test]
fn two_paths_ipv6_in_ipv4() {
    run(uniform(2, Family::V4), &[Family::V6], 16 * MB);
}

#[test]
fn two_paths_ipv4_in_ipv6() {
    run(uniform(2, Family::V6), &[Family::V4], 16 * MB);
}

#[test]
fn two_paths_ipv6_in_ipv6() {
    run(uniform(2, Family::V6), &[Family::V6], 16 * MB);
}

/// The large transfer: 50 MB over 12 paths, each carrying 1/12 (±10 %).
#[test]
fn twelve_paths_ipv4_in_ipv4_50mb() {
    run(uniform(12, Family::V4), &[Family::V4], 50 * MB);
}

/// Paths of both outer families in one connection, both inner families.
#[test]
fn mixed_family_paths_both_inner_families() {
    let paths = vec![
        PathSpec::new(Family::V4),
        PathSpec::new(Family::V6),
        PathSpec::new(Family::V4),
        PathSpec::new(Family::V6),
    ];
    run(paths, &[Family::V4, Family::V6], 16 * MB);
}
