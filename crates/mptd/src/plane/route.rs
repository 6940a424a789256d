//! Which connection a packet read from tun belongs to.
//!
//! The destination address picks the connection: each peer's tunnel
//! addresses (as host routes) and its `networks`. Longest prefix wins,
//! with a hash table per prefix length ([`Router`]), so a server with many
//! clients routes a packet at the same cost as one with a single peer.
//!
//! The same prefixes, read the other way, say which inner source addresses
//! a peer may send from ([`SourceFilter`]): on a daemon with several peers,
//! one peer must not be able to inject packets that claim to come from
//! another peer's addresses (or from anything it is not routed for).

use std::collections::HashMap;
use std::net::IpAddr;

use crate::config::{Config, ConnectionConfig, Prefix};

/// `(network, mask)` pairs of IPv4 and IPv6 prefixes.
type Masked = (Vec<(u32, u32)>, Vec<(u128, u128)>);

/// The prefixes as `(network, mask)` pairs, per family.
fn masked(prefixes: impl IntoIterator<Item = Prefix>) -> Masked {
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    for p in prefixes {
        match p.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(p.len)).unwrap_or(0);
                v4.push((u32::from(a) & mask, mask));
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(p.len)).unwrap_or(0);
                v6.push((u128::from(a) & mask, mask));
            }
        }
    }
    (v4, v6)
}

/// The prefixes a connection routes to: its peer's tunnel addresses (as
/// host prefixes) and its `networks`.
fn peer_prefixes(c: &ConnectionConfig) -> impl Iterator<Item = Prefix> + '_ {
    [c.peer_ipv4, c.peer_ipv6]
        .into_iter()
        .flatten()
        .map(|a| Prefix {
            addr: a,
            len: if a.is_ipv4() { 32 } else { 128 },
        })
        .chain(c.networks.iter().copied())
}

/// Which inner source addresses one peer may use: the prefixes routed to
/// it. Checked per received data packet (a scan of a few entries).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceFilter {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl SourceFilter {
    /// The filter of one connection.
    pub fn for_connection(c: &ConnectionConfig) -> SourceFilter {
        let (v4, v6) = masked(peer_prefixes(c));
        SourceFilter { v4, v6 }
    }

    /// Whether the (already checked) IP packet's source address is allowed.
    pub fn allows(&self, packet: &[u8]) -> bool {
        match packet.first().map(|b| b >> 4) {
            Some(4) => match packet.get(12..16).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
                Some(s) => {
                    let s = u32::from_be_bytes(s);
                    self.v4.iter().any(|(net, mask)| s & mask == *net)
                }
                None => false,
            },
            Some(6) => match packet.get(8..24).and_then(|b| <[u8; 16]>::try_from(b).ok()) {
                Some(s) => {
                    let s = u128::from_be_bytes(s);
                    self.v6.iter().any(|(net, mask)| s & mask == *net)
                }
                None => false,
            },
            _ => false,
        }
    }
}

/// Destination → connection index.
///
/// Longest prefix match with one hash table per prefix length in use,
/// tried from the longest: the cost per packet is a lookup per distinct
/// prefix length (a server with many clients has few: their /32 and /128
/// tunnel addresses, maybe a /24 each), whatever the number of
/// connections. A linear scan over entries was enough for a few peers,
/// not for a server with thousands of clients.
#[derive(Debug, Clone, Default)]
pub struct Router {
    v4: Vec<(u32, HashMap<u32, usize>)>,
    v6: Vec<(u128, HashMap<u128, usize>)>,
}

impl Router {
    /// Builds the table from a validated config.
    pub fn from_config(config: &Config) -> Router {
        let mut r = Router::default();
        for (i, c) in config.connections.iter().enumerate() {
            for p in peer_prefixes(c) {
                r.insert(p, i);
            }
        }
        r
    }

    /// Routes connection `c`'s prefixes (its peer's tunnel addresses and
    /// `networks`) to index `conn`.
    pub fn add_connection(&mut self, c: &ConnectionConfig, conn: usize) {
        for p in peer_prefixes(c) {
            self.insert(p, conn);
        }
    }

    /// Routes `prefix` to connection `conn`, unless an earlier connection
    /// has that very prefix (the first in the config wins, as before).
    pub fn insert(&mut self, prefix: Prefix, conn: usize) {
        let (v4, v6) = masked([prefix]);
        for (net, mask) in v4 {
            let at = match self.v4.iter().position(|(m, _)| *m == mask) {
                Some(at) => at,
                None => {
                    self.v4.push((mask, HashMap::new()));
                    // Longest first (masks of longer prefixes are larger).
                    self.v4.sort_by_key(|e| std::cmp::Reverse(e.0));
                    self.v4.iter().position(|(m, _)| *m == mask).unwrap_or(0)
                }
            };
            self.v4[at].1.entry(net).or_insert(conn);
        }
        for (net, mask) in v6 {
            let at = match self.v6.iter().position(|(m, _)| *m == mask) {
                Some(at) => at,
                None => {
                    self.v6.push((mask, HashMap::new()));
                    self.v6.sort_by_key(|e| std::cmp::Reverse(e.0));
                    self.v6.iter().position(|(m, _)| *m == mask).unwrap_or(0)
                }
            };
            self.v6[at].1.entry(net).or_insert(conn);
        }
    }

