//! `dtn-relay` results as a table, results.csv and plot.svg (bundle goodput
//! against the satellite RTT, one line per PER).

use serde::Serialize;

use crate::bench::chart::line::{Chart, Series};
use crate::bench::csv_rows::{self, f1, f2, f4, opt3, plain, CsvError};
use crate::bench::report::row::Row;
use crate::bench::text::opt;

pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<8} {:>8} {:>9} {:>5} {:>9} {:>6} {:>6} {:>6} {:>9} {:>8} {:>8} {:>9}\n",
        "combo",
        "sat RTT",
        "e2e RTT",
        "PER%",
        "contacts",
        "sent",
        "acked",
        "ratio",
        "goodput",
        "t p50 s",
        "t max s",
        "CPU A/B/emu %"
    );
    for row in rows {
        let Some(d) = &row.dtn else { continue };
        s += &format!(
            "{:<8} {:>8.0} {:>9.0} {:>5.1} {:>9} {:>6} {:>6} {:>6.2} {:>9.2} {:>8} {:>8} {:>9}\n",
            row.combo,
            d.sat_rtt_ms,
            d.total_rtt_ms,
            d.per * 100.0,
            d.contacts.as_deref().unwrap_or("always"),
            d.sent,
            d.delivered,
            d.delivery_ratio,
            d.goodput_mbps,
            opt(d.delivery_p50_s, 2),
            opt(d.delivery_max_s, 2),
            format!(
                "{}/{}/{}",
                opt(row.cpu_a_pct, 0),
                opt(row.cpu_b_pct, 0),
                opt(row.emu_cpu_pct, 0)
            ),
        );
    }
    s += "RTT ms (e2e = wired + satellite hop); contacts UP/DOWN of the satellite hop; bundles of \
          the given size with window 1; ratio = acknowledged / sent; goodput Mbit/s of acknowledged bundles; \
          t = bundle delivery (ack) time\n";
    s
}

/// One results.csv row of `dtn-relay`.
#[derive(Debug, Default, Serialize)]
struct CsvRow<'a> {
    combo: &'a str,
    #[serde(serialize_with = "f1")]
    sat_rtt_ms: f64,
    #[serde(serialize_with = "f1")]
    total_rtt_ms: f64,
    #[serde(serialize_with = "plain")]
    per: f64,
    contacts: &'a str,
    bundle_bytes: usize,
    sent: u64,
    delivered: u64,
    #[serde(serialize_with = "f4")]
    delivery_ratio: f64,
    #[serde(serialize_with = "f4")]
    goodput_mbps: f64,
    #[serde(serialize_with = "f2")]
    elapsed_s: f64,
    #[serde(serialize_with = "opt3")]
    delivery_p50_s: Option<f64>,
    #[serde(serialize_with = "opt3")]
    delivery_max_s: Option<f64>,
    #[serde(serialize_with = "opt3")]
    cpu_a_pct: Option<f64>,
    #[serde(serialize_with = "opt3")]
    cpu_b_pct: Option<f64>,
}

/// results.csv: one row per case.
pub fn csv(rows: &[Row]) -> Result<String, CsvError> {
    let rows: Vec<CsvRow> = rows
        .iter()
        .filter_map(|row| row.dtn.as_ref().map(|d| (row, d)))
        .map(|(row, d)| CsvRow {
            combo: &row.combo,
            sat_rtt_ms: d.sat_rtt_ms,
            total_rtt_ms: d.total_rtt_ms,
            per: d.per,
            contacts: d.contacts.as_deref().unwrap_or("always"),
            bundle_bytes: d.bundle_bytes,
            sent: d.sent,
            delivered: d.delivered,
            delivery_ratio: d.delivery_ratio,
            goodput_mbps: d.goodput_mbps,
            elapsed_s: d.elapsed_s,
            delivery_p50_s: d.delivery_p50_s,
            delivery_max_s: d.delivery_max_s,
            cpu_a_pct: row.cpu_a_pct,
            cpu_b_pct: row.cpu_b_pct,
        })
        .collect();
    csv_rows::to_string(&rows)
}

/// Goodput against the satellite RTT, one line per PER.
pub fn svg(scenario: &str, rows: &[Row]) -> String {
    let mut c = Chart {
        title: format!(
            "mpt bench {}: bundle goodput vs satellite RTT (W = 1)",
            scenario
        ),
        xlabel: "satellite hop RTT (ms)".into(),
        ylabel: "goodput (Mbit/s)".into(),
        ..Chart::default()
    };
    for row in rows {
        let Some(d) = &row.dtn else { continue };
        let label = format!("{} PER {:.0}%", row.combo, d.per * 100.0);
        match c.series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((d.sat_rtt_ms, d.goodput_mbps)),
            None => c.series.push(Series {
                label,
                points: vec![(d.sat_rtt_ms, d.goodput_mbps)],
                ..Series::default()
            }),
        }
    }
    c.render()
}
