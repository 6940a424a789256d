//! The typed status document against the `json!` one the daemon wrote
//! before (`legacy`): the same bytes for the same state, and every field
//! the daemon fills known to the API.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_api::status::ConnectionDrops;
use mpt_api::Status;
use mpt_proto::crypto::{Cipher, Psk, Role};
use mpt_proto::noise::{HandshakeCounters, RefusedCounters};
use mpt_proto::sched::{Redundancy, SchedPath};
use mpt_proto::session::timing::EqualizeTarget;
use serde_json::{Map, Value};

use super::fields::counters_as;
use super::status_at;
use crate::control::noise::NoiseDaemonStats;
use crate::io::source::Source;
use crate::ops::cmd_port::Stats;
use crate::ops::source::StatusSource;
use crate::ops::testing::{one_connection, with_crypto};
use crate::plane::{ConnCrypto, ConnSet, LastHandover, NoiseIds, PathShared, PathTable, PathView};
use crate::sync::lock_unpoisoned;

mod legacy;

/// Handshake counters, each a different number from `base` on.
fn handshake_counters(base: u64) -> HandshakeCounters {
    HandshakeCounters {
        initiations_sent: base + 1,
        initiations_processed: base + 2,
        responses_sent: base + 3,
        responses_received: base + 4,
        completed: base + 5,
        rekeys: base + 6,
        expired: base + 7,
        cookies_sent: base + 8,
        cookies_received: base + 9,
        refused: RefusedCounters {
            malformed: base + 10,
            mac1: base + 11,
            stale_mac2: base + 12,
            decrypt: base + 13,
            unknown_peer: base + 14,
            replay: base + 15,
            rate_limited: base + 16,
            unknown_index: base + 17,
            bad_cookie_reply: base + 18,
            source_limited: base + 19,
            overloaded: base + 20,
        },
    }
}

/// A path `name` with id `id` on the loopback, towards `remote`.
fn path(id: usize, name: &str, remote: Option<SocketAddr>, now: Instant) -> PathShared {
    let socket = crate::io::udp::PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let sched = SchedPath {
        weight: 2,
        window: 4,
    };
    PathShared::new(id, name.into(), socket, remote, sched, 5, now)
}

