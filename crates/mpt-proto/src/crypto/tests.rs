//! Known-answer vectors, handshake round trips and robustness of the
//! crypto layer. The replay window and rate limiter test themselves in
//! their modules.

use super::*;
use crate::wire::{Flags, Header, MsgType, HEADER_LEN};
use proptest::prelude::*;
use std::time::{Duration, Instant};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    assert_eq!(s.len() % 2, 0);
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Distinct bytes everywhere, so a swapped or misplaced field shows.
fn pattern<const N: usize>(start: u8) -> [u8; N] {
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = start.wrapping_add(i as u8);
    }
    out
}

fn psk() -> Psk {
    Psk::from_bytes(pattern(0x00))
}

const CONN: u32 = 0x0102_0304;

fn header(msg_type: MsgType, flags: Flags, seq: u64) -> Header {
    Header {
        msg_type,
        flags,
        path_id: 2,
        conn_id: CONN,
        seq,
        path_seq: 0x0a0b_0c0d,
        timestamp_us: 0x1122_3344,
    }
}

/// A sealed-data datagram buffer: header with SEALED, then `payload`, then
/// room for the tag, the rest filled with 0xa5.
fn data_buf(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0xa5u8; HEADER_LEN + payload.len() + TAG_LEN + 7];
    header(MsgType::Data, Flags::SEALED, seq)
        .emit(&mut buf)
        .unwrap();
    buf[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(payload);
    buf
}
/// The initiator's and the responder's instance ids in these tests.
const INST_I: InstanceId = [0xe0, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7];
const INST_R: InstanceId = [0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7];

use crate::test_clock::t0;

fn responder(psk: &Psk) -> Responder {
    Responder::new(psk, CONN, INST_R).unwrap()
}

/// An Init from `INST_I` with `nonce` pattern and `timestamp`.
fn make_init_with(
    psk: &Psk,
    timestamp: u64,
    nonce: u8,
    cookie: Option<Cookie>,
) -> (Initiator, [u8; INIT_LEN]) {
    let mut init = [0u8; INIT_LEN];
    let (i, n) = Initiator::start(
        psk,
        INST_I,
        &header(MsgType::HandshakeInit, Flags::NONE, u64::from(nonce)),
        pattern(nonce),
        timestamp,
        cookie,
        &mut init,
    )
    .unwrap();
    assert_eq!(n, INIT_LEN);
    (i, init)
}

fn make_init(timestamp: u64, nonce: u8) -> (Initiator, [u8; INIT_LEN]) {
    make_init_with(&psk(), timestamp, nonce, None)
}

/// What a responder sent back.
#[derive(Debug)]
enum Reply {
    Response(Box<SessionKeys>, Vec<u8>),
    Challenge(Vec<u8>),
}

impl Reply {
    fn challenge(self) -> Vec<u8> {
        match self {
            Reply::Challenge(c) => c,
            Reply::Response(..) => panic!("expected a challenge, got a response"),
        }
    }
    fn response(self) -> (SessionKeys, Vec<u8>) {
        match self {
            Reply::Response(k, d) => (*k, d),
            Reply::Challenge(_) => panic!("expected a response, got a challenge"),
        }
    }
}

/// Feeds `init` to `r` at `now` with responder nonce 80..9f and cookie
/// c0..cf.
fn respond_at(r: &mut Responder, init: &[u8], now: Instant) -> Result<Reply, HandshakeError> {
    let mut reply = [0xa5u8; 200];
    match r.handle_init(
        init,
        pattern(0x80),
        pattern(0xc0),
        now,
        &header(MsgType::HandshakeResponse, Flags::NONE, 1),
        &mut reply,
    )? {
        Answer::Response { keys, len } => {
            assert_eq!(len, RESPONSE_LEN);
            assert!(reply[len..].iter().all(|&b| b == 0xa5));
            Ok(Reply::Response(keys, reply[..len].to_vec()))
        }
        Answer::Challenge { len } => {
            assert_eq!(len, CHALLENGE_LEN);
            assert!(reply[len..].iter().all(|&b| b == 0xa5));
            Ok(Reply::Challenge(reply[..len].to_vec()))
        }
    }
}

fn respond(r: &mut Responder, init: &[u8]) -> Result<Reply, HandshakeError> {
    respond_at(r, init, t0())
}

/// A full handshake with a fresh responder: Init, Challenge, Init with
/// the cookie, Response. Returns (initiator keys, responder keys).
fn handshake(psk_i: &Psk, psk_r: &Psk) -> Result<(SessionKeys, SessionKeys), HandshakeError> {
    let now = t0();
    let mut r = responder(psk_r);
    let (i1, init1) = make_init_with(psk_i, 1_000, 0x40, None);
    let challenge = respond_at(&mut r, &init1, now)?.challenge();
    let cookie = i1.handle_challenge(&challenge)?;
    let (i2, init2) = make_init_with(psk_i, 1_001, 0x41, Some(cookie));
    let (r_keys, response) = respond_at(&mut r, &init2, now)?.response();
    let i_keys = i2.handle_response(&response)?;
    Ok((i_keys, r_keys))
}

// ---------------------------------------------------------------------------
// Known answers. Computed once with this code (ring 0.17), checked against
// an independent implementation (Python `cryptography` HKDF and
// ChaCha20Poly1305, stdlib hmac) and frozen: a change in any of them is a
// wire-incompatible change.

const PAYLOAD: &[u8] = b"mpt known-answer payload";

