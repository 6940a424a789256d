//! The frame every chart shares: document, title, horizontal grid with y
//! labels, the rotated y-axis label, legend rows; the palette, the line
//! styles and text escaping.
//!
//! Series differ in colour and in dash pattern and marker at once
//! ([`style`]): ten colours, six dash patterns and four markers give every
//! one of the first sixty series its own look, and two series of the same
//! colour (the eleventh and the first) still differ in dash and marker,
//! in print and for colour-blind readers too.

use std::fmt::Write as _;

use super::scale::Axis;

/// Series colours, in order (a series or bar key keeps its colour): the
/// Tableau 10 palette (its yellow darkened to olive, readable on white).
pub const COLORS: [&str; 10] = [
    "#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#bcbd22", "#9c755f",
    "#ff9da7", "#222222",
];

/// Dash patterns (`stroke-dasharray`; "" = solid), in order.
pub const DASHES: [&str; 6] = ["", "7 3", "2 2", "9 3 2 3", "4 4", "12 3 2 3 2 3"];

/// Point markers, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}

const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
];

/// The look of series `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: &'static str,
    pub dash: &'static str,
    pub marker: Marker,
}

/// Series `i`'s colour, dash pattern and marker.
pub fn style(i: usize) -> Style {
    Style {
        color: COLORS[i % COLORS.len()],
        dash: DASHES[i % DASHES.len()],
        marker: MARKERS[i % MARKERS.len()],
    }
}

impl Style {
    /// ` stroke-dasharray="…"`, or nothing for a solid line.
    pub fn dash_attr(&self) -> String {
        if self.dash.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{}\"", self.dash)
        }
    }
}

/// A marker of radius about `r` at (`x`, `y`), with a tooltip.
pub fn marker(s: &mut String, m: Marker, x: f64, y: f64, r: f64, color: &str, title: &str) {
    let t = if title.is_empty() {
        String::new()
    } else {
        format!("<title>{}</title>", xml(title))
    };
    let _ = match m {
        Marker::Circle => writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" fill=\"{color}\">{t}</circle>"
        ),
        Marker::Square => writeln!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\">{t}</rect>",
            x - r,
            y - r,
            2.0 * r,
            2.0 * r
        ),
        Marker::Triangle => writeln!(
            s,
            "<polygon points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{color}\">{t}</polygon>",
            x,
            y - 1.3 * r,
            x - 1.2 * r,
            y + r,
            x + 1.2 * r,
            y + r
        ),
        Marker::Diamond => writeln!(
            s,
            "<polygon points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{color}\">{t}</polygon>",
            x,
            y - 1.4 * r,
            x + 1.4 * r,
            y,
            x,
            y + 1.4 * r,
            x - 1.4 * r,
            y
        ),
    };
}

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

    /// Pixel row of `y` on axis `a`.
    pub fn py(&self, y: f64, a: &Axis) -> f64 {
        self.h - self.b - a.frac(y) * (self.h - self.t - self.b)
    }

    /// Pixel column of `x` on axis `a`.
    pub fn px(&self, x: f64, a: &Axis) -> f64 {
        self.l + a.frac(x) * (self.x_end() - self.l)
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

    /// A horizontal grid line with its label at every tick of `a`.
    pub fn y_grid(&self, s: &mut String, a: &Axis) {
        for y in a.ticks() {
            let py = self.py(y, a);
            let _ = writeln!(
                s,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                self.l,
                self.x_end(),
                self.l - 6.0,
                py + 4.0,
                a.label(y)
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

    /// A legend row with a line sample in style `st` (`line`: draw the
    /// line, else only the marker).
    pub fn legend_line(&self, s: &mut String, i: usize, st: &Style, line: bool, label: &str) {
        let ly = self.legend_y(i);
        let x = self.x_end();
        if line {
            let _ = writeln!(
                s,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{}\" stroke-width=\"2\"{}/>",
                x + 10.0,
                x + 40.0,
                st.color,
                st.dash_attr()
            );
        }
        marker(s, st.marker, x + 25.0, ly, 3.5, st.color, "");
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            x + 46.0,
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
        let a = Axis::new(10.0);
        assert_eq!(f.py(0.0, &a), 340.0);
        assert_eq!(f.py(10.0, &a), 40.0);
        // Eleven series: the eleventh shares the first's colour, not its
        // dash or marker.
        assert_eq!(style(10).color, style(0).color);
        assert_ne!(style(10).dash, style(0).dash);
        assert_ne!(style(10).marker, style(0).marker);
        let looks: std::collections::HashSet<_> = (0..60)
            .map(|i| {
                let s = style(i);
                (s.color, s.dash, s.marker as u8)
            })
            .collect();
        assert_eq!(looks.len(), 60);
    }
}
