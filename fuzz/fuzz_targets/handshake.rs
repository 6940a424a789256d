//! The handshake parsers never panic on any input, and accept nothing but
//! an authentic message: with a fixed PSK, one Initiator whose Init was
//! challenged and a second one that came back with the cookie, whatever the
//! fuzzer writes is fed to a copy of the responder that handed out the
//! cookie (`Responder::handle_init`), and to `Initiator::handle_challenge`
//! and `Initiator::handle_response`.
//!
//! The first input byte picks how the rest is used:
//!
//! | byte & 3 | input                                                        |
//! |----------|--------------------------------------------------------------|
//! | 0        | the rest, as is, to every parser                             |
//! | 1        | the valid Challenge with the rest XORed over it              |
//! | 2        | the valid Init with the cookie with the rest XORed over it   |
//! | 3        | the valid Response with the rest XORed over it               |
//!
//! Checked besides "no panic":
//! * an accepted Init gets a reply no larger than itself (no
//!   amplification); with the cookie it is a Response the second Initiator
//!   accepts exactly when the Init was its own, with keys matching the
//!   responder's, and the same Init is refused the second time (the cookie
//!   is used up); without it, a Challenge;
//! * in the XOR modes, the message is accepted exactly when the mask is all
//!   zeros: no altered byte (header included) gets through. Forging a MAC
//!   by chance has probability 2^-128, so any other acceptance is a bug;
//! * no message is accepted as another kind;
//! * in mode 0 an accepted message must be byte for byte a valid one (the
//!   fuzzer can only get there by copying it).

#![no_main]

use std::sync::OnceLock;
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use mpt_proto::crypto::{
    Answer, HandshakeError, Initiator, Psk, Responder, SessionKeys, CHALLENGE_LEN, INIT_LEN,
    RESPONSE_LEN, TAG_LEN,
};
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};

const CONN_ID: u32 = 0x6d70_7401;
const PSK: [u8; 32] = *b"mpt fuzz handshake pre-shared k!";
const TIMESTAMP: u64 = 1_000;
const INITIATOR: [u8; 8] = *b"fuzz-ini";
const RESPONDER: [u8; 8] = *b"fuzz-rsp";
const COOKIE: [u8; 16] = [0xc0; 16];
const RESPONDER_NONCE: [u8; 32] = [0x5a; 32];

fn header(msg_type: MsgType, seq: u64) -> Header {
    Header {
        msg_type,
        flags: Flags::NONE,
        path_id: 1,
        conn_id: CONN_ID,
        seq,
        path_seq: 7,
        timestamp_us: 0x1234,
    }
}

struct Fixture {
    now: Instant,
    /// Sent `init`, got `challenge`.
    first: Initiator,
    init: [u8; INIT_LEN],
    challenge: [u8; CHALLENGE_LEN],
    /// Sent `init2` (with the cookie), got `response`.
    second: Initiator,
    init2: [u8; INIT_LEN],
    response: [u8; RESPONSE_LEN],
    /// The responder right after the Challenge: the cookie is outstanding.
    responder: Responder,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let now = Instant::now();
        let psk = Psk::from_bytes(PSK);
        let mut init = [0u8; INIT_LEN];
        let (first, _) = Initiator::start(
            &psk,
            INITIATOR,
            &header(MsgType::HandshakeInit, 1),
            [0x3c; 32],
            TIMESTAMP,
            None,
            &mut init,
        )
        .expect("start");
        let mut responder = Responder::new(&psk, CONN_ID, RESPONDER).expect("responder");
        let mut challenge = [0u8; CHALLENGE_LEN];
        match responder
            .handle_init(
                &init,
                RESPONDER_NONCE,
                COOKIE,
                now,
                &header(MsgType::HandshakeResponse, 1),
                &mut challenge,
            )
            .expect("valid init")
        {
            Answer::Challenge { len } => assert_eq!(len, CHALLENGE_LEN),
            Answer::Response { .. } => panic!("a fresh responder answered without a cookie"),
        }
        let cookie = first.handle_challenge(&challenge).expect("challenge");
        let mut init2 = [0u8; INIT_LEN];
        let (second, _) = Initiator::start(
            &psk,
            INITIATOR,
            &header(MsgType::HandshakeInit, 2),
            [0x3d; 32],
            TIMESTAMP + 1,
            Some(cookie),
            &mut init2,
        )
        .expect("start");
        let mut response = [0u8; RESPONSE_LEN];
        let mut used = responder.clone();
        match used
            .handle_init(
                &init2,
                RESPONDER_NONCE,
                COOKIE,
                now,
                &header(MsgType::HandshakeResponse, 2),
                &mut response,
            )
            .expect("init with cookie")
        {
            Answer::Response { len, .. } => assert_eq!(len, RESPONSE_LEN),
            Answer::Challenge { .. } => panic!("cookie refused"),
        }
        Fixture {
            now,
            first,
            init,
            challenge,
            second,
            init2,
            response,
            responder,
        }
    })
}

