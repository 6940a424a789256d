//! Goodput and delivery figures from the destination's record of received
//! bundles. Pure (no clock, no I/O), unit-tested.

use std::collections::BTreeMap;

use serde::Serialize;

/// One bundle handed over by the destination's agent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Delivery {
    pub id: u64,
    /// Seconds from the phase start.
    pub t_s: f64,
    /// Payload bytes.
    pub bytes: usize,
    /// The payload matched its digest.
    pub intact: bool,
}

/// The first intact delivery of each id, in time order: dtnd may hand a
/// bundle over twice (the relay forwards it again when it took a transfer
/// for failed), and a second copy is not goodput.
pub fn first_deliveries(d: &[Delivery]) -> Vec<&Delivery> {
    let mut v: Vec<&Delivery> = d.iter().filter(|x| x.intact).collect();
    v.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut seen = std::collections::BTreeSet::new();
    v.retain(|x| seen.insert(x.id));
    v
}

/// Intact deliveries of an id already delivered intact.
pub fn duplicates(d: &[Delivery]) -> usize {
    d.iter().filter(|x| x.intact).count() - first_deliveries(d).len()
}

/// Steady-state goodput in Mbit/s over `[from_s, to_s]`: the payload of
/// every distinct bundle first delivered intact in the window after the
/// first one, over the time from the first delivery to the last. Leaves
/// out the pipeline's fill time (the first bundle's transit) that a
/// window/duration ratio would charge to a long RTT. `None` with fewer
/// than two deliveries.
pub fn steady_mbps(d: &[Delivery], from_s: f64, to_s: f64) -> Option<f64> {
    let mut inside: Vec<&Delivery> = first_deliveries(d)
        .into_iter()
        .filter(|x| x.t_s >= from_s && x.t_s <= to_s)
        .collect();
    inside.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let (first, last) = (inside.first()?, inside.last()?);
    let span = last.t_s - first.t_s;
    if inside.len() < 2 || span <= 0.0 {
        return None;
    }
    let bytes: usize = inside[1..].iter().map(|x| x.bytes).sum();
    Some(bytes as f64 * 8.0 / span / 1e6)
}

/// Payload delivered intact in `[from_s, to_s]` over the window's length,
/// Mbit/s (counts whole bundles only, so coarse with few of them).
pub fn window_mbps(d: &[Delivery], from_s: f64, to_s: f64) -> f64 {
    let span = to_s - from_s;
    if span <= 0.0 {
        return 0.0;
    }
    let bytes: usize = first_deliveries(d)
        .into_iter()
        .filter(|x| x.t_s >= from_s && x.t_s <= to_s)
        .map(|x| x.bytes)
        .sum();
    bytes as f64 * 8.0 / span / 1e6
}

/// The contact-gap check: every bundle sent accounted for.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GapOutcome {
    pub sent: usize,
    /// Distinct ids delivered intact.
    pub delivered: usize,
    pub missing: Vec<u64>,
    pub corrupt: Vec<u64>,
    /// Deliveries of an id already delivered.
    pub duplicates: usize,
    /// Deliveries of ids not sent in this phase (an earlier phase's).
    pub other: usize,
    /// Intact deliveries at or after the gap's end.
    pub after_gap: usize,
    /// Delivery time of each id (seconds from the phase start).
    pub delivered_s: BTreeMap<u64, f64>,
    /// Last delivery, seconds after the gap's end.
    pub last_after_gap_s: Option<f64>,
}

impl GapOutcome {
    /// Nothing lost, nothing altered (duplicates are reported apart).
    pub fn all_delivered(&self) -> bool {
        self.missing.is_empty() && self.corrupt.is_empty()
    }
}

