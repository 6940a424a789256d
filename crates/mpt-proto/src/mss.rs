//! TCP MSS clamping: lowering the maximum segment size a TCP handshake
//! announces to what fits through the tunnel.
//!
//! Why: the tunnel's MTU is smaller than the links of the hosts on either
//! side, so a TCP connection between them would announce an MSS that fits
//! their own links (1460 on Ethernet) and send segments the tunnel cannot
//! carry. Path-MTU discovery is supposed to fix that, but it needs the
//! ICMP "fragmentation needed" messages to come back, and firewalls and
//! NAT routers on the way often drop them: the connection then hangs as
//! soon as it sends a full segment. Rewriting the MSS option of every SYN
//! and SYN-ACK that enters the tunnel makes both ends send segments that
//! fit from the start, whatever happens to ICMP.
//!
//! The limit is the tunnel MTU minus the fixed IP and TCP headers:
//! `mtu - 40` for IPv4 and `mtu - 60` for IPv6 (see [`mss_limit`]). The
//! option is only ever lowered, never raised; a SYN without an MSS option
//! is left alone (TCP then assumes 536 or 1220, which fits anyway).
//!
//! The TCP checksum is updated incrementally (RFC 1624, eqn. 3) over the
//! 16 bits that changed, so the cost does not grow with the segment. This
//! assumes the checksum is complete, that is covers the TCP header: a
//! packet with a partial checksum (the kernel's `CHECKSUM_PARTIAL`, where
//! the field holds only the pseudo-header sum and the rest is left to the
//! device) must be passed as [`Checksum::Partial`], which rewrites the
//! option and leaves the field alone (the sum that will be computed later
//! covers the new bytes).
//!
//! Nothing here panics or allocates, whatever the bytes: a packet that is
//! not a TCP SYN, or whose IP header, TCP header or options are cut short
//! or malformed, is returned untouched. A packet that is not a SYN is
//! recognised within a few byte reads (the data path calls this for
//! every packet).

use crate::flow::v6_transport;

const PROTO_TCP: u8 = 6;
const TCP_SYN: u8 = 0x02;
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;
const OPT_MSS_LEN: u8 = 4;
/// Offset of the checksum in the TCP header.
const TCP_CHECKSUM: usize = 16;

/// What the TCP checksum field of a packet holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// The full checksum over pseudo-header, header and data: updated
    /// along with the option.
    Complete,
    /// Only the pseudo-header sum, the rest to be added by whoever sends
    /// the packet on (`CHECKSUM_PARTIAL`): not touched.
    Partial,
}

/// What [`clamp_mss`] did to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clamp {
    /// Not a TCP segment with SYN (or not one that can be parsed):
    /// untouched.
    NotSyn,
    /// A SYN without an MSS option (or with options cut short before
    /// one): untouched.
    NoMss,
    /// The MSS option already fits: untouched.
    Fits,
    /// The MSS option was lowered.
    Lowered {
        /// The MSS the sender announced.
        from: u16,
        /// The MSS now in the packet.
        to: u16,
    },
}

/// The largest MSS a segment of the given IP version may announce through
/// a tunnel of `mtu` bytes: `mtu - 40` for IPv4, `mtu - 60` for IPv6.
pub fn mss_limit(mtu: u16, ipv6: bool) -> u16 {
    mtu.saturating_sub(if ipv6 { 60 } else { 40 })
}

/// Lowers the MSS option of `packet` (an IPv4 or IPv6 packet) to
/// [`mss_limit`]`(mtu, …)` when it is a TCP SYN (or SYN-ACK) announcing
/// more, updating the TCP checksum per `checksum`. See the module
/// documentation.
#[inline]
pub fn clamp_mss(packet: &mut [u8], mtu: u16, checksum: Checksum) -> Clamp {
    if !may_be_syn(packet) {
        return Clamp::NotSyn;
    }
    clamp_syn(packet, mtu, checksum)
}

/// The early-out, inlined into the caller: false for a packet that is
/// certainly no TCP SYN (a few byte reads); true for a SYN and for what
/// needs a closer look (IPv6 extension headers, anything cut short).
#[inline]
fn may_be_syn(p: &[u8]) -> bool {
    let Some(&first) = p.first() else {
        return false;
    };
    let (proto, tcp) = match first >> 4 {
        4 => (p.get(9), usize::from(first & 0x0f) * 4),
        6 => match p.get(6) {
            Some(&PROTO_TCP) => (Some(&PROTO_TCP), 40),
            next => return next.is_some(),
        },
        _ => return false,
    };
    proto == Some(&PROTO_TCP) && p.get(tcp + 13).is_none_or(|flags| flags & TCP_SYN != 0)
}

