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
//! - A path whose remote is a host name that has not resolved yet has
//!   nowhere to send: it is held down the same way until it has an
//!   address (`crate::control::names`).
//!
//! Nothing is judged before the first dump is complete. Transitions are
//! logged once each, with the path, the connection and the interface.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::Session;

pub use crate::control::net_table::{LinkInfo, NetTable};
use crate::control::pathset::{self, ConnSetup};
use crate::control::routing::Routing;
use crate::io::netlink::NetEvent;
use crate::plane::{ConnShared, PathShared};

/// The connection index of a [`crate::plane::ControlDatagram`] that only
/// wakes the control loop (netlink events are waiting): no connection has
/// it, so the datagram itself is ignored.
pub const WAKE_CONN: usize = usize::MAX;

/// Wait before a failed rebind of an interface-only path is tried again.
const REBIND_RETRY: Duration = Duration::from_secs(1);

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
    /// Its remote is a host name that has not resolved yet
    /// (`crate::control::names`).
    NoRemote,
}

impl LinkVerdict {
    /// For the logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            LinkVerdict::Ok => "link and address present",
            LinkVerdict::NoLink => "interface gone",
            LinkVerdict::LinkDown => "interface down or without carrier",
            LinkVerdict::NoAddress => "local address gone",
            LinkVerdict::NoRemote => "remote name not resolved yet",
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

    /// Judges every path again at the next [`Links::poll`] (a path's
    /// remote name resolved: it no longer waits for it).
    pub fn recheck(&mut self) {
        self.generations.clear();
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
        let verdict = match verdict {
            LinkVerdict::Ok if path.awaits_name() => LinkVerdict::NoRemote,
            v => v,
        };
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
