//! Line and dot charts: series of (x, y) points, with error bars and the
//! individual runs where runs repeat, shaded x ranges (outages) and lost
//! packets as marks in a strip of their own. Throughput against N or RTT,
//! throughput and RTT per second, VoIP delay over time, CDFs (`step`),
//! bundle goodput against RTT.

use std::fmt::Write as _;

use super::scale::Axis;
use super::svg::{marker, style, xml, Frame, Style};

/// One plotted series.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed whatever its place (e.g. an ideal line).
    pub dashed: bool,
    /// Dots without a connecting line (e.g. per-packet delays).
    pub dots: bool,
    /// A fixed colour (e.g. grey for an ideal line); otherwise the next
    /// style, counting only series without a fixed one.
    pub color: Option<&'static str>,
    /// Error bars: (x, lowest, highest) of repeated runs.
    pub range: Vec<(f64, f64, f64)>,
    /// The individual runs, drawn as hollow dots.
    pub runs: Vec<(f64, f64)>,
    /// A step line (a CDF): horizontal, then vertical.
    pub step: bool,
}

/// Where the x axis has its ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XTicks {
    /// At round 1-2-5 steps ([`Axis`]): a continuous variable (time, RTT).
    #[default]
    Nice,
    /// From 0 to the largest x (at least 1), a tick at every x of the
    /// data: a few swept values (number of paths).
    AtData,
}

/// A chart: axes from 0 to the data maxima (or as given), x ranges to
/// shade (outages), lost packets.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub xlabel: String,
    pub ylabel: String,
    pub series: Vec<Series>,
    pub shade: Vec<(f64, f64, String)>,
    pub x_ticks: XTicks,
    /// x of lost packets (send time): red marks in a strip at the top.
    pub lost: Vec<f64>,
    /// Fixed axes (small multiples share theirs); otherwise from the data.
    pub x_axis: Option<Axis>,
    pub y_axis: Option<Axis>,
    /// The size and margins; [`FRAME`] when `None`.
    pub frame: Option<Frame>,
}

/// Size and margins of a chart on its own.
pub const FRAME: Frame = Frame {
    w: 900.0,
    h: 560.0,
    l: 70.0,
    r: 260.0,
    t: 40.0,
    b: 60.0,
};

/// Height of the lost-packet strip, px.
const LOST_STRIP: f64 = 14.0;
/// Points above which a line gets no markers (they would hide it).
const MAX_MARKED: usize = 40;
/// The lost-packet colour.
const LOST_COLOR: &str = "#d00000";

impl Chart {
    /// Largest x and y of the data (error bars, runs and shading included).
    pub fn data_max(&self) -> (f64, f64) {
        let pts = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().chain(s.runs.iter()));
        let x = pts
            .clone()
            .map(|p| p.0)
            .chain(self.shade.iter().map(|s| s.1))
            .chain(self.lost.iter().copied())
            .fold(0.0, f64::max);
        let y = pts
            .map(|p| p.1)
            .chain(self.series.iter().flat_map(|s| s.range.iter().map(|r| r.2)))
            .fold(0.0, f64::max);
        (x, y)
    }

    fn x_axis(&self) -> Axis {
        if let Some(a) = self.x_axis {
            return a;
        }
        let (x, _) = self.data_max();
        match self.x_ticks {
            XTicks::Nice => Axis::new(x),
            XTicks::AtData => Axis::fixed(0.0, x.max(1.0)),
        }
    }

    /// The chart as an SVG document.
    pub fn render(&self) -> String {
        let f = self.frame.unwrap_or_else(|| {
            // Room for the longest legend label (about 7 px a character).
            let chars = self
                .series
                .iter()
                .map(|s| s.label.chars().count())
                .max()
                .unwrap_or(0);
            let r = FRAME.r.max(60.0 + 7.0 * chars as f64);
            Frame {
                w: FRAME.w + r - FRAME.r,
                r,
                ..FRAME
            }
        });
        let xa = self.x_axis();
        let ya = self
            .y_axis
            .unwrap_or_else(|| Axis::new(self.data_max().1 * 1.05));
        // With lost packets the plot starts below their strip.
        let top = if self.lost.is_empty() {
            f.t
        } else {
            f.t + LOST_STRIP + 4.0
        };
        let pf = Frame { t: top, ..f };
        let px = |x: f64| pf.px(x, &xa);
        let py = |y: f64| pf.py(y, &ya);
        let mut s = f.open(&self.title);
        for (x0, x1, label) in &self.shade {
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{}\" width=\"{:.1}\" height=\"{}\" fill=\"#fdd\"><title>{}</title></rect>\
                 <text x=\"{:.1}\" y=\"{}\" fill=\"#a33\">{}</text>",
                px(*x0),
                pf.t,
                (px(*x1) - px(*x0)).max(1.0),
                pf.h - pf.t - pf.b,
                xml(label),
                px(*x0) + 3.0,
                pf.t + 14.0,
                xml(label)
            );
        }
        pf.y_grid(&mut s, &ya);
        let x_tick = |s: &mut String, x: f64, label: String| {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                px(x),
                f.y_base() + 18.0
            );
        };
        match self.x_ticks {
            XTicks::Nice => xa
                .ticks()
                .into_iter()
                .for_each(|x| x_tick(&mut s, x, xa.label(x))),
            XTicks::AtData => {
                let mut xs: Vec<f64> = self
                    .series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.0))
                    .collect();
                xs.sort_by(f64::total_cmp);
                xs.dedup();
                xs.into_iter()
                    .for_each(|x| x_tick(&mut s, x, format!("{x}")));
            }
        }
        pf.x_axis(&mut s);
        pf.y_axis(&mut s);
        f.x_label(&mut s, &self.xlabel);
        f.y_label(&mut s, &self.ylabel);
        let mut row = 0;
        let mut k = 0;
        for se in &self.series {
            let st = match se.color {
                Some(color) => Style { color, ..style(0) },
                None => {
                    k += 1;
                    style(k - 1)
                }
            };
            let st = if se.dashed && st.dash.is_empty() {
                Style { dash: "7 3", ..st }
            } else {
                st
            };
            draw_series(&mut s, se, &st, &px, &py);
            f.legend_line(&mut s, row, &st, !se.dots, &se.label);
            row += 1;
        }
        if !self.lost.is_empty() {
            lost_strip(&mut s, &f, &self.lost, &px, row);
        }
        s += "</svg>\n";
        s
    }
}

