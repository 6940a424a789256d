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
use std::time::Duration;

use crate::control::StatusSource;

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
    for c in source.conns.iter() {
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
            weight.push((l.clone(), f64::from(p.weight_out.load(Relaxed))));
            changes.push((l.clone(), p.state_changes.get() as f64));
            txp.push((l.clone(), p.tx_packets.get() as f64));
            rxp.push((l.clone(), p.rx_packets.get() as f64));
            txb.push((l.clone(), p.tx_bytes.get() as f64));
            rxb.push((l, p.rx_bytes.get() as f64));
        }
        let d = &c.drops;
        for (reason, n) in [
            ("malformed", d.malformed.get()),
            ("too_short", d.too_short.get()),
            ("bad_version", d.bad_version.get()),
            ("unknown_connection", d.unknown_connection.get()),
            ("auth", d.auth.get()),
            ("replay", d.replay.get()),
            ("unsupported", d.unsupported.get()),
            ("no_path", d.no_path.get()),
            ("no_remote", d.no_remote.get()),
            ("no_session", d.no_session.get()),
            ("send_error", d.send_error.get()),
            ("control_queue_full", d.control_queue_full.get()),
            ("handshake_rate_limited", d.handshake_rate_limited.get()),
            ("tun_write", d.tun_write.get()),
            ("wrong_source", d.wrong_source.get()),
            ("unauthenticated_control", d.unauthenticated_control.get()),
            ("inner_source", d.inner_source.get()),
            ("handshake_reflected", d.handshake_reflected.get()),
            ("handshake_challenged", d.handshake_challenged.get()),
        ] {
            drops.push((
                format!("conn=\"{}\",reason=\"{reason}\"", esc(&c.name)),
                n as f64,
            ));
        }
        if let Some(k) = &c.crypto {
            sessions.push((
                format!("conn=\"{}\"", esc(&c.name)),
                k.handshakes.get() as f64,
            ));
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
    family(
        "mpt_drops_total",
        "counter",
        "Datagrams or packets dropped, by reason.",
        drops,
    );
    family(
        "mpt_handshakes_total",
        "counter",
        "Completed key exchanges.",
        sessions,
    );
    out
}
