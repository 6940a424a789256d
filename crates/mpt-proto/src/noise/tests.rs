//! The public-key handshake in virtual time: both roles, every refusal,
//! cookies under load, rekeying with the old keys still opening, and
//! garbage of every length.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::crypto::{Psk, Role, SessionKeys};
use crate::wire::{Flags, Header, MsgType, HEADER_LEN};

use crate::test_clock::t0 as base;

/// A deterministic random source (SplitMix64): tests are reproducible.
struct TestRng(u64);

impl Entropy for TestRng {
    fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_be_bytes()[..chunk.len()]);
        }
    }
}

fn identity(seed: u8) -> Identity {
    Identity::new(StaticSecret::from_bytes([seed; KEY_LEN])).unwrap()
}

const SERVER: u8 = 0x51;
const CLIENT: u8 = 0xc1;
const OTHER: u8 = 0x0e;

fn template() -> Header {
    Header {
        msg_type: MsgType::Data,
        flags: Flags::NONE,
        path_id: 7,
        conn_id: 0xa5a5_a5a5,
        seq: 0xa5a5_a5a5_a5a5_a5a5,
        path_seq: 3,
        timestamp_us: 1234,
    }
}

fn src() -> SocketAddr {
    "192.0.2.10:40000".parse().unwrap()
}

fn wall(secs: u64) -> Tai64n {
    Tai64n::from_unix(Duration::from_secs(1_800_000_000 + secs))
}

/// The server, knowing the client (connection id 1) and `OTHER` (2).
fn server(psk: Option<Psk>) -> Responder<u32> {
    let mut r = Responder::new(identity(SERVER), ResponderConfig::default());
    r.add_peer(identity(CLIENT).public_key(), 1, psk);
    r.add_peer(identity(OTHER).public_key(), 2, None);
    r
}

fn client(psk: Option<Psk>) -> Initiator {
    Initiator::new(identity(CLIENT), identity(SERVER).public_key(), psk)
}

fn initiate(i: &mut Initiator, index: u32, secs: u64, now: Instant, rng: &mut TestRng) -> Vec<u8> {
    let mut out = vec![0xa5; 200];
    let len = i
        .initiate(
            index,
            wall(secs),
            now,
            Outgoing {
                template: template(),
                entropy: rng,
                out: &mut out,
            },
        )
        .unwrap();
    out.truncate(len);
    out
}

fn respond(
    r: &mut Responder<u32>,
    dgram: &[u8],
    from: SocketAddr,
    index: u32,
    now: Instant,
    under_load: bool,
    rng: &mut TestRng,
) -> (Result<Reply<u32>, NoiseError>, Vec<u8>) {
    let mut out = vec![0xa5; 200];
    let reply = r.handle_initiation(
        dgram,
        from,
        &mut |_| Some(index),
        now,
        under_load,
        Outgoing {
            template: template(),
            entropy: rng,
            out: &mut out,
        },
    );
    let len = match &reply {
        Ok(Reply::CookieReply { len }) | Ok(Reply::Response { len, .. }) => *len,
        Err(_) => 0,
    };
    out.truncate(len);
    (reply, out)
}

/// One full handshake; returns (initiator's, responder's) result.
fn handshake(
    i: &mut Initiator,
    r: &mut Responder<u32>,
    indexes: (u32, u32),
    secs: u64,
    now: Instant,
    rng: &mut TestRng,
) -> (Established, Established) {
    let init = initiate(i, indexes.0, secs, now, rng);
    let (reply, resp) = respond(r, &init, src(), indexes.1, now, false, rng);
    let Ok(Reply::Response { established, .. }) = reply else {
        panic!("no response: {reply:?}")
    };
    let mine = i.handle_response(&resp).unwrap();
    (mine, *established)
}

/// Seals a data datagram addressed to `receiver_index` under `keys`.
fn seal(keys: &SessionKeys, receiver_index: u32, seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; HEADER_LEN + payload.len() + 16];
    Header {
        msg_type: MsgType::Data,
        flags: Flags::SEALED,
        path_id: 0,
        conn_id: receiver_index,
        seq,
        path_seq: 0,
        timestamp_us: 0,
    }
    .emit(&mut buf)
    .unwrap();
    buf[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(payload);
    let len = keys.seal_datagram(&mut buf, payload.len()).unwrap();
    buf.truncate(len);
    buf
}

fn opens(keys: &SessionKeys, dgram: &[u8], payload: &[u8]) -> bool {
    let mut d = dgram.to_vec();
    keys.open_datagram(&mut d).is_ok_and(|p| p == payload)
}

#[test]
fn full_handshake_gives_both_sides_matching_keys_and_indexes() {
    let now = base();
    let mut rng = TestRng(1);
    let mut c = client(None);
    let mut s = server(None);
    let init = initiate(&mut c, 0x1111_1111, 0, now, &mut rng);
    assert_eq!(init.len(), INITIATION_LEN);
    assert_eq!(c.pending_index(), Some(0x1111_1111));
    let (reply, resp) = respond(&mut s, &init, src(), 0x2222_2222, now, false, &mut rng);
    let Ok(Reply::Response {
        len,
        peer,
        established: theirs,
    }) = reply
    else {
        panic!("{reply:?}")
    };
    assert_eq!((len, peer), (RESPONSE_LEN, 1));
    assert_eq!(resp.len(), RESPONSE_LEN);
    let mine = c.handle_response(&resp).unwrap();
    assert_eq!(c.pending_index(), None);

    assert_eq!(
        (mine.local_index, mine.remote_index),
        (0x1111_1111, 0x2222_2222)
    );
    assert_eq!(
        (theirs.local_index, theirs.remote_index),
        (0x2222_2222, 0x1111_1111)
    );
    assert_eq!((mine.role, theirs.role), (Role::Initiator, Role::Responder));
    assert_eq!(mine.peer, identity(SERVER).public_key());
    assert_eq!(theirs.peer, identity(CLIENT).public_key());

    // Data both ways, addressed by the receiver's index.
    let up = seal(&mine.keys, mine.remote_index, 1, b"client to server");
    assert!(opens(&theirs.keys, &up, b"client to server"));
    let down = seal(&theirs.keys, theirs.remote_index, 1, b"server to client");
    assert!(opens(&mine.keys, &down, b"server to client"));
    // A key does not open its own direction.
    assert!(!opens(&mine.keys, &up, b"client to server"));

    let (cc, sc) = (c.counters(), s.counters());
    assert_eq!(
        (cc.initiations_sent, cc.responses_received, cc.completed),
        (1, 1, 1)
    );
    assert_eq!(
        (sc.initiations_processed, sc.responses_sent, sc.completed),
        (1, 1, 1)
    );
    assert_eq!(sc.refused, RefusedCounters::default());
}

