//! `mpt bench compare OLD.json NEW.json`: every figure of two runs side by
//! side, the change, and whether the change is beyond the runs' spread;
//! with warnings where the runs' conditions ([`RunMeta`]) differ.
//!
//! The spread rule ([`SPREAD_RULE`]) is deliberately plain: with repeated
//! runs each side has a range (lowest to highest run), and a change
//! counts only when the two ranges do not overlap. A single run is a range
//! of width zero; with one run on both sides there is no spread to judge
//! by, and the comparison says so rather than guessing.

use serde::Serialize;
use serde_json::Value;

use super::figures::{figures, Figure};
use super::meta::RunMeta;

/// The rule, as `mpt bench compare --help` states it.
pub const SPREAD_RULE: &str = "A change is beyond the spread when the \
ranges of the runs (lowest to highest run of each side) do not overlap; \
a single run is a range of width zero. With one run on both sides there \
is no spread to judge by (shown as `1 run`).";

/// One side of a figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub value: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Side {
    fn of(f: &Figure) -> Side {
        let min = f.runs.iter().copied().fold(f.value, f64::min);
        let max = f.runs.iter().copied().fold(f.value, f64::max);
        Side {
            value: f.value,
            min,
            max,
            runs: f.runs.len().max(1),
        }
    }
}

/// One figure compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    pub case: String,
    pub figure: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub old: Option<Side>,
    pub new: Option<Side>,
    /// (new − old) / old, percent.
    pub change_pct: Option<f64>,
    /// `None`: one run on both sides (or a side missing).
    pub beyond_spread: Option<bool>,
    /// "better", "worse", "within spread", "1 run", "only old", "only new".
    pub verdict: String,
}

/// Two runs compared.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub old_scenario: String,
    pub new_scenario: String,
    /// Conditions that differ (kernel, cores, congestion control, ...).
    pub warnings: Vec<String>,
    pub lines: Vec<Line>,
    pub spread_rule: &'static str,
}

fn meta_of(v: &Value) -> Option<RunMeta> {
    serde_json::from_value(v.get("meta")?.clone()).ok()
}

/// Compares two results.json trees.
pub fn compare(old: &Value, new: &Value) -> Comparison {
    let name = |v: &Value| {
        v.get("scenario")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut warnings = Vec::new();
    if name(old) != name(new) {
        warnings.push(format!("scenario: {} -> {}", name(old), name(new)));
    }
    match (meta_of(old), meta_of(new)) {
        (Some(a), Some(b)) => warnings.extend(a.differences(&b)),
        (a, b) => {
            let which = match (a.is_none(), b.is_none()) {
                (true, true) => "OLD and NEW have",
                (true, false) => "OLD has",
                _ => "NEW has",
            };
            warnings.push(format!(
                "{which} no run metadata (written before `meta`): only kernel and cores compared"
            ));
            for key in ["kernel", "cores"] {
                let (x, y) = (old.get(key), new.get(key));
                if x != y {
                    let s = |v: Option<&Value>| v.map_or("?".into(), Value::to_string);
                    warnings.push(format!("{key}: {} -> {}", s(x), s(y)));
                }
            }
        }
    }
    let (fo, fnew) = (figures(old), figures(new));
    let mut lines: Vec<Line> = Vec::new();
    for f in &fo {
        let n = fnew.iter().find(|g| g.case == f.case && g.name == f.name);
        lines.push(line(Some(f), n));
    }
    for g in &fnew {
        if !fo.iter().any(|f| f.case == g.case && f.name == g.name) {
            lines.push(line(None, Some(g)));
        }
    }
    Comparison {
        old_scenario: name(old),
        new_scenario: name(new),
        warnings,
        lines,
        spread_rule: SPREAD_RULE,
    }
}

fn line(old: Option<&Figure>, new: Option<&Figure>) -> Line {
    let f = old.or(new).expect("one side");
    let (o, n) = (old.map(Side::of), new.map(Side::of));
    let change_pct = match (&o, &n) {
        (Some(o), Some(n)) if o.value != 0.0 => Some((n.value - o.value) / o.value.abs() * 100.0),
        _ => None,
    };
    let beyond_spread = match (&o, &n) {
        (Some(o), Some(n)) if o.runs > 1 || n.runs > 1 => Some(n.min > o.max || n.max < o.min),
        _ => None,
    };
    let verdict = match (&o, &n, beyond_spread) {
        (Some(_), None, _) => "only old".into(),
        (None, Some(_), _) => "only new".into(),
        (_, _, None) => "1 run".into(),
        (_, _, Some(false)) => "within spread".into(),
        (Some(o), Some(n), Some(true)) => {
            if (n.value > o.value) == f.higher_is_better {
                "better".into()
            } else {
                "worse".into()
            }
        }
        _ => String::new(),
    };
    Line {
        case: f.case.clone(),
        figure: f.name.clone(),
        unit: f.unit.into(),
        higher_is_better: f.higher_is_better,
        old: o,
        new: n,
        change_pct,
        beyond_spread,
        verdict,
    }
}

fn side_text(s: &Option<Side>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.runs > 1 => format!("{:.2} [{:.2}..{:.2}]", s.value, s.min, s.max),
        Some(s) => format!("{:.2}", s.value),
    }
}

