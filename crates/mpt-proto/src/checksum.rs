//! The Internet checksum's two halves (RFC 1071), written once: the
//! one's-complement sum of 16-bit big-endian words, left unfolded so sums
//! of several parts (pseudo-header, header, payload) can be added, and the
//! fold to 16 bits. The tun writer's GSO headers and the MSS clamp's tests
//! both build on them.

/// `acc` plus the one's-complement sum of `data` as big-endian 16-bit
/// words (an odd last byte is padded with a zero byte), unfolded.
#[inline]
pub fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// `acc` folded to 16 bits (carries added back in); the checksum field
/// holds its complement.
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
    }

    #[test]
    fn odd_tail_is_padded_and_parts_add_up() {
        assert_eq!(sum(&[0xab], 0), 0xab00);
        let data = [1u8, 2, 3, 4, 5, 6, 7];
        let whole = fold(sum(&data, 0));
        let parts = fold(sum(&data[4..], sum(&data[..4], 0)));
        assert_eq!(whole, parts);
    }
}
