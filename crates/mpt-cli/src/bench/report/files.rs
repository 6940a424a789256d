//! The files of a results folder: results.json and results.csv, every
//! chart of the suite (plot.svg first) and index.html, which shows the
//! run's conditions, the table and all charts on one page. `mpt bench
//! replot` redraws the charts and the page from results.json and work/.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use super::{timeseries, Report};
use crate::bench::chart::svg::xml;
use crate::bench::{dtn, lte, unlike};

/// One chart file.
#[derive(Debug, Clone)]
pub struct ChartFile {
    pub file: String,
    pub caption: String,
    pub svg: String,
}

fn chart(file: &str, caption: &str, svg: Option<String>) -> Option<ChartFile> {
    svg.map(|svg| ChartFile {
        file: file.into(),
        caption: caption.into(),
        svg,
    })
}

impl Report {
    /// What each case is called in the per-case panels.
    fn case_titles(&self) -> Vec<String> {
        self.rows
            .iter()
            .map(|r| {
                if let Some(u) = &r.unlike {
                    u.case.clone()
                } else if let Some(l) = &r.lte {
                    l.variant.clone()
                } else {
                    format!("{} N={}", r.combo, r.n)
                }
            })
            .collect()
    }

    /// Every chart of the suite; `dir` is the results folder (its work/
    /// holds the iperf3 JSON of the per-second series).
    pub fn charts(&self, dir: &Path) -> Vec<ChartFile> {
        let name = &self.scenario;
        let rows = &self.rows;
        let mut out: Vec<Option<ChartFile>> = Vec::new();
        if rows.iter().any(|r| r.lte.is_some()) {
            out.push(chart(
                "plot.svg",
                "VoIP one-way delay over time, a panel per variant; lost packets as red marks in the strip above",
                Some(lte::charts::delay_over_time(name, rows)),
            ));
            out.push(chart(
                "voip-cdf.svg",
                "CDF of the VoIP one-way delay of the delivered packets",
                lte::charts::delay_cdf(name, rows),
            ));
            out.push(chart(
                "tcp-per-second.svg",
                "bulk TCP goodput per second, a panel per variant",
                lte::charts::tcp_per_second(name, rows),
            ));
        } else if rows.iter().any(|r| r.dtn.is_some()) {
            out.push(chart(
                "plot.svg",
                "bundle goodput against the satellite RTT",
                Some(dtn::report::svg(name, rows)),
            ));
        } else if rows.iter().any(|r| r.unlike.is_some()) {
            out.push(chart(
                "plot.svg",
                "goodput per case and congestion control: raw paths alone, the tunnel, kernel MPTCP and the accelerated tunnel (black: range and runs of repeated runs)",
                Some(unlike::report::svg(name, rows)),
            ));
            out.push(chart(
                "hold-cdf.svg",
                "CDF of the resequencing hold at the receiving mptd",
                unlike::charts::hold_cdf(name, rows),
            ));
        } else {
            out.push(chart(
                "plot.svg",
                "goodput against the swept variable",
                Some(super::throughput::svg(name, rows)),
            ));
        }
        let series = timeseries::read_dir(&dir.join("work"));
        let [tput, rtt] = timeseries::charts(name, &series, &self.case_titles());
        out.push(chart(
            "goodput-per-second.svg",
            "goodput per second of every iperf3 measurement, a panel per case",
            tput,
        ));
        out.push(chart(
            "rtt-per-second.svg",
            "smoothed RTT of the TCP sender per second, a panel per case",
            rtt,
        ));
        out.into_iter().flatten().collect()
    }