/// A daemon with something in every part of the document: a pre-shared
/// key connection (`site-b`) whose first path has measurements, a learnt
/// path of a shared port, a path whose peer is not known yet and one
/// being removed; a public-key connection (`client-001`) with keys; the
/// netlink listener, the public-key responder and a shared port. Returns
/// it with the time to build the document at.
fn busy() -> (StatusSource, Instant) {
    let psk = Psk::from_bytes([7; 32]).with_cipher(Cipher::Aes256Gcm);
    let mut source = with_crypto("site-b", Some(ConnCrypto::new(psk)));
    let site = source.conns.list()[0].clone();
    let born = Instant::now();
    let now = born + Duration::from_millis(75_250);
    let keys = || crate::plane::testing::session_keys().0;
    let crypto = site.crypto.as_ref().unwrap();
    crypto.switch(keys(), born);
    crypto.handshakes.add(2);
    crypto.rekeys.add(1);
    let p0 = site.paths().get(0).unwrap().clone();
    *lock_unpoisoned(&p0.view) = PathView {
        state: "up",
        rtt_ms: Some(21.5),
        rtt_min_ms: Some(20.25),
        loss_pct: Some(0.1),
        last_change: born,
        last_rx: Some(now - Duration::from_micros(4_321)),
        peer_weight_in: Some(3),
        rate_bps: Some(96_000_000),
        rate_confirmed: true,
        owd_ms: Some(0.125),
        queue_ms: Some(1.5),
        rx_owd_ms: Some(0.0),
        lossy: true,
        share: 0.123_456,
        share_tx_bytes: 0,
        rx_share: 2.0 / 3.0,
        share_rx_bytes: 0,
        share_at: None,
    };
    let learnt = path(1, "lte", None, born);
    let client = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)), 4000);
    let via = Source {
        addr: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 5)),
        ifindex: 0,
    };
    assert!(learnt.learn_remote(client, Some(via)));
    learnt.rx_packets.add(7);
    let unknown = path(2, "wifi", None, born);
    let removed = path(3, "old", None, born);
    removed.mark_removed();
    let mut table = PathTable::default();
    table.insert(p0);
    for p in [learnt, unknown, removed] {
        table.insert(Arc::new(p));
    }
    site.set_paths(table);
    site.timing.update(|plan| {
        plan.rx_delay_spread = Some(Duration::from_micros(3_750));
        plan.equalize = Some(EqualizeTarget {
            owd_us: 41_000,
            spread_us: 3_600,
        });
        plan.equalize_bulk = Some(EqualizeTarget {
            owd_us: 324_000,
            spread_us: 287_000,
        });
    });
    site.repair.store(false, Relaxed);
    site.set_redundancy(Redundancy::All);
    site.handovers.count.add(1);
    site.handovers.record(LastHandover {
        from: "wifi".into(),
        to: "lte".into(),
        gap: Duration::from_micros(84_400),
        at: now - Duration::from_secs(12),
    });

    let noise = ConnCrypto::new_noise(
        Psk::from_bytes([0; 32]),
        Duration::from_secs(10),
        Duration::from_secs(30),
    );
    let ids = NoiseIds {
        local: 100,
        remote: 101,
        role: Role::Responder,
        born,
        seq0: 0,
    };
    noise.install_current(keys(), Some(ids), born);
    *lock_unpoisoned(&noise.noise_counters) = handshake_counters(10);
    let other = with_crypto("client-001", Some(noise));
    let client_conn = other.conns.list()[0].clone();
    source.conns = Arc::new(ConnSet::new(
        Arc::new(vec![site, client_conn]),
        Arc::default(),
    ));

    let netlink = crate::io::netlink::NetlinkStats::default();
    netlink.events.add(12);
    netlink.overruns.add(1);
    source.netlink = Some(Arc::new(netlink));
    let daemon_noise = NoiseDaemonStats {
        responder: std::sync::Mutex::new(handshake_counters(100)),
        refusals: Default::default(),
    };
    daemon_noise.refusals.wrong_connection.add(1);
    daemon_noise.refusals.lost_race.add(2);
    source.noise = Some(Arc::new(daemon_noise));
    let shared = crate::plane::shared_port::SharedStats::default();
    shared.unknown_session.add(1);
    shared.malformed.add(2);
    shared.bad_mac1.add(3);
    shared.initiations.add(4);
    source.shared = Some(Arc::new(shared));
    (source, now)
}

/// The remote command port's counters, each a different number.
fn cmd_port_stats() -> Stats {
    let stats = Stats::default();
    for (n, c) in [
        &stats.accepted,
        &stats.malformed,
        &stats.oversized,
        &stats.unknown_connection,
        &stats.no_key,
        &stats.auth,
        &stats.stale,
        &stats.replay,
        &stats.replay_full,
        &stats.forbidden,
        &stats.udp_too_large,
        &stats.unanswered,
        &stats.tcp_busy,
    ]
    .into_iter()
    .enumerate()
    {
        c.store(n as u64 + 1, Relaxed);
    }
    stats
}

