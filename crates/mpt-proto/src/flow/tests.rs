use super::*;
use proptest::prelude::*;

/// An IPv4 packet `proto` from `src:sport` to `dst:dport` with `extra`
/// bytes after the ports, and a fragment field `frag` (flags | offset).
fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16, frag: u16) -> Vec<u8> {
    let mut p = vec![0xa5u8; 28];
    p[0] = 0x45;
    p[1] = 0xb8; // DSCP 46 (EF), ECN 0
    p[2..4].copy_from_slice(&28u16.to_be_bytes());
    p[6..8].copy_from_slice(&frag.to_be_bytes());
    p[9] = proto;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p
}

/// An IPv6 packet with the given extension headers (each `(type, body)`,
/// body padded by the caller to its length) before a `proto` header that
/// starts with the ports.
fn v6(exts: &[(u8, Vec<u8>)], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut p = vec![0xa5u8; 40];
    p[0] = 0x6b; // traffic class 0xb8: DSCP 46
    p[1] = 0x80;
    p[8..24].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p[24..40].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    let mut next_at = 6;
    for (t, body) in exts {
        p[next_at] = *t;
        next_at = p.len();
        p.extend_from_slice(body);
    }
    p[next_at] = proto;
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&[0xa5; 16]);
    let plen = (p.len() - 40) as u16;
    p[4..6].copy_from_slice(&plen.to_be_bytes());
    p
}

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

#[test]
fn ports_separate_flows_of_one_host_pair() {
    for proto in [PROTO_TCP, PROTO_UDP, PROTO_SCTP, PROTO_UDPLITE] {
        let one = flow_hash(&v4(A, B, proto, 1000, 80, 0));
        assert_eq!(one, flow_hash(&v4(A, B, proto, 1000, 80, 0)));
        assert_ne!(one, flow_hash(&v4(A, B, proto, 1001, 80, 0)));
        assert_ne!(one, flow_hash(&v4(A, B, proto, 1000, 81, 0)));
        assert_ne!(one, flow_hash(&v4(B, A, proto, 1000, 80, 0)));
    }
    assert_ne!(
        flow_hash(&v4(A, B, PROTO_TCP, 1, 2, 0)),
        flow_hash(&v4(A, B, PROTO_UDP, 1, 2, 0))
    );
}

#[test]
fn payload_and_other_header_fields_do_not_count() {
    let mut p = v4(A, B, PROTO_TCP, 1000, 80, 0);
    let h = flow_hash(&p);
    p[1] = 0; // TOS
    p[4..6].copy_from_slice(&[1, 2]); // identification
    p[8] = 1; // TTL
    p[24..].fill(0); // TCP sequence number and on
    assert_eq!(flow_hash(&p), h);
}

#[test]
fn protocols_without_ports_hash_on_addresses() {
    // ICMP: the bytes where ports would be do not count.
    let a = flow_hash(&v4(A, B, 1, 1, 2, 0));
    assert_eq!(a, flow_hash(&v4(A, B, 1, 3, 4, 0)));
    assert_ne!(a, flow_hash(&v4(A, [10, 0, 0, 3], 1, 1, 2, 0)));
}

#[test]
fn non_first_fragments_hash_without_ports() {
    let first = flow_hash(&v4(A, B, PROTO_UDP, 1000, 53, 0x2000)); // MF, offset 0
    assert_eq!(first, flow_hash(&v4(A, B, PROTO_UDP, 1000, 53, 0)));
    let later = flow_hash(&v4(A, B, PROTO_UDP, 1000, 53, 0x0010));
    assert_eq!(later, flow_hash(&v4(A, B, PROTO_UDP, 7, 7, 0x2020)));
    assert_ne!(later, first);
}

#[test]
fn ipv4_with_options_reads_ports_after_them() {
    let mut p = v4(A, B, PROTO_TCP, 1000, 80, 0);
    let plain = flow_hash(&p);
    // IHL 6: four bytes of options, the ports move back.
    p[0] = 0x46;
    p.splice(20..20, [1, 1, 1, 0]);
    assert_eq!(flow_hash(&p), plain);
    // An IHL past the end, or below 5: addresses and protocol only.
    p[0] = 0x4f;
    let short = flow_hash(&p);
    p[0] = 0x41;
    assert_eq!(flow_hash(&p), short);
}

