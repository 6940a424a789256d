//! Paths whose `remote` is a host name: when to look the name up, and
//! what an answer does to the paths.
//!
//! The lookups themselves block, so they run on the resolver thread
//! ([`crate::io::resolve`]); [`Names::poll`], called by the control loop
//! every round, sends it the names that are due and takes in its answers
//! without ever waiting. One lookup serves every path with that name.
//!
//! - A name is looked up when a path with it appears (at start, or added
//!   by a reload), again every `[daemon] resolve_interval`, and at once
//!   when one of its paths goes down ([`Names::path_down`]): a server that
//!   moved is found again without waiting for the interval.
//! - An answer gives each path an address of the family it needs
//!   ([`pick`]): its local address's, else the first the resolver listed.
//!   The address in use is kept while the name still lists it (several A
//!   records in rotating order do not move the path). A new address is
//!   set on the path as a roaming peer's would be
//!   ([`crate::plane::PathShared::set_remote`]): the workers send there
//!   from their next batch, and the path probes at once.
//! - A failed lookup is retried with a doubling delay ([`retry_after`],
//!   1 s up to a minute, never longer than the interval). A path that
//!   had an address keeps it; one that never had one stays down
//!   (`crate::control::links` holds it down) with the reason in its status.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::Session;

use crate::control::pathset::ConnSetup;
use crate::io::resolve::{Answer, Lookup};
use crate::plane::{ConnShared, PathShared};
use crate::sync::lock_unpoisoned;

/// First retry of a failed lookup.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between retries of a failing name.
pub const RETRY_MAX: Duration = Duration::from_secs(60);
/// A path going down asks for a lookup only if the last one is older
/// than this (several paths of one name going down ask once).
const DOWN_RELOOKUP_MIN: Duration = Duration::from_secs(1);

/// The wait before the next lookup of a name that failed `failures`
/// times in a row: 1 s, 2 s, 4 s, ... up to [`RETRY_MAX`], and never more
/// than the interval of a name that resolves.
pub fn retry_after(failures: u32, interval: Duration) -> Duration {
    let doubled = RETRY_FIRST.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    doubled.min(RETRY_MAX).min(interval)
}

/// The address a path takes from a name's `addrs`: of family `v6` if the
/// path has one (`None`: any, the resolver's first), `current` if it is
/// still listed, else the first of the family.
pub fn pick(addrs: &[IpAddr], v6: Option<bool>, current: Option<IpAddr>) -> Option<IpAddr> {
    let fits = |a: &&IpAddr| v6.is_none_or(|v6| a.is_ipv6() == v6);
    addrs
        .iter()
        .filter(fits)
        .find(|a| Some(**a) == current)
        .or_else(|| addrs.iter().find(fits))
        .copied()
}

/// The family a path needs: its local address's, unless it has none yet
/// (an interface-only path waiting for an address).
fn wanted_v6(path: &PathShared) -> Option<bool> {
    (!path.local.ip().is_unspecified()).then(|| path.local.is_ipv6())
}

/// One name's lookups.
#[derive(Debug, Clone)]
struct Entry {
    /// When to look it up next.
    next: Instant,
    /// A lookup was sent and its answer has not come back.
    in_flight: bool,
    /// When the last lookup was sent.
    sent: Option<Instant>,
    /// Failed lookups in a row.
    failures: u32,
}

/// The names of the paths and their lookups (see the module docs).
pub struct Names {
    requests: Sender<Lookup>,
    answers: Receiver<Answer>,
    interval: Duration,
    entries: BTreeMap<String, Entry>,
    /// The path-table generations the names were last collected at.
    generations: Vec<u64>,
}

impl Names {
    /// Lookups go to `requests` (the resolver thread), answers come from
    /// `answers`; a name that resolves is looked up again every
    /// `interval`.
    pub fn new(requests: Sender<Lookup>, answers: Receiver<Answer>, interval: Duration) -> Names {
        Names {
            requests,
            answers,
            interval,
            entries: BTreeMap::new(),
            generations: Vec::new(),
        }
    }

    /// A path of name `name` went down: look the name up now (the server
    /// may have moved), unless that was just done.
    pub fn path_down(&mut self, name: &str, now: Instant) {
        if let Some(e) = self.entries.get_mut(name) {
            let recent = e
                .sent
                .is_some_and(|t| now.saturating_duration_since(t) < DOWN_RELOOKUP_MIN);
            if !e.in_flight && !recent {
                e.next = now;
            }
        }
    }

    /// Takes in the resolver's answers, then sends the lookups that are
    /// due. Returns true when a path got a new address (the links must
    /// judge it again: it may no longer wait for its name).
    pub fn poll(
        &mut self,
        conns: &[Arc<ConnShared>],
        sessions: &mut [Session],
        setups: &[ConnSetup],
        now: Instant,
    ) -> bool {
        self.collect(conns, now);
        let mut changed = false;
        while let Ok(answer) = self.answers.try_recv() {
            changed |= self.take_answer(&answer, conns, sessions, setups, now);
        }
        for (name, e) in self.entries.iter_mut() {
            if e.in_flight || now < e.next {
                continue;
            }
            if self.requests.send(Lookup { name: name.clone() }).is_ok() {
                e.in_flight = true;
                e.sent = Some(now);
            } else {
                // The resolver thread is gone (shutdown): try no more.
                e.next = now + RETRY_MAX;
            }
        }
        changed
    }