/// psk = 00..1f, initiator nonce = 40..5f, responder nonce = 80..9f;
/// datagram sealed by the initiator with seq 0x0102.
const KAT_I2R: &str = "110100020102030400000000000001020a0b0c0d112233440fbf8c9cde35f57c04d7865dea59a46bafe2cff78b1c27dc997c5779a06e571b4ae241b93f2229ca";
/// The same payload sealed by the responder with the same header.
const KAT_R2I: &str = "110100020102030400000000000001020a0b0c0d112233448cb6fb281a89608340dabaaec2684d3d6be2062bebf642a1c3202b4ba08eee6726ab7e033f7b89fb";
/// `Initiator::start` with psk 00..1f, instance e0..e7, nonce 40..5f,
/// timestamp 0x0102030405060708, no cookie, header
/// `header(HandshakeInit, NONE, 1)`.
const KAT_INIT: &str = "150000020102030400000000000000010a0b0c0d11223344404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f0102030405060708e0e1e2e3e4e5e6e7000000000000000000000000000000004e24edefb7db8d44d5a163b272e2ca1a";
/// A fresh responder's (instance f0..f7) Challenge to KAT_INIT with cookie
/// c0..cf and header `header(HandshakeResponse, NONE, 1)` (the type is
/// set by the handshake).
const KAT_CHALLENGE: &str = "170000020102030400000000000000010a0b0c0d11223344c0c1c2c3c4c5c6c7c8c9cacbcccdcecff0f1f2f3f4f5f6f74e24edefb7db8d44d5a163b272e2ca1abd4229642519f97a7928cab742d4a93a";
/// The initiator's second Init: as KAT_INIT but timestamp
/// 0x0102030405060709 and cookie c0..cf.
const KAT_INIT_COOKIE: &str = "150000020102030400000000000000010a0b0c0d11223344404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f0102030405060709e0e1e2e3e4e5e6e7c0c1c2c3c4c5c6c7c8c9cacbcccdcecff30d9e82fa635c9b7198d11c263354f4";
/// The responder's Response to KAT_INIT_COOKIE with nonce 80..9f.
const KAT_RESPONSE: &str = "160000020102030400000000000000010a0b0c0d11223344808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9ff0f1f2f3f4f5f6f7f30d9e82fa635c9b7198d11c263354f43055c54116e7789998e179356e039a71";

fn kat_keys(role: Role) -> SessionKeys {
    SessionKeys::derive(&psk(), &pattern(0x40), &pattern(0x80), role).unwrap()
}

#[test]
fn kat_seal_both_directions() {
    for (role, expected) in [(Role::Initiator, KAT_I2R), (Role::Responder, KAT_R2I)] {
        let keys = kat_keys(role);
        let mut buf = data_buf(0x0102, PAYLOAD);
        let n = keys.seal_datagram(&mut buf, PAYLOAD.len()).unwrap();
        assert_eq!(n, HEADER_LEN + PAYLOAD.len() + TAG_LEN);
        assert_eq!(to_hex(&buf[..n]), expected, "{role:?}");
        // The header is not encrypted; the payload is.
        assert_eq!(&buf[..HEADER_LEN], &data_buf(0x0102, b"")[..HEADER_LEN]);
        assert_ne!(&buf[HEADER_LEN..HEADER_LEN + PAYLOAD.len()], PAYLOAD);
        // Bytes past the datagram are untouched.
        assert!(buf[n..].iter().all(|&b| b == 0xa5));
    }
}

#[test]
fn kat_opens_with_the_peer_keys_only() {
    let mut dgram = hex(KAT_I2R);
    let responder = kat_keys(Role::Responder);
    assert_eq!(responder.open_datagram(&mut dgram).unwrap(), PAYLOAD);

    let mut dgram = hex(KAT_R2I);
    let initiator = kat_keys(Role::Initiator);
    assert_eq!(initiator.open_datagram(&mut dgram).unwrap(), PAYLOAD);

    // A party cannot open what it sealed itself: the directions differ.
    let mut dgram = hex(KAT_I2R);
    assert_eq!(initiator.open_datagram(&mut dgram), Err(AeadError::Auth));
}

#[test]
fn kat_handshake_messages() {
    let now = t0();
    let start = |ts: u64, cookie: Option<Cookie>| {
        let mut buf = [0xa5u8; INIT_LEN + 4];
        let (initiator, n) = Initiator::start(
            &psk(),
            INST_I,
            &header(MsgType::HandshakeInit, Flags::NONE, 1),
            pattern(0x40),
            ts,
            cookie,
            &mut buf,
        )
        .unwrap();
        assert_eq!(n, INIT_LEN);
        assert_eq!(&buf[n..], &[0xa5; 4]);
        (initiator, buf[..n].to_vec())
    };
    let (first, init) = start(0x0102_0304_0506_0708, None);
    let mut responder = responder(&psk());
    let challenge = respond_at(&mut responder, &init, now).unwrap().challenge();
    let (second, init2) = start(0x0102_0304_0506_0709, Some(pattern(0xc0)));
    let (r_keys, response) = respond_at(&mut responder, &init2, now).unwrap().response();
    let show = [&init, &challenge, &init2, &response].map(|d| to_hex(d));
    assert_eq!(show[0], KAT_INIT);
    assert_eq!(show[1], KAT_CHALLENGE);
    assert_eq!(show[2], KAT_INIT_COOKIE);
    assert_eq!(show[3], KAT_RESPONSE);
    assert_eq!(first.handle_challenge(&challenge).unwrap(), pattern(0xc0));
    assert_eq!(responder.last_timestamp(), 0x0102_0304_0506_0709);

    // Both ends derive the KAT keys.
    let i_keys = second.handle_response(&response).unwrap();
    let mut dgram = data_buf(0x0102, PAYLOAD);
    let len = i_keys.seal_datagram(&mut dgram, PAYLOAD.len()).unwrap();
    assert_eq!(to_hex(&dgram[..len]), KAT_I2R);
    let mut dgram = data_buf(0x0102, PAYLOAD);
    let len = r_keys.seal_datagram(&mut dgram, PAYLOAD.len()).unwrap();
    assert_eq!(to_hex(&dgram[..len]), KAT_R2I);
}

