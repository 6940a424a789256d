//! `unlike` results as a table (columns sized to their contents),
//! results.csv (one row per case and congestion control, path columns for
//! the most paths any case has) and plot.svg (bars per case).

use std::fmt::Write as _;

use serde::Serialize;

use super::accel::AccelResult;
use super::baseline::MptcpBaseline;
use super::result::UnlikeResult;
use super::text::{fmt_p99, hold_label, pass_label};
use crate::bench::chart::bar::{BarChart, BarGroup};
use crate::bench::csv_rows::{self, f4, opt1, opt2, opt4, opt_plain, plain, CsvError};
use crate::bench::hold::{self, HoldCheck};
use crate::bench::mptcp;
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
        "MPTCP".into(),
        "MPTCP bytes per path".into(),
        "mpt/MPTCP".into(),
        "accel".into(),
        "accel/MPTCP".into(),
        "accel/sum".into(),
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
            let names: Vec<String> = u.paths.iter().map(|p| p.name.clone()).collect();
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
                run.mptcp
                    .as_ref()
                    .map_or("-".into(), |b| format!("{:.2}", b.kept.m.mbps)),
                run.mptcp
                    .as_ref()
                    .map_or("-".into(), |b| b.use_label(&names)),
                run.mptcp
                    .as_ref()
                    .map_or("-".into(), |b| opt(b.mpt_over_mptcp, 2)),
                run.accel.as_ref().map_or("-".into(), |a| {
                    format!(
                        "{:.2}{}",
                        a.kept.m.mbps,
                        if a.kept.split { "" } else { " NOT SPLIT" }
                    )
                }),
                run.accel
                    .as_ref()
                    .map_or("-".into(), |a| opt(a.over_mptcp, 2)),
                run.accel
                    .as_ref()
                    .map_or("-".into(), |a| opt(a.over_sum, 2)),
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
        "MPTCP: kernel MPTCP (iperf3 under mptcpize run, one subflow per path, the tunnel idle), \
         run after each tunnel run, the median kept; bytes per path: each path's share of the bytes \
         B received during the kept run (ONE PATH: a path carried < {:.0} %, no ratio); mpt/MPTCP = \
         tunnel / MPTCP",
        mptcp::MIN_SHARE * 100.0
    );
    if results(case_rows).any(|(_, u)| u.runs.iter().any(|r| r.accel.is_some())) {
        let direct = results(case_rows)
            .flat_map(|(_, u)| u.runs.iter().filter_map(|r| r.accel.as_ref()))
            .any(|a| a.legs == "direct");
        let legs = if direct {
            "beside the tunnel, one TCP connection over each path (direct legs, sealed with the \
             connection's keys when it has any)"
        } else {
            "in the tunnel, one pinned to each path"
        };
        let _ = writeln!(
            s,
            "accel: TCP acceleration, one stream from an end host behind A to one behind B (same \
             congestion control at the end hosts), split at A and carried over warm legs {legs} \
             (BBR, or the path's `accel_congestion`), run after each MPTCP run, the median kept \
             (NOT SPLIT: A's legs carried < {:.0} % of the bytes, no ratios); accel/MPTCP, \
             accel/sum = accel / MPTCP, / sum of raw paths",
            super::accel::MIN_SPLIT_SHARE * 100.0
        );
    }
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
                d += &p.outage_label();
                d
            })
            .collect();
        let _ = writeln!(s, "  {}: {}", u.case, paths.join("; "));
    }
    for (_, u) in results(case_rows) {
        if let Some(o) = &u.objects {
            let _ = writeln!(
                s,
                "{}: {} x 1 MB objects one after another, new connection each, kernel default \
                 congestion control; median completion (ms, median of {} rounds): MPTCP {}, \
                 tunnel {}, accelerated {}; accel / MPTCP {}",
                u.case,
                o.count,
                o.rounds.len(),
                opt(o.mptcp_ms, 0),
                opt(o.tunnel_ms, 0),
                opt(o.accel_ms, 0),
                opt(o.accel_over_mptcp(), 2)
            );
        }
    }
    s
}