    /// Brings the set of names in line with the paths, when a path table
    /// changed.
    fn collect(&mut self, conns: &[Arc<ConnShared>], now: Instant) {
        let same = self.generations.len() == conns.len()
            && conns
                .iter()
                .zip(&self.generations)
                .all(|(c, g)| c.paths_generation() == *g);
        if same {
            return;
        }
        self.generations.clear();
        self.generations
            .extend(conns.iter().map(|c| c.paths_generation()));
        let mut in_use: Vec<String> = Vec::new();
        for c in conns {
            for p in c.paths().iter().filter(|p| !p.is_removed()) {
                if let Some(n) = &p.remote_name {
                    in_use.push(n.clone());
                }
            }
        }
        self.entries.retain(|n, _| in_use.contains(n));
        for n in in_use {
            self.entries.entry(n).or_insert(Entry {
                next: now,
                in_flight: false,
                sent: None,
                failures: 0,
            });
        }
    }

    /// Applies one answer to its entry and to every path of its name.
    fn take_answer(
        &mut self,
        answer: &Answer,
        conns: &[Arc<ConnShared>],
        sessions: &mut [Session],
        setups: &[ConnSetup],
        now: Instant,
    ) -> bool {
        let Some(e) = self.entries.get_mut(&answer.name) else {
            return false;
        };
        e.in_flight = false;
        match &answer.result {
            Ok(_) => {
                e.failures = 0;
                e.next = now + self.interval;
            }
            Err(_) => {
                e.failures = e.failures.saturating_add(1);
                e.next = now + retry_after(e.failures, self.interval);
            }
        }
        let failures = e.failures;
        let mut changed = false;
        for (ci, conn) in conns.iter().enumerate() {
            let Some(setup) = setups.get(ci) else {
                continue;
            };
            let table = conn.paths();
            for path in table.iter().filter(|p| !p.is_removed()) {
                if path.remote_name.as_deref() != Some(answer.name.as_str()) {
                    continue;
                }
                let session = sessions.get_mut(ci);
                changed |= apply(conn, session, setup, path, answer, failures, now);
            }
        }
        changed
    }
}

/// What `answer` means for `path`: a new address, or the reason it has
/// none. Returns true if the address changed.
fn apply(
    conn: &ConnShared,
    session: Option<&mut Session>,
    setup: &ConnSetup,
    path: &PathShared,
    answer: &Answer,
    failures: u32,
    now: Instant,
) -> bool {
    let name = &answer.name;
    let current = path.remote().map(|(a, _)| a.ip());
    let v6 = wanted_v6(path);
    let chosen = match &answer.result {
        Ok(addrs) => pick(addrs, v6, current).ok_or_else(|| {
            let family = if v6 == Some(true) { "IPv6" } else { "IPv4" };
            format!("name {name}: no {family} address (has {addrs:?})")
        }),
        Err(e) => Err(format!("name {name}: {e}")),
    };
    let ip = match chosen {
        Ok(ip) => ip,
        Err(reason) => {
            let mut err = lock_unpoisoned(&path.resolve_error);
            if err.as_deref() != Some(reason.as_str()) {
                tracing::warn!(conn = %conn.name, path = %path.name, name = %name, failures, reason = %reason, kept = ?current, "remote name did not resolve; retrying");
            }
            *err = Some(reason);
            return false;
        }
    };
    *lock_unpoisoned(&path.resolve_error) = None;
    let to = SocketAddr::new(ip, setup.remote_port);
    if !path.set_remote(to) {
        return false;
    }
    match current {
        None => {
            tracing::info!(conn = %conn.name, path = %path.name, name = %name, remote = %to, "remote name resolved")
        }
        Some(old) => {
            tracing::info!(conn = %conn.name, path = %path.name, name = %name, from = %old, to = %to, "remote name has a new address; path follows")
        }
    }
    if let Some(session) = session {
        if session.path(path.id).is_some_and(|p| !p.link_down()) {
            session.probe_now(path.id, now);
        }
    }
    true
}

/// Without netlink (no `crate::control::links` to hold paths to their
/// links), a path waiting for its name is held down here, and let go
/// once it has an address.
pub fn hold_without_links(conns: &[Arc<ConnShared>], sessions: &mut [Session], now: Instant) {
    for (conn, session) in conns.iter().zip(sessions.iter_mut()) {
        for p in conn.paths().iter().filter(|p| p.remote_name.is_some()) {
            let _unknown_or_unchanged = session.set_path_link(p.id, !p.awaits_name(), now);
        }
    }
}

#[cfg(test)]
mod tests;
