//! Text helpers of the result tables.

/// `v` with `prec` decimals, or "-" for no value.
pub fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}"))
}
