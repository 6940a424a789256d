//! Pinned acceleration legs: which tunnel path a leg's packets take.
//!
//! TCP acceleration (`mpt_accel`, docs/ACCELERATION.md) can run a flow
//! over a *set* of legs, one per path, each with its own congestion
//! control at its own path's round trip. For that, each leg's packets
//! (data one way, ACKs the other) must all travel on its path, and the
//! receiver must not hold them to the slowest path's delay (delay
//! equalisation would give every leg the satellite's round trip again).
//!
//! A pinned leg marks its packets with DSCP `path + 1` (`IP_TOS`,
//! `IPV6_TCLASS` on its socket, at both gateways). A packet is a pinned
//! leg's when it is TCP between this connection's two tunnel addresses
//! (either way), one of its ports is `accel_port`, and its DSCP is not
//! zero: nothing else has those addresses (the tunnel addresses are the
//! gateways' own, forwarded LAN traffic never carries them), so user
//! traffic is never pinned whatever DSCP it carries. The transmit stage
//! sends such a packet on path `DSCP - 1` when that path is eligible
//! (else the scheduler picks, as for any packet); the receive stage
//! skips its equalisation hold. Single legs (DSCP 0) are untouched.

use std::net::IpAddr;

use crate::config::{ConnectionConfig, TunnelConfig};

const PROTO_TCP: u8 = 6;

/// One connection's pinned-leg test. The default pins nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LegPin {
    /// `accel_port` (0: nothing is pinned).
    port: u16,
    /// (this side's tunnel address, the peer's), IPv4 and IPv6.
    v4: Option<([u8; 4], [u8; 4])>,
    v6: Option<([u8; 16], [u8; 16])>,
}

impl LegPin {
    /// The test for connection `c` (nothing pinned without `accel_port`
    /// or tunnel addresses at both ends).
    pub fn for_connection(tunnel: &TunnelConfig, c: &ConnectionConfig) -> LegPin {
        let port = tunnel.accel.port;
        let v4 = match (tunnel.ipv4.map(|p| p.addr), c.peer_ipv4) {
            (Some(IpAddr::V4(a)), Some(IpAddr::V4(b))) => Some((a.octets(), b.octets())),
            _ => None,
        };
        let v6 = match (tunnel.ipv6.map(|p| p.addr), c.peer_ipv6) {
            (Some(IpAddr::V6(a)), Some(IpAddr::V6(b))) => Some((a.octets(), b.octets())),
            _ => None,
        };
        LegPin { port, v4, v6 }
    }

    /// The path id `packet` is pinned to, if it is a pinned leg's.
    #[inline]
    pub fn path(&self, packet: &[u8]) -> Option<usize> {
        if self.port == 0 {
            return None;
        }
        let first = *packet.first()?;
        let (dscp, tcp) = match first >> 4 {
            4 => {
                let (a, b) = self.v4?;
                let h = packet.get(..20)?;
                let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
                if h[9] != PROTO_TCP || fragment != 0 {
                    return None;
                }
                let (src, dst) = (&h[12..16], &h[16..20]);
                if !((src == a && dst == b) || (src == b && dst == a)) {
                    return None;
                }
                let ihl = usize::from(first & 0x0f) * 4;
                if ihl < 20 {
                    return None;
                }
                (h[1] >> 2, ihl)
            }
            6 => {
                let (a, b) = self.v6?;
                let h = packet.get(..40)?;
                if h[6] != PROTO_TCP {
                    return None;
                }
                let (src, dst) = (&h[8..24], &h[24..40]);
                if !((src == a && dst == b) || (src == b && dst == a)) {
                    return None;
                }
                (((first & 0x0f) << 2) | (h[1] >> 6), 40)
            }
            _ => return None,
        };
        let ports = packet.get(tcp..tcp + 4)?;
        let (sport, dport) = (
            u16::from_be_bytes([ports[0], ports[1]]),
            u16::from_be_bytes([ports[2], ports[3]]),
        );
        if dscp == 0 || (sport != self.port && dport != self.port) {
            return None;
        }
        Some(usize::from(dscp - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORT: u16 = 7411;

    fn pin() -> LegPin {
        LegPin {
            port: PORT,
            v4: Some(([10, 99, 0, 2], [10, 99, 0, 1])),
            v6: Some((
                "fd99::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
                "fd99::1".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            )),
        }
    }

    fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, dscp: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[1] = dscp << 2;
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    fn v6(src: &str, dst: &str, dscp: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x60 | (dscp >> 2);
        p[1] = (dscp & 3) << 6;
        p[6] = PROTO_TCP;
        p[8..24].copy_from_slice(&src.parse::<std::net::Ipv6Addr>().unwrap().octets());
        p[24..40].copy_from_slice(&dst.parse::<std::net::Ipv6Addr>().unwrap().octets());
        p[40..42].copy_from_slice(&sport.to_be_bytes());
        p[42..44].copy_from_slice(&dport.to_be_bytes());
        p
    }

    #[test]
    fn legs_between_the_tunnel_addresses_are_pinned_both_ways() {
        let (a, b) = ([10, 99, 0, 2], [10, 99, 0, 1]);
        let p = pin();
        assert_eq!(p.path(&v4(a, b, PROTO_TCP, 1, 40000, PORT)), Some(0));
        assert_eq!(p.path(&v4(b, a, PROTO_TCP, 2, PORT, 40000)), Some(1));
        assert_eq!(p.path(&v4(a, b, PROTO_TCP, 63, 40000, PORT)), Some(62));
        assert_eq!(p.path(&v6("fd99::1", "fd99::2", 3, PORT, 1)), Some(2));
        assert_eq!(p.path(&v6("fd99::2", "fd99::1", 1, 1, PORT)), Some(0));
    }

    #[test]
    fn everything_else_is_not() {
        let (a, b) = ([10, 99, 0, 2], [10, 99, 0, 1]);
        let p = pin();
        // A single leg (DSCP 0), another port, UDP, other addresses.
        assert_eq!(p.path(&v4(a, b, PROTO_TCP, 0, 40000, PORT)), None);
        assert_eq!(p.path(&v4(a, b, PROTO_TCP, 1, 40000, 80)), None);
        assert_eq!(p.path(&v4(a, b, 17, 1, 40000, PORT)), None);
        assert_eq!(p.path(&v4([10, 78, 0, 2], b, PROTO_TCP, 46, 1, PORT)), None);
        assert_eq!(p.path(&v4(a, a, PROTO_TCP, 1, 1, PORT)), None);
        assert_eq!(p.path(&v6("fd99::3", "fd99::1", 1, 1, PORT)), None);
        // A non-first fragment, short and odd packets.
        let mut frag = v4(a, b, PROTO_TCP, 1, 40000, PORT);
        frag[7] = 1;
        assert_eq!(p.path(&frag), None);
        for n in 0..44 {
            let _ = p.path(&v4(a, b, PROTO_TCP, 1, 1, PORT)[..n.min(40)]);
            let _ = p.path(&v6("fd99::2", "fd99::1", 1, 1, PORT)[..n]);
        }
        assert_eq!(p.path(&[0x55; 40]), None);
        // Off without a port.
        assert_eq!(
            LegPin::default().path(&v4(a, b, PROTO_TCP, 1, 40000, PORT)),
            None
        );
    }
}