#[test]
fn handshake_works_the_other_way_round_and_keys_are_fresh_each_time() {
    let now = base();
    let mut rng = TestRng(2);
    // The former server dials the former client.
    let mut i = Initiator::new(identity(SERVER), identity(CLIENT).public_key(), None);
    let mut r = Responder::new(identity(CLIENT), ResponderConfig::default());
    r.add_peer(identity(SERVER).public_key(), 9, None);
    let (a1, b1) = handshake(&mut i, &mut r, (5, 6), 0, now, &mut rng);
    let msg = seal(&a1.keys, a1.remote_index, 1, b"x");
    assert!(opens(&b1.keys, &msg, b"x"));
    // A second handshake: new ephemerals, so the old keys open nothing new.
    let later = now + Duration::from_secs(1);
    let (a2, b2) = handshake(&mut i, &mut r, (7, 8), 1, later, &mut rng);
    let msg2 = seal(&a2.keys, a2.remote_index, 1, b"x");
    assert!(opens(&b2.keys, &msg2, b"x"));
    assert!(!opens(&b1.keys, &msg2, b"x"));
}

#[test]
fn a_matching_psk_is_mixed_in_and_a_mismatch_fails_the_handshake() {
    let now = base();
    let mut rng = TestRng(3);
    let psk = || Some(Psk::from_bytes([0x77; 32]));
    let (mine, theirs) = handshake(
        &mut client(psk()),
        &mut server(psk()),
        (1, 2),
        0,
        now,
        &mut rng,
    );
    let msg = seal(&mine.keys, 2, 1, b"psk");
    assert!(opens(&theirs.keys, &msg, b"psk"));

    // psk2 enters in the response: the responder cannot tell, the
    // initiator refuses the response.
    let mut c = client(Some(Psk::from_bytes([0x78; 32])));
    let mut s = server(psk());
    let init = initiate(&mut c, 1, 0, now, &mut rng);
    let (reply, resp) = respond(&mut s, &init, src(), 2, now, false, &mut rng);
    assert!(matches!(reply, Ok(Reply::Response { .. })));
    assert_eq!(c.handle_response(&resp).unwrap_err(), NoiseError::Decrypt);
    assert_eq!(c.counters().refused.decrypt, 1);
    // The attempt stays pending: a forgery cannot cancel it.
    assert_eq!(c.pending_index(), Some(1));

    // No PSK on one side only fails the same way.
    let mut c = client(None);
    let init = initiate(&mut c, 1, 0, now, &mut rng);
    let (_, resp) = respond(&mut server(psk()), &init, src(), 2, now, false, &mut rng);
    assert_eq!(c.handle_response(&resp).unwrap_err(), NoiseError::Decrypt);
}

#[test]
fn wrong_server_key_fails_mac1_before_any_noise_work() {
    let now = base();
    let mut rng = TestRng(4);
    // The client believes the server's key is OTHER's.
    let mut c = Initiator::new(identity(CLIENT), identity(OTHER).public_key(), None);
    let mut s = server(None);
    let init = initiate(&mut c, 1, 0, now, &mut rng);
    for under_load in [false, true] {
        let (reply, out) = respond(&mut s, &init, src(), 2, now, under_load, &mut rng);
        assert_eq!(reply.unwrap_err(), NoiseError::Mac1);
        assert!(out.is_empty(), "nothing to send");
    }
    let sc = s.counters();
    assert_eq!(sc.refused.mac1, 2);
    // No handshake state was created, no Diffie-Hellman done, no cookie
    // handed out.
    assert_eq!(sc.initiations_processed, 0);
    assert_eq!(sc.cookies_sent, 0);
}

#[test]
fn unknown_client_key_is_refused_after_decryption() {
    let now = base();
    let mut rng = TestRng(5);
    let stranger = 0x99;
    let mut c = Initiator::new(identity(stranger), identity(SERVER).public_key(), None);
    let mut s = server(None);
    let init = initiate(&mut c, 1, 0, now, &mut rng);
    let (reply, out) = respond(&mut s, &init, src(), 2, now, false, &mut rng);
    assert_eq!(reply.unwrap_err(), NoiseError::UnknownPeer);
    assert!(out.is_empty());
    assert_eq!(s.counters().refused.unknown_peer, 1);
    assert_eq!(s.counters().initiations_processed, 1);
    assert_eq!(s.counters().responses_sent, 0);

    // Once added, the same client gets in; removed, it is unknown again.
    s.add_peer(identity(stranger).public_key(), 3, None);
    let init = initiate(&mut c, 2, 1, now, &mut rng);
    let (reply, _) = respond(&mut s, &init, src(), 3, now, false, &mut rng);
    assert!(
        matches!(reply, Ok(Reply::Response { peer: 3, .. })),
        "{reply:?}"
    );
    assert_eq!(s.remove_peer(&identity(stranger).public_key()), Some(3));
    let init = initiate(&mut c, 3, 2, now + Duration::from_secs(1), &mut rng);
    let (reply, _) = respond(
        &mut s,
        &init,
        src(),
        4,
        now + Duration::from_secs(1),
        false,
        &mut rng,
    );
    assert_eq!(reply.unwrap_err(), NoiseError::UnknownPeer);
}