/// results.csv columns of each path, `{}` the path's number from 1.
const PATH_COLUMNS: [&str; 7] = [
    "path{}_name",
    "path{}_rate_mbps",
    "path{}_rtt_ms",
    "path{}_loss",
    "path{}_queue_bytes",
    "path{}_raw_mbps",
    "path{}_raw_retransmits",
];

/// results.csv columns after the paths'.
const RUN_COLUMNS: [&str; 43] = [
    "best_raw_mbps",
    "sum_raw_mbps",
    "tunnel_mbps",
    "tunnel_retransmits",
    "tunnel_run",
    "tunnel_runs_mbps",
    "frac_best",
    "frac_sum",
    "target_of",
    "target_ratio",
    "required_mbps",
    "pass",
    "mptcp_mbps",
    "mptcp_retransmits",
    "mptcp_run",
    "mptcp_runs_mbps",
    "mptcp_path_bytes",
    "mptcp_all_paths_used",
    "mpt_over_mptcp",
    "accel_mbps",
    "accel_retransmits",
    "accel_run",
    "accel_runs_mbps",
    "accel_split",
    "accel_over_mptcp",
    "accel_over_sum",
    "accel_over_tunnel",
    "cpu_a_pct",
    "cpu_b_pct",
    "duration_s",
    "omit_s",
    "hold_delivered",
    "hold_held",
    "hold_p99_all_lo_ms",
    "hold_p99_all_ms",
    "hold_p99_all_est_ms",
    "hold_p99_held_ms",
    "hold_mean_held_ms",
    "spread_ms",
    "measured_spread_ms",
    "hold_limit_ms",
    "hold_pass",
    "hold_pass_estimate",
];

/// One results.csv row: a case and congestion control.
#[derive(Debug, Serialize)]
struct CsvRow<'a> {
    case: &'a str,
    cc: &'a str,
    paths: usize,
    /// As many as the case with the most paths has; empty beyond this
    /// case's.
    per_path: Vec<PathCols<'a>>,
    #[serde(serialize_with = "f4")]
    best_raw_mbps: f64,
    #[serde(serialize_with = "f4")]
    sum_raw_mbps: f64,
    #[serde(serialize_with = "f4")]
    tunnel_mbps: f64,
    tunnel_retransmits: Option<u64>,
    tunnel_run: usize,
    /// Every run's goodput, "a/b/c".
    tunnel_runs_mbps: String,
    #[serde(serialize_with = "opt4")]
    frac_best: Option<f64>,
    #[serde(serialize_with = "opt4")]
    frac_sum: Option<f64>,
    target_of: &'a str,
    #[serde(serialize_with = "opt_plain")]
    target_ratio: Option<f64>,
    #[serde(serialize_with = "f4")]
    required_mbps: f64,
    pass: Option<bool>,
    mptcp: MptcpCols,
    accel: AccelCols,
    #[serde(serialize_with = "opt4")]
    cpu_a_pct: Option<f64>,
    #[serde(serialize_with = "opt4")]
    cpu_b_pct: Option<f64>,
    #[serde(serialize_with = "plain")]
    duration_s: f64,
    #[serde(serialize_with = "plain")]
    omit_s: f64,
    hold: HoldCols,
}

/// The columns of one path; all empty for a path the case does not have.
#[derive(Debug, Default, Serialize)]
struct PathCols<'a> {
    name: &'a str,
    #[serde(serialize_with = "opt4")]
    rate_mbps: Option<f64>,
    #[serde(serialize_with = "opt1")]
    rtt_ms: Option<f64>,
    #[serde(serialize_with = "opt_plain")]
    loss: Option<f64>,
    queue_bytes: Option<u64>,
    #[serde(serialize_with = "opt4")]
    raw_mbps: Option<f64>,
    raw_retransmits: Option<u64>,
}

