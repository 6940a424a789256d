//! `mpt status`: the daemon's status document as a table.
//!
//! The document is read as [`mpt_api::Status`], whose fields are all
//! optional, so old and new daemons both print: a field the daemon does
//! not send shows as `-` (and its `null`, where it means something, as
//! `?` or `never`), a counter this client does not know is listed with
//! the others it does. The layout fits [`WIDTH`] columns for up to at
//! least 12 paths per connection: per connection a header line, then two
//! tables keyed by path name, one for identity and liveness (state,
//! addresses, weights, time since the last packet and since the last
//! state change) and one for traffic (RTT, loss, packets, rates). Rows
//! follow the document's order, which is the configuration's.
//!
//! The renderers also take the document as JSON ([`StatusDocument`]), for
//! tests and tools that hold a `serde_json::Value`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use mpt_api::status::{Connection, Handover, PathStatus, Session, Status};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ctl::format::{millis, percent};
use crate::ctl::table::{cut_end, cut_middle, push_wrapped, without_port, Align, Table};

pub use crate::ctl::format::{age, si};
pub use crate::ctl::table::shorten_addrs;

/// Width the table is laid out for.
pub const WIDTH: usize = 80;

/// Longest path name shown before it is cut with `…`.
const MAX_NAME: usize = 12;

/// Indent of the per-connection tables.
const INDENT: usize = 2;

/// A status document as the renderers take it: the typed [`Status`] (what
/// `mpt status` reads), or the same as JSON, read into a [`Status`] (JSON
/// that is not a status document renders as an empty one).
pub trait StatusDocument: Sized {
    /// The document, typed.
    fn status(&self) -> Cow<'_, Status>;
    /// The document, typed, taking it.
    fn into_status(self) -> Status;
    /// A document of this kind holding `status`.
    fn from_status(status: Status) -> Self;
}

impl StatusDocument for Status {
    fn status(&self) -> Cow<'_, Status> {
        Cow::Borrowed(self)
    }
    fn into_status(self) -> Status {
        self
    }
    fn from_status(status: Status) -> Self {
        status
    }
}

impl StatusDocument for Value {
    fn status(&self) -> Cow<'_, Status> {
        Cow::Owned(Status::deserialize(self).unwrap_or_default())
    }
    fn into_status(self) -> Status {
        serde_json::from_value(self).unwrap_or_default()
    }
    fn from_status(status: Status) -> Self {
        serde_json::to_value(status).unwrap_or(Value::Null)
    }
}

/// What the traffic table shows besides packet counts.
#[derive(Debug)]
pub enum Traffic<'a, D = Status> {
    /// Byte totals from one sample (`--once`).
    Totals,
    /// Bit rates from the byte counters of an earlier sample `elapsed` ago.
    Rates {
        /// The earlier status document.
        earlier: &'a D,
        /// Time between the two samples.
        elapsed: Duration,
    },
}

impl<D> Clone for Traffic<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D> Copy for Traffic<'_, D> {}

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
pub fn only_connection<D: StatusDocument>(status: D, name: &str) -> Result<D, String> {
    let mut status = status.into_status();
    let Some(conns) = status.connections.as_mut() else {
        return Err(format!("no connection `{name}`: the daemon listed none"));
    };
    if !conns.iter().any(|c| c.name.as_deref() == Some(name)) {
        let names: Vec<&str> = conns.iter().filter_map(|c| c.name.as_deref()).collect();
        return Err(mptd::ops::control_socket::unknown_connection(name, &names));
    }
    conns.retain(|c| c.name.as_deref() == Some(name));
    Ok(D::from_status(status))
}

/// Renders the status document (the `status` object of the response),
/// in the [`Layout::Auto`] layout.
pub fn render<D: StatusDocument>(status: &D, traffic: Traffic<'_, D>, width: usize) -> String {
    render_layout(status, traffic, width, Layout::Auto)
}

