//! Summary statistics over runs and over threads.

/// Arithmetic mean (0 for an empty slice).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (n - 1 in the denominator; 0 for fewer than 2 values).
pub fn stddev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    (ss / (xs.len() - 1) as f64).sqrt()
}

/// Harmonic mean (the mean of rates over equal work; mmtests' "Hmean").
/// 0 if any value is 0 or the slice is empty.
pub fn hmean(xs: &[f64]) -> f64 {
    if xs.is_empty() || xs.iter().any(|&x| x <= 0.0) {
        return 0.0;
    }
    xs.len() as f64 / xs.iter().map(|x| 1.0 / x).sum::<f64>()
}

/// Median (the mean of the two middle values for an even count); `None`
/// for an empty slice.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Min, mean and max of integer counts; `None` for an empty slice.
pub fn min_mean_max(xs: &[u64]) -> Option<(u64, f64, u64)> {
    let min = *xs.iter().min()?;
    let max = *xs.iter().max()?;
    let mean = xs.iter().sum::<u64>() as f64 / xs.len() as f64;
    Some((min, mean, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn hand_computed_vectors() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sample var 32/7.
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!(close(mean(&v), 5.0));
        assert!(close(stddev(&v), (32.0f64 / 7.0).sqrt()));
        // hmean(1, 2, 4) = 3 / (1 + 1/2 + 1/4) = 12/7.
        assert!(close(hmean(&[1.0, 2.0, 4.0]), 12.0 / 7.0));
        assert!(close(hmean(&[3.0, 3.0]), 3.0));
        assert_eq!(
            min_mean_max(&[9000, 10100, 11800, 9400]),
            Some((9000, 10075.0, 11800))
        );
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(mean(&[]), 0.0);
        assert_eq!(stddev(&[42.0]), 0.0);
        assert_eq!(hmean(&[1.0, 0.0]), 0.0);
        assert_eq!(hmean(&[]), 0.0);
        assert_eq!(min_mean_max(&[]), None);
        assert_eq!(min_mean_max(&[7]), Some((7, 7.0, 7)));
    }
}
