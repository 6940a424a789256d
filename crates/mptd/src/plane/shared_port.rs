//! Client connections on a shared port: one server, many clients.
//!
//! A server's *client connection* is a `[[connection]]` with a
//! `public_key` and no `[[connection.path]]`. All client connections with
//! the same `port` (default 65022) are served on that one UDP port,
//! bound on `0.0.0.0` and on `[::]` (IPv6-only). Nothing about a client's
//! addresses is configured: its paths are learnt from its datagrams.
//!
//! * **Which connection**: the header's connection id of a public-key
//!   session is the receiver's session index, random and unique among our
//!   sessions. [`SessionMap`] maps each index in use (the three key sets'
//!   and the handshake in flight) to its connection. `ConnCrypto` keeps
//!   it up to date whenever keys are installed or dropped (under its key
//!   lock, the one place indexes change), so the map is exact without any
//!   scan. Workers read it under a read lock taken once per batch (a
//!   hash lookup per message); it is written only on handshakes and
//!   expiries. An initiation carries index 0 and names no connection: it
//!   goes to the control loop, which finds the connection from the
//!   initiator's static key, as on a connection's own port.
//! * **Which path**: a path of a client connection is the client's path
//!   id (in the header), its remote the source address and port of the
//!   latest datagram of that path that authenticated. A path id heard for
//!   the first time (or after its path died) becomes a path of the
//!   connection, sending through the shared socket to that remote; a new
//!   source for a known path id (NAT rebinding, a new address) is the
//!   existing roaming (`PathShared::learn_remote`). A path that falls
//!   silent goes down by the dead timer and is then removed, so a client
//!   has as many paths as it uses, up to the session's limit.
//! * **Which local address**: the sockets report each datagram's
//!   destination address, and a learnt path sends from the one its
//!   client's datagrams arrive on (`crate::io::source`): on a server with
//!   several addresses a reply from any other would not pass the client's
//!   NAT or firewall.
//! * **Which worker**: a fixed pool of `[daemon] threads` receive workers
//!   serves every client connection. Each has its own socket per port and
//!   family, all bound with SO_REUSEPORT, and a BPF program on the group
//!   (`crate::io::lane`) picks the worker from the datagram's session
//!   index and path id (initiations go to the port's initiation lane), so
//!   one client path always reaches the same worker, in order while its
//!   keys last (the resequencer proves losses from each path's
//!   FIFO order; one socket polled by all workers would let two workers
//!   take consecutive batches of one path and hand them over in the other
//!   order). A connection's paths may reach different workers: its
//!   receive state (replay windows, delay line, loss detectors) lives in
//!   the connection (`ConnShared::rx_state`) and a worker takes it, with
//!   the resequencer, once per group of a batch: the batch is sorted by
//!   (connection, path, arrival) with pointer swaps only, and each group
//!   is handled as a connection's own worker handles a batch.
//!
//! Thread count and per-datagram cost do not depend on the number of
//! clients: no thread per client, no scan over connections per datagram
//! (the map lookup per message, the sort of at most 32 messages per
//! batch).

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, Weak};

use crate::plane::{ConnShared, Counter};
use crate::sync::{read_unpoisoned, write_unpoisoned};

/// Session index → client connection, for the shared ports' workers.
#[derive(Debug, Default)]
pub struct SessionMap {
    map: RwLock<HashMap<u32, Arc<ConnShared>>>,
}

impl SessionMap {
    /// The map for a batch's lookups (one read lock per batch).
    pub fn read(&self) -> RwLockReadGuard<'_, HashMap<u32, Arc<ConnShared>>> {
        read_unpoisoned(&self.map)
    }

    /// The connection whose session index is `index` (tests, control loop).
    pub fn get(&self, index: u32) -> Option<Arc<ConnShared>> {
        self.read().get(&index).cloned()
    }

    /// Number of indexes in use.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no index is in use.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `conn`'s indexes changed from `before` to `after` (0: none).
    pub fn replace(&self, conn: &Weak<ConnShared>, before: &[u32], after: &[u32]) {
        let mut g = write_unpoisoned(&self.map);
        for &i in before {
            if i != 0 && !after.contains(&i) {
                // Only if it is still ours (indexes are unique, but a
                // late removal must never take another's entry).
                if g.get(&i)
                    .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), conn.as_ptr()))
                {
                    g.remove(&i);
                }
            }
        }
        let Some(conn) = conn.upgrade() else { return };
        for &i in after {
            if i != 0 {
                g.insert(i, conn.clone());
            }
        }
    }
}

