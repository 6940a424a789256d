//! The figures of a results.json that `mpt bench compare` sets side by
//! side: per case, named values with their unit, which way is better, and
//! every run's value where the suite repeats runs.
//!
//! It reads the JSON as a tree, not as the typed [`super::Report`], so
//! that files written by older builds (without `meta`, with fewer fields)
//! and by every suite (`clients` has a report of its own) still compare.

use serde_json::Value;

/// One figure of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub case: String,
    pub name: String,
    pub unit: &'static str,
    pub higher_is_better: bool,
    /// The value the suite reports (the median run where runs repeat).
    pub value: f64,
    /// Every run's value (just `value` for a single run).
    pub runs: Vec<f64>,
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    let mut v = v;
    for p in path {
        v = v.get(p)?;
    }
    v.as_f64()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// Collects figures; `None` values are left out.
struct Sink<'a> {
    out: &'a mut Vec<Figure>,
    case: String,
}

impl Sink<'_> {
    fn put(&mut self, name: String, unit: &'static str, up: bool, value: Option<f64>) {
        if let Some(v) = value.filter(|v| v.is_finite()) {
            self.runs(name, unit, up, v, vec![v]);
        }
    }

    fn runs(&mut self, name: String, unit: &'static str, up: bool, value: f64, runs: Vec<f64>) {
        self.out.push(Figure {
            case: self.case.clone(),
            name,
            unit,
            higher_is_better: up,
            value,
            runs,
        });
    }
}

/// Every figure of a results.json, in file order.
pub fn figures(report: &Value) -> Vec<Figure> {
    let mut out = Vec::new();
    let rows = report.get("rows").and_then(Value::as_array);
    for row in rows.into_iter().flatten() {
        if let Some(u) = row.get("unlike").filter(|u| u.is_object()) {
            unlike(&mut out, u);
        } else if let Some(l) = row.get("lte").filter(|l| l.is_object()) {
            lte(&mut out, l);
        } else if let Some(d) = row.get("dtn").filter(|d| d.is_object()) {
            dtn(&mut out, row, d);
        } else {
            throughput(&mut out, row);
        }
    }
    if rows.is_none() {
        clients(&mut out, report);
    }
    out
}

/// Fields of a congestion control's run that are not figures of their own.
const CC_KNOWN: &[&str] = &[
    "cc",
    "raw",
    "tunnel",
    "tunnel_run",
    "tunnel_runs_mbps",
    "accel",
];

fn unlike(out: &mut Vec<Figure>, u: &Value) {
    let mut s = Sink {
        out,
        case: text(u, "case"),
    };
    let names: Vec<String> = u
        .get("paths")
        .and_then(Value::as_array)
        .map(|p| p.iter().map(|p| text(p, "name")).collect())
        .unwrap_or_default();
    for run in u
        .get("runs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let cc = text(run, "cc");
        if let Some(v) = num(run, &["tunnel", "mbps"]) {
            let mut runs: Vec<f64> = run
                .get("tunnel_runs_mbps")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            if runs.is_empty() {
                runs.push(v);
            }
            s.runs(format!("mpt {cc}"), "Mbit/s", true, v, runs);
        }
        for (i, m) in run
            .get("raw")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = names.get(i).cloned().unwrap_or_else(|| format!("path {i}"));
            s.put(
                format!("raw {name} {cc}"),
                "Mbit/s",
                true,
                num(m, &["mbps"]),
            );
        }
        s.put(
            format!("mpt / best raw {cc}"),
            "x",
            true,
            num(run, &["verdict", "frac_best"]),
        );
        s.put(
            format!("hold p99 {cc}"),
            "ms",
            false,
            num(run, &["hold", "p99_all_est_ms"]),
        );
        // The MPTCP baseline and the accelerated variant: the kept run
        // with every run.
        for (key, label) in [("mptcp", "MPTCP"), ("accel", "accelerated")] {
            let Some(b) = run.get(key).filter(|b| b.get("kept").is_some()) else {
                continue;
            };
            if let Some(v) = num(b, &["kept", "m", "mbps"]) {
                let mut runs: Vec<f64> = b
                    .get("runs_mbps")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_f64).collect())
                    .unwrap_or_default();
                if runs.is_empty() {
                    runs.push(v);
                }
                s.runs(format!("{label} {cc}"), "Mbit/s", true, v, runs);
            }
        }
        s.put(
            format!("accel / MPTCP {cc}"),
            "x",
            true,
            num(run, &["accel", "over_mptcp"]),
        );
        // Measurements other builds add beside the tunnel (a baseline).
        if let Some(obj) = run.as_object() {
            for (k, v) in obj {
                if !CC_KNOWN.contains(&k.as_str()) && v.get("mbps").is_some() {
                    s.put(format!("{k} {cc}"), "Mbit/s", true, num(v, &["mbps"]));
                }
            }
        }
    }
    if let Some(o) = u.get("objects").filter(|o| o.is_object()) {
        for (name, key) in [
            ("1 MB object, MPTCP", "mptcp_ms"),
            ("1 MB object, tunnel", "tunnel_ms"),
            ("1 MB object, accelerated", "accel_ms"),
        ] {
            s.put(name.into(), "ms", false, num(o, &[key]));
        }
    }
}

