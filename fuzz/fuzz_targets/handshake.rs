//! The handshake parsers never panic on any input, and accept nothing but
//! an authentic message: with a fixed PSK and one Initiator started once,
//! whatever the fuzzer writes is fed to a fresh `Responder::handle_init` and
//! to `Initiator::handle_response`.
//!
//! The first input byte picks how the rest is used:
//!
//! | byte & 3 | input                                                        |
//! |----------|--------------------------------------------------------------|
//! | 0, 1     | the rest, as is, to `handle_init` and `handle_response`      |
//! | 2        | the valid Init with the rest XORed over it                   |
//! | 3        | the valid Response with the rest XORed over it               |
//!
//! Checked besides "no panic":
//! * an accepted Init gets a reply no longer than itself (no amplification),
//!   the reply is a Response the Initiator accepts exactly when the Init was
//!   its own, with keys matching the responder's; the same Init is refused
//!   the second time (replay);
//! * in the XOR modes, the message is accepted exactly when the mask is all
//!   zeros: no altered byte (header included) gets through. Forging a MAC
//!   by chance has probability 2^-128, so any other acceptance is a bug;
//! * in mode 0/1 an accepted Init or Response must be byte for byte the
//!   valid one (the fuzzer can only get there by copying it).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mpt_proto::crypto::{
    HandshakeError, Initiator, Psk, Responder, SessionKeys, INIT_LEN, RESPONSE_LEN, TAG_LEN,
};
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};

const CONN_ID: u32 = 0x6d70_7401;
const PSK: [u8; 32] = *b"mpt fuzz handshake pre-shared k!";
const TIMESTAMP: u64 = 1_000;
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
    psk: Psk,
    initiator: Initiator,
    init: [u8; INIT_LEN],
    /// A fresh responder's answer to `init` with `RESPONDER_NONCE`.
    response: [u8; RESPONSE_LEN],
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let psk = Psk::from_bytes(PSK);
        let mut init = [0u8; INIT_LEN];
        let (initiator, n) = Initiator::start(
            &psk,
            &header(MsgType::HandshakeInit, 1),
            [0x3c; 32],
            TIMESTAMP,
            &mut init,
        )
        .expect("start");
        assert_eq!(n, INIT_LEN);
        let mut responder = Responder::new(&psk, CONN_ID).expect("responder");
        let mut response = [0u8; RESPONSE_LEN];
        let (_, m) = responder
            .handle_init(
                &init,
                RESPONDER_NONCE,
                &header(MsgType::HandshakeResponse, 1),
                &mut response,
            )
            .expect("valid init");
        assert_eq!(m, RESPONSE_LEN);
        Fixture {
            psk,
            initiator,
            init,
            response,
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

/// Feeds `datagram` to a fresh responder; returns whether it was accepted.
fn feed_init(f: &Fixture, datagram: &[u8]) -> bool {
    let mut responder = Responder::new(&f.psk, CONN_ID).expect("responder");
    // Larger than any reply: a reply must not use what it is given.
    let mut reply = [0xa5u8; 256];
    let reply_header = header(MsgType::HandshakeResponse, 2);
    let Ok((r_keys, m)) = responder.handle_init(datagram, [0x77; 32], &reply_header, &mut reply)
    else {
        return false;
    };
    assert!(
        m <= datagram.len(),
        "amplification: {m}-byte reply to a {}-byte init",
        datagram.len()
    );
    assert_eq!(m, RESPONSE_LEN);
    assert!(
        reply[m..].iter().all(|&b| b == 0xa5),
        "wrote past the reply"
    );
    let (h, _) = Header::parse(&reply[..m]).expect("reply parses");
    assert_eq!(
        (h.msg_type, h.flags, h.conn_id),
        (MsgType::HandshakeResponse, Flags::NONE, CONN_ID)
    );
    // A replay of the same Init is refused and changes nothing.
    let last = responder.last_timestamp();
    assert!(matches!(
        responder.handle_init(datagram, [0x78; 32], &reply_header, &mut [0u8; 256]),
        Err(HandshakeError::Replay { .. })
    ));
    assert_eq!(responder.last_timestamp(), last);
    // Our initiator takes the reply exactly when the Init was its own.
    match f.initiator.handle_response(&reply[..m]) {
        Ok(i_keys) => {
            assert_eq!(
                datagram,
                &f.init[..],
                "initiator accepted a reply to another init"
            );
            keys_match(&i_keys, &r_keys);
            keys_match(&r_keys, &i_keys);
        }
        Err(e) => assert_ne!(datagram, &f.init[..], "reply to our own init refused: {e}"),
    }
    true
}

fn feed_response(f: &Fixture, datagram: &[u8]) -> bool {
    f.initiator.handle_response(datagram).is_ok()
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
        2 => {
            let (init, changed) = xored(&f.init, rest);
            assert_eq!(feed_init(f, &init), !changed, "altered init accepted");
            assert!(!feed_response(f, &init), "init accepted as response");
        }
        3 => {
            let (response, changed) = xored(&f.response, rest);
            assert_eq!(
                feed_response(f, &response),
                !changed,
                "altered response accepted"
            );
            assert!(!feed_init(f, &response), "response accepted as init");
        }
        _ => {
            if feed_init(f, rest) {
                assert_eq!(rest, &f.init[..], "forged init accepted");
            }
            if feed_response(f, rest) {
                assert_eq!(rest, &f.response[..], "forged response accepted");
            }
        }
    }
});