#[test]
fn replayed_or_older_initiations_are_refused() {
    let now = base();
    let mut rng = TestRng(6);
    let mut c = client(None);
    let mut s = server(None);
    let init = initiate(&mut c, 1, 100, now, &mut rng);
    let (reply, _) = respond(&mut s, &init, src(), 2, now, false, &mut rng);
    assert!(matches!(reply, Ok(Reply::Response { .. })));
    // The same datagram again, well after the rate limit.
    let later = now + Duration::from_secs(5);
    let (reply, out) = respond(&mut s, &init, src(), 3, later, false, &mut rng);
    assert_eq!(reply.unwrap_err(), NoiseError::Replay);
    assert!(out.is_empty());
    // A genuine initiation whose clock is behind: refused as well.
    let mut behind = client(None);
    let old = initiate(&mut behind, 4, 50, later, &mut rng);
    let (reply, _) = respond(&mut s, &old, src(), 5, later, false, &mut rng);
    assert_eq!(reply.unwrap_err(), NoiseError::Replay);
    assert_eq!(s.counters().refused.replay, 2);
    // A newer one is accepted.
    let fresh = initiate(&mut c, 6, 101, later, &mut rng);
    let (reply, _) = respond(&mut s, &fresh, src(), 7, later, false, &mut rng);
    assert!(matches!(reply, Ok(Reply::Response { .. })));
}

#[test]
fn an_initiator_whose_clock_stands_still_still_sends_increasing_timestamps() {
    let now = base();
    let mut rng = TestRng(7);
    let mut c = client(None);
    let mut s = server(None);
    for (k, index) in (10..14u32).enumerate() {
        let at = now + Duration::from_millis(100 * k as u64);
        let init = initiate(&mut c, index, 0, at, &mut rng);
        let (reply, _) = respond(&mut s, &init, src(), index + 100, at, false, &mut rng);
        assert!(
            matches!(reply, Ok(Reply::Response { .. })),
            "{k}: {reply:?}"
        );
    }
    assert_eq!(
        Tai64n::from_bytes([0x40, 0, 0, 0, 0, 0, 0, 1, 0x3b, 0x9a, 0xc9, 0xff]).successor(),
        Tai64n::from_bytes([0x40, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0])
    );
}

#[test]
fn accepted_initiations_per_peer_are_rate_limited() {
    let now = base();
    let mut rng = TestRng(8);
    let mut c = client(None);
    let mut s = server(None);
    let a = initiate(&mut c, 1, 0, now, &mut rng);
    assert!(matches!(
        respond(&mut s, &a, src(), 2, now, false, &mut rng).0,
        Ok(Reply::Response { .. })
    ));
    let soon = now + Duration::from_millis(49);
    let b = initiate(&mut c, 3, 1, soon, &mut rng);
    assert_eq!(
        respond(&mut s, &b, src(), 4, soon, false, &mut rng)
            .0
            .unwrap_err(),
        NoiseError::RateLimited
    );
    // Another peer is not affected.
    let mut o = Initiator::new(identity(OTHER), identity(SERVER).public_key(), None);
    let x = initiate(&mut o, 5, 0, soon, &mut rng);
    assert!(matches!(
        respond(&mut s, &x, src(), 6, soon, false, &mut rng).0,
        Ok(Reply::Response { peer: 2, .. })
    ));
    // 50 ms after the accepted one, the refused initiation is fine: the
    // refusal did not record its timestamp.
    let then = now + Duration::from_millis(50);
    assert!(matches!(
        respond(&mut s, &b, src(), 4, then, false, &mut rng).0,
        Ok(Reply::Response { .. })
    ));
    assert_eq!(s.counters().refused.rate_limited, 1);
}

#[test]
fn under_load_a_cookie_round_trip_lets_the_initiator_in() {
    let now = base();
    let mut rng = TestRng(9);
    let mut c = client(None);
    let mut s = server(None);
    let first = initiate(&mut c, 1, 0, now, &mut rng);
    assert_eq!(
        &first[first.len() - MAC_LEN..],
        &[0; MAC_LEN],
        "no cookie yet: mac2 zero"
    );
    let (reply, cookie_reply) = respond(&mut s, &first, src(), 2, now, true, &mut rng);
    assert!(
        matches!(
            reply,
            Ok(Reply::CookieReply {
                len: COOKIE_REPLY_LEN
            })
        ),
        "{reply:?}"
    );
    assert!(cookie_reply.len() <= first.len(), "no amplification");
    let parsed = parse_cookie_reply(&cookie_reply).unwrap();
    assert_eq!(
        parsed.receiver_index(),
        1,
        "addressed to the initiator's index"
    );
    assert_eq!(
        s.counters().initiations_processed,
        0,
        "no Noise work for it"
    );
    assert_eq!(s.counters().cookies_sent, 1);

    let t1 = now + Duration::from_millis(200);
    c.handle_cookie_reply(&cookie_reply, t1).unwrap();
    assert_eq!(c.counters().cookies_received, 1);
    let second = initiate(&mut c, 3, 1, t1, &mut rng);
    assert_ne!(&second[second.len() - MAC_LEN..], &[0; MAC_LEN], "mac2 set");
    let (reply, resp) = respond(&mut s, &second, src(), 4, t1, true, &mut rng);
    assert!(matches!(reply, Ok(Reply::Response { .. })), "{reply:?}");
    c.handle_response(&resp).unwrap();

    // The same cookie from another source address does not count.
    let t2 = t1 + Duration::from_secs(1);
    let third = initiate(&mut c, 5, 2, t2, &mut rng);
    let elsewhere: SocketAddr = "[2001:db8::7]:40000".parse().unwrap();
    let (reply, _) = respond(&mut s, &third, elsewhere, 6, t2, true, &mut rng);
    assert!(matches!(reply, Ok(Reply::CookieReply { .. })), "{reply:?}");
    assert_eq!(s.counters().refused.stale_mac2, 1);
    // Not under load, mac2 is not looked at.
    let (reply, _) = respond(&mut s, &third, elsewhere, 6, t2, false, &mut rng);
    assert!(matches!(reply, Ok(Reply::Response { .. })), "{reply:?}");
}

