//! Prometheus metrics over HTTP (`[daemon] metrics = "ADDR:PORT"`).
//!
//! A deliberately tiny HTTP/1.0 responder: every request gets the current
//! metrics in the Prometheus text exposition format (version 0.0.4), then
//! the connection closes. Names follow Prometheus conventions: base units
//! (seconds, bytes), `_total` for counters, labels `conn`, `path`, `reason`.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::reorder::HoldHistogram;

use crate::ops::control_socket::StatusSource;

/// Serves until shutdown (the daemon wakes `accept` by connecting once).
pub fn serve(listener: TcpListener, source: StatusSource, shutdown: Arc<AtomicBool>) {
    for stream in listener.incoming() {
        if shutdown.load(Relaxed) {
            break;
        }
        let Ok(stream) = stream else { continue };
        answer(stream, &source);
    }
}

fn answer(mut stream: TcpStream, source: &StatusSource) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    // Read (and ignore) the request head; we serve the same page to all.
    let mut head = [0u8; 4096];
    let _ = stream.read(&mut head);
    let body = render(source);
    let response = format!(
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes());
}

/// Escapes a label value.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The metrics page.
pub fn render(source: &StatusSource) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    };
    let mut up = Vec::new();
    let mut state = Vec::new();
    let mut rtt = Vec::new();
    let mut loss = Vec::new();
    let mut weight = Vec::new();
    let mut changes = Vec::new();
    let (mut txp, mut rxp, mut txb, mut rxb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut drops = Vec::new();
    let mut sessions = Vec::new();
    let mut rekeys = Vec::new();
    let mut noise_events = Vec::new();
    let (mut established, mut key_age) = (Vec::new(), Vec::new());
    let (mut rate, mut confirmed, mut owd, mut queue) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut lossy, mut share) = (Vec::new(), Vec::new());
    let (mut held_now, mut longest, mut holds) = (Vec::new(), Vec::new(), Vec::new());
    let (mut repairs, mut copies, mut copy_bytes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut handovers, mut handover_gap) = (Vec::new(), Vec::new());
    let (mut eq_hold, mut eq_held, mut eq_held_s) = (Vec::new(), Vec::new(), Vec::new());
    let now = Instant::now();
    let list = source.conns.list();
    for c in list.iter().filter(|c| !c.removed.load(Relaxed)) {
        for p in c.paths().iter().filter(|p| !p.is_removed()) {
            let v = p.view();
            let l = format!("conn=\"{}\",path=\"{}\"", esc(&c.name), esc(&p.name));
            up.push((
                l.clone(),
                f64::from(u8::from(v.state == "up" || v.state == "backup")),
            ));
            for s in ["up", "down", "backup", "probing", "suspect"] {
                state.push((
                    format!("{l},state=\"{s}\""),
                    f64::from(u8::from(v.state == s)),
                ));
            }
            if let Some(ms) = v.rtt_ms {
                rtt.push((l.clone(), ms / 1e3));
            }
            if let Some(pct) = v.loss_pct {
                loss.push((l.clone(), pct / 100.0));
            }
            if let Some(bps) = v.rate_bps {
                rate.push((l.clone(), bps as f64));
            }
            confirmed.push((l.clone(), f64::from(u8::from(v.rate_confirmed))));
            if let Some(ms) = v.owd_ms {
                owd.push((l.clone(), ms / 1e3));
            }
            if let Some(ms) = v.queue_ms {
                queue.push((l.clone(), ms / 1e3));
            }
            lossy.push((l.clone(), f64::from(u8::from(v.lossy))));
            share.push((l.clone(), v.share));
            weight.push((l.clone(), f64::from(p.weight_out.load(Relaxed))));
            changes.push((l.clone(), p.state_changes.get() as f64));
            txp.push((l.clone(), p.tx_packets.get() as f64));
            rxp.push((l.clone(), p.rx_packets.get() as f64));
            txb.push((l.clone(), p.tx_bytes.get() as f64));
            rxb.push((l, p.rx_bytes.get() as f64));
        }
        let conn = format!("conn=\"{}\"", esc(&c.name));
        let (stats, held, wait) = {
            let g = c.lock_reseq();
            (g.stats(), g.held(), g.longest_hold(now))
        };
        held_now.push((conn.clone(), held as f64));
        longest.push((conn.clone(), wait.unwrap_or(Duration::ZERO).as_secs_f64()));
        holds.push((conn, stats.hold));
        for (reason, n) in c.drops.each() {
            drops.push((
                format!("conn=\"{}\",reason=\"{reason}\"", esc(&c.name)),
                n as f64,
            ));
        }
        for (event, n) in c.repairs.each() {
            repairs.push((
                format!("conn=\"{}\",event=\"{event}\"", esc(&c.name)),
                n as f64,
            ));
        }
        let k = &c.copies;
        for (event, n) in [
            ("sent", k.sent.get()),
            ("first", k.first.get()),
            ("duplicates", k.duplicates.get()),
        ] {
            copies.push((
                format!("conn=\"{}\",event=\"{event}\"", esc(&c.name)),
                n as f64,
            ));
        }
        copy_bytes.push((
            format!("conn=\"{}\"", esc(&c.name)),
            k.sent_bytes.get() as f64,
        ));
        let label = format!("conn=\"{}\"", esc(&c.name));
        eq_hold.push((
            label.clone(),
            c.equalize_spread_us
                .load(std::sync::atomic::Ordering::Relaxed) as f64
                / 1e6,
        ));
        eq_held.push((label.clone(), c.equalized.held.get() as f64));
        eq_held_s.push((label, c.equalized.held_us.get() as f64 / 1e6));
        handovers.push((
            format!("conn=\"{}\"", esc(&c.name)),
            c.handovers.count.get() as f64,
        ));
        if let Some(h) = c.handovers.last() {
            handover_gap.push((
                format!(
                    "conn=\"{}\",from=\"{}\",to=\"{}\"",
                    esc(&c.name),
                    esc(&h.from),
                    esc(&h.to)
                ),
                h.gap.as_secs_f64(),
            ));
        }
        if let Some(k) = &c.crypto {
            sessions.push((
                format!("conn=\"{}\"", esc(&c.name)),
                k.handshakes.get() as f64,
            ));
            rekeys.push((format!("conn=\"{}\"", esc(&c.name)), k.rekeys.get() as f64));
            established.push((
                format!("conn=\"{}\"", esc(&c.name)),
                f64::from(u8::from(k.keys().is_some())),
            ));
            if let Some(ids) = k.current_ids() {
                key_age.push((
                    format!("conn=\"{}\"", esc(&c.name)),
                    now.saturating_duration_since(ids.born).as_secs_f64(),
                ));
            }
            if k.noise {
                let n = *k.noise_counters.lock().unwrap_or_else(|p| p.into_inner());
                noise_events.extend(noise_samples(&format!("conn=\"{}\"", esc(&c.name)), &n));
            }
        }
    }
    family(
        "mpt_path_up",
        "gauge",
        "1 when the path carries (or may carry, as backup) traffic.",
        up,
    );
    family(
        "mpt_path_state",
        "gauge",
        "1 for the path's current state.",
        state,
    );
    family(
        "mpt_path_rtt_seconds",
        "gauge",
        "Smoothed round-trip time from probe replies.",
        rtt,
    );
    family(
        "mpt_path_loss_ratio",
        "gauge",
        "Estimated loss of the direction we send in (0..1).",
        loss,
    );
    family(
        "mpt_path_rate_bits_per_second",
        "gauge",
        "Estimated capacity of the direction we send in (adaptive scheduler's model).",
        rate,
    );
    family(
        "mpt_path_rate_confirmed",
        "gauge",
        "1 when the rate was measured with a standing queue, 0 when it is a lower bound.",
        confirmed,
    );
    family(
        "mpt_path_relative_owd_seconds",
        "gauge",
        "One-way delay above the connection's fastest path.",
        owd,
    );
    family(
        "mpt_path_queue_delay_seconds",
        "gauge",
        "Queueing delay the peer last measured on the path.",
        queue,
    );
    family(
        "mpt_path_lossy",
        "gauge",
        "1 when the adaptive scheduler counts the path as lossy.",
        lossy,
    );
    family(
        "mpt_path_share_ratio",
        "gauge",
        "Recent share of the connection's sent data bytes (0..1, smoothed).",
        share,
    );
    family(
        "mpt_path_weight_out",
        "gauge",
        "Configured outgoing share.",
        weight,
    );
    family(
        "mpt_path_state_changes_total",
        "counter",
        "Changes of the path's reported state.",
        changes,
    );
    family(
        "mpt_path_tx_packets_total",
        "counter",
        "Datagrams sent on the path.",
        txp,
    );
    family(
        "mpt_path_rx_packets_total",
        "counter",
        "Datagrams received and accepted on the path.",
        rxp,
    );
    family(
        "mpt_path_tx_bytes_total",
        "counter",
        "UDP payload bytes sent on the path.",
        txb,
    );
    family(
        "mpt_path_rx_bytes_total",
        "counter",
        "UDP payload bytes received on the path.",
        rxb,
    );
    // What no connection owns (conn=""): packets the tun gave that route
    // to no connection, and tun read errors.
    for (reason, n) in source.tx.each() {
        drops.push((format!("conn=\"\",reason=\"{reason}\""), n as f64));
    }
    family(
        "mpt_drops_total",
        "counter",
        "Datagrams or packets dropped, by connection and reason (conn=\"\": before any connection is known).",
        drops,
    );
    family(
        "mpt_handshakes_total",
        "counter",
        "Completed key exchanges.",
        sessions,
    );
    family(
        "mpt_rekeys_total",
        "counter",
        "Session keys that replaced earlier ones.",
        rekeys,
    );
    family(
        "mpt_session_established",
        "gauge",
        "1 while the connection has session keys (encrypted connections only).",
        established,
    );
    family(
        "mpt_session_key_age_seconds",
        "gauge",
        "Time since the current session key was made (the last handshake or rekey).",
        key_age,
    );
    if let Some(n) = &source.noise {
        let d = *n.responder.lock().unwrap_or_else(|p| p.into_inner());
        noise_events.extend(noise_samples("conn=\"\"", &d));
        for (reason, v) in [
            ("wrong_connection", n.refusals.wrong_connection.get()),
            ("lost_race", n.refusals.lost_race.get()),
            ("entropy", n.refusals.entropy.get()),
        ] {
            noise_events.push((format!("conn=\"\",event=\"refused_{reason}\""), v as f64));
        }
    }
    family(
        "mpt_noise_handshake_total",
        "counter",
        "Public-key handshake events by connection (conn=\"\": the daemon's responder, before the peer is known): initiations, responses, cookies, and refusals by reason (refused_*).",
        noise_events,
    );
    family(
        "mpt_reorder_held_packets",
        "gauge",
        "Packets the resequencer holds now.",
        held_now,
    );
    family(
        "mpt_reorder_longest_hold_seconds",
        "gauge",
        "How long the packet held longest has waited so far (0 when none is held).",
        longest,
    );
    family(
        "mpt_repair_total",
        "counter",
        "Loss repair: requests sent (requested, requested_datagrams), holes left to TCP (congestion_holes), not asked for (unrequested) or filled within the reorder window (reordered_holes), datagrams that came after their repair was asked for (needless), copies received and duplicates; the peer's requests answered (peer_requests, sent) or not (missed).",
        repairs,
    );
    family(
        "mpt_redundancy_copies_total",
        "counter",
        "Redundancy copies of real-time packets: sent, arrived before their original (first), second arrivals dropped (duplicates).",
        copies,
    );
    family(
        "mpt_redundancy_bytes_total",
        "counter",
        "Bytes sent as redundancy copies (UDP payload).",
        copy_bytes,
    );
    family(
        "mpt_equalize_hold_seconds",
        "gauge",
        "How long delay equalisation holds data from the fastest path now: the slowest counted path's delay above the fastest's (0: no hold).",
        eq_hold,
    );
    family(
        "mpt_equalize_held_packets_total",
        "counter",
        "Data packets delay equalisation held before the resequencer.",
        eq_held,
    );
    family(
        "mpt_equalize_held_seconds_total",
        "counter",
        "The holds of those packets, summed.",
        eq_held_s,
    );
    family(
        "mpt_handovers_total",
        "counter",
        "Times our traffic moved off a path that left service (suspect, down or link gone).",
        handovers,
    );
    family(
        "mpt_handover_gap_seconds",
        "gauge",
        "The latest handover's gap: from the last packet heard on the old path to the first data sent on the new one.",
        handover_gap,
    );
    hold_histogram(&mut out, &holds);
    out
}

