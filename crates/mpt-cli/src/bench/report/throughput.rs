//! The generic scenarios' results (`ethernet`, `satellite`, files of the
//! same kind): goodput of UDP, TCP and HTTP through the tunnel against the
//! ideal and the raw single-path baselines, as a table, results.csv and a
//! line chart against the swept variable.

use std::fmt::Write as _;

use serde::Serialize;

use super::row::Row;
use crate::bench::chart::line::{Chart, Series, XTicks};
use crate::bench::chart::panels::Panels;
use crate::bench::csv_rows::{self, f1, opt4, CsvError};
use crate::bench::iperf::Measurement;
use crate::bench::text::opt;

fn mbps(m: &Option<Measurement>) -> Option<f64> {
    m.as_ref().map(|m| m.mbps)
}

/// The case column: N, plus RTT/PER/extra where the scenario sweeps them.
fn case_label(r: &Row) -> String {
    let mut s = format!("{} N={}", r.combo, r.n);
    if let Some(rtt) = r.rtt_ms {
        let _ = write!(s, " rtt={rtt:.0}ms");
    }
    if let Some(l) = r.loss {
        let _ = write!(s, " per={:.0}%", l * 100.0);
    }
    if r.extra {
        s += " +terr";
    }
    s
}

pub fn table(rows: &[Row], streams: u32) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<30} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>8} {:>8} {:>6} {:>6} {:>13}",
        "case",
        "ideal",
        "UDP",
        "TCP",
        "accelTCP",
        "HTTP",
        "UDP/id",
        "TCP/id",
        "rawUDP",
        "rawTCP",
        "UDP/rw",
        "TCP/rw",
        "CPU A/B/emu %"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<30} {:>8.1} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>8} {:>8} {:>6} {:>6} {:>13}",
            case_label(r),
            r.ideal_mbps,
            opt(mbps(&r.udp), 1),
            opt(mbps(&r.tcp), 1),
            opt(mbps(&r.accel_tcp), 1),
            opt(mbps(&r.http), 1),
            opt(r.udp_frac_ideal, 2),
            opt(r.tcp_frac_ideal, 2),
            opt(mbps(&r.raw_udp), 1),
            opt(mbps(&r.raw_tcp), 1),
            opt(r.udp_frac_raw, 2),
            opt(r.tcp_frac_raw, 2),
            format!(
                "{}/{}/{}",
                opt(r.cpu_a_pct, 0),
                opt(r.cpu_b_pct, 0),
                opt(r.emu_cpu_pct, 0)
            ),
        );
    }
    let _ = writeln!(
        s,
        "Mbit/s goodput; ideal = sum of link rates; /id = fraction of ideal; \
         /rw = fraction of N x raw single-link baseline; /id and /rw are UDP and TCP; UDP loss in results.csv"
    );
    if rows.iter().any(|r| r.accel_tcp.is_some()) {
        let _ = writeln!(
            s,
            "accelTCP = one TCP stream from an end host behind A to one behind B, split at A by \
             mptd's TCP acceleration and carried over warm legs in the tunnel (one per path, BBR unless the path \
             sets `accel_congestion`)"
        );
    }
    if streams > 1 {
        let _ = writeln!(
            s,
            "TCP and raw TCP: {} parallel streams (iperf3 -P), goodput summed",
            streams
        );
    }
    s
}

/// One results.csv row of a generic scenario.
#[derive(Debug, Default, Serialize)]
struct CsvRow<'a> {
    combo: &'a str,
    n: usize,
    paths: usize,
    #[serde(serialize_with = "opt4")]
    rtt_ms: Option<f64>,
    #[serde(serialize_with = "opt4")]
    loss: Option<f64>,
    extra: bool,
    #[serde(serialize_with = "f1")]
    ideal_mbps: f64,
    #[serde(serialize_with = "opt4")]
    udp_mbps: Option<f64>,
    #[serde(serialize_with = "opt4")]
    udp_sent_mbps: Option<f64>,
    #[serde(serialize_with = "opt4")]
    udp_loss_pct: Option<f64>,
    #[serde(serialize_with = "opt4")]
    tcp_mbps: Option<f64>,
    tcp_retransmits: Option<u64>,
    #[serde(serialize_with = "opt4")]
    http_mbps: Option<f64>,
    #[serde(serialize_with = "opt4")]
    accel_tcp_mbps: Option<f64>,
    accel_tcp_retransmits: Option<u64>,
    #[serde(serialize_with = "opt4")]
    raw_udp_mbps: Option<f64>,
    #[serde(serialize_with = "opt4")]
    raw_tcp_mbps: Option<f64>,
    #[serde(serialize_with = "opt4")]
    udp_frac_ideal: Option<f64>,
    #[serde(serialize_with = "opt4")]
    tcp_frac_ideal: Option<f64>,
    #[serde(serialize_with = "opt4")]
    udp_frac_raw: Option<f64>,
    #[serde(serialize_with = "opt4")]
    tcp_frac_raw: Option<f64>,
    #[serde(serialize_with = "opt4")]
    cpu_a_pct: Option<f64>,
    #[serde(serialize_with = "opt4")]
    cpu_b_pct: Option<f64>,
    #[serde(serialize_with = "opt4")]
    emu_cpu_pct: Option<f64>,
    #[serde(serialize_with = "opt4")]
    tunnel_rtt_ms: Option<f64>,
}

