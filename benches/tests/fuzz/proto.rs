//! mpt-proto's packet parsers on the tun side: the MSS clamp and the
//! Internet checksum it keeps valid.

use mpt_proto::checksum::{fold, sum};
use mpt_proto::mss::{clamp_mss, mss_limit, update_checksum, Checksum, Clamp};
use proptest::prelude::*;

use crate::harness::fuzz;

fn checksum_kind() -> impl Strategy<Value = Checksum> {
    prop_oneof![Just(Checksum::Complete), Just(Checksum::Partial)]
}

#[test]
fn mss_clamp_bytes() {
    // Bytes that start like IPv4/IPv6 TCP half the time, so the parser
    // gets past its first checks.
    let packet =
        (any::<bool>(), prop::collection::vec(any::<u8>(), 0..120)).prop_map(|(tcp, mut p)| {
            if tcp && p.len() > 9 {
                if p[0] & 0x10 == 0 {
                    p[0] = 0x45;
                    p[9] = 6;
                } else {
                    p[0] = 0x60;
                    p[6] = 6;
                }
            }
            p
        });
    fuzz(
        "mss_clamp_bytes",
        512,
        (packet, any::<u16>(), checksum_kind()),
        |(packet, mtu, kind)| {
            let mut p = packet.clone();
            let r = clamp_mss(&mut p, mtu, kind);
            prop_assert_eq!(p.len(), packet.len());
            match r {
                Clamp::NotSyn | Clamp::NoMss | Clamp::Fits => prop_assert_eq!(&p, &packet),
                Clamp::Lowered { from, to } => {
                    prop_assert!(to == mss_limit(mtu, false) || to == mss_limit(mtu, true));
                    prop_assert!(from > to);
                    prop_assert_ne!(&p, &packet);
                }
            }
            Ok(())
        },
    );
}

/// A TCP option as the generator writes it.
#[derive(Debug, Clone)]
enum Opt {
    Nop,
    Mss(u16),
    Other(u8, Vec<u8>),
}

fn option() -> impl Strategy<Value = Opt> {
    prop_oneof![
        Just(Opt::Nop),
        any::<u16>().prop_map(Opt::Mss),
        (3u8..=30, prop::collection::vec(any::<u8>(), 0..8)).prop_map(|(k, d)| Opt::Other(k, d)),
    ]
}

#[derive(Debug, Clone)]
struct Syn {
    v6: bool,
    ack: bool,
    addrs: [u8; 32],
    options: Vec<Opt>,
    payload: Vec<u8>,
}

fn syn() -> impl Strategy<Value = Syn> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<[u8; 32]>(),
        prop::collection::vec(option(), 0..6),
        prop::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(v6, ack, addrs, options, payload)| Syn {
            v6,
            ack,
            addrs,
            options,
            payload,
        })
}