    /// The connection for the packet's destination, if any.
    pub fn lookup(&self, packet: &[u8]) -> Option<usize> {
        match packet.first()? >> 4 {
            4 => {
                let d: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
                let d = u32::from_be_bytes(d);
                self.v4
                    .iter()
                    .find_map(|(mask, nets)| nets.get(&(d & mask)).copied())
            }
            6 => {
                let d: [u8; 16] = packet.get(24..40)?.try_into().ok()?;
                let d = u128::from_be_bytes(d);
                self.v6
                    .iter()
                    .find_map(|(mask, nets)| nets.get(&(d & mask)).copied())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    /// Two peers: `a` with both tunnel addresses and 10/8, `b` with an
    /// IPv4 address and two networks.
    fn two_peers() -> Config {
        parse(
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
remote = "127.0.0.2"
[[connection]]
name = "b"
id = 2
peer_ipv4 = "192.168.1.3"
networks = ["10.1.0.0/16", "fd00:1::/32"]
[[connection.path]]
name = "p"
local = "127.0.0.1"
remote = "127.0.0.3"
"#,
            "t",
        )
        .unwrap()
    }

    fn v4_to(d: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0u8; 20];
        p[0] = 0x45;
        p[16..20].copy_from_slice(&d);
        p
    }

    fn v4_from(s: [u8; 4]) -> Vec<u8> {
        let mut p = v4_to([0; 4]);
        p[12..16].copy_from_slice(&s);
        p
    }

    fn v6_from(s: &str) -> Vec<u8> {
        let mut p = v6_to("::");
        let a: std::net::Ipv6Addr = s.parse().unwrap();
        p[8..24].copy_from_slice(&a.octets());
        p
    }

    #[test]
    fn a_peer_may_send_only_from_what_is_routed_to_it() {
        let cfg = two_peers();
        let a = SourceFilter::for_connection(&cfg.connections[0]);
        let b = SourceFilter::for_connection(&cfg.connections[1]);
        assert!(a.allows(&v4_from([192, 168, 1, 2])));
        assert!(a.allows(&v4_from([10, 9, 8, 7])));
        assert!(a.allows(&v6_from("fd00::2")));
        assert!(!a.allows(&v4_from([192, 168, 1, 3])), "b's address");
        assert!(!a.allows(&v6_from("fd00:1::5")), "b's network");
        assert!(b.allows(&v4_from([192, 168, 1, 3])));
        assert!(b.allows(&v6_from("fd00:1::5")));
        assert!(!b.allows(&v4_from([192, 168, 1, 2])), "a's address");
        assert!(!b.allows(&v4_from([10, 0, 0, 1])), "a's network");
        assert!(b.allows(&v4_from([10, 1, 2, 3])), "b's network");
        assert!(!a.allows(&[0x45, 0, 0]), "truncated");
        assert!(!a.allows(&[]));
        let open = parse(
            r#"
[tunnel]
ipv4 = "192.168.1.1/24"
[[connection]]
name = "gw"
networks = ["0.0.0.0/0", "::/0"]
[[connection.path]]
name = "p"
local = "127.0.0.1"
remote = "127.0.0.2"
"#,
            "t",
        )
        .unwrap();
        let gw = SourceFilter::for_connection(&open.connections[0]);
        assert!(
            gw.allows(&v4_from([8, 8, 8, 8])),
            "a default route allows all"
        );
        assert!(gw.allows(&v6_from("2001:db8::1")));
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
        let cfg = two_peers();
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

    /// Thousands of clients: each found by its host route, a shared
    /// network by the longest prefix, a duplicate prefix by the first
    /// connection that has it; removing one (a router built without it)
    /// leaves the others.
    #[test]
    fn many_connections_route_by_hash_per_prefix_length() {
        let mut r = Router::default();
        let host = |i: u32| Prefix {
            addr: IpAddr::V4(std::net::Ipv4Addr::from(0x0a40_0000 + i)),
            len: 32,
        };
        for i in 0..5000u32 {
            r.insert(host(i), i as usize);
        }
        r.insert(
            Prefix {
                addr: "10.64.0.0".parse().unwrap(),
                len: 10,
            },
            9999,
        );
        r.insert(host(7), 12345);
        for i in [0u32, 1, 7, 4999] {
            let a = (0x0a40_0000 + i).to_be_bytes();
            assert_eq!(r.lookup(&v4_to(a)), Some(i as usize));
        }
        assert_eq!(r.lookup(&v4_to([10, 64, 200, 1])), Some(9999), "the /10");
        assert_eq!(r.lookup(&v4_to([10, 128, 0, 1])), None);
        assert_eq!(r.v4.len(), 2, "one table per prefix length");
    }
}