impl Comparison {
    /// The comparison as a table, the warnings first.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for w in &self.warnings {
            out += &format!("warning: runs differ in {w}\n");
        }
        if !self.warnings.is_empty() {
            out += "\n";
        }
        let w0 = self
            .lines
            .iter()
            .map(|l| l.figure.len() + l.unit.len() + 3)
            .chain([6])
            .max()
            .unwrap_or(6)
            + 2;
        let cols = |s: &mut String, a: &str, b: &str, c: &str, d: &str, e: &str| {
            *s += &format!("{a:<w0$}{b:>24}  {c:>24}  {d:>9}  {e}\n");
        };
        cols(&mut out, "figure", "old", "new", "change", "beyond spread?");
        let mut case = None;
        for l in &self.lines {
            if case != Some(&l.case) {
                out += &format!("{}\n", l.case);
                case = Some(&l.case);
            }
            let change = l.change_pct.map_or("-".into(), |c| format!("{c:+.1} %"));
            cols(
                &mut out,
                &format!("  {} ({})", l.figure, l.unit),
                &side_text(&l.old),
                &side_text(&l.new),
                &change,
                &l.verdict,
            );
        }
        let (better, worse) = (
            self.lines.iter().filter(|l| l.verdict == "better").count(),
            self.lines.iter().filter(|l| l.verdict == "worse").count(),
        );
        out += &format!(
            "\n{} figure(s): {better} better and {worse} worse beyond the spread; [lo..hi] = range of \
             the runs; `1 run` = a single run on both sides, no spread to judge by\n",
            self.lines.len()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = include_str!("fixtures/compare-old.json");
    const NEW: &str = include_str!("fixtures/compare-new.json");

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).expect("fixture")
    }

    #[test]
    fn fixtures_compare_side_by_side() {
        let c = compare(&parse(OLD), &parse(NEW));
        let find = |case: &str, fig: &str| {
            c.lines
                .iter()
                .find(|l| l.case == case && l.figure == fig)
                .unwrap_or_else(|| panic!("{case} / {fig}: {:#?}", c.lines))
        };
        // Runs 60..65 against 70..74: beyond the spread, better.
        let l = find("wifi+lte", "mpt cubic");
        assert_eq!(l.beyond_spread, Some(true));
        assert_eq!(l.verdict, "better");
        assert!((l.change_pct.expect("pct") - (72.0 - 62.0) / 62.0 * 100.0).abs() < 1e-9);
        // Runs 60..66 against 58..64: overlapping, within the spread.
        let l = find("wifi+lte", "mpt bbr");
        assert_eq!(
            (l.beyond_spread, l.verdict.as_str()),
            (Some(false), "within spread")
        );
        // Single runs: no spread to judge by.
        let l = find("wifi+lte", "raw wifi cubic");
        assert_eq!((l.beyond_spread, l.verdict.as_str()), (None, "1 run"));
        // A baseline only the new file has.
        assert_eq!(find("wifi+lte", "mptcp cubic").verdict, "only new");
        // Lower is better for a hold time: 12 -> 30 ms with runs? single.
        assert!(!find("wifi+lte", "hold p99 cubic").higher_is_better);
        // The metadata differ in kernel, cores and congestion control.
        let w = c.warnings.join("\n");
        assert!(w.contains("kernel: 6.1.0 -> 6.8.0"), "{w}");
        assert!(w.contains("cores: 2 -> 4"), "{w}");
        assert!(w.contains("congestion control"), "{w}");
        assert!(!w.contains("profile"), "{w}");
        let t = c.text();
        assert!(t.contains("warning: runs differ in kernel"), "{t}");
        assert!(
            t.contains("62.00 [60.00..65.00]") && t.contains("+16.1 %"),
            "{t}"
        );
        assert!(t.contains("1 better and 0 worse"), "{t}");
        let j = serde_json::to_value(&c).expect("json");
        assert_eq!(j["lines"][0]["beyond_spread"], Value::Bool(true));
    }

    #[test]
    fn files_without_meta_still_compare() {
        let mut old = parse(OLD);
        old.as_object_mut().expect("object").remove("meta");
        let c = compare(&old, &parse(NEW));
        assert!(c
            .warnings
            .iter()
            .any(|w| w.starts_with("OLD has no run metadata")));
        assert!(c.warnings.iter().any(|w| w.starts_with("kernel")));
        assert!(!c.lines.is_empty());
    }
}
