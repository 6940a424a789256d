//! The session families of encrypted connections: key exchanges, rekeys,
//! whether keys are established and how old they are, and the public-key
//! handshake's events (per connection, and conn="" for the daemon's
//! responder before it knows the peer).

use std::fmt;
use std::time::Instant;

use mpt_proto::noise::HandshakeCounters;
use prometheus_client::encoding::DescriptorEncoder;

use crate::control::noise::NoiseDaemonStats;
use crate::ops::metrics::families::{counters, gauges, Labels};
use crate::plane::{ConnCrypto, ConnShared};
use crate::sync::lock_unpoisoned;

/// The session families of the connections `live`; `noise` is the
/// daemon-wide handshake state (`None`: no connection uses it).
pub fn encode(
    encoder: &mut DescriptorEncoder,
    live: &[&ConnShared],
    noise: Option<&NoiseDaemonStats>,
    now: Instant,
) -> fmt::Result {
    let keyed: Vec<(&str, &ConnCrypto)> = live
        .iter()
        .filter_map(|c| c.crypto.as_ref().map(|k| (c.name.as_str(), k)))
        .collect();
    keys(encoder, &keyed, now)?;
    handshake_events(encoder, &keyed, noise)
}

/// Key exchanges, rekeys, established keys and their age.
fn keys(
    encoder: &mut DescriptorEncoder,
    keyed: &[(&str, &ConnCrypto)],
    now: Instant,
) -> fmt::Result {
    counters(
        encoder,
        "mpt_handshakes_total",
        "Completed key exchanges.",
        keyed
            .iter()
            .map(|(conn, k)| (Labels::conn(conn), k.handshakes.get())),
    )?;
    counters(
        encoder,
        "mpt_rekeys_total",
        "Session keys that replaced earlier ones.",
        keyed
            .iter()
            .map(|(conn, k)| (Labels::conn(conn), k.rekeys.get())),
    )?;
    gauges(
        encoder,
        "mpt_session_established",
        "1 while the connection has session keys (encrypted connections only).",
        keyed
            .iter()
            .map(|(conn, k)| (Labels::conn(conn), i64::from(k.keys().is_some()))),
    )?;
    gauges(
        encoder,
        "mpt_session_key_age_seconds",
        "Time since the current session key was made (the last handshake or rekey).",
        keyed.iter().filter_map(|(conn, k)| {
            let ids = k.current_ids()?;
            let age = now.saturating_duration_since(ids.born).as_secs_f64();
            Some((Labels::conn(conn), age))
        }),
    )
}

/// `mpt_noise_handshake_total`.
fn handshake_events(
    encoder: &mut DescriptorEncoder,
    keyed: &[(&str, &ConnCrypto)],
    noise: Option<&NoiseDaemonStats>,
) -> fmt::Result {
    let per_conn: Vec<(&str, HandshakeCounters)> = keyed
        .iter()
        .filter(|(_, k)| k.noise)
        .map(|(conn, k)| (*conn, *lock_unpoisoned(&k.noise_counters)))
        .collect();
    let mut samples: Vec<(Labels, u64)> = per_conn
        .iter()
        .flat_map(|(conn, c)| {
            events(c).map(move |(event, n)| (Labels::conn(conn).with("event", event), n))
        })
        .collect();
    if let Some(n) = noise {
        let responder = *lock_unpoisoned(&n.responder);
        let refusals = [
            (
                "refused_wrong_connection",
                n.refusals.wrong_connection.get(),
            ),
            ("refused_lost_race", n.refusals.lost_race.get()),
            ("refused_entropy", n.refusals.entropy.get()),
        ];
        samples.extend(
            events(&responder)
                .into_iter()
                .chain(refusals)
                .map(|(event, n)| (Labels::conn("").with("event", event), n)),
        );
    }
    counters(
        encoder,
        "mpt_noise_handshake_total",
        "Public-key handshake events by connection (conn=\"\": the daemon's responder, before the peer is known): initiations, responses, cookies, and refusals by reason (refused_*).",
        samples,
    )
}

/// The events of the public-key handshake's counters, by label value.
fn events(c: &HandshakeCounters) -> [(&'static str, u64); 18] {
    let r = &c.refused;
    [
        ("initiations_sent", c.initiations_sent),
        ("initiations_processed", c.initiations_processed),
        ("responses_sent", c.responses_sent),
        ("responses_received", c.responses_received),
        ("cookies_sent", c.cookies_sent),
        ("cookies_received", c.cookies_received),
        ("expired", c.expired),
        ("refused_malformed", r.malformed),
        ("refused_mac1", r.mac1),
        ("refused_stale_mac2", r.stale_mac2),
        ("refused_decrypt", r.decrypt),
        ("refused_unknown_peer", r.unknown_peer),
        ("refused_replay", r.replay),
        ("refused_rate_limited", r.rate_limited),
        ("refused_source_limited", r.source_limited),
        ("refused_overloaded", r.overloaded),
        ("refused_unknown_index", r.unknown_index),
        ("refused_bad_cookie_reply", r.bad_cookie_reply),
    ]
}
