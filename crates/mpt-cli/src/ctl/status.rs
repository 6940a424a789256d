//! `mpt status`: the daemon's status document as a table.
//!
//! The document is read as untyped JSON on purpose: a field this client
//! does not know is ignored, a field the daemon does not send shows as `-`,
//! so old and new daemons both print. The layout fits [`WIDTH`] columns for
//! up to at least 12 paths per connection: per connection a header line,
//! then two tables keyed by path name, one for identity and liveness
//! (state, addresses, weights, time since the last packet and since the
//! last state change) and one for traffic (RTT, loss, packets, rates).
//! Rows follow the document's order, which is the configuration's.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

/// Width the table is laid out for.
pub const WIDTH: usize = 80;

/// Longest path name shown before it is cut with `…`.
const MAX_NAME: usize = 12;

/// Spaces between columns.
const GAP: usize = 2;

/// Indent of the per-connection tables.
const INDENT: usize = 2;

/// What the traffic table shows besides packet counts.
#[derive(Debug, Clone, Copy)]
pub enum Traffic<'a> {
    /// Byte totals from one sample (`--once`).
    Totals,
    /// Bit rates from the byte counters of an earlier sample `elapsed` ago.
    Rates {
        /// The earlier status document.
        earlier: &'a Value,
        /// Time between the two samples.
        elapsed: Duration,
    },
}

/// Above this many connections [`Layout::Auto`] shows one line per
/// connection.
pub const COMPACT_ABOVE: usize = 8;

/// How connections are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Full detail up to [`COMPACT_ABOVE`] connections, one line each above.
    Auto,
    /// Every connection with its path tables.
    Full,
    /// One line per connection.
    Compact,
}

/// Keeps connection `name` alone in the status document; the error names
/// close names (see `mptd::ops::control_socket::unknown_connection`).
pub fn only_connection(mut status: Value, name: &str) -> Result<Value, String> {
    let Some(Value::Array(conns)) = status.get_mut("connections") else {
        return Err(format!("no connection `{name}`: the daemon listed none"));
    };
    if !conns
        .iter()
        .any(|c| c.get("name").and_then(Value::as_str) == Some(name))
    {
        let names: Vec<&str> = conns
            .iter()
            .filter_map(|c| c.get("name").and_then(Value::as_str))
            .collect();
        return Err(mptd::ops::control_socket::unknown_connection(name, &names));
    }
    conns.retain(|c| c.get("name").and_then(Value::as_str) == Some(name));
    Ok(status)
}

/// Renders the status document (the `status` object of the response),
/// in the [`Layout::Auto`] layout.
pub fn render(status: &Value, traffic: Traffic<'_>, width: usize) -> String {
    render_layout(status, traffic, width, Layout::Auto)
}

/// Renders the status document in the given layout.
pub fn render_layout(status: &Value, traffic: Traffic<'_>, width: usize, layout: Layout) -> String {
    let mut out = String::new();
    let mut top = format!(
        "tunnel {}, up {}",
        text(status.get("tunnel")),
        status
            .get("uptime_s")
            .and_then(Value::as_f64)
            .map_or_else(|| "-".to_string(), |s| age(s * 1e3)),
    );
    let drops = nonzero(status.get("drops"));
    if !drops.is_empty() {
        top.push_str("; drops: ");
        top.push_str(&drops.join(", "));
    }
    // The public-key handshake's responder (all connections).
    if let Some(n) = status.get("noise").filter(|n| n.is_object()) {
        let get = |k: &str| n.get(k).and_then(Value::as_u64).unwrap_or(0);
        let _ = write!(
            top,
            "; noise handshakes: {} initiations processed, {} answered, {} cookies sent",
            get("initiations_processed"),
            get("responses_sent"),
            get("cookies_sent")
        );
        let refused = nonzero(n.get("refused"));
        if !refused.is_empty() {
            let _ = write!(top, ", refused: {}", refused.join(", "));
        }
    }
    push_wrapped(&mut out, &top, 0, width);
    let conns = status
        .get("connections")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if conns.is_empty() {
        out.push_str("no connections\n");
    }
    let compact = match layout {
        Layout::Auto => conns.len() > COMPACT_ABOVE,
        Layout::Full => false,
        Layout::Compact => true,
    };
    if compact {
        out.push('\n');
        render_compact(&mut out, conns, traffic, width);
        return out;
    }
    for conn in conns {
        out.push('\n');
        render_conn(&mut out, conn, traffic, width);
    }
    out
}

