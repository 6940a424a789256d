//! Small multiples: one [`Chart`] panel per variant or case, side by side
//! in a grid under one title, on shared axes so that panels compare at a
//! glance (four variants drawn into one panel hide each other).

use std::fmt::Write as _;

use super::line::Chart;
use super::scale::Axis;
use super::svg::{xml, Frame};

/// Panels in a grid.
#[derive(Debug, Clone, Default)]
pub struct Panels {
    pub title: String,
    pub charts: Vec<Chart>,
    /// Panels per row (at least 1).
    pub cols: usize,
    /// Give every panel the same y axis (else each its own).
    pub share_y: bool,
}

/// One panel's size and margins (legend on the right).
pub const PANEL: Frame = Frame {
    w: 620.0,
    h: 340.0,
    l: 62.0,
    r: 200.0,
    t: 34.0,
    b: 52.0,
};

/// Height of the title row above the panels.
const HEAD: f64 = 36.0;

impl Panels {
    /// The grid as one SVG document.
    pub fn render(&self) -> String {
        let cols = self.cols.max(1).min(self.charts.len().max(1));
        let rows = self.charts.len().div_ceil(cols).max(1);
        // As wide as the panels, or the title (about 8 px a character).
        let title_w = PANEL.l + 8.0 * self.title.chars().count() as f64;
        let (w, h) = (
            (PANEL.w * cols as f64).max(title_w),
            HEAD + PANEL.h * rows as f64,
        );
        let (mut xmax, mut ymax) = (0.0_f64, 0.0_f64);
        for c in &self.charts {
            let (x, y) = c.data_max();
            xmax = xmax.max(x);
            ymax = ymax.max(y);
        }
        let xa = Axis::new(xmax);
        let ya = Axis::new(ymax * 1.05);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
             <text x=\"{}\" y=\"24\" font-size=\"15\">{}</text>\n",
            PANEL.l,
            xml(&self.title)
        );
        for (i, c) in self.charts.iter().enumerate() {
            let (x, y) = (
                PANEL.w * (i % cols) as f64,
                HEAD + PANEL.h * (i / cols) as f64,
            );
            let panel = Chart {
                frame: Some(PANEL),
                x_axis: c.x_axis.or(Some(xa)),
                y_axis: c.y_axis.or(self.share_y.then_some(ya)),
                ..c.clone()
            };
            let doc = panel.render();
            let _ = write!(
                s,
                "{}",
                doc.replacen("<svg ", &format!("<svg x=\"{x}\" y=\"{y}\" "), 1)
            );
        }
        s += "</svg>\n";
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::chart::line::Series;

    #[test]
    fn panels_share_axes_in_a_grid() {
        let chart = |label: &str, y: f64| Chart {
            title: label.into(),
            series: vec![Series {
                label: label.into(),
                points: vec![(0.0, 1.0), (10.0, y)],
                ..Series::default()
            }],
            ..Chart::default()
        };
        let p = Panels {
            title: "variants & more".into(),
            charts: vec![chart("a", 5.0), chart("b", 50.0), chart("c", 20.0)],
            cols: 2,
            share_y: true,
        };
        let s = p.render();
        assert!(s.contains("width=\"1240\" height=\"716\""), "{s}");
        assert!(s.contains("<svg x=\"620\" y=\"36\""));
        assert!(s.contains("<svg x=\"0\" y=\"376\""));
        assert!(s.contains(">variants &amp; more</text>"));
        // All three panels label the shared y axis up to 60.
        assert_eq!(s.matches(">60</text>").count(), 3, "{s}");
    }
}
