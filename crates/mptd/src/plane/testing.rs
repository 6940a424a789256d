//! Test helpers shared by the planes' unit tests.

use std::time::Instant;

use mpt_proto::crypto::{SessionKeys, INIT_LEN};
use mpt_proto::wire::{Flags, Header, MsgType};

/// A pair of matching session keys (initiator's, responder's), from a
/// real PSK handshake.
pub(crate) fn session_keys() -> (SessionKeys, SessionKeys) {
    use mpt_proto::crypto::{Answer, Initiator, Psk, Responder};
    let psk = Psk::from_bytes(*b"mptd rx test pre-shared key 32 b");
    let header = Header {
        msg_type: MsgType::HandshakeInit,
        flags: Flags::NONE,
        path_id: 0,
        conn_id: 7,
        seq: 0,
        path_seq: 0,
        timestamp_us: 0,
    };
    let mut responder = Responder::new(&psk, 7, *b"rx-test!").unwrap();
    let (mut init, mut reply) = ([0u8; INIT_LEN], [0u8; INIT_LEN]);
    let (mut initiator, mut n) =
        Initiator::start(&psk, *b"rx-test?", &header, [1; 32], 1, None, &mut init).unwrap();
    for _ in 0..2 {
        match responder
            .handle_init(
                &init[..n],
                [2; 32],
                [3; 16],
                Instant::now(),
                &header,
                &mut reply,
            )
            .unwrap()
        {
            Answer::Response { keys, len } => {
                return (initiator.handle_response(&reply[..len]).unwrap(), *keys);
            }
            Answer::Challenge { len } => {
                let cookie = initiator.handle_challenge(&reply[..len]).unwrap();
                (initiator, n) = Initiator::start(
                    &psk,
                    *b"rx-test?",
                    &header,
                    [1; 32],
                    2,
                    Some(cookie),
                    &mut init,
                )
                .unwrap();
            }
        }
    }
    panic!("no handshake");
}
