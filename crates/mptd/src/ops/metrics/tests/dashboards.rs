//! The Grafana dashboard (conf/grafana/mpt-dashboard.json) and the
//! Prometheus alert rules (conf/prometheus/mpt-alerts.yml) name only
//! series this module exports: a renamed or removed metric fails here
//! instead of leaving a dead panel or an alert that never fires.
//!
//! The exported names come from the page itself, rendered from a status
//! with one connection: each `# TYPE` line gives a family and its type,
//! which gives the sample names a query can use (`_total` for counters,
//! `_bucket`/`_sum`/`_count` for histograms).

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::*;

/// Series a query may name that mptd does not export: Prometheus' own
/// `up` of the scrape job.
const PROMETHEUS_OWN: [&str; 1] = ["up"];

fn repo_file(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every sample name the metrics page can carry.
fn exported() -> BTreeSet<String> {
    let page = render(&one_connection("c"));
    let mut names = BTreeSet::new();
    for line in page.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (family, kind) = rest.split_once(' ').unwrap();
        match kind {
            "gauge" => {
                names.insert(family.to_string());
            }
            "counter" => {
                names.insert(format!("{family}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{family}{suffix}"));
                }
            }
            other => panic!("family {family} of type {other}: teach this test its sample names"),
        }
    }
    assert!(names.len() >= 30, "{names:?}");
    names
}

/// The byte after the bracket that closes the one at `open`.
fn skip_bracketed(b: &[u8], open: usize) -> usize {
    let (o, c) = (
        b[open],
        match b[open] {
            b'{' => b'}',
            b'[' => b']',
            _ => b')',
        },
    );
    let mut depth = 0;
    let mut i = open;
    while i < b.len() {
        if b[i] == b'"' {
            i = skip_string(b, i);
            continue;
        }
        if b[i] == o {
            depth += 1;
        } else if b[i] == c {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
        i += 1;
    }
    panic!("unclosed {} in {}", o as char, String::from_utf8_lossy(b));
}

/// The byte after the string literal starting at `start`.
fn skip_string(b: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    panic!("unclosed string in {}", String::from_utf8_lossy(b));
}

/// The series names a PromQL expression selects: identifiers outside
/// label matchers, ranges, strings and grouping lists that are not
/// functions, aggregations or keywords (a metric named like one of those
/// would be missed; mptd's all start with `mpt_`). Grafana's `$variables` are not
/// names.
fn series_names(expr: &str) -> Vec<String> {
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    const KEYWORDS: [&str; 5] = ["and", "or", "unless", "bool", "offset"];
    // Aggregations, which may have their grouping before the `(`.
    const AGGREGATIONS: [&str; 12] = [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    ];
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut names = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            i = skip_string(b, i);
        } else if c == b'{' || c == b'[' {
            i = skip_bracketed(b, i);
        } else if c == b'$' || c.is_ascii_digit() {
            // A variable, a number or a duration: skip the word.
            i += 1;
            while i < b.len() && (ident(b[i]) || b[i] == b'.') {
                i += 1;
            }
        } else if ident(c) {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            let mut next = i;
            while next < b.len() && b[next] == b' ' {
                next += 1;
            }
            let call = next < b.len() && b[next] == b'(';
            if GROUPING.contains(&word) {
                if call {
                    i = skip_bracketed(b, next);
                }
            } else if !call && !KEYWORDS.contains(&word) && !AGGREGATIONS.contains(&word) {
                names.push(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    names
}

/// Each query of the dashboard: panel targets (rows' nested panels too)
/// and the variables' `label_values(SELECTOR, LABEL)` selectors.
fn dashboard_queries(dash: &serde_json::Value) -> Vec<(String, String)> {
    fn panels(list: &serde_json::Value, out: &mut Vec<(String, String)>) {
        for p in list.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?").to_string();
            if p["type"] == "row" {
                panels(&p["panels"], out);
                continue;
            }
            let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            assert!(!targets.is_empty(), "panel {title:?} has no query");
            for t in targets {
                let expr = t["expr"].as_str().unwrap_or_else(|| panic!("{title}: {t}"));
                out.push((title.clone(), expr.to_string()));
            }
        }
    }
    let mut out = Vec::new();
    panels(&dash["panels"], &mut out);
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] != "query" {
            continue;
        }
        let query = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .unwrap();
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {}: {query}", v["name"]));
        let (selector, _label) = inner.rsplit_once(',').unwrap();
        out.push((format!("variable {}", v["name"]), selector.to_string()));
    }
    out
}