#[test]
fn ipv6_skips_extension_headers() {
    let plain = flow_hash(&v6(&[], PROTO_TCP, 1000, 443));
    assert_ne!(plain, flow_hash(&v6(&[], PROTO_TCP, 1001, 443)));
    let hbh = (EXT_HOP_BY_HOP, vec![0u8; 8]);
    let mut dst = vec![0u8; 16];
    dst[1] = 1; // 16 bytes
    let dest = (EXT_DEST_OPTS, dst);
    let mut rt = vec![0u8; 24];
    rt[1] = 2;
    let routing = (EXT_ROUTING, rt);
    let mut ah = vec![0u8; 16];
    ah[1] = 2; // (2 + 2) * 4 = 16 bytes
    let auth = (EXT_AUTH, ah);
    let first_frag = (EXT_FRAGMENT, vec![0, 0, 0, 1, 0, 0, 0, 9]); // offset 0, M
    let chain = [hbh, dest, routing, auth, first_frag];
    for n in 0..=chain.len() {
        assert_eq!(
            flow_hash(&v6(&chain[..n], PROTO_TCP, 1000, 443)),
            plain,
            "{n} extension headers"
        );
    }
}

#[test]
fn ipv6_non_first_fragment_and_long_chains_fall_back() {
    let later = (EXT_FRAGMENT, vec![0, 0, 0x05, 0x00, 0, 0, 0, 9]); // offset 160
    let a = flow_hash(&v6(std::slice::from_ref(&later), PROTO_UDP, 1, 2));
    assert_eq!(a, flow_hash(&v6(&[later], PROTO_UDP, 3, 4)));
    assert_ne!(a, flow_hash(&v6(&[], PROTO_UDP, 1, 2)));
    // Too many extension headers: addresses and first next header.
    let many: Vec<_> = (0..=MAX_EXT_HEADERS)
        .map(|_| (EXT_DEST_OPTS, vec![0u8; 8]))
        .collect();
    assert_eq!(
        flow_hash(&v6(&many, PROTO_TCP, 1, 2)),
        flow_hash(&v6(&many, PROTO_TCP, 3, 4))
    );
    // Cut short inside an extension header: the same fallback.
    let mut cut = v6(&[(EXT_ROUTING, vec![0u8; 8])], PROTO_TCP, 1, 2);
    cut[41] = 200; // claims 1608 bytes
    let h = flow_hash(&cut);
    cut[49] = 0xff; // what would be ports
    assert_eq!(flow_hash(&cut), h);
}

#[test]
fn not_ip_hashes_to_zero() {
    assert_eq!(flow_hash(&[]), 0);
    assert_eq!(flow_hash(&[0x45; 19]), 0);
    assert_eq!(flow_hash(&[0x60; 39]), 0);
    assert_eq!(flow_hash(&[0x55; 60]), 0);
}

#[test]
fn hashes_spread_over_buckets() {
    // 4096 TCP flows that differ in the source port only: nearly every
    // bucket would be used by a uniform hash (1 - 1/e of them ≈ 2589).
    let mut used = vec![false; FLOW_BUCKETS];
    for port in 0..FLOW_BUCKETS as u16 {
        used[FlowTable::bucket(flow_hash(&v4(A, B, PROTO_TCP, 40000 + port, 443, 0)))] = true;
    }
    let n = used.iter().filter(|&&u| u).count();
    assert!(n > 2400, "only {n} buckets used");
}

#[test]
fn dscp_of_both_families() {
    assert_eq!(dscp(&v4(A, B, PROTO_TCP, 1, 2, 0)), Some(46));
    assert_eq!(dscp(&v6(&[], PROTO_TCP, 1, 2)), Some(46));
    assert_eq!(dscp(&[0x45; 19]), None);
    assert_eq!(dscp(&[]), None);
    assert_eq!(dscp(&[0x75; 40]), None);
}