/// Renders the status document in the given layout.
pub fn render_layout<D: StatusDocument>(
    status: &D,
    traffic: Traffic<'_, D>,
    width: usize,
    layout: Layout,
) -> String {
    let earlier = match traffic {
        Traffic::Rates { earlier, .. } => Some(earlier.status()),
        Traffic::Totals => None,
    };
    let traffic = match (traffic, &earlier) {
        (Traffic::Rates { elapsed, .. }, Some(earlier)) => Traffic::Rates {
            earlier: earlier.as_ref(),
            elapsed,
        },
        _ => Traffic::Totals,
    };
    render_status(&status.status(), traffic, width, layout)
}

fn render_status(status: &Status, traffic: Traffic<'_>, width: usize, layout: Layout) -> String {
    let mut out = String::new();
    let mut top = format!(
        "tunnel {}, up {}",
        or_dash(status.tunnel.as_deref()),
        status
            .uptime_s
            .map_or_else(|| "-".to_string(), |s| age(s as f64 * 1e3)),
    );
    let drops = nonzero(status.drops.as_ref());
    if !drops.is_empty() {
        top.push_str("; drops: ");
        top.push_str(&drops.join(", "));
    }
    // The public-key handshake's responder (all connections).
    if let Some(n) = status.noise.as_ref().and_then(Option::as_ref) {
        let _ = write!(
            top,
            "; noise handshakes: {} initiations processed, {} answered, {} cookies sent",
            n.initiations_processed.unwrap_or(0),
            n.responses_sent.unwrap_or(0),
            n.cookies_sent.unwrap_or(0)
        );
        let refused = nonzero(n.refused.as_ref());
        if !refused.is_empty() {
            let _ = write!(top, ", refused: {}", refused.join(", "));
        }
    }
    push_wrapped(&mut out, &top, 0, width);
    if let Some(a) = &status.accel {
        let (up, down) = (si(a.bytes_up as f64), si(a.bytes_down as f64));
        let mut line = format!(
            "  accel: {} flows ({} active), {up}B up, {down}B down; legs {} idle, {} busy, {} opened",
            a.flows, a.flows_active, a.legs_idle, a.legs_busy, a.legs_opened
        );
        let events = nonzero(Some(&serde_json::json!({
            "refused": a.refused, "resets": a.resets, "dropped": a.dropped,
            "leg_failures": a.leg_failures, "bad_frames": a.bad_frames,
        })));
        if !events.is_empty() {
            let _ = write!(line, "; {}", events.join(", "));
        }
        if !a.path_bytes.is_empty() {
            let _ = write!(line, "; sent by path: {}", accel_path_bytes(status));
        }
        push_wrapped(&mut out, &line, 4, width);
    }
    if let Some(r) = &status.routing {
        for line in crate::ctl::routing::routing_lines(r) {
            let indent = line.len() - line.trim_start().len();
            push_wrapped(&mut out, &line, indent + 2, width);
        }
    }
    let conns = status.connections();
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
fn holds_line(conn: &Connection) -> Option<String> {
    let reorder = conn.reorder.as_ref();
    let equalize = conn.equalize.as_ref();
    let mut parts = Vec::new();
    if let Some(held) = reorder.and_then(|r| r.held).filter(|&n| n > 0) {
        let sum = reorder.and_then(|r| r.hold.as_ref()).and_then(|h| h.sum_ms);
        let mut part = format!("resequencer {held} held");
        let mut inner = Vec::new();
        if let Some(sum) = sum {
            inner.push(format!("mean {} ms", millis(sum / held as f64)));
        }
        if let Some(now) = reorder.and_then(|r| r.held_now).filter(|&n| n > 0) {
            inner.push(format!("{now} now"));
        }
        if !inner.is_empty() {
            let _ = write!(part, " ({})", inner.join(", "));
        }
        parts.push(part);
    }
    let hold_ms = equalize.and_then(|e| e.hold_ms).filter(|&ms| ms > 0.0);
    // Full-size datagrams may be held longer: to a far path that carries
    // nothing yet (see mptd's `equalize_target`).
    let bulk_ms = equalize
        .and_then(|e| e.bulk_hold_ms)
        .filter(|&ms| (ms - hold_ms.unwrap_or(0.0)).abs() >= 1.0);
    let eq_held = equalize.and_then(|e| e.held).filter(|&n| n > 0);
    if hold_ms.is_some() || bulk_ms.is_some() || eq_held.is_some() {
        let mut part = format!("equalise {} ms", millis(hold_ms.unwrap_or(0.0)));
        if let Some(bulk) = bulk_ms {
            let _ = write!(part, " ({} ms full-size)", millis(bulk));
        }
        if let Some(n) = eq_held {
            let mean = equalize
                .and_then(|e| e.held_ms)
                .map_or(0.0, |ms| ms / n as f64);
            let _ = write!(part, " ({n} held, mean {} ms)", millis(mean));
        }
        parts.push(part);
    }
    (!parts.is_empty()).then(|| format!("holds: {}", parts.join(", ")))
}

/// "handover: 2, last wifi -> lte, gap 84 ms, 12.3 s ago" (none: no line).
fn handover_line(h: Option<&Handover>) -> Option<String> {
    let h = h?;
    let count = h.count.filter(|&n| n > 0)?;
    let mut line = format!("handover: {count}");
    if let Some(last) = h.last.as_ref().and_then(Option::as_ref) {
        let _ = write!(
            line,
            ", last {} -> {}",
            or_dash(last.from.as_deref()),
            or_dash(last.to.as_deref())
        );
        if let Some(gap) = last.gap_ms {
            let _ = write!(line, ", gap {gap:.0} ms");
        }
        if let Some(ago) = last.ms_ago {
            let _ = write!(line, ", {:.1} s ago", ago / 1000.0);
        }
    }
    Some(line)
}

fn render_conn(out: &mut String, conn: &Connection, traffic: Traffic<'_>, width: usize) {
    let name = or_dash(conn.name.as_deref());
    let mut head = name.clone();
    if let Some(id) = conn.id {
        let _ = write!(head, " (id {id})");
    }
    head.push_str(": ");
    head.push_str(&session(conn.session.as_ref()));
    push_wrapped(out, &head, 0, width);
    let drops = nonzero(conn.drops.as_ref());
    if !drops.is_empty() {
        push_wrapped(out, &format!("drops: {}", drops.join(", ")), INDENT, width);
    }
    let repairs = nonzero(conn.repair.as_ref());
    if !repairs.is_empty() {
        push_wrapped(
            out,
            &format!("repair: {}", repairs.join(", ")),
            INDENT,
            width,
        );
    }
    if let Some(line) = handover_line(conn.handover.as_ref()) {
        push_wrapped(out, &line, INDENT, width);
    }
    if let Some(line) = holds_line(conn) {
        push_wrapped(out, &line, INDENT, width);
    }
    let copies = nonzero(conn.redundancy.as_ref());
    if !copies.is_empty() {
        let line = format!("redundancy: {}", copies.join(", "));
        push_wrapped(out, &line, INDENT, width);
    }
    let tcp = nonzero(conn.tcp.as_ref());
    if !tcp.is_empty() {
        push_wrapped(out, &format!("tcp: {}", tcp.join(", ")), INDENT, width);
    }
    let paths = conn.paths();
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
        Traffic::Rates { earlier, .. } => earlier.connection(&name).map(Connection::paths),
        Traffic::Totals => None,
    };
    let mut unresolved = Vec::new();
    for p in paths {
        let pname = cut_end(&or_dash(p.name.as_deref()), MAX_NAME);
        let remote = remote_column(p);
        if let Some(e) = &p.resolve_error {
            unresolved.push(format!("{:INDENT$}{pname}: {e}\n", ""));
        }
        links.rows.push(vec![
            pname.clone(),
            or_dash(p.state.as_deref()),
            format!("{} -> {}", or_dash(p.local.as_deref()), remote),
            format!("{}/{}", or_dash(p.weight_out), or_dash(p.weight_in)),
            match p.last_rx_ms_ago {
                Some(None) => "never".to_string(),
                Some(Some(ms)) => age(ms),
                None => "-".into(),
            },
            p.last_change_ms_ago.map_or_else(|| "-".into(), age),
        ]);
        let rtt = p.rtt_ms.flatten().map_or_else(|| "-".into(), millis);
        let rtt_min = p.rtt_min_ms.flatten().map_or_else(|| "-".into(), millis);
        let (tx, rx) = match traffic {
            Traffic::Totals => (count(p.tx_bytes), count(p.rx_bytes)),
            Traffic::Rates { elapsed, .. } => {
                let before = earlier_paths
                    .and_then(|ps| ps.iter().find(|q| q.name.is_some() && q.name == p.name));
                let rate = |bytes: fn(&PathStatus) -> Option<u64>| {
                    before
                        .and_then(|b| bit_rate(bytes(b).as_ref(), bytes(p).as_ref(), elapsed))
                        .map_or_else(|| "-".into(), si)
                };
                (rate(|p| p.tx_bytes), rate(|p| p.rx_bytes))
            }
        };
        let ms_or_dash = |ms: Option<Option<f64>>| ms.flatten().map_or_else(|| "-".into(), millis);
        sched.rows.push(vec![
            pname.clone(),
            match (p.rate_bps.flatten(), p.rate_confirmed) {
                (Some(r), Some(true)) => si(r as f64),
                (Some(r), _) => format!(">={}", si(r as f64)),
                (None, _) => "-".into(),
            },
            ms_or_dash(p.owd_ms),
            ms_or_dash(p.queue_ms),
            match p.share {
                Some(x) if p.lossy == Some(true) => format!("{} lossy", percent(x * 100.0)),
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
            p.loss_pct.flatten().map_or_else(|| "-".into(), percent),
            count(p.tx_packets),
            count(p.rx_packets),
            tx,
            rx,
        ]);
    }
    links.render(out, INDENT, width);
    for line in unresolved {
        out.push_str(&line);
    }
    out.push('\n');
    load.render(out, INDENT, width);
    out.push('\n');
    sched.render(out, INDENT, width);
}

/// A path's remote as the table shows it: the address (`?` not known
/// yet), or for a host name `name (address)`, `name (unresolved)` before
/// it ever resolved.
fn remote_column(p: &PathStatus) -> String {
    let addr = match &p.remote {
        Some(None) => "?".to_string(),
        Some(Some(r)) => r.clone(),
        None => "-".to_string(),
    };
    match (&p.remote_name, &p.remote) {
        (Some(name), Some(None)) => format!("{name} (unresolved)"),
        (Some(name), _) => format!("{name} ({addr})"),
        (None, _) => addr,
    }
}

/// A connection's state in one word: `keying` (encrypted, no session
/// keys yet), `up` (a path is up), else the best path state (`suspect`,
/// `backup`, `probing`, `down`); `waiting` when it has no path yet (a
/// server's client whose paths are learnt from its packets).
pub fn conn_state(conn: &Connection) -> &'static str {
    let session = conn.session.as_ref();
    if session.and_then(|s| s.encrypted) == Some(true)
        && session.and_then(|s| s.established) == Some(false)
    {
        return "keying";
    }
    let states: Vec<&str> = conn
        .paths()
        .iter()
        .filter_map(|p| p.state.as_deref())
        .collect();
    if conn.paths().is_empty() {
        return "waiting";
    }
    ["up", "suspect", "backup", "probing"]
        .into_iter()
        .find(|s| states.contains(s))
        .unwrap_or("down")
}