/// "holds: resequencer 931391 held (mean 0.73 ms, 2 now), equalise 3.60 ms
/// (287 ms full-size) (120 held, mean 3.20 ms)": what the receiver held
/// back; no line while nothing was held (the resequencer's `reorder`, the
/// delay line's `equalize`: short datagrams' hold, then full-size ones' where
/// it differs).
fn holds_line(conn: &Value) -> Option<String> {
    let u = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_u64);
    let f = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_f64);
    let reorder = conn.get("reorder");
    let equalize = conn.get("equalize");
    let mut parts = Vec::new();
    if let Some(held) = u(reorder, "held").filter(|&n| n > 0) {
        let sum = reorder
            .and_then(|r| r.get("hold"))
            .and_then(|h| h.get("sum_ms"))
            .and_then(Value::as_f64);
        let mut part = format!("resequencer {held} held");
        let mut inner = Vec::new();
        if let Some(sum) = sum {
            inner.push(format!("mean {} ms", millis(sum / held as f64)));
        }
        if let Some(now) = u(reorder, "held_now").filter(|&n| n > 0) {
            inner.push(format!("{now} now"));
        }
        if !inner.is_empty() {
            let _ = write!(part, " ({})", inner.join(", "));
        }
        parts.push(part);
    }
    let hold_ms = f(equalize, "hold_ms").filter(|&ms| ms > 0.0);
    // Full-size datagrams may be held longer: to a far path that carries
    // nothing yet (see mptd's `equalize_target`).
    let bulk_ms =
        f(equalize, "bulk_hold_ms").filter(|&ms| (ms - hold_ms.unwrap_or(0.0)).abs() >= 1.0);
    let eq_held = u(equalize, "held").filter(|&n| n > 0);
    if hold_ms.is_some() || bulk_ms.is_some() || eq_held.is_some() {
        let mut part = format!("equalise {} ms", millis(hold_ms.unwrap_or(0.0)));
        if let Some(bulk) = bulk_ms {
            let _ = write!(part, " ({} ms full-size)", millis(bulk));
        }
        if let Some(n) = eq_held {
            let mean = f(equalize, "held_ms").map_or(0.0, |ms| ms / n as f64);
            let _ = write!(part, " ({n} held, mean {} ms)", millis(mean));
        }
        parts.push(part);
    }
    (!parts.is_empty()).then(|| format!("holds: {}", parts.join(", ")))
}

/// "handover: 2, last wifi -> lte, gap 84 ms, 12.3 s ago" (none: no line).
fn handover_line(h: Option<&Value>) -> Option<String> {
    let h = h?;
    let count = h.get("count").and_then(Value::as_u64).filter(|&n| n > 0)?;
    let mut line = format!("handover: {count}");
    if let Some(last) = h.get("last").filter(|v| v.is_object()) {
        let f = |k: &str| last.get(k).and_then(Value::as_f64);
        let _ = write!(
            line,
            ", last {} -> {}",
            text(last.get("from")),
            text(last.get("to"))
        );
        if let Some(gap) = f("gap_ms") {
            let _ = write!(line, ", gap {gap:.0} ms");
        }
        if let Some(ago) = f("ms_ago") {
            let _ = write!(line, ", {:.1} s ago", ago / 1000.0);
        }
    }
    Some(line)
}

