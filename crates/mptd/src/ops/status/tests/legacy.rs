//! The status document as the daemon built it before the API's types:
//! `serde_json::json!` maps, kept here unchanged (but for `now` passed
//! in and the lock helper) so that the tests can hold the typed builder to
//! the old builder's bytes for any state.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use mpt_proto::reorder::{HoldHistogram, HOLD_BUCKETS};
use serde_json::{json, Value};

use crate::ops::cmd_port::Stats;
use crate::ops::source::StatusSource;

/// Handshake counters as JSON (the `noise` objects of the status).
fn handshake_json(c: &mpt_proto::noise::HandshakeCounters) -> Value {
    let r = &c.refused;
    json!({
        "initiations_sent": c.initiations_sent,
        "initiations_processed": c.initiations_processed,
        "responses_sent": c.responses_sent,
        "responses_received": c.responses_received,
        "completed": c.completed,
        "rekeys": c.rekeys,
        "expired": c.expired,
        "cookies_sent": c.cookies_sent,
        "cookies_received": c.cookies_received,
        "refused": {
            "malformed": r.malformed,
            "mac1": r.mac1,
            "stale_mac2": r.stale_mac2,
            "decrypt": r.decrypt,
            "unknown_peer": r.unknown_peer,
            "replay": r.replay,
            "rate_limited": r.rate_limited,
            "source_limited": r.source_limited,
            "overloaded": r.overloaded,
            "unknown_index": r.unknown_index,
            "bad_cookie_reply": r.bad_cookie_reply,
        },
    })
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The resequencer's hold histogram: `counts[k]` packets were held less
/// than `le_ms[k]` (and at least the previous limit); the last count has no
/// limit (`null`). Times in ms, the sum and maximum to the microsecond.
fn hold_json(h: &HoldHistogram) -> Value {
    let le_ms: Vec<Option<u64>> = (0..HOLD_BUCKETS)
        .map(|k| HoldHistogram::bucket_limit(k).map(|d| d.as_millis() as u64))
        .collect();
    json!({
        "le_ms": le_ms,
        "counts": h.counts,
        "sum_ms": h.sum_us as f64 / 1e3,
        "max_ms": h.max_us as f64 / 1e3,
    })
}

/// `object` with a counter group's counters added under their names.
fn with_counters<const N: usize>(mut object: Value, counters: [(&str, u64); N]) -> Value {
    for (name, value) in counters {
        object[name] = json!(value);
    }
    object
}

/// The status document with connection `only` alone (`None`: all), as
/// of `now`.
pub(super) fn status_at(source: &StatusSource, only: Option<&str>, now: Instant) -> Value {
    let conns: Vec<Value> = source
        .conns
        .list()
        .iter()
        .filter(|c| !c.removed.load(Relaxed))
        .filter(|c| only.is_none_or(|n| c.name == n))
        .map(|c| {
            let paths: Vec<Value> = c
                .paths()
                .iter()
                .filter(|p| !p.is_removed())
                .map(|p| {
                    let v = p.view();
                    // A learnt path of a shared port: the address its
                    // client sends to, rather than the wildcard bound.
                    let local = p
                        .via()
                        .map_or(p.local, |s| std::net::SocketAddr::new(s.addr, p.local.port()));
                    json!({
                        "name": p.name,
                        "id": p.id,
                        "state": v.state,
                        "local": local.to_string(),
                        "remote": p.remote().map(|(a, _)| a.to_string()),
                        "weight_out": p.weight_out.load(Relaxed),
                        "weight_in": p.weight_in.load(Relaxed),
                        "window": p.window.load(Relaxed),
                        "peer_weight_in": v.peer_weight_in,
                        "rtt_ms": v.rtt_ms,
                        "rtt_min_ms": v.rtt_min_ms,
                        "loss_pct": v.loss_pct,
                        "rate_bps": v.rate_bps,
                        "rate_confirmed": v.rate_confirmed,
                        "owd_ms": v.owd_ms,
                        "queue_ms": v.queue_ms,
                        "rx_owd_ms": v.rx_owd_ms,
                        "lossy": v.lossy,
                        "share": (v.share * 1000.0).round() / 1000.0,
                        "rx_share": (v.rx_share * 1000.0).round() / 1000.0,
                        "tx_packets": p.tx_packets.get(),
                        "rx_packets": p.rx_packets.get(),
                        "tx_bytes": p.tx_bytes.get(),
                        "rx_bytes": p.rx_bytes.get(),
                        "tx_data_packets": p.tx_data_packets.get(),
                        "rx_data_packets": p.rx_data_packets.get(),
                        "tx_data_bytes": p.tx_data_bytes.get(),
                        "rx_data_bytes": p.rx_data_bytes.get(),
                        "state_changes": p.state_changes.get(),
                        "last_rx_ms_ago": v.last_rx.map(|t| ms(now.saturating_duration_since(t))),
                        "last_change_ms_ago": ms(now.saturating_duration_since(v.last_change)),
                    })
                })
                .collect();
            let (r, held_now, longest, grace) = {
                let g = c.lock_reseq();
                (g.stats(), g.held(), g.longest_hold(now), g.reorder_grace())
            };
            json!({
                "name": c.name,
                "id": c.conn_id,
                "reorder": {
                    "in_order": r.in_order,
                    "held": r.held,
                    "late": r.late,
                    "duplicates": r.duplicates,
                    "gaps_skipped": r.gaps_skipped,
                    "resets": r.resets,
                    "held_now": held_now,
                    "longest_hold_ms": longest.map_or(0.0, ms),
                    "flow_bypass": r.flow_bypass,
                    "grace_ms": ms(grace),
                    "timeout_ms": c.timing.load().reorder_timeout_us() as f64 / 1e3,
                    "spread_ms": match c.timing.load().rx_spread_us() {
                        None => Value::Null,
                        Some(us) => json!(us as f64 / 1e3),
                    },
                    "hold": hold_json(&r.hold),
                },
                "equalize": {
                    "hold_ms": c.timing.load().equalize_spread_us() as f64 / 1e3,
                    "bulk_hold_ms": c.timing.load().equalize_bulk_spread_us() as f64 / 1e3,
                    "held": c.equalized.held.get(),
                    "held_ms": c.equalized.held_us.get() as f64 / 1e3,
                },
                "redundancy": {
                    "mode": match c.redundancy() {
                        mpt_proto::sched::Redundancy::Auto => "auto",
                        mpt_proto::sched::Redundancy::Off => "off",
                        mpt_proto::sched::Redundancy::All => "all",
                    },
                    "copies_sent": c.copies.sent.get(),
                    "copy_bytes": c.copies.sent_bytes.get(),
                    "copies_first": c.copies.first.get(),
                    "duplicates": c.copies.duplicates.get(),
                },
                "handover": {
                    "count": c.handovers.count.get(),
                    "last": c.handovers.last().map(|h| json!({
                        "from": h.from,
                        "to": h.to,
                        "gap_ms": ms(h.gap),
                        "ms_ago": ms(now.saturating_duration_since(h.at)),
                    })),
                },
                "repair": with_counters(json!({"enabled": c.repair.load(Relaxed)}), c.repairs.each()),
                "drops": with_counters(json!({}), c.drops.each()),
                "tcp": with_counters(json!({}), c.tcp.each()),
                "session": {
                    "encrypted": c.crypto.is_some(),
                    "handshake": match &c.crypto {
                        None => "none",
                        Some(k) if k.noise => "noise_ik",
                        Some(_) => "psk",
                    },
                    "cipher": c.crypto.as_ref().map(|k| k.psk.cipher().name()),
                    "established": c.crypto.as_ref().is_some_and(|k| k.keys().is_some()),
                    "handshakes": c.crypto.as_ref().map_or(0, |k| k.handshakes.get()),
                    "rekeys": c.crypto.as_ref().map_or(0, |k| k.rekeys.get()),
                    "key_age_s": c.crypto.as_ref().and_then(|k| k.current_ids()).map(|i| now.saturating_duration_since(i.born).as_secs_f64()),
                    "noise": c.crypto.as_ref().filter(|k| k.noise).map(|k| {
                        handshake_json(&crate::sync::lock_unpoisoned(&k.noise_counters))
                    }),
                },
                "paths": paths,
            })
        })
        .collect();
    json!({
        "tunnel": source.tun_name,
        "uptime_s": now.saturating_duration_since(source.started).as_secs(),
        "drops": with_counters(json!({}), source.tx.each()),
        "netlink": source.netlink.as_ref().map(|n| json!({
            "events": n.events.get(),
            "malformed": n.malformed.get(),
            "overruns": n.overruns.get(),
            "errors": n.errors.get(),
        })),
        "noise": source.noise.as_ref().map(|n| {
            let mut v = handshake_json(&crate::sync::lock_unpoisoned(&n.responder));
            v["refused"]["wrong_connection"] = json!(n.refusals.wrong_connection.get());
            v["refused"]["lost_race"] = json!(n.refusals.lost_race.get());
            v["refused"]["entropy"] = json!(n.refusals.entropy.get());
            v
        }),
        "shared_port": source.shared.as_ref().map(|s| json!({
            "unknown_session": s.unknown_session.get(),
            "malformed": s.malformed.get(),
            "bad_mac1": s.bad_mac1.get(),
            "initiations": s.initiations.get(),
            "queue_full": s.queue_full.get(),
            "lane_drops": s.lane_drops.get(),
            "tun_write_errors": s.tun_write.get(),
        })),
        "connections": conns,
    })
}

/// The remote command port's counters as `Stats::to_json` wrote them.
pub(super) fn cmd_port_json(stats: &Stats) -> Value {
    let g = |c: &AtomicU64| c.load(Relaxed);
    json!({
        "accepted": g(&stats.accepted),
        "refused": {
            "malformed": g(&stats.malformed),
            "oversized": g(&stats.oversized),
            "unknown_connection": g(&stats.unknown_connection),
            "no_key": g(&stats.no_key),
            "auth": g(&stats.auth),
            "stale": g(&stats.stale),
            "replay": g(&stats.replay),
            "replay_full": g(&stats.replay_full),
            "forbidden": g(&stats.forbidden),
        },
        "udp_too_large": g(&stats.udp_too_large),
        "unanswered": g(&stats.unanswered),
        "tcp_busy": g(&stats.tcp_busy),
    })
}
