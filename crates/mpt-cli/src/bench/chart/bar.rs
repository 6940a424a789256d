//! Grouped bar charts: per group (e.g. a case and congestion control) one
//! bar per key, with an optional dashed mark across the group (a target).

use std::fmt::Write as _;

use super::scale::Axis;
use super::svg::{xml, Frame, COLORS};

/// One group of bars (e.g. one case and congestion control), with an
/// optional horizontal mark across it (e.g. a target).
#[derive(Debug, Clone, Default)]
pub struct BarGroup {
    /// Label under the group; `\n` starts a second line.
    pub label: String,
    /// (legend key, value); the same key keeps the same colour in every group.
    pub bars: Vec<(String, f64)>,
    pub mark: Option<(f64, String)>,
    /// Repeated runs of a bar (its key): drawn as a min-max bar and a dot
    /// per run over it.
    pub spread: Vec<(String, Vec<f64>)>,
}

/// A grouped bar chart.
#[derive(Debug, Clone, Default)]
pub struct BarChart {
    pub title: String,
    pub ylabel: String,
    pub groups: Vec<BarGroup>,
}

/// Width of one bar slot; a gap of one slot separates the groups.
const BAR_W: f64 = 22.0;

impl BarChart {
    /// The chart as an SVG document, as wide as its bars need.
    pub fn render(&self) -> String {
        let mut keys: Vec<&str> = Vec::new();
        for g in &self.groups {
            for (k, _) in &g.bars {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
        let (l, r) = (70.0, 200.0);
        let slots: usize = self.groups.iter().map(|g| g.bars.len() + 1).sum();
        let f = Frame {
            w: (l + r + BAR_W * slots.max(1) as f64).max(600.0),
            h: 520.0,
            l,
            r,
            t: 40.0,
            b: 70.0,
        };
        let vmax = self
            .groups
            .iter()
            .flat_map(|g| {
                g.bars
                    .iter()
                    .map(|b| b.1)
                    .chain(g.mark.iter().map(|m| m.0))
                    .chain(g.spread.iter().flat_map(|r| r.1.iter().copied()))
            })
            .fold(0.0, f64::max);
        let ya = Axis::new(vmax * 1.05);
        let py = |y: f64| f.py(y, &ya);
        let mut s = f.open(&self.title);
        f.y_grid(&mut s, &ya);
        f.x_axis(&mut s);
        f.y_label(&mut s, &self.ylabel);
        let mut x = l + BAR_W / 2.0;
        for g in &self.groups {
            let x0 = x;
            for (k, v) in &g.bars {
                let ci = keys.iter().position(|q| q == k).unwrap_or(0);
                let color = COLORS[ci % COLORS.len()];
                let _ = writeln!(
                    s,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\">\
                     <title>{} {}: {v:.2}</title></rect>",
                    py(*v),
                    BAR_W - 2.0,
                    (f.y_base() - py(*v)).max(0.0),
                    xml(&g.label.replace('\n', " ")),
                    xml(k)
                );
                if let Some((_, runs)) = g.spread.iter().find(|r| &r.0 == k) {
                    spread(&mut s, x + BAR_W / 2.0 - 1.0, runs, &py);
                }
                x += BAR_W;
            }
            if let Some((m, label)) = &g.mark {
                let _ = writeln!(
                    s,
                    "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\" \
                     stroke-width=\"2\" stroke-dasharray=\"4 3\"><title>{}: {m:.2}</title></line>",
                    x0 - 3.0,
                    x + 1.0,
                    py(*m),
                    py(*m),
                    xml(label)
                );
            }
            for (j, line) in g.label.lines().enumerate() {
                let _ = writeln!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                    (x0 + x) / 2.0,
                    f.y_base() + 16.0 + 14.0 * j as f64,
                    xml(line)
                );
            }
            x += BAR_W;
        }
        for (i, k) in keys.iter().enumerate() {
            f.legend_box(&mut s, i, COLORS[i % COLORS.len()], k);
        }
        let mut row = keys.len();
        if self.groups.iter().any(|g| g.mark.is_some()) {
            let ly = f.legend_y(row);
            row += 1;
            let _ = writeln!(
                s,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"black\" stroke-width=\"2\" \
                 stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"{}\">target</text>",
                f.x_end() + 12.0,
                f.x_end() + 28.0,
                f.x_end() + 34.0,
                ly + 4.0
            );
        }
        if self
            .groups
            .iter()
            .any(|g| g.spread.iter().any(|r| r.1.len() > 1))
        {
            let ly = f.legend_y(row);
            let cx = f.x_end() + 20.0;
            let _ = writeln!(
                s,
                "<path d=\"M{cx},{}V{}\" stroke=\"black\" stroke-width=\"1.5\"/>\
                 <circle cx=\"{cx}\" cy=\"{ly}\" r=\"2.5\" fill=\"white\" stroke=\"black\"/>\
                 <text x=\"{}\" y=\"{}\">repeated runs: range, each run</text>",
                ly - 7.0,
                ly + 7.0,
                f.x_end() + 34.0,
                ly + 4.0
            );
        }
        s += "</svg>\n";
        s
    }
}

/// The runs of a bar: a black min-max bar with caps and a hollow dot per
/// run, centred on `cx`.
fn spread(s: &mut String, cx: f64, runs: &[f64], py: &dyn Fn(f64) -> f64) {
    if runs.len() < 2 {
        return;
    }
    let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (ylo, yhi) = (py(lo), py(hi));
    let _ = writeln!(
        s,
        "<path d=\"M{:.1},{ylo:.1}H{:.1}M{cx:.1},{ylo:.1}V{yhi:.1}M{:.1},{yhi:.1}H{:.1}\" \
         stroke=\"black\" stroke-width=\"1.5\" fill=\"none\"><title>runs {lo:.2} to {hi:.2}</title></path>",
        cx - 5.0,
        cx + 5.0,
        cx - 5.0,
        cx + 5.0
    );
    for v in runs {
        let _ = writeln!(
            s,
            "<circle cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"white\" stroke=\"black\"/>",
            py(*v)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bars() {
        let c = BarChart {
            title: "t".into(),
            ylabel: "Mbit/s".into(),
            groups: vec![BarGroup {
                label: "a+b\ncubic".into(),
                bars: vec![("raw 1".into(), 10.0), ("tunnel".into(), 12.0)],
                mark: Some((11.0, "target".into())),
                spread: vec![("tunnel".into(), vec![11.0, 12.0, 13.5])],
            }],
        };
        let s = c.render();
        assert_eq!(
            s.matches("fill=\"white\" stroke=\"black\"").count(),
            3 + 1,
            "3 runs and the legend"
        );
        assert!(s.contains("<title>runs 11.00 to 13.50</title>"));
        assert!(s.contains(">repeated runs: range, each run</text>"));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<title>a+b cubic").count(), 2);
        assert!(s.contains("stroke-dasharray") && s.contains(">cubic</text>"));
    }

    #[test]
    fn keys_keep_their_colour_and_the_axis_is_round() {
        let g = |label: &str, bars: &[(&str, f64)]| BarGroup {
            label: label.into(),
            bars: bars.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            mark: None,
            spread: Vec::new(),
        };
        let c = BarChart {
            title: "bars".into(),
            ylabel: "goodput (Mbit/s)".into(),
            groups: vec![
                g("one", &[("raw", 40.0), ("tunnel", 50.0)]),
                g("two", &[("tunnel", 30.0)]),
            ],
        };
        let s = c.render();
        assert_eq!(
            s.matches("<rect x=").count(),
            3 + 2,
            "3 bars, 2 legend boxes"
        );
        let tunnel = format!("fill=\"{}\"><title>", COLORS[1]);
        assert_eq!(s.matches(&tunnel).count(), 2);
        // 50 x 1.05 -> 60: ticks 0, 10, ..., 60.
        for t in [
            ">0</text>",
            ">10</text>",
            ">60</text>",
            ">goodput (Mbit/s)</text>",
        ] {
            assert!(s.contains(t), "{t}");
        }
        assert!(!s.contains(">target</text>"), "no mark, no target legend");
        // Narrow charts keep the minimum width.
        assert!(s.contains("width=\"600\""));
    }
}
