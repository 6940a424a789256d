//! Key exchange as the control loop drives it: pre-shared-key handshakes
//! (`crate::control::handshake`) and public-key ones
//! (`crate::control::noise`), their messages in and out, and starting a
//! handshake on a path.

use std::sync::atomic::Ordering::Relaxed;

use mpt_proto::crypto::{HandshakeError, INIT_LEN};
use mpt_proto::wire::{Header, MsgType};

use crate::control::handshake::{ChallengeOutcome, InitOutcome};
use crate::control::noise::InitiationOutcome;
use crate::plane::ConnShared;
use crate::plane::ControlDatagram;

use super::conn_keys::ConnKeys;
use super::control_loop::*;
use super::initiate::{index_in_use, noise_header};
use super::transmit::{next_header, send, settle_time};

impl ControlLoop {
    /// A handshake message (not sealed; authenticated by its own MAC).
    /// Refusals are counted and logged at trace level only: anyone can send
    /// them at will. "Session keys established" is logged once per
    /// handshake, when the new keys are confirmed.
    pub(super) fn on_handshake(
        &mut self,
        conn: &ConnShared,
        d: ControlDatagram,
        header: &Header,
        out: &mut [u8; OUT_LEN],
    ) {
        let table = conn.paths();
        let (Some(exchange), Some(crypto), Some(path)) = (
            self.keys.get_mut(d.conn).and_then(ConnKeys::psk_mut),
            conn.crypto.as_ref(),
            table.get(d.path),
        ) else {
            conn.drops.unsupported.add(1);
            return;
        };
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let refused = |e: HandshakeError| {
            match e {
                HandshakeError::Auth => conn.drops.auth.add(1),
                HandshakeError::UnexpectedResponse | HandshakeError::BadCookie => {
                    conn.drops.auth.add(1)
                }
                HandshakeError::Reflected => conn.drops.handshake_reflected.add(1),
                HandshakeError::WrongConnection { .. } => conn.drops.unknown_connection.add(1),
                _ => conn.drops.malformed.add(1),
            }
            tracing::trace!(conn = %conn.name, path = %path.name, msg = ?header.msg_type, error = %e, "handshake message refused");
        };
        let limited = || {
            conn.drops.handshake_rate_limited.add(1);
            tracing::trace!(conn = %conn.name, path = %path.name, msg = ?header.msg_type, "handshake message over the rate limit");
        };
        // Answers go back where the message came from.
        let to = d.from.or_else(|| path.remote().map(|(a, _)| a));
        match header.msg_type {
            MsgType::HandshakeInit => {
                let reply_header = next_header(conn, path, d.at);
                match exchange.on_init(bytes, d.from, d.at, &reply_header, &mut out[..INIT_LEN]) {
                    InitOutcome::Respond { keys, len } => {
                        // Pending until the peer seals something with them;
                        // the remote is learnt from that datagram too.
                        crypto.set_pending(*keys, d.at);
                        exchange.settle(d.at + settle_time(&self.sessions[d.conn]));
                        tracing::debug!(conn = %conn.name, path = %path.name, "answered a handshake init; keys pending");
                        if let Some(to) = to {
                            send(conn, path, &out[..len], to);
                        }
                    }
                    InitOutcome::Challenge { len } => {
                        conn.drops.handshake_challenged.add(1);
                        tracing::trace!(conn = %conn.name, path = %path.name, "handshake init not provably fresh; challenged");
                        if let Some(to) = to {
                            send(conn, path, &out[..len], to);
                        }
                    }
                    InitOutcome::OursWins => {}
                    InitOutcome::RateLimited => limited(),
                    InitOutcome::Refused(e) => refused(e),
                }
            }
            MsgType::HandshakeChallenge => {
                let init_header = next_header(conn, path, d.at);
                match exchange.on_challenge(bytes, d.from, d.at, &init_header, &mut out[..INIT_LEN])
                {
                    ChallengeOutcome::Retry { len } => {
                        tracing::debug!(conn = %conn.name, path = %path.name, "challenged; sending handshake init with the cookie");
                        if let Some(to) = to {
                            send(conn, path, &out[..len], to);
                        }
                    }
                    ChallengeOutcome::RateLimited => limited(),
                    ChallengeOutcome::Refused(e) => refused(e),
                }
            }
            _ => match exchange.on_response(bytes) {
                Ok(keys) => {
                    // The Response proves the peer derived the keys: switch,
                    // and probe at once so it confirms them without waiting
                    // for a keepalive.
                    crypto.switch(keys, d.at);
                    if let Some(from) = d.from {
                        if path.learn_remote(from, d.to) {
                            tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address from handshake");
                        }
                    }
                    tracing::info!(conn = %conn.name, path = %path.name, "session keys established");
                    exchange.settle(d.at + settle_time(&self.sessions[d.conn]));
                    self.sessions[d.conn].probe_now(d.path, d.at);
                }
                Err(e) => refused(e),
            },
        }
    }