#[test]
fn handshake_body_layout() {
    let mut buf = [0xa5u8; INIT_LEN];
    Initiator::start(
        &psk(),
        INST_I,
        &header(MsgType::Data, Flags::SEALED, 9),
        pattern(0x40),
        0x0102_0304_0506_0708,
        Some(pattern(0xc0)),
        &mut buf,
    )
    .unwrap();
    // Type and flags are set by the handshake, not taken from the template.
    let (h, body) = Header::parse(&buf).unwrap();
    assert_eq!(h, header(MsgType::HandshakeInit, Flags::NONE, 9));
    assert_eq!(body.len(), 80);
    assert_eq!(&body[..32], &pattern::<32>(0x40));
    assert_eq!(&body[32..40], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(&body[40..48], &INST_I);
    assert_eq!(&body[48..64], &pattern::<16>(0xc0));
    let key = kdf::handshake_mac_key(&psk(), kdf::INFO_INIT_MAC).unwrap();
    assert_eq!(
        &body[64..80],
        &handshake::mac(&key, &buf[..HEADER_LEN], &body[..64])
    );
}

// ---------------------------------------------------------------------------
// AEAD.

#[test]
fn every_single_bit_flip_is_refused() {
    let keys = kat_keys(Role::Responder);
    let good = hex(KAT_I2R);
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut d = good.clone();
            d[i] ^= 1 << bit;
            assert!(
                keys.open_datagram(&mut d).is_err(),
                "flip of byte {i} bit {bit} accepted"
            );
        }
    }
    // Header, payload and tag each give an authentication failure.
    for i in [2, 4, 20, HEADER_LEN, HEADER_LEN + 5, good.len() - 1] {
        let mut d = good.clone();
        d[i] ^= 0x80;
        assert_eq!(keys.open_datagram(&mut d), Err(AeadError::Auth), "byte {i}");
    }
    // Truncated and extended datagrams.
    let mut d = good[..good.len() - 1].to_vec();
    assert_eq!(keys.open_datagram(&mut d), Err(AeadError::Auth));
    let mut d = good.clone();
    d.push(0);
    assert_eq!(keys.open_datagram(&mut d), Err(AeadError::Auth));
}

#[test]
fn separate_tag_api_matches_datagram_api() {
    let keys = kat_keys(Role::Initiator);
    let mut buf = data_buf(0x0102, PAYLOAD);
    let h: [u8; HEADER_LEN] = buf[..HEADER_LEN].try_into().unwrap();
    let mut payload = PAYLOAD.to_vec();
    let tag = keys.seal(&h, &mut payload).unwrap();
    let n = keys.seal_datagram(&mut buf, PAYLOAD.len()).unwrap();
    assert_eq!(&buf[HEADER_LEN..n - TAG_LEN], &payload[..]);
    assert_eq!(&buf[n - TAG_LEN..n], &tag);

    let peer = kat_keys(Role::Responder);
    let mut body = [payload, tag.to_vec()].concat();
    assert_eq!(peer.open(&h, &mut body).unwrap(), PAYLOAD);
}

#[test]
fn empty_payload_seals() {
    let (i, r) = handshake(&psk(), &psk()).unwrap();
    let mut buf = data_buf(7, b"");
    let n = i.seal_datagram(&mut buf, 0).unwrap();
    assert_eq!(n, HEADER_LEN + TAG_LEN);
    assert_eq!(r.open_datagram(&mut buf[..n]).unwrap(), b"");
}

#[test]
fn header_must_say_sealed() {
    let keys = kat_keys(Role::Initiator);
    let mut buf = data_buf(1, PAYLOAD);
    header(MsgType::Data, Flags::NONE, 1)
        .emit(&mut buf)
        .unwrap();
    assert_eq!(
        keys.seal_datagram(&mut buf, PAYLOAD.len()),
        Err(AeadError::NotSealed)
    );
    assert_eq!(keys.open_datagram(&mut buf), Err(AeadError::NotSealed));
}

#[test]
fn sequence_limits() {
    assert!(!SessionKeys::must_rekey(0));
    assert!(!SessionKeys::must_rekey(REKEY_AFTER_MESSAGES - 1));
    assert!(SessionKeys::must_rekey(REKEY_AFTER_MESSAGES));
    assert!(SessionKeys::must_rekey(u64::MAX));
    const { assert!(REKEY_AFTER_MESSAGES < REJECT_AFTER_MESSAGES) };

    let (i, r) = handshake(&psk(), &psk()).unwrap();
    let last = REJECT_AFTER_MESSAGES - 1;
    let mut buf = data_buf(last, PAYLOAD);
    let n = i.seal_datagram(&mut buf, PAYLOAD.len()).unwrap();
    assert_eq!(r.open_datagram(&mut buf[..n]).unwrap(), PAYLOAD);

    for seq in [REJECT_AFTER_MESSAGES, u64::MAX] {
        let mut buf = data_buf(seq, PAYLOAD);
        assert_eq!(
            i.seal_datagram(&mut buf, PAYLOAD.len()),
            Err(AeadError::Exhausted { seq })
        );
        assert_eq!(
            r.open_datagram(&mut buf[..HEADER_LEN + PAYLOAD.len() + TAG_LEN]),
            Err(AeadError::Exhausted { seq })
        );
    }
}

#[test]
fn nonce_is_the_header_sequence_number() {
    let (i, r) = handshake(&psk(), &psk()).unwrap();
    let mut a = data_buf(5, PAYLOAD);
    let mut b = data_buf(6, PAYLOAD);
    let n = i.seal_datagram(&mut a, PAYLOAD.len()).unwrap();
    i.seal_datagram(&mut b, PAYLOAD.len()).unwrap();
    // Different sequence numbers, different keystream.
    assert_ne!(a[HEADER_LEN..n], b[HEADER_LEN..n]);
    // Moving a sealed body under another sequence number fails.
    b[HEADER_LEN..n].copy_from_slice(&a[HEADER_LEN..n]);
    assert_eq!(r.open_datagram(&mut b[..n]), Err(AeadError::Auth));
}

#[test]
fn short_inputs() {
    let keys = kat_keys(Role::Initiator);
    let mut buf = data_buf(1, PAYLOAD);
    assert_eq!(
        keys.seal_datagram(&mut buf[..HEADER_LEN + 3], 4),
        Err(AeadError::BufferTooSmall {
            needed: HEADER_LEN + 4 + TAG_LEN,
            have: HEADER_LEN + 3
        })
    );
    assert_eq!(
        keys.open_datagram(&mut buf[..HEADER_LEN + TAG_LEN - 1]),
        Err(AeadError::TooShort {
            len: HEADER_LEN + TAG_LEN - 1
        })
    );
    assert_eq!(
        keys.open_datagram(&mut buf[..3]),
        Err(AeadError::TooShort { len: 3 })
    );
    let h: [u8; HEADER_LEN] = buf[..HEADER_LEN].try_into().unwrap();
    assert_eq!(
        keys.open(&h, &mut [0u8; TAG_LEN - 1]),
        Err(AeadError::TooShort {
            len: HEADER_LEN + TAG_LEN - 1
        })
    );
}

