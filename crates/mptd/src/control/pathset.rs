//! Adding and removing paths of a running connection.
//!
//! Three things hold a path: the session (liveness, scheduling
//! eligibility), the connection's [`PathTable`] (socket, counters, read by
//! the workers) and, on the other side of the tunnel, the peer. This module
//! changes the first two together, in the order that never loses a packet:
//!
//! - **Add**: bind the socket, publish a table with the path, then add it
//!   to the session. The path carries data only once probes came back in
//!   both directions, so nothing is sent before the peer listens.
//! - **Remove**: take the path out of the session first (the schedulers
//!   stop picking it within a batch), mark it removed (status hides it),
//!   and keep its socket in the table for a drain time, so datagrams the
//!   peer sent before it learnt of the removal are still received and
//!   resequenced. Only then is it dropped from the table; the socket closes
//!   when the last worker lets go of the old table.
//!
//! Telling the peer (control messages) is the caller's business: the
//! operator commands and reloads tell it, changes the peer asked for do not
//! echo back.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::path::PathParams;
use mpt_proto::sched::{SchedPath, MAX_PATHS};
use mpt_proto::Session;

use crate::io::udp::PathSocket;
use crate::plane::{ConnShared, PathShared};

/// How long a removed path keeps receiving, at least: covers datagrams in
/// flight and the peer's reaction to the removal on any terrestrial path.
const MIN_DRAIN: Duration = Duration::from_secs(2);

/// Longest drain (a removal never holds a path id longer).
const MAX_DRAIN: Duration = Duration::from_secs(10);

/// What a connection's paths share, from its config.
#[derive(Debug, Clone, Copy)]
pub struct ConnSetup {
    /// Local UDP port of every path.
    pub port: u16,
    /// The peer's UDP port.
    pub remote_port: u16,
    /// Probe interval.
    pub keepalive: Duration,
    /// Dead timer.
    pub dead_timer: Duration,
}

/// A path to add.
#[derive(Debug, Clone)]
pub struct NewPath {
    /// Its name (unique in the connection).
    pub name: String,
    /// Address to bind.
    pub local: SocketAddr,
    /// Where to send, if known.
    pub remote: Option<SocketAddr>,
    /// Whether `remote` is fixed (configured) or a first guess that
    /// authenticated datagrams may replace.
    pub remote_fixed: bool,
    /// The configured remote is this host name (`remote` is `None` until
    /// it resolves; see [`crate::control::names`]).
    pub remote_name: Option<String>,
    /// Device to bind to.
    pub interface: Option<String>,
    /// Interface-only: follows `interface`'s address (see
    /// [`crate::control::links`]).
    pub follow: bool,
    /// It comes from the config file (see [`PathShared::from_config`]).
    pub from_config: bool,
    /// Session parameters.
    pub params: PathParams,
}

/// A removed path whose socket still receives until `until`.
#[derive(Debug, Clone, Copy)]
pub struct Draining {
    /// Connection index.
    pub conn: usize,
    /// Path id.
    pub id: usize,
    /// End of the drain.
    pub until: Instant,
}

/// Why a path could not be added.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// A path of that name exists.
    #[error("connection {conn} already has a path named \"{name}\"")]
    NameInUse {
        /// Connection name.
        conn: String,
        /// Path name.
        name: String,
    },
    /// The id is taken.
    #[error("path id {0} is in use")]
    IdInUse(usize),
    /// No free id.
    #[error("the connection has {MAX_PATHS} paths already")]
    NoRoom,
    /// The socket could not be opened.
    #[error("binding {local}{}: {source}", interface.as_ref().map(|i| format!(" on {i}")).unwrap_or_default())]
    Bind {
        /// The address.
        local: SocketAddr,
        /// The device.
        interface: Option<String>,
        /// What the kernel said.
        source: std::io::Error,
    },
}

/// The lowest id free in both the table (draining paths included) and the
/// session.
pub fn free_id(conn: &ConnShared, session: &Session) -> Option<usize> {
    let table = conn.paths();
    (0..MAX_PATHS).find(|&i| table.get(i).is_none() && session.path(i).is_none())
}

/// Adds `new` under id `id`: socket, table, session.
pub fn add(
    conn: &ConnShared,
    session: &mut Session,
    id: usize,
    new: NewPath,
    now: Instant,
) -> Result<Arc<PathShared>, AddError> {
    let table = conn.paths();
    if table.find_live(&new.name).is_some() {
        return Err(AddError::NameInUse {
            conn: conn.name.clone(),
            name: new.name,
        });
    }
    if id >= MAX_PATHS {
        return Err(AddError::NoRoom);
    }
    if table.get(id).is_some() || session.path(id).is_some() {
        return Err(AddError::IdInUse(id));
    }
    // Holding the table would hold a draining socket `bind_reclaiming` may
    // need to release.
    drop(table);
    let socket = bind_reclaiming(conn, &new).map_err(|source| AddError::Bind {
        local: new.local,
        interface: new.interface.clone(),
        source,
    })?;
    add_socket(conn, session, id, new, socket, now)
}

