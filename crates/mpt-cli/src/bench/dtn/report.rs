//! `dtn-relay` results as a table, results.csv and plot.svg (bundle goodput
//! against the satellite RTT, one line per PER).

use crate::bench::chart::line::{Chart, Series};
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

pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "combo,sat_rtt_ms,total_rtt_ms,per,contacts,bundle_bytes,sent,delivered,delivery_ratio,\
         goodput_mbps,elapsed_s,delivery_p50_s,delivery_max_s,cpu_a_pct,cpu_b_pct\n",
    );
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
    for row in rows {
        let Some(d) = &row.dtn else { continue };
        s += &format!(
            "{},{:.1},{:.1},{},{},{},{},{},{:.4},{:.4},{:.2},{},{},{},{}\n",
            row.combo,
            d.sat_rtt_ms,
            d.total_rtt_ms,
            d.per,
            d.contacts.as_deref().unwrap_or("always"),
            d.bundle_bytes,
            d.sent,
            d.delivered,
            d.delivery_ratio,
            d.goodput_mbps,
            d.elapsed_s,
            o(d.delivery_p50_s),
            o(d.delivery_max_s),
            o(row.cpu_a_pct),
            o(row.cpu_b_pct),
        );
    }
    s
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
