//! Which connection a received datagram belongs to, from its header alone
//! (before any cryptography).
//!
//! The header's connection id is the configured `id` on cleartext and PSK
//! connections, and on public-key (Noise) connections the receiver's
//! session index: one of ours with keys ([`ConnCrypto::knows_index`]), the
//! index of our handshake in flight for a response or cookie reply, and 0
//! in an initiation (which names no session yet; the responder finds the
//! connection from the initiator's static key).
//!
//! On a connection's own path sockets this is a check of the socket's
//! connection ([`accepts`]). On a shared port (client connections) the
//! connection is looked up by session index in `crate::plane::shared_port::SessionMap`
//! (one hash lookup), and then checked with [`accepts`] like anywhere
//! else; [`find`] is the same rule as a scan, the reference the map is
//! tested against.
//!
//! [`ConnCrypto::knows_index`]: crate::plane::ConnCrypto::knows_index

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use mpt_proto::wire::{Header, MsgType};

use crate::plane::ConnShared;

/// Whether a datagram with this header is addressed to `conn`.
pub fn accepts(conn: &ConnShared, header: &Header) -> bool {
    match conn.crypto.as_ref().filter(|c| c.noise) {
        None => header.conn_id == conn.conn_id,
        Some(c) => match header.msg_type {
            // Refused as `malformed` by the responder if not 0; the
            // responder then finds the connection by the static key.
            MsgType::NoiseInitiation => true,
            MsgType::NoiseResponse | MsgType::NoiseCookieReply => {
                header.conn_id != 0 && header.conn_id == c.handshake_index.load(Relaxed)
            }
            _ => c.knows_index(header.conn_id),
        },
    }
}

/// The connection (index in `conns`) a datagram with this header is
/// addressed to, if any. An initiation names none (see [`accepts`]).
pub fn find(conns: &[Arc<ConnShared>], header: &Header) -> Option<usize> {
    if header.msg_type == MsgType::NoiseInitiation {
        return None;
    }
    conns.iter().position(|c| accepts(c, header))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plane::NoiseIds;
    use crate::plane::{ConnCrypto, PathTable, TxWakes};
    use mpt_proto::crypto::{Psk, Role};
    use mpt_proto::reorder::Resequencer;
    use mpt_proto::wire::Flags;
    use std::time::{Duration, Instant};

    fn conn(index: usize, id: u32, crypto: Option<ConnCrypto>) -> Arc<ConnShared> {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        Arc::new(ConnShared::new(
            index,
            format!("c{index}"),
            id,
            now,
            PathTable::new(Vec::new()),
            crypto,
            crate::plane::route::SourceFilter::default(),
            Resequencer::new(16, 1500, Duration::from_millis(25)),
            Duration::from_millis(25),
            Some(crate::io::udp::Waker::new().unwrap()),
            TxWakes(Arc::new(Vec::new())),
        ))
    }

    fn header(msg_type: MsgType, conn_id: u32) -> Header {
        Header {
            msg_type,
            flags: Flags::NONE,
            path_id: 0,
            conn_id,
            seq: 1,
            path_seq: 1,
            timestamp_us: 0,
        }
    }

    #[test]
    fn noise_sessions_are_found_by_index_psk_ones_by_id() {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let noise = ConnCrypto::new_noise(
            Psk::from_bytes([0; 32]),
            Duration::from_secs(10),
            Duration::from_secs(30),
        );
        let keys = test_keys();
        noise.install_current(
            keys.clone(),
            Some(NoiseIds {
                local: 0xabcd,
                remote: 0x1234,
                role: Role::Initiator,
                born: now,
                seq0: 0,
            }),
            now,
        );
        noise.handshake_index.store(0x77, Relaxed);
        let conns = vec![
            conn(0, 1, None),
            conn(1, 2, Some(ConnCrypto::new(Psk::from_bytes([1; 32])))),
            conn(2, 3, Some(noise)),
        ];
        assert_eq!(find(&conns, &header(MsgType::Data, 1)), Some(0));
        assert_eq!(find(&conns, &header(MsgType::Probe, 2)), Some(1));
        assert_eq!(find(&conns, &header(MsgType::Data, 0xabcd)), Some(2));
        // The configured id means nothing on a Noise connection.
        assert_eq!(find(&conns, &header(MsgType::Data, 3)), None);
        assert_eq!(find(&conns, &header(MsgType::Data, 0)), None);
        assert_eq!(find(&conns, &header(MsgType::NoiseResponse, 0x77)), Some(2));
        assert_eq!(
            find(&conns, &header(MsgType::NoiseCookieReply, 0x77)),
            Some(2)
        );
        assert_eq!(find(&conns, &header(MsgType::NoiseResponse, 0xabcd)), None);
        assert_eq!(find(&conns, &header(MsgType::NoiseInitiation, 0)), None);
        assert!(accepts(&conns[2], &header(MsgType::NoiseInitiation, 0)));
        // The sealing side addresses the peer's index.
        let c = conns[2].crypto.as_ref().unwrap();
        assert_eq!(c.sealing(3).map(|(_, id)| id), Some(0x1234));
        // Replaced keys keep their index known until they go.
        c.install_current(
            keys,
            Some(NoiseIds {
                local: 0xbeef,
                remote: 0x5678,
                role: Role::Initiator,
                born: now,
                seq0: 10,
            }),
            now,
        );
        assert!(c.knows_index(0xabcd) && c.knows_index(0xbeef));
        assert_eq!(c.sealing(3).map(|(_, id)| id), Some(0x5678));
        c.expire(now + Duration::from_secs(31));
        assert!(!c.knows_index(0xabcd) && c.knows_index(0xbeef));
        assert!(c.drop_current());
        assert!(!c.knows_index(0xbeef));
        assert!(c.sealing(3).is_none());
    }

    fn test_keys() -> mpt_proto::crypto::SessionKeys {
        crate::plane::testing::session_keys().0
    }
}
