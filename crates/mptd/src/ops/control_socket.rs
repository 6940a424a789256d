//! The control socket: a unix socket speaking JSON lines.
//!
//! Each request is one JSON object on one line, each response one line:
//! `{"version":1,"request":"status"}` →
//! `{"version":1,"ok":true,"status":{…}}`; failures answer
//! `{"version":1,"ok":false,"error":"…"}`. A malformed, unknown or
//! oversized request gets an error and never touches the data plane. The
//! socket is created with mode 0600: it controls the tunnel.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::net::IpAddr;

use serde_json::{json, Value};

use crate::control::command::{Command, Request};
use crate::plane::TxStats;
use mpt_proto::path::AdminStatus;
use mpt_proto::reorder::{HoldHistogram, HOLD_BUCKETS};
use std::sync::mpsc::{sync_channel, SyncSender};

/// Version of the request/response protocol.
pub use mpt_api::CONTROL_VERSION;

/// Longest request line accepted.
const MAX_REQUEST: usize = 64 * 1024;

/// What the status request reads.
#[derive(Clone)]
pub struct StatusSource {
    /// Connections (those removed by a reload are not shown).
    pub conns: Arc<crate::plane::ConnSet>,
    /// Transmit-stage counters.
    pub tx: Arc<TxStats>,
    /// Tun interface name.
    pub tun_name: String,
    /// When the daemon started.
    pub started: Instant,
    /// Where runtime changes go (the control loop).
    pub commands: SyncSender<Request>,
    /// The netlink listener's counters (`None`: not listening).
    pub netlink: Option<Arc<crate::io::netlink::NetlinkStats>>,
    /// The public-key handshake's daemon-wide counters (`None`: no
    /// connection uses it).
    pub noise: Option<Arc<crate::control::noise::NoiseDaemonStats>>,
    /// What the shared ports refused before knowing the connection
    /// (`None`: no client connection).
    pub shared: Option<Arc<crate::plane::shared_port::SharedStats>>,
}

/// Handshake counters as JSON (the `noise` objects of the status).
pub fn handshake_json(c: &mpt_proto::noise::HandshakeCounters) -> Value {
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
            "unknown_index": r.unknown_index,
            "bad_cookie_reply": r.bad_cookie_reply,
        },
    })
}

/// Binds the socket (mode 0600), replacing a stale socket file.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is in use by a running daemon", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves requests until shutdown. The daemon wakes a blocked `accept` at
/// shutdown by connecting once.
pub fn serve(
    listener: UnixListener,
    source: StatusSource,
    shutdown: Arc<AtomicBool>,
    path: PathBuf,
) {
    for stream in listener.incoming() {
        if shutdown.load(Relaxed) {
            break;
        }
        let Ok(stream) = stream else { continue };
        // One client at a time; a slow client is cut off by the timeout.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
        handle_client(stream, &source);
    }
    let _ = std::fs::remove_file(path);
}

fn handle_client(stream: UnixStream, source: &StatusSource) {
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut out = std::io::BufWriter::new(write_half);
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_REQUEST as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_REQUEST {
            let _ = writeln!(out, "{}", error("request longer than 64 KiB"));
            let _ = out.flush();
            return;
        }
        let response = respond(&line, source);
        if writeln!(out, "{response}")
            .and_then(|_| out.flush())
            .is_err()
        {
            return;
        }
    }
}

fn error(msg: &str) -> Value {
    json!({"version": CONTROL_VERSION, "ok": false, "error": msg})
}