// ---------------------------------------------------------------------------
// Handshake.

#[test]
fn round_trip_gives_matching_keys() {
    let (i, r) = handshake(&psk(), &psk()).unwrap();
    assert_eq!(i.role(), Role::Initiator);
    assert_eq!(r.role(), Role::Responder);
    for seq in [1, 2, 1000] {
        let mut buf = data_buf(seq, PAYLOAD);
        let n = i.seal_datagram(&mut buf, PAYLOAD.len()).unwrap();
        assert_eq!(r.open_datagram(&mut buf[..n]).unwrap(), PAYLOAD);

        let mut buf = data_buf(seq, b"the other way");
        let n = r.seal_datagram(&mut buf, 13).unwrap();
        assert_eq!(i.open_datagram(&mut buf[..n]).unwrap(), b"the other way");
    }
}

#[test]
fn fresh_nonces_give_fresh_keys() {
    // Same PSK, another responder nonce: the old keys do not open.
    let old = kat_keys(Role::Initiator);
    let new = SessionKeys::derive(&psk(), &pattern(0x40), &pattern(0x81), Role::Responder).unwrap();
    let mut buf = data_buf(3, PAYLOAD);
    let n = old.seal_datagram(&mut buf, PAYLOAD.len()).unwrap();
    assert_eq!(new.open_datagram(&mut buf[..n]), Err(AeadError::Auth));
}

#[test]
fn wrong_psk_is_an_auth_error() {
    let other = Psk::from_bytes(pattern(0x01));
    assert_eq!(handshake(&psk(), &other).unwrap_err(), HandshakeError::Auth);

    // And at the initiator: a challenge and a response made with another
    // PSK, for an Init that looks the same.
    let (initiator, _) = make_init(5, 0x40);
    let (_, other_init) = make_init_with(&other, 5, 0x40, None);
    let mut r = Responder::new(&other, CONN, INST_R).unwrap();
    let challenge = respond(&mut r, &other_init).unwrap().challenge();
    assert_eq!(
        initiator.handle_challenge(&challenge).unwrap_err(),
        HandshakeError::Auth
    );
    let (_, other_init2) = make_init_with(&other, 6, 0x40, Some(pattern(0xc0)));
    let (_, response) = respond(&mut r, &other_init2).unwrap().response();
    assert_eq!(
        initiator.handle_response(&response).unwrap_err(),
        HandshakeError::Auth
    );
}

#[test]
fn own_init_reflected_is_refused() {
    // A side's responder shares the instance id of its initiator: its own
    // Init sent back to it is authentic (same PSK) but refused.
    let now = t0();
    let (_, init) = make_init(10, 0x40);
    let mut me = Responder::new(&psk(), CONN, INST_I).unwrap();
    assert_eq!(
        me.verify_init(&init, now).unwrap_err(),
        HandshakeError::Reflected
    );
    assert_eq!(
        respond_at(&mut me, &init, now).unwrap_err(),
        HandshakeError::Reflected
    );
    // Even after a session: the timestamp rule does not come into it.
    let (_, init2) = make_init(u64::MAX, 0x41);
    assert_eq!(
        respond_at(&mut me, &init2, now).unwrap_err(),
        HandshakeError::Reflected
    );
    assert_eq!(me.last_timestamp(), 0);
    // The peer (another instance) takes the same Init.
    let mut peer = responder(&psk());
    respond_at(&mut peer, &init, now).unwrap().challenge();
}

#[test]
fn a_response_cannot_pass_as_an_init() {
    let now = t0();
    let mut r = responder(&psk());
    let (i1, init1) = make_init(10, 0x40);
    let challenge = respond_at(&mut r, &init1, now).unwrap().challenge();
    let (i2, init2) = make_init_with(
        &psk(),
        11,
        0x41,
        Some(i1.handle_challenge(&challenge).unwrap()),
    );
    let (_, response) = respond_at(&mut r, &init2, now).unwrap().response();
    // Each message given where another is expected.
    let mut other = responder(&psk());
    for d in [&response, &challenge] {
        assert!(other.verify_init(d, now).is_err());
        assert!(respond_at(&mut other, d, now).is_err());
    }
    assert!(i2.handle_challenge(&response).is_err());
    assert!(i2.handle_response(&init2).is_err());
    assert!(i1.handle_response(&challenge).is_err());

    // The same bytes under another type (and padded to length) fail the
    // MAC: each kind of message has its own key.
    let mut as_init = [0u8; INIT_LEN];
    as_init[..RESPONSE_LEN].copy_from_slice(&response);
    as_init[0] = (1 << 4) | MsgType::HandshakeInit.code();
    assert_eq!(
        other.verify_init(&as_init, now).unwrap_err(),
        HandshakeError::Auth
    );
    // An Init-shaped message whose MAC is made with the response (or
    // challenge) key is refused; with the init key it is taken.
    for (label, ok) in [
        (kdf::INFO_RESPONSE_MAC, false),
        (kdf::INFO_CHALLENGE_MAC, false),
        (kdf::INFO_INIT_MAC, true),
    ] {
        let key = kdf::handshake_mac_key(&psk(), label).unwrap();
        let (_, mut d) = make_init(12, 0x42);
        let m = handshake::mac(&key, &d[..HEADER_LEN], &d[HEADER_LEN..INIT_LEN - MAC_LEN]);
        d[INIT_LEN - MAC_LEN..].copy_from_slice(&m);
        let got = other.verify_init(&d, now);
        assert_eq!(got.is_ok(), ok, "{:?}: {got:?}", std::str::from_utf8(label));
    }
}