fn lte(out: &mut Vec<Figure>, l: &Value) {
    let mut s = Sink {
        out,
        case: text(l, "variant"),
    };
    for (name, key) in [
        ("VoIP delay p50", "delay_p50_ms"),
        ("VoIP delay p99", "delay_p99_ms"),
        ("VoIP delay max", "delay_max_ms"),
        ("VoIP longest silence", "longest_silence_ms"),
    ] {
        s.put(name.into(), "ms", false, num(l, &["voip", key]));
    }
    s.put(
        "VoIP loss".into(),
        "%",
        false,
        num(l, &["voip", "loss_pct"]),
    );
    s.put("bulk TCP".into(), "Mbit/s", true, num(l, &["bulk", "mbps"]));
    s.put(
        "stall TCP".into(),
        "Mbit/s",
        true,
        num(l, &["stall", "mbps"]),
    );
    s.put(
        "longest stall".into(),
        "ms",
        false,
        num(l, &["stall", "longest_stall_ms"]),
    );
    s.put(
        "handover gap".into(),
        "ms",
        false,
        num(l, &["handover_gap_ms"]),
    );
    // The kernel MPTCP baseline across the same outage, where it ran.
    s.put(
        "MPTCP stream".into(),
        "Mbit/s",
        true,
        num(l, &["mptcp", "stall", "mbps"]),
    );
    s.put(
        "MPTCP longest stall".into(),
        "ms",
        false,
        num(l, &["mptcp", "stall", "longest_stall_ms"]),
    );
    s.put(
        "mpt / MPTCP".into(),
        "x",
        true,
        num(l, &["mptcp", "mpt_over_mptcp"]),
    );
}

fn dtn(out: &mut Vec<Figure>, row: &Value, d: &Value) {
    let mut s = Sink {
        out,
        case: format!(
            "{} sat RTT {} ms PER {}%",
            text(row, "combo"),
            num(d, &["sat_rtt_ms"]).unwrap_or(0.0),
            num(d, &["per"]).unwrap_or(0.0) * 100.0
        ),
    };
    s.put("goodput".into(), "Mbit/s", true, num(d, &["goodput_mbps"]));
    s.put("delivered".into(), "x", true, num(d, &["delivery_ratio"]));
    s.put(
        "delivery p50".into(),
        "s",
        false,
        num(d, &["delivery_p50_s"]),
    );
}

