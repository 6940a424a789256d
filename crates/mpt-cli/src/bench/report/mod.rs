//! Results: one [`Row`] per case; written as results.json, results.csv and
//! plot.svg (hand-written SVG line chart), and printed as a table.
//!
//! A [`Report`] holds one [`row::Row`] per case; its formats are the
//! scenario family's ([`crate::bench::lte::report`] and so on) where the
//! rows carry a family's results, else [`throughput`]'s.

pub mod row;
pub mod throughput;

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::bench::csv_rows::CsvError;
use crate::bench::{dtn, lte, unlike};
use row::Row;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub duration_s: f64,
    /// Seconds left out at the start of each iperf3 measurement (`omit`;
    /// `unlike` reports its own per case).
    pub omit_s: f64,
    /// Parallel TCP streams per TCP measurement (raw and tunnel alike).
    pub streams: u32,
    pub started_unix: u64,
    pub wall_s: f64,
    pub cores: usize,
    pub kernel: String,
    pub complete: bool,
    pub rows: Vec<Row>,
}

impl Report {
    pub fn table(&self) -> String {
        if self.rows.iter().any(|r| r.lte.is_some()) {
            return lte::report::table(&self.rows);
        }
        if self.rows.iter().any(|r| r.dtn.is_some()) {
            return dtn::report::table(&self.rows);
        }
        if self.rows.iter().any(|r| r.unlike.is_some()) {
            return unlike::report::table(&self.rows, self.duration_s);
        }
        throughput::table(&self.rows, self.streams)
    }

    pub fn csv(&self) -> Result<String, CsvError> {
        if self.rows.iter().any(|r| r.lte.is_some()) {
            return lte::report::csv(&self.rows);
        }
        if self.rows.iter().any(|r| r.dtn.is_some()) {
            return dtn::report::csv(&self.rows);
        }
        if self.rows.iter().any(|r| r.unlike.is_some()) {
            return unlike::report::csv(&self.rows, self.duration_s);
        }
        throughput::csv(&self.rows)
    }

    /// The chart: the scenario family's, or throughput against the swept
    /// variable.
    pub fn svg(&self) -> String {
        if self.rows.iter().any(|r| r.lte.is_some()) {
            return lte::report::svg(&self.scenario, &self.rows);
        }
        if self.rows.iter().any(|r| r.dtn.is_some()) {
            return dtn::report::svg(&self.scenario, &self.rows);
        }
        if self.rows.iter().any(|r| r.unlike.is_some()) {
            return unlike::report::svg(&self.scenario, &self.rows);
        }
        throughput::svg(&self.scenario, &self.rows)
    }

    /// Writes results.json, results.csv and plot.svg into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self).context("serializing results")?;
        for (name, text) in [
            ("results.json", json + "\n"),
            ("results.csv", self.csv().context("writing results.csv")?),
            ("plot.svg", self.svg()),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::iperf::Measurement;

    #[test]
    fn renders_all_formats() {
        let m = |v| {
            Some(Measurement {
                mbps: v,
                ..Measurement::default()
            })
        };
        let mut rows = Vec::new();
        for n in [1, 2] {
            let mut r = Row {
                combo: "4in4".into(),
                n,
                paths: n,
                ideal_mbps: 100.0 * n as f64,
                udp: m(90.0 * n as f64),
                tcp: m(80.0 * n as f64),
                raw_tcp: m(94.0),
                ..Row::default()
            };
            r.finish();
            rows.push(r);
        }
        assert_eq!(rows[1].tcp_frac_ideal, Some(0.8));
        let rep = Report {
            scenario: "ethernet".into(),
            description: String::new(),
            duration_s: 1.0,
            omit_s: 0.0,
            streams: 1,
            started_unix: 0,
            wall_s: 1.0,
            cores: 2,
            kernel: String::new(),
            complete: true,
            rows,
        };
        assert!(rep.table().contains("4in4 N=2"));
        assert_eq!(rep.csv().expect("csv").lines().count(), 3);
        let svg = rep.svg();
        assert!(svg.starts_with("<svg") && svg.contains("polyline"));
    }
}