#[test]
fn a_stale_cookie_earns_a_new_cookie_reply_not_a_handshake() {
    let t0 = base();
    let mut rng = TestRng(10);
    let mut s = server(None);
    // The server's secret is born at t0 (a cookie for someone else).
    let mut o = Initiator::new(identity(OTHER), identity(SERVER).public_key(), None);
    let x = initiate(&mut o, 9, 0, t0, &mut rng);
    let other_src: SocketAddr = "198.51.100.1:1".parse().unwrap();
    assert!(matches!(
        respond(&mut s, &x, other_src, 1, t0, true, &mut rng).0,
        Ok(Reply::CookieReply { .. })
    ));

    // 100 s later the client gets a cookie under that same secret.
    let t1 = t0 + Duration::from_secs(100);
    let mut c = client(None);
    let a = initiate(&mut c, 1, 100, t1, &mut rng);
    let (_, cr) = respond(&mut s, &a, src(), 2, t1, true, &mut rng);
    c.handle_cookie_reply(&cr, t1).unwrap();

    // 30 s later the client's cookie is young, but the secret is 130 s
    // old: replaced, so the mac2 is stale.
    let t2 = t1 + Duration::from_secs(30);
    let b = initiate(&mut c, 3, 130, t2, &mut rng);
    assert_ne!(
        &b[b.len() - MAC_LEN..],
        &[0; MAC_LEN],
        "client still uses its cookie"
    );
    let (reply, cr2) = respond(&mut s, &b, src(), 4, t2, true, &mut rng);
    assert!(matches!(reply, Ok(Reply::CookieReply { .. })), "{reply:?}");
    assert_eq!(s.counters().refused.stale_mac2, 1);
    assert_eq!(s.counters().initiations_processed, 0);
    // The new cookie works.
    c.handle_cookie_reply(&cr2, t2).unwrap();
    let d = initiate(&mut c, 5, 131, t2, &mut rng);
    assert!(matches!(
        respond(&mut s, &d, src(), 6, t2, true, &mut rng).0,
        Ok(Reply::Response { .. })
    ));

    // The initiator itself stops using a cookie after its lifetime.
    let t3 = t2 + COOKIE_SECRET_LIFETIME;
    let e = initiate(&mut c, 7, 300, t3, &mut rng);
    assert_eq!(&e[e.len() - MAC_LEN..], &[0; MAC_LEN]);
}

