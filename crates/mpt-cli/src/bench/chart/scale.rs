//! Axis arithmetic: round axis maxima and tick labels.

/// Rounds up to a round axis maximum (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x
/// 10^k); 1 for anything not positive and finite.
pub fn nice(v: f64) -> f64 {
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

/// `steps + 1` evenly spaced tick values from 0 to `max`.
pub fn ticks(max: f64, steps: u32) -> impl Iterator<Item = f64> {
    (0..=steps).map(move |i| max * f64::from(i) / f64::from(steps))
}

/// A tick label: whole numbers from 10 up (and 0), two decimals below.
pub fn fmt_tick(v: f64) -> String {
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
    fn nice_rounds_up_to_round_values() {
        assert_eq!(nice(87.0), 100.0);
        assert_eq!(nice(130.0), 150.0);
        assert_eq!(nice(1260.0), 1500.0);
        assert_eq!(nice(100.0), 100.0);
        assert_eq!(nice(0.7), 0.8);
        assert_eq!(nice(2.1), 2.5);
        assert_eq!(nice(9.5), 10.0);
        for bad in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            assert_eq!(nice(bad), 1.0, "{bad}");
        }
        // Never below the value, never more than 25 % above it.
        for v in [0.013, 1.0, 3.3, 47.0, 999.0, 12_345.0] {
            let n = nice(v);
            assert!(n >= v && n <= v * 1.25 + 1e-9, "{v} -> {n}");
        }
    }

    #[test]
    fn ticks_split_the_axis_evenly() {
        let t: Vec<f64> = ticks(150.0, 5).collect();
        assert_eq!(t, [0.0, 30.0, 60.0, 90.0, 120.0, 150.0]);
        let labels: Vec<String> = ticks(2.5, 5).map(fmt_tick).collect();
        assert_eq!(labels, ["0", "0.50", "1.00", "1.50", "2.00", "2.50"]);
        assert_eq!(fmt_tick(12.4), "12");
    }
}
