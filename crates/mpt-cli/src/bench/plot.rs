//! Small hand-written SVG charts: lines or dots with shaded x ranges (the
//! `lte-gateway` and `dtn-relay` reports) and grouped bars (`unlike`).

use std::fmt::Write as _;

/// One plotted series.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// Dots without a connecting line (e.g. per-packet delays).
    pub dots: bool,
}

/// A chart: axes from 0 to the data maxima, x ranges to shade (outages).
#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub xlabel: String,
    pub ylabel: String,
    pub series: Vec<Series>,
    pub shade: Vec<(f64, f64, String)>,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Rounds up to a round axis maximum (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k).
pub(crate) fn nice(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(v.log10().floor());
    for m in [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if v <= m * e {
            return m * e;
        }
    }
    10.0 * e
}

/// Escapes text for SVG.
pub(crate) fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Chart {
    pub fn render(&self) -> String {
        let (w, h) = (900.0, 560.0);
        let (l, r, t, b) = (70.0, 260.0, 40.0, 60.0);
        let pts = || self.series.iter().flat_map(|s| s.points.iter());
        let xmax = nice(
            pts()
                .map(|p| p.0)
                .chain(self.shade.iter().map(|s| s.1))
                .fold(0.0, f64::max),
        );
        let ymax = nice(pts().map(|p| p.1).fold(0.0, f64::max) * 1.05);
        let px = |x: f64| l + x / xmax * (w - l - r);
        let py = |y: f64| h - b - y / ymax * (h - t - b);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        );
        let _ = writeln!(
            s,
            "<text x=\"{l}\" y=\"24\" font-size=\"15\">{}</text>",
            xml(&self.title)
        );
        for (x0, x1, label) in &self.shade {
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{t}\" width=\"{:.1}\" height=\"{}\" fill=\"#fdd\"><title>{}</title></rect>\
                 <text x=\"{:.1}\" y=\"{}\" fill=\"#a33\">{}</text>",
                px(*x0),
                (px(*x1) - px(*x0)).max(1.0),
                h - t - b,
                xml(label),
                px(*x0) + 3.0,
                t + 14.0,
                xml(label)
            );
        }
        for i in 0..=5 {
            let y = ymax * f64::from(i) / 5.0;
            let x = xmax * f64::from(i) / 5.0;
            let _ = writeln!(
                s,
                "<line x1=\"{l}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
                 <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                w - r,
                py(y),
                py(y),
                l - 6.0,
                py(y) + 4.0,
                fmt_tick(y),
                px(x),
                h - b + 18.0,
                fmt_tick(x)
            );
        }
        let _ = writeln!(
            s,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>\
             <line x1=\"{l}\" x2=\"{l}\" y1=\"{t}\" y2=\"{}\" stroke=\"black\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
             <text x=\"18\" y=\"{}\" transform=\"rotate(-90 18 {})\" text-anchor=\"middle\">{}</text>",
            w - r,
            h - b,
            h - b,
            h - b,
            (l + w - r) / 2.0,
            h - 18.0,
            xml(&self.xlabel),
            (t + h - b) / 2.0,
            (t + h - b) / 2.0,
            xml(&self.ylabel)
        );
        for (i, se) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut p = se.points.clone();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            let dash = if se.dashed {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            if se.dots {
                for (x, y) in &p {
                    let _ = writeln!(
                        s,
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"1.5\" fill=\"{color}\"/>",
                        px(*x),
                        py(*y)
                    );
                }
            } else {
                let path: Vec<String> = p
                    .iter()
                    .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
                    .collect();
                let _ = writeln!(
                    s,
                    "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
                    path.join(" ")
                );
                for (x, y) in &p {
                    let _ = writeln!(
                        s,
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"><title>{}: {x:.1}, {y:.2}</title></circle>",
                        px(*x),
                        py(*y),
                        xml(&se.label)
                    );
                }
            }
            let ly = t + 10.0 + i as f64 * 18.0;
            let _ = writeln!(
                s,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/>\
                 <text x=\"{}\" y=\"{}\">{}</text>",
                w - r + 12.0,
                w - r + 36.0,
                w - r + 42.0,
                ly + 4.0,
                xml(&se.label)
            );
        }
        s += "</svg>\n";
        s
    }
}

