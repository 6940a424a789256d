//! The links, addresses and routes of the daemon's network namespace, as
//! rtnetlink events describe them ([`NetEvent`]): what
//! `crate::control::links` holds the paths to and what
//! `crate::control::routing_plan` plans the uplinks' routing from. Its own
//! file so that both read it without importing each other.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::io::netlink::{AddrInfo, NetEvent, RouteInfo};

/// A link as the kernel last described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// Interface name.
    pub name: String,
    /// Up and running.
    pub up: bool,
    /// Point-to-point (a default route needs no gateway).
    pub p2p: bool,
}

/// The links and addresses of the daemon's network namespace.
#[derive(Debug, Clone, Default)]
pub struct NetTable {
    links: BTreeMap<u32, LinkInfo>,
    addrs: Vec<AddrInfo>,
    /// Default routes of every table, and the routes to `watched`
    /// prefixes: what the uplinks' routing plan reads
    /// (`crate::control::routing_plan`). Other routes are not kept (a
    /// router's full table would cost memory for nothing).
    routes: Vec<RouteInfo>,
    /// Prefixes whose routes are kept besides the defaults (the
    /// connections' `networks`, to find routes mptd must not replace).
    watched: Vec<(IpAddr, u8)>,
}

impl NetTable {
    /// A table from a dump.
    pub fn from_events(events: &[NetEvent]) -> NetTable {
        let mut t = NetTable::default();
        for e in events {
            t.apply(e);
        }
        t
    }

    /// Takes in one event.
    pub fn apply(&mut self, e: &NetEvent) {
        match e {
            NetEvent::Link {
                index,
                name,
                up,
                p2p,
            } => {
                let entry = self.links.entry(*index).or_insert_with(|| LinkInfo {
                    name: String::new(),
                    up: false,
                    p2p: false,
                });
                if let Some(n) = name {
                    entry.name.clone_from(n);
                }
                entry.up = *up;
                entry.p2p = *p2p;
            }
            NetEvent::LinkGone { index } => {
                self.links.remove(index);
                self.addrs.retain(|a| a.index != *index);
                self.routes.retain(|r| r.oif != Some(*index));
            }
            NetEvent::Route(r) => {
                if r.len == 0 || self.watched.contains(&(r.dst, r.len)) {
                    self.routes.retain(|o| !same_route(o, r));
                    self.routes.push(r.clone());
                }
            }
            NetEvent::RouteGone(r) => self.routes.retain(|o| !same_route(o, r)),
            NetEvent::Addr(a) => match self
                .addrs
                .iter_mut()
                .find(|o| o.index == a.index && o.addr == a.addr)
            {
                Some(o) => *o = *a,
                None => self.addrs.push(*a),
            },
            NetEvent::AddrGone { index, addr } => {
                self.addrs
                    .retain(|a| !(a.index == *index && a.addr == *addr));
            }
            NetEvent::DumpStart => {
                let watched = std::mem::take(&mut self.watched);
                *self = NetTable {
                    watched,
                    ..NetTable::default()
                };
            }
            NetEvent::DumpDone => {}
        }
    }

    /// Keeps the routes to these prefixes too (besides default routes).
    pub fn watch(&mut self, prefixes: impl IntoIterator<Item = (IpAddr, u8)>) {
        self.watched.extend(prefixes);
    }

    /// The links, by index.
    pub fn links(&self) -> &BTreeMap<u32, LinkInfo> {
        &self.links
    }

    /// The addresses of every link.
    pub fn addrs(&self) -> &[AddrInfo] {
        &self.addrs
    }

    /// The default routes of every table and the routes to the watched
    /// prefixes.
    pub fn routes(&self) -> &[RouteInfo] {
        &self.routes
    }

    /// The link named `name`.
    pub fn link_by_name(&self, name: &str) -> Option<(u32, &LinkInfo)> {
        self.links
            .iter()
            .find(|(_, l)| l.name == name)
            .map(|(i, l)| (*i, l))
    }

    /// The link holding address `ip`.
    pub fn link_of(&self, ip: IpAddr) -> Option<(u32, &LinkInfo)> {
        let a = self.addrs.iter().find(|a| a.addr == ip)?;
        self.links.get(&a.index).map(|l| (a.index, l))
    }

    /// Whether some link holds `ip`.
    pub fn has_addr(&self, ip: IpAddr) -> bool {
        self.addrs.iter().any(|a| a.addr == ip)
    }

