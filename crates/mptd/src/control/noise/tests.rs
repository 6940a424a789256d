//! The daemon's driving of the public-key handshake: two [`NoiseConn`]s and
//! a [`NoiseDaemon`] per side, wired by hand, in virtual time.

use super::*;
use crate::plane::NoiseIds;
use mpt_proto::noise::StaticSecret;
use mpt_proto::wire::{Flags, MsgType};
use std::sync::atomic::Ordering::Relaxed;

fn base() -> Instant {
    #[allow(clippy::disallowed_methods)]
    Instant::now()
}

fn template() -> Header {
    Header {
        msg_type: MsgType::NoiseInitiation,
        flags: Flags::NONE,
        path_id: 0,
        conn_id: 0,
        seq: 1,
        path_seq: 1,
        timestamp_us: 0,
    }
}

fn src() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 65022))
}

/// One side: its responder, its connection to the other side, its keys.
struct Side {
    daemon: NoiseDaemon,
    conn: NoiseConn,
    crypto: ConnCrypto,
}

fn side(own: u8, peer: u8, timing: NoiseTiming) -> Side {
    let identity = Identity::new(StaticSecret::from_bytes([own; 32])).unwrap();
    let peer_key = StaticSecret::from_bytes([peer; 32]).public_key();
    let mut daemon = NoiseDaemon::new(identity.clone());
    daemon.add_peer(peer_key, 0, None);
    Side {
        conn: NoiseConn::new(identity, peer_key, None, timing),
        daemon,
        crypto: ConnCrypto::new_noise(
            Psk::from_bytes([0; 32]),
            timing.grace,
            Duration::from_secs(30),
        ),
    }
}

fn pair(timing: NoiseTiming) -> (Side, Side) {
    (side(1, 2, timing), side(2, 1, timing))
}

/// `a` initiates, `b` answers, `a` takes the response. Returns whether
/// the handshake completed.
fn handshake(a: &mut Side, b: &mut Side, now: Instant) -> bool {
    let mut out = [0u8; 200];
    let len = a
        .conn
        .initiate(
            &a.crypto,
            &mut a.daemon.rng,
            |_| false,
            template(),
            &mut out,
            now,
        )
        .unwrap();
    let init = out[..len].to_vec();
    match b
        .daemon
        .on_initiation(&init, src(), &|_| false, now, template(), &mut out)
    {
        InitiationOutcome::Respond {
            len, established, ..
        } => {
            if !b.conn.take_their_initiation(&b.crypto, now) {
                return false;
            }
            b.conn.responded(&b.crypto, *established, 0, now);
            a.conn.on_response(&a.crypto, &out[..len], 0, now).is_ok()
        }
        _ => false,
    }
}

#[test]
fn handshake_installs_keys_with_indexes_and_confirmation() {
    let timing = NoiseTiming::new(Duration::from_secs(1), None);
    let (mut a, mut b) = pair(timing);
    let now = base();
    assert!(handshake(&mut a, &mut b, now));
    let ia = a.crypto.current_ids().unwrap();
    let ib = b.crypto.pending_ids().unwrap();
    assert_eq!((ia.local, ia.remote), (ib.remote, ib.local));
    assert_eq!(ia.role, Role::Initiator);
    assert_eq!(ib.role, Role::Responder);
    // A addresses B's index; B knows it (pending) before any crypto.
    let (_, to) = a.crypto.sealing(99).unwrap();
    assert_eq!(to, ib.local);
    assert!(b.crypto.knows_index(to));
    // B seals nothing until confirmed.
    assert!(b.crypto.sealing(99).is_none());
    let pending = b.crypto.key_set().pending.unwrap();
    assert!(b.crypto.confirm(&pending, now));
    assert_eq!(b.crypto.sealing(99).unwrap().1, ia.local);
    assert_eq!(a.crypto.handshake_index.load(Relaxed), 0);
    assert_eq!(a.conn.counters().initiations_sent, 1);
    assert_eq!(a.conn.counters().completed, 1);
    assert_eq!(b.conn.stats.responses_sent, 1);
}

#[test]
fn an_unlisted_key_gets_no_answer_and_is_counted() {
    let timing = NoiseTiming::new(Duration::from_secs(1), None);
    // C knows B's key, B does not know C's.
    let mut c = side(3, 2, timing);
    let mut b = side(2, 1, timing);
    let now = base();
    assert!(!handshake(&mut c, &mut b, now));
    b.daemon.publish();
    let counted = *b.daemon.stats.responder.lock().unwrap();
    assert_eq!(counted.refused.unknown_peer, 1);
    assert_eq!(counted.responses_sent, 0);
    assert!(b.crypto.pending_ids().is_none());
}