/// The packet, where its TCP header starts, and the offsets of its MSS
/// values. `None` when the options do not fit the 40 bytes TCP allows.
fn build(s: &Syn) -> Option<(Vec<u8>, usize, Vec<usize>)> {
    let mut opts = Vec::new();
    let mut mss_at = Vec::new();
    for o in &s.options {
        match o {
            Opt::Nop => opts.push(1),
            Opt::Mss(v) => {
                mss_at.push(opts.len() + 2);
                opts.extend([2, 4]);
                opts.extend(v.to_be_bytes());
            }
            Opt::Other(k, d) => {
                opts.extend([*k, 2 + d.len() as u8]);
                opts.extend(d);
            }
        }
    }
    while opts.len() % 4 != 0 {
        opts.push(0);
    }
    if opts.len() > 40 {
        return None;
    }
    let tcp_len = 20 + opts.len() + s.payload.len();
    let ip_len = if s.v6 { 40 } else { 20 };
    let mut p = vec![0u8; ip_len + tcp_len];
    if s.v6 {
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        p[6] = 6;
        p[7] = 64;
        p[8..40].copy_from_slice(&s.addrs);
    } else {
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((ip_len + tcp_len) as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 6;
        p[12..20].copy_from_slice(&s.addrs[..8]);
    }
    let t = ip_len;
    p[t..t + 2].copy_from_slice(&40000u16.to_be_bytes());
    p[t + 2..t + 4].copy_from_slice(&443u16.to_be_bytes());
    p[t + 12] = (((20 + opts.len()) / 4) as u8) << 4;
    p[t + 13] = if s.ack { 0x12 } else { 0x02 };
    p[t + 20..t + 20 + opts.len()].copy_from_slice(&opts);
    p[t + 20 + opts.len()..].copy_from_slice(&s.payload);
    let sum = tcp_sum(&p, t, s.v6);
    p[t + 16..t + 18].copy_from_slice(&(!sum).to_be_bytes());
    Some((p, t, mss_at.into_iter().map(|o| t + 20 + o).collect()))
}

/// The folded sum of pseudo-header and TCP segment (the checksum field
/// included: 0xffff when it is valid).
fn tcp_sum(p: &[u8], tcp: usize, v6: bool) -> u16 {
    let len = (p.len() - tcp) as u64;
    let pseudo = if v6 {
        sum(&p[8..40], 0) + len + 6
    } else {
        sum(&p[12..20], 0) + len + 6
    };
    fold(sum(&p[tcp..], pseudo))
}

#[test]
fn mss_clamp_syn() {
    fuzz(
        "mss_clamp_syn",
        512,
        (syn(), 0u16..=9000, checksum_kind()),
        |(s, mtu, kind)| {
            let Some((orig, tcp, mss_at)) = build(&s) else {
                return Ok(());
            };
            prop_assert_eq!(tcp_sum(&orig, tcp, s.v6), 0xffff);
            let limit = mss_limit(mtu, s.v6);
            let mut p = orig.clone();
            let r = clamp_mss(&mut p, mtu, kind);
            // What the clamp should leave: every MSS value at most the limit.
            let mut want = orig.clone();
            let mut lowered = false;
            for &at in &mss_at {
                let v = u16::from_be_bytes([orig[at], orig[at + 1]]);
                if v > limit {
                    want[at..at + 2].copy_from_slice(&limit.to_be_bytes());
                    lowered = true;
                }
            }
            let sum_at = tcp + 16;
            let mut p_masked = p.clone();
            p_masked[sum_at..sum_at + 2].fill(0);
            want[sum_at..sum_at + 2].fill(0);
            prop_assert_eq!(&p_masked, &want);
            match kind {
                Checksum::Complete => prop_assert_eq!(tcp_sum(&p, tcp, s.v6), 0xffff),
                Checksum::Partial => {
                    prop_assert_eq!(&p[sum_at..sum_at + 2], &orig[sum_at..sum_at + 2])
                }
            }
            match (r, mss_at.is_empty(), lowered) {
                (Clamp::NoMss, true, _) | (Clamp::Fits, false, false) => {}
                (Clamp::Lowered { to, .. }, false, true) => prop_assert_eq!(to, limit),
                other => prop_assert!(false, "result {:?} for {} MSS options", other, mss_at.len()),
            }
            Ok(())
        },
    );
}

#[test]
fn checksum() {
    fuzz(
        "checksum",
        512,
        (
            prop::collection::vec(any::<u8>(), 0..300),
            any::<usize>(),
            any::<usize>(),
            any::<u16>(),
        ),
        |(data, split, word, new)| {
            // A sum split at an even offset adds up to the whole.
            let at = (split % (data.len() + 1)) & !1;
            prop_assert_eq!(
                fold(sum(&data[at..], sum(&data[..at], 0))),
                fold(sum(&data, 0))
            );
            // The reference: 16-bit words with end-around carry.
            let mut r: u32 = 0;
            for c in data.chunks(2) {
                r += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
                r = (r & 0xffff) + (r >> 16);
            }
            prop_assert_eq!(fold(sum(&data, 0)), r as u16);
            // Changing one aligned word: the incremental update equals
            // recomputing (as one's complement values: 0 and 0xffff are
            // the same number).
            if data.len() >= 2 {
                let w = (word % (data.len() / 2)) * 2;
                let old = u16::from_be_bytes([data[w], data[w + 1]]);
                let before = !fold(sum(&data, 0));
                let mut changed = data.clone();
                changed[w..w + 2].copy_from_slice(&new.to_be_bytes());
                let after = !fold(sum(&changed, 0));
                let updated = update_checksum(before, old, new);
                prop_assert!(
                    updated == after
                        || (updated, after) == (0, 0xffff)
                        || (updated, after) == (0xffff, 0),
                    "updated {updated:#x}, recomputed {after:#x}"
                );
            }
            Ok(())
        },
    );
}
