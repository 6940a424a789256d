//! Encryption in the status document: a connection's keys and handshakes
//! (`session`), and the public-key handshake's counters, which the
//! daemon-wide responder shows too.

use std::time::Instant;

use mpt_api::status::{HandshakeRefusals, HandshakeStats, Session};
use mpt_proto::noise::HandshakeCounters;

use crate::plane::ConnShared;
use crate::sync::lock_unpoisoned;

/// The keys and handshakes of connection `c` as of `now`.
pub(super) fn session(c: &ConnShared, now: Instant) -> Session {
    let crypto = c.crypto.as_ref();
    Session {
        cipher: Some(crypto.map(|k| k.psk.cipher().name().to_string())),
        encrypted: Some(crypto.is_some()),
        established: Some(crypto.is_some_and(|k| k.keys().is_some())),
        handshake: Some(
            match crypto {
                None => "none",
                Some(k) if k.noise => "noise_ik",
                Some(_) => "psk",
            }
            .to_string(),
        ),
        handshakes: Some(crypto.map_or(0, |k| k.handshakes.get())),
        key_age_s: Some(
            crypto
                .and_then(|k| k.current_ids())
                .map(|i| now.saturating_duration_since(i.born).as_secs_f64()),
        ),
        noise: Some(
            crypto
                .filter(|k| k.noise)
                .map(|k| handshake_stats(&lock_unpoisoned(&k.noise_counters))),
        ),
        rekeys: Some(crypto.map_or(0, |k| k.rekeys.get())),
        other: Default::default(),
    }
}

/// The public-key handshake's counters (a connection's, or the
/// responder's before the daemon adds its own refusals).
pub(super) fn handshake_stats(c: &HandshakeCounters) -> HandshakeStats {
    let r = &c.refused;
    HandshakeStats {
        completed: Some(c.completed),
        cookies_received: Some(c.cookies_received),
        cookies_sent: Some(c.cookies_sent),
        expired: Some(c.expired),
        initiations_processed: Some(c.initiations_processed),
        initiations_sent: Some(c.initiations_sent),
        refused: Some(HandshakeRefusals {
            bad_cookie_reply: Some(r.bad_cookie_reply),
            decrypt: Some(r.decrypt),
            mac1: Some(r.mac1),
            malformed: Some(r.malformed),
            overloaded: Some(r.overloaded),
            rate_limited: Some(r.rate_limited),
            replay: Some(r.replay),
            source_limited: Some(r.source_limited),
            stale_mac2: Some(r.stale_mac2),
            unknown_index: Some(r.unknown_index),
            unknown_peer: Some(r.unknown_peer),
            ..HandshakeRefusals::default()
        }),
        rekeys: Some(c.rekeys),
        responses_received: Some(c.responses_received),
        responses_sent: Some(c.responses_sent),
        other: Default::default(),
    }
}
