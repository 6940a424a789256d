//! `unlike` results as a table (columns sized to their contents),
//! results.csv (one row per case and congestion control, path columns for
//! the most paths any case has) and plot.svg (bars per case).

use std::fmt::Write as _;

use super::result::UnlikeResult;
use super::text::{fmt_p99, hold_label, pass_label};
use crate::bench::chart::bar::{BarChart, BarGroup};
use crate::bench::hold;
use crate::bench::iperf::Measurement;
use crate::bench::report::row::Row;
use crate::bench::text::opt;

/// Lays out rows of cells in columns (the first `left` columns left-aligned).
fn columns(rows: &[Vec<String>], left: usize) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c < left {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}

fn results(rows: &[Row]) -> impl Iterator<Item = (&Row, &UnlikeResult)> {
    rows.iter()
        .filter_map(|row| row.unlike.as_ref().map(|u| (row, u)))
}

pub fn table(case_rows: &[Row], duration_s: f64) -> String {
    let mut rows = vec![vec![
        "case".to_string(),
        "cc".into(),
        "raw per path alone".into(),
        "best".into(),
        "sum".into(),
        "tunnel".into(),
        "runs min..max".into(),
        "/best".into(),
        "/sum".into(),
        "target".into(),
        "result".into(),
        "hold p99 ms".into(),
        "spread ms".into(),
        "measured".into(),
        "hold".into(),
        "CPU A/B %".into(),
    ]];
    let mut omit = 0.0;
    let mut repeats: Vec<usize> = Vec::new();
    for (_, u) in results(case_rows) {
        omit = u.omit_s;
        for run in &u.runs {
            let n = run.tunnel_runs_mbps.len().max(1);
            if !repeats.contains(&n) {
                repeats.push(n);
            }
            let raw: Vec<String> = u
                .paths
                .iter()
                .zip(&run.raw)
                .map(|(p, m)| format!("{} {:.2}", p.name, m.mbps))
                .collect();
            rows.push(vec![
                u.case.clone(),
                run.cc.clone(),
                raw.join(" + "),
                format!("{:.2}", run.verdict.best_raw_mbps),
                format!("{:.2}", run.verdict.sum_raw_mbps),
                format!("{:.2}", run.tunnel.mbps),
                run.tunnel_range().map_or("-".into(), |(lo, hi)| {
                    format!("{}: {lo:.2}..{hi:.2}", run.tunnel_runs_mbps.len())
                }),
                opt(run.verdict.frac_best, 2),
                opt(run.verdict.frac_sum, 2),
                u.target.map_or("-".into(), |t| t.label()),
                pass_label(run.verdict.pass).into(),
                run.hold.as_ref().map_or("-".into(), fmt_p99),
                run.hold
                    .as_ref()
                    .map_or("-".into(), |h| format!("{:.1}", h.spread_ms)),
                run.hold
                    .as_ref()
                    .map_or("-".into(), |h| opt(h.measured_spread_ms, 1)),
                run.hold.as_ref().map_or("-", hold_label).into(),
                format!("{}/{}", opt(run.cpu_a_pct, 0), opt(run.cpu_b_pct, 0)),
            ]);
        }
    }
    let mut s = columns(&rows, 3);
    repeats.sort_unstable();
    let counts: Vec<String> = repeats.iter().map(usize::to_string).collect();
    let _ = writeln!(
        s,
        "Mbit/s: iperf3 TCP goodput at the receiver, one stream, over {:.0} s after leaving out the \
         first {omit:.0} s; raw = each path alone without the tunnel, same congestion control, one run \
         each; tunnel = the median of {} run(s) through the tunnel (the lower middle one for an even \
         count), the run judged, with its hold and CPU; runs min..max = count: lowest..highest tunnel \
         run; /best, /sum = tunnel / best raw path, / sum of raw paths; mptd's default scheduler \
         unless --scheduler, equal weights",
        duration_s,
        if counts.is_empty() { "1".into() } else { counts.join(" or ") }
    );
    let _ = writeln!(
        s,
        "hold p99: 99th percentile of the time mptd B's resequencer held a packet, over all packets it \
         delivered in the measured window (not held = 0), as the range of its histogram bucket (ms); \
         ~ = interpolated in the bucket; spread = slowest - fastest configured one-way delay; \
         measured = the spread mptd B measured on the paths bringing data, queueing included \
         (p99 of samples every 250 ms); hold: p99 <= measured (else configured) spread + {:.0} ms \
         (~PASS/~FAIL: the bucket straddles the limit, judged by the estimate); p99 over held \
         packets only in results.csv",
        hold::MARGIN_MS
    );
    for (_, u) in results(case_rows) {
        let paths: Vec<String> = u
            .paths
            .iter()
            .map(|p| {
                let mut d = format!(
                    "{} {} Mbit/s RTT {:.0} ms queue {} kB",
                    p.name,
                    opt(p.mean_rate_mbps, 1),
                    p.rtt_ms,
                    p.queue_bytes / 1000
                );
                if p.loss > 0.0 {
                    let _ = write!(d, " loss {:.1} %", p.loss * 100.0);
                }
                if let Some(t) = &p.trace {
                    let _ = write!(d, " (mean of trace {t})");
                }
                d
            })
            .collect();
        let _ = writeln!(s, "  {}: {}", u.case, paths.join("; "));
    }
    s
}