#[test]
fn cookie_replies_and_responses_for_other_attempts_are_refused() {
    let now = base();
    let mut rng = TestRng(11);
    let mut c = client(None);
    let mut s = server(None);
    let a = initiate(&mut c, 1, 0, now, &mut rng);
    let (_, cr) = respond(&mut s, &a, src(), 2, now, true, &mut rng);
    let (_, resp) = respond(&mut s, &a, src(), 2, now, false, &mut rng);
    // A newer attempt replaces the first: answers to the first are stale.
    let _b = initiate(&mut c, 3, 1, now, &mut rng);
    assert_eq!(
        c.handle_cookie_reply(&cr, now).unwrap_err(),
        NoiseError::UnknownIndex { index: 1 }
    );
    assert_eq!(
        c.handle_response(&resp).unwrap_err(),
        NoiseError::UnknownIndex { index: 1 }
    );

    // A cookie reply re-addressed to the pending attempt does not open
    // (it is bound to the first attempt's mac1).
    let mut moved = cr.clone();
    moved[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert_eq!(
        c.handle_cookie_reply(&moved, now).unwrap_err(),
        NoiseError::BadCookieReply
    );
    // Nor does a tampered one.
    let mut c2 = client(None);
    let a2 = initiate(&mut c2, 1, 5, now, &mut rng);
    let (_, mut cr2) = respond(&mut s, &a2, src(), 2, now, true, &mut rng);
    let last = cr2.len() - 1;
    cr2[last] ^= 1;
    assert_eq!(
        c2.handle_cookie_reply(&cr2, now).unwrap_err(),
        NoiseError::BadCookieReply
    );
    assert_eq!(c.counters().refused.unknown_index, 2);
    assert_eq!(c.counters().refused.bad_cookie_reply, 1);
}

#[test]
fn a_tampered_response_is_refused_and_the_genuine_one_still_works() {
    let now = base();
    let mut rng = TestRng(12);
    let mut c = client(None);
    let mut s = server(None);
    let a = initiate(&mut c, 1, 0, now, &mut rng);
    let (_, resp) = respond(&mut s, &a, src(), 2, now, false, &mut rng);
    // Flip a byte of the Noise part and recompute nothing: mac1 fails.
    let mut bad = resp.clone();
    bad[HEADER_LEN + 10] ^= 0x40;
    assert_eq!(c.handle_response(&bad).unwrap_err(), NoiseError::Mac1);
    // An attacker knows the client's public key, so it can fix mac1; the
    // Noise layer still refuses it.
    let mac1_key = mac::MacKeys::of(&identity(CLIENT).public_key()).mac1;
    let m = mac::mac(&mac1_key, &[&bad[..RESPONSE_LEN - MAC_LEN]]);
    bad[RESPONSE_LEN - MAC_LEN..].copy_from_slice(&m);
    assert_eq!(c.handle_response(&bad).unwrap_err(), NoiseError::Decrypt);
    // The pending handshake survived both.
    let mine = c.handle_response(&resp).unwrap();
    assert_eq!(mine.remote_index, 2);
    // And a second copy of the response is for no pending attempt.
    assert_eq!(
        c.handle_response(&resp).unwrap_err(),
        NoiseError::UnknownIndex { index: 1 }
    );
}

#[test]
fn wire_layout_of_the_three_messages() {
    assert_eq!(
        (INITIATION_LEN, RESPONSE_LEN, COOKIE_REPLY_LEN),
        (168, 92, 80)
    );
    let now = base();
    let mut rng = TestRng(13);
    let mut c = client(None);
    let mut s = server(None);
    let a = initiate(&mut c, 0x0102_0304, 0, now, &mut rng);
    // Version 1, type 11, no flags, template fields kept, receiver index 0.
    assert_eq!(a[0], 0x1b);
    assert_eq!(a[1], 0);
    let (h, _) = Header::parse(&a).unwrap();
    assert_eq!(
        (h.path_id, h.conn_id, h.path_seq, h.timestamp_us),
        (7, 0, 3, 1234)
    );
    assert_eq!(&a[24..28], &[1, 2, 3, 4], "sender index");
    let parsed = parse_initiation(&a).unwrap();
    assert_eq!(parsed.sender_index(), 0x0102_0304);
    // mac1 is keyed with the server's public key over everything before it.
    let key = mac::MacKeys::of(&identity(SERVER).public_key()).mac1;
    assert_eq!(
        parsed.mac1(),
        mac::mac(&key, &[&a[..INITIATION_LEN - 2 * MAC_LEN]])
    );

    let (_, r) = respond(&mut s, &a, src(), 0x0a0b_0c0d, now, false, &mut rng);
    assert_eq!(r[0], 0x1c);
    assert_eq!(&r[4..8], &[1, 2, 3, 4], "receiver index in conn_id");
    assert_eq!(&r[24..28], &[0x0a, 0x0b, 0x0c, 0x0d], "sender index");
    let (_, cr) = respond(&mut s, &a, src(), 1, now, true, &mut rng);
    assert_eq!(cr[0], 0x1d);
    assert_eq!(&cr[4..8], &[1, 2, 3, 4]);
}

#[test]
fn malformed_initiations_are_refused_before_any_crypto() {
    let now = base();
    let mut rng = TestRng(14);
    let mut c = client(None);
    let mut s = server(None);
    let good = initiate(&mut c, 1, 0, now, &mut rng);
    let mut cases: Vec<(Vec<u8>, &str)> = vec![
        (Vec::new(), "empty"),
        (good[..HEADER_LEN].to_vec(), "header only"),
        (good[..good.len() - 1].to_vec(), "one short"),
        ([good.clone(), vec![0]].concat(), "one long"),
        (vec![0xff; 9216], "jumbo"),
    ];
    let mut flagged = good.clone();
    flagged[1] = Flags::SEALED.bits();
    cases.push((flagged, "flags"));
    let mut typed = good.clone();
    typed[0] = 0x1c;
    cases.push((typed, "response type"));
    let mut version = good.clone();
    version[0] = 0x2b;
    cases.push((version, "version 2"));
    let mut addressed = good.clone();
    addressed[7] = 1;
    cases.push((addressed, "receiver index set"));
    for (dgram, what) in &cases {
        let (reply, out) = respond(&mut s, dgram, src(), 2, now, false, &mut rng);
        let e = reply.unwrap_err();
        assert!(
            matches!(
                e,
                NoiseError::BadLength { .. }
                    | NoiseError::Malformed(_)
                    | NoiseError::UnexpectedHeader { .. }
            ),
            "{what}: {e:?}"
        );
        assert!(out.is_empty(), "{what}");
    }
    assert_eq!(s.counters().refused.malformed, cases.len() as u64);
    // Any altered byte of a well-formed initiation breaks mac1 (the
    // header included), except in mac2, which is not checked off load.
    for at in 0..INITIATION_LEN - MAC_LEN {
        let mut d = good.clone();
        d[at] ^= 0x01;
        let (reply, _) = respond(&mut s, &d, src(), 2, now, false, &mut rng);
        assert!(reply.is_err(), "byte {at}");
    }
    assert_eq!(s.counters().initiations_processed, 0);
    // A buffer too small for the answer costs no Diffie-Hellman either.
    let mut tiny = [0u8; 10];
    let e = s
        .handle_initiation(
            &good,
            src(),
            &mut |_| Some(2),
            now,
            false,
            Outgoing {
                template: template(),
                entropy: &mut rng,
                out: &mut tiny,
            },
        )
        .unwrap_err();
    assert!(matches!(e, NoiseError::Encode(_)), "{e:?}");
    assert_eq!(s.counters().initiations_processed, 0);
}

#[test]
fn random_index_avoids_zero_and_indexes_in_use() {
    let mut rng = TestRng(15);
    for _ in 0..100 {
        let i = random_index(&mut rng, |i| i % 2 == 0).unwrap();
        assert!(i % 2 == 1);
    }
    assert_eq!(random_index(&mut rng, |_| true), None);
}

proptest! {
    // Each case runs a real initiation (Diffie-Hellman): 64 are plenty for
    // a parser that checks the length first; the fuzz target goes further.
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random bytes of any length, and random bytes under a valid header
    /// of each type, never panic and never produce an answer.
    #[test]
    fn garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..400), code in 11u8..14) {
        let now = base();
        let mut rng = TestRng(16);
        let mut s = server(None);
        let mut c = client(None);
        let _ = initiate(&mut c, 1, 0, now, &mut rng);
        for dgram in [body.clone(), {
            let mut d = body.clone();
            if d.len() >= HEADER_LEN { d[0] = 0x10 | code; d[1] = 0; d[4..8].copy_from_slice(&1u32.to_be_bytes()); }
            d
        }] {
            let (reply, out) = respond(&mut s, &dgram, src(), 2, now, true, &mut rng);
            prop_assert!(reply.is_err());
            prop_assert!(out.is_empty());
            prop_assert!(c.handle_response(&dgram).is_err());
            prop_assert!(c.handle_cookie_reply(&dgram, now).is_err());
            let _ = parse_initiation(&dgram);
        }
        prop_assert_eq!(s.counters().initiations_processed, 0);
        prop_assert_eq!(c.pending_index(), Some(1));
    }
}

// ---- Key rotation -------------------------------------------------------

fn small() -> RekeyConfig {
    RekeyConfig {
        rekey_after_time: Duration::from_secs(12),
        responder_rekey_delay: Duration::from_secs(1),
        reject_after_time: Duration::from_secs(18),
        rekey_after_messages: 5,
        reject_after_messages: 8,
        rekey_retry: Duration::from_secs(2),
        rekey_attempt_time: Duration::from_secs(9),
        previous_grace: Duration::from_secs(3),
    }
}

fn drain(k: &mut Keyring, now: Instant) -> Vec<KeyEvent> {
    std::iter::from_fn(|| k.poll(now)).take(10).collect()
}

