//! Which connection a packet read from tun belongs to.
//!
//! The destination address picks the connection: each peer's tunnel
//! addresses (as host routes) and its `networks`. Longest prefix wins. The
//! table is small (a few entries per peer) and read-only while running, so
//! a linear scan over entries sorted by prefix length is both simplest and
//! fastest here.

use std::net::IpAddr;

use crate::config::{Config, Prefix};

/// Destination → connection index.
#[derive(Debug, Clone, Default)]
pub struct Router {
    v4: Vec<(u32, u32, usize)>,
    v6: Vec<(u128, u128, usize)>,
}

impl Router {
    /// Builds the table from a validated config.
    pub fn from_config(config: &Config) -> Router {
        let mut entries: Vec<(Prefix, usize)> = Vec::new();
        for (i, c) in config.connections.iter().enumerate() {
            for a in [c.peer_ipv4, c.peer_ipv6].into_iter().flatten() {
                let len = if a.is_ipv4() { 32 } else { 128 };
                entries.push((Prefix { addr: a, len }, i));
            }
            entries.extend(c.networks.iter().map(|p| (*p, i)));
        }
        entries.sort_by_key(|(p, _)| std::cmp::Reverse(p.len));
        let mut r = Router::default();
        for (p, i) in entries {
            match p.addr {
                IpAddr::V4(a) => {
                    let mask = u32::MAX.checked_shl(32 - u32::from(p.len)).unwrap_or(0);
                    r.v4.push((u32::from(a) & mask, mask, i));
                }
                IpAddr::V6(a) => {
                    let mask = u128::MAX.checked_shl(128 - u32::from(p.len)).unwrap_or(0);
                    r.v6.push((u128::from(a) & mask, mask, i));
                }
            }
        }
        r
    }

    /// The connection for the packet's destination, if any.
    pub fn lookup(&self, packet: &[u8]) -> Option<usize> {
        match packet.first()? >> 4 {
            4 => {
                let d: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
                let d = u32::from_be_bytes(d);
                self.v4
                    .iter()
                    .find(|(net, mask, _)| d & mask == *net)
                    .map(|e| e.2)
            }
            6 => {
                let d: [u8; 16] = packet.get(24..40)?.try_into().ok()?;
                let d = u128::from_be_bytes(d);
                self.v6
                    .iter()
                    .find(|(net, mask, _)| d & mask == *net)
                    .map(|e| e.2)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    fn v4_to(d: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0u8; 20];
        p[0] = 0x45;
        p[16..20].copy_from_slice(&d);
        p
    }

    fn v6_to(d: &str) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        let a: std::net::Ipv6Addr = d.parse().unwrap();
        p[24..40].copy_from_slice(&a.octets());
        p
    }

    #[test]
    fn peers_and_networks_longest_prefix_first() {
        let cfg = parse(
            r#"
[tunnel]
ipv4 = "192.168.1.1/24"
[[connection]]
name = "a"
peer_ipv4 = "192.168.1.2"
peer_ipv6 = "fd00::2"
networks = ["10.0.0.0/8"]
[[connection.path]]
name = "p"
local = "127.0.0.1"
[[connection]]
name = "b"
id = 2
peer_ipv4 = "192.168.1.3"
networks = ["10.1.0.0/16", "fd00:1::/32"]
[[connection.path]]
name = "p"
local = "127.0.0.1"
"#,
            "t",
        )
        .unwrap();
        let r = Router::from_config(&cfg);
        assert_eq!(r.lookup(&v4_to([192, 168, 1, 2])), Some(0));
        assert_eq!(r.lookup(&v4_to([192, 168, 1, 3])), Some(1));
        assert_eq!(r.lookup(&v4_to([192, 168, 1, 4])), None);
        assert_eq!(r.lookup(&v4_to([10, 2, 0, 1])), Some(0));
        assert_eq!(
            r.lookup(&v4_to([10, 1, 0, 1])),
            Some(1),
            "longer prefix wins"
        );
        assert_eq!(r.lookup(&v6_to("fd00::2")), Some(0));
        assert_eq!(r.lookup(&v6_to("fd00:1::9")), Some(1));
        assert_eq!(r.lookup(&v6_to("ff02::16")), None);
        assert_eq!(r.lookup(&[0x45, 0, 0]), None, "truncated packet");
        assert_eq!(r.lookup(&[]), None);
    }
}