/// One group of bars (e.g. one case and congestion control), with an
/// optional horizontal mark across it (e.g. a target).
#[derive(Debug, Clone, Default)]
pub struct BarGroup {
    /// Label under the group; `\n` starts a second line.
    pub label: String,
    /// (legend key, value); the same key keeps the same colour in every group.
    pub bars: Vec<(String, f64)>,
    pub mark: Option<(f64, String)>,
}

/// A grouped bar chart.
#[derive(Debug, Clone, Default)]
pub struct BarChart {
    pub title: String,
    pub ylabel: String,
    pub groups: Vec<BarGroup>,
}

impl BarChart {
    pub fn render(&self) -> String {
        let mut keys: Vec<&str> = Vec::new();
        for g in &self.groups {
            for (k, _) in &g.bars {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
        let (l, r, t, b) = (70.0, 200.0, 40.0, 70.0);
        let slots: usize = self.groups.iter().map(|g| g.bars.len() + 1).sum();
        let bar_w = 22.0;
        let w = (l + r + bar_w * slots.max(1) as f64).max(600.0);
        let h = 520.0;
        let vmax = self
            .groups
            .iter()
            .flat_map(|g| g.bars.iter().map(|b| b.1).chain(g.mark.iter().map(|m| m.0)))
            .fold(0.0, f64::max);
        let ymax = nice(vmax * 1.08);
        let py = |y: f64| h - b - y / ymax * (h - t - b);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        );
        let _ = writeln!(
            s,
            "<text x=\"{l}\" y=\"24\" font-size=\"15\">{}</text>",
            xml(&self.title)
        );
        for i in 0..=5 {
            let y = ymax * f64::from(i) / 5.0;
            let _ = writeln!(
                s,
                "<line x1=\"{l}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                w - r,
                py(y),
                py(y),
                l - 6.0,
                py(y) + 4.0,
                fmt_tick(y)
            );
        }
        let _ = writeln!(
            s,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>\
             <text x=\"18\" y=\"{}\" transform=\"rotate(-90 18 {})\" text-anchor=\"middle\">{}</text>",
            w - r,
            h - b,
            h - b,
            (t + h - b) / 2.0,
            (t + h - b) / 2.0,
            xml(&self.ylabel)
        );
        let mut x = l + bar_w / 2.0;
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
                    bar_w - 2.0,
                    (h - b - py(*v)).max(0.0),
                    xml(&g.label.replace('\n', " ")),
                    xml(k)
                );
                x += bar_w;
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
                    h - b + 16.0 + 14.0 * j as f64,
                    xml(line)
                );
            }
            x += bar_w;
        }
        for (i, k) in keys.iter().enumerate() {
            let ly = t + 10.0 + i as f64 * 18.0;
            let _ = writeln!(
                s,
                "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" fill=\"{}\"/>\
                 <text x=\"{}\" y=\"{}\">{}</text>",
                w - r + 12.0,
                ly - 5.0,
                COLORS[i % COLORS.len()],
                w - r + 34.0,
                ly + 4.0,
                xml(k)
            );
        }
        if self.groups.iter().any(|g| g.mark.is_some()) {
            let ly = t + 10.0 + keys.len() as f64 * 18.0;
            let _ = writeln!(
                s,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"black\" stroke-width=\"2\" \
                 stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"{}\">target</text>",
                w - r + 12.0,
                w - r + 28.0,
                w - r + 34.0,
                ly + 4.0
            );
        }
        s += "</svg>\n";
        s
    }
}

fn fmt_tick(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_lines() {
        let c = Chart {
            title: "t".into(),
            xlabel: "x".into(),
            ylabel: "y".into(),
            series: vec![Series {
                label: "a".into(),
                points: vec![(0.0, 1.0), (2.0, 3.0)],
                ..Series::default()
            }],
            shade: vec![(0.5, 1.0, "outage".into())],
        };
        let s = c.render();
        assert!(s.starts_with("<svg") && s.contains("polyline") && s.contains("outage"));
    }

    #[test]
    fn renders_bars() {
        let c = BarChart {
            title: "t".into(),
            ylabel: "Mbit/s".into(),
            groups: vec![BarGroup {
                label: "a+b\ncubic".into(),
                bars: vec![("raw 1".into(), 10.0), ("tunnel".into(), 12.0)],
                mark: Some((11.0, "target".into())),
            }],
        };
        let s = c.render();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<title>a+b cubic").count(), 2);
        assert!(s.contains("stroke-dasharray") && s.contains(">cubic</text>"));
    }
}
