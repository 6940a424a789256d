//! Axis arithmetic: axes that end on a round value and tick at round
//! steps (1, 2 or 5 x 10^k: 0, 5, 10, 15 or 200, 400, 600, 800), so that a
//! reader can place a point between two labels without arithmetic.

/// An axis from 0 (or `min`) to `max` with ticks every `step`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axis {
    pub min: f64,
    pub max: f64,
    pub step: f64,
}

/// Largest number of intervals between ticks.
const MAX_STEPS: f64 = 8.0;
/// Data this close past a tick (a fraction of a step) ends the axis on
/// that tick: iperf3's 8 "one-second" intervals end at 8.01 s, which
/// should not stretch the axis to 10.
const SLACK: f64 = 0.01;

/// The smallest 1-2-5 step that covers `span` in at most [`MAX_STEPS`]
/// intervals.
pub fn step_125(span: f64) -> f64 {
    if !(span.is_finite() && span > 0.0) {
        return 0.2;
    }
    let raw = span / MAX_STEPS;
    let e = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if raw <= m * e * (1.0 + SLACK) {
            return m * e;
        }
    }
    10.0 * e
}

impl Axis {
    /// From 0 to the first tick at or above `data_max` (0 to 1 for no
    /// data).
    pub fn new(data_max: f64) -> Axis {
        Axis::between(0.0, data_max)
    }

    /// From the tick at or below `lo` to the tick at or above `hi`.
    pub fn between(lo: f64, hi: f64) -> Axis {
        let (lo, hi) = if lo.is_finite() && hi.is_finite() && hi > lo {
            (lo, hi)
        } else {
            (0.0, 1.0)
        };
        let step = step_125(hi - lo);
        let min = (lo / step + SLACK).floor() * step;
        let max = ((hi / step - SLACK).ceil() * step).max(min + step);
        Axis { min, max, step }
    }

    /// The axis of a fixed range (`min`..`max`) with 1-2-5 steps.
    pub fn fixed(min: f64, max: f64) -> Axis {
        Axis {
            min,
            max,
            step: step_125(max - min),
        }
    }

    /// Where `v` lies, 0 at `min` and 1 at `max`.
    pub fn frac(&self, v: f64) -> f64 {
        (v - self.min) / (self.max - self.min)
    }

    /// The tick values, `min` to `max`.
    pub fn ticks(&self) -> Vec<f64> {
        let n = ((self.max - self.min) / self.step).round() as i64;
        (0..=n.max(0))
            .map(|i| self.min + i as f64 * self.step)
            .collect()
    }

    /// A tick label with as many decimals as the step needs.
    pub fn label(&self, v: f64) -> String {
        let decimals = if self.step >= 1.0 {
            0
        } else {
            (-self.step.log10()).ceil() as usize
        };
        let s = format!("{v:.decimals$}");
        if s.starts_with('-') && s.trim_start_matches(['-', '0', '.']).is_empty() {
            s[1..].to_string()
        } else {
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(a: Axis) -> Vec<String> {
        a.ticks().into_iter().map(|v| a.label(v)).collect()
    }

    #[test]
    fn ticks_fall_on_1_2_5_steps() {
        // The examples: 0, 8.00, 16, 24 and 160/320/480/640.
        assert_eq!(labels(Axis::new(24.0)), ["0", "5", "10", "15", "20", "25"]);
        let rtt = Axis::new(800.0);
        assert_eq!(rtt.step, 100.0);
        assert!(labels(rtt).contains(&"200".to_string()));
        assert_eq!(
            labels(Axis::new(13.0)),
            ["0", "2", "4", "6", "8", "10", "12", "14"]
        );
        assert_eq!(
            labels(Axis::new(0.7)),
            ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7"]
        );
        assert_eq!(
            labels(Axis::new(2.1)),
            ["0.0", "0.5", "1.0", "1.5", "2.0", "2.5"]
        );
        assert_eq!(Axis::new(100.0).max, 100.0);
        assert_eq!(Axis::new(8.01), Axis::new(8.0));
        assert_eq!(Axis::new(8.0).max, 8.0);
        assert_eq!(Axis::new(1260.0).max, 1400.0);
        for bad in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            assert_eq!(Axis::new(bad), Axis::new(1.0), "{bad}");
        }
        // Never more than the slack below the value, at most 8 steps,
        // steps 1, 2 or 5 x 10^k.
        for v in [0.013, 1.0, 3.3, 47.0, 999.0, 12_345.0] {
            let a = Axis::new(v);
            let n = a.ticks().len() - 1;
            assert!(
                a.max >= v - SLACK * a.step && (1..=8).contains(&n),
                "{v} -> {a:?}"
            );
            let m = a.step / 10f64.powf(a.step.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|k| (k - m).abs() < 1e-6),
                "{v}: {a:?}"
            );
        }
    }

    #[test]
    fn ranges_start_on_a_tick() {
        let a = Axis::between(0.9, 1.0);
        assert_eq!(labels(a), ["0.90", "0.92", "0.94", "0.96", "0.98", "1.00"]);
        assert!((a.frac(0.95) - 0.5).abs() < 1e-9);
        let f = Axis::fixed(0.0, 1.0);
        assert_eq!(f.step, 0.2);
    }
}