fn render_conn(out: &mut String, conn: &Value, traffic: Traffic<'_>, width: usize) {
    let name = text(conn.get("name"));
    let mut head = name.clone();
    if let Some(id) = conn.get("id").filter(|v| !v.is_null()) {
        let _ = write!(head, " (id {})", plain(id));
    }
    head.push_str(": ");
    head.push_str(&session(conn.get("session")));
    push_wrapped(out, &head, 0, width);
    let drops = nonzero(conn.get("drops"));
    if !drops.is_empty() {
        push_wrapped(out, &format!("drops: {}", drops.join(", ")), INDENT, width);
    }
    let repairs = nonzero(conn.get("repair"));
    if !repairs.is_empty() {
        push_wrapped(
            out,
            &format!("repair: {}", repairs.join(", ")),
            INDENT,
            width,
        );
    }
    if let Some(line) = handover_line(conn.get("handover")) {
        push_wrapped(out, &line, INDENT, width);
    }
    if let Some(line) = holds_line(conn) {
        push_wrapped(out, &line, INDENT, width);
    }
    let copies = nonzero(conn.get("redundancy"));
    if !copies.is_empty() {
        let line = format!("redundancy: {}", copies.join(", "));
        push_wrapped(out, &line, INDENT, width);
    }
    let paths = conn
        .get("paths")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if paths.is_empty() {
        push_wrapped(out, "no paths", INDENT, width);
        return;
    }

    let mut links = Table::new(&[
        ("PATH", Align::Left),
        ("STATE", Align::Left),
        ("LOCAL -> REMOTE", Align::Left),
        ("W OUT/IN", Align::Right),
        ("RX AGO", Align::Right),
        ("CHANGED", Align::Right),
    ]);
    links.elastic = Some(2);
    let (tx_head, rx_head) = match traffic {
        Traffic::Totals => ("TX BYTES", "RX BYTES"),
        Traffic::Rates { .. } => ("TX bit/s", "RX bit/s"),
    };
    let mut load = Table::new(&[
        ("PATH", Align::Left),
        ("RTT/MIN ms", Align::Right),
        ("LOSS", Align::Right),
        ("TX PKTS", Align::Right),
        ("RX PKTS", Align::Right),
        (tx_head, Align::Right),
        (rx_head, Align::Right),
    ]);
    // What the adaptive scheduler believes of each path.
    let mut sched = Table::new(&[
        ("PATH", Align::Left),
        ("EST bit/s", Align::Right),
        ("+OWD ms", Align::Right),
        ("QUEUE ms", Align::Right),
        ("SHARE", Align::Right),
    ]);
    let earlier_paths = match traffic {
        Traffic::Rates { earlier, .. } => find_conn(earlier, &name)
            .and_then(|c| c.get("paths"))
            .and_then(Value::as_array)
            .map(Vec::as_slice),
        Traffic::Totals => None,
    };
    for p in paths {
        let pname = cut_end(&text(p.get("name")), MAX_NAME);
        let remote = match p.get("remote") {
            Some(Value::Null) => "?".to_string(),
            other => text(other),
        };
        links.rows.push(vec![
            pname.clone(),
            text(p.get("state")),
            format!("{} -> {}", text(p.get("local")), remote),
            format!("{}/{}", text(p.get("weight_out")), text(p.get("weight_in"))),
            match p.get("last_rx_ms_ago") {
                Some(Value::Null) => "never".to_string(),
                v => v.and_then(Value::as_f64).map_or_else(|| "-".into(), age),
            },
            p.get("last_change_ms_ago")
                .and_then(Value::as_f64)
                .map_or_else(|| "-".into(), age),
        ]);
        let rtt = (p.get("rtt_ms").and_then(Value::as_f64)).map_or_else(|| "-".into(), millis);
        let rtt_min =
            (p.get("rtt_min_ms").and_then(Value::as_f64)).map_or_else(|| "-".into(), millis);
        let (tx, rx) = match traffic {
            Traffic::Totals => (count(p.get("tx_bytes")), count(p.get("rx_bytes"))),
            Traffic::Rates { elapsed, .. } => {
                let before = earlier_paths.and_then(|ps| {
                    ps.iter()
                        .find(|q| q.get("name").is_some() && q.get("name") == p.get("name"))
                });
                let rate = |key: &str| {
                    before
                        .and_then(|b| bit_rate(b.get(key), p.get(key), elapsed))
                        .map_or_else(|| "-".into(), si)
                };
                (rate("tx_bytes"), rate("rx_bytes"))
            }
        };
        let ms_or_dash = |key: &str| {
            p.get(key)
                .and_then(Value::as_f64)
                .map_or_else(|| "-".into(), millis)
        };
        sched.rows.push(vec![
            pname.clone(),
            match (
                p.get("rate_bps").and_then(Value::as_f64),
                p.get("rate_confirmed"),
            ) {
                (Some(r), Some(Value::Bool(true))) => si(r),
                (Some(r), _) => format!(">={}", si(r)),
                (None, _) => "-".into(),
            },
            ms_or_dash("owd_ms"),
            ms_or_dash("queue_ms"),
            match p.get("share").and_then(Value::as_f64) {
                Some(x) if p.get("lossy") == Some(&Value::Bool(true)) => {
                    format!("{} lossy", percent(x * 100.0))
                }
                Some(x) => percent(x * 100.0),
                None => "-".into(),
            },
        ]);
        load.rows.push(vec![
            pname,
            if rtt == "-" && rtt_min == "-" {
                "-".into()
            } else {
                format!("{rtt}/{rtt_min}")
            },
            p.get("loss_pct")
                .and_then(Value::as_f64)
                .map_or_else(|| "-".into(), percent),
            count(p.get("tx_packets")),
            count(p.get("rx_packets")),
            tx,
            rx,
        ]);
    }
    links.render(out, INDENT, width);
    out.push('\n');
    load.render(out, INDENT, width);
    out.push('\n');
    sched.render(out, INDENT, width);
}

