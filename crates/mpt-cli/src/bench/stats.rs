//! Order statistics the benches share: nearest-rank quantiles (VoIP
//! delays) and the median run of repeated measurements (`unlike` tunnel
//! runs, `clients` flood rounds).

/// The `q` quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i])
}

/// Index of the run whose goodput is the median of `mbps`: the middle one
/// in ascending order, for an even count the lower of the two middle ones
/// (runs with equal goodputs keep their order). `None` for no runs.
pub fn median_run(mbps: &[f64]) -> Option<usize> {
    let mut order: Vec<usize> = (0..mbps.len()).collect();
    // Stable: equal goodputs keep their run order.
    order.sort_by(|&a, &b| mbps[a].total_cmp(&mbps[b]));
    order.get(mbps.len().checked_sub(1)? / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn median_run_is_the_middle_or_lower_middle() {
        assert_eq!(median_run(&[]), None);
        assert_eq!(median_run(&[7.0]), Some(0));
        // Odd: the middle value wherever it ran.
        assert_eq!(median_run(&[30.0, 10.0, 20.0]), Some(2));
        assert_eq!(median_run(&[10.0, 20.0, 30.0]), Some(1));
        assert_eq!(median_run(&[5.0, 1.0, 4.0, 2.0, 3.0]), Some(4));
        // Even: the lower of the two middle ones.
        assert_eq!(median_run(&[20.0, 10.0]), Some(1));
        assert_eq!(median_run(&[10.0, 20.0]), Some(0));
        assert_eq!(median_run(&[40.0, 10.0, 30.0, 20.0]), Some(3));
        // Equal goodputs keep their run order.
        assert_eq!(median_run(&[15.0, 15.0, 15.0]), Some(1));
        assert_eq!(median_run(&[15.0, 15.0]), Some(0));
        assert_eq!(median_run(&[9.0, 15.0, 1.0, 15.0]), Some(0));
        assert_eq!(median_run(&[15.0, 9.0, 15.0, 20.0]), Some(0));
        // A run that carried nothing is the lowest.
        assert_eq!(median_run(&[0.0, 12.0, 11.0]), Some(2));
    }
}
