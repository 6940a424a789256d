//! `lte-gateway` and `handover` charts: VoIP one-way delay over time in a
//! panel per variant (lost packets as marks in a strip above, the WiFi
//! outage shaded), the CDF of the VoIP delay of every variant in one
//! chart, and the bulk TCP goodput per second per variant.

use crate::bench::chart::line::{Chart, Series};
use crate::bench::chart::panels::Panels;
use crate::bench::chart::scale::Axis;
use crate::bench::lte::result::LteResult;
use crate::bench::report::row::Row;

fn results(rows: &[Row]) -> impl Iterator<Item = &LteResult> {
    rows.iter().filter_map(|r| r.lte.as_ref())
}

fn outage(l: &LteResult) -> (f64, f64, String) {
    (
        l.handover_at_s,
        l.handover_at_s + l.handover_len_s,
        "WiFi outage".into(),
    )
}

/// VoIP one-way delay over time (dots), a panel per variant.
pub fn delay_over_time(scenario: &str, rows: &[Row]) -> String {
    let charts = results(rows)
        .map(|l| Chart {
            title: l.variant.clone(),
            xlabel: "time since start (s)".into(),
            ylabel: "VoIP one-way delay (ms)".into(),
            series: vec![Series {
                label: format!("delivered ({})", l.voip.received),
                points: l
                    .timeline
                    .iter()
                    .filter_map(|(t, d)| d.map(|d| (*t, d)))
                    .collect(),
                dots: true,
                ..Series::default()
            }],
            lost: l
                .timeline
                .iter()
                .filter(|(_, d)| d.is_none())
                .map(|(t, _)| *t)
                .collect(),
            shade: vec![outage(l)],
            ..Chart::default()
        })
        .collect();
    Panels {
        title: format!("mpt bench {scenario}: VoIP one-way delay over time, a panel per variant"),
        charts,
        cols: 2,
        share_y: true,
    }
    .render()
}

/// The CDF of the VoIP one-way delay of the delivered packets, a line per
/// variant (lost packets are left out; the legend counts them).
pub fn delay_cdf(scenario: &str, rows: &[Row]) -> Option<String> {
    let mut c = Chart {
        title: format!("mpt bench {scenario}: VoIP one-way delay, CDF of delivered packets"),
        xlabel: "one-way delay (ms)".into(),
        ylabel: "fraction of delivered packets".into(),
        y_axis: Some(Axis::fixed(0.0, 1.0)),
        ..Chart::default()
    };
    for l in results(rows) {
        let mut d: Vec<f64> = l.timeline.iter().filter_map(|(_, d)| *d).collect();
        if d.is_empty() {
            continue;
        }
        d.sort_by(f64::total_cmp);
        let n = d.len() as f64;
        let lost = l.timeline.len() - d.len();
        c.series.push(Series {
            label: format!("{} ({lost} lost)", l.variant),
            points: d
                .iter()
                .enumerate()
                .map(|(i, v)| (*v, (i + 1) as f64 / n))
                .collect(),
            step: true,
            ..Series::default()
        });
    }
    (!c.series.is_empty()).then(|| c.render())
}

/// The bulk TCP flow's goodput per second, a panel per variant.
pub fn tcp_per_second(scenario: &str, rows: &[Row]) -> Option<String> {
    let charts: Vec<Chart> = results(rows)
        .filter_map(|l| {
            let st = l.stall.as_ref().filter(|st| !st.mbps_per_s.is_empty())?;
            Some(Chart {
                title: l.variant.clone(),
                xlabel: "time since the first byte (s)".into(),
                ylabel: "goodput (Mbit/s)".into(),
                series: vec![Series {
                    label: format!("TCP {}", st.cc),
                    points: st
                        .mbps_per_s
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (i as f64 + 1.0, *v))
                        .collect(),
                    ..Series::default()
                }],
                shade: vec![outage(l)],
                ..Chart::default()
            })
        })
        .collect();
    (!charts.is_empty()).then(|| {
        Panels {
            title: format!(
                "mpt bench {scenario}: bulk TCP goodput per second, a panel per variant"
            ),
            charts,
            cols: 2,
            share_y: true,
        }
        .render()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stall::StallStats;

    #[test]
    fn panels_cdf_and_per_second() {
        let row = |variant: &str| Row {
            lte: Some(LteResult {
                variant: variant.into(),
                handover_at_s: 1.0,
                handover_len_s: 1.0,
                timeline: vec![
                    (0.5, Some(30.0)),
                    (1.2, None),
                    (1.5, Some(80.0)),
                    (2.5, Some(31.0)),
                ],
                stall: Some(StallStats {
                    cc: "cubic".into(),
                    mbps_per_s: vec![10.0, 2.0, 9.0],
                    ..StallStats::default()
                }),
                ..LteResult::default()
            }),
            ..Row::default()
        };
        let rows = vec![row("WiFi silent"), row("link down")];
        let s = delay_over_time("handover", &rows);
        assert_eq!(s.matches(">WiFi outage</text>").count(), 2);
        assert_eq!(s.matches("lost packets (1, top strip)").count(), 2);
        let cdf = delay_cdf("handover", &rows).expect("cdf");
        assert!(cdf.contains("WiFi silent (1 lost)") && cdf.contains(">1.0</text>"));
        let tcp = tcp_per_second("handover", &rows).expect("per second");
        assert!(tcp.contains("TCP cubic"));
        assert_eq!(tcp_per_second("handover", &[Row::default()]), None);
    }
}