/// Keys of both sides agree: what one seals the other opens.
fn keys_match(a: &SessionKeys, b: &SessionKeys) {
    let mut buf = [0u8; HEADER_LEN + 5 + TAG_LEN];
    Header {
        flags: Flags::SEALED,
        ..header(MsgType::Data, 9)
    }
    .emit(&mut buf)
    .expect("emit");
    buf[HEADER_LEN..HEADER_LEN + 5].copy_from_slice(b"hello");
    let n = a.seal_datagram(&mut buf, 5).expect("seal");
    assert_eq!(
        b.open_datagram(&mut buf[..n]).expect("keys differ"),
        b"hello"
    );
}

/// Feeds `datagram` to a copy of the fixture's responder; returns whether
/// it was answered with keys.
fn feed_init(f: &Fixture, datagram: &[u8]) -> bool {
    let mut responder = f.responder.clone();
    // Larger than any reply: a reply must not use what it is given.
    let mut reply = [0xa5u8; 256];
    let reply_header = header(MsgType::HandshakeResponse, 3);
    let Ok(answer) = responder.handle_init(
        datagram,
        [0x77; 32],
        [0x99; 16],
        f.now,
        &reply_header,
        &mut reply,
    ) else {
        return false;
    };
    let (r_keys, m) = match answer {
        Answer::Response { keys, len } => (Some(keys), len),
        Answer::Challenge { len } => (None, len),
    };
    assert!(
        m <= datagram.len(),
        "amplification: {m}-byte reply to a {}-byte init",
        datagram.len()
    );
    assert!(
        reply[m..].iter().all(|&b| b == 0xa5),
        "wrote past the reply"
    );
    let (h, _) = Header::parse(&reply[..m]).expect("reply parses");
    assert_eq!((h.flags, h.conn_id), (Flags::NONE, CONN_ID));
    let Some(r_keys) = r_keys else {
        // A Challenge: the Init had no cookie (the outstanding one would
        // have been taken).
        assert_eq!(
            (h.msg_type, m),
            (MsgType::HandshakeChallenge, CHALLENGE_LEN)
        );
        return false;
    };
    assert_eq!((h.msg_type, m), (MsgType::HandshakeResponse, RESPONSE_LEN));
    // The cookie is used up: the same Init is refused now.
    let last = responder.last_timestamp();
    assert_eq!(
        responder
            .handle_init(
                datagram,
                [0x78; 32],
                [0x98; 16],
                f.now,
                &reply_header,
                &mut [0u8; 256]
            )
            .unwrap_err(),
        HandshakeError::BadCookie
    );
    assert_eq!(responder.last_timestamp(), last);
    // The second initiator takes the reply exactly when the Init was its own.
    match f.second.handle_response(&reply[..m]) {
        Ok(i_keys) => {
            assert_eq!(
                datagram,
                &f.init2[..],
                "initiator accepted a reply to another init"
            );
            keys_match(&i_keys, &r_keys);
            keys_match(&r_keys, &i_keys);
        }
        Err(e) => assert_ne!(datagram, &f.init2[..], "reply to our own init refused: {e}"),
    }
    true
}

fn feed_response(f: &Fixture, datagram: &[u8]) -> bool {
    f.second.handle_response(datagram).is_ok()
}

fn feed_challenge(f: &Fixture, datagram: &[u8]) -> bool {
    f.first.handle_challenge(datagram).is_ok()
}

/// `base` with `mask` XORed over its start; whether the mask changed it.
fn xored<const N: usize>(base: &[u8; N], mask: &[u8]) -> ([u8; N], bool) {
    let mut out = *base;
    for (o, m) in out.iter_mut().zip(mask) {
        *o ^= m;
    }
    (out, out != *base)
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode & 3 {
        1 => {
            let (challenge, changed) = xored(&f.challenge, rest);
            assert_eq!(
                feed_challenge(f, &challenge),
                !changed,
                "altered challenge accepted"
            );
            assert!(!feed_init(f, &challenge), "challenge accepted as init");
            assert!(
                !feed_response(f, &challenge),
                "challenge accepted as response"
            );
        }
        2 => {
            let (init, changed) = xored(&f.init2, rest);
            assert_eq!(feed_init(f, &init), !changed, "altered init accepted");
            assert!(!feed_response(f, &init), "init accepted as response");
            assert!(!feed_challenge(f, &init), "init accepted as challenge");
        }
        3 => {
            let (response, changed) = xored(&f.response, rest);
            assert_eq!(
                feed_response(f, &response),
                !changed,
                "altered response accepted"
            );
            assert!(!feed_init(f, &response), "response accepted as init");
            assert!(
                !feed_challenge(f, &response),
                "response accepted as challenge"
            );
        }
        _ => {
            if rest == &f.init[..] {
                // The first Init again: a responder that never accepted one
                // answers it with a Challenge only.
                assert!(!feed_init(f, rest), "an Init without cookie got keys");
            }
            if feed_init(f, rest) {
                assert_eq!(rest, &f.init2[..], "forged init accepted");
            }
            if feed_response(f, rest) {
                assert_eq!(rest, &f.response[..], "forged response accepted");
            }
            if feed_challenge(f, rest) {
                assert_eq!(rest, &f.challenge[..], "forged challenge accepted");
            }
        }
    }
});
