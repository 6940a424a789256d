//! `lte-gateway` and `handover` charts: VoIP one-way delay over time in a
//! panel per variant (lost packets as marks in a strip above, the WiFi
//! outage shaded), the CDF of the VoIP delay of every variant in one
//! chart, and the bulk TCP goodput per second per variant (with kernel
//! MPTCP's across the same outage, where it ran).

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

/// (second, Mbit/s) points of a per-second series, the first second at 1.
fn per_second(v: &[f64]) -> Vec<(f64, f64)> {
    v.iter()
        .enumerate()
        .map(|(i, v)| (i as f64 + 1.0, *v))
        .collect()
}

/// The bulk TCP flow's goodput per second, a panel per variant, with
/// kernel MPTCP's beside it (dashed) where the baseline ran.
pub fn tcp_per_second(scenario: &str, rows: &[Row]) -> Option<String> {
    let charts: Vec<Chart> = results(rows)
        .filter_map(|l| {
            let st = l.stall.as_ref().filter(|st| !st.mbps_per_s.is_empty())?;
            Some(Chart {
                title: l.variant.clone(),
                xlabel: "time since the first byte (s)".into(),
                ylabel: "goodput (Mbit/s)".into(),
                series: std::iter::once(Series {
                    label: format!("mpt, TCP {}", st.cc),
                    points: per_second(&st.mbps_per_s),
                    ..Series::default()
                })
                .chain(l.mptcp.as_ref().map(|b| Series {
                    label: format!("kernel MPTCP, {}", b.stall.cc),
                    points: per_second(&b.stall.mbps_per_s),
                    dashed: true,
                    ..Series::default()
                }))
                .collect(),
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
        let mut rows = vec![row("WiFi silent"), row("link down")];
        if let Some(l) = rows[0].lte.as_mut() {
            l.mptcp = Some(crate::bench::lte::mptcp::HandoverMptcp {
                stall: StallStats {
                    cc: "cubic".into(),
                    mbps_per_s: vec![8.0, 3.0, 8.0],
                    ..StallStats::default()
                },
                ..Default::default()
            });
        }
        let s = delay_over_time("handover", &rows);
        assert_eq!(s.matches(">WiFi outage</text>").count(), 2);
        assert_eq!(s.matches("lost packets (1, top strip)").count(), 2);
        let cdf = delay_cdf("handover", &rows).expect("cdf");
        assert!(cdf.contains("WiFi silent (1 lost)") && cdf.contains(">1.0</text>"));
        let tcp = tcp_per_second("handover", &rows).expect("per second");
        assert!(tcp.contains("mpt, TCP cubic"), "{tcp}");
        assert_eq!(tcp.matches(">kernel MPTCP, cubic<").count(), 1, "{tcp}");
        assert_eq!(tcp_per_second("handover", &[Row::default()]), None);
    }
}
