//! How `unlike` figures read in progress lines and the table: the hold's
//! p99 as a bucket range, PASS/FAIL labels, a measurement in one line.

use crate::bench::hold::HoldCheck;
use crate::bench::iperf::Measurement;
use crate::bench::text::opt;

/// p99 over all packets: its bucket's upper limit, or `lo..hi`.
pub fn fmt_p99(h: &HoldCheck) -> String {
    match (h.p99_all_lo_ms, h.p99_all_ms) {
        (Some(lo), Some(hi)) if hi > 0.0 => format!(
            "{}..{} (~{})",
            ms_label(lo),
            ms_label(hi),
            opt(h.p99_all_est_ms, 1)
        ),
        (_, Some(hi)) => ms_label(hi),
        _ => "-".into(),
    }
}

/// Whole milliseconds without decimals (bucket limits), others to 0.1 ms.
pub fn ms_label(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// PASS/FAIL when the bucket decides, ~PASS/~FAIL by the estimate inside
/// a bucket that straddles the limit.
pub fn hold_label(h: &HoldCheck) -> &'static str {
    match (h.pass, h.pass_estimate) {
        (Some(true), _) => "PASS",
        (Some(false), _) => "FAIL",
        (None, Some(true)) => "~PASS",
        (None, Some(false)) => "~FAIL",
        (None, None) => "n/a",
    }
}

pub fn fmt_measurement(m: &Measurement) -> String {
    format!(
        "{:.2} Mbit/s{}",
        m.mbps,
        m.retransmits
            .map_or(String::new(), |r| format!(", {r} retransmits"))
    )
}

pub fn pass_label(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "PASS",
        Some(false) => "FAIL",
        None => "n/a",
    }
}
