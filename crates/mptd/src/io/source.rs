//! Which local address a datagram came in on, and sending from it
//! (`IP_PKTINFO` / `IPV6_PKTINFO`).
//!
//! A shared port is bound to the wildcard address (`0.0.0.0` and `[::]`),
//! so on a server with several addresses the kernel would pick the source
//! of every reply by routing alone. A client that sent to address B would
//! then hear from address A: its NAT or stateful firewall has no mapping
//! for A and drops the reply, and the client never gets its tunnel. So the
//! shared sockets ask the kernel for each datagram's destination address
//! ([`enable`], [`parse`]); a learnt path keeps the one its client's
//! datagrams arrive on, and everything sent on that path carries it back as
//! the source ([`write`]), beside the `UDP_SEGMENT` message of a GSO send.
//!
//! Only the source address is pinned: the outgoing interface stays the
//! routing table's choice (interface index 0), except for IPv6 link-local
//! addresses, which mean nothing without their interface.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};

/// The local address a datagram arrived on; replies leave from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// Our address the datagram was sent to.
    pub addr: IpAddr,
    /// The interface it arrived on (used only for IPv6 link-local).
    pub ifindex: u32,
}

/// Bytes a control buffer needs for the largest source message
/// (`CMSG_SPACE(sizeof(struct in6_pktinfo))`, 40 on 64-bit Linux).
pub const CMSG_SPACE: usize = 40;

/// Asks the kernel to report each datagram's destination address on
/// `socket` (an IPv6-only socket for `v6`).
pub fn enable(socket: &UdpSocket, v6: bool) -> io::Result<()> {
    if v6 {
        crate::io::udp::set_int_opt(socket, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)
    } else {
        crate::io::udp::set_int_opt(socket, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)
    }
}

/// The destination address the kernel attached to a received message, if
/// the socket asked for it.
pub fn parse(msg: &libc::msghdr) -> Option<Source> {
    // SAFETY: msg was filled by recvmsg/recvmmsg; the CMSG_* macros walk
    // the control buffer within msg_controllen, and each payload is read
    // (unaligned) only from a message of the type that carries it, whose
    // length the kernel set to at least that payload's size.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let data = libc::CMSG_DATA(cmsg);
            if c.cmsg_level == libc::IPPROTO_IP
                && c.cmsg_type == libc::IP_PKTINFO
                && c.cmsg_len as usize
                    >= libc::CMSG_LEN(size_of::<libc::in_pktinfo>() as u32) as usize
            {
                let info = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                return Some(Source {
                    addr: IpAddr::V4(Ipv4Addr::from(u32::from_be(info.ipi_spec_dst.s_addr))),
                    ifindex: u32::try_from(info.ipi_ifindex).unwrap_or(0),
                });
            }
            if c.cmsg_level == libc::IPPROTO_IPV6
                && c.cmsg_type == libc::IPV6_PKTINFO
                && c.cmsg_len as usize
                    >= libc::CMSG_LEN(size_of::<libc::in6_pktinfo>() as u32) as usize
            {
                let info = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                return Some(Source {
                    addr: IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)),
                    ifindex: info.ipi6_ifindex,
                });
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// Whether `addr` is an IPv6 unicast link-local address (fe80::/10).
fn link_local(addr: &Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// Writes the message that makes a send leave from `src` at `cmsg`, and
/// returns the bytes it takes (`CMSG_SPACE` of its payload).
///
/// # Safety
/// `cmsg` must point at the next free message of a control buffer with at
/// least [`CMSG_SPACE`] bytes left, aligned for `cmsghdr`.
pub unsafe fn write(cmsg: *mut libc::cmsghdr, src: &Source) -> usize {
    // SAFETY (whole body): the caller gives room and alignment for one
    // message of the largest payload; payloads are written unaligned.
    unsafe {
        match src.addr {
            IpAddr::V4(a) => {
                let size = size_of::<libc::in_pktinfo>() as u32;
                (*cmsg).cmsg_level = libc::IPPROTO_IP;
                (*cmsg).cmsg_type = libc::IP_PKTINFO;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size) as usize;
                let info = libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from(a).to_be(),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), info);
                libc::CMSG_SPACE(size) as usize
            }
            IpAddr::V6(a) => {
                let size = size_of::<libc::in6_pktinfo>() as u32;
                (*cmsg).cmsg_level = libc::IPPROTO_IPV6;
                (*cmsg).cmsg_type = libc::IPV6_PKTINFO;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size) as usize;
                let info = libc::in6_pktinfo {
                    ipi6_addr: libc::in6_addr {
                        s6_addr: a.octets(),
                    },
                    ipi6_ifindex: if link_local(&a) { src.ifindex } else { 0 },
                };
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), info);
                libc::CMSG_SPACE(size) as usize
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_message_fits_the_space_reserved_for_it() {
        // SAFETY: pure size computations.
        let (v4, v6) = unsafe {
            (
                libc::CMSG_SPACE(size_of::<libc::in_pktinfo>() as u32) as usize,
                libc::CMSG_SPACE(size_of::<libc::in6_pktinfo>() as u32) as usize,
            )
        };
        assert!(v4 <= CMSG_SPACE && v6 <= CMSG_SPACE, "{v4} {v6}");
    }

    #[test]
    fn link_local_is_fe80_slash_10() {
        assert!(link_local(&"fe80::1".parse().unwrap()));
        assert!(link_local(&"febf::1".parse().unwrap()));
        assert!(!link_local(&"fec0::1".parse().unwrap()));
        assert!(!link_local(&"fd00::1".parse().unwrap()));
    }
}