/// A connection's state in one word: `keying` (encrypted, no session
/// keys yet), `up` (a path is up), else the best path state (`suspect`,
/// `backup`, `probing`, `down`); `waiting` when it has no path yet (a
/// server's client whose paths are learnt from its packets).
pub fn conn_state(conn: &Value) -> &'static str {
    let session = conn.get("session");
    let flag = |k: &str| session.and_then(|s| s.get(k)).and_then(Value::as_bool);
    if flag("encrypted") == Some(true) && flag("established") == Some(false) {
        return "keying";
    }
    let states: Vec<&str> = paths_of(conn)
        .iter()
        .filter_map(|p| p.get("state").and_then(Value::as_str))
        .collect();
    if paths_of(conn).is_empty() {
        return "waiting";
    }
    ["up", "suspect", "backup", "probing"]
        .into_iter()
        .find(|s| states.contains(s))
        .unwrap_or("down")
}

fn paths_of(conn: &Value) -> &[Value] {
    conn.get("paths")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Sum of a byte counter over a connection's paths.
fn conn_bytes(conn: &Value, key: &str) -> Option<u64> {
    paths_of(conn)
        .iter()
        .map(|p| p.get(key).and_then(Value::as_u64))
        .sum()
}

/// The peer's address: the remote of the first up path (else of any
/// path), `+N` when the paths reach N more addresses.
fn peer_address(conn: &Value) -> String {
    let paths = paths_of(conn);
    let remote = |p: &Value| p.get("remote").and_then(Value::as_str).map(str::to_string);
    let first = paths
        .iter()
        .filter(|p| p.get("state").and_then(Value::as_str) == Some("up"))
        .find_map(remote)
        .or_else(|| paths.iter().find_map(remote));
    let Some(first) = first else {
        return "-".into();
    };
    let mut others: Vec<String> = paths
        .iter()
        .filter_map(remote)
        .map(|a| without_port(&a).to_string())
        .filter(|a| a != without_port(&first))
        .collect();
    others.sort();
    others.dedup();
    if others.is_empty() {
        first
    } else {
        format!("{first} +{}", others.len())
    }
}

/// One line per connection, under a line counting them by state.
fn render_compact(out: &mut String, conns: &[Value], traffic: Traffic<'_>, width: usize) {
    let (tx_head, rx_head) = match traffic {
        Traffic::Totals => ("TX BYTES", "RX BYTES"),
        Traffic::Rates { .. } => ("TX bps", "RX bps"),
    };
    let mut table = Table::new(&[
        ("CONNECTION", Align::Left),
        ("STATE", Align::Left),
        ("PATHS", Align::Right),
        ("PEER", Align::Left),
        (tx_head, Align::Right),
        (rx_head, Align::Right),
        ("LAST HS", Align::Right),
    ]);
    table.elastic = Some(3);
    let mut by_state: Vec<(&str, usize)> = Vec::new();
    for conn in conns {
        let name = text(conn.get("name"));
        let state = conn_state(conn);
        match by_state.iter_mut().find(|(s, _)| *s == state) {
            Some((_, n)) => *n += 1,
            None => by_state.push((state, 1)),
        }
        let paths = paths_of(conn);
        let up = paths
            .iter()
            .filter(|p| p.get("state").and_then(Value::as_str) == Some("up"))
            .count();
        let (tx, rx) = match traffic {
            Traffic::Totals => {
                let f = |k| conn_bytes(conn, k).map_or_else(|| "-".into(), |b| si(b as f64));
                (f("tx_bytes"), f("rx_bytes"))
            }
            Traffic::Rates { earlier, elapsed } => {
                let before = find_conn(earlier, &name);
                let rate = |k: &str| {
                    let b = before.and_then(|b| conn_bytes(b, k)).map(Value::from);
                    let a = conn_bytes(conn, k).map(Value::from);
                    bit_rate(b.as_ref(), a.as_ref(), elapsed).map_or_else(|| "-".into(), si)
                };
                (rate("tx_bytes"), rate("rx_bytes"))
            }
        };
        let handshake = conn
            .get("session")
            .and_then(|s| s.get("key_age_s"))
            .and_then(Value::as_f64)
            .map_or_else(|| "-".into(), |s| age(s * 1e3));
        table.rows.push(vec![
            cut_middle(&name, 18),
            state.to_string(),
            format!("{up}/{}", paths.len()),
            peer_address(conn),
            tx,
            rx,
            handshake,
        ]);
    }
    by_state.sort_by_key(|&(s, _)| (s != "up", s));
    let counts: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
    push_wrapped(
        out,
        &format!("{} connections: {}", conns.len(), counts.join(", ")),
        0,
        width,
    );
    table.render(out, 0, width);
    out.push_str("(mpt status CONNECTION: one connection in full; --json: everything)\n");
}

fn find_conn<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status
        .get("connections")?
        .as_array()?
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
}

