//! Numbers as the status tables show them: three significant digits with
//! an SI suffix, milliseconds, percentages and ages, each in as few
//! columns as it can take.

/// 3 significant digits with a k/M/G/T/P suffix above 999.
pub fn si(x: f64) -> String {
    if !x.is_finite() || x < 0.0 {
        return "-".into();
    }
    if x < 999.5 {
        return format!("{x:.0}");
    }
    let mut v = x;
    for unit in ["k", "M", "G", "T", "P"] {
        v /= 1000.0;
        if v < 999.5 || unit == "P" {
            return if v < 9.995 {
                format!("{v:.2}{unit}")
            } else if v < 99.95 {
                format!("{v:.1}{unit}")
            } else {
                format!("{v:.0}{unit}")
            };
        }
    }
    unreachable!("the loop returns at P")
}

/// Milliseconds with 3 significant digits (at least whole ms).
pub(crate) fn millis(ms: f64) -> String {
    if ms < 9.995 {
        format!("{ms:.2}")
    } else if ms < 99.95 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

pub(crate) fn percent(p: f64) -> String {
    if p >= 99.95 {
        "100%".into()
    } else {
        format!("{p:.1}%")
    }
}

/// An age given in milliseconds, e.g. 850ms, 4.2s, 37s, 5m07s, 3h05m, 2d04h.
pub fn age(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "-".into();
    }
    if ms < 999.5 {
        return format!("{ms:.0}ms");
    }
    let s = ms / 1e3;
    if s < 9.95 {
        return format!("{s:.1}s");
    }
    let s = s.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}
