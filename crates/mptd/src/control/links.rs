//! What the kernel's link and address events mean for the paths.
//!
//! [`crate::io::netlink`] turns rtnetlink messages into [`NetEvent`]s; here
//! they keep a [`NetTable`] of links and addresses, and [`Links::poll`]
//! (called by the control loop every round) holds each path to it:
//!
//! - A path's **link** is its `interface` if it names one, else the
//!   interface that holds its local address. The path can work only while
//!   that link is up and running and its local address exists; otherwise
//!   the session takes it down at once ([`mpt_proto::Session::set_path_link`]):
//!   no data, no probes, and the resequencer stops waiting for it. When
//!   the link and address are back, it probes at once.
//! - An **interface-only** path (`interface` without `local`) uses that
//!   interface's current address of the remote's family (global scope
//!   first) and follows it: when the address changes, the path's socket is
//!   rebound to the new one ([`crate::control::pathset::rebind`]) and probes at
//!   once; the peer learns the new address from those authenticated
//!   probes, as from any roaming client.
//!
//! Nothing is judged before the first dump is complete. Transitions are
//! logged once each, with the path, the connection and the interface.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::Session;

use crate::control::pathset::{self, ConnSetup};
use crate::control::routing::Routing;
use crate::io::netlink::{AddrInfo, NetEvent, RouteInfo};
use crate::plane::{ConnShared, PathShared};

/// The connection index of a [`crate::plane::ControlDatagram`] that only
/// wakes the control loop (netlink events are waiting): no connection has
/// it, so the datagram itself is ignored.
pub const WAKE_CONN: usize = usize::MAX;

/// Wait before a failed rebind of an interface-only path is tried again.
const REBIND_RETRY: Duration = Duration::from_secs(1);

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

/// Why a path cannot work, from its link's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkVerdict {
    /// It can.
    Ok,
    /// Its interface does not exist.
    NoLink,
    /// Its interface is down or has no carrier.
    LinkDown,
    /// Its local address (or, interface-only, any address of the family)
    /// is gone.
    NoAddress,
}

impl LinkVerdict {
    /// For the logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            LinkVerdict::Ok => "link and address present",
            LinkVerdict::NoLink => "interface gone",
            LinkVerdict::LinkDown => "interface down or without carrier",
            LinkVerdict::NoAddress => "local address gone",
        }
    }
}

/// The address family an interface-only path wants: the remote's, else
/// the one it has, else no preference.
fn wanted_v6(path: &PathShared) -> Option<bool> {
    match path.remote() {
        Some((r, _)) => Some(r.is_ipv6()),
        None if !path.local.ip().is_unspecified() => Some(path.local.is_ipv6()),
        None => None,
    }
}

/// What `path` should be, given `table`: its verdict, the interface
/// concerned (for the logs) and, for an interface-only path, the address
/// it should be bound to.
pub fn judge(table: &NetTable, path: &PathShared) -> (LinkVerdict, Option<String>, Option<IpAddr>) {
    let local = path.local.ip();
    let link = match &path.interface {
        Some(name) => table.link_by_name(name),
        None if local.is_unspecified() => return (LinkVerdict::Ok, None, None),
        None => table.link_of(local),
    };
    let ifname = link
        .map(|(_, l)| l.name.clone())
        .or_else(|| path.interface.clone());
    let Some((index, info)) = link else {
        let v = if path.interface.is_some() {
            LinkVerdict::NoLink
        } else {
            LinkVerdict::NoAddress
        };
        return (v, ifname, None);
    };
    if path.follow {
        let Some(addr) = table.best_addr(index, wanted_v6(path), Some(local)) else {
            return (LinkVerdict::NoAddress, ifname, None);
        };
        let v = if info.up {
            LinkVerdict::Ok
        } else {
            LinkVerdict::LinkDown
        };
        return (v, ifname, Some(addr));
    }
    if !info.up {
        (LinkVerdict::LinkDown, ifname, None)
    } else if !local.is_unspecified() && !table.has_addr(local) {
        (LinkVerdict::NoAddress, ifname, None)
    } else {
        (LinkVerdict::Ok, ifname, None)
    }
}

/// The local address an interface-only path starts on: its interface's
/// best address of the remote's family from a fresh dump; without one, the
/// unspecified address and an ephemeral port (bound to the device, so it
/// conflicts with nothing), until an address appears.
pub fn initial_local(interface: &str, remote: Option<IpAddr>, port: u16) -> SocketAddr {
    let table = match crate::io::netlink::snapshot() {
        Ok(events) => NetTable::from_events(&events),
        Err(e) => {
            tracing::warn!(ifname = interface, error = %e, "cannot read the interface addresses; the path waits for an address event");
            NetTable::default()
        }
    };
    let v6 = remote.map(|r| r.is_ipv6());
    let addr = table
        .link_by_name(interface)
        .and_then(|(index, _)| table.best_addr(index, v6, None));
    match addr {
        Some(ip) => SocketAddr::new(ip, port),
        None => {
            let any = if v6 == Some(true) {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            };
            tracing::info!(
                ifname = interface,
                "no address on the interface yet; the path waits for one"
            );
            SocketAddr::new(any, 0)
        }
    }
}