/// Bits per second between two byte counters; `None` when either is
/// missing, the counter went back (daemon restarted) or no time passed.
pub fn bit_rate(before: Option<&Value>, after: Option<&Value>, elapsed: Duration) -> Option<f64> {
    let (b, a) = (before?.as_u64()?, after?.as_u64()?);
    let secs = elapsed.as_secs_f64();
    (a >= b && secs > 0.0).then(|| (a - b) as f64 * 8.0 / secs)
}

fn session(s: Option<&Value>) -> String {
    let Some(s) = s.filter(|s| s.is_object()) else {
        return "session -".into();
    };
    let handshakes = s.get("handshakes").and_then(Value::as_u64);
    let mut t = match (
        s.get("encrypted").and_then(Value::as_bool),
        s.get("established").and_then(Value::as_bool),
    ) {
        (Some(false), _) => return "unencrypted (no key)".into(),
        (Some(true), Some(true)) => "session established, encrypted".to_string(),
        (Some(true), Some(false)) => "session NOT established".to_string(),
        _ => "session -".to_string(),
    };
    if s.get("handshake").and_then(Value::as_str) == Some("noise_ik") {
        t.push_str(", public-key handshake (noise)");
    }
    if let Some(c) = s.get("cipher").and_then(Value::as_str) {
        let _ = write!(t, ", {c}");
    }
    if let Some(n) = handshakes {
        let _ = write!(t, " ({n} handshake{}", if n == 1 { "" } else { "s" });
        if let Some(r) = s.get("rekeys").and_then(Value::as_u64).filter(|&r| r > 0) {
            let _ = write!(t, ", {r} rekey{}", if r == 1 { "" } else { "s" });
        }
        t.push(')');
    }
    // Public-key handshake: what it refused, by reason.
    if let Some(refused) = s.get("noise").and_then(|n| n.get("refused")) {
        let r = nonzero(Some(refused));
        if !r.is_empty() {
            let _ = write!(t, "; handshakes refused: {}", r.join(", "));
        }
    }
    t
}

