//! Opening sealed datagrams and the replay window never panic on any input,
//! and nothing opens that was not sealed with the session's keys.
//!
//! Keys come from one handshake with a fixed PSK; a few datagrams are
//! sealed with them up front (the "known" datagrams). The first input byte
//! picks how the rest is used:
//!
//! | byte & 3 | input                                                        |
//! |----------|--------------------------------------------------------------|
//! | 0        | the rest, as is, to `open_datagram` (both directions' keys)  |
//! | 1        | known datagram `byte >> 2` with the rest XORed over it        |
//! | 2, 3     | a program of `ReplayWindow` operations, checked against a     |
//! |          | plain set-based model                                         |
//!
//! Checked besides "no panic":
//! * a datagram opens only if it is byte for byte a known sealed datagram,
//!   and then yields its plaintext; any altered byte (header included) makes
//!   it fail. A random input opening means a forged Poly1305 tag
//!   (probability 2^-128 per try): a crash worth reporting;
//! * the opener's own sealing key never opens (directions are separate);
//! * the replay window accepts `seq` exactly when it is above the highest
//!   accepted, or less than `REPLAY_WINDOW` below it and not accepted yet;
//!   `check` and `update` agree, and a refused `update` changes nothing.

#![no_main]

use std::collections::HashSet;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mpt_proto::crypto::{
    Answer, Initiator, Psk, Replay, ReplayWindow, Responder, SessionKeys, INIT_LEN, REPLAY_WINDOW,
    TAG_LEN,
};
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};

const CONN_ID: u32 = 0x6d70_7401;
const PSK: [u8; 32] = *b"mpt fuzz open pre-shared key 32b";

fn header(msg_type: MsgType, flags: Flags, seq: u64) -> Header {
    Header {
        msg_type,
        flags,
        path_id: 0,
        conn_id: CONN_ID,
        seq,
        path_seq: seq as u32,
        timestamp_us: 0x4242,
    }
}

struct Fixture {
    /// Seals; its peer `receiver` opens.
    sender: SessionKeys,
    receiver: SessionKeys,
    /// (sealed datagram, plaintext)
    known: Vec<(Vec<u8>, Vec<u8>)>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let psk = Psk::from_bytes(PSK);
        // A fresh responder challenges the first Init; the second, with
        // the cookie, gets the keys.
        let now = std::time::Instant::now();
        let mut responder = Responder::new(&psk, CONN_ID, *b"fuzz-rsp").expect("responder");
        let mut reply = [0u8; INIT_LEN];
        let mut cookie = None;
        let (initiator, receiver, m) = loop {
            let mut init = [0u8; INIT_LEN];
            let (initiator, n) = Initiator::start(
                &psk,
                *b"fuzz-ini",
                &header(MsgType::HandshakeInit, Flags::NONE, 1),
                [0x1e; 32],
                1,
                cookie,
                &mut init,
            )
            .expect("start");
            match responder
                .handle_init(
                    &init[..n],
                    [0xe1; 32],
                    [0xc0; 16],
                    now,
                    &header(MsgType::HandshakeResponse, Flags::NONE, 1),
                    &mut reply,
                )
                .expect("init")
            {
                Answer::Response { keys, len } => break (initiator, *keys, len),
                Answer::Challenge { len } => {
                    assert!(cookie.is_none(), "cookie refused");
                    cookie = Some(
                        initiator
                            .handle_challenge(&reply[..len])
                            .expect("challenge"),
                    );
                }
            }
        };
        let sender = initiator.handle_response(&reply[..m]).expect("response");

