//! Loss repair in the data plane: sending requests for holes, answering
//! the peer's requests from the copies the transmit workers keep.
//!
//! The decisions (which hole to ask for, how many copies to keep, which
//! gaps the resequencer may not give up meanwhile) live in
//! `mpt_proto::repair` and the resequencer; this module only builds,
//! seals and sends the two messages. Both directions run in the receive
//! worker, after a batch and outside the resequencer lock: a request is
//! answered within one batch of its arrival, without a trip through the
//! control loop.
//!
//! Copies cost a copy of every payload, so a transmit worker keeps them
//! for a path only while the peer asks for repairs there
//! ([`KEEP_COPIES`] after the last request): on a clean path nothing is
//! copied. The first request on a path therefore finds nothing; the
//! following ones do.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::crypto::{SessionKeys, TAG_LEN};
use mpt_proto::wire::{Flags, Header, MsgType, Nack, Repair, HEADER_LEN, REPAIR_PREFIX_LEN};

use crate::plane::{ConnShared, PathShared, PathTable};
use crate::sync::lock_unpoisoned;

/// Copies kept per path (payloads of up to the MTU: about 1.5 MB at
/// 1500 bytes; 300 ms of a 40 Mbit/s path).
pub const HISTORY_SLOTS: usize = 1024;

/// How long after the peer's last request a path's payloads are copied.
pub const KEEP_COPIES: Duration = Duration::from_secs(10);

/// Paths of one connection that may keep copies at the same time: what
/// one peer can make us hold is at most this many times [`HISTORY_SLOTS`]
/// payloads (about 12 MB at MTU 1400), not 64 paths' worth (about 90 MB).
/// A request on one more path is not served (counted as `missed`) until
/// another path's copies lapse.
pub const MAX_COPYING_PATHS: usize = 8;

/// Whether the path whose copy deadline is `asked` may (go on) keep
/// copies, given every path's deadline (`deadlines`, in ns since the
/// connection's epoch; 0 or past `now`: not copying).
fn may_keep_copies(asked: u64, deadlines: impl Iterator<Item = u64>, now: u64) -> bool {
    asked > now || deadlines.filter(|&d| d > now).count() < MAX_COPYING_PATHS
}

/// Keys to seal with: `Ok(None)` on a connection without a key, `Err` on
/// an encrypted one without a session yet (nothing can be sent).
fn sealing_keys(conn: &ConnShared) -> Result<Option<Arc<SessionKeys>>, ()> {
    match &conn.crypto {
        None => Ok(None),
        Some(c) => c.keys().map(Some).ok_or(()),
    }
}

/// The connection id to address a datagram sealed with the current keys
/// to: the peer's session index on a public-key connection (should the
/// keys change meanwhile, the peer still tries all the key sets it has).
fn header_conn_id(conn: &ConnShared) -> u32 {
    conn.crypto
        .as_ref()
        .and_then(|c| c.current_ids())
        .map_or(conn.conn_id, |ids| ids.remote)
}

/// A message to send: its type and flags, and how long its payload is
/// (written after the header's place in the buffer).
#[derive(Debug, Clone, Copy)]
struct Message {
    msg_type: MsgType,
    flags: Flags,
    payload_len: usize,
}

/// Fills in the header of `msg` on `path`, seals its payload and sends
/// it. Returns whether it left.
fn seal_and_send(
    conn: &ConnShared,
    path: &PathShared,
    msg: Message,
    keys: Option<&SessionKeys>,
    now: Instant,
    buf: &mut [u8],
) -> bool {
    let Message {
        msg_type,
        flags,
        payload_len,
    } = msg;
    let Some(remote) = path.remote_via() else {
        return false;
    };
    let header = Header {
        msg_type,
        flags: if keys.is_some() {
            flags.with(Flags::SEALED)
        } else {
            flags
        },
        path_id: path.id as u16,
        conn_id: header_conn_id(conn),
        seq: conn.seq.fetch_add(1, Relaxed),
        path_seq: path.path_seq.fetch_add(1, Relaxed),
        timestamp_us: mpt_proto::timestamp_us(conn.epoch, now),
    };
    if header.emit(buf).is_err() {
        return false;
    }
    let mut len = HEADER_LEN + payload_len;
    if let Some(k) = keys {
        match buf
            .get_mut(..len + TAG_LEN)
            .map(|b| k.seal_datagram(b, payload_len))
        {
            Some(Ok(n)) => len = n,
            _ => return false,
        }
    }
    match path
        .socket
        .send_from(&buf[..len], remote.addr, remote.via.as_ref())
    {
        Ok(_) => {
            path.tx_packets.add(1);
            path.tx_bytes.add(len as u64);
            path.tx_data_bytes.add(len as u64);
            true
        }
        Err(e) => {
            conn.drops.send_error.add(1);
            tracing::trace!(conn = %conn.name, path = %path.name, error = %e, "repair send failed");
            false
        }
    }
}

/// Asks the peer for the datagrams `nack` names, on the path that lost
/// them (its copies are filed under that path).
pub fn request(conn: &ConnShared, path: &PathShared, nack: Nack, now: Instant, buf: &mut [u8]) {
    let Ok(keys) = sealing_keys(conn) else { return };
    if nack.emit(&mut buf[HEADER_LEN..]).is_err() {
        return;
    }
    let msg = Message {
        msg_type: MsgType::Nack,
        flags: Flags::NONE,
        payload_len: Nack::LEN,
    };
    if seal_and_send(conn, path, msg, keys.as_deref(), now, buf) {
        conn.repairs.requested.add(1);
        conn.repairs.requested_datagrams.add(u64::from(nack.count));
    }
}