#[test]
fn rekey_by_time_keeps_old_keys_opening_for_the_grace_period() {
    let t0 = base();
    let mut rng = TestRng(20);
    let mut c = client(None);
    let mut s = server(None);
    let mut ck = Keyring::new(small());
    let mut sk = Keyring::new(small());
    let (mine, theirs) = handshake(&mut c, &mut s, (1, 2), 0, t0, &mut rng);
    ck.install(mine, t0);
    sk.install(theirs, t0);
    assert!(ck.can_send(t0));
    assert!(!sk.can_send(t0), "responder waits for confirmation");
    let (keys, to) = ck.next_send(t0).unwrap();
    assert_eq!(to, 2);
    let first = seal(keys, to, 1, b"one");
    let (keys, slot) = sk.open_keys(2, t0).unwrap();
    assert_eq!(slot, KeySlot::Next);
    assert!(opens(keys, &first, b"one"));
    sk.confirm(2, t0);
    assert!(sk.can_send(t0));
    assert_eq!(sk.open_keys(2, t0).unwrap().1, KeySlot::Current);

    // Nothing to do before the rekey time; the deadline says when.
    assert_eq!(drain(&mut ck, t0 + Duration::from_secs(11)), []);
    assert_eq!(ck.poll_timeout(), Some(t0 + Duration::from_secs(12)));
    let t12 = t0 + Duration::from_secs(12);
    assert_eq!(drain(&mut ck, t12), [KeyEvent::Initiate]);
    // The responder's side waits one more second; then both retry.
    assert_eq!(drain(&mut sk, t12), []);
    assert_eq!(
        drain(&mut sk, t12 + Duration::from_secs(1)),
        [KeyEvent::Initiate]
    );
    assert_eq!(
        drain(&mut ck, t12 + Duration::from_secs(1)),
        [],
        "retry not yet"
    );
    assert_eq!(ck.poll_timeout(), Some(t12 + Duration::from_secs(2)));

    // A datagram sealed with the old keys just before the switch...
    let (keys, to) = ck.next_send(t12).unwrap();
    let in_flight = seal(keys, to, 2, b"in flight");
    // ...the rekey handshake completes...
    let t13 = t12 + Duration::from_secs(1);
    let (mine2, theirs2) = handshake(&mut c, &mut s, (3, 4), 13, t13, &mut rng);
    ck.install(mine2, t13);
    sk.install(theirs2, t13);
    assert_eq!(ck.counters().rekeys, 1);
    // ...the client seals with the new keys at once, the server opens
    // them as Next and confirms.
    let (keys, to) = ck.next_send(t13).unwrap();
    assert_eq!(to, 4);
    let new = seal(keys, to, 3, b"new");
    let (keys, slot) = sk.open_keys(4, t13).unwrap();
    assert_eq!(slot, KeySlot::Next);
    assert!(opens(keys, &new, b"new"));
    sk.confirm(4, t13);
    assert_eq!(sk.counters().rekeys, 1);
    // The datagram in flight under the old keys still opens, on the
    // server, during the grace period.
    let t15 = t13 + Duration::from_secs(2);
    let (keys, slot) = sk.open_keys(2, t15).unwrap();
    assert_eq!(slot, KeySlot::Previous);
    assert!(opens(keys, &in_flight, b"in flight"));
    // The client still opens the server's old-key datagrams as well.
    assert_eq!(ck.open_keys(1, t15).unwrap().1, KeySlot::Previous);
    // After the grace period they are gone, and the index is retired.
    let t16 = t13 + Duration::from_secs(3);
    assert!(sk.open_keys(2, t16).is_none());
    assert_eq!(drain(&mut sk, t16), [KeyEvent::Retired { local_index: 2 }]);
    assert_eq!(drain(&mut ck, t16), [KeyEvent::Retired { local_index: 1 }]);
    assert_eq!(sk.local_indexes().collect::<Vec<_>>(), [4]);
    // No rekey is due for the new keys until their own time.
    assert_eq!(drain(&mut ck, t16), []);
    assert_eq!(ck.poll_timeout(), Some(t13 + Duration::from_secs(12)));
}

#[test]
fn rekey_by_message_count_and_the_hard_message_limit() {
    let t0 = base();
    let mut rng = TestRng(21);
    let (mine, _) = handshake(
        &mut client(None),
        &mut server(None),
        (1, 2),
        0,
        t0,
        &mut rng,
    );
    let mut k = Keyring::new(small());
    k.install(mine, t0);
    for n in 1..=4 {
        assert!(k.next_send(t0).is_some());
        assert_eq!(drain(&mut k, t0), [], "after {n}");
    }
    assert!(k.next_send(t0).is_some());
    assert_eq!(drain(&mut k, t0), [KeyEvent::Initiate], "at 5 sealed");
    // Until the hard limit the keys keep sealing.
    assert!(k.next_send(t0).is_some());
    assert!(k.next_send(t0).is_some());
    assert!(k.next_send(t0).is_some());
    assert!(k.next_send(t0).is_none(), "8 sealed: no more");
    // The poll gives them up and keeps asking for keys.
    let t2 = t0 + Duration::from_secs(2);
    assert_eq!(
        drain(&mut k, t2),
        [KeyEvent::Retired { local_index: 1 }, KeyEvent::Initiate]
    );
    assert_eq!(k.counters().expired, 1);
    assert!(k.open_keys(1, t2).is_none());
}

#[test]
fn keys_expire_at_the_hard_time_limit_and_attempts_stop_after_a_while() {
    let t0 = base();
    let mut rng = TestRng(22);
    let (mine, _) = handshake(
        &mut client(None),
        &mut server(None),
        (1, 2),
        0,
        t0,
        &mut rng,
    );
    let mut k = Keyring::new(small());
    k.install(mine, t0);
    assert_eq!(
        drain(&mut k, t0 + Duration::from_secs(12)),
        [KeyEvent::Initiate]
    );
    assert_eq!(
        drain(&mut k, t0 + Duration::from_secs(14)),
        [KeyEvent::Initiate]
    );
    let t18 = t0 + Duration::from_secs(18);
    assert!(k.next_send(t18).is_none());
    assert!(k.open_keys(1, t18).is_none());
    assert_eq!(
        drain(&mut k, t18),
        [KeyEvent::Retired { local_index: 1 }, KeyEvent::Initiate]
    );
    // Attempts every 2 s for 9 s, then silence until keys are wanted.
    let mut attempts = 0;
    for s in 19..=40 {
        attempts += drain(&mut k, t0 + Duration::from_secs(s)).len();
    }
    assert_eq!(attempts, 4, "at 20, 22, 24, 26 s");
    assert_eq!(k.poll_timeout(), None);
    k.want_keys(t0 + Duration::from_secs(41));
    assert_eq!(
        drain(&mut k, t0 + Duration::from_secs(41)),
        [KeyEvent::Initiate]
    );
}