    /// The address an interface-only path on link `index` uses: of family
    /// `v6` (`None`: IPv4 first, else IPv6), usable (DAD done), not IPv6
    /// link-local (it cannot be bound without a scope, nor reach a peer
    /// beyond the link); global scope before site, link and host, fresh
    /// before deprecated; `current` on a tie, so the path does not move
    /// for nothing; else the first the kernel listed.
    pub fn best_addr(
        &self,
        index: u32,
        v6: Option<bool>,
        current: Option<IpAddr>,
    ) -> Option<IpAddr> {
        let family_ok = |a: &AddrInfo, want_v6: bool| a.addr.is_ipv6() == want_v6;
        let pick = |want_v6: bool| {
            let candidates = self.addrs.iter().filter(|a| {
                a.index == index
                    && a.usable
                    && family_ok(a, want_v6)
                    && !matches!(a.addr, IpAddr::V6(v) if v.is_unicast_link_local())
            });
            let rank = |a: &AddrInfo| (scope_rank(a.scope), a.deprecated);
            let best = candidates.clone().map(rank).min()?;
            candidates
                .clone()
                .filter(|a| rank(a) == best)
                .find(|a| Some(a.addr) == current)
                .or_else(|| candidates.clone().find(|a| rank(a) == best))
                .map(|a| a.addr)
        };
        match v6 {
            Some(v6) => pick(v6),
            None => pick(false).or_else(|| pick(true)),
        }
    }
}

/// Whether two route reports are of one route: the kernel's key (table,
/// prefix, metric) and its next hop.
fn same_route(a: &RouteInfo, b: &RouteInfo) -> bool {
    (a.table, a.dst, a.len, a.metric, a.oif, a.gateway)
        == (b.table, b.dst, b.len, b.metric, b.oif, b.gateway)
}

/// Order of preference of `RT_SCOPE_*` values: universe (0), site (200),
/// link (253), host (254), anything else last.
fn scope_rank(scope: u8) -> u8 {
    match scope {
        0 => 0,
        200 => 1,
        253 => 2,
        254 => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(index: u32, a: &str, scope: u8) -> NetEvent {
        NetEvent::Addr(AddrInfo {
            index,
            addr: a.parse().unwrap(),
            prefix_len: 24,
            scope,
            usable: true,
            deprecated: false,
        })
    }

    #[test]
    fn table_follows_events_and_picks_addresses() {
        let mut t = NetTable::from_events(&[
            NetEvent::Link {
                index: 2,
                name: Some("wlan0".into()),
                up: true,
                p2p: false,
            },
            addr(2, "fe80::1", 253),
            addr(2, "169.254.3.4", 253),
            addr(2, "10.0.0.5", 0),
            addr(2, "fd00::5", 0),
        ]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(t.link_by_name("wlan0").map(|(i, _)| i), Some(2));
        assert_eq!(t.best_addr(2, Some(false), None), Some(ip("10.0.0.5")));
        assert_eq!(t.best_addr(2, Some(true), None), Some(ip("fd00::5")));
        assert_eq!(t.best_addr(2, None, None), Some(ip("10.0.0.5")));
        // A second global address does not move a path already on one.
        t.apply(&addr(2, "10.0.0.9", 0));
        assert_eq!(
            t.best_addr(2, Some(false), Some(ip("10.0.0.9"))),
            Some(ip("10.0.0.9"))
        );
        assert_eq!(
            t.best_addr(2, Some(false), Some(ip("10.0.0.1"))),
            Some(ip("10.0.0.5"))
        );
        // DHCP renew: old gone, the link-local one is all that is left.
        t.apply(&NetEvent::AddrGone {
            index: 2,
            addr: ip("10.0.0.5"),
        });
        t.apply(&NetEvent::AddrGone {
            index: 2,
            addr: ip("10.0.0.9"),
        });
        assert_eq!(t.best_addr(2, Some(false), None), Some(ip("169.254.3.4")));
        // IPv6 link-local never.
        t.apply(&NetEvent::AddrGone {
            index: 2,
            addr: ip("fd00::5"),
        });
        assert_eq!(t.best_addr(2, Some(true), None), None);
        assert_eq!(t.link_of(ip("169.254.3.4")).map(|(i, _)| i), Some(2));
        t.apply(&NetEvent::LinkGone { index: 2 });
        assert_eq!(t.link_by_name("wlan0"), None);
        assert!(!t.has_addr(ip("169.254.3.4")), "addresses go with the link");
        t.apply(&NetEvent::DumpStart);
        assert!(t.links.is_empty() && t.addrs.is_empty());
    }

    #[test]
    fn tentative_addresses_are_not_used() {
        let mut e = addr(2, "fd00::7", 0);
        if let NetEvent::Addr(a) = &mut e {
            a.usable = false;
        }
        let t = NetTable::from_events(&[e, addr(2, "fd00::8", 0)]);
        assert_eq!(t.best_addr(2, Some(true), None), "fd00::8".parse().ok());
    }
}
