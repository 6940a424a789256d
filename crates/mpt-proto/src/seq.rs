//! Wrap-around comparison of 32-bit counters: per-path sequence numbers,
//! microsecond timestamps and the one-way delays computed from them.
//!
//! These values are 32 bits on the wire and wrap (a microsecond clock
//! every 71 minutes); a one-way delay also carries the offset between the
//! two peers' clocks, so it is an arbitrary `u32` too. Two of them compare
//! by their wrapping difference `a - b` (mod 2^32) read as a signed
//! number, which is right whenever they are less than 2^31 apart, wherever
//! the wrap falls. Written out, that test is easy to get subtly different
//! from one place to the next; these functions are the one definition.
//!
//! Two bounds are in use, and they differ at the half-way point:
//! * the sign of the difference ([`seq_diff`], [`seq_before`],
//!   [`seq_excess`]): `a - b` from 2^31 on is negative, so of two values
//!   exactly 2^31 apart each is before the other;
//! * a forward distance below `u32::MAX / 2` = 2^31 − 1 ([`below_half`],
//!   [`seq_after`]): stricter by two values, 2^31 − 1 and 2^31, which
//!   count neither as after nor as a plausible span.
//!
//! Pick the one a site had; the tests below pin both at the boundary.

/// The wrapping difference `a - b`, read as signed: positive when `a` is
/// after `b`, negative when before (2^31 apart reads as −2^31).
#[inline]
pub const fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// Whether `a` is strictly before `b`: `a - b` (mod 2^32) is 2^31 or
/// more. Never true for `a == b`.
#[inline]
pub const fn seq_before(a: u32, b: u32) -> bool {
    seq_diff(a, b) < 0
}

/// By how much `a` is past `b`: `a - b` when `a` is not before `b`, else
/// 0 (the signed difference clamped at zero).
#[inline]
pub const fn seq_excess(a: u32, b: u32) -> u32 {
    if seq_before(a, b) {
        0
    } else {
        a.wrapping_sub(b)
    }
}

/// Whether a wrapping difference or span `d` is below `u32::MAX / 2`
/// (2^31 − 1): small enough to be read as a forward step rather than a
/// counter that went back.
#[inline]
pub const fn below_half(d: u32) -> bool {
    d < u32::MAX / 2
}

/// Whether `a` is strictly after `b` by less than `u32::MAX / 2`. Note
/// that this is not `seq_before(b, a)`: at `a - b` of 2^31 − 1 and 2^31
/// that one is true and this is false.
#[inline]
pub const fn seq_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && below_half(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HALF: u32 = 1 << 31;

    /// `a - b` mod 2^32 and its signed reading, computed without wrapping
    /// arithmetic.
    fn reference(a: u32, b: u32) -> (u64, i64) {
        let d = (i64::from(a) - i64::from(b)).rem_euclid(1 << 32);
        let signed = if d >= 1 << 31 { d - (1 << 32) } else { d };
        (d as u64, signed)
    }

    /// Every function against the plain-integer reference and against the
    /// forms written out before (which must stay equivalent).
    fn check(a: u32, b: u32) {
        let (d, signed) = reference(a, b);
        assert_eq!(i64::from(seq_diff(a, b)), signed, "diff {a} {b}");
        assert_eq!(seq_before(a, b), signed < 0, "before {a} {b}");
        assert_eq!(seq_before(a, b), (a.wrapping_sub(b) as i32) < 0);
        assert_eq!(seq_before(a, b), a.wrapping_sub(b) > u32::MAX / 2);
        assert_eq!(!seq_before(a, b), a.wrapping_sub(b) <= u32::MAX / 2);
        assert_eq!(i64::from(seq_excess(a, b)), signed.max(0), "excess {a} {b}");
        assert_eq!(seq_excess(a, b), (a.wrapping_sub(b) as i32).max(0) as u32);
        assert_eq!(seq_after(a, b), (1..=u64::from(HALF) - 2).contains(&d));
        assert_eq!(below_half(a.wrapping_sub(b)), d <= u64::from(HALF) - 2);
    }

    /// Differences at and around 0, the half-way point and the top.
    fn boundary_differences() -> Vec<u32> {
        let mut v = Vec::new();
        for around in [0, HALF, u32::MAX] {
            for k in -3i64..=3 {
                v.push((i64::from(around) + k).rem_euclid(1 << 32) as u32);
            }
        }
        v
    }

    #[test]
    fn exhaustive_at_the_boundaries() {
        let bases = [
            0,
            1,
            2,
            HALF - 1,
            HALF,
            HALF + 1,
            u32::MAX - 1,
            u32::MAX,
            0x1234_5678,
        ];
        for b in bases {
            for d in boundary_differences() {
                check(b.wrapping_add(d), b);
            }
        }
    }

    #[test]
    fn known_answers() {
        assert!(seq_before(u32::MAX, 0) && !seq_before(0, u32::MAX));
        assert!(seq_before(5, 6) && !seq_before(6, 6) && !seq_before(7, 6));
        // Exactly half-way: before each other, after neither.
        assert!(seq_before(0, HALF) && seq_before(HALF, 0));
        assert!(!seq_after(0, HALF) && !seq_after(HALF, 0));
        assert!(seq_after(HALF - 2, 0) && !seq_after(HALF - 1, 0));
        assert!(seq_after(2, u32::MAX) && !seq_after(5, 5));
        assert_eq!(seq_diff(1, u32::MAX), 2);
        assert_eq!(seq_diff(u32::MAX, 1), -2);
        assert_eq!(seq_diff(HALF, 0), i32::MIN);
        assert_eq!(seq_excess(10, 3), 7);
        assert_eq!(seq_excess(3, 10), 0);
        assert_eq!(seq_excess(1, u32::MAX), 2);
        assert_eq!(seq_excess(HALF - 1, 0), HALF - 1);
        assert_eq!(seq_excess(HALF, 0), 0);
        assert!(below_half(u32::MAX / 2 - 1) && !below_half(u32::MAX / 2));
    }

    proptest! {
        #[test]
        fn matches_reference_anywhere(a in any::<u32>(), b in any::<u32>()) {
            check(a, b);
        }
    }
}