    /// A public-key handshake message (not sealed; authenticated by its
    /// MACs and the Noise layer). Refusals are counted (by the protocol
    /// module, by reason) and logged at trace level only: anyone can send
    /// them at will.
    pub(super) fn on_noise(
        &mut self,
        conn: &ConnShared,
        d: ControlDatagram,
        header: &Header,
        out: &mut [u8; OUT_LEN],
    ) {
        let table = conn.paths();
        let (Some(crypto), Some(path), Some(nc), Some(nd)) = (
            conn.crypto.as_ref().filter(|c| c.noise),
            table.get(d.path),
            self.keys.get_mut(d.conn).and_then(ConnKeys::noise_mut),
            self.noise.as_mut(),
        ) else {
            conn.drops.unsupported.add(1);
            return;
        };
        let bytes = &d.bytes[..d.len.min(d.bytes.len())];
        let refused = |e: &dyn std::fmt::Display| {
            tracing::trace!(conn = %conn.name, path = %path.name, msg = ?header.msg_type, error = %e, "handshake message refused");
        };
        match header.msg_type {
            MsgType::NoiseInitiation => {
                // Answers go back where the initiation came from.
                let Some(src) = d.from else { return };
                let conns = &self.conns;
                let template = noise_header(conn, path, d.at);
                match nd.on_initiation(
                    bytes,
                    src,
                    &|i| index_in_use(conns, i),
                    d.at,
                    template,
                    &mut out[..],
                ) {
                    InitiationOutcome::Cookie { len } => {
                        nc.stats.cookies_sent += 1;
                        tracing::trace!(conn = %conn.name, path = %path.name, from = %src, "under load: answered an initiation with a cookie");
                        send(conn, path, &out[..len], src);
                    }
                    InitiationOutcome::Respond {
                        len,
                        conn: peer,
                        established,
                    } => {
                        if peer != d.conn {
                            nd.stats.refusals.wrong_connection.add(1);
                            refused(&"the initiator's key names another connection");
                            return;
                        }
                        if !nc.take_their_initiation(crypto, d.at) {
                            nd.stats.refusals.lost_race.add(1);
                            tracing::debug!(conn = %conn.name, path = %path.name, "both sides initiated; ours wins, theirs ignored");
                            return;
                        }
                        nc.responded(crypto, *established, conn.seq.load(Relaxed), d.at);
                        tracing::debug!(conn = %conn.name, path = %path.name, "answered a handshake initiation; keys pending");
                        send(conn, path, &out[..len], src);
                    }
                    InitiationOutcome::Refused(e) => {
                        if e == mpt_proto::noise::NoiseError::Decrypt && crypto.keys().is_none() {
                            crate::control::auth_warning::failed(
                                Some(&conn.name),
                                Some(src),
                                "Noise initiation that does not decrypt",
                                d.at,
                            );
                        }
                        refused(&e)
                    }
                }
            }
            MsgType::NoiseResponse => {
                if !nd.admit_response(d.from, d.at) {
                    refused(&"Noise response over the handshake rate");
                    return;
                }
                match nc.on_response(crypto, bytes, conn.seq.load(Relaxed), d.at) {
                    Ok(_) => {
                        if let Some(from) = d.from {
                            if path.learn_remote(from, d.to) {
                                tracing::info!(conn = %conn.name, path = %path.name, remote = %from, "learnt remote address from handshake");
                            }
                        }
                        tracing::info!(conn = %conn.name, path = %path.name, "session keys established");
                        // The peer confirms the keys with our first
                        // datagram under them: send one now.
                        if let Some(session) = self.sessions.get_mut(d.conn) {
                            session.probe_now(d.path, d.at);
                        }
                    }
                    Err(e) => refused(&e),
                }
            }
            _ => match nc.on_cookie_reply(bytes, d.at) {
                Ok(()) => {
                    tracing::debug!(conn = %conn.name, path = %path.name, "the peer is under load: got a cookie for the next initiation");
                }
                Err(e) => refused(&e),
            },
        }
        nd.publish();
        nc.publish(crypto);
    }
}