/// Adds `new` under id `id` with `socket` (already bound): table, session.
/// A client connection's learnt paths send through a handle on their
/// shared port's socket (`crate::plane::shared_port`).
pub fn add_socket(
    conn: &ConnShared,
    session: &mut Session,
    id: usize,
    new: NewPath,
    socket: PathSocket,
    now: Instant,
) -> Result<Arc<PathShared>, AddError> {
    if id >= MAX_PATHS {
        return Err(AddError::NoRoom);
    }
    let table = conn.paths();
    if table.get(id).is_some() || session.path(id).is_some() {
        return Err(AddError::IdInUse(id));
    }
    let sched = SchedPath {
        weight: new.params.weight_out,
        window: new.params.window,
    };
    let mut shared = PathShared::new(
        id,
        new.name,
        socket,
        new.remote,
        sched,
        new.params.weight_in,
        now,
    );
    shared.remote_fixed = new.remote_fixed && (new.remote.is_some() || new.remote_name.is_some());
    shared.remote_name = new.remote_name;
    shared.interface = new.interface;
    shared.follow = new.follow && shared.interface.is_some();
    shared.from_config = new.from_config;
    let shared = Arc::new(shared);
    let mut next = (*table).clone();
    next.insert(shared.clone());
    conn.set_paths(next);
    if let Err(e) = session.add_path(id, new.params, now) {
        // Checked above; undo the table change all the same.
        let mut back = (*conn.paths()).clone();
        back.remove(id);
        conn.set_paths(back);
        tracing::error!(conn = %conn.name, path = %shared.name, error = %e, "session refused a checked path");
        return Err(AddError::IdInUse(id));
    }
    Ok(shared)
}

/// Binds the new path's socket. If a removed path still draining holds the
/// address (a handover back to an uplink just left), its drain ends now:
/// the new socket receives whatever was in flight to that address anyway.
/// The workers let go of the old socket within moments of the table
/// change, so the bind is retried briefly.
fn bind_reclaiming(conn: &ConnShared, new: &NewPath) -> std::io::Result<PathSocket> {
    let first = match PathSocket::bind(new.local, new.interface.as_deref()) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => e,
        other => return other,
    };
    let table = conn.paths();
    let Some(old) = table
        .iter()
        .find(|p| p.is_removed() && p.local == new.local)
    else {
        return Err(first);
    };
    finish(conn, old.id);
    drop(table);
    let mut last = first;
    for _ in 0..RECLAIM_TRIES {
        std::thread::sleep(RECLAIM_WAIT);
        match PathSocket::bind(new.local, new.interface.as_deref()) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = e,
            other => return other,
        }
    }
    Err(last)
}

/// Moves path `id` to a new socket bound to `local` (on its interface):
/// an interface-only path whose address changed. The new table replaces
/// the old at once; the workers let go of the old socket (and the receive
/// worker of what the resequencer knew of the path) at their next batch.
pub fn rebind(
    conn: &ConnShared,
    id: usize,
    local: SocketAddr,
) -> Result<Arc<PathShared>, AddError> {
    let table = conn.paths();
    let Some(old) = table.get(id) else {
        return Err(AddError::IdInUse(id));
    };
    // The same mark: the path keeps its uplink's routing table.
    let socket = PathSocket::bind_marked(local, old.interface.as_deref(), old.socket.mark())
        .map_err(|source| AddError::Bind {
            local,
            interface: old.interface.clone(),
            source,
        })?;
    let moved = Arc::new(old.moved(socket));
    let mut next = (*table).clone();
    next.insert(moved.clone());
    conn.set_paths(next);
    Ok(moved)
}

/// Binds tried while the workers release a drained socket (at most
/// `RECLAIM_TRIES × RECLAIM_WAIT` = 200 ms of the control loop).
const RECLAIM_TRIES: u32 = 40;
const RECLAIM_WAIT: Duration = Duration::from_millis(5);

/// Takes path `id` out of the session and starts its drain.
pub fn remove(
    conn: &ConnShared,
    conn_index: usize,
    session: &mut Session,
    id: usize,
    now: Instant,
) -> Option<Draining> {
    let table = conn.paths();
    let path = table.get(id)?;
    let drain = drain_time(session);
    let _already_gone_from_session = session.remove_path(id);
    path.mark_removed();
    Some(Draining {
        conn: conn_index,
        id,
        until: now + drain,
    })
}

/// Drops a drained path from the table.
pub fn finish(conn: &ConnShared, id: usize) {
    let table = conn.paths();
    if table.get(id).is_some_and(|p| p.is_removed()) {
        let mut next = (*table).clone();
        next.remove(id);
        conn.set_paths(next);
    }
}

/// How long a removed path keeps receiving: two of the slowest smoothed
/// RTTs on top of [`MIN_DRAIN`], at most [`MAX_DRAIN`].
pub fn drain_time(session: &Session) -> Duration {
    let slowest = session
        .paths()
        .filter_map(|(_, p)| p.rtt().smoothed())
        .max()
        .unwrap_or(Duration::ZERO);
    (MIN_DRAIN + slowest * 2).min(MAX_DRAIN)
}

/// The local address to use for a path towards `remote`: the source the
/// kernel's routing picks (no datagram is sent; connecting a UDP socket
/// only looks the route up).
pub fn source_towards(remote: SocketAddr) -> std::io::Result<IpAddr> {
    let any: SocketAddr = if remote.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let probe = UdpSocket::bind(any)?;
    probe.connect(remote)?;
    Ok(probe.local_addr()?.ip())
}

/// Publishes new weights and window of a path to the workers.
pub fn publish_params(path: &PathShared, params: &PathParams) {
    path.weight_out.store(params.weight_out, Relaxed);
    path.weight_in.store(u32::from(params.weight_in), Relaxed);
    path.window.store(params.window, Relaxed);
}