#[test]
fn init_replayed_to_a_fresh_responder_gets_a_challenge_never_keys() {
    let now = t0();
    // The responder accepted this Init before it restarted...
    let (_, init) = make_init(1_000, 0x40);
    let mut before = responder(&psk());
    let c = respond_at(&mut before, &init, now).unwrap().challenge();
    assert_eq!(c.len(), CHALLENGE_LEN);
    // ...and now, freshly started, sees it again, many times: always a
    // Challenge, never keys, no state but the cookies.
    let mut fresh = responder(&psk());
    for k in 0..10u32 {
        let v = fresh.verify_init(&init, now).unwrap();
        assert!(!v.fresh && !v.has_cookie);
        let reply = respond_at(&mut fresh, &init, now + Duration::from_millis(u64::from(k)));
        assert!(matches!(reply, Ok(Reply::Challenge(_))), "{reply:?}");
        assert_eq!(fresh.last_timestamp(), 0);
    }
    // Whatever its timestamp.
    let (_, late) = make_init(u64::MAX, 0x41);
    respond_at(&mut fresh, &late, now).unwrap().challenge();
    assert_eq!(fresh.last_timestamp(), 0);
}

#[test]
fn a_cookie_round_gives_keys_then_newer_inits_are_direct() {
    let now = t0();
    let mut r = responder(&psk());
    let (i1, init1) = make_init(100, 0x40);
    let challenge = respond_at(&mut r, &init1, now).unwrap().challenge();
    let cookie = i1.handle_challenge(&challenge).unwrap();
    assert_eq!(cookie, pattern(0xc0));
    let (i2, init2) = make_init_with(&psk(), 101, 0x41, Some(cookie));
    assert!(r.verify_init(&init2, now).unwrap().fresh);
    let (r_keys, response) = respond_at(&mut r, &init2, now).unwrap().response();
    let i_keys = i2.handle_response(&response).unwrap();
    let mut buf = data_buf(7, PAYLOAD);
    let n = i_keys.seal_datagram(&mut buf, PAYLOAD.len()).unwrap();
    assert_eq!(r_keys.open_datagram(&mut buf[..n]).unwrap(), PAYLOAD);
    assert_eq!(r.last_timestamp(), 101);

    // Now a newer Init is answered at once; the same or an older one (a
    // replay) earns a Challenge.
    let (_, newer) = make_init(102, 0x42);
    respond_at(&mut r, &newer, now).unwrap().response();
    assert_eq!(r.last_timestamp(), 102);
    for (ts, n) in [(102, 0x43), (50, 0x44)] {
        let (_, old) = make_init(ts, n);
        respond_at(&mut r, &old, now).unwrap().challenge();
    }
    respond_at(&mut r, &newer, now).unwrap().challenge();
    assert_eq!(r.last_timestamp(), 102);
}

#[test]
fn an_initiator_with_its_clock_behind_gets_in_via_the_cookie() {
    let now = t0();
    let mut r = responder(&psk());
    // A session with an initiator whose clock was right.
    let (i1, a) = make_init(2_000_000, 0x40);
    let c = i1
        .handle_challenge(&respond_at(&mut r, &a, now).unwrap().challenge())
        .unwrap();
    let (_, b) = make_init_with(&psk(), 2_000_001, 0x41, Some(c));
    respond_at(&mut r, &b, now).unwrap().response();
    // The peer reboots with its clock far behind.
    let (behind, init) = make_init(7, 0x50);
    let challenge = respond_at(&mut r, &init, now).unwrap().challenge();
    let cookie = behind.handle_challenge(&challenge).unwrap();
    let (again, init2) = make_init_with(&psk(), 8, 0x51, Some(cookie));
    let (r_keys, response) = respond_at(&mut r, &init2, now).unwrap().response();
    let i_keys = again.handle_response(&response).unwrap();
    let mut buf = data_buf(1, PAYLOAD);
    let n = r_keys.seal_datagram(&mut buf, PAYLOAD.len()).unwrap();
    assert_eq!(i_keys.open_datagram(&mut buf[..n]).unwrap(), PAYLOAD);
    assert_eq!(r.last_timestamp(), 8);
    // And its later Inits, newer by its own clock, go straight through.
    let (_, init3) = make_init(9, 0x52);
    respond_at(&mut r, &init3, now).unwrap().response();
}

#[test]
fn wrong_expired_and_reused_cookies_are_refused() {
    let now = t0();
    let mut r = responder(&psk());
    let (i1, init1) = make_init(100, 0x40);
    let cookie = i1
        .handle_challenge(&respond_at(&mut r, &init1, now).unwrap().challenge())
        .unwrap();
    // A cookie never handed out.
    let (_, wrong) = make_init_with(&psk(), 101, 0x41, Some(pattern(0x33)));
    assert_eq!(
        respond_at(&mut r, &wrong, now).unwrap_err(),
        HandshakeError::BadCookie
    );
    // The right cookie, too late.
    let (_, late) = make_init_with(&psk(), 102, 0x42, Some(cookie));
    let expired = now + COOKIE_LIFETIME + Duration::from_millis(1);
    assert_eq!(
        respond_at(&mut r, &late, expired).unwrap_err(),
        HandshakeError::BadCookie
    );
    // In time: taken once, then refused (also as another Init).
    let in_time = now + COOKIE_LIFETIME;
    respond_at(&mut r, &late, in_time).unwrap().response();
    assert_eq!(
        respond_at(&mut r, &late, in_time).unwrap_err(),
        HandshakeError::BadCookie
    );
    let (_, again) = make_init_with(&psk(), 103, 0x43, Some(cookie));
    assert_eq!(
        respond_at(&mut r, &again, in_time).unwrap_err(),
        HandshakeError::BadCookie
    );
    // Another responder's cookie is worth nothing here.
    let other = responder(&psk());
    assert_eq!(
        other.verify_init(&late, now).unwrap_err(),
        HandshakeError::BadCookie
    );
    // Refusals change nothing.
    assert_eq!(r.last_timestamp(), 102);
    assert_eq!(other.last_timestamp(), 0);
}