/// What the shared ports refused before any connection was known.
#[derive(Debug, Default)]
pub struct SharedStats {
    /// Datagrams whose session index is no client connection's (an old
    /// or removed client's, or garbage).
    pub unknown_session: Counter,
    /// Datagrams too short or malformed to name a session.
    pub malformed: Counter,
    /// Initiations whose mac1 is wrong (not made for our public key),
    /// dropped by the receive worker.
    pub bad_mac1: Counter,
    /// Initiations handed to the control loop.
    pub initiations: Counter,
    /// Initiations dropped because the control loop's queue was full.
    pub queue_full: Counter,
    /// Initiations the kernel dropped because an initiation lane's queue
    /// was full (`crate::io::lane`): a flood beyond what the lane's
    /// reader takes.
    pub lane_drops: Counter,
    /// Tun writes that failed.
    pub tun_write: Counter,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plane::NoiseIds;
    use crate::plane::{ConnCrypto, PathTable, TxWakes};
    use mpt_proto::crypto::{Psk, Role};
    use mpt_proto::reorder::Resequencer;
    use std::time::{Duration, Instant};

    fn client(index: usize, map: &Arc<SessionMap>) -> Arc<ConnShared> {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let crypto = ConnCrypto::new_noise(
            Psk::from_bytes([0; 32]),
            Duration::from_secs(10),
            Duration::from_secs(30),
        );
        let mut c = ConnShared::new(
            index,
            format!("c{index}"),
            index as u32,
            now,
            PathTable::new(Vec::new()),
            Some(crypto),
            crate::plane::route::SourceFilter::default(),
            Resequencer::new(16, 1500, Duration::from_millis(25)),
            Duration::from_millis(25),
            Some(crate::io::udp::Waker::new().unwrap()),
            TxWakes(Arc::new(Vec::new())),
        );
        c.client = true;
        let c = Arc::new(c);
        c.crypto
            .as_ref()
            .unwrap()
            .register(map.clone(), Arc::downgrade(&c));
        c
    }

    fn ids(local: u32, now: Instant) -> Option<NoiseIds> {
        Some(NoiseIds {
            local,
            remote: local + 1,
            role: Role::Responder,
            born: now,
            seq0: 0,
        })
    }

    fn is(found: Option<Arc<ConnShared>>, conn: &Arc<ConnShared>) -> bool {
        found.is_some_and(|f| Arc::ptr_eq(&f, conn))
    }

    /// The map follows every key change: pending, confirmed (current),
    /// replaced (previous, then expired), the handshake in flight, and
    /// the connection's removal; other connections are never touched.
    #[test]
    fn the_index_map_follows_the_keys() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let map = Arc::new(SessionMap::default());
        let a = client(0, &map);
        let b = client(1, &map);
        let (ka, kb) = (a.crypto.as_ref().unwrap(), b.crypto.as_ref().unwrap());
        let keys = || crate::plane::testing::session_keys().0;
        assert!(map.is_empty());
        ka.install_pending(keys(), ids(100, now), now);
        kb.install_current(keys(), ids(200, now), now);
        assert!(is(map.get(100), &a) && is(map.get(200), &b));
        assert_eq!(map.len(), 2);
        // Confirmed: the same index stays, now for the current keys.
        let pending = ka.key_set().pending.unwrap();
        assert!(ka.confirm(&pending, now));
        assert!(is(map.get(100), &a));
        // A rekey: the new index joins, the old stays while the old keys
        // open, and goes with them.
        ka.install_current(keys(), ids(101, now), now);
        assert!(is(map.get(100), &a) && is(map.get(101), &a));
        ka.expire(now + Duration::from_secs(31));
        assert!(map.get(100).is_none() && is(map.get(101), &a));
        // Our handshake in flight: its response is addressed to its index.
        kb.set_handshake_index(300);
        assert!(is(map.get(300), &b));
        kb.set_handshake_index(0);
        assert!(map.get(300).is_none());
        // Removal drops everything of that connection only.
        ka.drop_all();
        assert!(map.get(101).is_none());
        assert!(is(map.get(200), &b));
        assert_eq!(map.len(), 1);
        assert!(map.get(0).is_none(), "0 is never an index");
    }

    /// A handshake we initiated completes: the control loop installs the
    /// keys under the handshake's index, then clears the handshake index.
    /// The index must stay mapped, or everything the client sends under
    /// the new keys is `unknown_session` (the server-initiated rekey of a
    /// shared-port client).
    #[test]
    fn a_completed_initiation_keeps_its_index() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let map = Arc::new(SessionMap::default());
        let a = client(0, &map);
        let ka = a.crypto.as_ref().unwrap();
        let keys = || crate::plane::testing::session_keys().0;
        ka.install_current(keys(), ids(100, now), now);
        // We initiate a rekey under index 500; the response arrives.
        ka.set_handshake_index(500);
        assert!(is(map.get(500), &a));
        ka.install_current(keys(), ids(500, now), now);
        ka.set_handshake_index(0);
        assert!(is(map.get(500), &a), "the new session's index left the map");
        assert!(ka.knows_index(500));
        // The old keys retire; the new index stays.
        ka.expire(now + Duration::from_secs(31));
        assert!(map.get(100).is_none() && is(map.get(500), &a));
        // An abandoned initiation (no keys under it) does leave.
        ka.set_handshake_index(600);
        ka.set_handshake_index(0);
        assert!(map.get(600).is_none() && is(map.get(500), &a));
    }
}
