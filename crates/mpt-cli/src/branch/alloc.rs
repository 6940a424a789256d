//! The next free tunnel address of a new branch: the lowest host address
//! of the server's `[tunnel]` prefix that is neither the server's own, nor
//! a connection's `peer_ipv4`/`peer_ipv6`, nor inside a connection's
//! `networks`. Lowest rather than "highest in use + 1" so that the gaps a
//! removed branch leaves are filled again and a prefix is never reported
//! full while it has room.
//!
//! IPv4 skips the prefix's network and broadcast addresses (except in a
//! /31, whose two addresses are both hosts); IPv6 skips the all-zero host
//! (the subnet-router anycast address).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use mptd::config::Prefix;

/// Why no address was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Every host address of the prefix is taken.
    #[error("no free address left in {prefix} ({used} in use): widen the server's [tunnel] prefix or remove a client")]
    Full {
        /// The server's tunnel prefix.
        prefix: Prefix,
        /// Addresses in use inside it.
        used: usize,
    },
}

/// Width of the family of `addr`, in bits.
fn bits(addr: IpAddr) -> u32 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn from_u128(v: u128, v4: bool) -> IpAddr {
    if v4 {
        // Only values below 2^32 are made for IPv4.
        IpAddr::V4(Ipv4Addr::from(v as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(v))
    }
}

/// The first and last address of `p`, as numbers.
fn span(p: &Prefix) -> (u128, u128) {
    let host_bits = bits(p.addr) - u32::from(p.len);
    let host_mask = u128::MAX.checked_shr(128 - host_bits).unwrap_or(0);
    let first = to_u128(p.addr) & !host_mask;
    (first, first | host_mask)
}

/// The prefix's network address (host bits cleared), e.g. 10.99.0.0/24
/// for the server's 10.99.0.1/24.
pub fn network_of(p: &Prefix) -> Prefix {
    Prefix {
        addr: from_u128(span(p).0, p.addr.is_ipv4()),
        len: p.len,
    }
}

/// The lowest address of `prefix` that is a host address, not in `used`
/// and in none of `avoid` (other families in either list are ignored).
pub fn next_free(prefix: &Prefix, used: &[IpAddr], avoid: &[Prefix]) -> Result<IpAddr, AllocError> {
    let v4 = prefix.addr.is_ipv4();
    let (first, last) = span(prefix);
    let host_bits = bits(prefix.addr) - u32::from(prefix.len);
    let (mut cand, end) = match (v4, host_bits) {
        (_, 0) => (first, last),
        (true, 1) => (first, last),
        (true, _) => (first + 1, last - 1),
        (false, _) => (first + 1, last),
    };
    let used: Vec<u128> = used
        .iter()
        .filter(|a| a.is_ipv4() == v4)
        .map(|&a| to_u128(a))
        .collect();
    let avoid: Vec<(u128, u128)> = avoid
        .iter()
        .filter(|p| p.addr.is_ipv4() == v4)
        .map(span)
        .collect();
    let full = || AllocError::Full {
        prefix: *prefix,
        used: used.iter().filter(|&&u| u >= first && u <= last).count(),
    };
    while cand <= end {
        if used.contains(&cand) {
            cand = cand.checked_add(1).ok_or_else(full)?;
        } else if let Some(&(_, top)) = avoid.iter().find(|(lo, hi)| (*lo..=*hi).contains(&cand)) {
            cand = top.checked_add(1).ok_or_else(full)?;
        } else {
            return Ok(from_u128(cand, v4));
        }
    }
    Err(full())
}

/// Whether two prefixes share an address.
pub fn overlap(a: &Prefix, b: &Prefix) -> bool {
    if a.addr.is_ipv4() != b.addr.is_ipv4() {
        return false;
    }
    let (a0, a1) = span(a);
    let (b0, b1) = span(b);
    a0 <= b1 && b0 <= a1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn first_free_after_the_server() {
        let prefix = p("10.99.0.1/24");
        assert_eq!(
            next_free(&prefix, &[ip("10.99.0.1")], &[]),
            Ok(ip("10.99.0.2"))
        );
        // The server anywhere in the prefix: still the lowest host.
        let prefix = p("10.99.0.254/24");
        assert_eq!(
            next_free(&prefix, &[ip("10.99.0.254")], &[]),
            Ok(ip("10.99.0.1"))
        );
    }

    #[test]
    fn gaps_are_filled_and_other_families_ignored() {
        let prefix = p("10.99.0.1/24");
        let used = [
            ip("10.99.0.1"),
            ip("10.99.0.2"),
            ip("10.99.0.4"),
            ip("fd00::3"),
            ip("10.98.0.3"),
        ];
        assert_eq!(next_free(&prefix, &used, &[]), Ok(ip("10.99.0.3")));
        // A connection routing part of the prefix: its range is skipped.
        let avoid = [p("10.99.0.0/30"), p("fd00::/64")];
        assert_eq!(next_free(&prefix, &used, &avoid), Ok(ip("10.99.0.5")));
    }

    #[test]
    fn a_full_prefix_is_an_error() {
        // /29: hosts .1 to .6 (.0 network, .7 broadcast).
        let prefix = p("192.168.5.1/29");
        let used: Vec<IpAddr> = (1..=6).map(|h| ip(&format!("192.168.5.{h}"))).collect();
        let e = next_free(&prefix, &used, &[]).unwrap_err();
        assert_eq!(e, AllocError::Full { prefix, used: 6 });
        assert!(e.to_string().contains("192.168.5.1/29 (6 in use)"), "{e}");
        assert_eq!(next_free(&prefix, &used[..5], &[]), Ok(ip("192.168.5.6")));
        // /31: both addresses are hosts; /32: nothing besides the server.
        assert_eq!(
            next_free(&p("10.0.0.0/31"), &[ip("10.0.0.0")], &[]),
            Ok(ip("10.0.0.1"))
        );
        assert!(next_free(&p("10.0.0.7/32"), &[ip("10.0.0.7")], &[]).is_err());
        // A prefix covered by an avoided one.
        assert!(next_free(&prefix, &[], &[p("192.168.0.0/16")]).is_err());
    }

    #[test]
    fn ipv6() {
        let prefix = p("fd00:99::1/64");
        let used = [ip("fd00:99::1"), ip("fd00:99::2")];
        assert_eq!(next_free(&prefix, &used, &[]), Ok(ip("fd00:99::3")));
        let prefix = p("fd00:99::1/127");
        assert_eq!(
            next_free(&prefix, &[ip("fd00:99::1")], &[]).unwrap_err(),
            AllocError::Full { prefix, used: 1 }
        );
        // The whole space, avoided up to the last address: no overflow.
        let prefix = p("::1/0");
        assert!(next_free(&prefix, &[], &[p("::/0")]).is_err());
        assert_eq!(network_of(&p("fd00:99::1/64")), p("fd00:99::/64"));
        assert_eq!(network_of(&p("10.99.0.1/24")), p("10.99.0.0/24"));
        assert_eq!(network_of(&p("0.0.0.0/0")), p("0.0.0.0/0"));
    }

    #[test]
    fn overlaps() {
        assert!(overlap(&p("10.0.0.0/8"), &p("10.1.2.0/24")));
        assert!(overlap(&p("10.1.2.0/24"), &p("10.0.0.0/8")));
        assert!(!overlap(&p("10.1.2.0/24"), &p("10.1.3.0/24")));
        assert!(!overlap(&p("10.1.2.0/24"), &p("fd00::/8")));
    }
}
