//! Results: one [`Row`] per case; written as results.json, results.csv,
//! the suite's charts and index.html ([`files`]), and printed as a table.
//! [`meta`] records the run's conditions, [`figures`] and [`compare`] set
//! two runs side by side, [`timeseries`] reads the per-second data.
//!
//! A [`Report`] holds one [`row::Row`] per case; its formats are the
//! scenario family's ([`crate::bench::lte::report`] and so on) where the
//! rows carry a family's results, else [`throughput`]'s.

pub mod compare;
pub mod figures;
pub mod files;
pub mod meta;
pub mod row;
pub mod throughput;
pub mod timeseries;

pub use files::replot;

use serde::{Deserialize, Serialize};

use crate::bench::csv_rows::CsvError;
use crate::bench::{dtn, lte, unlike};
use meta::RunMeta;
use row::Row;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
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
    /// The build, machine, settings and load of the run.
    pub meta: RunMeta,
    pub rows: Vec<Row>,
}

impl Report {
    /// Congestion controls the rows asked for by name (unlike runs, the
    /// lte bulk flow, a dtn case's flows and its relay's GEO hop).
    pub fn asked_ccs(&self) -> Vec<String> {
        let mut cc = Vec::new();
        for r in &self.rows {
            if let Some(u) = &r.unlike {
                cc.extend(u.runs.iter().map(|c| c.cc.clone()));
            }
            if let Some(st) = r.lte.as_ref().and_then(|l| l.stall.as_ref()) {
                cc.push(st.cc.clone());
            }
            if let Some(d) = &r.dtn {
                cc.extend(d.cc.iter().cloned());
                cc.extend(d.sat_cc.iter().map(|c| format!("{c} (relay GEO hop)")));
            }
        }
        cc
    }

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
            meta: RunMeta::default(),
            rows,
        };
        assert!(rep.table().contains("4in4 N=2"));
        assert_eq!(rep.csv().expect("csv").lines().count(), 3);
        let charts = rep.charts(std::path::Path::new("/nonexistent"));
        assert_eq!(charts.len(), 1);
        assert!(charts[0].svg.starts_with("<svg") && charts[0].svg.contains("polyline"));
        let html = rep.index_html(&charts);
        assert!(html.contains("<img src=\"plot.svg\"") && html.contains("4in4 N=2"));
    }

    #[test]
    fn dtn_cases_record_their_congestion_controls() {
        let row = Row {
            dtn: Some(crate::bench::dtn::result::DtnResult {
                cc: Some("reno".into()),
                sat_cc: Some("bbr".into()),
                ..Default::default()
            }),
            ..Row::default()
        };
        let rep = Report {
            rows: vec![row],
            ..Report::default()
        };
        assert_eq!(rep.asked_ccs(), ["reno", "bbr (relay GEO hop)"]);
    }
}