/// The kernel MPTCP baseline's columns; all empty without it.
#[derive(Debug, Default, Serialize)]
struct MptcpCols {
    #[serde(serialize_with = "opt4")]
    mbps: Option<f64>,
    retransmits: Option<u64>,
    run: Option<usize>,
    /// Every run's goodput, "a/b/c".
    runs_mbps: String,
    /// Bytes B received per path in the kept run, "a/b".
    path_bytes: String,
    all_paths_used: Option<bool>,
    #[serde(serialize_with = "opt4")]
    mpt_over_mptcp: Option<f64>,
}

impl From<&MptcpBaseline> for MptcpCols {
    fn from(b: &MptcpBaseline) -> MptcpCols {
        let join = |v: Vec<String>| v.join("/");
        MptcpCols {
            mbps: Some(b.kept.m.mbps),
            retransmits: b.kept.m.retransmits,
            run: Some(b.run),
            runs_mbps: join(b.runs_mbps.iter().map(|m| format!("{m:.4}")).collect()),
            path_bytes: join(b.kept.paths.bytes.iter().map(u64::to_string).collect()),
            all_paths_used: Some(b.kept.paths.all_paths_used),
            mpt_over_mptcp: b.mpt_over_mptcp,
        }
    }
}

/// The accelerated variant's columns; all empty without it.
#[derive(Debug, Default, Serialize)]
struct AccelCols {
    #[serde(serialize_with = "opt4")]
    mbps: Option<f64>,
    retransmits: Option<u64>,
    run: Option<usize>,
    /// Every run's goodput, "a/b/c".
    runs_mbps: String,
    /// Was the kept run split at A?
    split: Option<bool>,
    #[serde(serialize_with = "opt4")]
    over_mptcp: Option<f64>,
    #[serde(serialize_with = "opt4")]
    over_sum: Option<f64>,
    #[serde(serialize_with = "opt4")]
    over_tunnel: Option<f64>,
}

impl From<&AccelResult> for AccelCols {
    fn from(a: &AccelResult) -> AccelCols {
        AccelCols {
            mbps: Some(a.kept.m.mbps),
            retransmits: a.kept.m.retransmits,
            run: Some(a.run),
            runs_mbps: a
                .runs_mbps
                .iter()
                .map(|m| format!("{m:.4}"))
                .collect::<Vec<_>>()
                .join("/"),
            split: Some(a.kept.split),
            over_mptcp: a.over_mptcp,
            over_sum: a.over_sum,
            over_tunnel: a.over_tunnel,
        }
    }
}

/// The resequencing hold's columns; all empty without a hold check.
#[derive(Debug, Default, Serialize)]
struct HoldCols {
    delivered: Option<u64>,
    held: Option<u64>,
    #[serde(serialize_with = "opt4")]
    p99_all_lo_ms: Option<f64>,
    #[serde(serialize_with = "opt4")]
    p99_all_ms: Option<f64>,
    #[serde(serialize_with = "opt4")]
    p99_all_est_ms: Option<f64>,
    #[serde(serialize_with = "opt4")]
    p99_held_ms: Option<f64>,
    #[serde(serialize_with = "opt4")]
    mean_held_ms: Option<f64>,
    #[serde(serialize_with = "opt2")]
    spread_ms: Option<f64>,
    #[serde(serialize_with = "opt4")]
    measured_spread_ms: Option<f64>,
    #[serde(serialize_with = "opt2")]
    limit_ms: Option<f64>,
    pass: Option<bool>,
    pass_estimate: Option<bool>,
}

impl From<&HoldCheck> for HoldCols {
    fn from(h: &HoldCheck) -> HoldCols {
        HoldCols {
            delivered: Some(h.delivered),
            held: Some(h.held),
            p99_all_lo_ms: h.p99_all_lo_ms,
            p99_all_ms: h.p99_all_ms,
            p99_all_est_ms: h.p99_all_est_ms,
            p99_held_ms: h.p99_held_ms,
            mean_held_ms: h.mean_held_ms,
            spread_ms: Some(h.spread_ms),
            measured_spread_ms: h.measured_spread_ms,
            limit_ms: Some(h.limit_ms),
            pass: h.pass,
            pass_estimate: h.pass_estimate,
        }
    }
}