/// Each rule's alert name and expression; the file keeps every `expr:` on
/// one line so that no YAML parser is needed.
fn rule_queries(yaml: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut alert = None;
    for line in yaml.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert:") {
            alert = Some(name.trim().to_string());
        } else if let Some(expr) = line.strip_prefix("expr:") {
            let expr = expr.trim();
            assert!(
                !expr.is_empty() && !expr.starts_with(['|', '>']),
                "{alert:?}: keep the expression on the `expr:` line"
            );
            out.push((
                alert.take().expect("expr before its alert"),
                expr.to_string(),
            ));
        }
    }
    let alerts = yaml.matches("- alert:").count();
    assert_eq!(out.len(), alerts, "every alert has one expr");
    out
}

/// The names of `queries` that the page lacks, as "where: name".
fn unknown(queries: &[(String, String)], exported: &BTreeSet<String>) -> Vec<String> {
    let mut bad = Vec::new();
    for (where_, expr) in queries {
        let names = series_names(expr);
        if names.is_empty() {
            bad.push(format!("{where_}: names no series: {expr}"));
        }
        for n in names {
            if !exported.contains(&n) && !PROMETHEUS_OWN.contains(&n.as_str()) {
                bad.push(format!("{where_}: {n}"));
            }
        }
    }
    bad
}

#[test]
fn the_query_reader_finds_series_and_only_series() {
    assert_eq!(
        series_names(
            "histogram_quantile(0.99, sum by (instance, conn, le) \
             (rate(mpt_reorder_hold_seconds_bucket{conn=~\"$conn\"}[$__rate_interval])))"
        ),
        ["mpt_reorder_hold_seconds_bucket"]
    );
    assert_eq!(
        series_names(
            "mpt_a > 150 and on (instance, job, conn) mpt_b{event=\"x}\"} unless count(x_y) or vector(0)"
        ),
        ["mpt_a", "mpt_b", "x_y"]
    );
    assert_eq!(
        series_names("8 * rate(mpt_c_total[5m]) > 1e3"),
        ["mpt_c_total"]
    );
    assert!(series_names("vector(1)").is_empty());
}

#[test]
fn dashboard_and_alert_rules_name_only_exported_series() {
    let exported = exported();
    let dash: serde_json::Value =
        serde_json::from_str(&repo_file("conf/grafana/mpt-dashboard.json")).unwrap();
    let panels = dashboard_queries(&dash);
    assert!(panels.len() >= 20, "{} queries", panels.len());
    let rules = rule_queries(&repo_file("conf/prometheus/mpt-alerts.yml"));
    assert!(rules.len() >= 5, "{rules:?}");
    let mut bad = unknown(&panels, &exported);
    bad.extend(unknown(&rules, &exported));
    assert!(
        bad.is_empty(),
        "series mptd does not export (it exports {exported:?}):\n{}",
        bad.join("\n")
    );
    // And every family has a panel (a histogram's _sum and _count aside).
    let named: BTreeSet<String> = panels.iter().flat_map(|(_, e)| series_names(e)).collect();
    let unshown: Vec<&String> = exported
        .iter()
        .filter(|n| !named.contains(*n))
        .filter(|n| !n.ends_with("_sum") && !n.ends_with("_count"))
        .collect();
    assert!(unshown.is_empty(), "no panel shows {unshown:?}");
}
