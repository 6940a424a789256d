//! The progress lines of a run: `==> [k/total] case: what`, the case named
//! by its label or its swept parameters.

use super::scenario::case::Case;

/// Prints one progress line for case `k` of `total`.
pub fn progress(k: usize, total: usize, case: &Case, what: &str) {
    if let Some(l) = &case.label {
        println!("==> [{}/{}] {l}: {what}", k + 1, total);
        return;
    }
    let mut label = format!("{} N={}", case.combo.label(), case.n);
    if let Some(r) = case.rtt_ms {
        label += &format!(" rtt={r:.0}ms");
    }
    if let Some(l) = case.loss {
        label += &format!(" per={:.0}%", l * 100.0);
    }
    if case.extra {
        label += " +terr";
    }
    println!("==> [{}/{}] {label}: {what}", k + 1, total);
}
