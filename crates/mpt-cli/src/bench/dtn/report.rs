//! `dtn-relay` results as a table (with the 800 ms / 200 ms ratios the
//! issue's target reads), results.csv and plot.svg (bundle goodput and
//! end-to-end TCP against the GEO RTT, one pair of lines per PER).

use serde::Serialize;

use super::goodput::ratio;
use super::result::DtnResult;
use crate::bench::chart::line::{Chart, Series, XTicks};
use crate::bench::csv_rows::{self, f1, f2, f4, opt3, plain, CsvError};
use crate::bench::report::row::Row;
use crate::bench::text::opt;

fn dtn_rows(rows: &[Row]) -> impl Iterator<Item = &DtnResult> {
    rows.iter().filter_map(|r| r.dtn.as_ref())
}

/// (PER, smallest RTT, largest RTT, bundle ratio, TCP ratio).
pub type RttRatio = (f64, f64, f64, Option<f64>, Option<f64>);

/// For each PER: goodput at the largest RTT over goodput at the smallest,
/// for bundles and for end-to-end TCP.
pub fn rtt_ratios(rows: &[Row]) -> Vec<RttRatio> {
    let mut pers: Vec<f64> = dtn_rows(rows).map(|d| d.per).collect();
    pers.sort_by(f64::total_cmp);
    pers.dedup();
    pers.into_iter()
        .filter_map(|per| {
            let mut v: Vec<&DtnResult> = dtn_rows(rows).filter(|d| d.per == per).collect();
            v.sort_by(|a, b| a.sat_rtt_ms.total_cmp(&b.sat_rtt_ms));
            let (lo, hi) = (v.first()?, v.last()?);
            (hi.sat_rtt_ms > lo.sat_rtt_ms).then(|| {
                (
                    per,
                    lo.sat_rtt_ms,
                    hi.sat_rtt_ms,
                    ratio(hi.bundle_mbps, lo.bundle_mbps),
                    ratio(hi.tcp_mbps, lo.tcp_mbps),
                )
            })
        })
        .collect()
}

fn gap_cell(d: &DtnResult) -> String {
    match &d.gap {
        None => "-".into(),
        Some(g) => {
            let o = &g.outcome;
            format!(
                "{}/{}{}",
                o.delivered,
                o.sent,
                if o.all_delivered() { " ok" } else { " LOST" }
            )
        }
    }
}

pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<6} {:>7} {:>5} {:>9} {:>9} {:>8} {:>9} {:>9} {:>10} {:>9} {:>9}\n",
        "combo",
        "GEO RTT",
        "PER%",
        "bundles",
        "e2e TCP",
        "bnd/TCP",
        "competing",
        "gap",
        "after gap",
        "last s",
        "load"
    );
    for row in rows {
        let Some(d) = &row.dtn else { continue };
        let (after, last) = match &d.gap {
            Some(g) => (
                format!("{}", g.outcome.after_gap),
                opt(g.outcome.last_after_gap_s, 2),
            ),
            None => ("-".into(), "-".into()),
        };
        s += &format!(
            "{:<6} {:>7.0} {:>5.1} {:>9} {:>9} {:>8} {:>9} {:>9} {:>10} {:>9} {:>9}\n",
            row.combo,
            d.sat_rtt_ms,
            d.per * 100.0,
            opt(d.bundle_mbps, 2),
            opt(d.tcp_mbps, 2),
            opt(ratio(d.bundle_mbps, d.tcp_mbps), 2),
            opt(d.competing_bundle_phase_mbps, 2),
            gap_cell(d),
            after,
            last,
            format!("{}/{}", opt(d.load_before, 1), opt(d.load_after, 1)),
        );
    }
    if let Some(cc) = dtn_rows(rows).find_map(|d| d.cc.as_deref()) {
        s += &format!("TCP congestion control of every flow: {cc}\n");
    }
    s += "Mbit/s; bundles = steady goodput through the relay (dtnd src -> relay -> dst), e2e TCP = \
          one TCP flow S -> B through the tunnel, both beside the competing flows on the terrestrial \
          hop (their sum during the bundle run shown); gap = bundles delivered intact / sent around \
          a GEO outage (ids and payload digests checked), of which after the gap's end, the last \
          one s after it; load = 1-min load average before/after the case\n";
    for (per, lo, hi, b, t) in rtt_ratios(rows) {
        s += &format!(
            "PER {:.0} %: goodput at {hi:.0} ms / at {lo:.0} ms: bundles {}, end-to-end TCP {} \
             (target: bundles >= 0.8 at PER 0)\n",
            per * 100.0,
            opt(b, 2),
            opt(t, 2)
        );
    }
    s
}

/// One results.csv row of `dtn-relay`.
#[derive(Debug, Default, Serialize)]
struct CsvRow<'a> {
    combo: &'a str,
    #[serde(serialize_with = "f1")]
    sat_rtt_ms: f64,
    #[serde(serialize_with = "f1")]
    terr_rtt_ms: f64,
    #[serde(serialize_with = "plain")]
    per: f64,
    bundle_bytes: usize,
    window: u32,
    competing_flows: u32,
    cc: &'a str,
    #[serde(serialize_with = "opt3")]
    bundle_mbps: Option<f64>,
    #[serde(serialize_with = "f4")]
    bundle_window_mbps: f64,
    bundles_submitted: usize,
    bundles_delivered: usize,
    bundles_duplicate: usize,
    bundles_corrupt: usize,
    #[serde(serialize_with = "opt3")]
    tcp_mbps: Option<f64>,
    tcp_retransmits: Option<u64>,
    #[serde(serialize_with = "opt3")]
    competing_tcp_phase_mbps: Option<f64>,
    #[serde(serialize_with = "opt3")]
    competing_bundle_phase_mbps: Option<f64>,
    tcp_first: bool,
    #[serde(serialize_with = "opt3")]
    backlog_drain_s: Option<f64>,
    gap_sent: Option<usize>,
    gap_delivered: Option<usize>,
    gap_after: Option<usize>,
    gap_missing: Option<usize>,
    gap_corrupt: Option<usize>,
    #[serde(serialize_with = "opt3")]
    gap_last_after_s: Option<f64>,
    #[serde(serialize_with = "opt3")]
    load_before: Option<f64>,
    #[serde(serialize_with = "opt3")]
    load_after: Option<f64>,
    #[serde(serialize_with = "f2")]
    duration_s: f64,
}