/// results.csv: one row per case and congestion control, path columns for
/// the most paths any case has.
pub fn csv(rows: &[Row], duration_s: f64) -> Result<String, CsvError> {
    let maxp = results(rows).map(|(_, u)| u.paths.len()).max().unwrap_or(0);
    let mut header: Vec<String> = ["case", "cc", "paths"].map(String::from).to_vec();
    for i in 1..=maxp {
        header.extend(PATH_COLUMNS.map(|c| c.replace("{}", &i.to_string())));
    }
    header.extend(RUN_COLUMNS.map(String::from));
    let mut out = Vec::new();
    for (_, u) in results(rows) {
        for run in &u.runs {
            let per_path = (0..maxp)
                .map(|i| match (u.paths.get(i), run.raw.get(i)) {
                    (Some(p), Some(m)) => PathCols {
                        name: &p.name,
                        rate_mbps: p.mean_rate_mbps,
                        rtt_ms: Some(p.rtt_ms),
                        loss: Some(p.loss),
                        queue_bytes: Some(p.queue_bytes),
                        raw_mbps: Some(m.mbps),
                        raw_retransmits: m.retransmits,
                    },
                    _ => PathCols::default(),
                })
                .collect();
            let v = &run.verdict;
            out.push(CsvRow {
                case: &u.case,
                cc: &run.cc,
                paths: u.paths.len(),
                per_path,
                best_raw_mbps: v.best_raw_mbps,
                sum_raw_mbps: v.sum_raw_mbps,
                tunnel_mbps: run.tunnel.mbps,
                tunnel_retransmits: run.tunnel.retransmits,
                tunnel_run: run.tunnel_run,
                tunnel_runs_mbps: run
                    .tunnel_runs_mbps
                    .iter()
                    .map(|m| format!("{m:.4}"))
                    .collect::<Vec<_>>()
                    .join("/"),
                frac_best: v.frac_best,
                frac_sum: v.frac_sum,
                target_of: u.target.map_or("", |t| t.of.label()),
                target_ratio: u.target.map(|t| t.ratio),
                required_mbps: v.required_mbps,
                pass: v.pass,
                mptcp: run.mptcp.as_ref().map(MptcpCols::from).unwrap_or_default(),
                accel: run.accel.as_ref().map(AccelCols::from).unwrap_or_default(),
                cpu_a_pct: run.cpu_a_pct,
                cpu_b_pct: run.cpu_b_pct,
                duration_s,
                omit_s: u.omit_s,
                hold: run.hold.as_ref().map(HoldCols::from).unwrap_or_default(),
            });
        }
    }
    csv_rows::to_string_with_header(&header, &out)
}