fn throughput(out: &mut Vec<Figure>, row: &Value) {
    let mut case = format!(
        "{} N={}",
        text(row, "combo"),
        num(row, &["n"]).unwrap_or(0.0)
    );
    if let Some(r) = num(row, &["rtt_ms"]) {
        case += &format!(" RTT {r} ms");
    }
    if let Some(l) = num(row, &["loss"]) {
        case += &format!(" loss {}%", l * 100.0);
    }
    if row.get("extra").and_then(Value::as_bool) == Some(true) {
        case += " +terr";
    }
    let mut s = Sink { out, case };
    for (name, key) in [
        ("UDP", "udp"),
        ("TCP", "tcp"),
        ("TCP accelerated", "accel_tcp"),
        ("HTTP", "http"),
        ("raw UDP", "raw_udp"),
        ("raw TCP", "raw_tcp"),
    ] {
        s.put(name.into(), "Mbit/s", true, num(row, &[key, "mbps"]));
    }
    s.put("mptd A CPU".into(), "%", false, num(row, &["cpu_a_pct"]));
}

fn clients(out: &mut Vec<Figure>, r: &Value) {
    let mut s = Sink {
        out,
        case: format!(
            "{} clients x {} paths",
            num(r, &["clients"]).unwrap_or(0.0),
            num(r, &["paths_per_client"]).unwrap_or(0.0)
        ),
    };
    s.put("all up after".into(), "s", false, num(r, &["up_s"]));
    s.put(
        "one client".into(),
        "Mbit/s",
        true,
        num(r, &["single", "mbps"]),
    );
    s.put(
        "senders / one".into(),
        "x",
        true,
        num(r, &["aggregate_ratio"]),
    );
    s.put(
        "server RSS at end".into(),
        "KiB",
        false,
        num(r, &["server_end", "rss_kib"]),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlike_rows_give_runs_and_extra_measurements() {
        let v: Value = serde_json::from_str(
            r#"{"rows":[{"combo":"4in4","unlike":{"case":"wifi+lte",
              "paths":[{"name":"wifi"},{"name":"lte"}],
              "runs":[{"cc":"cubic","raw":[{"mbps":47.8},{"mbps":19.1}],
                "tunnel":{"mbps":62.0},"tunnel_runs_mbps":[60.0,62.0,65.0],
                "verdict":{"frac_best":1.3},"hold":null,
                "mptcp":{"mbps":55.0},
                "accel":{"kept":{"m":{"mbps":70.0}},"runs_mbps":[69.0,70.0,75.0],"over_mptcp":1.27}}],
              "objects":{"count":5,"mptcp_ms":2500.0,"tunnel_ms":3000.0,"accel_ms":1100.0}}}]}"#,
        )
        .expect("json");
        let f = figures(&v);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "mpt cubic",
                "raw wifi cubic",
                "raw lte cubic",
                "mpt / best raw cubic",
                "accelerated cubic",
                "accel / MPTCP cubic",
                "mptcp cubic",
                "1 MB object, MPTCP",
                "1 MB object, tunnel",
                "1 MB object, accelerated",
            ]
        );
        assert_eq!(f[4].runs, [69.0, 70.0, 75.0]);
        assert_eq!(f[0].runs, [60.0, 62.0, 65.0]);
        assert_eq!(f[0].value, 62.0);
        assert!(f.iter().all(|f| f.case == "wifi+lte"));
    }

    #[test]
    fn clients_and_throughput_reports() {
        let c: Value = serde_json::from_str(
            r#"{"clients":8,"paths_per_client":2,"up_s":1.5,"single":{"mbps":900}}"#,
        )
        .expect("json");
        let f = figures(&c);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].case, "8 clients x 2 paths");
        let t: Value = serde_json::from_str(
            r#"{"rows":[{"combo":"4in4","n":2,"rtt_ms":null,"tcp":{"mbps":80.0},"udp":null}]}"#,
        )
        .expect("json");
        let f = figures(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].case.as_str(), f[0].name.as_str()),
            ("4in4 N=2", "TCP")
        );
    }
}