#[test]
fn flow_table_links_each_packet_to_the_previous_of_its_bucket() {
    let mut t = FlowTable::new();
    let (a, b) = (1u32, 2u32);
    assert_eq!(t.gap(a, 10), 0, "first of its flow");
    assert_eq!(t.gap(b, 11), 0);
    assert_eq!(t.gap(a, 12), 2);
    assert_eq!(t.gap(a, 13), 1);
    assert_eq!(t.gap(b, 20), 9);
    // The same bucket under another hash (the bucket is the low bits).
    assert_eq!(t.gap(a + FLOW_BUCKETS as u32, 14), 1);
    // Not above the last: the counter restarted.
    assert_eq!(t.gap(a, 3), 0);
    assert_eq!(t.gap(a, 4), 1);
    // A distance beyond 32 bits.
    assert_eq!(t.gap(a, 4 + u64::from(u32::MAX)), u32::MAX);
    assert_eq!(t.gap(a, 6 + 2 * u64::from(u32::MAX)), 0);
    assert_eq!(t.gap(a, u64::MAX), 0);
    t.clear();
    assert_eq!(t.gap(b, 21), 0);
}

proptest! {
    #[test]
    fn any_bytes_hash_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let h = flow_hash(&bytes);
        prop_assert_eq!(h, flow_hash(&bytes));
        let _ = dscp(&bytes);
    }

    #[test]
    fn any_ip_like_bytes_hash_without_panic(
        version in prop_oneof![Just(0x40u8), Just(0x60u8)],
        low in any::<u8>(),
        rest in proptest::collection::vec(any::<u8>(), 0..160),
    ) {
        // Most random strings fail at the version nibble; these reach the
        // option, extension header and port parsing.
        let mut bytes = vec![version | (low & 0x0f)];
        bytes.extend_from_slice(&rest);
        let _ = flow_hash(&bytes);
        let _ = dscp(&bytes);
    }

    #[test]
    fn ipv6_extension_chains_never_panic(
        types in proptest::collection::vec(
            prop_oneof![Just(0u8), Just(43), Just(44), Just(51), Just(60), Just(6), Just(17)],
            1..12,
        ),
        lens in proptest::collection::vec(any::<u8>(), 12),
        tail in 0usize..64,
    ) {
        let mut p = vec![0x60u8; 40];
        p[6] = types[0];
        for (k, t) in types.iter().enumerate().skip(1) {
            p.extend_from_slice(&[*t, lens[k], 0, 0, 0, 0, 0, 0]);
        }
        p.extend(std::iter::repeat_n(0xa5, tail));
        let _ = flow_hash(&p);
    }
}

#[test]
fn every_short_string_over_a_small_alphabet_hashes() {
    // Exhaustive over the interesting first bytes and short lengths.
    for first in [0x40u8, 0x45, 0x4f, 0x60, 0x6f, 0x00, 0xff] {
        for len in 0..=64usize {
            for fill in [0x00u8, 0x06, 0x11, 0x2c, 0xff] {
                let mut p = vec![fill; len];
                if let Some(b) = p.first_mut() {
                    *b = first;
                }
                let _ = flow_hash(&p);
                let _ = dscp(&p);
            }
        }
    }
}

#[test]
fn tcp_syn_is_recognised() {
    let mut syn = v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 40000, 80, 0);
    syn.resize(40, 0);
    syn[33] = 0x02;
    assert!(is_tcp_syn(&syn));
    syn[33] = 0x12; // SYN+ACK
    assert!(is_tcp_syn(&syn));
    syn[33] = 0x10; // ACK
    assert!(!is_tcp_syn(&syn));
    // UDP, a non-first fragment, a cut packet, not IP: never.
    let mut udp = syn.clone();
    udp[9] = 17;
    udp[33] = 0x02;
    assert!(!is_tcp_syn(&udp));
    let mut frag = syn.clone();
    frag[33] = 0x02;
    frag[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
    assert!(!is_tcp_syn(&frag));
    assert!(!is_tcp_syn(&syn[..30]));
    assert!(!is_tcp_syn(&[]));
    let mut v6syn = v6(&[], 6, 40000, 80);
    v6syn.resize(60, 0);
    v6syn[53] = 0x02;
    assert!(is_tcp_syn(&v6syn));
}