pub fn csv(rows: &[Row], duration_s: f64) -> String {
    let maxp = results(rows).map(|(_, u)| u.paths.len()).max().unwrap_or(0);
    let mut s = String::from("case,cc,paths");
    for i in 1..=maxp {
        let _ = write!(
            s,
            ",path{i}_name,path{i}_rate_mbps,path{i}_rtt_ms,path{i}_loss,path{i}_queue_bytes,\
             path{i}_raw_mbps,path{i}_raw_retransmits"
        );
    }
    s += ",best_raw_mbps,sum_raw_mbps,tunnel_mbps,tunnel_retransmits,tunnel_run,tunnel_runs_mbps,\
          frac_best,frac_sum,\
          target_of,target_ratio,required_mbps,pass,cpu_a_pct,cpu_b_pct,duration_s,omit_s,\
          hold_delivered,hold_held,hold_p99_all_lo_ms,hold_p99_all_ms,hold_p99_all_est_ms,hold_p99_held_ms,\
          hold_mean_held_ms,spread_ms,measured_spread_ms,hold_limit_ms,hold_pass,hold_pass_estimate\n";
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.4}"));
    let retr = |m: &Measurement| m.retransmits.map_or(String::new(), |v| v.to_string());
    for (_, u) in results(rows) {
        for run in &u.runs {
            let _ = write!(s, "{},{},{}", u.case, run.cc, u.paths.len());
            for i in 0..maxp {
                match (u.paths.get(i), run.raw.get(i)) {
                    (Some(p), Some(m)) => {
                        let _ = write!(
                            s,
                            ",{},{},{:.1},{},{},{:.4},{}",
                            p.name,
                            o(p.mean_rate_mbps),
                            p.rtt_ms,
                            p.loss,
                            p.queue_bytes,
                            m.mbps,
                            retr(m)
                        );
                    }
                    _ => s += ",,,,,,,",
                }
            }
            let v = &run.verdict;
            let _ = writeln!(
                s,
                ",{:.4},{:.4},{:.4},{},{},{},{},{},{},{},{:.4},{},{},{},{},{}",
                v.best_raw_mbps,
                v.sum_raw_mbps,
                run.tunnel.mbps,
                retr(&run.tunnel),
                run.tunnel_run,
                run.tunnel_runs_mbps
                    .iter()
                    .map(|m| format!("{m:.4}"))
                    .collect::<Vec<_>>()
                    .join("/"),
                o(v.frac_best),
                o(v.frac_sum),
                u.target.map_or("", |t| t.of.label()),
                u.target.map_or(String::new(), |t| t.ratio.to_string()),
                v.required_mbps,
                v.pass.map_or(String::new(), |p| p.to_string()),
                o(run.cpu_a_pct),
                o(run.cpu_b_pct),
                duration_s,
                u.omit_s
            );
            s.pop();
            match &run.hold {
                Some(h) => {
                    let _ = writeln!(
                        s,
                        ",{},{},{},{},{},{},{},{:.2},{},{:.2},{},{}",
                        h.delivered,
                        h.held,
                        o(h.p99_all_lo_ms),
                        o(h.p99_all_ms),
                        o(h.p99_all_est_ms),
                        o(h.p99_held_ms),
                        o(h.mean_held_ms),
                        h.spread_ms,
                        o(h.measured_spread_ms),
                        h.limit_ms,
                        h.pass.map_or(String::new(), |p| p.to_string()),
                        h.pass_estimate.map_or(String::new(), |p| p.to_string())
                    );
                }
                None => s += ",,,,,,,,,,,,\n",
            }
        }
    }
    s
}