/// An Init of instance `instance` (otherwise as [`make_init_with`]).
fn make_init_of(
    instance: InstanceId,
    timestamp: u64,
    nonce: u8,
    cookie: Option<Cookie>,
) -> (Initiator, [u8; INIT_LEN]) {
    let mut init = [0u8; INIT_LEN];
    let (i, n) = Initiator::start(
        &psk(),
        instance,
        &header(MsgType::HandshakeInit, Flags::NONE, u64::from(nonce)),
        pattern(nonce),
        timestamp,
        cookie,
        &mut init,
    )
    .unwrap();
    assert_eq!(n, INIT_LEN);
    (i, init)
}

#[test]
fn outstanding_cookies_are_bounded() {
    let now = t0();
    let mut r = responder(&psk());
    let mut cookies = Vec::new();
    for k in 0..(MAX_COOKIES as u8 + 2) {
        // Each from another instance (a slot per instance).
        let (i, init) = make_init_of([k; INSTANCE_LEN], 10, 0x40 + k, None);
        let mut reply = [0u8; CHALLENGE_LEN];
        let v = r.verify_init(&init, now).unwrap();
        let mut cookie = [0u8; COOKIE_LEN];
        cookie[0] = k + 1;
        let at = now + Duration::from_millis(u64::from(k));
        let a = r
            .answer(
                &v,
                pattern(0x80),
                cookie,
                at,
                &header(MsgType::HandshakeChallenge, Flags::NONE, 1),
                &mut reply,
            )
            .unwrap();
        assert!(matches!(a, Answer::Challenge { len: CHALLENGE_LEN }));
        cookies.push(i.handle_challenge(&reply).unwrap());
    }
    let at = now + Duration::from_millis(100);
    // The two oldest were replaced; the last MAX_COOKIES are good.
    for (k, c) in cookies.iter().enumerate() {
        let (_, init) = make_init_of([k as u8; INSTANCE_LEN], 20 + k as u64, 0x60, Some(*c));
        let ok = r.verify_init(&init, at).is_ok();
        assert_eq!(ok, k >= 2, "cookie {k}");
    }
}

/// A replayer sending one captured (stale) Init many times holds one
/// cookie slot: the genuine peer's cookie, handed out meanwhile, stays.
#[test]
fn a_replayed_init_cannot_churn_the_cookie_slots() {
    let now = t0();
    let mut r = responder(&psk());
    let (_, stale) = make_init_of([0xaa; INSTANCE_LEN], 5, 0x41, None);
    let (genuine, init) = make_init_of([0xbb; INSTANCE_LEN], 10, 0x42, None);
    let challenge = respond_at(&mut r, &init, now).unwrap().challenge();
    let cookie = genuine.handle_challenge(&challenge).unwrap();
    let mut seen = std::collections::HashSet::new();
    for k in 0..100u8 {
        // A distinct random cookie offered each time.
        let at = now + Duration::from_millis(u64::from(k));
        let v = r.verify_init(&stale, at).unwrap();
        let mut reply = [0u8; CHALLENGE_LEN];
        let offered = [k.wrapping_add(1); COOKIE_LEN];
        let h = header(MsgType::HandshakeChallenge, Flags::NONE, 1);
        r.answer(&v, pattern(0x80), offered, at, &h, &mut reply)
            .unwrap();
        seen.insert(reply[HEADER_LEN..HEADER_LEN + COOKIE_LEN].to_vec());
    }
    assert_eq!(
        seen.len(),
        1,
        "the replayer gets one cookie again and again"
    );
    let (i2, again) = make_init_of([0xbb; INSTANCE_LEN], 11, 0x43, Some(cookie));
    let at = now + Duration::from_millis(200);
    let (_, response) = respond_at(&mut r, &again, at).unwrap().response();
    assert!(i2.handle_response(&response).is_ok());
}

#[test]
fn answers_to_another_init_are_refused() {
    let now = t0();
    let mut r = responder(&psk());
    let (first, init1) = make_init(10, 0x40);
    let (second, init2) = make_init(11, 0x41);
    let c1 = respond_at(&mut r, &init1, now).unwrap().challenge();
    let c2 = respond_at(&mut r, &init2, now).unwrap().challenge();
    // The retransmitted attempt must not take the first attempt's answer.
    assert_eq!(
        second.handle_challenge(&c1).unwrap_err(),
        HandshakeError::UnexpectedResponse
    );
    assert_eq!(
        first.handle_challenge(&c2).unwrap_err(),
        HandshakeError::UnexpectedResponse
    );
    let cookie = second.handle_challenge(&c2).unwrap();
    let (third, init3) = make_init_with(&psk(), 12, 0x42, Some(cookie));
    let (_, response) = respond_at(&mut r, &init3, now).unwrap().response();
    for old in [&first, &second] {
        assert_eq!(
            old.handle_response(&response).unwrap_err(),
            HandshakeError::UnexpectedResponse
        );
    }
    third.handle_response(&response).unwrap();
}

#[test]
fn every_bit_flip_of_handshake_messages_is_refused() {
    let now = t0();
    let (i1, init) = make_init(10, 0x40);
    for i in 0..init.len() {
        for bit in 0..8 {
            let mut r = responder(&psk());
            let mut d = init;
            d[i] ^= 1 << bit;
            assert!(
                respond_at(&mut r, &d, now).is_err(),
                "init byte {i} bit {bit}"
            );
        }
    }
    let mut r = responder(&psk());
    let challenge = respond_at(&mut r, &init, now).unwrap().challenge();
    for i in 0..challenge.len() {
        for bit in 0..8 {
            let mut d = challenge.clone();
            d[i] ^= 1 << bit;
            assert!(
                i1.handle_challenge(&d).is_err(),
                "challenge byte {i} bit {bit}"
            );
        }
    }
    let cookie = i1.handle_challenge(&challenge).unwrap();
    let (i2, init2) = make_init_with(&psk(), 11, 0x41, Some(cookie));
    for i in 0..init2.len() {
        for bit in 0..8 {
            let mut d = init2;
            d[i] ^= 1 << bit;
            assert!(
                r.verify_init(&d, now).is_err(),
                "cookie init byte {i} bit {bit}"
            );
        }
    }
    let (_, response) = respond_at(&mut r, &init2, now).unwrap().response();
    for i in 0..response.len() {
        for bit in 0..8 {
            let mut d = response.clone();
            d[i] ^= 1 << bit;
            assert!(
                i2.handle_response(&d).is_err(),
                "response byte {i} bit {bit}"
            );
        }
    }
    i2.handle_response(&response).unwrap();
}

