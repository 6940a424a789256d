//! Bundle payloads that prove what arrived: each payload starts with a
//! header line `MPTDTN1 <id> <filler length> <sha256 of the filler>\n`
//! followed by filler bytes derived from the id. The destination finds the
//! header inside the CBOR bundle dtnd hands out (the payload block is a
//! definite-length byte string, so its bytes are contiguous), reads the
//! id and checks the digest: a bundle that arrived cut, altered or twice is
//! seen as such. No CBOR decoder is needed for that, and nothing here does
//! I/O (unit-tested).

use ring::digest::{digest, SHA256};

const MAGIC: &[u8] = b"MPTDTN1 ";
/// Longest header: magic, three fields and the newline.
const MAX_HEADER: usize = 8 + 20 + 1 + 20 + 1 + 64 + 1;

/// What the destination made of one bundle it received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Header found and the filler matches its digest.
    Good { id: u64, len: usize },
    /// Header found, but the filler is short or does not match.
    Corrupt { id: u64 },
    /// No header: not one of ours.
    Foreign,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Deterministic filler of bundle `id` (xorshift64*, seeded by the id).
fn filler(id: u64, len: usize) -> Vec<u8> {
    let mut x = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The payload of bundle `id`: `size` bytes in all (one less where the
/// length field's digit count leaves no exact fit; at least the header).
pub fn make(id: u64, size: usize) -> Vec<u8> {
    // The header's length depends on the filler's length: settle it (the
    // digit count changes at most once).
    let header_len = |fill: usize| format!("MPTDTN1 {id} {fill} ").len() + 64 + 1;
    let mut fill_len = size.saturating_sub(header_len(size));
    for _ in 0..3 {
        fill_len = size.saturating_sub(header_len(fill_len));
    }
    let fill = filler(id, fill_len);
    let sum = hex(digest(&SHA256, &fill).as_ref());
    let mut out = format!("MPTDTN1 {id} {fill_len} {sum}\n").into_bytes();
    out.extend_from_slice(&fill);
    out
}

/// Finds and checks the payload of `make` inside `bundle` (raw CBOR).
pub fn parse(bundle: &[u8]) -> Parsed {
    let Some(start) = bundle.windows(MAGIC.len()).position(|w| w == MAGIC) else {
        return Parsed::Foreign;
    };
    let rest = &bundle[start..];
    let Some(nl) = rest.iter().take(MAX_HEADER).position(|&b| b == b'\n') else {
        return Parsed::Foreign;
    };
    let Ok(header) = std::str::from_utf8(&rest[MAGIC.len()..nl]) else {
        return Parsed::Foreign;
    };
    let mut f = header.split(' ');
    let (Some(id), Some(len), Some(sum), None) = (f.next(), f.next(), f.next(), f.next()) else {
        return Parsed::Foreign;
    };
    let (Ok(id), Ok(len)) = (id.parse::<u64>(), len.parse::<usize>()) else {
        return Parsed::Foreign;
    };
    let body = &rest[nl + 1..];
    if body.len() < len || hex(digest(&SHA256, &body[..len]).as_ref()) != sum {
        return Parsed::Corrupt { id };
    }
    Parsed::Good {
        id,
        len: nl + 1 + len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CBOR-ish frame around the payload: bytes before and after.
    fn wrapped(p: &[u8]) -> Vec<u8> {
        let mut b = vec![0x9f, 0x89, 0x07, 0x00, 0x5a, 0x00, 0x0f, 0x42, 0x40];
        b.extend_from_slice(p);
        b.extend_from_slice(&[0x86, 0x07, 0x02, 0x00, 0xff]);
        b
    }

    #[test]
    fn round_trip_through_a_frame() {
        for (id, size) in [(0u64, 1000usize), (7, 1_000_000), (u64::MAX, 4096)] {
            let p = make(id, size);
            assert_eq!(p.len(), size, "id {id}");
            assert_eq!(parse(&wrapped(&p)), Parsed::Good { id, len: size });
        }
    }

    #[test]
    fn fillers_differ_between_ids() {
        assert_ne!(make(1, 2000)[100..], make(2, 2000)[100..]);
    }

    #[test]
    fn altered_or_cut_payload_is_corrupt() {
        let mut p = make(3, 5000);
        let last = p.len() - 1;
        p[last] ^= 1;
        assert_eq!(parse(&wrapped(&p)), Parsed::Corrupt { id: 3 });
        let p = make(4, 5000);
        assert_eq!(parse(&p[..4000]), Parsed::Corrupt { id: 4 });
    }

    #[test]
    fn anything_else_is_foreign() {
        assert_eq!(parse(b"Nothing to receive"), Parsed::Foreign);
        assert_eq!(parse(b"MPTDTN1 x y z\nabc"), Parsed::Foreign);
        assert_eq!(parse(b"MPTDTN1 no newline"), Parsed::Foreign);
    }
}