/// [`clamp_mss`] past the early-out.
#[inline(never)]
fn clamp_syn(packet: &mut [u8], mtu: u16, checksum: Checksum) -> Clamp {
    let Some((tcp, limit)) = syn_header(packet, mtu) else {
        return Clamp::NotSyn;
    };
    clamp_options(packet, tcp, limit, checksum)
}

/// Where the TCP header of a SYN starts in `p`, and the MSS limit for
/// its IP version; `None` for anything else.
fn syn_header(p: &[u8], mtu: u16) -> Option<(usize, u16)> {
    let first = *p.first()?;
    let (tcp, ipv6) = match first >> 4 {
        4 => {
            let fixed = p.get(..20)?;
            let fragment = u16::from_be_bytes([fixed[6], fixed[7]]) & 0x1fff;
            let ihl = usize::from(first & 0x0f) * 4;
            if fixed[9] != PROTO_TCP || fragment != 0 || ihl < 20 {
                return None;
            }
            (ihl, false)
        }
        6 => {
            let next = *p.get(6)?;
            if next == PROTO_TCP {
                (40, true)
            } else {
                // Extension headers: rare, walked only then.
                let (proto, transport) = v6_transport(p, next, 40)?;
                if proto != PROTO_TCP {
                    return None;
                }
                (p.len() - transport?.len(), true)
            }
        }
        _ => return None,
    };
    let flags = *p.get(tcp.checked_add(13)?)?;
    if flags & TCP_SYN == 0 {
        return None;
    }
    Some((tcp, mss_limit(mtu, ipv6)))
}

/// Walks the options of the SYN whose TCP header starts at `tcp` and
/// lowers every MSS option above `limit` (a receiver takes the last one
/// it finds, so a packet carrying two gets both clamped).
fn clamp_options(p: &mut [u8], tcp: usize, limit: u16, checksum: Checksum) -> Clamp {
    let Some(&doff) = p.get(tcp + 12) else {
        return Clamp::NotSyn;
    };
    let header_len = usize::from(doff >> 4) * 4;
    let end = tcp + header_len;
    if header_len < 20 || end > p.len() {
        return Clamp::NotSyn;
    }
    let mut result = Clamp::NoMss;
    let mut at = tcp + 20;
    while at < end {
        let kind = p[at];
        match kind {
            OPT_END => break,
            OPT_NOP => {
                at += 1;
                continue;
            }
            _ => {}
        }
        let Some(&len) = p.get(at + 1).filter(|_| at + 1 < end) else {
            break;
        };
        let len = usize::from(len);
        if len < 2 || at + len > end {
            break;
        }
        if kind == OPT_MSS && len == usize::from(OPT_MSS_LEN) {
            let value_at = at + 2;
            let old = u16::from_be_bytes([p[value_at], p[value_at + 1]]);
            if old > limit {
                p[value_at..value_at + 2].copy_from_slice(&limit.to_be_bytes());
                if checksum == Checksum::Complete {
                    // The checksum sums 16-bit words from the TCP header's
                    // start: a value at an odd offset straddles two words,
                    // where its bytes count swapped.
                    let odd = (value_at - tcp) % 2 == 1;
                    let (o, n) = if odd {
                        (old.swap_bytes(), limit.swap_bytes())
                    } else {
                        (old, limit)
                    };
                    let sum_at = tcp + TCP_CHECKSUM;
                    let sum = u16::from_be_bytes([p[sum_at], p[sum_at + 1]]);
                    p[sum_at..sum_at + 2]
                        .copy_from_slice(&update_checksum(sum, o, n).to_be_bytes());
                }
                result = match result {
                    // Two options: report the first announced value.
                    Clamp::Lowered { from, .. } => Clamp::Lowered { from, to: limit },
                    _ => Clamp::Lowered {
                        from: old,
                        to: limit,
                    },
                };
            } else if result == Clamp::NoMss {
                result = Clamp::Fits;
            }
        }
        at += len;
    }
    result
}

/// RFC 1624 eqn. 3: the checksum `sum` after a 16-bit word of the summed
/// data changed from `old` to `new`: `~(~sum + ~old + new)` in one's
/// complement arithmetic.
#[inline]
pub fn update_checksum(sum: u16, old: u16, new: u16) -> u16 {
    let mut acc = u32::from(!sum) + u32::from(!old) + u32::from(new);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    !(acc as u16)
}

#[cfg(test)]
mod tests;
