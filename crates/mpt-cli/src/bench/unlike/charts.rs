//! `unlike` charts beside the bars of [`super::report`]: the CDF of the
//! resequencing hold of the kept tunnel run, a line per case and
//! congestion control (mptd B's histogram: power-of-two ms buckets, so
//! the CDF is known at the bucket limits only).

use crate::bench::chart::line::{Chart, Series};
use crate::bench::chart::scale::Axis;
use crate::bench::report::row::Row;

/// The hold CDF over all delivered packets (not held = 0 ms); `None`
/// when no run kept a histogram (results of older builds).
pub fn hold_cdf(scenario: &str, rows: &[Row]) -> Option<String> {
    let mut c = Chart {
        title: format!(
            "mpt bench {scenario}: resequencing hold, CDF over delivered packets (kept tunnel run)"
        ),
        xlabel: "hold at mptd B (ms; bucket upper limits)".into(),
        ylabel: "fraction of delivered packets".into(),
        y_axis: Some(Axis::fixed(0.0, 1.0)),
        ..Chart::default()
    };
    for u in rows.iter().filter_map(|r| r.unlike.as_ref()) {
        for run in &u.runs {
            let Some(h) = &run.hold else { continue };
            let cdf = h.cdf();
            if cdf.is_empty() {
                continue;
            }
            c.series.push(Series {
                label: format!(
                    "{} {} ({:.1} % held)",
                    u.case,
                    run.cc,
                    100.0 * h.held as f64 / h.delivered.max(1) as f64
                ),
                points: cdf,
                step: true,
                ..Series::default()
            });
        }
    }
    (!c.series.is_empty()).then(|| c.render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::hold::HoldCheck;
    use crate::bench::unlike::result::{CcRun, UnlikeResult};

    #[test]
    fn a_line_per_case_and_cc() {
        let mut counts = vec![0u64; 12];
        counts[2] = 30; // 2..4 ms
        counts[4] = 10; // 8..16 ms
        let row = Row {
            unlike: Some(UnlikeResult {
                case: "geo+dsl".into(),
                runs: vec![CcRun {
                    cc: "bbr".into(),
                    hold: Some(HoldCheck {
                        delivered: 100,
                        held: 40,
                        hold_counts: counts,
                        max_hold_ms: Some(12.0),
                        ..HoldCheck::default()
                    }),
                    ..CcRun::default()
                }],
                ..UnlikeResult::default()
            }),
            ..Row::default()
        };
        let h = row
            .unlike
            .as_ref()
            .and_then(|u| u.runs[0].hold.clone())
            .expect("hold");
        assert_eq!(h.cdf(), [(0.0, 0.6), (4.0, 0.9), (12.0, 1.0)]);
        let s = hold_cdf("unlike", &[row]).expect("chart");
        assert!(s.contains("geo+dsl bbr (40.0 % held)"), "{s}");
        assert_eq!(hold_cdf("unlike", &[Row::default()]), None);
    }
}