#[test]
fn the_typed_document_is_the_old_json_byte_for_byte() {
    let quiet = one_connection("c");
    let (busy, later) = busy();
    for (source, now) in [(&quiet, Instant::now()), (&busy, later)] {
        for only in [None, Some("c"), Some("client-001"), Some("nobody")] {
            let mut typed = status_at(source, only, now);
            // `routing` is newer than the legacy document: compared
            // without it.
            assert!(typed.routing.take().is_some());
            let old = legacy::status_at(source, only, now);
            assert_eq!(serde_json::to_string(&typed).unwrap(), old.to_string());
            assert_eq!(
                serde_json::to_string_pretty(&typed).unwrap(),
                serde_json::to_string_pretty(&old).unwrap()
            );
        }
    }
    // The busy daemon shows what it was built to show.
    let doc = serde_json::to_value(status_at(&busy, None, later)).unwrap();
    let site = &doc["connections"][0];
    let paths = site["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 3, "the removed path is left out");
    assert!(paths[1]["local"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.5:"));
    assert_eq!(paths[1]["remote"], "127.0.0.9:4000");
    assert_eq!(paths[2]["remote"], Value::Null);
    assert_eq!(site["session"]["cipher"], "aes-256-gcm");
    assert_eq!(site["session"]["key_age_s"], Value::Null);
    assert_eq!(site["handover"]["last"]["gap_ms"], 84.4);
    assert_eq!(doc["connections"][1]["session"]["key_age_s"], 75.25);
    assert_eq!(doc["noise"]["refused"]["lost_race"], 2);
}

#[test]
fn the_command_port_counters_are_the_old_json() {
    let stats = cmd_port_stats();
    assert_eq!(
        serde_json::to_string(&stats.to_status()).unwrap(),
        legacy::cmd_port_json(&stats).to_string()
    );
}

/// Every `other` map of the document, with where it is.
fn others(status: &Status) -> Vec<(String, &Map<String, Value>)> {
    let mut all = vec![("status".to_string(), &status.other)];
    let mut put = |at: String, other: &'static str, map| all.push((format!("{at}.{other}"), map));
    if let Some(d) = &status.drops {
        put("status".into(), "drops", &d.other);
    }
    if let Some(Some(n)) = &status.netlink {
        put("status".into(), "netlink", &n.other);
    }
    if let Some(Some(s)) = &status.shared_port {
        put("status".into(), "shared_port", &s.other);
    }
    if let Some(Some(n)) = &status.noise {
        put("status".into(), "noise", &n.other);
        if let Some(r) = &n.refused {
            put("status.noise".into(), "refused", &r.other);
        }
    }
    if let Some(c) = &status.cmd_port {
        put("status".into(), "cmd_port", &c.other);
        if let Some(r) = &c.refused {
            put("status.cmd_port".into(), "refused", &r.other);
        }
    }
    for c in status.connections() {
        let at = format!("connection {:?}", c.name);
        put(at.clone(), "", &c.other);
        let parts = [
            c.drops.as_ref().map(|x| ("drops", &x.other)),
            c.equalize.as_ref().map(|x| ("equalize", &x.other)),
            c.handover.as_ref().map(|x| ("handover", &x.other)),
            c.handover
                .as_ref()
                .and_then(|h| h.last.as_ref()?.as_ref())
                .map(|x| ("handover.last", &x.other)),
            c.redundancy.as_ref().map(|x| ("redundancy", &x.other)),
            c.reorder.as_ref().map(|x| ("reorder", &x.other)),
            c.reorder
                .as_ref()
                .and_then(|r| r.hold.as_ref())
                .map(|x| ("reorder.hold", &x.other)),
            c.repair.as_ref().map(|x| ("repair", &x.other)),
            c.session.as_ref().map(|x| ("session", &x.other)),
            c.session
                .as_ref()
                .and_then(|s| s.noise.as_ref()?.as_ref())
                .map(|x| ("session.noise", &x.other)),
            c.session
                .as_ref()
                .and_then(|s| s.noise.as_ref()?.as_ref()?.refused.as_ref())
                .map(|x| ("session.noise.refused", &x.other)),
        ];
        for (part, map) in parts.into_iter().flatten() {
            put(at.clone(), part, map);
        }
        for p in c.paths() {
            put(at.clone(), "path", &p.other);
        }
    }
    all
}

#[test]
fn every_field_the_daemon_fills_is_a_field_of_the_api() {
    let (source, now) = busy();
    let mut status = status_at(&source, None, now);
    status.cmd_port = Some(cmd_port_stats().to_status());
    let maps = others(&status);
    // Every object of the document was looked at: the document and 7
    // daemon-wide objects; `site-b`'s 10 (a last handover, no handshake
    // counters) and 3 paths; `client-001`'s 11 (handshake counters, no
    // last handover) and 1 path.
    assert_eq!(maps.len(), 1 + 7 + (10 + 3) + (11 + 1), "{maps:?}");
    for (at, other) in maps {
        assert!(
            other.is_empty(),
            "{at}: {other:?} are not fields of mpt_api::Status; add them there"
        );
    }
    // And the fields come out in key order (a map would sort them).
    let typed = serde_json::to_string(&status).unwrap();
    assert_eq!(typed, serde_json::to_value(&status).unwrap().to_string());
}

#[test]
fn a_counter_the_api_does_not_know_is_caught() {
    let drops: ConnectionDrops = counters_as([], [("auth", 2), ("brand_new", 3)]);
    assert_eq!(drops.auth, Some(2));
    assert_eq!(drops.other.get("brand_new"), Some(&Value::from(3)));
}
