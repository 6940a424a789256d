use super::*;
use crate::checksum::{fold, sum};
use proptest::prelude::*;

const SYN: u8 = 0x02;
const SYN_ACK: u8 = 0x12;
const ACK: u8 = 0x10;
const PSH_ACK: u8 = 0x18;

fn mss_opt(mss: u16) -> [u8; 4] {
    let v = mss.to_be_bytes();
    [OPT_MSS, OPT_MSS_LEN, v[0], v[1]]
}

/// A TCP header with `flags`, the given options (padded with NOPs... at
/// the end, with END, to a multiple of 4) and `payload`; checksum 0.
fn tcp(options: &[u8], flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut opts = options.to_vec();
    while !opts.len().is_multiple_of(4) {
        opts.push(OPT_END);
    }
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&40000u16.to_be_bytes());
    t[2..4].copy_from_slice(&443u16.to_be_bytes());
    t[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    t[12] = (((20 + opts.len()) / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&64240u16.to_be_bytes());
    t.extend_from_slice(&opts);
    t.extend_from_slice(payload);
    t
}

/// Where the TCP header of a packet built here starts, and the
/// pseudo-header sum (without the TCP length).
fn pseudo(p: &[u8]) -> (usize, u64) {
    if p[0] >> 4 == 4 {
        let ihl = usize::from(p[0] & 0x0f) * 4;
        (ihl, sum(&p[12..20], u64::from(PROTO_TCP)))
    } else {
        let (_, t) = v6_transport(p, p[6], 40).unwrap();
        (
            p.len() - t.unwrap().len(),
            sum(&p[8..40], u64::from(PROTO_TCP)),
        )
    }
}

/// The TCP checksum of `p` computed from scratch (field taken as 0).
fn recompute(p: &[u8]) -> u16 {
    let (tcp, ph) = pseudo(p);
    let mut seg = p[tcp..].to_vec();
    seg[16] = 0;
    seg[17] = 0;
    !fold(sum(&seg, ph + seg.len() as u64))
}

/// Whether the checksum in `p` verifies (the sum over everything is -0).
fn verifies(p: &[u8]) -> bool {
    let (tcp, ph) = pseudo(p);
    fold(sum(&p[tcp..], ph + (p.len() - tcp) as u64)) == 0xffff
}

fn set_checksum(p: &mut [u8]) {
    let (tcp, _) = pseudo(p);
    let c = recompute(p);
    p[tcp + 16..tcp + 18].copy_from_slice(&c.to_be_bytes());
}

fn v4(tcp: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
    p[6] = 0x40; // DF
    p[8] = 64;
    p[9] = PROTO_TCP;
    p[12..16].copy_from_slice(&[10, 1, 2, 3]);
    p[16..20].copy_from_slice(&[198, 51, 100, 77]);
    p.extend_from_slice(tcp);
    set_checksum(&mut p);
    p
}

/// An IPv6 packet; `exts` are extension headers `(type, body)` with
/// bodies of 6 + 8k bytes.
fn v6(exts: &[(u8, Vec<u8>)], tcp: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[7] = 64;
    p[8..24].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p[24..40].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    let mut next_at = 6;
    for (t, body) in exts {
        p[next_at] = *t;
        next_at = p.len();
        p.push(0);
        p.push(((body.len() + 2) / 8 - 1) as u8);
        p.extend_from_slice(body);
    }
    p[next_at] = PROTO_TCP;
    let payload = (p.len() - 40 + tcp.len()) as u16;
    p[4..6].copy_from_slice(&payload.to_be_bytes());
    p.extend_from_slice(tcp);
    // (A non-first fragment has no TCP header to sum.)
    if v6_transport(&p, p[6], 40).is_some_and(|(_, t)| t.is_some()) {
        set_checksum(&mut p);
    }
    p
}

fn mss_at(p: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([p[at], p[at + 1]])
}

/// Clamps `p` with a complete checksum and checks the checksum against a
/// recomputation.
fn clamp_checked(p: &mut [u8], mtu: u16) -> Clamp {
    assert!(verifies(p), "test packet must start valid");
    let before = p.to_vec();
    let r = clamp_mss(p, mtu, Checksum::Complete);
    let (tcp, _) = pseudo(p);
    let field = mss_at(p, tcp + 16);
    assert_eq!(field, recompute(p), "checksum after {r:?}");
    assert!(verifies(p));
    let tcp_end = tcp + tcp_len(&before[tcp..]);
    for (i, (a, b)) in p.iter().zip(&before).enumerate() {
        if a != b {
            assert!(matches!(r, Clamp::Lowered { .. }), "{r:?} changed byte {i}");
            assert!(
                (tcp..tcp_end).contains(&i),
                "byte {i} outside the TCP header"
            );
        }
    }
    r
}

fn tcp_len(t: &[u8]) -> usize {
    usize::from(t[12] >> 4) * 4
}

#[test]
fn limits_follow_the_ip_version() {
    assert_eq!(mss_limit(1400, false), 1360);
    assert_eq!(mss_limit(1400, true), 1340);
    assert_eq!(mss_limit(30, true), 0);
}

#[test]
fn v4_syn_is_lowered_to_mtu_minus_40() {
    let mut p = v4(&tcp(&mss_opt(1460), SYN, &[]));
    let r = clamp_checked(&mut p, 1400);
    assert_eq!(
        r,
        Clamp::Lowered {
            from: 1460,
            to: 1360
        }
    );
    assert_eq!(mss_at(&p, 42), 1360);
}

#[test]
fn v4_syn_ack_is_lowered_too() {
    let mut p = v4(&tcp(&mss_opt(8960), SYN_ACK, &[]));
    assert_eq!(
        clamp_checked(&mut p, 1400),
        Clamp::Lowered {
            from: 8960,
            to: 1360
        }
    );
}

#[test]
fn v6_syn_is_lowered_to_mtu_minus_60() {
    let mut p = v6(&[], &tcp(&mss_opt(1440), SYN, &[]));
    assert_eq!(
        clamp_checked(&mut p, 1400),
        Clamp::Lowered {
            from: 1440,
            to: 1340
        }
    );
    assert_eq!(mss_at(&p, 62), 1340);
}

#[test]
fn v6_syn_behind_extension_headers_is_lowered() {
    let exts = [(0u8, vec![1, 4, 0, 0, 0, 0]), (60u8, vec![0xab; 14])];
    let mut p = v6(&exts, &tcp(&mss_opt(65495), SYN, &[]));
    assert_eq!(
        clamp_checked(&mut p, 1280),
        Clamp::Lowered {
            from: 65495,
            to: 1220
        }
    );
}

#[test]
fn v6_non_first_fragment_is_not_a_syn() {
    // Fragment header, offset 8 (in 8-byte units): no TCP header here.
    let frag = vec![0, 0x41, 0, 0, 0, 1];
    let mut p = v6(&[(44, frag)], &tcp(&mss_opt(1440), SYN, &[]));
    let before = p.clone();
    assert_eq!(clamp_mss(&mut p, 1400, Checksum::Complete), Clamp::NotSyn);
    assert_eq!(p, before);
}

#[test]
fn v4_with_ip_options_is_handled() {
    let seg = tcp(&mss_opt(1460), SYN, &[]);
    let mut p = v4(&seg);
    // A 24-byte IP header: one word of options (NOP, NOP, NOP, END).
    p.splice(20..20, [1u8, 1, 1, 0]);
    p[0] = 0x46;
    p[2..4].copy_from_slice(&((24 + seg.len()) as u16).to_be_bytes());
    set_checksum(&mut p);
    assert_eq!(
        clamp_checked(&mut p, 1400),
        Clamp::Lowered {
            from: 1460,
            to: 1360
        }
    );
    assert_eq!(mss_at(&p, 46), 1360);
}

#[test]
fn options_before_mss_are_skipped_at_any_alignment() {
    let ts = [8u8, 10, 0, 0, 1, 0, 0, 0, 0, 0];
    let cases: Vec<Vec<u8>> = vec![
        // Linux's order: MSS first.
        [&mss_opt(1460)[..], &[4, 2], &ts, &[1, 3, 3, 7]].concat(),
        // One NOP: the value sits at an odd offset.
        [&[OPT_NOP][..], &mss_opt(1460)].concat(),
        // Window scale (3 bytes) then MSS: odd again.
        [&[3u8, 3, 7][..], &mss_opt(1460)].concat(),
        // SACK permitted, timestamps, two NOPs, then MSS.
        [&[4u8, 2][..], &ts, &[1, 1], &mss_opt(1460)].concat(),
        // An unknown option with a long body.
        [
            &[254u8, 12, 0xf9, 0x89, 1, 2, 3, 4, 5, 6, 7, 8][..],
            &mss_opt(1460),
        ]
        .concat(),
    ];
    for opts in cases {
        for payload in [&[][..], &[0xde, 0xad, 0xbe][..]] {
            let mut p = v4(&tcp(&opts, SYN, payload));
            let r = clamp_checked(&mut p, 1400);
            assert_eq!(
                r,
                Clamp::Lowered {
                    from: 1460,
                    to: 1360
                },
                "{opts:?}"
            );
            let mut p = v6(&[], &tcp(&opts, SYN_ACK, payload));
            let r = clamp_checked(&mut p, 1400);
            assert_eq!(
                r,
                Clamp::Lowered {
                    from: 1460,
                    to: 1340
                },
                "{opts:?}"
            );
        }
    }
}

#[test]
fn a_syn_without_mss_is_left_alone() {
    let mut p = v4(&tcp(&[4, 2, 1, 1, 3, 3, 7], SYN, &[]));
    assert_eq!(clamp_checked(&mut p, 1400), Clamp::NoMss);
    let mut p = v4(&tcp(&[], SYN, &[]));
    assert_eq!(clamp_checked(&mut p, 1400), Clamp::NoMss);
    // END before the MSS option ends the list.
    let mut p = v4(&tcp(&[OPT_END, 0, 0, 0, 2, 4, 5, 0xb4], SYN, &[]));
    assert_eq!(clamp_checked(&mut p, 1400), Clamp::NoMss);
}

#[test]
fn an_mss_that_fits_is_never_raised() {
    for mss in [536, 1220, 1359, 1360] {
        let mut p = v4(&tcp(&mss_opt(mss), SYN, &[]));
        assert_eq!(clamp_checked(&mut p, 1400), Clamp::Fits, "{mss}");
    }
    let mut p = v6(&[], &tcp(&mss_opt(1340), SYN, &[]));
    assert_eq!(clamp_checked(&mut p, 1400), Clamp::Fits);
}

#[test]
fn two_mss_options_are_both_lowered() {
    let opts = [&mss_opt(9000)[..], &mss_opt(1460)].concat();
    let mut p = v4(&tcp(&opts, SYN, &[]));
    assert_eq!(
        clamp_checked(&mut p, 1400),
        Clamp::Lowered {
            from: 9000,
            to: 1360
        }
    );
    assert_eq!((mss_at(&p, 42), mss_at(&p, 46)), (1360, 1360));
}

#[test]
fn packets_that_are_no_syn_are_untouched() {
    for flags in [ACK, PSH_ACK, 0x11, 0x04] {
        let mut p = v4(&tcp(&mss_opt(1460), flags, &[1, 2, 3]));
        assert_eq!(clamp_checked(&mut p, 1400), Clamp::NotSyn);
    }
    // UDP with a SYN-looking byte where TCP's flags would be.
    let mut p = v4(&tcp(&mss_opt(1460), SYN, &[]));
    p[9] = 17;
    let before = p.clone();
    assert_eq!(clamp_mss(&mut p, 1400, Checksum::Complete), Clamp::NotSyn);
    assert_eq!(p, before);
    // A non-first IPv4 fragment.
    let mut p = v4(&tcp(&mss_opt(1460), SYN, &[]));
    p[6..8].copy_from_slice(&0x2005u16.to_be_bytes());
    assert_eq!(clamp_mss(&mut p, 1400, Checksum::Complete), Clamp::NotSyn);
    // Not IP at all.
    for mut junk in [vec![], vec![0x00; 60], vec![0x50; 60], vec![0xff; 3]] {
        assert_eq!(
            clamp_mss(&mut junk, 1400, Checksum::Complete),
            Clamp::NotSyn
        );
    }
}

#[test]
fn a_partial_checksum_is_not_adjusted_and_completes_right() {
    let mut p = v4(&tcp(&[&[OPT_NOP][..], &mss_opt(1460)].concat(), SYN, &[]));
    // What the kernel hands over with CHECKSUM_PARTIAL: the pseudo-header
    // sum (with the TCP length), not inverted, in the field.
    let (tcp_at, ph) = pseudo(&p);
    let partial = fold(ph + (p.len() - tcp_at) as u64);
    p[tcp_at + 16..tcp_at + 18].copy_from_slice(&partial.to_be_bytes());
    let r = clamp_mss(&mut p, 1400, Checksum::Partial);
    assert_eq!(
        r,
        Clamp::Lowered {
            from: 1460,
            to: 1360
        }
    );
    assert_eq!(mss_at(&p, tcp_at + 16), partial, "field left alone");
    // Completing it the way the device would (sum from the TCP header
    // with the field as the initial value) gives the right checksum.
    let mut seg = p[tcp_at..].to_vec();
    seg[16] = 0;
    seg[17] = 0;
    let done = !fold(sum(&seg, u64::from(partial)));
    p[tcp_at + 16..tcp_at + 18].copy_from_slice(&done.to_be_bytes());
    assert!(verifies(&p));
    assert_eq!(done, recompute(&p));
}

#[test]
fn malformed_options_stop_the_walk_without_change() {
    let cases: [&[u8]; 6] = [
        &[2, 0, 5, 0xb4],              // length 0
        &[2, 1, 5, 0xb4],              // length 1
        &[2, 3, 5, 0xb4],              // MSS with the wrong length
        &[2, 5, 5, 0xb4, 0],           // MSS with the wrong length
        &[8, 40, 0, 0, 2, 4, 5, 0xb4], // runs past the header
        &[1, 1, 1, 2],                 // kind with no length byte inside the header
    ];
    for opts in cases {
        let mut p = v4(&tcp(opts, SYN, &[0xaa; 8]));
        let r = clamp_checked(&mut p, 1400);
        assert!(matches!(r, Clamp::NoMss), "{opts:?}: {r:?}");
    }
}

#[test]
fn truncated_packets_never_panic_or_change() {
    let opts = [&[1u8, 1, 4, 2, 3, 3, 7][..], &mss_opt(1460)].concat();
    let full4 = v4(&tcp(&opts, SYN, &[]));
    let full6 = v6(&[(0, vec![1, 4, 0, 0, 0, 0])], &tcp(&opts, SYN, &[]));
    for full in [full4, full6] {
        for cut in 0..full.len() {
            let mut p = full[..cut].to_vec();
            let r = clamp_mss(&mut p, 1400, Checksum::Complete);
            assert!(!matches!(r, Clamp::Lowered { .. }), "cut at {cut}: {r:?}");
            assert_eq!(p, full[..cut]);
        }
    }
}

#[test]
fn a_data_offset_below_five_is_not_parsed() {
    let mut p = v4(&tcp(&mss_opt(1460), SYN, &[]));
    p[32] = 0x40;
    let before = p.clone();
    assert_eq!(clamp_mss(&mut p, 1400, Checksum::Complete), Clamp::NotSyn);
    assert_eq!(p, before);
}

/// TCP options built from arbitrary pieces, some of them MSS.
fn options() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(vec![OPT_NOP]),
        (0u16..=u16::MAX).prop_map(|m| mss_opt(m).to_vec()),
        Just(vec![4, 2]),
        (0u8..15).prop_map(|s| vec![3, 3, s]),
        prop::collection::vec(any::<u8>(), 8).prop_map(|b| [&[8u8, 10][..], &b].concat()),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| {
        let mut o = v.concat();
        o.truncate(40);
        o
    })
}