/// The path a copy goes on: the live one with the shortest RTT, else the
/// one the request came on.
fn repair_path<'a>(
    conn: &ConnShared,
    table: &'a PathTable,
    asked_on: &'a PathShared,
) -> &'a PathShared {
    let eligible = conn.eligible.load(Relaxed);
    let mut best: Option<(&PathShared, f64)> = None;
    for p in table.iter() {
        if p.id >= 64 || eligible & (1 << p.id) == 0 || p.is_removed() {
            continue;
        }
        let rtt = lock_unpoisoned(&p.view).rtt_ms;
        if let Some(rtt) = rtt {
            if best.is_none_or(|(_, b)| rtt < b) {
                best = Some((p, rtt));
            }
        }
    }
    best.map_or(asked_on, |(p, _)| p)
}

/// Answers the peer's request `nack`, received on `asked_on` (the path
/// whose datagrams it names), with a copy of each datagram still kept.
pub fn answer(
    conn: &ConnShared,
    table: &PathTable,
    asked_on: &PathShared,
    nack: Nack,
    now: Instant,
    buf: &mut [u8],
) {
    conn.repairs.peer_requests.add(1);
    let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
    let deadlines = table.iter().map(|p| p.repair_until_ns.load(Relaxed));
    if !may_keep_copies(asked_on.repair_until_ns.load(Relaxed), deadlines, conn_ns) {
        conn.repairs.missed.add(u64::from(nack.count));
        return;
    }
    // Copies of paths whose deadline lapsed go now, not when a transmit
    // worker next sends there, so the bound above holds for memory too.
    for p in table.iter() {
        let until = p.repair_until_ns.load(Relaxed);
        if until != 0
            && until <= conn_ns
            && p.repair_until_ns
                .compare_exchange(until, 0, Relaxed, Relaxed)
                .is_ok()
        {
            *lock_unpoisoned(&p.repair_history) = None;
        }
    }
    asked_on
        .repair_until_ns
        .store(conn_ns + KEEP_COPIES.as_nanos() as u64, Relaxed);
    let Ok(keys) = sealing_keys(conn) else { return };
    let via = repair_path(conn, table, asked_on);
    let mut history = lock_unpoisoned(&asked_on.repair_history);
    let Some(history) = history.as_mut() else {
        conn.repairs.missed.add(u64::from(nack.count));
        return;
    };
    for k in 0..u32::from(nack.count) {
        let Some(copy) = history.take(nack.first_path_seq.wrapping_add(k)) else {
            conn.repairs.missed.add(1);
            continue;
        };
        let body = &mut buf[HEADER_LEN..];
        let len = REPAIR_PREFIX_LEN + copy.payload.len();
        if body.len() < len + TAG_LEN || Repair::emit_prefix(copy.seq, body).is_err() {
            conn.repairs.missed.add(1);
            continue;
        }
        body[REPAIR_PREFIX_LEN..len].copy_from_slice(copy.payload);
        let msg = Message {
            msg_type: MsgType::Repair,
            flags: if copy.flow { Flags::FLOW } else { Flags::NONE },
            payload_len: len,
        };
        if seal_and_send(conn, via, msg, keys.as_deref(), now, buf) {
            conn.repairs.sent.add(1);
        }
    }
}

/// Sends a redundancy copy of the data datagram `seq` (its `payload`:
/// flow prefix and IP packet, before sealing) on `via`, as a Repair with
/// the COPY flag. Returns whether it left.
pub fn send_copy(
    conn: &ConnShared,
    via: &PathShared,
    seq: u64,
    payload: &[u8],
    keys: Option<&SessionKeys>,
    now: Instant,
    buf: &mut [u8],
) -> bool {
    let len = REPAIR_PREFIX_LEN + payload.len();
    let Some(body) = buf.get_mut(HEADER_LEN..HEADER_LEN + len + TAG_LEN) else {
        return false;
    };
    if Repair::emit_prefix(seq, body).is_err() {
        return false;
    }
    body[REPAIR_PREFIX_LEN..len].copy_from_slice(payload);
    let msg = Message {
        msg_type: MsgType::Repair,
        flags: Flags::FLOW.with(Flags::COPY),
        payload_len: len,
    };
    let sent = seal_and_send(conn, via, msg, keys, now, buf);
    if sent {
        conn.copies.sent.add(1);
        conn.copies
            .sent_bytes
            .add((HEADER_LEN + len + keys.map_or(0, |_| TAG_LEN)) as u64);
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_keeps_copies_on_a_bounded_number_of_paths() {
        let now = 1_000;
        // Seven copying, some lapsed or never: an eighth may start.
        let mut d = vec![2_000u64; MAX_COPYING_PATHS - 1];
        d.extend([0, 500, 1_000]);
        assert!(may_keep_copies(0, d.iter().copied(), now));
        // Eight copying: a ninth may not, a copying one goes on.
        d.push(5_000);
        assert!(!may_keep_copies(0, d.iter().copied(), now));
        assert!(!may_keep_copies(999, d.iter().copied(), now));
        assert!(may_keep_copies(2_000, d.iter().copied(), now));
        // One lapses: room again.
        d[0] = 900;
        assert!(may_keep_copies(0, d.iter().copied(), now));
    }
}