/// Accounts for `sent` ids against `d`; the gap ends at `gap_end_s`.
pub fn gap_outcome(sent: &[u64], d: &[Delivery], gap_end_s: f64) -> GapOutcome {
    let mut o = GapOutcome {
        sent: sent.len(),
        ..GapOutcome::default()
    };
    for x in d {
        // Bundles of an earlier phase still arriving are not this one's.
        if !sent.contains(&x.id) {
            o.other += 1;
            continue;
        }
        if !x.intact {
            if !o.corrupt.contains(&x.id) {
                o.corrupt.push(x.id);
            }
            continue;
        }
        if o.delivered_s.contains_key(&x.id) {
            o.duplicates += 1;
            continue;
        }
        o.delivered_s.insert(x.id, x.t_s);
        if x.t_s >= gap_end_s {
            o.after_gap += 1;
        }
    }
    o.missing = sent
        .iter()
        .copied()
        .filter(|id| !o.delivered_s.contains_key(id))
        .collect();
    o.delivered = sent
        .iter()
        .filter(|id| o.delivered_s.contains_key(id))
        .count();
    o.last_after_gap_s = o
        .delivered_s
        .values()
        .copied()
        .max_by(f64::total_cmp)
        .map(|t| t - gap_end_s);
    o
}

/// `a / b` when both are there and `b` is positive.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(id: u64, t_s: f64) -> Delivery {
        Delivery {
            id,
            t_s,
            bytes: 1_000_000,
            intact: true,
        }
    }

    #[test]
    fn steady_goodput_leaves_out_the_first_bundle_and_the_fill_time() {
        // First delivery at 5 s (pipeline fill), then one per 4 s.
        let v = [d(0, 5.0), d(1, 9.0), d(2, 13.0), d(3, 17.0)];
        let g = steady_mbps(&v, 0.0, 30.0).unwrap();
        assert!((g - 2.0).abs() < 1e-9, "{g}");
        // The window cuts: only 9 and 13 s.
        let g = steady_mbps(&v, 6.0, 14.0).unwrap();
        assert!((g - 2.0).abs() < 1e-9, "{g}");
        assert_eq!(steady_mbps(&v[..1], 0.0, 30.0), None);
        // 4 MB over 20 s.
        assert!((window_mbps(&v, 0.0, 20.0) - 1.6).abs() < 1e-9);
        assert_eq!(window_mbps(&v, 3.0, 3.0), 0.0);
    }

    #[test]
    fn a_second_copy_of_a_bundle_is_not_goodput() {
        // Bundle 1 arrives again at 13 s: the steady goodput is 2 MB over
        // 8 s (ids 2 and 3 after the first), not 3 MB.
        let v = [d(1, 5.0), d(2, 9.0), d(1, 11.0), d(3, 13.0)];
        let g = steady_mbps(&v, 0.0, 30.0).unwrap();
        assert!((g - 2.0).abs() < 1e-9, "{g}");
        assert!((window_mbps(&v, 0.0, 20.0) - 1.2).abs() < 1e-9);
        assert_eq!(duplicates(&v), 1);
        let ids: Vec<u64> = first_deliveries(&v).iter().map(|x| x.id).collect();
        assert_eq!(ids, [1, 2, 3]);
    }

    #[test]
    fn corrupt_bundles_do_not_count() {
        let mut v = vec![d(0, 1.0), d(1, 2.0), d(2, 3.0)];
        v[2].intact = false;
        let g = steady_mbps(&v, 0.0, 10.0).unwrap();
        assert!((g - 8.0).abs() < 1e-9, "{g}");
    }

    #[test]
    fn gap_outcome_finds_missing_corrupt_and_duplicates() {
        let sent = [10, 11, 12, 13];
        let mut bad = d(12, 16.0);
        bad.intact = false;
        let v = [d(10, 5.0), d(11, 15.0), d(11, 15.5), bad, d(3, 14.0)];
        let o = gap_outcome(&sent, &v, 12.0);
        assert_eq!(o.other, 1);
        assert_eq!(o.sent, 4);
        assert_eq!(o.delivered, 2);
        assert_eq!(o.missing, vec![12, 13]);
        assert_eq!(o.corrupt, vec![12]);
        assert_eq!(o.duplicates, 1);
        assert_eq!(o.after_gap, 1);
        assert_eq!(o.last_after_gap_s, Some(3.0));
        assert!(!o.all_delivered());
        let ok = gap_outcome(&[1, 2], &[d(1, 13.0), d(2, 14.0)], 12.0);
        assert!(ok.all_delivered());
        assert_eq!(ok.after_gap, 2);
    }

    #[test]
    fn ratio_needs_both_and_a_positive_base() {
        assert_eq!(ratio(Some(1.0), Some(2.0)), Some(0.5));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(2.0)), None);
    }
}
