//! Line and dot charts: series of (x, y) points from 0 on both axes, with
//! shaded x ranges (outages). Throughput against N or RTT, VoIP delay over
//! time, bundle goodput against RTT.

use std::fmt::Write as _;

use super::scale::{fmt_tick, nice, ticks};
use super::svg::{xml, Frame, COLORS};

/// One plotted series.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// Dots without a connecting line (e.g. per-packet delays).
    pub dots: bool,
    /// A fixed colour (e.g. grey for an ideal line); otherwise the next
    /// palette colour, counting only series without a fixed one.
    pub color: Option<&'static str>,
}

/// Where the x axis ends and has its ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XTicks {
    /// Up to a round value ([`nice`]), six evenly spaced ticks: a
    /// continuous variable (time, RTT).
    #[default]
    Nice,
    /// Up to the largest x (at least 1), a tick at every x of the data: a
    /// few swept values (number of paths, RTTs).
    AtData,
}

/// A chart: axes from 0 to the data maxima, x ranges to shade (outages).
#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub xlabel: String,
    pub ylabel: String,
    pub series: Vec<Series>,
    pub shade: Vec<(f64, f64, String)>,
    pub x_ticks: XTicks,
}

const FRAME: Frame = Frame {
    w: 900.0,
    h: 560.0,
    l: 70.0,
    r: 260.0,
    t: 40.0,
    b: 60.0,
};

impl Chart {
    /// The chart as an SVG document.
    pub fn render(&self) -> String {
        let f = FRAME;
        let pts = || self.series.iter().flat_map(|s| s.points.iter());
        let xdata = pts()
            .map(|p| p.0)
            .chain(self.shade.iter().map(|s| s.1))
            .fold(0.0, f64::max);
        let xmax = match self.x_ticks {
            XTicks::Nice => nice(xdata),
            XTicks::AtData => xdata.max(1.0),
        };
        let ymax = nice(pts().map(|p| p.1).fold(0.0, f64::max) * 1.05);
        let px = |x: f64| f.l + x / xmax * (f.x_end() - f.l);
        let py = |y: f64| f.py(y, ymax);
        let mut s = f.open(&self.title);
        for (x0, x1, label) in &self.shade {
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{}\" width=\"{:.1}\" height=\"{}\" fill=\"#fdd\"><title>{}</title></rect>\
                 <text x=\"{:.1}\" y=\"{}\" fill=\"#a33\">{}</text>",
                px(*x0),
                f.t,
                (px(*x1) - px(*x0)).max(1.0),
                f.h - f.t - f.b,
                xml(label),
                px(*x0) + 3.0,
                f.t + 14.0,
                xml(label)
            );
        }
        f.y_grid(&mut s, ymax);
        let x_tick = |s: &mut String, x: f64, label: String| {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                px(x),
                f.y_base() + 18.0
            );
        };
        match self.x_ticks {
            XTicks::Nice => ticks(xmax, 5).for_each(|x| x_tick(&mut s, x, fmt_tick(x))),
            XTicks::AtData => {
                let mut xs: Vec<f64> = pts().map(|p| p.0).collect();
                xs.sort_by(f64::total_cmp);
                xs.dedup();
                xs.into_iter()
                    .for_each(|x| x_tick(&mut s, x, format!("{x}")));
            }
        }
        f.x_axis(&mut s);
        f.y_axis(&mut s);
        f.x_label(&mut s, &self.xlabel);
        f.y_label(&mut s, &self.ylabel);
        let mut palette = COLORS.iter().cycle();
        for (i, se) in self.series.iter().enumerate() {
            let color = se
                .color
                .unwrap_or_else(|| palette.next().copied().unwrap_or("black"));
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
            f.legend_line(&mut s, i, color, dash, &se.label);
        }
        s += "</svg>\n";
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(label: &str, points: &[(f64, f64)]) -> Series {
        Series {
            label: label.into(),
            points: points.to_vec(),
            ..Series::default()
        }
    }

    #[test]
    fn renders_lines() {
        let c = Chart {
            title: "t".into(),
            xlabel: "x".into(),
            ylabel: "y".into(),
            series: vec![series("a", &[(0.0, 1.0), (2.0, 3.0)])],
            shade: vec![(0.5, 1.0, "outage".into())],
            ..Chart::default()
        };
        let s = c.render();
        assert!(s.starts_with("<svg") && s.contains("polyline") && s.contains("outage"));
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
        assert_eq!(s.matches(" r=\"3\"").count(), 9);
        assert_eq!(s.matches(" r=\"1.5\"").count(), 2);
        assert!(s.contains(">goodput &amp; more</text>"));
        assert!(s.contains(">paths (N)</text>") && s.contains(">Mbit/s</text>"));
        // x ticks at the data; y ticks up to nice(400 x 1.05) = 500.
        for t in [">1</text>", ">2</text>", ">3</text>", ">4</text>"] {
            assert!(s.contains(t), "{t}: {s}");
        }
        for t in [">0</text>", ">100</text>", ">300</text>", ">500</text>"] {
            assert!(s.contains(t), "{t}");
        }
        // The fixed colour does not take a palette colour from the others.
        assert!(s.contains(&format!(
            "stroke=\"{}\" stroke-width=\"2\" points",
            COLORS[0]
        )));
        assert!(s.contains(&format!(
            "stroke=\"{}\" stroke-width=\"2\" points",
            COLORS[1]
        )));
        assert!(s.contains("stroke=\"#777\" stroke-width=\"2\" stroke-dasharray=\"6 4\" points"));
        assert!(s.contains(&format!("fill=\"{}\"/>", COLORS[2])));
        // Four legend rows, one per series.
        assert_eq!(s.matches("x1=\"652\" x2=\"676\"").count(), 4);
    }

    #[test]
    fn nice_x_axis_ends_on_a_round_value() {
        let c = Chart {
            series: vec![series("a", &[(0.0, 1.0), (13.0, 2.0)])],
            ..Chart::default()
        };
        let s = c.render();
        // xmax = nice(13) = 15: ticks 0, 3, ..., 15 (labels under 10 with
        // two decimals).
        for t in [
            ">0</text>",
            ">3.00</text>",
            ">9.00</text>",
            ">12</text>",
            ">15</text>",
        ] {
            assert!(s.contains(t), "{t}");
        }
        // The point at x = 13 sits 13/15 of the way along the axis.
        let x = 70.0 + 13.0 / 15.0 * (900.0 - 260.0 - 70.0);
        assert!(s.contains(&format!("cx=\"{x:.1}\"")), "{s}");
    }
}