#[test]
fn no_amplification() {
    assert_eq!(INIT_LEN, 104);
    assert_eq!(RESPONSE_LEN, 96);
    assert_eq!(CHALLENGE_LEN, 80);
    let (i, init) = make_init(1, 0x40);
    let mut r = responder(&psk());
    let c = respond(&mut r, &init).unwrap().challenge();
    assert!(c.len() <= init.len());
    let (_, init2) = make_init_with(&psk(), 2, 0x41, Some(i.handle_challenge(&c).unwrap()));
    let (_, resp) = respond(&mut r, &init2).unwrap().response();
    assert!(resp.len() <= init2.len());
}

#[test]
fn wrong_connection_type_and_length() {
    let now = t0();
    let (initiator, init) = make_init(10, 0x40);
    let mut other = Responder::new(&psk(), CONN + 1, INST_R).unwrap();
    assert_eq!(
        respond(&mut other, &init).unwrap_err(),
        HandshakeError::WrongConnection {
            expected: CONN + 1,
            got: CONN
        }
    );
    let mut r = responder(&psk());
    // An Init is not an answer.
    assert!(matches!(
        initiator.handle_response(&init),
        Err(HandshakeError::BadLength { len: 104, .. })
    ));
    assert!(matches!(
        initiator.handle_challenge(&init),
        Err(HandshakeError::BadLength { len: 104, .. })
    ));
    // Right length, wrong type or a flag set.
    let mut d = init;
    d[0] = (1 << 4) | MsgType::Data.code();
    assert_eq!(
        r.verify_init(&d, now).unwrap_err(),
        HandshakeError::UnexpectedHeader {
            expected: MsgType::HandshakeInit
        }
    );
    let mut d = init;
    d[1] = Flags::SEALED.bits();
    assert!(matches!(
        r.verify_init(&d, now),
        Err(HandshakeError::UnexpectedHeader { .. })
    ));
    let mut d = init;
    d[0] = 0x25;
    assert!(matches!(
        r.verify_init(&d, now),
        Err(HandshakeError::Malformed(_))
    ));
    assert!(matches!(
        r.verify_init(&init[..INIT_LEN - 1], now),
        Err(HandshakeError::BadLength { .. })
    ));
    respond(&mut r, &init).unwrap().challenge();
}

#[test]
fn small_buffers() {
    let now = t0();
    let mut small = [0u8; INIT_LEN - 1];
    assert_eq!(
        Initiator::start(
            &psk(),
            INST_I,
            &header(MsgType::HandshakeInit, Flags::NONE, 1),
            pattern(0x40),
            1,
            None,
            &mut small,
        )
        .unwrap_err(),
        HandshakeError::Encode(crate::EncodeError::BufferTooSmall {
            needed: INIT_LEN,
            have: INIT_LEN - 1
        })
    );
    let (i, init) = make_init(10, 0x40);
    let mut r = responder(&psk());
    let h = header(MsgType::HandshakeResponse, Flags::NONE, 1);
    let v = r.verify_init(&init, now).unwrap();
    let mut reply = [0u8; CHALLENGE_LEN - 1];
    assert!(matches!(
        r.answer(&v, pattern(0x80), pattern(0xc0), now, &h, &mut reply),
        Err(HandshakeError::Encode(_))
    ));
    // Nothing was remembered: no cookie is outstanding.
    let (_, guess) = make_init_with(&psk(), 11, 0x41, Some(pattern(0xc0)));
    assert_eq!(
        r.verify_init(&guess, now).unwrap_err(),
        HandshakeError::BadCookie
    );
    let c = respond_at(&mut r, &init, now).unwrap().challenge();
    let (_, init2) = make_init_with(&psk(), 11, 0x41, Some(i.handle_challenge(&c).unwrap()));
    let v = r.verify_init(&init2, now).unwrap();
    let mut reply = [0u8; RESPONSE_LEN - 1];
    assert!(matches!(
        r.answer(&v, pattern(0x80), pattern(0xc0), now, &h, &mut reply),
        Err(HandshakeError::Encode(_))
    ));
    // The cookie was not consumed: the same Init still works.
    assert_eq!(r.last_timestamp(), 0);
    respond_at(&mut r, &init2, now).unwrap().response();
}

#[test]
fn debug_never_shows_secrets() {
    let key = pattern::<32>(0xc0);
    let p = Psk::from_bytes(key);
    let shown = format!("{p:?} {p:#?}");
    assert!(!shown.contains("192"), "{shown}");
    assert!(!shown.to_lowercase().contains("c0"), "{shown}");
    let (i, init) = make_init_with(&p, 10, 0x40, None);
    let mut r = responder(&p);
    let v = r.verify_init(&init, t0()).unwrap();
    let _ = respond(&mut r, &init);
    let (ki, kr) = handshake(&p, &p).unwrap();
    for s in [
        format!("{i:?}"),
        format!("{r:?}"),
        format!("{v:?}"),
        format!("{ki:?}"),
        format!("{kr:?}"),
    ] {
        assert!(
            !s.contains("192") && !s.to_lowercase().contains("c0c1"),
            "{s}"
        );
    }
}

// ---------------------------------------------------------------------------
// Robustness: no input panics.

fn any_header_bytes() -> impl Strategy<Value = [u8; HEADER_LEN]> {
    // Valid version/type/flags most of the time, so decryption is reached.
    (
        prop::array::uniform24(any::<u8>()),
        1u8..=7,
        prop::bool::weighted(0.9),
    )
        .prop_map(|(mut h, ty, sealed)| {
            h[0] = (1 << 4) | ty;
            h[1] = u8::from(sealed);
            h
        })
}