/// Answers one request line.
pub fn respond(line: &[u8], source: &StatusSource) -> Value {
    let req: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return error(&format!("request is not valid JSON: {e}")),
    };
    match req.get("version").and_then(Value::as_u64) {
        Some(CONTROL_VERSION) => {}
        Some(v) => {
            return error(&format!(
                "unsupported version {v}, this daemon speaks {CONTROL_VERSION}"
            ))
        }
        None => return error("missing \"version\""),
    }
    let text = |key: &str| req.get(key).and_then(Value::as_str).map(str::to_string);
    let conn_path = || match (text("conn"), text("path")) {
        (Some(c), Some(p)) => Ok((c, p)),
        _ => Err(error("needs \"conn\" and \"path\"")),
    };
    let command = match req.get("request").and_then(Value::as_str) {
        Some("status") => {
            // `"conn"`: that connection only (absent or null: all).
            let only = match req.get("conn") {
                None | Some(Value::Null) => None,
                Some(Value::String(c)) => Some(c.as_str()),
                Some(_) => return error("\"conn\" must be a connection name"),
            };
            if let Some(name) = only {
                let conns = source.conns.list();
                let live = || conns.iter().filter(|c| !c.removed.load(Relaxed));
                if !live().any(|c| c.name == name) {
                    let names: Vec<&str> = live().map(|c| c.name.as_str()).collect();
                    return error(&unknown_connection(name, &names));
                }
            }
            return json!({"version": CONTROL_VERSION, "ok": true, "status": status_of(source, only)});
        }
        Some("path_state") => {
            let (conn, path) = match conn_path() {
                Ok(cp) => cp,
                Err(e) => return e,
            };
            let state = match text("state").as_deref() {
                Some("up") => AdminStatus::Up,
                Some("down") => AdminStatus::Down,
                Some("backup") => AdminStatus::Backup,
                _ => return error("\"state\" must be \"up\", \"down\" or \"backup\""),
            };
            Command::PathState { conn, path, state }
        }
        Some("path_weight") => {
            let (conn, path) = match conn_path() {
                Ok(cp) => cp,
                Err(e) => return e,
            };
            let Some(weight_out) = req
                .get("weight_out")
                .and_then(Value::as_u64)
                .and_then(|w| u32::try_from(w).ok())
            else {
                return error("\"weight_out\" must be a positive integer");
            };
            let weight_in = match req.get("weight_in") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_u64().and_then(|w| u16::try_from(w).ok()) {
                    Some(w) => Some(w),
                    None => return error("\"weight_in\" must be an integer in 1..=65535"),
                },
            };
            Command::PathWeight {
                conn,
                path,
                weight_out,
                weight_in,
            }
        }
        Some("reload") => Command::Reload,
        Some("path_add") => {
            let (Some(conn), Some(name)) = (text("conn"), text("name")) else {
                return error("needs \"conn\" and \"name\"");
            };
            if name.is_empty() || name.len() > mpt_proto::wire::MAX_NAME_LEN {
                return error(&format!(
                    "\"name\" must be 1 to {} bytes",
                    mpt_proto::wire::MAX_NAME_LEN
                ));
            }
            let ip = |key: &str| -> Result<Option<IpAddr>, Value> {
                match req.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v
                        .as_str()
                        .and_then(|t| t.parse::<IpAddr>().ok())
                        .map(Some)
                        .ok_or_else(|| error(&format!("\"{key}\" must be an IP address"))),
                }
            };
            let local = match ip("local") {
                Ok(Some(a)) => a,
                Ok(None) => return error("needs \"local\""),
                Err(e) => return e,
            };
            let remote = match ip("remote") {
                Ok(a) => a,
                Err(e) => return e,
            };
            let interface = match req.get("interface") {
                None | Some(Value::Null) => None,
                Some(Value::String(i)) if !i.is_empty() && i.len() <= 15 => Some(i.clone()),
                Some(_) => return error("\"interface\" must be an interface name"),
            };
            let weight = match req.get("weight_out").or_else(|| req.get("weight")) {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_u64().and_then(|w| u32::try_from(w).ok()) {
                    Some(w) => Some(w),
                    None => return error("\"weight_out\" must be a positive integer"),
                },
            };
            Command::PathAdd {
                conn,
                name,
                local,
                remote,
                interface,
                weight,
            }
        }
        Some("path_remove") => {
            let (conn, path) = match conn_path() {
                Ok(cp) => cp,
                Err(e) => return e,
            };
            let force = req.get("force").and_then(Value::as_bool).unwrap_or(false);
            Command::PathRemove { conn, path, force }
        }
        Some(other) => return error(&format!("unknown request \"{other}\"")),
        None => return error("missing \"request\""),
    };
    match execute(&source.commands, command) {
        Ok(Value::Object(mut fields)) => {
            fields.insert("version".into(), json!(CONTROL_VERSION));
            fields.insert("ok".into(), json!(true));
            Value::Object(fields)
        }
        Ok(_) => json!({"version": CONTROL_VERSION, "ok": true}),
        Err(e) => error(&e),
    }
}