/// results.csv: one row per case.
pub fn csv(rows: &[Row]) -> Result<String, CsvError> {
    let rows: Vec<CsvRow> = rows
        .iter()
        .map(|r| CsvRow {
            combo: &r.combo,
            n: r.n,
            paths: r.paths,
            rtt_ms: r.rtt_ms,
            loss: r.loss,
            extra: r.extra,
            ideal_mbps: r.ideal_mbps,
            udp_mbps: mbps(&r.udp),
            udp_sent_mbps: r.udp.as_ref().and_then(|m| m.sent_mbps),
            udp_loss_pct: r.udp.as_ref().and_then(|m| m.loss_pct),
            tcp_mbps: mbps(&r.tcp),
            tcp_retransmits: r.tcp.as_ref().and_then(|m| m.retransmits),
            http_mbps: mbps(&r.http),
            accel_tcp_mbps: mbps(&r.accel_tcp),
            accel_tcp_retransmits: r.accel_tcp.as_ref().and_then(|m| m.retransmits),
            raw_udp_mbps: mbps(&r.raw_udp),
            raw_tcp_mbps: mbps(&r.raw_tcp),
            udp_frac_ideal: r.udp_frac_ideal,
            tcp_frac_ideal: r.tcp_frac_ideal,
            udp_frac_raw: r.udp_frac_raw,
            tcp_frac_raw: r.tcp_frac_raw,
            cpu_a_pct: r.cpu_a_pct,
            cpu_b_pct: r.cpu_b_pct,
            emu_cpu_pct: r.emu_cpu_pct,
            tunnel_rtt_ms: r.tunnel_rtt_ms,
        })
        .collect();
    csv_rows::to_string(&rows)
}

/// Throughput against the swept variable (N, or RTT when N is fixed),
/// one line per test and the ideal as a dashed line; with several case
/// families (combos, loss rates, an extra link) a panel per family on
/// shared axes.
pub fn svg(scenario: &str, rows: &[Row]) -> String {
    let by_n = {
        let mut ns: Vec<usize> = rows.iter().map(|r| r.n).collect();
        ns.dedup();
        ns.len() > 1 || rows.iter().all(|r| r.rtt_ms.is_none())
    };
    let x_of = |r: &Row| {
        if by_n {
            r.n as f64
        } else {
            r.rtt_ms.unwrap_or(0.0)
        }
    };
    // Per family, series keyed by everything but x, in first-seen order.
    let mut fams: Vec<(String, Vec<Line>)> = Vec::new();
    for r in rows {
        let mut fam = r.combo.clone();
        if !by_n {
            let _ = write!(fam, " N={}", r.n);
        }
        if let Some(l) = r.loss {
            let _ = write!(fam, " per={:.0}%", l * 100.0);
        }
        if r.extra {
            fam += " +terr";
        }
        if !fams.iter().any(|f| f.0 == fam) {
            fams.push((fam.clone(), Vec::new()));
        }
        let Some((_, series)) = fams.iter_mut().find(|f| f.0 == fam) else {
            continue;
        };
        let mut push = |label: String, x: f64, y: f64, dashed: bool| {
            if let Some(s) = series.iter_mut().find(|s| s.0 == label) {
                s.1.push((x, y));
            } else {
                series.push((label, vec![(x, y)], dashed));
            }
        };
        let x = x_of(r);
        push("ideal".into(), x, r.ideal_mbps, true);
        for (name, m) in [
            ("UDP", &r.udp),
            ("TCP", &r.tcp),
            ("TCP accelerated", &r.accel_tcp),
            ("HTTP", &r.http),
            ("raw UDP", &r.raw_udp),
            ("raw TCP", &r.raw_tcp),
        ] {
            if let Some(m) = m {
                let raw = name.starts_with("raw");
                let (y, label) = if raw && by_n {
                    (m.mbps * r.n as f64, format!("N x {name}"))
                } else {
                    (m.mbps, name.to_string())
                };
                push(label, x, y, raw);
            }
        }
    }
    let chart = |title: String, lines: Vec<Line>| Chart {
        title,
        xlabel: if by_n { "paths (N)" } else { "RTT (ms)" }.into(),
        ylabel: "Mbit/s".into(),
        series: lines
            .into_iter()
            .map(|(label, points, dashed)| Series {
                color: (label == "ideal").then_some(IDEAL_COLOR),
                label,
                points,
                dashed,
                ..Series::default()
            })
            .collect(),
        x_ticks: if by_n { XTicks::AtData } else { XTicks::Nice },
        ..Chart::default()
    };
    let title = format!(
        "mpt bench {scenario}: goodput vs {}",
        if by_n { "number of paths" } else { "RTT" }
    );
    if fams.len() == 1 {
        let (fam, lines) = fams.remove(0);
        return chart(format!("{title} ({fam})"), lines).render();
    }
    Panels {
        title: format!("{title}, a panel per case family"),
        charts: fams
            .into_iter()
            .map(|(fam, lines)| chart(fam, lines))
            .collect(),
        cols: 2,
        share_y: true,
    }
    .render()
}

/// The ideal lines' colour: grey, beside the palette's.
const IDEAL_COLOR: &str = "#777";

/// A plot line: label, points, dashed.
type Line = (String, Vec<(f64, f64)>, bool);