/// `name value` for each non-zero counter of an object, in key order.
fn nonzero(obj: Option<&Value>) -> Vec<String> {
    let Some(map) = obj.and_then(Value::as_object) else {
        return Vec::new();
    };
    map.iter()
        .filter(|(_, v)| v.as_f64().is_some_and(|n| n != 0.0))
        .map(|(k, v)| format!("{k} {}", plain(v)))
        .collect()
}

/// Appends `line` indented, wrapped at `, ` separators to fit `width`.
fn push_wrapped(out: &mut String, line: &str, indent: usize, width: usize) {
    let mut cur = String::new();
    for (i, piece) in line.split(", ").enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let len = indent + cur.chars().count() + sep.len() + piece.chars().count();
        if i > 0 && len > width {
            let _ = writeln!(out, "{:indent$}{cur},", "");
            cur = format!("  {piece}");
        } else {
            cur.push_str(sep);
            cur.push_str(piece);
        }
    }
    let _ = writeln!(out, "{:indent$}{cur}", "");
}

/// A JSON scalar as text; `-` when missing or null.
fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(v) => plain(v),
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A counter in 3 significant digits: 999, 1.23k, 45.6M.
fn count(v: Option<&Value>) -> String {
    v.and_then(Value::as_f64).map_or_else(|| "-".into(), si)
}

/// 3 significant digits with a k/M/G/T/P suffix above 999.
pub fn si(x: f64) -> String {
    if !x.is_finite() || x < 0.0 {
        return "-".into();
    }
    if x < 999.5 {
        return format!("{x:.0}");
    }
    let mut v = x;
    for unit in ["k", "M", "G", "T", "P"] {
        v /= 1000.0;
        if v < 999.5 || unit == "P" {
            return if v < 9.995 {
                format!("{v:.2}{unit}")
            } else if v < 99.95 {
                format!("{v:.1}{unit}")
            } else {
                format!("{v:.0}{unit}")
            };
        }
    }
    unreachable!("the loop returns at P")
}

/// Milliseconds with 3 significant digits (at least whole ms).
fn millis(ms: f64) -> String {
    if ms < 9.995 {
        format!("{ms:.2}")
    } else if ms < 99.95 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

fn percent(p: f64) -> String {
    if p >= 99.95 {
        "100%".into()
    } else {
        format!("{p:.1}%")
    }
}

/// An age given in milliseconds, e.g. 850ms, 4.2s, 37s, 5m07s, 3h05m, 2d04h.
pub fn age(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "-".into();
    }
    if ms < 999.5 {
        return format!("{ms:.0}ms");
    }
    let s = ms / 1e3;
    if s < 9.95 {
        return format!("{s:.1}s");
    }
    let s = s.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// Cuts `s` to `max` characters, ending in `…` when cut.
fn cut_end(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Cuts `s` to `max` characters by replacing its middle with `…`.
fn cut_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    if max < 3 {
        return cut_end(s, max);
    }
    let keep = max - 1;
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut t: String = s.chars().take(head).collect();
    t.push('…');
    t.extend(s.chars().skip(n - tail));
    t
}

/// Drops the port of `ip:port` / `[v6]:port`, keeping a bare address.
fn without_port(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split_once(']').map_or(addr, |(ip, _)| ip);
    }
    match addr.rsplit_once(':') {
        Some((ip, port)) if !ip.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => ip,
        _ => addr,
    }
}