proptest! {
    #[test]
    fn open_never_panics(
        h in any_header_bytes(),
        body in prop::collection::vec(any::<u8>(), 0..128),
        raw in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let keys = kat_keys(Role::Responder);
        let mut b = body.clone();
        prop_assert!(keys.open(&h, &mut b).is_err());
        let mut d = [&h[..], &body[..]].concat();
        prop_assert!(keys.open_datagram(&mut d).is_err());
        let mut r = raw.clone();
        prop_assert!(keys.open_datagram(&mut r).is_err());
    }

    #[test]
    fn seal_then_open_round_trips(
        seq in 0..REJECT_AFTER_MESSAGES,
        payload in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let i = kat_keys(Role::Initiator);
        let r = kat_keys(Role::Responder);
        let mut buf = data_buf(seq, &payload);
        let n = i.seal_datagram(&mut buf, payload.len()).unwrap();
        prop_assert_eq!(r.open_datagram(&mut buf[..n]).unwrap(), &payload[..]);
    }


    #[test]
    fn handshake_parsers_never_panic(
        raw in prop::collection::vec(any::<u8>(), 0..160),
        h in any_header_bytes(),
        init_body in prop::collection::vec(any::<u8>(), INIT_BODY_LEN),
        resp_body in prop::collection::vec(any::<u8>(), RESPONSE_BODY_LEN),
        chal_body in prop::collection::vec(any::<u8>(), CHALLENGE_BODY_LEN),
    ) {
        let now = t0();
        let (initiator, _) = make_init(10, 0x40);
        let mut r = responder(&psk());
        prop_assert!(respond_at(&mut r, &raw, now).is_err());
        prop_assert!(initiator.handle_response(&raw).is_err());
        prop_assert!(initiator.handle_challenge(&raw).is_err());

        // Well-formed headers of the right type and length: only the MAC
        // stands in the way.
        let mut init = [0u8; INIT_LEN];
        header(MsgType::HandshakeInit, Flags::NONE, 1).emit(&mut init).unwrap();
        init[HEADER_LEN..].copy_from_slice(&init_body);
        prop_assert_eq!(respond_at(&mut r, &init, now).unwrap_err(), HandshakeError::Auth);
        let mut resp = [0u8; RESPONSE_LEN];
        header(MsgType::HandshakeResponse, Flags::NONE, 1).emit(&mut resp).unwrap();
        resp[HEADER_LEN..].copy_from_slice(&resp_body);
        prop_assert_eq!(initiator.handle_response(&resp).unwrap_err(), HandshakeError::Auth);
        let mut chal = [0u8; CHALLENGE_LEN];
        header(MsgType::HandshakeChallenge, Flags::NONE, 1).emit(&mut chal).unwrap();
        chal[HEADER_LEN..].copy_from_slice(&chal_body);
        prop_assert_eq!(initiator.handle_challenge(&chal).unwrap_err(), HandshakeError::Auth);

        // Arbitrary headers in front of arbitrary bodies.
        for body in [&init_body, &resp_body, &chal_body] {
            let d = [&h[..], &body[..]].concat();
            prop_assert!(respond_at(&mut r, &d, now).is_err());
            prop_assert!(initiator.handle_response(&d).is_err());
            prop_assert!(initiator.handle_challenge(&d).is_err());
        }
        prop_assert_eq!(r.last_timestamp(), 0);
    }
}

#[test]
fn aes_256_gcm_sessions_round_trip_and_differ_from_chacha() {
    let aes = psk().with_cipher(Cipher::Aes256Gcm);
    let (i, r) = handshake(&aes, &aes).unwrap();
    let mut buf = data_buf(7, PAYLOAD);
    let n = i.seal_datagram(&mut buf, PAYLOAD.len()).unwrap();
    assert_eq!(n, HEADER_LEN + PAYLOAD.len() + TAG_LEN, "same layout");
    let sealed = buf[..n].to_vec();
    assert_eq!(r.open_datagram(&mut buf[..n]).unwrap(), PAYLOAD);
    // The same key bytes and nonces under ChaCha20-Poly1305 give other
    // ciphertext, which the AES session refuses.
    let chacha = kat_keys(Role::Initiator);
    let mut other = data_buf(7, PAYLOAD);
    let m = chacha.seal_datagram(&mut other, PAYLOAD.len()).unwrap();
    assert_ne!(other[..m], sealed[..]);
    assert_eq!(r.open_datagram(&mut other[..m]), Err(AeadError::Auth));
}

#[test]
fn peers_with_different_ciphers_fail_the_handshake() {
    let aes = psk().with_cipher(Cipher::Aes256Gcm);
    let chacha = psk();
    // The first Init already fails its MAC at the responder: no
    // challenge, no keys.
    for (i, r) in [(&aes, &chacha), (&chacha, &aes)] {
        let mut resp = responder(r);
        let (_, init) = make_init_with(i, 1_000, 0x40, None);
        assert!(
            matches!(
                respond_at(&mut resp, &init, t0()),
                Err(HandshakeError::Auth)
            ),
            "{:?} initiator, {:?} responder",
            i.cipher(),
            r.cipher()
        );
    }
}

#[test]
fn cipher_names_round_trip() {
    for c in Cipher::ALL {
        assert_eq!(Cipher::from_name(c.name()), Some(c));
    }
    assert_eq!(Cipher::from_name("AES-256-GCM"), None);
    assert_eq!(Cipher::default(), Cipher::ChaCha20Poly1305);
    assert!(format!("{:?}", psk().with_cipher(Cipher::Aes256Gcm)).contains("aes-256-gcm"));
}

/// A PSK is held once: clones (and a clone given another cipher) share
/// the bytes rather than copy them.
#[test]
fn psk_clones_share_one_key() {
    let a = psk();
    let b = a.clone().with_cipher(Cipher::Aes256Gcm);
    assert!(a.shares_bytes_with(&b));
    assert!(!a.shares_bytes_with(&psk()));
    assert_eq!(
        format!("{b:?}"),
        format!("Psk(<redacted>, {})", Cipher::Aes256Gcm)
    );
}
