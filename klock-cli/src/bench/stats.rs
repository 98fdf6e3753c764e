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

/// The 97.5% quantile of Student's t with `df` degrees of freedom (the
/// next smaller tabulated `df` where this one is not: a wider interval).
pub fn t975(df: usize) -> f64 {
    const T: &[(usize, f64)] = &[
        (1, 12.706),
        (2, 4.303),
        (3, 3.182),
        (4, 2.776),
        (5, 2.571),
        (6, 2.447),
        (7, 2.365),
        (8, 2.306),
        (9, 2.262),
        (10, 2.228),
        (12, 2.179),
        (15, 2.131),
        (20, 2.086),
        (30, 2.042),
        (60, 2.000),
        (120, 1.980),
    ];
    T.iter()
        .rev()
        .find(|&&(d, _)| d <= df)
        .map_or(f64::INFINITY, |&(_, t)| t)
}

/// The geometric mean of the ratios whose logarithms are `logs`, with its
/// 95% interval; `None` for fewer than two.
pub fn geomean_interval(logs: &[f64]) -> Option<(f64, f64, f64)> {
    let n = logs.len();
    if n < 2 {
        return None;
    }
    let m = mean(logs);
    let half = t975(n - 1) * stddev(logs) / (n as f64).sqrt();
    Some((m.exp(), (m - half).exp(), (m + half).exp()))
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

    #[test]
    fn student_t_quantiles() {
        assert_eq!(t975(3), 3.182);
        // Between tabulated degrees of freedom: the smaller one's (wider).
        assert_eq!(t975(11), 2.228);
        assert_eq!(t975(1000), 1.980);
        assert!(t975(0).is_infinite());
    }

    #[test]
    fn geometric_mean_and_its_interval() {
        let (m, lo, hi) = geomean_interval(&[0.0, 4f64.ln()]).unwrap();
        // Mean ln 2; the standard error is ln 2; t(1) = 12.706.
        assert!((m - 2.0).abs() < 1e-12);
        assert!((lo - 2f64.powf(1.0 - 12.706)).abs() < 1e-12);
        assert!((hi - 2f64.powf(1.0 + 12.706)).abs() < 1e-9);
        let (m, lo, hi) = geomean_interval(&[0.5f64.ln(); 3]).unwrap();
        assert!((m - 0.5).abs() < 1e-12 && (lo - 0.5).abs() < 1e-12 && (hi - 0.5).abs() < 1e-12);
        assert_eq!(geomean_interval(&[1.0]), None);
    }
}
