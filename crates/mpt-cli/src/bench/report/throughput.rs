//! The generic scenarios' results (`ethernet`, `satellite`, files of the
//! same kind): goodput of UDP, TCP and HTTP through the tunnel against the
//! ideal and the raw single-path baselines, as a table, results.csv and a
//! line chart against the swept variable.

use std::fmt::Write as _;

use super::row::Row;
use crate::bench::chart::line::{Chart, Series, XTicks};
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
        "{:<30} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>8} {:>8} {:>6} {:>6} {:>13}",
        "case",
        "ideal",
        "UDP",
        "TCP",
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
            "{:<30} {:>8.1} {:>8} {:>8} {:>8} {:>6} {:>6} {:>8} {:>8} {:>6} {:>6} {:>13}",
            case_label(r),
            r.ideal_mbps,
            opt(mbps(&r.udp), 1),
            opt(mbps(&r.tcp), 1),
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
    if streams > 1 {
        let _ = writeln!(
            s,
            "TCP and raw TCP: {} parallel streams (iperf3 -P), goodput summed",
            streams
        );
    }
    s
}

pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "combo,n,paths,rtt_ms,loss,extra,ideal_mbps,udp_mbps,udp_sent_mbps,udp_loss_pct,\
         tcp_mbps,tcp_retransmits,http_mbps,raw_udp_mbps,raw_tcp_mbps,udp_frac_ideal,tcp_frac_ideal,\
         udp_frac_raw,tcp_frac_raw,cpu_a_pct,cpu_b_pct,emu_cpu_pct,tunnel_rtt_ms\n",
    );
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.4}"));
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{:.1},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.combo,
            r.n,
            r.paths,
            o(r.rtt_ms),
            o(r.loss),
            r.extra,
            r.ideal_mbps,
            o(mbps(&r.udp)),
            o(r.udp.as_ref().and_then(|m| m.sent_mbps)),
            o(r.udp.as_ref().and_then(|m| m.loss_pct)),
            o(mbps(&r.tcp)),
            r.tcp
                .as_ref()
                .and_then(|m| m.retransmits)
                .map_or_else(String::new, |v| v.to_string()),
            o(mbps(&r.http)),
            o(mbps(&r.raw_udp)),
            o(mbps(&r.raw_tcp)),
            o(r.udp_frac_ideal),
            o(r.tcp_frac_ideal),
            o(r.udp_frac_raw),
            o(r.tcp_frac_raw),
            o(r.cpu_a_pct),
            o(r.cpu_b_pct),
            o(r.emu_cpu_pct),
            o(r.tunnel_rtt_ms),
        );
    }
    s
}

/// Throughput against the swept variable (N, or RTT when N is fixed),
/// one line per test and case family, and the ideal as a dashed line.
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
    // Series keyed by everything but x, in first-seen order.
    let mut series: Vec<Line> = Vec::new();
    let mut push = |label: String, x: f64, y: f64, dashed: bool| {
        if let Some(s) = series.iter_mut().find(|s| s.0 == label) {
            s.1.push((x, y));
        } else {
            series.push((label, vec![(x, y)], dashed));
        }
    };
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
        let x = x_of(r);
        push(format!("ideal {fam}"), x, r.ideal_mbps, true);
        for (name, m) in [
            ("UDP", &r.udp),
            ("TCP", &r.tcp),
            ("HTTP", &r.http),
            ("raw UDP", &r.raw_udp),
            ("raw TCP", &r.raw_tcp),
        ] {
            if let Some(m) = m {
                let y = if name.starts_with("raw") && by_n {
                    m.mbps * r.n as f64
                } else {
                    m.mbps
                };
                let label = if name.starts_with("raw") && by_n {
                    format!("N x {name} {fam}")
                } else {
                    format!("{name} {fam}")
                };
                push(label, x, y, name.starts_with("raw"));
            }
        }
    }
    // Ideal lines that coincide are drawn once.
    let mut seen: Vec<Vec<(u64, u64)>> = Vec::new();
    series.retain(|(label, pts, _)| {
        if !label.starts_with("ideal") {
            return true;
        }
        let key: Vec<(u64, u64)> = pts
            .iter()
            .map(|(x, y)| (x.to_bits(), y.to_bits()))
            .collect();
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    Chart {
        title: format!(
            "mpt bench {scenario}: goodput vs {}",
            if by_n { "number of paths" } else { "RTT" }
        ),
        xlabel: if by_n { "paths (N)" } else { "RTT (ms)" }.into(),
        ylabel: "Mbit/s".into(),
        series: series
            .into_iter()
            .map(|(label, points, dashed)| Series {
                color: label.starts_with("ideal").then_some(IDEAL_COLOR),
                label,
                points,
                dashed,
                ..Series::default()
            })
            .collect(),
        x_ticks: XTicks::AtData,
        ..Chart::default()
    }
    .render()
}

/// The ideal lines' colour: grey, beside the palette's.
const IDEAL_COLOR: &str = "#777";

/// A plot line: label, points, dashed.
type Line = (String, Vec<(f64, f64)>, bool);
