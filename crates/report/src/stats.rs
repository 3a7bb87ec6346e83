//! The statistics behind `throng compare`, on plain slices (no I/O):
//! medians and quantiles, a percentile-bootstrap confidence interval for the
//! difference of two medians, and the Mann–Whitney U test.
//!
//! The bootstrap draws from throng's own small seeded generator (SplitMix64,
//! `throng_plan::Rng`) rather than a crate's: the same inputs and seed give
//! the same interval on every machine and every throng version, so a
//! comparison can be re-run and checked.

use throng_plan::Rng;

/// The median of `v` (mean of the two middle values for an even count);
/// NaN when `v` is empty.
pub fn median(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

/// The `q` quantile of `v` by linear interpolation between order statistics
/// (Hyndman & Fan type 7, as R's default and NumPy's `linear`); NaN when `v`
/// is empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, q)
}

fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    match s.len() {
        0 => f64::NAN,
        1 => s[0],
        n => {
            let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            s[lo] + (h - lo as f64) * (s[hi] - s[lo])
        }
    }
}

/// How far apart a side's own values are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The width: the interquartile range with 4 or more values, else max − min.
    pub width: f64,
    /// Which width it is.
    pub kind: SpreadKind,
}

/// Which measure of spread [`Spread`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpreadKind {
    /// Q3 − Q1.
    Iqr,
    /// max − min (fewer than 4 values: quartiles say little).
    Range,
}

impl SpreadKind {
    /// `IQR` or `range`.
    pub fn name(self) -> &'static str {
        match self {
            SpreadKind::Iqr => "IQR",
            SpreadKind::Range => "range",
        }
    }
}

/// The spread of `v` (zero when it has fewer than 2 values).
pub fn spread(v: &[f64]) -> Spread {
    if v.len() >= 4 {
        Spread {
            width: quantile(v, 0.75) - quantile(v, 0.25),
            kind: SpreadKind::Iqr,
        }
    } else {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Spread {
            width: if v.len() < 2 { 0.0 } else { max - min },
            kind: SpreadKind::Range,
        }
    }
}

/// A confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

impl Interval {
    /// True when 0 lies inside (or on the edge of) the interval.
    pub fn contains_zero(&self) -> bool {
        self.low <= 0.0 && self.high >= 0.0
    }
}

/// The percentile-bootstrap interval, at `confidence` (e.g. 0.95), for
/// median(b) − median(a): `resamples` times, draw each side with
/// replacement and take the difference of the medians; the interval holds
/// the middle `confidence` of those differences. None when a side is empty.
pub fn bootstrap_median_diff(a: &[f64], b: &[f64], resamples: usize, confidence: f64, seed: u64) -> Option<Interval> {
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = Rng::new(seed);
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    let mut diffs = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for x in &mut ra {
            *x = a[rng.below(a.len())];
        }
        for x in &mut rb {
            *x = b[rng.below(b.len())];
        }
        diffs.push(median_in_place(&mut rb) - median_in_place(&mut ra));
    }
    diffs.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence.clamp(0.0, 1.0)) / 2.0;
    Some(Interval {
        low: quantile_sorted(&diffs, tail),
        high: quantile_sorted(&diffs, 1.0 - tail),
    })
}

/// The median, reordering `v` (O(n) selection instead of a sort).
fn median_in_place(v: &mut [f64]) -> f64 {
    let n = v.len();
    let (_, &mut upper, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        upper
    } else {
        let lower = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    }
}

/// The Mann–Whitney U test of two independent samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// U of `b` against `a`: how many (a, b) pairs have b > a (ties count ½).
    /// 0 means every b is below every a; `n_a·n_b` every b above.
    pub u: f64,
    /// Two-sided p-value: the chance of a U at least this far from its
    /// middle if both samples came from one distribution.
    pub p_value: f64,
    /// True when `p_value` is exact (no ties, both samples of at most
    /// [`EXACT_LIMIT`] values); else the normal approximation with tie and
    /// continuity corrections.
    pub exact: bool,
}

/// Largest sample for which [`mann_whitney`] counts the exact distribution.
pub const EXACT_LIMIT: usize = 25;

