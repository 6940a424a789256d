//! Our own control datagrams on their way out: the header of the next
//! datagram on a path (numbers, timestamp) and sending it, counted when
//! it fails; how long a fresh handshake waits for the peer to settle.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use mpt_proto::wire::{Flags, Header, MsgType};
use mpt_proto::Session;

use crate::plane::{ConnShared, PathShared};

/// How long a fresh session gets before all-paths-down triggers a new
/// handshake: the longest dead timer.
pub(super) fn settle_time(session: &Session) -> Duration {
    session
        .paths()
        .map(|(_, p)| p.params().dead_timer)
        .max()
        .unwrap_or(Duration::from_secs(5))
}

/// A header with fresh sequence numbers for a message on `path`.
pub(super) fn next_header(conn: &ConnShared, path: &PathShared, now: Instant) -> Header {
    Header {
        msg_type: MsgType::HandshakeInit,
        flags: Flags::NONE,
        path_id: path.id as u16,
        conn_id: conn.conn_id,
        seq: conn.seq.fetch_add(1, Relaxed),
        path_seq: path.path_seq.fetch_add(1, Relaxed),
        timestamp_us: mpt_proto::timestamp_us(conn.epoch, now),
    }
}

/// [`next_header`]'s fields other than the sequence numbers.
pub(super) fn next_header_fields(conn: &ConnShared, path: &PathShared, now: Instant) -> Header {
    Header {
        msg_type: MsgType::NoiseInitiation,
        flags: Flags::NONE,
        path_id: path.id as u16,
        conn_id: conn.conn_id,
        seq: 0,
        path_seq: 0,
        timestamp_us: mpt_proto::timestamp_us(conn.epoch, now),
    }
}

pub(super) fn send(conn: &ConnShared, path: &PathShared, bytes: &[u8], to: std::net::SocketAddr) {
    match path.socket.send_from(bytes, to, path.via().as_ref()) {
        Ok(_) => {
            path.tx_packets.add(1);
            path.tx_bytes.add(bytes.len() as u64);
        }
        Err(e) => {
            conn.drops.send_error.add(1);
            tracing::trace!(conn = %conn.name, path = %path.name, error = %e, "control send failed");
        }
    }
}