proptest! {
    #[test]
    fn any_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..120), mtu in any::<u16>(), v6 in any::<bool>()) {
        if let Some(b) = bytes.first_mut() {
            *b = (*b & 0x0f) | if v6 { 0x60 } else { 0x40 };
        }
        let _ = clamp_mss(&mut bytes, mtu, Checksum::Complete);
        let _ = clamp_mss(&mut bytes, mtu, Checksum::Partial);
    }

    #[test]
    fn clamping_keeps_the_checksum_and_never_raises(
        opts in options(),
        payload in prop::collection::vec(any::<u8>(), 0..40),
        mtu in 576u16..9000,
        syn_ack in any::<bool>(),
        ipv6 in any::<bool>(),
    ) {
        let seg = tcp(&opts, if syn_ack { SYN_ACK } else { SYN }, &payload);
        let mut p = if ipv6 { v6(&[], &seg) } else { v4(&seg) };
        let before = p.clone();
        let r = clamp_mss(&mut p, mtu, Checksum::Complete);
        prop_assert!(verifies(&p), "{:?}", r);
        let limit = mss_limit(mtu, ipv6);
        match r {
            Clamp::Lowered { from, to } => {
                prop_assert!(from > limit);
                prop_assert_eq!(to, limit);
            }
            _ => prop_assert_eq!(&p, &before),
        }
    }

    #[test]
    fn the_incremental_update_matches_a_recomputation(
        words in prop::collection::vec(any::<u16>(), 1..40),
        at in any::<prop::sample::Index>(),
        new in any::<u16>(),
    ) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        let i = at.index(words.len());
        let old_sum = !fold(sum(&bytes, 0));
        let mut changed = bytes.clone();
        changed[2 * i..2 * i + 2].copy_from_slice(&new.to_be_bytes());
        let updated = update_checksum(old_sum, words[i], new);
        // Equal as one's complement numbers (0 and 0xffff are one value).
        prop_assert_eq!(fold(sum(&changed, u64::from(updated))), 0xffff);
    }
}