/// Bars per case and congestion control: each raw path alone, the tunnel,
/// and the target as a dashed mark.
pub fn svg(scenario: &str, rows: &[Row]) -> String {
    let mut c = BarChart {
        title: format!(
            "mpt bench {}: one TCP stream, raw paths alone vs the tunnel",
            scenario
        ),
        ylabel: "goodput (Mbit/s)".into(),
        groups: Vec::new(),
    };
    for (_, u) in results(rows) {
        for run in &u.runs {
            let mut bars: Vec<(String, f64)> = run
                .raw
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("raw path {} alone", i + 1), m.mbps))
                .collect();
            // The median tunnel run (the one judged).
            bars.push(("tunnel".into(), run.tunnel.mbps));
            c.groups.push(BarGroup {
                label: format!("{}\n{}", u.case, run.cc),
                bars,
                mark: u
                    .target
                    .map(|t| (run.verdict.required_mbps, format!("target {}", t.label()))),
            });
        }
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::hold::{HoldCheck, Snapshot};
    use crate::bench::report::Report;
    use crate::bench::unlike::def::{PathInfo, Target, TargetKind};
    use crate::bench::unlike::result::CcRun;
    use crate::bench::unlike::verdict::verdict;

    fn target(of: TargetKind, ratio: f64) -> Target {
        Target { of, ratio }
    }

    #[test]
    fn report_formats() {
        let m = |v| Measurement {
            mbps: v,
            retransmits: Some(3),
            ..Measurement::default()
        };
        let t = target(TargetKind::Sum, 0.9);
        let run = CcRun {
            cc: "bbr".into(),
            raw: vec![m(45.0), m(18.0)],
            tunnel: m(50.0),
            tunnel_run: 3,
            tunnel_runs_mbps: vec![60.0, 40.0, 50.0],
            verdict: verdict(&[45.0, 18.0], 50.0, t),
            cpu_a_pct: Some(30.0),
            cpu_b_pct: None,
            hold: Some(HoldCheck::new(
                &Snapshot {
                    not_held: 990,
                    held: 10,
                    counts: [0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0],
                    max_us: 25_000,
                    sum_us: 220_000,
                },
                25.0,
                Some(24.0),
            )),
        };
        let row = Row {
            unlike: Some(UnlikeResult {
                case: "wifi+lte".into(),
                paths: vec![
                    PathInfo {
                        name: "wifi".into(),
                        mean_rate_mbps: Some(50.0),
                        ..PathInfo::default()
                    },
                    PathInfo {
                        name: "lte".into(),
                        mean_rate_mbps: Some(20.0),
                        ..PathInfo::default()
                    },
                ],
                target: Some(t),
                omit_s: 3.0,
                // A second run without the daemon's status: empty cells.
                runs: vec![
                    run.clone(),
                    CcRun {
                        cc: "cubic".into(),
                        hold: None,
                        tunnel_run: 1,
                        tunnel_runs_mbps: vec![50.0],
                        ..run
                    },
                ],
            }),
            ..Row::default()
        };
        let rep = Report {
            scenario: "unlike".into(),
            description: String::new(),
            duration_s: 20.0,
            omit_s: 0.0,
            streams: 1,
            started_unix: 0,
            wall_s: 1.0,
            cores: 2,
            kernel: String::new(),
            complete: true,
            rows: vec![row],
        };
        let table = rep.table();
        assert!(table.contains("wifi 45.00 + lte 18.00"), "{table}");
        assert!(
            table.contains(">= 0.90 x sum") && table.contains("FAIL"),
            "{table}"
        );
        assert!(table.contains("0.79"), "{table}");
        // Three tunnel runs: the median (50) and the range; one run: no range.
        assert!(table.contains("50.00  3: 40.00..60.00"), "{table}");
        let cubic: Vec<&str> = table
            .lines()
            .find(|l| l.contains(" cubic "))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        assert!(cubic.windows(2).any(|w| w == ["50.00", "-"]), "{table}");
        assert!(table.contains("the median of 1 or 3 run(s)"), "{table}");
        let csv = rep.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        let cols = |l: &str| l.split(',').count();
        assert_eq!(cols(lines[0]), cols(lines[1]));
        assert_eq!(cols(lines[0]), cols(lines[2]));
        assert!(lines[2].ends_with(",,,,,,,,,,,,"), "{}", lines[2]);
        assert!(lines[1].starts_with("wifi+lte,bbr,2,wifi,"));
        assert!(lines[1].contains(",sum,0.9,56.7000,false,"));
        assert!(
            lines[0].contains(",tunnel_mbps,tunnel_retransmits,tunnel_run,tunnel_runs_mbps,"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains(",50.0000,3,3,60.0000/40.0000/50.0000,"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains(",50.0000,3,1,50.0000,"), "{}", lines[2]);
        // 990 of 1000 packets not held: p99 over all is 0, over the held
        // ones the 16..32 ms bucket capped by the 25 ms maximum; the limit
        // is the measured spread (24 ms) + 10.
        assert!(
            lines[1].ends_with(
                ",1000,10,0.0000,0.0000,0.0000,25.0000,22.0000,25.00,24.0000,34.00,true,true"
            ),
            "{}",
            lines[1]
        );
        assert!(
            table.contains("hold p99 ms") && table.contains("PASS"),
            "{table}"
        );
        let svg = rep.svg();
        assert!(svg.contains("<rect") && svg.contains("wifi+lte"));
    }
}
