//! Starting a handshake on a path: the PSK Init or the Noise initiation
//! with a session index no connection uses.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use mpt_proto::wire::Header;

use crate::control::handshake::KeyExchange;
use crate::control::noise::{NoiseConn, NoiseDaemon};
use crate::plane::{ConnShared, PathShared};

use super::transmit::{next_header, next_header_fields, send};

/// Sends an Init on the `attempt`-th path (rotating) whose remote is known.
pub(super) fn initiate(
    conn: &ConnShared,
    exchange: &mut KeyExchange,
    attempt: usize,
    now: Instant,
    buf: &mut [u8],
) {
    let table = conn.paths();
    let known: Vec<&Arc<PathShared>> = table
        .iter()
        .filter(|p| p.remote().is_some() && !p.is_removed())
        .collect();
    if known.is_empty() {
        return;
    }
    let path = known[attempt % known.len()];
    let Some((remote, _)) = path.remote() else {
        return;
    };
    let header = next_header(conn, path, now);
    match exchange.start(&header, buf) {
        Ok(len) => {
            tracing::debug!(conn = %conn.name, path = %path.name, attempt, "sending handshake init");
            send(conn, path, &buf[..len], remote);
        }
        Err(e) => tracing::warn!(conn = %conn.name, error = %e, "cannot build handshake init"),
    }
}

/// Whether session index `i` is taken by a key set or a handshake in
/// flight of any connection.
pub(super) fn index_in_use(conns: &[Arc<ConnShared>], i: u32) -> bool {
    conns.iter().any(|c| {
        c.crypto
            .as_ref()
            .is_some_and(|k| k.knows_index(i) || k.handshake_index.load(Relaxed) == i)
    })
}

/// The header fields of a public-key handshake message on `path`. Its
/// sequence numbers are informational and consume none: the receiver
/// hands handshake messages to no resequencer and counts them on no path,
/// so a number taken here would be a hole there (a rekey every two
/// minutes would each time look like a lost datagram).
pub(super) fn noise_header(conn: &ConnShared, path: &PathShared, now: Instant) -> Header {
    Header {
        seq: conn.seq.load(Relaxed),
        path_seq: path.path_seq.load(Relaxed),
        ..next_header_fields(conn, path, now)
    }
}

/// Sends a Noise initiation on the next path (rotating over those whose
/// remote is known).
pub(super) fn noise_initiate(
    conn: &ConnShared,
    nc: &mut NoiseConn,
    nd: &mut NoiseDaemon,
    in_use: impl Fn(u32) -> bool,
    now: Instant,
    buf: &mut [u8],
) {
    let Some(crypto) = conn.crypto.as_ref() else {
        return;
    };
    let table = conn.paths();
    let known: Vec<&Arc<PathShared>> = table
        .iter()
        .filter(|p| p.remote().is_some() && !p.is_removed())
        .collect();
    if known.is_empty() {
        return;
    }
    let attempt = nc.counters().initiations_sent as usize;
    let path = known[attempt % known.len()];
    let Some((remote, _)) = path.remote() else {
        return;
    };
    let template = noise_header(conn, path, now);
    match nc.initiate(crypto, &mut nd.rng, in_use, template, buf, now) {
        Ok(len) => {
            tracing::debug!(conn = %conn.name, path = %path.name, attempt, "sending handshake initiation");
            send(conn, path, &buf[..len], remote);
        }
        Err(e) => {
            nd.stats
                .refusals
                .entropy
                .add(u64::from(matches!(e, mpt_proto::noise::NoiseError::Crypto)));
            tracing::warn!(conn = %conn.name, error = %e, "cannot build handshake initiation");
        }
    }
}