#[test]
fn unconfirmed_responder_keys_seal_nothing_and_expire() {
    let t0 = base();
    let mut rng = TestRng(23);
    let (_, theirs) = handshake(
        &mut client(None),
        &mut server(None),
        (1, 2),
        0,
        t0,
        &mut rng,
    );
    let mut k = Keyring::new(small());
    k.install(theirs, t0);
    assert!(k.next_send(t0).is_none());
    assert_eq!(k.open_keys(2, t0).unwrap().1, KeySlot::Next);
    assert!(k.open_keys(1, t0).is_none(), "the peer's index is not ours");
    assert_eq!(k.poll_timeout(), Some(t0 + Duration::from_secs(18)));
    let t18 = t0 + Duration::from_secs(18);
    assert_eq!(drain(&mut k, t18), [KeyEvent::Retired { local_index: 2 }]);
    assert_eq!(k.counters().expired, 1);
    // A second answered handshake replaces an unconfirmed one.
    let (_, a) = handshake(
        &mut client(None),
        &mut server(None),
        (3, 4),
        1,
        t18,
        &mut rng,
    );
    let (_, b) = handshake(
        &mut client(None),
        &mut server(None),
        (5, 6),
        2,
        t18,
        &mut rng,
    );
    k.install(a, t18);
    k.install(b, t18);
    assert_eq!(drain(&mut k, t18), [KeyEvent::Retired { local_index: 4 }]);
    assert_eq!(k.local_indexes().collect::<Vec<_>>(), [6]);
}

#[test]
fn counters_add_up() {
    let mut total = HandshakeCounters::default();
    let mut one = HandshakeCounters {
        completed: 2,
        ..HandshakeCounters::default()
    };
    one.refuse(&NoiseError::Replay);
    one.refuse(&NoiseError::Mac1);
    one.refuse(&NoiseError::Crypto);
    total.add(&one);
    total.add(&one);
    assert_eq!(total.completed, 4);
    assert_eq!((total.refused.replay, total.refused.mac1), (2, 2));
}

#[test]
fn initiating_into_a_small_buffer_is_an_error_and_changes_nothing() {
    let now = base();
    let mut rng = TestRng(24);
    let mut c = client(None);
    let mut tiny = [0u8; INITIATION_LEN - 1];
    let e = c
        .initiate(
            1,
            wall(0),
            now,
            Outgoing {
                template: template(),
                entropy: &mut rng,
                out: &mut tiny,
            },
        )
        .unwrap_err();
    assert!(matches!(e, NoiseError::Encode(_)), "{e:?}");
    assert_eq!(c.pending_index(), None);
    assert_eq!(c.counters().initiations_sent, 0);
}

#[test]
fn the_data_cipher_is_bound_into_the_handshake() {
    use crate::crypto::Cipher;
    let now = base();
    let mut rng = TestRng(9);
    let aes = |seed| identity(seed).with_cipher(Cipher::Aes256Gcm);
    let server_with = |id: Identity| {
        let mut r = Responder::new(id, ResponderConfig::default());
        r.add_peer(identity(CLIENT).public_key(), 1, None);
        r
    };
    // Both ends on AES-256-GCM: keys that interoperate.
    let mut c = Initiator::new(aes(CLIENT), identity(SERVER).public_key(), None);
    let mut s = server_with(aes(SERVER));
    let (mine, theirs) = handshake(&mut c, &mut s, (1, 2), 0, now, &mut rng);
    let msg = seal(&mine.keys, 2, 1, b"aes");
    assert!(opens(&theirs.keys, &msg, b"aes"));
    // A ChaCha20-Poly1305 session of the same peers cannot open it.
    let (_, chacha) = handshake(
        &mut client(None),
        &mut server_with(identity(SERVER)),
        (3, 4),
        1,
        now,
        &mut rng,
    );
    assert!(!opens(&chacha.keys, &msg, b"aes"));
    // One end on each: the prologues differ, so the responder cannot
    // decrypt the initiator's static key and answers nothing.
    let mut c = Initiator::new(aes(CLIENT), identity(SERVER).public_key(), None);
    let init = initiate(&mut c, 5, 2, now, &mut rng);
    let (reply, out) = respond(
        &mut server_with(identity(SERVER)),
        &init,
        src(),
        6,
        now,
        false,
        &mut rng,
    );
    assert!(reply.is_err(), "{reply:?}");
    assert!(out.is_empty());
}

/// A sender holding a valid cookie replays one initiation: after its
/// source's burst, every copy is refused before any Diffie-Hellman (the
/// count of initiations processed stops), and the bucket refills.
#[test]
fn a_cookie_holding_replayer_is_limited_per_source_before_diffie_hellman() {
    let now = base();
    let mut rng = TestRng(31);
    let mut c = client(None);
    let mut s = server(None);
    let first = initiate(&mut c, 1, 0, now, &mut rng);
    let (_, cr) = respond(&mut s, &first, src(), 2, now, true, &mut rng);
    c.handle_cookie_reply(&cr, now).unwrap();
    let replayed = initiate(&mut c, 3, 1, now, &mut rng);
    let burst = HandshakeLimits::default().per_source_burst;
    for _ in 0..1000 {
        let _ = respond(&mut s, &replayed, src(), 4, now, true, &mut rng);
    }
    let k = s.counters();
    assert_eq!(k.initiations_processed, u64::from(burst), "{k:?}");
    assert_eq!(k.refused.source_limited, 1000 - u64::from(burst));
    // Other ports of the same address share the bucket.
    let other_port: SocketAddr = "192.0.2.10:40001".parse().unwrap();
    let (reply, _) = respond(&mut s, &replayed, other_port, 4, now, false, &mut rng);
    assert!(matches!(reply, Err(NoiseError::SourceLimited)), "{reply:?}");
    // Another address has its own.
    let other_addr: SocketAddr = "192.0.2.11:40000".parse().unwrap();
    let (reply, _) = respond(&mut s, &replayed, other_addr, 4, now, false, &mut rng);
    assert!(matches!(reply, Err(NoiseError::Replay)), "{reply:?}");
    // 20/s: one token per 50 ms.
    let later = now + Duration::from_millis(50);
    let (reply, _) = respond(&mut s, &replayed, src(), 4, later, true, &mut rng);
    assert!(matches!(reply, Err(NoiseError::Replay)), "{reply:?}");
}

