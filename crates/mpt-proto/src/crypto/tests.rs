//! Known-answer vectors, handshake round trips and robustness of the
//! crypto layer. The replay window and rate limiter test themselves in
//! their modules.

use super::*;
use crate::wire::{Flags, Header, MsgType, HEADER_LEN};
use proptest::prelude::*;

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

/// Runs a full handshake; returns (initiator keys, responder keys).
fn handshake(psk_i: &Psk, psk_r: &Psk) -> Result<(SessionKeys, SessionKeys), HandshakeError> {
    let mut init = [0xa5u8; 200];
    let (initiator, n) = Initiator::start(
        psk_i,
        &header(MsgType::HandshakeInit, Flags::NONE, 1),
        pattern(0x40),
        1_000,
        &mut init,
    )?;
    let mut responder = Responder::new(psk_r, CONN)?;
    let mut reply = [0xa5u8; 200];
    let (r_keys, m) = responder.handle_init(
        &init[..n],
        pattern(0x80),
        &header(MsgType::HandshakeResponse, Flags::NONE, 1),
        &mut reply,
    )?;
    let i_keys = initiator.handle_response(&reply[..m])?;
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
/// `Initiator::start` with psk 00..1f, nonce 40..5f, timestamp
/// 0x0102030405060708, header `header(HandshakeInit, NONE, 1)`.
const KAT_INIT: &str = "150000020102030400000000000000010a0b0c0d11223344404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f010203040506070800000000000000000000000000000000549dfcbcddd8a29e5f51ca04ab518c50";
/// The responder's answer to KAT_INIT with nonce 80..9f and header
/// `header(HandshakeResponse, NONE, 1)`.
const KAT_RESPONSE: &str = "160000020102030400000000000000010a0b0c0d11223344808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f549dfcbcddd8a29e5f51ca04ab518c506dbe7d9ef9f2cf1d0df52ea8b0132a6e";

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
    let mut buf = [0xa5u8; INIT_LEN + 4];
    let (initiator, n) = Initiator::start(
        &psk(),
        &header(MsgType::HandshakeInit, Flags::NONE, 1),
        pattern(0x40),
        0x0102_0304_0506_0708,
        &mut buf,
    )
    .unwrap();
    assert_eq!(n, INIT_LEN);
    assert_eq!(to_hex(&buf[..n]), KAT_INIT);
    assert_eq!(&buf[n..], &[0xa5; 4]);

    let mut responder = Responder::new(&psk(), CONN).unwrap();
    let mut reply = [0xa5u8; RESPONSE_LEN + 4];
    let (r_keys, m) = responder
        .handle_init(
            &buf[..n],
            pattern(0x80),
            &header(MsgType::HandshakeResponse, Flags::NONE, 1),
            &mut reply,
        )
        .unwrap();
    assert_eq!(m, RESPONSE_LEN);
    assert_eq!(to_hex(&reply[..m]), KAT_RESPONSE);
    assert_eq!(&reply[m..], &[0xa5; 4]);
    assert_eq!(responder.last_timestamp(), 0x0102_0304_0506_0708);

    // Both ends derive the KAT keys.
    let i_keys = initiator.handle_response(&reply[..m]).unwrap();
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
        &header(MsgType::Data, Flags::SEALED, 9),
        pattern(0x40),
        0x0102_0304_0506_0708,
        &mut buf,
    )
    .unwrap();
    // Type and flags are set by the handshake, not taken from the template.
    let (h, body) = Header::parse(&buf).unwrap();
    assert_eq!(h, header(MsgType::HandshakeInit, Flags::NONE, 9));
    assert_eq!(&body[..32], &pattern::<32>(0x40));
    assert_eq!(&body[32..40], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(&body[40..56], &[0; 16]);
    let key = kdf::handshake_mac_key(&psk()).unwrap();
    assert_eq!(
        &body[56..72],
        &handshake::mac(&key, &buf[..HEADER_LEN], &body[..56])
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

    // And at the initiator: a response made with another PSK.
    let mut init = [0u8; INIT_LEN];
    let (initiator, _) = Initiator::start(
        &psk(),
        &header(MsgType::HandshakeInit, Flags::NONE, 1),
        pattern(0x40),
        5,
        &mut init,
    )
    .unwrap();
    let mut other_init = [0u8; INIT_LEN];
    Initiator::start(
        &other,
        &header(MsgType::HandshakeInit, Flags::NONE, 1),
        pattern(0x40),
        5,
        &mut other_init,
    )
    .unwrap();
    let mut responder = Responder::new(&other, CONN).unwrap();
    let mut reply = [0u8; RESPONSE_LEN];
    responder
        .handle_init(
            &other_init,
            pattern(0x80),
            &header(MsgType::HandshakeResponse, Flags::NONE, 1),
            &mut reply,
        )
        .unwrap();
    assert_eq!(
        initiator.handle_response(&reply).unwrap_err(),
        HandshakeError::Auth
    );
}

fn make_init(timestamp: u64, nonce: u8) -> (Initiator, [u8; INIT_LEN]) {
    let mut init = [0u8; INIT_LEN];
    let (i, _) = Initiator::start(
        &psk(),
        &header(MsgType::HandshakeInit, Flags::NONE, u64::from(nonce)),
        pattern(nonce),
        timestamp,
        &mut init,
    )
    .unwrap();
    (i, init)
}

fn respond(r: &mut Responder, init: &[u8]) -> Result<[u8; RESPONSE_LEN], HandshakeError> {
    let mut reply = [0u8; RESPONSE_LEN];
    r.handle_init(
        init,
        pattern(0x80),
        &header(MsgType::HandshakeResponse, Flags::NONE, 1),
        &mut reply,
    )?;
    Ok(reply)
}

#[test]
fn replayed_init_is_refused() {
    let mut r = Responder::new(&psk(), CONN).unwrap();
    let (_, first) = make_init(100, 0x40);
    respond(&mut r, &first).unwrap();
    assert_eq!(r.last_timestamp(), 100);
    // The very same datagram.
    assert_eq!(
        respond(&mut r, &first).unwrap_err(),
        HandshakeError::Replay {
            timestamp: 100,
            last: 100
        }
    );
    // Same timestamp, other nonce; older timestamp.
    let (_, same) = make_init(100, 0x41);
    assert!(matches!(
        respond(&mut r, &same),
        Err(HandshakeError::Replay { .. })
    ));
    let (_, older) = make_init(99, 0x42);
    assert!(matches!(
        respond(&mut r, &older),
        Err(HandshakeError::Replay { .. })
    ));
    // Zero is never fresh.
    let mut fresh = Responder::new(&psk(), CONN).unwrap();
    let (_, zero) = make_init(0, 0x43);
    assert!(matches!(
        respond(&mut fresh, &zero),
        Err(HandshakeError::Replay { .. })
    ));
    // A newer one is accepted.
    let (_, newer) = make_init(101, 0x44);
    respond(&mut r, &newer).unwrap();
    assert_eq!(r.last_timestamp(), 101);
}

#[test]
fn restored_timestamp_blocks_old_inits() {
    let mut r = Responder::new(&psk(), CONN).unwrap();
    r.set_last_timestamp(500);
    let (_, old) = make_init(500, 0x40);
    assert!(matches!(
        respond(&mut r, &old),
        Err(HandshakeError::Replay { .. })
    ));
    let (_, new) = make_init(501, 0x40);
    respond(&mut r, &new).unwrap();
}

#[test]
fn forged_init_does_not_advance_the_timestamp() {
    let mut r = Responder::new(&psk(), CONN).unwrap();
    let (_, mut forged) = make_init(u64::MAX, 0x40);
    forged[HEADER_LEN + 40] ^= 1; // padding byte: MAC no longer matches
    assert_eq!(respond(&mut r, &forged).unwrap_err(), HandshakeError::Auth);
    assert_eq!(r.last_timestamp(), 0);
    let (_, ok) = make_init(1, 0x40);
    respond(&mut r, &ok).unwrap();
}

#[test]
fn response_to_another_init_is_refused() {
    let mut r = Responder::new(&psk(), CONN).unwrap();
    let (first, init1) = make_init(10, 0x40);
    let (second, init2) = make_init(11, 0x41);
    let reply1 = respond(&mut r, &init1).unwrap();
    // The retransmitted attempt must not take the first attempt's answer.
    assert_eq!(
        second.handle_response(&reply1).unwrap_err(),
        HandshakeError::UnexpectedResponse
    );
    let reply2 = respond(&mut r, &init2).unwrap();
    assert_eq!(
        first.handle_response(&reply2).unwrap_err(),
        HandshakeError::UnexpectedResponse
    );
    second.handle_response(&reply2).unwrap();
    first.handle_response(&reply1).unwrap();
}

#[test]
fn every_bit_flip_of_handshake_messages_is_refused() {
    let (initiator, init) = make_init(10, 0x40);
    for i in 0..init.len() {
        for bit in 0..8 {
            let mut r = Responder::new(&psk(), CONN).unwrap();
            let mut d = init;
            d[i] ^= 1 << bit;
            assert!(respond(&mut r, &d).is_err(), "init byte {i} bit {bit}");
            assert_eq!(r.last_timestamp(), 0);
        }
    }
    let mut r = Responder::new(&psk(), CONN).unwrap();
    let reply = respond(&mut r, &init).unwrap();
    for i in 0..reply.len() {
        for bit in 0..8 {
            let mut d = reply;
            d[i] ^= 1 << bit;
            assert!(
                initiator.handle_response(&d).is_err(),
                "response byte {i} bit {bit}"
            );
        }
    }
    initiator.handle_response(&reply).unwrap();
}

#[test]
fn no_amplification() {
    assert_eq!(INIT_LEN, 96);
    assert_eq!(RESPONSE_LEN, 88);
    let mut init = [0u8; 256];
    let (_, n) = Initiator::start(
        &psk(),
        &header(MsgType::HandshakeInit, Flags::NONE, 1),
        pattern(0x40),
        1,
        &mut init,
    )
    .unwrap();
    let mut r = Responder::new(&psk(), CONN).unwrap();
    let mut reply = [0u8; 256];
    let (_, m) = r
        .handle_init(
            &init[..n],
            pattern(0x80),
            &header(MsgType::HandshakeResponse, Flags::NONE, 1),
            &mut reply,
        )
        .unwrap();
    assert!(m <= n, "response {m} bytes > init {n} bytes");
}

#[test]
fn wrong_connection_type_and_length() {
    let (initiator, init) = make_init(10, 0x40);
    let mut other = Responder::new(&psk(), CONN + 1).unwrap();
    assert_eq!(
        respond(&mut other, &init).unwrap_err(),
        HandshakeError::WrongConnection {
            expected: CONN + 1,
            got: CONN
        }
    );
    let mut r = Responder::new(&psk(), CONN).unwrap();
    // An Init is not a response and the other way round.
    assert!(matches!(
        initiator.handle_response(&init),
        Err(HandshakeError::BadLength { len: 96, .. })
    ));
    let reply = respond(&mut r, &init).unwrap();
    let mut r2 = Responder::new(&psk(), CONN).unwrap();
    assert!(matches!(
        respond(&mut r2, &reply),
        Err(HandshakeError::BadLength { len: 88, .. })
    ));
    // Right length, wrong type or a flag set.
    let mut d = init;
    d[0] = (1 << 4) | MsgType::Data.code();
    assert_eq!(
        respond(&mut r2, &d).unwrap_err(),
        HandshakeError::UnexpectedHeader {
            expected: MsgType::HandshakeInit
        }
    );
    let mut d = init;
    d[1] = Flags::SEALED.bits();
    assert!(matches!(
        respond(&mut r2, &d),
        Err(HandshakeError::UnexpectedHeader { .. })
    ));
    let mut d = init;
    d[0] = 0x25;
    assert!(matches!(
        respond(&mut r2, &d),
        Err(HandshakeError::Malformed(_))
    ));
}

#[test]
fn authentic_nonzero_padding_is_refused() {
    let key = kdf::handshake_mac_key(&psk()).unwrap();
    let (_, mut init) = make_init(10, 0x40);
    init[HEADER_LEN + 50] = 1;
    let m = handshake::mac(
        &key,
        &init[..HEADER_LEN],
        &init[HEADER_LEN..HEADER_LEN + 56],
    );
    init[HEADER_LEN + 56..].copy_from_slice(&m);
    let mut r = Responder::new(&psk(), CONN).unwrap();
    assert_eq!(
        respond(&mut r, &init).unwrap_err(),
        HandshakeError::BadPadding
    );
}

#[test]
fn small_buffers() {
    let mut small = [0u8; INIT_LEN - 1];
    assert_eq!(
        Initiator::start(
            &psk(),
            &header(MsgType::HandshakeInit, Flags::NONE, 1),
            pattern(0x40),
            1,
            &mut small,
        )
        .unwrap_err(),
        HandshakeError::Encode(crate::EncodeError::BufferTooSmall {
            needed: INIT_LEN,
            have: INIT_LEN - 1
        })
    );
    let (_, init) = make_init(10, 0x40);
    let mut r = Responder::new(&psk(), CONN).unwrap();
    let mut reply = [0u8; RESPONSE_LEN - 1];
    assert!(matches!(
        r.handle_init(
            &init,
            pattern(0x80),
            &header(MsgType::HandshakeResponse, Flags::NONE, 1),
            &mut reply
        ),
        Err(HandshakeError::Encode(_))
    ));
    // Nothing was consumed: the same Init still works.
    assert_eq!(r.last_timestamp(), 0);
    respond(&mut r, &init).unwrap();
}

#[test]
fn debug_never_shows_secrets() {
    let key = pattern::<32>(0xc0);
    let p = Psk::from_bytes(key);
    let shown = format!("{p:?} {p:#?}");
    assert!(!shown.contains("192"), "{shown}");
    assert!(!shown.to_lowercase().contains("c0"), "{shown}");
    let (i, init) = make_init(10, 0x40);
    let mut r = Responder::new(&p, CONN).unwrap();
    let _ = respond(&mut r, &init);
    let (ki, kr) = handshake(&p, &p).unwrap();
    for s in [
        format!("{i:?}"),
        format!("{r:?}"),
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
        1u8..=6,
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
    ) {
        let (initiator, _) = make_init(10, 0x40);
        let mut r = Responder::new(&psk(), CONN).unwrap();
        prop_assert!(respond(&mut r, &raw).is_err());
        prop_assert!(initiator.handle_response(&raw).is_err());

        // Well-formed headers of the right type and length: only the MAC
        // stands in the way.
        let mut init = [0u8; INIT_LEN];
        header(MsgType::HandshakeInit, Flags::NONE, 1).emit(&mut init).unwrap();
        init[HEADER_LEN..].copy_from_slice(&init_body);
        prop_assert_eq!(respond(&mut r, &init).unwrap_err(), HandshakeError::Auth);
        let mut resp = [0u8; RESPONSE_LEN];
        header(MsgType::HandshakeResponse, Flags::NONE, 1).emit(&mut resp).unwrap();
        resp[HEADER_LEN..].copy_from_slice(&resp_body);
        prop_assert_eq!(initiator.handle_response(&resp).unwrap_err(), HandshakeError::Auth);

        // Arbitrary headers in front of arbitrary bodies.
        let d = [&h[..], &init_body[..]].concat();
        prop_assert!(respond(&mut r, &d).is_err());
        let d = [&h[..], &resp_body[..]].concat();
        prop_assert!(initiator.handle_response(&d).is_err());
        prop_assert_eq!(r.last_timestamp(), 0);
    }
}
