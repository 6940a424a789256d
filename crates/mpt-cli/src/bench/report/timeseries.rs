//! Throughput and RTT per second from the iperf3 JSON every measurement
//! leaves in `work/` (`iperf3-<case>-<what>.json`): one panel per case,
//! a line per measurement. Read at report time, so that no runner keeps
//! per-second data of its own and `mpt bench replot` draws them for old
//! runs too.
//!
//! The seconds iperf3 left out (`-O`, the ramp-up) are drawn first and
//! shaded; iperf3 restarts its clock after them, so the time axis here is
//! the sum of the interval lengths.

use std::path::Path;

use serde_json::Value;

use crate::bench::chart::line::{Chart, Series};
use crate::bench::chart::panels::Panels;

/// One iperf3 interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// End of the interval, s since the first one began (omitted ones
    /// included).
    pub t: f64,
    pub mbps: f64,
    /// Mean smoothed RTT over the streams (TCP sender), ms.
    pub rtt_ms: Option<f64>,
    pub omitted: bool,
}

/// The intervals of an iperf3 `-J` report (none for an unreadable one).
pub fn intervals(report: &Value) -> Vec<Interval> {
    let mut t = 0.0;
    let mut out = Vec::new();
    for i in report
        .get("intervals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(sum) = i.get("sum") else { continue };
        let f = |k: &str| sum.get(k).and_then(Value::as_f64);
        let (Some(secs), Some(bps)) = (f("seconds"), f("bits_per_second")) else {
            continue;
        };
        t += secs;
        let rtts: Vec<f64> = i
            .get("streams")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("rtt").and_then(Value::as_f64))
            .collect();
        out.push(Interval {
            // To the 10 ms: interval ends drift by a few ms from whole
            // seconds, which would push the axis to the next step.
            t: (t * 100.0).round() / 100.0,
            mbps: bps / 1e6,
            rtt_ms: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64 / 1e3),
            omitted: sum.get("omitted").and_then(Value::as_bool) == Some(true),
        });
    }
    out
}

/// A measurement's name from its file: `iperf3-3-cubic-raw0.json` is case
/// 3, "cubic raw path 1".
pub fn parse_name(file: &str) -> Option<(usize, String)> {
    let rest = file.strip_prefix("iperf3-")?.strip_suffix(".json")?;
    let (k, what) = rest.split_once('-')?;
    let words: Vec<String> = what
        .split('-')
        .map(
            |w| match w.strip_prefix("raw").and_then(|n| n.parse::<usize>().ok()) {
                Some(i) => format!("raw path {}", i + 1),
                None => match w.strip_prefix("run").and_then(|n| n.parse::<usize>().ok()) {
                    Some(i) => format!("run {i}"),
                    None => w.to_string(),
                },
            },
        )
        .collect();
    Some((k.parse().ok()?, words.join(" ")))
}

/// Per case: (measurement name, intervals), in name order.
pub type CaseSeries = Vec<(usize, Vec<(String, Vec<Interval>)>)>;

/// Reads every `iperf3-*.json` under `work`.
pub fn read_dir(work: &Path) -> CaseSeries {
    let mut files: Vec<(usize, String, Vec<Interval>)> = Vec::new();
    let Ok(dir) = std::fs::read_dir(work) else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((k, what)) = parse_name(&name) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let iv = intervals(&v);
        if !iv.is_empty() {
            files.push((k, what, iv));
        }
    }
    files.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut out: CaseSeries = Vec::new();
    for (k, what, iv) in files {
        match out.last_mut() {
            Some((kk, v)) if *kk == k => v.push((what, iv)),
            _ => out.push((k, vec![(what, iv)])),
        }
    }
    out
}

/// Throughput and RTT per second, one panel per case (`titles[k]` names
/// case k); `None` where there is nothing to draw.
pub fn charts(scenario: &str, cases: &CaseSeries, titles: &[String]) -> [Option<String>; 2] {
    let panel = |k: usize, ylabel: &str, pick: &dyn Fn(&Interval) -> Option<f64>| {
        let (_, runs) = cases.iter().find(|c| c.0 == k)?;
        let mut c = Chart {
            title: titles
                .get(k)
                .cloned()
                .unwrap_or_else(|| format!("case {}", k + 1)),
            xlabel: "time (s)".into(),
            ylabel: ylabel.into(),
            ..Chart::default()
        };
        let mut ramp: f64 = 0.0;
        for (what, iv) in runs {
            let points: Vec<(f64, f64)> = iv
                .iter()
                .filter_map(|i| pick(i).map(|y| (i.t, y)))
                .collect();
            if points.is_empty() {
                continue;
            }
            ramp = ramp.max(
                iv.iter()
                    .filter(|i| i.omitted)
                    .map(|i| i.t)
                    .fold(0.0, f64::max),
            );
            c.series.push(Series {
                label: what.clone(),
                points,
                ..Series::default()
            });
        }
        if ramp > 0.0 {
            c.shade.push((0.0, ramp, "ramp-up (left out)".into()));
        }
        (!c.series.is_empty()).then_some(c)
    };
    let grid = |what: &str, ylabel: &str, pick: &dyn Fn(&Interval) -> Option<f64>| {
        let charts: Vec<Chart> = cases
            .iter()
            .filter_map(|(k, _)| panel(*k, ylabel, pick))
            .collect();
        (!charts.is_empty()).then(|| {
            Panels {
                title: format!("mpt bench {scenario}: {what} per second (iperf3 intervals)"),
                charts,
                cols: 2,
                share_y: false,
            }
            .render()
        })
    };
    [
        grid("goodput", "goodput (Mbit/s)", &|i| Some(i.mbps)),
        grid("RTT of the TCP sender", "smoothed RTT (ms)", &|i| i.rtt_ms),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_intervals() {
        assert_eq!(
            parse_name("iperf3-3-cubic-raw0.json"),
            Some((3, "cubic raw path 1".into()))
        );
        assert_eq!(
            parse_name("iperf3-0-bbr-tunnel-run2.json"),
            Some((0, "bbr tunnel run 2".into()))
        );
        assert_eq!(parse_name("iperf3-0-bulk.json"), Some((0, "bulk".into())));
        assert_eq!(parse_name("iperf3-0-bulk-server.log"), None);
        let v: Value = serde_json::from_str(
            r#"{"intervals":[
              {"sum":{"seconds":1.0,"bits_per_second":5e6,"omitted":true},"streams":[{"rtt":80000}]},
              {"sum":{"seconds":1.0,"bits_per_second":6e6,"omitted":false},"streams":[{"rtt":60000},{"rtt":40000}]},
              {"sum":{"seconds":0.5,"bits_per_second":7e6},"streams":[{}]}]}"#,
        )
        .expect("json");
        let iv = intervals(&v);
        assert_eq!(iv.len(), 3);
        assert_eq!(
            (iv[0].t, iv[0].mbps, iv[0].rtt_ms, iv[0].omitted),
            (1.0, 5.0, Some(80.0), true)
        );
        assert_eq!((iv[1].t, iv[1].rtt_ms), (2.0, Some(50.0)));
        assert_eq!((iv[2].t, iv[2].rtt_ms), (2.5, None));
        let cases: CaseSeries = vec![(0, vec![("cubic tunnel".into(), iv)])];
        let [tput, rtt] = charts("unlike", &cases, &["wifi+lte".into()]);
        let tput = tput.expect("throughput chart");
        assert!(tput.contains("ramp-up") && tput.contains(">wifi+lte</text>"));
        assert!(rtt.expect("rtt chart").contains("smoothed RTT (ms)"));
    }
}