/// Two-sided Mann–Whitney U test; None when a side is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return None;
    }
    // Rank everything together, ties getting their average rank.
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, false))
        .chain(b.iter().map(|&x| (x, true)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total = all.len();
    let mut rank_sum_b = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < total {
        let mut j = i;
        while j + 1 < total && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        rank_sum_b += rank * all[i..=j].iter().filter(|(_, is_b)| *is_b).count() as f64;
        i = j + 1;
    }
    let (mf, nf) = (m as f64, n as f64);
    let u = rank_sum_b - nf * (nf + 1.0) / 2.0;
    let mean = mf * nf / 2.0;
    if tie_term == 0.0 && m <= EXACT_LIMIT && n <= EXACT_LIMIT {
        let counts = u_distribution(m, n);
        let total: f64 = counts.iter().sum();
        let low = u.min(mf * nf - u).round() as usize;
        let tail: f64 = counts[..=low].iter().sum::<f64>() / total;
        return Some(MannWhitney {
            u,
            p_value: (2.0 * tail).min(1.0),
            exact: true,
        });
    }
    let nt = mf + nf;
    let variance = mf * nf / 12.0 * ((nt + 1.0) - tie_term / (nt * (nt - 1.0)));
    let p_value = if variance <= 0.0 {
        1.0
    } else {
        let z = ((u - mean).abs() - 0.5).max(0.0) / variance.sqrt();
        erfc(z / std::f64::consts::SQRT_2).min(1.0)
    };
    Some(MannWhitney {
        u,
        p_value,
        exact: false,
    })
}

/// How many of the C(m+n, m) orderings of two untied samples give each U
/// (index = U), by the recurrence f(m, n, u) = f(m−1, n, u−n) + f(m, n−1, u).
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    // prev[k][u]: counts for (i−1, k); built row by row over i = 0..=m.
    let max_u = m * n;
    let mut rows: Vec<Vec<f64>> = (0..=n).map(|_| vec![0.0; max_u + 1]).collect();
    for row in &mut rows {
        row[0] = 1.0; // i = 0: one ordering, U = 0
    }
    for i in 1..=m {
        let mut next: Vec<Vec<f64>> = (0..=n).map(|_| vec![0.0; max_u + 1]).collect();
        next[0][0] = 1.0; // k = 0: U = 0
        for k in 1..=n {
            for u in 0..=i * k {
                let from_i = if u >= k { rows[k][u - k] } else { 0.0 };
                next[k][u] = from_i + next[k - 1][u];
            }
        }
        rows = next;
    }
    rows.swap_remove(n)
}