/// Draws one series.
fn draw_series(
    s: &mut String,
    se: &Series,
    st: &Style,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let color = st.color;
    let mut p = se.points.clone();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    if se.dots {
        for (x, y) in &p {
            marker(s, st.marker, px(*x), py(*y), 1.8, color, "");
        }
        return;
    }
    for (x, lo, hi) in &se.range {
        let (x, lo, hi) = (px(*x), py(*lo), py(*hi));
        let _ = writeln!(
            s,
            "<path d=\"M{:.1},{lo:.1}H{:.1}M{x:.1},{lo:.1}V{hi:.1}M{:.1},{hi:.1}H{:.1}\" stroke=\"{color}\" stroke-width=\"1.5\" fill=\"none\"/>",
            x - 4.0,
            x + 4.0,
            x - 4.0,
            x + 4.0
        );
    }
    for (x, y) in &se.runs {
        let _ = writeln!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"white\" stroke=\"{color}\"><title>{}: run {y:.2}</title></circle>",
            px(*x),
            py(*y),
            xml(&se.label)
        );
    }
    let mut path = Vec::new();
    for (i, (x, y)) in p.iter().enumerate() {
        if se.step && i > 0 {
            path.push(format!("{:.1},{:.1}", px(*x), py(p[i - 1].1)));
        }
        path.push(format!("{:.1},{:.1}", px(*x), py(*y)));
    }
    let _ = writeln!(
        s,
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{} points=\"{}\"/>",
        st.dash_attr(),
        path.join(" ")
    );
    if p.len() <= MAX_MARKED && !se.step {
        for (x, y) in &p {
            let title = format!("{}: {x:.1}, {y:.2}", se.label);
            marker(s, st.marker, px(*x), py(*y), 3.5, color, &title);
        }
    }
}

