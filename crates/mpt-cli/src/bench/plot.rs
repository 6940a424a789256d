//! A small hand-written SVG chart (lines or dots, shaded x ranges) for the
//! `lte-gateway` and `dtn-relay` reports.

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

fn fmt_tick(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The `q` quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_quantiles() {
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
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
