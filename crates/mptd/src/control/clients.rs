//! Client connections on a shared port, as the control loop manages them:
//! added and removed by a reload, their paths learnt from the datagrams
//! that authenticate, and the first message of each (a Noise initiation
//! that names no connection) matched to its connection by static key.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use mpt_proto::path::{AdminStatus, PathParams};
use mpt_proto::wire::{Flags, Header, MsgType};
use mpt_proto::Session;

use crate::control::noise::{InitiationOutcome, NoiseConn};
use crate::control::pathset::{self, ConnSetup, NewPath};
use crate::io::source::Source;
use crate::plane::ConnShared;
use crate::plane::ControlDatagram;

use super::conn_keys::ConnKeys;
use super::control_loop::*;
use super::initiate::index_in_use;

impl ControlLoop {
    /// Adds client connection `c` (a reload): its state, session, key
    /// and routes, then publishes the new set to the workers. Nothing
    /// else changes.
    pub fn add_client(&mut self, c: &crate::config::ConnectionConfig) -> Result<(), String> {
        use crate::control::noise::NoiseTiming;
        use mpt_proto::crypto::Psk;
        let Some(peer) = c.public_key else {
            return Err("a client connection needs a public_key".into());
        };
        if !self.shared_ports.iter().any(|p| p.port == c.port) {
            return Err(format!(
                "port {} is no shared port yet (restart to open it)",
                c.port
            ));
        }
        let Some(nd) = self.noise.as_mut() else {
            return Err("the daemon started without a private key in use (restart)".into());
        };
        let psk = match &c.key_file {
            Some(file) => Some(
                Psk::from_bytes(*crate::keys::load(file).map_err(|e| format!("{e:#}"))?)
                    .with_cipher(self.config.daemon.cipher),
            ),
            None => None,
        };
        let now = Instant::now();
        let ci = self.conns.len();
        let timing = NoiseTiming::new(c.keepalive, c.rekey_after);
        let crypto = crate::plane::ConnCrypto::new_noise(
            psk.clone()
                .unwrap_or_else(|| Psk::from_bytes([0; 32]).with_cipher(self.config.daemon.cipher)),
            timing.grace,
            crate::plane::OLD_KEYS_MAX,
        );
        crypto.set_mac1(nd.identity().mac1_check());
        let mut session = Session::new(
            mpt_proto::SessionConfig {
                conn_id: c.id,
                paths: Vec::new(),
                first_control_id: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_micros() as u64),
            },
            now,
        )
        .map_err(|e| e.to_string())?;
        session.set_loss_repair(c.repair);
        let mut conn = ConnShared::new(
            ci,
            c.name.clone(),
            c.id,
            now,
            crate::plane::PathTable::new(Vec::new()),
            Some(crypto),
            crate::plane::route::SourceFilter::for_connection(c),
            mpt_proto::reorder::Resequencer::new(
                crate::plane::REORDER_SLOTS,
                usize::from(self.config.tunnel.mtu),
                crate::plane::DEFAULT_REORDER_TIMEOUT,
            ),
            crate::plane::DEFAULT_REORDER_TIMEOUT,
            None,
            self.tx_wakes.clone(),
        );
        conn.client = true;
        conn.leg_pin = crate::plane::leg_pin::LegPin::for_connection(&self.config.tunnel, c);
        conn.adaptive.store(
            c.scheduler == crate::config::SchedulerKind::Adaptive,
            Relaxed,
        );
        conn.repair.store(c.repair, Relaxed);
        conn.set_redundancy(c.redundancy);
        let conn = Arc::new(conn);
        if let Some(crypto) = &conn.crypto {
            crypto.register(self.session_map.clone(), Arc::downgrade(&conn));
        }
        for net in &c.networks {
            match crate::io::routes::add_route_if_absent(net, &self.tun_name) {
                Ok(()) => {}
                Err(crate::io::routes::RouteError::Refused { errno, .. })
                    if errno == libc::EEXIST =>
                {
                    tracing::warn!(conn = %c.name, route = %net, "a route to a new client's network exists already: left alone (mptd replaces no route it did not create)");
                }
                Err(e) => {
                    tracing::warn!(conn = %c.name, route = %net, error = %e, "cannot route a new client's network");
                }
            }
        }
        nd.add_peer(peer, ci, psk.clone());
        self.keys.push(ConnKeys::Noise(Box::new(NoiseConn::new(
            nd.identity().clone(),
            peer,
            psk,
            NoiseTiming::new(c.keepalive, c.rekey_after).with_settle(c.dead_timer),
        ))));
        self.sessions.push(session);
        self.setups.push(ConnSetup {
            port: c.port,
            remote_port: c.remote_port,
            keepalive: c.keepalive,
            dead_timer: c.dead_timer,
        });
        self.peer_locals.push(c.peer_locals());
        let mut list = (*self.conns).clone();
        list.push(conn);
        self.conns = Arc::new(list);
        self.config.connections.push(c.clone());
        self.publish_conns();
        tracing::info!(conn = %c.name, index = ci, port = c.port, "client connection added");
        Ok(())
    }

    /// Removes client connection `ci` (a reload): from now on its
    /// datagrams are refused (its keys and session indexes are gone), its
    /// initiations too (its key is unknown), nothing is routed to it and
    /// it has no path. Its slot stays (indexes never move), empty.
    pub fn remove_client(&mut self, ci: usize) {
        let Some(conn) = self.conns.get(ci).cloned() else {
            return;
        };
        conn.removed.store(true, Relaxed);
        if let Some(crypto) = &conn.crypto {
            crypto.drop_all();
        }
        let name = conn.name.clone();
        if let Some(c) = self.config.connections.iter().find(|c| c.name == name) {
            if let (Some(nd), Some(key)) = (self.noise.as_mut(), c.public_key) {
                nd.remove_peer(&key);
            }
            for net in &c.networks {
                if let Err(e) = crate::io::routes::del_route(net, &self.tun_name) {
                    tracing::debug!(conn = %name, route = %net, error = %e, "removing a client's route");
                }
            }
        }
        if let Some(session) = self.sessions.get_mut(ci) {
            for p in conn.paths().iter() {
                let _ = session.remove_path(p.id);
                p.mark_removed();
            }
        }
        conn.set_paths(crate::plane::PathTable::new(Vec::new()));
        self.draining.retain(|d| d.conn != ci);
        if let Some(keys) = self.keys.get_mut(ci) {
            *keys = ConnKeys::None;
        }
        self.config.connections.retain(|c| c.name != name);
        self.publish_conns();
        tracing::info!(conn = %name, "client connection removed");
    }

    /// Publishes the connections and a router over those not removed.
    pub(super) fn publish_conns(&self) {
        let by_name: std::collections::HashMap<&str, &crate::config::ConnectionConfig> = self
            .config
            .connections
            .iter()
            .map(|c| (c.name.as_str(), c))
            .collect();
        let mut router = crate::plane::route::Router::default();
        for (ci, conn) in self.conns.iter().enumerate() {
            if conn.removed.load(Relaxed) {
                continue;
            }
            if let Some(c) = by_name.get(conn.name.as_str()) {
                router.add_connection(c, ci);
            }
        }
        self.conn_set.publish(self.conns.clone(), Arc::new(router));
    }

    /// A client connection's path `id` was heard from `from` (after
    /// authentication): adds it if the connection has no such path (or
    /// only a draining one), moves it to the other family's socket if
    /// the client changed family. A known path's new source is learnt by
    /// the receive worker (roaming).
    pub(super) fn learn_path(
        &mut self,
        ci: usize,
        id: usize,
        from: SocketAddr,
        to: Option<Source>,
        now: Instant,
    ) {
        let Some(conn) = self.conns.get(ci).cloned() else {
            return;
        };
        if !conn.client || id >= mpt_proto::sched::MAX_PATHS {
            return;
        }
        let Some(setup) = self.setups.get(ci).copied() else {
            return;
        };
        let table = conn.paths();
        if let Some(p) = table.get(id) {
            if !p.is_removed() && p.local.is_ipv4() == from.is_ipv4() {
                return;
            }
            // Draining after it died, or on the other family: start over.
            let was_live = !p.is_removed();
            drop(table);
            if was_live {
                let _ = pathset::remove(&conn, ci, &mut self.sessions[ci], id, now);
            }
            self.draining.retain(|d| !(d.conn == ci && d.id == id));
            pathset::finish(&conn, id);
        } else {
            drop(table);
        }
        let Some(socket) = SharedPort::socket(&self.shared_ports, setup.port, from) else {
            return;
        };
        let socket = socket.share();
        let new = NewPath {
            name: format!("path{id}"),
            local: socket.local_addr(),
            remote: Some(from),
            remote_fixed: false,
            remote_name: None,
            interface: None,
            follow: false,
            from_config: false,
            params: PathParams {
                keepalive: setup.keepalive,
                dead_timer: setup.dead_timer,
                // A path's defaults in the config (its client weighs its
                // paths; feedback and the adaptive scheduler do the rest).
                weight_out: 1,
                weight_in: 1,
                window: 1,
                admin: AdminStatus::Up,
            },
        };
        match pathset::add_socket(&conn, &mut self.sessions[ci], id, new, socket, now) {
            Ok(p) => {
                // Replies leave from the address the client sends to.
                p.learn_remote(from, to);
                tracing::info!(conn = %conn.name, path = %p.name, id, remote = %from, local = %to.map_or_else(|| "(routing's choice)".to_string(), |t| t.addr.to_string()), "learnt a path of the client");
            }
            Err(e) => {
                tracing::debug!(conn = %conn.name, id, error = %e, "cannot add the client's path");
            }
        }
    }

    /// A Noise initiation on shared port `port`: the responder finds the
    /// connection from the initiator's static key; it must be a client
    /// connection of that port. The answer goes back from the port's
    /// socket, and the path it came on becomes a path of the connection.
    pub(super) fn on_shared_initiation(
        &mut self,
        d: ControlDatagram,
        port: u16,
        out: &mut [u8; OUT_LEN],
    ) {
        let (Some(src), Some(nd)) = (d.from, self.noise.as_mut()) else {
            return;
        };
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let conns = &self.conns;
        let template = Header {
            msg_type: MsgType::NoiseInitiation,
            flags: Flags::NONE,
            path_id: d.path as u16,
            conn_id: 0,
            seq: 0,
            path_seq: 0,
            timestamp_us: 0,
        };
        let Some(socket) = SharedPort::socket(&self.shared_ports, port, src) else {
            return;
        };
        match nd.on_initiation(
            bytes,
            src,
            &|i| index_in_use(conns, i),
            d.at,
            template,
            &mut out[..],
        ) {
            InitiationOutcome::Cookie { len } => {
                tracing::trace!(from = %src, port, "under load: answered an initiation with a cookie");
                let _ = socket.send_from(&out[..len], src, d.to.as_ref());
            }
            InitiationOutcome::Respond {
                len,
                conn: ci,
                established,
            } => {
                let client = self.conns.get(ci).cloned();
                let port_ok = self.setups.get(ci).is_some_and(|s| s.port == port);
                let (Some(conn), true) = (client.filter(|c| c.client), port_ok) else {
                    nd.stats.refusals.wrong_connection.add(1);
                    tracing::debug!(from = %src, port, "refused an initiation on the shared port: the key is no client connection of this port");
                    return;
                };
                if conn.removed.load(Relaxed) {
                    nd.stats.refusals.wrong_connection.add(1);
                    return;
                }
                let (Some(crypto), Some(nc)) = (
                    conn.crypto.as_ref(),
                    self.keys.get_mut(ci).and_then(ConnKeys::noise_mut),
                ) else {
                    return;
                };
                if !nc.take_their_initiation(crypto, d.at) {
                    nd.stats.refusals.lost_race.add(1);
                    return;
                }
                nc.responded(crypto, *established, conn.seq.load(Relaxed), d.at);
                nc.publish(crypto);
                nd.publish();
                tracing::debug!(conn = %conn.name, from = %src, "answered a client's handshake initiation; keys pending");
                match socket.send_from(&out[..len], src, d.to.as_ref()) {
                    Ok(_) => {}
                    Err(e) => {
                        conn.drops.send_error.add(1);
                        tracing::trace!(conn = %conn.name, error = %e, "response send failed");
                    }
                }
                self.learn_path(ci, d.path, src, d.to, d.at);
            }
            InitiationOutcome::Refused(e) => {
                if e == mpt_proto::noise::NoiseError::Decrypt {
                    crate::control::auth_warning::failed(
                        None,
                        Some(src),
                        "Noise initiation on the shared port that does not decrypt",
                        d.at,
                    );
                }
                tracing::trace!(from = %src, port, error = %e, "initiation refused on the shared port");
            }
        }
        if let Some(nd) = self.noise.as_ref() {
            nd.publish();
        }
    }
}