/// Lost packets: a red tick each in the strip above the plot, and their
/// legend row with the count.
fn lost_strip(s: &mut String, f: &Frame, lost: &[f64], px: &dyn Fn(f64) -> f64, row: usize) {
    let (y0, y1) = (f.t, f.t + LOST_STRIP);
    let _ = writeln!(
        s,
        "<rect x=\"{}\" y=\"{y0}\" width=\"{}\" height=\"{LOST_STRIP}\" fill=\"#fff0f0\"/>",
        f.l,
        f.x_end() - f.l
    );
    let mut d = String::new();
    for x in lost {
        let _ = write!(d, "M{:.1},{y0}V{y1}", px(*x));
    }
    let _ = writeln!(
        s,
        "<path d=\"{d}\" stroke=\"{LOST_COLOR}\" stroke-width=\"1.5\"/>"
    );
    let ly = f.legend_y(row);
    let x = f.x_end();
    let _ = writeln!(
        s,
        "<path d=\"M{:.1},{:.1}V{:.1}M{:.1},{:.1}V{:.1}M{:.1},{:.1}V{:.1}\" stroke=\"{LOST_COLOR}\" stroke-width=\"1.5\"/>\
         <text x=\"{}\" y=\"{}\">lost packets ({}, top strip)</text>",
        x + 18.0,
        ly - 6.0,
        ly + 6.0,
        x + 25.0,
        ly - 6.0,
        ly + 6.0,
        x + 32.0,
        ly - 6.0,
        ly + 6.0,
        x + 46.0,
        ly + 4.0,
        lost.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::chart::svg::COLORS;

    fn series(label: &str, points: &[(f64, f64)]) -> Series {
        Series {
            label: label.into(),
            points: points.to_vec(),
            ..Series::default()
        }
    }

    #[test]
    fn renders_lines_shading_and_lost_packets() {
        let c = Chart {
            title: "t".into(),
            xlabel: "x".into(),
            ylabel: "y".into(),
            series: vec![series("a", &[(0.0, 1.0), (2.0, 3.0)])],
            shade: vec![(0.5, 1.0, "outage".into())],
            lost: vec![0.6, 0.7],
            ..Chart::default()
        };
        let s = c.render();
        assert!(s.starts_with("<svg") && s.contains("polyline") && s.contains("outage"));
        assert!(s.contains("lost packets (2, top strip)"));
        assert!(s.contains(&format!("stroke=\"{LOST_COLOR}\"")));
        assert!(s.ends_with("</svg>\n"));
    }

    #[test]
    fn known_points_give_one_line_per_series_and_the_axis_labels() {
        let c = Chart {
            title: "goodput & more".into(),
            xlabel: "paths (N)".into(),
            ylabel: "Mbit/s".into(),
            series: vec![
                series("UDP", &[(1.0, 90.0), (2.0, 180.0), (4.0, 350.0)]),
                series("TCP", &[(1.0, 80.0), (2.0, 170.0), (4.0, 330.0)]),
                Series {
                    dashed: true,
                    color: Some("#777"),
                    ..series("ideal", &[(1.0, 100.0), (2.0, 200.0), (4.0, 400.0)])
                },
                Series {
                    dots: true,
                    ..series("per packet", &[(1.0, 5.0), (3.0, 6.0)])
                },
            ],
            x_ticks: XTicks::AtData,
            ..Chart::default()
        };
        let s = c.render();
        assert_eq!(s.matches("<polyline").count(), 3, "{s}");
        assert!(s.contains(">goodput &amp; more</text>"));
        assert!(s.contains(">paths (N)</text>") && s.contains(">Mbit/s</text>"));
        // x ticks at the data; y ticks at 1-2-5 steps up to 420 -> 500.
        for t in [">1</text>", ">2</text>", ">3</text>", ">4</text>"] {
            assert!(s.contains(t), "{t}: {s}");
        }
        for t in [">0</text>", ">100</text>", ">300</text>", ">500</text>"] {
            assert!(s.contains(t), "{t}");
        }
        // Colour and dash both differ; the fixed colour takes no style.
        assert!(s.contains(&format!(
            "stroke=\"{}\" stroke-width=\"2\" points",
            COLORS[0]
        )));
        assert!(s.contains(&format!(
            "stroke=\"{}\" stroke-width=\"2\" stroke-dasharray=\"7 3\" points",
            COLORS[1]
        )));
        assert!(s.contains("stroke=\"#777\" stroke-width=\"2\" stroke-dasharray=\"7 3\" points"));
        assert!(s.contains(&format!("fill=\"{}\">", COLORS[2])));
        // Four legend rows, one per series.
        assert_eq!(s.matches("<text x=\"686\"").count(), 4, "{s}");
    }

    #[test]
    fn error_bars_runs_and_steps() {
        let c = Chart {
            series: vec![
                Series {
                    range: vec![(1.0, 8.0, 12.0)],
                    runs: vec![(1.0, 8.0), (1.0, 12.0)],
                    ..series("mpt", &[(1.0, 10.0)])
                },
                Series {
                    step: true,
                    ..series("cdf", &[(0.0, 0.5), (2.0, 1.0)])
                },
            ],
            ..Chart::default()
        };
        let s = c.render();
        assert_eq!(s.matches("fill=\"white\" stroke=").count(), 2);
        assert!(s.contains("V"), "{s}");
        // The step line has a corner: 3 points for 2.
        let cdf = s
            .lines()
            .filter(|l| l.contains("<polyline"))
            .nth(1)
            .expect("cdf");
        assert_eq!(cdf.matches(',').count(), 3, "{cdf}");
    }

    #[test]
    fn nice_x_axis_ends_on_a_round_value() {
        let c = Chart {
            series: vec![series("a", &[(0.0, 1.0), (13.0, 2.0)])],
            ..Chart::default()
        };
        let s = c.render();
        // xmax: 14, ticks 0, 2, ..., 14.
        for t in [">0</text>", ">2</text>", ">8</text>", ">14</text>"] {
            assert!(s.contains(t), "{t}");
        }
        // The point at x = 13 sits 13/14 of the way along the axis.
        let x = 70.0 + 13.0 / 14.0 * (900.0 - 260.0 - 70.0);
        assert!(s.contains(&format!("cx=\"{x:.1}\"")), "{s}");
    }

    #[test]
    fn markers_change_with_the_style() {
        use crate::bench::chart::svg::Marker;
        assert_eq!(style(1).marker, Marker::Square);
    }
}