/// Sum of a byte counter over a connection's paths (`None` when a path
/// lacks it).
fn conn_bytes(conn: &Connection, bytes: fn(&PathStatus) -> Option<u64>) -> Option<u64> {
    conn.paths().iter().map(bytes).sum()
}

/// The peer's address: the remote of the first up path (else of any
/// path), `+N` when the paths reach N more addresses.
fn peer_address(conn: &Connection) -> String {
    let paths = conn.paths();
    let remote = |p: &PathStatus| p.remote.clone().flatten();
    let first = paths
        .iter()
        .filter(|p| p.state.as_deref() == Some("up"))
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
fn render_compact(out: &mut String, conns: &[Connection], traffic: Traffic<'_>, width: usize) {
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
        let name = or_dash(conn.name.as_deref());
        let state = conn_state(conn);
        match by_state.iter_mut().find(|(s, _)| *s == state) {
            Some((_, n)) => *n += 1,
            None => by_state.push((state, 1)),
        }
        let paths = conn.paths();
        let up = paths
            .iter()
            .filter(|p| p.state.as_deref() == Some("up"))
            .count();
        let (tx, rx) = match traffic {
            Traffic::Totals => {
                let f =
                    |bytes| conn_bytes(conn, bytes).map_or_else(|| "-".into(), |b| si(b as f64));
                (f(|p| p.tx_bytes), f(|p| p.rx_bytes))
            }
            Traffic::Rates { earlier, elapsed } => {
                let before = earlier.connection(&name);
                let rate = |bytes: fn(&PathStatus) -> Option<u64>| {
                    let b = before.and_then(|b| conn_bytes(b, bytes));
                    let a = conn_bytes(conn, bytes);
                    bit_rate(b.as_ref(), a.as_ref(), elapsed).map_or_else(|| "-".into(), si)
                };
                (rate(|p| p.tx_bytes), rate(|p| p.rx_bytes))
            }
        };
        let handshake = conn
            .session
            .as_ref()
            .and_then(|s| s.key_age_s)
            .flatten()
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

/// A byte counter as [`bit_rate`] takes it: from the typed document, or a
/// JSON number.
pub trait ByteCounter {
    /// The count, if it is one.
    fn bytes(&self) -> Option<u64>;
}

impl ByteCounter for u64 {
    fn bytes(&self) -> Option<u64> {
        Some(*self)
    }
}

impl ByteCounter for Value {
    fn bytes(&self) -> Option<u64> {
        self.as_u64()
    }
}

/// Bits per second between two byte counters; `None` when either is
/// missing, the counter went back (daemon restarted) or no time passed.
pub fn bit_rate<C: ByteCounter + ?Sized>(
    before: Option<&C>,
    after: Option<&C>,
    elapsed: Duration,
) -> Option<f64> {
    let (b, a) = (before?.bytes()?, after?.bytes()?);
    let secs = elapsed.as_secs_f64();
    (a >= b && secs > 0.0).then(|| (a - b) as f64 * 8.0 / secs)
}

fn session(s: Option<&Session>) -> String {
    let Some(s) = s else {
        return "session -".into();
    };
    let mut t = match (s.encrypted, s.established) {
        (Some(false), _) => return "unencrypted (no key)".into(),
        (Some(true), Some(true)) => "session established, encrypted".to_string(),
        (Some(true), Some(false)) => "session NOT established".to_string(),
        _ => "session -".to_string(),
    };
    if s.handshake.as_deref() == Some("noise_ik") {
        t.push_str(", public-key handshake (noise)");
    }
    if let Some(c) = s.cipher.as_ref().and_then(Option::as_deref) {
        let _ = write!(t, ", {c}");
    }
    if let Some(n) = s.handshakes {
        let _ = write!(t, " ({n} handshake{}", if n == 1 { "" } else { "s" });
        if let Some(r) = s.rekeys.filter(|&r| r > 0) {
            let _ = write!(t, ", {r} rekey{}", if r == 1 { "" } else { "s" });
        }
        t.push(')');
    }
    // Public-key handshake: what it refused, by reason.
    let refused = s
        .noise
        .as_ref()
        .and_then(Option::as_ref)
        .and_then(|n| n.refused.as_ref());
    let refused = nonzero(refused);
    if !refused.is_empty() {
        let _ = write!(t, "; handshakes refused: {}", refused.join(", "));
    }
    t
}

/// `name value` for each non-zero counter of a group (the known ones and
/// those of a newer daemon alike), in name order.
fn nonzero<T: Serialize>(group: Option<&T>) -> Vec<String> {
    let Some(Value::Object(map)) = group.and_then(|g| serde_json::to_value(g).ok()) else {
        return Vec::new();
    };
    map.iter()
        .filter(|(_, v)| v.as_f64().is_some_and(|n| n != 0.0))
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

/// A field as text; `-` when missing.
fn or_dash(v: Option<impl std::fmt::Display>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// A counter in 3 significant digits: 999, 1.23k, 45.6M.
fn count(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |n| si(n as f64))
}

/// The pinned legs' bytes by path, named when the daemon has one
/// connection (path ids are places in a connection's path list, so with
/// several the id alone is what is known): "0 geo 12.3MB, 1 dsl 40.1MB".
fn accel_path_bytes(status: &Status) -> String {
    let Some(a) = &status.accel else {
        return String::new();
    };
    let names: Vec<Option<&str>> = match status.connections.as_deref() {
        Some([only]) => only
            .paths
            .iter()
            .flatten()
            .map(|p| p.name.as_deref())
            .collect(),
        _ => Vec::new(),
    };
    a.path_bytes
        .iter()
        .map(|p| {
            let bytes = si(p.bytes as f64);
            match names.get(usize::from(p.path)).copied().flatten() {
                Some(name) => format!("{} {name} {bytes}B", p.path),
                None => format!("{} {bytes}B", p.path),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::{accel_path_bytes, holds_line, remote_column};
    use serde_json::json;

    #[test]
    fn a_named_remote_shows_its_name_and_address() {
        let path = |v| serde_json::from_value(v).unwrap();
        let plain = json!({"remote": "192.0.2.7:65022"});
        assert_eq!(remote_column(&path(plain)), "192.0.2.7:65022");
        let named = json!({"remote": "192.0.2.7:65022", "remote_name": "hub.example.net"});
        assert_eq!(
            remote_column(&path(named)),
            "hub.example.net (192.0.2.7:65022)"
        );
        let never = json!({"remote": null, "remote_name": "hub.example.net",
            "resolve_error": "name hub.example.net: no address"});
        assert_eq!(remote_column(&path(never)), "hub.example.net (unresolved)");
        assert_eq!(remote_column(&path(json!({"remote": null}))), "?");
    }

    #[test]
    fn accelerated_bytes_by_path_are_named_with_one_connection_only() {
        let status = |v| serde_json::from_value(v).unwrap();
        let accel = json!({"path_bytes": [{"path": 0, "bytes": 12_300_000u64},
                                          {"path": 2, "bytes": 999}]});
        let one = json!({"accel": accel,
            "connections": [{"paths": [{"name": "geo"}, {"name": "dsl"}, {}]}]});
        assert_eq!(accel_path_bytes(&status(one)), "0 geo 12.3MB, 2 999B");
        let two = json!({"accel": accel,
            "connections": [{"paths": [{"name": "geo"}]}, {"paths": [{"name": "x"}]}]});
        assert_eq!(accel_path_bytes(&status(two)), "0 12.3MB, 2 999B");
    }

    #[test]
    fn the_holds_line_names_a_longer_hold_of_full_size_datagrams() {
        let conn = |v| serde_json::from_value(v).unwrap();
        let idle_far = json!({"equalize": {"hold_ms": 0.0, "bulk_hold_ms": 287.4, "held": 0}});
        assert_eq!(
            holds_line(&conn(idle_far)).as_deref(),
            Some("holds: equalise 0.00 ms (287 ms full-size)")
        );
        let same = json!({"equalize": {"hold_ms": 35.2, "bulk_hold_ms": 35.2, "held": 4, "held_ms": 100.0}});
        assert_eq!(
            holds_line(&conn(same)).as_deref(),
            Some("holds: equalise 35.2 ms (4 held, mean 25.0 ms)")
        );
        let nothing = json!({"equalize": {"hold_ms": 0.0, "bulk_hold_ms": 0.0, "held": 0}});
        assert_eq!(holds_line(&conn(nothing)), None);
    }
}
