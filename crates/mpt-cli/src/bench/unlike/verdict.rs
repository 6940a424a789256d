//! The tunnel's goodput against the raw paths' under a case's target.

use serde::{Deserialize, Serialize};

use super::def::{Target, TargetKind};

/// The tunnel against the raw paths.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Verdict {
    pub best_raw_mbps: f64,
    /// Index of the best raw path.
    pub best_path: Option<usize>,
    pub sum_raw_mbps: f64,
    /// Tunnel / best raw path, tunnel / sum of raw paths.
    pub frac_best: Option<f64>,
    pub frac_sum: Option<f64>,
    /// Goodput the target asks for, Mbit/s.
    pub required_mbps: f64,
    /// `None` when no raw path carried anything (no baseline to judge by).
    pub pass: Option<bool>,
}

/// Compares the tunnel's goodput with the raw paths' under `t`.
pub fn verdict(raw_mbps: &[f64], tunnel_mbps: f64, t: Target) -> Verdict {
    let mut best_path = None;
    let mut best = 0.0;
    for (i, &m) in raw_mbps.iter().enumerate() {
        if m > best {
            best = m;
            best_path = Some(i);
        }
    }
    let sum: f64 = raw_mbps.iter().filter(|m| m.is_finite()).sum();
    let frac = |d: f64| (d > 0.0).then(|| tunnel_mbps / d);
    let base = match t.of {
        TargetKind::Best => best,
        TargetKind::Sum => sum,
    };
    let required = t.ratio * base;
    Verdict {
        best_raw_mbps: best,
        best_path,
        sum_raw_mbps: sum,
        frac_best: frac(best),
        frac_sum: frac(sum),
        required_mbps: required,
        pass: (base > 0.0).then_some(tunnel_mbps >= required),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(of: TargetKind, ratio: f64) -> Target {
        Target { of, ratio }
    }

    #[test]
    fn verdict_against_best_and_sum() {
        let v = verdict(&[20.0, 10.0], 21.0, target(TargetKind::Best, 1.0));
        assert_eq!(v.best_path, Some(0));
        assert_eq!(v.best_raw_mbps, 20.0);
        assert_eq!(v.sum_raw_mbps, 30.0);
        assert_eq!(v.frac_best, Some(1.05));
        assert_eq!(v.frac_sum, Some(0.7));
        assert_eq!(v.required_mbps, 20.0);
        assert_eq!(v.pass, Some(true));
        let v = verdict(&[20.0, 10.0], 21.0, target(TargetKind::Sum, 0.9));
        assert_eq!(v.required_mbps, 27.0);
        assert_eq!(v.pass, Some(false));
        // Exactly on the target passes.
        let v = verdict(&[10.0, 30.0], 36.0, target(TargetKind::Sum, 0.9));
        assert_eq!(v.best_path, Some(1));
        assert_eq!(v.pass, Some(true));
        // No baseline: no verdict.
        let v = verdict(&[0.0, 0.0], 5.0, target(TargetKind::Best, 1.0));
        assert_eq!((v.pass, v.frac_best, v.best_path), (None, None, None));
        assert_eq!(verdict(&[], 5.0, target(TargetKind::Sum, 1.0)).pass, None);
    }
}