/// Shortens `local -> remote` to `max` characters: first without ports,
/// then each side cut in the middle.
pub fn shorten_addrs(cell: &str, max: usize) -> String {
    if cell.chars().count() <= max {
        return cell.to_string();
    }
    let Some((l, r)) = cell.split_once(" -> ") else {
        return cut_middle(cell, max);
    };
    let (l, r) = (without_port(l), without_port(r));
    let bare = format!("{l} -> {r}");
    if bare.chars().count() <= max {
        return bare;
    }
    // Each side gets half the room; a short side lends the rest to the other.
    let side = max.saturating_sub(4);
    let (ln, rn) = (l.chars().count(), r.chars().count());
    let l_max = ln.min(side.saturating_sub(rn.min(side / 2)));
    let (l, r) = (cut_middle(l, l_max), cut_middle(r, side - l_max));
    format!("{l} -> {r}")
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// A text table; column `elastic` (the addresses) is shortened to make
/// the rows fit the width.
struct Table {
    cols: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
    elastic: Option<usize>,
}

impl Table {
    fn new(cols: &[(&'static str, Align)]) -> Table {
        Table {
            cols: cols.to_vec(),
            rows: Vec::new(),
            elastic: None,
        }
    }

    fn render(mut self, out: &mut String, indent: usize, width: usize) {
        let widths = |rows: &[Vec<String>], cols: &[(&str, Align)]| -> Vec<usize> {
            cols.iter()
                .enumerate()
                .map(|(i, (h, _))| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([h.chars().count()])
                        .max()
                        .unwrap_or(0)
                })
                .collect()
        };
        let mut w = widths(&self.rows, &self.cols);
        if let Some(e) = self.elastic {
            let others: usize = w
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != e)
                .map(|(_, w)| w)
                .sum();
            let fixed = indent + others + GAP * (w.len() - 1);
            let room = width.saturating_sub(fixed).max(self.cols[e].0.len());
            if w[e] > room {
                for row in &mut self.rows {
                    row[e] = shorten_addrs(&row[e], room);
                }
                w = widths(&self.rows, &self.cols);
            }
        }
        let header: Vec<String> = self.cols.iter().map(|(h, _)| h.to_string()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = " ".repeat(indent);
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str(&" ".repeat(GAP));
                }
                let pad = w[i].saturating_sub(cell.chars().count());
                match self.cols[i].1 {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&" ".repeat(pad));
                    }
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::holds_line;
    use serde_json::json;

    #[test]
    fn the_holds_line_names_a_longer_hold_of_full_size_datagrams() {
        let idle_far = json!({"equalize": {"hold_ms": 0.0, "bulk_hold_ms": 287.4, "held": 0}});
        assert_eq!(
            holds_line(&idle_far).as_deref(),
            Some("holds: equalise 0.00 ms (287 ms full-size)")
        );
        let same = json!({"equalize": {"hold_ms": 35.2, "bulk_hold_ms": 35.2, "held": 4, "held_ms": 100.0}});
        assert_eq!(
            holds_line(&same).as_deref(),
            Some("holds: equalise 35.2 ms (4 held, mean 25.0 ms)")
        );
        let nothing = json!({"equalize": {"hold_ms": 0.0, "bulk_hold_ms": 0.0, "held": 0}});
        assert_eq!(holds_line(&nothing), None);
    }
}