#[test]
fn simultaneous_initiations_end_in_one_handshake() {
    let timing = NoiseTiming::new(Duration::from_secs(1), None);
    let (mut a, mut b) = pair(timing);
    let now = base();
    let mut out = [0u8; 200];
    let la = a
        .conn
        .initiate(
            &a.crypto,
            &mut a.daemon.rng,
            |_| false,
            template(),
            &mut out,
            now,
        )
        .unwrap();
    let from_a = out[..la].to_vec();
    let lb = b
        .conn
        .initiate(
            &b.crypto,
            &mut b.daemon.rng,
            |_| false,
            template(),
            &mut out,
            now,
        )
        .unwrap();
    let from_b = out[..lb].to_vec();
    // Each receives the other's: exactly one side answers.
    let mut answered = 0;
    let mut responses = Vec::new();
    for (to, init) in [(&mut b, &from_a), (&mut a, &from_b)] {
        let mut buf = [0u8; 200];
        if let InitiationOutcome::Respond {
            len, established, ..
        } = to
            .daemon
            .on_initiation(init, src(), &|_| false, now, template(), &mut buf)
        {
            if to.conn.take_their_initiation(&to.crypto, now) {
                to.conn.responded(&to.crypto, *established, 0, now);
                answered += 1;
                responses.push(buf[..len].to_vec());
            }
        }
    }
    assert_eq!(answered, 1);
    // The winner's initiation was answered: it takes the response.
    let ok = [&mut a, &mut b]
        .into_iter()
        .filter(|s| s.crypto.pending_ids().is_none())
        .map(|s| s.conn.on_response(&s.crypto, &responses[0], 0, now).is_ok())
        .collect::<Vec<_>>();
    assert_eq!(ok, [true]);
}

fn ids(role: Role, born: Instant) -> NoiseIds {
    NoiseIds {
        local: 1,
        remote: 2,
        role,
        born,
        seq0: 0,
    }
}

fn state(current: Option<NoiseIds>) -> KeyState {
    KeyState {
        current,
        sent: 0,
        pending: None,
        all_down: false,
        traffic_waiting: false,
    }
}

#[test]
fn policy_rekeys_by_age_and_role_and_count_and_retries() {
    let timing = NoiseTiming::new(Duration::from_secs(1), None);
    let t0 = base();
    let s = Duration::from_secs;
    // Initiator of the current keys: at 120 s, then every 5 s.
    let mut p = RekeyPolicy::new(timing);
    let cur = Some(ids(Role::Initiator, t0));
    assert!(!p.should_initiate(state(cur), t0 + s(119)));
    assert!(p.should_initiate(state(cur), t0 + s(120)));
    assert!(!p.should_initiate(state(cur), t0 + s(124)));
    assert!(p.should_initiate(state(cur), t0 + s(125)));
    // Responder: 10 s later.
    let mut p = RekeyPolicy::new(timing);
    let cur = Some(ids(Role::Responder, t0));
    assert!(!p.should_initiate(state(cur), t0 + s(120)));
    assert!(p.should_initiate(state(cur), t0 + s(130)));
    // By datagrams sealed.
    let mut p = RekeyPolicy::new(timing);
    let cur = Some(ids(Role::Initiator, t0));
    let many = KeyState {
        sent: 1 << 32,
        ..state(cur)
    };
    assert!(p.should_initiate(many, t0 + s(1)));
    // Unconfirmed keys we answered hold off our own attempt.
    let mut p = RekeyPolicy::new(timing);
    let waiting = KeyState {
        pending: Some(ids(Role::Responder, t0 + s(119))),
        ..state(cur)
    };
    assert!(!p.should_initiate(waiting, t0 + s(120)));
    assert!(p.should_initiate(waiting, t0 + s(125)));
}

#[test]
fn policy_without_keys_retries_fast_then_waits_for_traffic() {
    let timing = NoiseTiming::new(Duration::from_millis(300), None);
    let t0 = base();
    let ms = Duration::from_millis;
    let mut p = RekeyPolicy::new(timing);
    assert!(p.should_initiate(state(None), t0));
    assert!(!p.should_initiate(state(None), t0 + ms(299)));
    assert!(p.should_initiate(state(None), t0 + ms(300)));
    // After 90 s without keys: only when traffic waits.
    let late = t0 + Duration::from_secs(91);
    assert!(!p.should_initiate(state(None), late));
    let traffic = KeyState {
        traffic_waiting: true,
        ..state(None)
    };
    assert!(p.should_initiate(traffic, late));
    assert!(p.should_initiate(state(None), late + ms(300)));
}