/// Follows netlink events and holds the paths to them (see the module
/// documentation).
pub struct Links {
    events: Receiver<NetEvent>,
    table: NetTable,
    /// The first dump is complete (and no new dump is under way).
    synced: bool,
    /// Interface-only paths whose rebind failed, by (connection, path
    /// id): when to try again.
    retry: BTreeMap<(usize, usize), Instant>,
    /// The connections' path-table generations when the paths were last
    /// brought in line: with no event since and no new table, there is
    /// nothing to do (a server may have thousands of paths).
    generations: Vec<u64>,
    /// The uplinks' policy routing, re-planned after every change
    /// (`crate::control::routing`).
    routing: Option<Routing>,
}

impl Links {
    /// Follows the events of `events` (from [`crate::io::netlink::Listener::run`]).
    pub fn new(events: Receiver<NetEvent>) -> Links {
        Links {
            events,
            table: NetTable::default(),
            synced: false,
            retry: BTreeMap::new(),
            generations: Vec::new(),
            routing: None,
        }
    }

    /// Also keeps the uplinks' policy routing in line with the kernel.
    pub fn with_routing(mut self, routing: Routing) -> Links {
        self.table.watch(routing.watched());
        self.routing = Some(routing);
        self
    }

    /// Takes in the waiting events, then brings every path in line.
    pub fn poll(
        &mut self,
        conns: &[Arc<ConnShared>],
        sessions: &mut [Session],
        setups: &[ConnSetup],
        now: Instant,
    ) {
        let mut changed = false;
        while let Ok(e) = self.events.try_recv() {
            changed = true;
            match e {
                NetEvent::DumpStart => self.synced = false,
                NetEvent::DumpDone => self.synced = true,
                _ => {}
            }
            self.table.apply(&e);
        }
        if !self.synced {
            return;
        }
        if changed {
            if let Some(r) = &mut self.routing {
                // Errors are logged there; the next change tries again.
                let _logged = r.apply(&self.table);
            }
        }
        let tables_changed = self.generations.len() != conns.len()
            || conns
                .iter()
                .zip(&self.generations)
                .any(|(c, g)| c.paths_generation() != *g);
        let retry_due = self.retry.values().any(|t| now >= *t);
        if !(changed || tables_changed || retry_due) {
            return;
        }
        for (ci, (conn, session)) in conns.iter().zip(sessions.iter_mut()).enumerate() {
            let Some(setup) = setups.get(ci) else {
                continue;
            };
            let table = conn.paths();
            for path in table.iter().filter(|p| !p.is_removed()) {
                self.hold(ci, conn, session, setup, path, now);
            }
        }
        self.retry.retain(|(ci, id), _| {
            conns
                .get(*ci)
                .is_some_and(|c| c.paths().get(*id).is_some_and(|p| !p.is_removed()))
        });
        // After the loop: a rebind above made a new table, which is in
        // line already.
        self.generations.clear();
        self.generations
            .extend(conns.iter().map(|c| c.paths_generation()));
    }

    /// Brings one path in line with the table.
    fn hold(
        &mut self,
        ci: usize,
        conn: &ConnShared,
        session: &mut Session,
        setup: &ConnSetup,
        path: &Arc<PathShared>,
        now: Instant,
    ) {
        let Some(link_down) = session.path(path.id).map(|p| p.link_down()) else {
            return;
        };
        let (verdict, ifname, want) = judge(&self.table, path);
        let ifname = ifname.as_deref().unwrap_or("-");
        let mut up = verdict == LinkVerdict::Ok;
        let want = want.filter(|a| *a != path.local.ip());
        if want.is_none() {
            self.retry.remove(&(ci, path.id));
        }
        if let Some(addr) = want {
            let key = (ci, path.id);
            if self.retry.get(&key).is_some_and(|t| now < *t) {
                up = false;
            } else {
                let to = SocketAddr::new(addr, setup.port);
                match pathset::rebind(conn, path.id, to) {
                    Ok(_) => {
                        self.retry.remove(&key);
                        tracing::info!(conn = %conn.name, path = %path.name, ifname, from = %path.local, to = %to, "interface address changed; path moved to it");
                        if up && !link_down {
                            // Tell the peer at once (it learns the new
                            // address from the probe).
                            session.probe_now(path.id, now);
                        }
                    }
                    Err(e) => {
                        if self.retry.insert(key, now + REBIND_RETRY).is_none() {
                            tracing::warn!(conn = %conn.name, path = %path.name, ifname, to = %to, error = %e, "cannot move the path to the interface's new address; retrying every second");
                        }
                        up = false;
                    }
                }
            }
        }
        if up != link_down {
            return;
        }
        match session.set_path_link(path.id, up, now) {
            Ok(true) if up => {
                tracing::info!(conn = %conn.name, path = %path.name, ifname, "path link back; probing")
            }
            Ok(true) => {
                // The resequencer no longer waits for what this path had
                // in flight.
                conn.lock_reseq().forget_path(path.id);
                tracing::info!(conn = %conn.name, path = %path.name, ifname, reason = verdict.as_str(), "path link lost; path down");
            }
            Ok(false) | Err(_) => {}
        }
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