/// The smallest p-value [`mann_whitney`] can give for samples of `m` and
/// `n` untied values: 2 / C(m+n, m). With 3 runs a side it is 0.1, so no
/// difference can reach p < 0.05 whatever the data.
pub fn smallest_p(m: usize, n: usize) -> f64 {
    let mut c = 1.0;
    for i in 0..m.min(n) {
        c = c * (m + n - i) as f64 / (i + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

/// Two-sided p-value of the two-proportion z-test: is `hits_b / n_b`
/// different from `hits_a / n_a`? The pooled proportion's standard error;
/// None when a side counted nothing. Both sides all hits or all misses: 1.
pub fn two_proportion(hits_a: u64, n_a: u64, hits_b: u64, n_b: u64) -> Option<f64> {
    if n_a == 0 || n_b == 0 {
        return None;
    }
    let (na, nb) = (n_a as f64, n_b as f64);
    let (pa, pb) = (hits_a as f64 / na, hits_b as f64 / nb);
    let pooled = (hits_a as f64 + hits_b as f64) / (na + nb);
    let se = (pooled * (1.0 - pooled) * (1.0 / na + 1.0 / nb)).sqrt();
    if se.is_nan() || se <= 0.0 {
        return Some(1.0);
    }
    let z = (pb - pa).abs() / se;
    Some(erfc(z / std::f64::consts::SQRT_2).min(1.0))
}

/// The complementary error function (Numerical Recipes' `erfcc`, fractional
/// error below 1.2e-7 everywhere).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn quantiles_match_type_7() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        // numpy.quantile([1, 2, 3, 4, 10], 0.25) == 2.0, 0.9 → 7.6
        assert_eq!(quantile(&[10.0, 1.0, 2.0, 3.0, 4.0], 0.25), 2.0);
        assert!(close(quantile(&[10.0, 1.0, 2.0, 3.0, 4.0], 0.9), 7.6, 1e-12));
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn spread_is_iqr_from_four_values_else_range() {
        let s = spread(&[1.0, 2.0, 3.0, 4.0, 10.0]);
        assert_eq!((s.kind, s.width), (SpreadKind::Iqr, 2.0));
        let s = spread(&[5.0, 1.0, 3.0]);
        assert_eq!((s.kind, s.width), (SpreadKind::Range, 4.0));
        assert_eq!(spread(&[7.0]).width, 0.0);
    }

    #[test]
    fn median_in_place_agrees_with_sorting() {
        let mut rng = Rng::new(1);
        for n in 1..40 {
            let v: Vec<f64> = (0..n).map(|_| (rng.next_u64() % 100) as f64).collect();
            assert_eq!(median_in_place(&mut v.clone()), median(&v), "{v:?}");
        }
    }

    #[test]
    fn splitmix_is_the_published_sequence() {
        // The reference implementation's first outputs from seed 0.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut r = Rng::new(7);
        assert!((0..1000).all(|_| r.below(3) < 3));
    }

    #[test]
    fn mann_whitney_exact_known_values() {
        // Fully separated 3 vs 3: U = 9 (every b above), p = 2/C(6,3) = 0.1.
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!(t.u, 9.0);
        assert!(t.exact);
        assert!(close(t.p_value, 0.1, 1e-12));
        // 5 vs 5 separated: p = 2/252.
        let t = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!(close(t.p_value, 2.0 / 252.0, 1e-12));
        // [1,3,5,7] vs [2,4,6,8]: U(b) = 10; enumerating the 70 orderings,
        // 24 give U <= 6, so p = 2·24/70.
        let t = mann_whitney(&[1.0, 3.0, 5.0, 7.0], &[2.0, 4.0, 6.0, 8.0]).unwrap();
        assert_eq!(t.u, 10.0);
        assert!(close(t.p_value, 48.0 / 70.0, 1e-12), "{}", t.p_value);
        // Swapping the sides mirrors U and keeps p.
        let s = mann_whitney(&[2.0, 4.0, 6.0, 8.0], &[1.0, 3.0, 5.0, 7.0]).unwrap();
        assert_eq!(s.u, 6.0);
        assert!(close(s.p_value, t.p_value, 1e-12));
    }

    #[test]
    fn u_distribution_counts_every_ordering() {
        // 2 vs 2: U = 0,1,2,2,3,4 over the C(4,2) = 6 orderings.
        assert_eq!(u_distribution(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        let d = u_distribution(7, 5);
        assert_eq!(d.iter().sum::<f64>(), 792.0); // C(12, 5)
        assert_eq!(smallest_p(3, 3), 0.1);
        assert!(close(smallest_p(4, 4), 2.0 / 70.0, 1e-12));
    }

    #[test]
    fn mann_whitney_normal_approximation_with_ties() {
        // Ties force the normal approximation. a = [1,2,2,3], b = [2,3,3,4]:
        // ranks 1, 3,3,3, 6,6,6, 8; R_b = 3+6+6+8 = 23, U_b = 23 − 10 = 13,
        // mean 8, tie term (27−3)+(27−3) = 48,
        // var = 16/12·(9 − 48/56) = 10.857142…, z = (5 − 0.5)/3.295017 = 1.365698,
        // p = erfc(z/√2) = 0.1720337.
        let t = mann_whitney(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.u, 13.0);
        assert!(!t.exact);
        assert!(close(t.p_value, 0.172_033_7, 1e-6), "{}", t.p_value);
        // All values equal: nothing to tell apart.
        let t = mann_whitney(&[5.0; 4], &[5.0; 4]).unwrap();
        assert_eq!(t.p_value, 1.0);
        // Large separated samples: tiny p.
        let a: Vec<f64> = (0..100).map(f64::from).collect();
        let b: Vec<f64> = (100..200).map(f64::from).collect();
        assert!(mann_whitney(&a, &b).unwrap().p_value < 1e-30);
    }

    #[test]
    fn erfc_known_values() {
        assert!(close(erfc(0.0), 1.0, 1e-7));
        assert!(close(erfc(1.0), 0.157_299_207, 1e-7));
        assert!(close(erfc(-1.0), 1.842_700_793, 1e-7));
        assert!(close(erfc(1.959_963_985 / std::f64::consts::SQRT_2), 0.05, 1e-7));
    }

    #[test]
    fn bootstrap_brackets_a_shift_and_is_reproducible() {
        // b is a shifted by exactly 10: every resampled difference of medians
        // is near 10, and the interval excludes 0.
        let a: Vec<f64> = (0..30).map(|i| f64::from(i % 7)).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 10.0).collect();
        let ci = bootstrap_median_diff(&a, &b, 10_000, 0.95, 42).unwrap();
        assert!(
            ci.low > 5.0 && ci.high < 15.0 && ci.low <= 10.0 && ci.high >= 10.0,
            "{ci:?}"
        );
        assert!(!ci.contains_zero());
        assert_eq!(Some(ci), bootstrap_median_diff(&a, &b, 10_000, 0.95, 42));
        // Identical samples: the interval is centred on 0.
        let ci = bootstrap_median_diff(&a, &a, 10_000, 0.95, 42).unwrap();
        assert!(ci.contains_zero());
        assert!(close(ci.low, -ci.high, 1.0), "{ci:?}");
        // Constant samples: a point interval at the difference.
        let ci = bootstrap_median_diff(&[1.0, 1.0], &[3.0, 3.0], 100, 0.95, 1).unwrap();
        assert_eq!((ci.low, ci.high), (2.0, 2.0));
        assert_eq!(bootstrap_median_diff(&[], &[1.0], 10, 0.95, 1), None);
    }

    #[test]
    fn two_proportions_tell_a_real_rise_from_noise() {
        // 1% against 3% of 10,000 each: z ≈ 10, far below any threshold.
        assert!(two_proportion(100, 10_000, 300, 10_000).unwrap() < 1e-6);
        // 1 against 2 of 100: nothing to tell.
        assert!(two_proportion(1, 100, 2, 100).unwrap() > 0.5);
        // Nothing failed on either side, or everything did: no difference.
        assert_eq!(two_proportion(0, 50, 0, 80), Some(1.0));
        assert_eq!(two_proportion(50, 50, 80, 80), Some(1.0));
        assert_eq!(two_proportion(0, 0, 1, 10), None);
    }
}