/// The responder-wide bucket bounds the handshakes of many sources.
#[test]
fn the_global_bucket_bounds_handshake_work_whatever_the_sources() {
    let now = base();
    let mut rng = TestRng(32);
    let mut c = client(None);
    let mut s = server(None);
    let init = initiate(&mut c, 1, 0, now, &mut rng);
    let limits = HandshakeLimits::default();
    for k in 0..2000u32 {
        let from = SocketAddr::from(([10, (k >> 16) as u8, (k >> 8) as u8, k as u8], 9));
        let _ = respond(&mut s, &init, from, 2, now, false, &mut rng);
    }
    let k = s.counters();
    assert_eq!(k.initiations_processed, u64::from(limits.global_burst));
    assert_eq!(k.refused.overloaded, 2000 - u64::from(limits.global_burst));
    // Responses (and anything else the daemon admits) share it.
    assert_eq!(s.admit(&src(), now), Err(NoiseError::Overloaded));
    assert_eq!(s.admit(&src(), now + Duration::from_millis(2)), Ok(()));
}

#[test]
fn sources_are_keyed_by_address_and_ipv6_by_its_64() {
    let a: SocketAddr = "192.0.2.1:1".parse().unwrap();
    let b: SocketAddr = "192.0.2.1:2".parse().unwrap();
    assert_eq!(source_key(&a), source_key(&b));
    let c: SocketAddr = "[2001:db8:1:2:aaaa::1]:5".parse().unwrap();
    let d: SocketAddr = "[2001:db8:1:2:bbbb::9]:6".parse().unwrap();
    let e: SocketAddr = "[2001:db8:1:3::1]:5".parse().unwrap();
    assert_eq!(source_key(&c), source_key(&d));
    assert_ne!(source_key(&c), source_key(&e));
}

/// A million distinct sources (each with a valid mac1) leave the
/// limiter's table at its bound.
#[test]
fn the_source_table_is_bounded_under_a_million_sources() {
    let now = base();
    let mut l = HandshakeLimiter::new(HandshakeLimits::default());
    for k in 0..1_000_000u32 {
        let from = SocketAddr::from((k.to_be_bytes(), 1));
        let _ = l.admit(&from, now);
    }
    assert_eq!(l.sources(), HandshakeLimits::default().source_table);
}

/// The private key is held once: an initiator, the responder and every
/// clone of the identity share one allocation (wiped when the last goes).
#[test]
fn identity_clones_share_one_private_key() {
    let id = identity(7);
    let copy = id.clone();
    let other = identity(7);
    assert!(id.shares_secret_with(&copy));
    assert!(!id.shares_secret_with(&other));
    let with_aes = copy.with_cipher(crate::crypto::Cipher::Aes256Gcm);
    assert!(id.shares_secret_with(&with_aes));
}

/// A flood of forged responses (right index, mac1 fixed up by someone who
/// knows the client's public key) costs at most ANSWER_CHECKS_PER_ATTEMPT
/// Diffie-Hellman checks per attempt; the rest are refused as overloaded
/// before any X25519, and the next attempt has a full budget again.
#[test]
fn forged_responses_cost_a_bounded_number_of_checks_per_attempt() {
    let now = base();
    let mut rng = TestRng(40);
    let mut c = client(None);
    let mut s = server(None);
    let a = initiate(&mut c, 1, 0, now, &mut rng);
    let (_, resp) = respond(&mut s, &a, src(), 2, now, false, &mut rng);
    let mut forged = resp.clone();
    forged[HEADER_LEN + 10] ^= 0x40;
    let mac1_key = mac::MacKeys::of(&identity(CLIENT).public_key()).mac1;
    let m = mac::mac(&mac1_key, &[&forged[..RESPONSE_LEN - MAC_LEN]]);
    forged[RESPONSE_LEN - MAC_LEN..].copy_from_slice(&m);
    for _ in 0..ANSWER_CHECKS_PER_ATTEMPT {
        assert_eq!(c.handle_response(&forged).unwrap_err(), NoiseError::Decrypt);
    }
    for _ in 0..1000 {
        assert_eq!(
            c.handle_response(&forged).unwrap_err(),
            NoiseError::Overloaded
        );
    }
    // Cookie replies to the attempt share the budget.
    let (_, cr) = respond(&mut server(None), &a, src(), 3, now, true, &mut rng);
    assert_eq!(
        c.handle_cookie_reply(&cr, now).unwrap_err(),
        NoiseError::Overloaded
    );
    assert_eq!(
        c.counters().refused.decrypt,
        u64::from(ANSWER_CHECKS_PER_ATTEMPT)
    );
    assert_eq!(c.counters().refused.overloaded, 1001);
    // mac1 comes before the budget: junk without it is still `Mac1`.
    let mut no_mac1 = resp.clone();
    no_mac1[HEADER_LEN + 10] ^= 0x40;
    assert_eq!(c.handle_response(&no_mac1).unwrap_err(), NoiseError::Mac1);
    // A new attempt: the budget is back and the genuine answer works.
    let a2 = initiate(&mut c, 5, 1, now, &mut rng);
    let (_, resp2) = respond(
        &mut s,
        &a2,
        src(),
        6,
        now + Duration::from_secs(1),
        false,
        &mut rng,
    );
    assert_eq!(c.handle_response(&resp2).unwrap().remote_index, 6);
}

/// Forged cookie replies to a pending attempt open at most
/// ANSWER_CHECKS_PER_ATTEMPT times; the genuine one within budget is kept.
#[test]
fn forged_cookie_replies_cost_a_bounded_number_of_opens() {
    let now = base();
    let mut rng = TestRng(41);
    let mut c = client(None);
    let a = initiate(&mut c, 1, 0, now, &mut rng);
    let (_, cr) = respond(&mut server(None), &a, src(), 2, now, true, &mut rng);
    let mut bad = cr.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    for _ in 0..ANSWER_CHECKS_PER_ATTEMPT - 1 {
        assert_eq!(
            c.handle_cookie_reply(&bad, now).unwrap_err(),
            NoiseError::BadCookieReply
        );
    }
    c.handle_cookie_reply(&cr, now).unwrap();
    assert_eq!(
        c.handle_cookie_reply(&cr, now).unwrap_err(),
        NoiseError::Overloaded
    );
    assert_eq!(c.counters().cookies_received, 1);
}