#[test]
fn hard_limits_drop_keys_and_count_them() {
    let timing = NoiseTiming::new(Duration::from_secs(1), Some(Duration::from_secs(4)));
    assert_eq!(timing.rekey.reject_after_time, Duration::from_secs(6));
    let (mut a, mut b) = pair(timing);
    let now = base();
    assert!(handshake(&mut a, &mut b, now));
    assert!(a.crypto.sealing(0).is_some());
    // Not yet: rekey due at 4 s, not at 3.
    assert!(!a
        .conn
        .poll(&a.crypto, 0, 0, false, now + Duration::from_secs(3)));
    assert!(a
        .conn
        .poll(&a.crypto, 0, 0, false, now + Duration::from_secs(4)));
    // At the hard limit the keys go and a handshake is wanted.
    assert!(a
        .conn
        .poll(&a.crypto, 0, 0, false, now + Duration::from_secs(6)));
    assert!(a.crypto.sealing(0).is_none());
    assert_eq!(a.conn.stats.expired, 1);
    // By messages: 2^33 sealed.
    let (mut a, mut b) = pair(timing);
    assert!(handshake(&mut a, &mut b, now));
    assert!(!a.conn.poll(&a.crypto, 1 << 20, 0, false, now));
    a.conn.poll(&a.crypto, 1 << 33, 0, false, now);
    assert!(a.crypto.sealing(0).is_none());
}

#[test]
fn rekey_keeps_old_keys_opening_for_the_grace_period() {
    let timing = NoiseTiming::new(Duration::from_secs(1), Some(Duration::from_secs(8)));
    let (mut a, mut b) = pair(timing);
    let t0 = base();
    assert!(handshake(&mut a, &mut b, t0));
    let first = b.crypto.key_set().pending.unwrap();
    assert!(b.crypto.confirm(&first, t0));
    let old_b = b.crypto.current_ids().unwrap();
    // Rekey at 8 s: A initiates again.
    let t1 = t0 + Duration::from_secs(8);
    assert!(a.conn.poll(&a.crypto, 100, 0, false, t1));
    assert!(handshake(&mut a, &mut b, t1));
    // B still seals with the old keys and opens both.
    assert_eq!(b.crypto.sealing(0).unwrap().1, old_b.remote);
    let new_b = b.crypto.pending_ids().unwrap();
    assert!(b.crypto.knows_index(old_b.local) && b.crypto.knows_index(new_b.local));
    let pending = b.crypto.key_set().pending.unwrap();
    assert!(b.crypto.confirm(&pending, t1));
    assert_eq!(b.crypto.rekeys.get(), 1);
    assert_eq!(a.crypto.rekeys.get(), 1);
    // The old keys open for the grace period (4 s here), then go.
    b.crypto
        .expire(t1 + timing.grace - Duration::from_millis(1));
    assert!(b.crypto.knows_index(old_b.local));
    b.crypto.expire(t1 + timing.grace);
    assert!(!b.crypto.knows_index(old_b.local));
    assert!(b.crypto.knows_index(new_b.local));
}

#[test]
fn load_gauge_counts_per_second() {
    let t0 = base();
    let mut g = LoadGauge::default();
    for _ in 0..3 {
        assert!(!g.note(t0, 3));
    }
    assert!(g.note(t0 + Duration::from_millis(999), 3));
    // A new second starts afresh.
    assert!(!g.note(t0 + Duration::from_secs(1), 3));
}

#[test]
fn under_load_the_daemon_answers_with_a_cookie_then_lets_the_initiator_in() {
    let timing = NoiseTiming::new(Duration::from_secs(1), None);
    let (mut a, mut b) = pair(timing);
    let now = base();
    // Fill B's second with initiations (junk: refused at mac1, but each
    // reached the control loop).
    let mut out = [0u8; 200];
    let len = a
        .conn
        .initiate(
            &a.crypto,
            &mut a.daemon.rng,
            |_| false,
            template(),
            &mut out,
            now,
        )
        .unwrap();
    let mut junk = out[..len].to_vec();
    junk[24 + 112] ^= 1; // mac1
    for _ in 0..LOAD_INITIATIONS_PER_SECOND {
        let _ = b
            .daemon
            .on_initiation(&junk, src(), &|_| false, now, template(), &mut out);
    }
    let len = a
        .conn
        .initiate(
            &a.crypto,
            &mut a.daemon.rng,
            |_| false,
            template(),
            &mut out,
            now,
        )
        .unwrap();
    let init = out[..len].to_vec();
    let InitiationOutcome::Cookie { len } =
        b.daemon
            .on_initiation(&init, src(), &|_| false, now, template(), &mut out)
    else {
        panic!("expected a cookie reply under load");
    };
    a.conn
        .on_cookie_reply(&out[..len], now)
        .expect("cookie reply");
    // The next initiation carries mac2 and is answered, still under load.
    let later = now + Duration::from_millis(100);
    let len = a
        .conn
        .initiate(
            &a.crypto,
            &mut a.daemon.rng,
            |_| false,
            template(),
            &mut out,
            later,
        )
        .unwrap();
    let init = out[..len].to_vec();
    assert!(matches!(
        b.daemon
            .on_initiation(&init, src(), &|_| false, later, template(), &mut out),
        InitiationOutcome::Respond { .. }
    ));
    b.daemon.publish();
    let c = *b.daemon.stats.responder.lock().unwrap();
    assert_eq!(c.cookies_sent, 1);
    assert_eq!(c.refused.mac1, u64::from(LOAD_INITIATIONS_PER_SECOND));
    assert_eq!(a.conn.counters().cookies_received, 1);
}