/// Bars per case and congestion control: each raw path alone, the tunnel,
/// and the target as a dashed mark.
pub fn svg(scenario: &str, rows: &[Row]) -> String {
    let mut c = BarChart {
        title: format!(
            "mpt bench {}: one TCP stream: paths alone, tunnel, MPTCP, accelerated",
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
            let mut spread = vec![("tunnel".into(), run.tunnel_runs_mbps.clone())];
            if let Some(b) = &run.mptcp {
                bars.push(("kernel MPTCP".into(), b.kept.m.mbps));
                spread.push(("kernel MPTCP".into(), b.runs_mbps.clone()));
            }
            if let Some(a) = &run.accel {
                bars.push(("tunnel, accelerated".into(), a.kept.m.mbps));
                spread.push(("tunnel, accelerated".into(), a.runs_mbps.clone()));
            }
            c.groups.push(BarGroup {
                label: format!("{}\n{}", u.case, run.cc),
                bars,
                mark: u
                    .target
                    .map(|t| (run.verdict.required_mbps, format!("target {}", t.label()))),
                spread,
            });
        }
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::hold::Snapshot;
    use crate::bench::iperf::Measurement;
    use crate::bench::mptcp::PathUse;
    use crate::bench::report::Report;
    use crate::bench::unlike::accel::AccelRun;
    use crate::bench::unlike::baseline::MptcpRun;
    use crate::bench::unlike::def::{PathInfo, Target, TargetKind};
    use crate::bench::unlike::objects::{ObjectsResult, ObjectsRound};
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
        let mptcp = MptcpBaseline::from_runs(
            vec![MptcpRun {
                m: m(62.5),
                paths: PathUse::between(&[0, 0], &[7_000, 3_000]),
            }],
            50.0,
            63.0,
        );
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
            mptcp: mptcp.clone(),
            accel: AccelResult::from_runs(
                vec![AccelRun {
                    m: m(75.0),
                    split: true,
                    ..AccelRun::default()
                }],
                mptcp.as_ref(),
                63.0,
                50.0,
            ),
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
                        mptcp: None,
                        accel: None,
                        ..run
                    },
                ],
                objects: Some(ObjectsResult::from_rounds(
                    5,
                    vec![ObjectsRound {
                        tunnel_ms: vec![3000.0],
                        accel_ms: vec![1000.0],
                        mptcp_ms: vec![2500.0],
                    }],
                )),
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
            meta: Default::default(),
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
        let csv = rep.csv().expect("csv");
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
        // mpt / MPTCP = 50 / 62.5; the cubic run has no baseline.
        assert!(
            lines[1].contains(
                ",false,62.5000,3,1,62.5000,7000/3000,true,0.8000,\
                 75.0000,3,1,75.0000,true,1.2000,1.1905,1.5000,"
            ),
            "{}",
            lines[1]
        );
        // accel 75, accel / MPTCP 1.20, accel / sum 1.19; the objects line.
        let bbr_cells: Vec<&str> = table
            .lines()
            .find(|l| l.contains(" bbr "))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        assert!(
            bbr_cells.windows(3).any(|w| w == ["75.00", "1.20", "1.19"]),
            "{table}"
        );
        assert!(
            table.contains("MPTCP 2500, tunnel 3000, accelerated 1000; accel / MPTCP 0.40"),
            "{table}"
        );
        assert!(lines[2].contains(",false,,,,,,,,"), "{}", lines[2]);
        let bbr = table.lines().find(|l| l.contains(" bbr ")).unwrap_or("");
        let after = bbr
            .split("62.50  wifi 70 % + lte 30 %")
            .nth(1)
            .unwrap_or("");
        assert_eq!(after.split_whitespace().next(), Some("0.80"), "{table}");
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
        let svg = rep.charts(std::path::Path::new("/nonexistent"))[0]
            .svg
            .clone();
        assert!(svg.contains("<rect") && svg.contains("wifi+lte"));
    }

    #[test]
    fn case_names_with_commas_and_quotes_round_trip() {
        let name = "geo, \"slow\" + dsl";
        let run = CcRun {
            cc: "cubic".into(),
            raw: vec![Measurement {
                mbps: 5.0,
                ..Measurement::default()
            }],
            tunnel_runs_mbps: vec![4.0],
            ..CcRun::default()
        };
        let rows = vec![Row {
            unlike: Some(UnlikeResult {
                case: name.into(),
                paths: vec![PathInfo {
                    name: "a,b".into(),
                    ..PathInfo::default()
                }],
                target: Some(target(TargetKind::Best, 1.0)),
                omit_s: 0.0,
                runs: vec![run],
                objects: None,
            }),
            ..Row::default()
        }];
        let text = csv(&rows, 10.0).expect("csv");
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let header = r.headers().expect("header").clone();
        let recs: Vec<csv::StringRecord> = r.records().map(|x| x.expect("record")).collect();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].len(), header.len());
        assert_eq!(&recs[0][0], name);
        assert_eq!(&recs[0][3], "a,b");
        assert_eq!(&header[3], "path1_name");
    }
}