/// `mpt_reorder_hold_seconds`: how long released packets were held, as a
/// Prometheus histogram (cumulative `_bucket`s at the [`HoldHistogram`]
/// limits, 1 ms to 1.024 s, then `+Inf`).
fn hold_histogram(out: &mut String, holds: &[(String, HoldHistogram)]) {
    let name = "mpt_reorder_hold_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Time packets waited in the resequencer before delivery \
         (packets delivered in order on arrival are not counted)."
    );
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (labels, h) in holds {
        let mut cumulative = 0u64;
        for (k, &c) in h.counts.iter().enumerate() {
            cumulative = cumulative.saturating_add(c);
            if let Some(limit) = HoldHistogram::bucket_limit(k) {
                let le = limit.as_secs_f64();
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
            }
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_us as f64 / 1e6);
        let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
    }
}

/// Samples of the public-key handshake counters, labelled `labels` and
/// the event.
fn noise_samples(labels: &str, c: &mpt_proto::noise::HandshakeCounters) -> Vec<(String, f64)> {
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
        ("refused_unknown_index", r.unknown_index),
        ("refused_bad_cookie_reply", r.bad_cookie_reply),
    ]
    .into_iter()
    .map(|(event, v)| (format!("{labels},event=\"{event}\""), v as f64))
    .collect()
}

#[cfg(test)]
mod tests;