    /// Writes results.json, results.csv, the charts and index.html into
    /// `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self).context("serializing results")?;
        for (name, text) in [
            ("results.json", json + "\n"),
            ("results.csv", self.csv().context("writing results.csv")?),
        ] {
            put(dir, name, &text)?;
        }
        self.write_charts(dir)?;
        Ok(())
    }

    /// Writes the charts and index.html; returns their file names.
    pub fn write_charts(&self, dir: &Path) -> anyhow::Result<Vec<String>> {
        let charts = self.charts(dir);
        let mut names = Vec::new();
        for c in &charts {
            put(dir, &c.file, &c.svg)?;
            names.push(c.file.clone());
        }
        put(dir, "index.html", &self.index_html(&charts))?;
        names.push("index.html".into());
        Ok(names)
    }

    /// The page: title, conditions, table, charts.
    pub fn index_html(&self, charts: &[ChartFile]) -> String {
        let mut s = format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>mpt bench {0}</title>\n\
             <style>body{{font-family:sans-serif;margin:2em;max-width:1300px}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}\
             td{{padding:0 1em 0 0;vertical-align:top}}figure{{margin:2em 0}}img{{max-width:100%;border:1px solid #ddd}}</style>\n\
             </head><body>\n<h1>mpt bench {0}</h1>\n<p>{1}</p>\n",
            xml(&self.scenario),
            xml(&self.description)
        );
        let m = &self.meta;
        let load = |l: &Option<super::meta::LoadAvg>| {
            l.map_or("?".into(), |l| {
                format!("{:.2} {:.2} {:.2}", l.m1, l.m5, l.m15)
            })
        };
        let mut facts: Vec<(&str, String)> = if m.commit.is_empty() {
            vec![(
                "conditions",
                format!(
                    "not recorded (written before `meta`); kernel {}, {} cores",
                    self.kernel, self.cores
                ),
            )]
        } else {
            vec![
                (
                    "mpt",
                    format!(
                        "{} {}{} ({})",
                        m.mpt_version,
                        m.commit,
                        if m.dirty { " dirty" } else { "" },
                        m.profile
                    ),
                ),
                ("kernel", m.kernel.clone()),
                ("CPU", format!("{} ({} cores)", m.cpu_model, m.cores)),
                (
                    "load before / after",
                    format!("{} / {}", load(&m.load_before), load(&m.load_after)),
                ),
                ("congestion control", m.congestion_controls.join(", ")),
                (
                    "scenario",
                    format!(
                        "{} sha256 {} {}",
                        m.scenario_source, m.scenario_sha256, m.overrides
                    ),
                ),
                ("seeds", format!("{:?}", m.seeds)),
                (
                    "run",
                    format!(
                        "{} s per measurement, {:.0} s wall, {}",
                        self.duration_s,
                        self.wall_s,
                        if self.complete {
                            "complete"
                        } else {
                            "INCOMPLETE"
                        }
                    ),
                ),
            ]
        };
        for (k, v) in &m.sysctls {
            facts.push((k.as_str(), v.clone()));
        }
        s += "<table>\n";
        for (k, v) in facts {
            let _ = writeln!(s, "<tr><td>{}</td><td>{}</td></tr>", xml(k), xml(&v));
        }
        s += "</table>\n<h2>Results</h2>\n<pre>";
        s += &xml(&self.table());
        s += "</pre>\n<p><a href=\"results.json\">results.json</a> · <a href=\"results.csv\">results.csv</a> · <a href=\"work/\">work/</a></p>\n";
        for c in charts {
            let _ = writeln!(
                s,
                "<figure><a href=\"{0}\"><img src=\"{0}\" alt=\"{1}\"></a><figcaption>{1}</figcaption></figure>",
                xml(&c.file),
                xml(&c.caption)
            );
        }
        s += "</body></html>\n";
        s
    }
}

fn put(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
}

/// `mpt bench replot DIR`: reads DIR/results.json and rewrites the charts
/// and index.html; returns the files written.
pub fn replot(dir: &Path) -> anyhow::Result<Vec<String>> {
    let p = dir.join("results.json");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a results.json of mpt bench", p.display()))?;
    report.write_charts(dir)
}
