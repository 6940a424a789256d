//! The frame every chart shares: document, title, horizontal grid with y
//! labels, the rotated y-axis label, legend rows; the palette and text
//! escaping.

use std::fmt::Write as _;

use super::scale::{fmt_tick, ticks};

/// Series colours, in order (a series or bar key keeps its colour).
pub const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Margins around the plot area: left, right (room for the legend), top,
/// bottom.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub w: f64,
    pub h: f64,
    pub l: f64,
    pub r: f64,
    pub t: f64,
    pub b: f64,
}

impl Frame {
    /// Right edge of the plot area.
    pub fn x_end(&self) -> f64 {
        self.w - self.r
    }

    /// Bottom edge of the plot area (the x axis).
    pub fn y_base(&self) -> f64 {
        self.h - self.b
    }

    /// Pixel row of `y` on an axis from 0 to `ymax`.
    pub fn py(&self, y: f64, ymax: f64) -> f64 {
        self.h - self.b - y / ymax * (self.h - self.t - self.b)
    }

    /// The document with a white background and the title.
    pub fn open(&self, title: &str) -> String {
        let (w, h, l) = (self.w, self.h, self.l);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        );
        let _ = writeln!(
            s,
            "<text x=\"{l}\" y=\"24\" font-size=\"15\">{}</text>",
            xml(title)
        );
        s
    }

    /// Six horizontal grid lines from 0 to `ymax` with their labels.
    pub fn y_grid(&self, s: &mut String, ymax: f64) {
        for y in ticks(ymax, 5) {
            let py = self.py(y, ymax);
            let _ = writeln!(
                s,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                self.l,
                self.x_end(),
                self.l - 6.0,
                py + 4.0,
                fmt_tick(y)
            );
        }
    }

    /// The x axis line.
    pub fn x_axis(&self, s: &mut String) {
        let yb = self.y_base();
        let _ = writeln!(
            s,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{yb}\" y2=\"{yb}\" stroke=\"black\"/>",
            self.l,
            self.x_end()
        );
    }

    /// The y axis line.
    pub fn y_axis(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "<line x1=\"{l}\" x2=\"{l}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>",
            self.t,
            self.y_base(),
            l = self.l
        );
    }

    /// The x-axis label, centred under the plot area.
    pub fn x_label(&self, s: &mut String, label: &str) {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            (self.l + self.x_end()) / 2.0,
            self.h - 18.0,
            xml(label)
        );
    }

    /// The y-axis label, rotated, left of the tick labels.
    pub fn y_label(&self, s: &mut String, label: &str) {
        let mid = (self.t + self.y_base()) / 2.0;
        let _ = writeln!(
            s,
            "<text x=\"18\" y=\"{mid}\" transform=\"rotate(-90 18 {mid})\" \
             text-anchor=\"middle\">{}</text>",
            xml(label)
        );
    }

    /// Baseline of legend row `i`.
    pub fn legend_y(&self, i: usize) -> f64 {
        self.t + 10.0 + i as f64 * 18.0
    }

    /// A legend row with a line sample (`dash`: extra attributes).
    pub fn legend_line(&self, s: &mut String, i: usize, color: &str, dash: &str, label: &str) {
        let ly = self.legend_y(i);
        let x = self.x_end();
        let _ = writeln!(
            s,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            x + 12.0,
            x + 36.0,
            x + 42.0,
            ly + 4.0,
            xml(label)
        );
    }

    /// A legend row with a colour box.
    pub fn legend_box(&self, s: &mut String, i: usize, color: &str, label: &str) {
        let ly = self.legend_y(i);
        let x = self.x_end();
        let _ = writeln!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            x + 12.0,
            ly - 5.0,
            x + 34.0,
            ly + 4.0,
            xml(label)
        );
    }
}

/// Escapes text for SVG.
pub fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(xml("a < b & c > d"), "a &lt; b &amp; c &gt; d");
        let f = Frame {
            w: 600.0,
            h: 400.0,
            l: 50.0,
            r: 100.0,
            t: 40.0,
            b: 60.0,
        };
        assert!(f.open("x & y").contains(">x &amp; y</text>"));
        assert_eq!(f.py(0.0, 10.0), 340.0);
        assert_eq!(f.py(10.0, 10.0), 40.0);
    }
}
