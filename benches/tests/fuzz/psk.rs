//! The PSK handshake's messages (Init, Challenge, Response): with a fixed
//! key, a challenged first Init and a second one carrying the cookie, any
//! bytes or any alteration of the genuine messages go to the responder
//! and both initiators.

use std::sync::OnceLock;
use std::time::Instant;

use mpt_proto::crypto::{
    Answer, Initiator, Psk, Responder, SessionKeys, CHALLENGE_LEN, INIT_LEN, RESPONSE_LEN, TAG_LEN,
};
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};
use proptest::prelude::*;

use crate::harness::fuzz;

const CONN: u32 = 0x6d70_7402;

fn header(msg_type: MsgType, seq: u64) -> Header {
    Header {
        msg_type,
        flags: Flags::NONE,
        path_id: 1,
        conn_id: CONN,
        seq,
        path_seq: 2,
        timestamp_us: 3,
    }
}

struct Fixture {
    now: Instant,
    first: Initiator,
    challenge: Vec<u8>,
    second: Initiator,
    init2: Vec<u8>,
    response: Vec<u8>,
    /// Right after the Challenge: the cookie is outstanding.
    responder: Responder,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let now = Instant::now();
        let psk = Psk::from_bytes(*b"mpt stable fuzz pre-shared key!!");
        let mut init = vec![0u8; INIT_LEN];
        let (first, _) = Initiator::start(
            &psk,
            *b"fuzz-ini",
            &header(MsgType::HandshakeInit, 1),
            [0x3c; 32],
            1000,
            None,
            &mut init,
        )
        .expect("start");
        let mut responder = Responder::new(&psk, CONN, *b"fuzz-rsp").expect("responder");
        let mut challenge = vec![0u8; CHALLENGE_LEN];
        let a = responder
            .handle_init(
                &init,
                [0x5a; 32],
                [0xc0; 16],
                now,
                &header(MsgType::HandshakeResponse, 1),
                &mut challenge,
            )
            .expect("init");
        assert!(matches!(a, Answer::Challenge { .. }));
        let cookie = first.handle_challenge(&challenge).expect("challenge");
        let mut init2 = vec![0u8; INIT_LEN];
        let (second, _) = Initiator::start(
            &psk,
            *b"fuzz-ini",
            &header(MsgType::HandshakeInit, 2),
            [0x3d; 32],
            1001,
            Some(cookie),
            &mut init2,
        )
        .expect("start");
        let mut response = vec![0u8; RESPONSE_LEN];
        let a = responder
            .clone()
            .handle_init(
                &init2,
                [0x5b; 32],
                [0xc1; 16],
                now,
                &header(MsgType::HandshakeResponse, 2),
                &mut response,
            )
            .expect("init with cookie");
        assert!(matches!(a, Answer::Response { .. }));
        Fixture {
            now,
            first,
            challenge,
            second,
            init2,
            response,
            responder,
        }
    })
}

/// What one seals the other opens.
fn keys_match(a: &SessionKeys, b: &SessionKeys) -> bool {
    let mut buf = [0u8; HEADER_LEN + 5 + TAG_LEN];
    let h = Header {
        flags: Flags::SEALED,
        ..header(MsgType::Data, 9)
    };
    if h.emit(&mut buf).is_err() {
        return false;
    }
    buf[HEADER_LEN..HEADER_LEN + 5].copy_from_slice(b"hello");
    let Ok(n) = a.seal_datagram(&mut buf, 5) else {
        return false;
    };
    b.open_datagram(&mut buf[..n])
        .is_ok_and(|plain| plain == b"hello")
}

/// The Init to a copy of the responder; whether it got keys. Checks the
/// reply's size (no amplification) and that the second initiator takes
/// the Response exactly when the Init was its own, with matching keys.
fn feed_init(f: &Fixture, d: &[u8]) -> Result<bool, TestCaseError> {
    let mut r = f.responder.clone();
    let mut reply = [0xa5u8; 256];
    let Ok(a) = r.handle_init(
        d,
        [0x77; 32],
        [0x99; 16],
        f.now,
        &header(MsgType::HandshakeResponse, 3),
        &mut reply,
    ) else {
        return Ok(false);
    };
    let (keys, m) = match a {
        Answer::Response { keys, len } => (Some(keys), len),
        Answer::Challenge { len } => (None, len),
    };
    prop_assert!(m <= d.len(), "amplification: {} for {}", m, d.len());
    prop_assert!(
        reply[m..].iter().all(|&b| b == 0xa5),
        "wrote past the reply"
    );
    let Some(keys) = keys else { return Ok(false) };
    match f.second.handle_response(&reply[..m]) {
        Ok(mine) => {
            prop_assert_eq!(d, &f.init2[..]);
            prop_assert!(keys_match(&mine, &keys) && keys_match(&keys, &mine));
        }
        Err(_) => prop_assert_ne!(d, &f.init2[..]),
    }
    Ok(true)
}

fn masked(msg: &[u8], mask: &[u8]) -> Vec<u8> {
    msg.iter()
        .enumerate()
        .map(|(i, b)| b ^ mask.get(i).copied().unwrap_or(0))
        .collect()
}

#[test]
fn psk_messages() {
    let input = (
        0u8..4,
        prop::collection::vec(any::<u8>(), 0..200),
        prop::collection::vec(prop_oneof![3 => Just(0u8), 1 => any::<u8>()], 0..130),
    );
    fuzz("psk_messages", 256, input, |(mode, raw, mask)| {
        let f = fixture();
        match mode {
            0 => {
                prop_assert_eq!(feed_init(f, &raw)?, raw == f.init2);
                prop_assert_eq!(f.second.handle_response(&raw).is_ok(), raw == f.response);
                prop_assert_eq!(f.first.handle_challenge(&raw).is_ok(), raw == f.challenge);
            }
            1 => {
                let d = masked(&f.init2, &mask);
                prop_assert_eq!(feed_init(f, &d)?, d == f.init2);
            }
            2 => {
                let d = masked(&f.response, &mask);
                prop_assert_eq!(f.second.handle_response(&d).is_ok(), d == f.response);
                prop_assert!(f.first.handle_response(&d).is_err() || d == f.response);
            }
            _ => {
                let d = masked(&f.challenge, &mask);
                prop_assert_eq!(f.first.handle_challenge(&d).is_ok(), d == f.challenge);
            }
        }
        Ok(())
    });
}
