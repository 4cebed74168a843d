//! Tests that decide whether one set of measurements differs from another: the rank-sum test
//! (Mann-Whitney U) with its normal approximation, and the rule the lab's experiments state a
//! change by.

/// The result of a Mann-Whitney U test of `b` against `a`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankSum {
    /// U of `b`: how many (a, b) pairs have b above a, ties counting half.
    pub u: f64,
    /// The standard score of U under "same distribution", corrected for ties and continuity.
    pub z: f64,
    /// The one-sided p-value of "b tends to be larger than a".
    pub p_greater: f64,
    /// The two-sided p-value.
    pub p_two_sided: f64,
}

/// The fewest values a side the normal approximation is used with.
pub const MIN_SIDE: usize = 8;

/// Mann-Whitney U of `b` against `a` by the normal approximation (with the tie and continuity
/// corrections). `None` when a side has fewer than [`MIN_SIDE`] values, a value is not finite,
/// or every value is the same (no ranks to compare).
pub(crate) fn rank_sum(a: &[f64], b: &[f64]) -> Option<RankSum> {
    let (n1, n2) = (a.len(), b.len());
    if n1 < MIN_SIDE || n2 < MIN_SIDE || a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, false))
        .chain(b.iter().map(|&v| (v, true)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Average ranks over ties; the tie term Σ(t³ − t) for the variance.
    let (mut rank_b, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let rank = (i + j) as f64 / 2.0 + 1.0;
        rank_b += rank * all[i..=j].iter().filter(|x| x.1).count() as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let n = n1f + n2f;
    let u = rank_b - n2f * (n2f + 1.0) / 2.0;
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return None;
    }
    let sd = var.sqrt();
    let diff = u - mean;
    let z = if diff == 0.0 {
        0.0
    } else {
        (diff - 0.5 * diff.signum()) / sd
    };
    let p_greater = upper_tail(z);
    let p_two_sided = (2.0 * upper_tail(z.abs())).min(1.0);
    Some(RankSum {
        u,
        z,
        p_greater,
        p_two_sided,
    })
}

/// P(Z > z) for a standard normal Z.
pub(crate) fn upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' Chebyshev fit, relative error below
/// 1.2e-7, enough for p-values).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The median of `v` (the mean of the middle two for an even count); `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}

/// The significance level a change is stated at.
pub const ALPHA: f64 = 0.01;

/// Whether `b`'s values are larger than `a`'s beyond chance and beyond a practical floor: the
/// rank-sum test says so (one-sided p below [`ALPHA`]) and `b`'s median is at least
/// `1 + floor` times `a`'s. `None` when either side is too small to test.
pub fn larger_beyond_noise(a: &[f64], b: &[f64], floor: f64) -> Option<bool> {
    let t = rank_sum(a, b)?;
    let (ma, mb) = (median(a)?, median(b)?);
    Some(t.p_greater < ALPHA && mb >= ma * (1.0 + floor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_samples_are_significant_and_equal_ones_are_not() {
        let a: Vec<f64> = (0..20).map(|i| i as f64).collect();
        let b: Vec<f64> = (0..20).map(|i| 100.0 + i as f64).collect();
        let t = rank_sum(&a, &b).unwrap();
        assert_eq!(t.u, 400.0);
        assert!(t.p_greater < 1e-6, "{t:?}");
        assert!(rank_sum(&b, &a).unwrap().p_greater > 0.999);
        let same = rank_sum(&a, &a).unwrap();
        assert!((same.p_two_sided - 1.0).abs() < 1e-9, "{same:?}");
    }

    #[test]
    fn matches_a_textbook_value() {
        // Two interleaved samples: U = 28 of 64 pairs against a mean of 32.
        let a = [1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0];
        let b = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 0.5];
        let t = rank_sum(&a, &b).unwrap();
        assert_eq!(t.u, 28.0);
        // var = 8·8/12·17 = 90.67, sd 9.522; z = (28 − 32 + 0.5)/9.522 = −0.3676.
        assert!((t.z + 0.3676).abs() < 1e-3, "{t:?}");
        assert!((t.p_two_sided - 0.7132).abs() < 1e-3, "{t:?}");
    }

    #[test]
    fn ties_are_averaged_and_all_equal_is_untestable() {
        let a = [1.0; 10];
        assert!(rank_sum(&a, &a).is_none());
        let b = [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        let t = rank_sum(&a, &b).unwrap();
        // Every pair with b = 1 ties (half each): 5·10·0.5 + 5·10 = 75.
        assert_eq!(t.u, 75.0);
        assert!(t.p_greater < 0.05, "{t:?}");
    }

    #[test]
    fn too_few_or_not_finite_is_none() {
        assert!(rank_sum(&[1.0; 3], &[2.0; 30]).is_none());
        let mut a = vec![1.0; 10];
        a[3] = f64::NAN;
        assert!(rank_sum(&a, &[2.0; 10]).is_none());
    }

    #[test]
    fn larger_needs_both_significance_and_the_floor() {
        // Many values 5% apart: significant, but under a 20% floor.
        let a: Vec<f64> = (0..300).map(|i| 1.0 + (i % 10) as f64 * 0.001).collect();
        let b: Vec<f64> = a.iter().map(|v| v * 1.05).collect();
        assert_eq!(larger_beyond_noise(&a, &b, 0.2), Some(false));
        assert_eq!(larger_beyond_noise(&a, &b, 0.01), Some(true));
        // Twice as slow but overlapping widely (the CI case: spread wider than the shift).
        let a: Vec<f64> = (0..300).map(|i| 0.1 + (i % 50) as f64 * 0.02).collect();
        let b: Vec<f64> = a.iter().map(|v| v * 2.0).collect();
        assert_eq!(larger_beyond_noise(&a, &b, 0.2), Some(true));
        assert_eq!(larger_beyond_noise(&b, &a, 0.2), Some(false));
    }

    #[test]
    fn upper_tail_is_the_normal_one() {
        assert!((upper_tail(0.0) - 0.5).abs() < 1e-7);
        assert!((upper_tail(1.96) - 0.025).abs() < 1e-4);
        assert!((upper_tail(-1.6449) - 0.95).abs() < 1e-4);
    }
}