/// results.csv: one row per case.
pub fn csv(rows: &[Row]) -> Result<String, CsvError> {
    let rows: Vec<CsvRow> = rows
        .iter()
        .filter_map(|row| row.dtn.as_ref().map(|d| (row, d)))
        .map(|(row, d)| {
            let g = d.gap.as_ref().map(|g| &g.outcome);
            CsvRow {
                combo: &row.combo,
                sat_rtt_ms: d.sat_rtt_ms,
                terr_rtt_ms: d.terr_rtt_ms,
                per: d.per,
                bundle_bytes: d.bundle_bytes,
                window: d.window,
                competing_flows: d.competing_flows,
                cc: d.cc.as_deref().unwrap_or(""),
                bundle_mbps: d.bundle_mbps,
                bundle_window_mbps: d.bundle_window_mbps,
                bundles_submitted: d.bundles_submitted,
                bundles_delivered: d.bundles_delivered,
                bundles_duplicate: d.bundles_duplicate,
                bundles_corrupt: d.bundles_corrupt,
                tcp_mbps: d.tcp_mbps,
                tcp_retransmits: d.tcp_retransmits,
                competing_tcp_phase_mbps: d.competing_tcp_phase_mbps,
                competing_bundle_phase_mbps: d.competing_bundle_phase_mbps,
                tcp_first: d.tcp_first,
                backlog_drain_s: d.backlog_drain_s,
                gap_sent: g.map(|o| o.sent),
                gap_delivered: g.map(|o| o.delivered),
                gap_after: g.map(|o| o.after_gap),
                gap_missing: g.map(|o| o.missing.len()),
                gap_corrupt: g.map(|o| o.corrupt.len()),
                gap_last_after_s: g.and_then(|o| o.last_after_gap_s),
                load_before: d.load_before,
                load_after: d.load_after,
                duration_s: d.duration_s,
            }
        })
        .collect();
    csv_rows::to_string(&rows)
}

/// Goodput against the GEO RTT: bundles (solid) and end-to-end TCP
/// (dashed), a pair per PER.
pub fn svg(scenario: &str, rows: &[Row]) -> String {
    let mut c = Chart {
        title: format!("mpt bench {scenario}: bundles via the relay vs end-to-end TCP"),
        xlabel: "GEO hop RTT (ms)".into(),
        ylabel: "goodput (Mbit/s)".into(),
        x_ticks: XTicks::AtData,
        ..Chart::default()
    };
    for d in dtn_rows(rows) {
        let per = d.per * 100.0;
        for (label, y, dashed) in [
            (
                format!("bundles via relay, PER {per:.0}%"),
                d.bundle_mbps,
                false,
            ),
            (format!("end-to-end TCP, PER {per:.0}%"), d.tcp_mbps, true),
        ] {
            let Some(y) = y else { continue };
            match c.series.iter_mut().find(|s| s.label == label) {
                Some(s) => s.points.push((d.sat_rtt_ms, y)),
                None => c.series.push(Series {
                    label,
                    points: vec![(d.sat_rtt_ms, y)],
                    dashed,
                    ..Series::default()
                }),
            }
        }
    }
    for s in &mut c.series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rtt: f64, per: f64, bundles: f64, tcp: f64) -> Row {
        Row {
            combo: "4in4".into(),
            dtn: Some(DtnResult {
                sat_rtt_ms: rtt,
                per,
                bundle_mbps: Some(bundles),
                tcp_mbps: Some(tcp),
                ..DtnResult::default()
            }),
            ..Row::default()
        }
    }

    #[test]
    fn ratios_per_loss_rate_from_the_sweep_ends() {
        let rows = [
            row(200.0, 0.0, 1.6, 1.2),
            row(800.0, 0.0, 1.5, 0.3),
            row(400.0, 0.0, 1.55, 0.6),
            row(200.0, 0.01, 1.0, 0.5),
            row(800.0, 0.01, 0.5, 0.1),
        ];
        let r = rtt_ratios(&rows);
        assert_eq!(r.len(), 2);
        let (per, lo, hi, b, t) = r[0];
        assert_eq!((per, lo, hi), (0.0, 200.0, 800.0));
        assert!((b.unwrap() - 1.5 / 1.6).abs() < 1e-9);
        assert!((t.unwrap() - 0.25).abs() < 1e-9);
        let text = table(&rows);
        assert!(
            text.contains("PER 0 %: goodput at 800 ms / at 200 ms: bundles 0.94"),
            "{text}"
        );
        let csv = csv(&rows).unwrap();
        assert_eq!(csv.lines().count(), 6);
        let svg = svg("dtn-relay", &rows);
        assert!(svg.contains("bundles via relay, PER 0%"));
        assert!(svg.contains("end-to-end TCP, PER 1%"));
    }
}