/// Hands a command to the control loop and waits for its answer.
pub fn execute(commands: &SyncSender<Request>, command: Command) -> Result<Value, String> {
    let (tx, rx) = sync_channel(1);
    commands
        .try_send((command, tx))
        .map_err(|_| "the daemon is busy or shutting down; try again".to_string())?;
    rx.recv_timeout(Duration::from_secs(5))
        .map_err(|_| "the daemon did not answer in time".to_string())?
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

/// "no connection `x`", with the configured names that look like it
/// (never the whole list: a server may have hundreds).
pub fn unknown_connection(name: &str, names: &[&str]) -> String {
    let near = near_names(name, names);
    if names.is_empty() {
        format!("no connection `{name}`: the daemon has no connections")
    } else if near.is_empty() {
        format!(
            "no connection `{name}` (none of the {} connection names is close; `mpt status` lists them)",
            names.len()
        )
    } else {
        format!("no connection `{name}`; did you mean {}?", near.join(", "))
    }
}

/// Up to five of `names` close to `name`: equal ignoring case, one
/// containing the other, or within a small edit distance; closest first.
pub fn near_names(name: &str, names: &[&str]) -> Vec<String> {
    let want = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = names
        .iter()
        .filter_map(|&n| {
            let low = n.to_lowercase();
            let d = edit_distance(&want, &low);
            let close = d <= (want.chars().count() / 3).max(1)
                || (want.len() >= 2 && (low.contains(&want) || want.contains(&low)));
            close.then_some((d, n))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(5)
        .map(|(_, n)| format!("`{n}`"))
        .collect()
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// `object` with a counter group's counters added under their names.
fn with_counters<const N: usize>(mut object: Value, counters: [(&str, u64); N]) -> Value {
    for (name, value) in counters {
        object[name] = json!(value);
    }
    object
}

/// The status document (the `mpt status --json` contract).
pub fn status(source: &StatusSource) -> Value {
    status_of(source, None)
}

/// The status document with connection `only` alone (`None`: all).
pub fn status_of(source: &StatusSource, only: Option<&str>) -> Value {
    let now = Instant::now();
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
                    "timeout_ms": c.reseq_timeout_us.load(Relaxed) as f64 / 1e3,
                    "spread_ms": match c.rx_spread_us.load(Relaxed) {
                        u64::MAX => Value::Null,
                        us => json!(us as f64 / 1e3),
                    },
                    "hold": hold_json(&r.hold),
                },
                "equalize": {
                    "hold_ms": c.equalize_spread_us.load(Relaxed) as f64 / 1e3,
                    "bulk_hold_ms": c.equalize_bulk_spread_us.load(Relaxed) as f64 / 1e3,
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
            "tun_write_errors": s.tun_write.get(),
        })),
        "connections": conns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_find_typos_and_parts_not_everything() {
        let names = ["client-001", "client-002", "client-010", "site-b", "Office"];
        let near = near_names("client-01", &names);
        assert!(near.contains(&"`client-010`".to_string()), "{near:?}");
        assert!(near.contains(&"`client-001`".to_string()), "{near:?}");
        assert!(near_names("client-01", &names).len() <= 5);
        assert_eq!(near_names("site-c", &names), ["`site-b`"]);
        assert_eq!(near_names("office", &names), ["`Office`"]);
        assert!(near_names("zzzzzz", &names).is_empty());
        let msg = unknown_connection("zzzzzz", &names);
        assert!(msg.contains("none of the 5"), "{msg}");
        assert!(!msg.contains("client-001"), "{msg}");
        let msg = unknown_connection("site-c", &names);
        assert!(msg.contains("did you mean `site-b`?"), "{msg}");
        assert!(unknown_connection("x", &[]).contains("no connections"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