        // Empty, short, odd-sized and full-MTU payloads, plus a sealed
        // keepalive-sized one; distinct sequence numbers (nonces).
        let known = [0usize, 1, 20, 63, 1400]
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let plain: Vec<u8> = (0..len).map(|j| (j * 31 + i) as u8).collect();
                let mut buf = vec![0u8; HEADER_LEN + len + TAG_LEN];
                let msg_type = if i == 2 {
                    MsgType::Probe
                } else {
                    MsgType::Data
                };
                header(msg_type, Flags::SEALED, 100 + i as u64)
                    .emit(&mut buf)
                    .expect("emit");
                buf[HEADER_LEN..HEADER_LEN + len].copy_from_slice(&plain);
                let n = sender.seal_datagram(&mut buf, len).expect("seal");
                assert_eq!(n, buf.len());
                (buf, plain)
            })
            .collect();
        Fixture {
            sender,
            receiver,
            known,
        }
    })
}

/// Opens a copy of `datagram` with the receiver's keys; asserts that it
/// opens only if it is a known datagram, and to that datagram's plaintext.
/// Returns whether it opened.
fn open(f: &Fixture, datagram: &[u8]) -> bool {
    let mut buf = datagram.to_vec();
    let opened = match f.receiver.open_datagram(&mut buf) {
        Ok(plain) => {
            let Some((_, expected)) = f.known.iter().find(|(d, _)| d == datagram) else {
                panic!("forged datagram opened: {datagram:02x?}");
            };
            assert_eq!(&plain[..], &expected[..], "opened to the wrong plaintext");
            true
        }
        Err(_) => false,
    };
    // The sender's receive key is the other direction's: it opens nothing
    // its own side sealed.
    let mut buf = datagram.to_vec();
    assert!(
        f.sender.open_datagram(&mut buf).is_err(),
        "sealing key opened its own datagram"
    );
    opened
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, _| (acc << 8) | u64::from(self.u8()))
    }
}

/// The window's rule, spelled out over the set of accepted numbers.
struct Model {
    top: u64,
    seen: HashSet<u64>,
}

impl Model {
    fn check(&self, seq: u64) -> Result<(), Replay> {
        if seq > self.top {
            Ok(())
        } else if self.top - seq >= REPLAY_WINDOW {
            Err(Replay::TooOld)
        } else if self.seen.contains(&seq) {
            Err(Replay::Duplicate)
        } else {
            Ok(())
        }
    }
}

fn replay_program(mut input: Input) {
    let mut w = ReplayWindow::new();
    let mut model = Model {
        top: 0,
        seen: HashSet::new(),
    };
    while !input.0.is_empty() {
        let op = input.u8();
        let top = w.highest();
        let seq = match op & 7 {
            0 => top.wrapping_add(1),
            1 => top.saturating_add(u64::from(input.u8())),
            2 => top.saturating_add(u64::from(input.u16())),
            3 => top.saturating_sub(u64::from(input.u8())),
            4 => top.saturating_sub(u64::from(input.u16())),
            // Right at the window's lower edge.
            5 => top.saturating_sub(REPLAY_WINDOW - 1 + u64::from(input.u8() % 3)),
            _ => input.u64(),
        };
        let expected = model.check(seq);
        assert_eq!(w.check(seq), expected, "check({seq}) with top {top}");
        if op & 8 != 0 {
            // Only check, as for a datagram that then fails to open.
            continue;
        }
        let before = w.clone();
        assert_eq!(w.update(seq), expected, "update({seq}) with top {top}");
        if expected.is_ok() {
            model.top = model.top.max(seq);
            model.seen.insert(seq);
            assert_eq!(w.highest(), model.top);
            assert_eq!(w.check(seq), Err(Replay::Duplicate), "{seq} accepted twice");
        } else {
            assert!(w == before, "refused update({seq}) changed the window");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode & 3 {
        0 => {
            open(f, rest);
        }
        1 => {
            let (datagram, _) = &f.known[usize::from(mode >> 2) % f.known.len()];
            let mut altered = datagram.clone();
            for (a, m) in altered.iter_mut().zip(rest) {
                *a ^= m;
            }
            let changed = altered != *datagram;
            assert_eq!(open(f, &altered), !changed, "altered datagram opened");
        }
        _ => replay_program(Input(rest)),
    }
});
