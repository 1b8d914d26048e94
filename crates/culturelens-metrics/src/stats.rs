//! Small descriptive statistics shared by the metrics, computed in f64 on the host.
//!
//! Conventions (stated once, used everywhere): quantiles use linear interpolation between order
//! statistics (numpy's default `method="linear"`, Hyndman–Fan type 7); the median is the 0.5
//! quantile (mean of the two middle values for an even count); Pearson's r is undefined (`None`)
//! for fewer than two pairs or zero variance.
//!
//! The Wilcoxon signed-rank test ([`wilcoxon`]) follows `scipy.stats.wilcoxon` with its defaults
//! (`zero_method="wilcox"`, `correction=False`, `alternative="two-sided"`, `method="auto"`).
//!
//! The standard normal distribution: [`normal_cdf`] `Φ(x) = erfc(−x/√2)/2` (scipy's `ndtr`) and
//! its inverse [`normal_quantile`] `Φ⁻¹(p)` (scipy's `ndtri`), by Wichura's algorithm AS 241
//! (`PPND16`, relative error about 1e-16), used by the BCa intervals of the bootstrap module.

/// Arithmetic mean (`NaN` for an empty slice).
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The `p`-quantile (0 ≤ p ≤ 1) of `sorted` (ascending), linear interpolation (type 7).
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "quantile of an empty sample");
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Sorts a copy of `values` ascending (NaN-free input).
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("statistics on NaN"));
    v
}

/// Median (type-7 0.5 quantile).
pub fn median(values: &[f64]) -> f64 {
    quantile_sorted(&sorted(values), 0.5)
}

/// Distribution summary: the numbers behind a box plot (SoS paper Fig. 2).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summarises a non-empty sample.
    pub fn of(values: &[f64]) -> Summary {
        let s = sorted(values);
        Summary {
            n: s.len(),
            mean: mean(&s),
            median: quantile_sorted(&s, 0.5),
            q1: quantile_sorted(&s, 0.25),
            q3: quantile_sorted(&s, 0.75),
            min: s[0],
            max: s[s.len() - 1],
        }
    }
}

/// Pearson correlation of paired samples; `None` when fewer than two pairs or a variance is zero.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    assert_eq!(x.len(), y.len());
    if x.len() < 2 {
        return None;
    }
    let (mx, my) = (mean(x), mean(y));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some((sxy / (sxx.sqrt() * syy.sqrt())).clamp(-1.0, 1.0))
}

/// How [`wilcoxon`] computed its p-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WilcoxonMethod {
    /// The exact null distribution of `R+` over all `2^n` sign assignments of the ranks (scipy's
    /// `exact` without ties or zeros, its exhaustive `PermutationMethod` with them).
    Exact,
    /// The normal approximation with the tie correction of the variance, no continuity correction.
    Asymptotic,
}

/// The result of a two-sided Wilcoxon signed-rank test.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Wilcoxon {
    /// Pairs given.
    pub n: usize,
    /// Pairs with a zero difference (dropped, Wilcoxon's convention).
    pub n_zero: usize,
    /// `min(R+, R−)`, scipy's two-sided statistic.
    pub statistic: f64,
    /// The sum of the (average) ranks of `|d|` over the positive differences.
    pub r_plus: f64,
    /// `(R+ − n'(n'+1)/4) / σ` for the asymptotic method (`n'` = non-zero differences).
    pub z: Option<f64>,
    /// Two-sided p-value; `None` when every difference is zero.
    pub pvalue: Option<f64>,
    pub method: WilcoxonMethod,
}

/// Two-sided Wilcoxon signed-rank test of the paired differences `d` (`x − y`), as
/// `scipy.stats.wilcoxon(d)` with its defaults:
/// - zero differences are dropped before ranking (`zero_method="wilcox"`); `|d|` gets average
///   ranks on ties;
/// - `method="auto"`: exact when `n ≤ 50` and there is neither a tie nor a zero, the exhaustive
///   sign-flip permutation distribution (also exact) when `n ≤ 13` otherwise, both with
///   `p = min(1, 2·min(P(R+ ≤ r), P(R+ ≥ r)))`; the normal approximation otherwise with
///   `σ² = (n'(n'+1)(2n'+1) − Σ(t³ − t)/2) / 24` over tie groups `t` and `p = erfc(|z|/√2)`.
pub fn wilcoxon(d: &[f64]) -> Wilcoxon {
    let n = d.len();
    let nonzero: Vec<f64> = d.iter().copied().filter(|&x| x != 0.0).collect();
    let n_zero = n - nonzero.len();
    let (ranks, ties) = average_ranks(&nonzero.iter().map(|x| x.abs()).collect::<Vec<_>>());
    let r_plus: f64 = nonzero.iter().zip(&ranks).filter(|(x, _)| **x > 0.0).map(|(_, r)| r).sum();
    let r_minus: f64 = nonzero.iter().zip(&ranks).filter(|(x, _)| **x < 0.0).map(|(_, r)| r).sum();
    let has_ties = ties.iter().any(|&t| t > 1);
    let exact = (n <= 50 && !has_ties && n_zero == 0) || n <= 13;
    let statistic = r_plus.min(r_minus);
    if nonzero.is_empty() {
        let method = if exact { WilcoxonMethod::Exact } else { WilcoxonMethod::Asymptotic };
        return Wilcoxon { n, n_zero, statistic, r_plus, z: None, pvalue: None, method };
    }
    if exact {
        let pvalue = Some(exact_signed_rank_pvalue(&ranks, r_plus));
        return Wilcoxon { n, n_zero, statistic, r_plus, z: None, pvalue, method: WilcoxonMethod::Exact };
    }
    let m = nonzero.len() as f64;
    let tie_term: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let se = ((m * (m + 1.0) * (2.0 * m + 1.0) - tie_term / 2.0) / 24.0).sqrt();
    let z = (r_plus - m * (m + 1.0) / 4.0) / se;
    let pvalue = (libm::erfc(z.abs() / std::f64::consts::SQRT_2)).min(1.0);
    Wilcoxon {
        n,
        n_zero,
        statistic,
        r_plus,
        z: Some(z),
        pvalue: Some(pvalue),
        method: WilcoxonMethod::Asymptotic,
    }
}

/// Average (mid) ranks, 1-based, of `values` and the sizes of the tie groups.
pub fn average_ranks(values: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].partial_cmp(&values[b]).expect("ranks of NaN"));
    let mut ranks = vec![0.0; values.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let mut j = i + 1;
        while j < order.len() && values[order[j]] == values[order[i]] {
            j += 1;
        }
        let mid = (i + 1 + j) as f64 / 2.0;
        order[i..j].iter().for_each(|&k| ranks[k] = mid);
        ties.push(j - i);
        i = j;
    }
    (ranks, ties)
}

/// `min(1, 2·min(P(R+ ≤ r), P(R+ ≥ r)))` under the null that every rank's sign is a fair coin:
/// the distribution of the doubled rank sum (integral for average ranks) counted exactly by
/// dynamic programming over the ranks.
fn exact_signed_rank_pvalue(ranks: &[f64], r_plus: f64) -> f64 {
    let doubled: Vec<usize> = ranks.iter().map(|r| (2.0 * r).round() as usize).collect();
    let total: usize = doubled.iter().sum();
    let mut counts = vec![0.0f64; total + 1];
    counts[0] = 1.0;
    let mut reach = 0;
    for &r in &doubled {
        for s in (0..=reach).rev() {
            counts[s + r] += counts[s];
        }
        reach += r;
    }
    let observed = (2.0 * r_plus).round() as usize;
    let all: f64 = counts.iter().sum();
    let less: f64 = counts[..=observed].iter().sum::<f64>() / all;
    let greater: f64 = counts[observed..].iter().sum::<f64>() / all;
    (2.0 * less.min(greater)).min(1.0)
}

/// Numerically stable softmax (the maximum subtracted first).
pub fn softmax(logits: &[f64]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exp: Vec<f64> = logits.iter().map(|&x| (x - max).exp()).collect();
    let total: f64 = exp.iter().sum();
    exp.iter().map(|e| e / total).collect()
}

/// `Φ(x)`, the standard normal distribution function: `erfc(−x/√2) / 2`.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// `Φ⁻¹(p)`, the standard normal quantile, for `0 ≤ p ≤ 1` (`−∞` at 0, `+∞` at 1, NaN outside):
/// Wichura's AS 241 `PPND16` (Applied Statistics 37, 1988), accurate to about 1e-16.
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let poly = |c: &[f64], x: f64| c.iter().rev().fold(0.0, |acc, &k| acc * x + k);
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * poly(&AS241_A, r) / poly(&AS241_B, r);
    }
    let r = if q < 0.0 { p } else { 1.0 - p };
    let r = (-r.ln()).sqrt();
    let x = if r <= 5.0 {
        let r = r - 1.6;
        poly(&AS241_C, r) / poly(&AS241_D, r)
    } else {
        let r = r - 5.0;
        poly(&AS241_E, r) / poly(&AS241_F, r)
    };
    if q < 0.0 { -x } else { x }
}

/// AS 241's coefficients, lowest degree first: the central region `|p − ½| ≤ 0.425` (A/B), the
/// intermediate tail `√(−ln p) ≤ 5` (C/D) and the far tail (E/F).
const AS241_A: [f64; 8] = [
    3.387_132_872_796_366_5,
    133.141_667_891_784_38,
    1_971.590_950_306_551_3,
    13_731.693_765_509_46,
    45_921.953_931_549_87,
    67_265.770_927_008_7,
    33_430.575_583_588_13,
    2_509.080_928_730_122_7,
];
const AS241_B: [f64; 8] = [
    1.0,
    42.313_330_701_600_91,
    687.187_007_492_057_9,
    5_394.196_021_424_751,
    21_213.794_301_586_597,
    39_307.895_800_092_71,
    28_729.085_735_721_943,
    5_226.495_278_852_545,
];
const AS241_C: [f64; 8] = [
    1.423_437_110_749_683_5,
    4.630_337_846_156_546,
    5.769_497_221_460_691,
    3.647_848_324_763_204_5,
    1.270_458_252_452_368_4,
    0.241_780_725_177_450_6,
    0.022_723_844_989_269_184,
    7.745_450_142_783_414e-4,
];
const AS241_D: [f64; 8] = [
    1.0,
    2.053_191_626_637_759,
    1.676_384_830_183_803_8,
    0.689_767_334_985_1,
    0.148_103_976_427_480_08,
    0.015_198_666_563_616_457,
    5.475_938_084_995_345e-4,
    1.050_750_071_644_416_9e-9,
];
const AS241_E: [f64; 8] = [
    6.657_904_643_501_103,
    5.463_784_911_164_114,
    1.784_826_539_917_291_3,
    0.296_560_571_828_504_9,
    0.026_532_189_526_576_124,
    0.001_242_660_947_388_078_4,
    2.711_555_568_743_487_6e-5,
    2.010_334_399_292_288_1e-7,
];
const AS241_F: [f64; 8] = [
    1.0,
    0.599_832_206_555_888,
    0.136_929_880_922_735_8,
    0.014_875_361_290_850_615,
    7.868_691_311_456_133e-4,
    1.846_318_317_510_054_8e-5,
    1.421_511_758_316_446e-7,
    2.044_263_103_389_939_8e-15,
];

/// Index of the largest value, the first one on ties.
pub fn argmax(values: &[f64]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_numpy_linear() {
        // np.quantile([1, 2, 3, 4], [0.25, 0.5, 0.75]) == [1.75, 2.5, 3.25]
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&s, 0.25), 1.75);
        assert_eq!(quantile_sorted(&s, 0.5), 2.5);
        assert_eq!(quantile_sorted(&s, 0.75), 3.25);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        let sum = Summary::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!((sum.min, sum.max, sum.mean), (1.0, 4.0, 2.5));
    }

    #[test]
    fn pearson_hand_values() {
        assert!((pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap() - 1.0).abs() < 1e-15);
        assert!((pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap() + 1.0).abs() < 1e-15);
        // x = [1,2,3,4], y = [1,3,2,4]: cov = 4, var = 5 each -> r = 0.8
        assert!((pearson(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 4.0]).unwrap() - 0.8).abs() < 1e-15);
        assert_eq!(pearson(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(pearson(&[1.0], &[1.0]), None);
    }

    #[test]
    fn normal_quantile_inverts_the_cdf() {
        // Φ⁻¹(0.975) = 1.959963984540054 (scipy.special.ndtri), Φ⁻¹(½) = 0, the tails are infinite.
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-15);
        assert_eq!(normal_quantile(0.5), 0.0);
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert_eq!(normal_quantile(1.0), f64::INFINITY);
        assert!(normal_quantile(1.5).is_nan());
        // ndtri(1e-300) = −37.0470962993612: the far tail (E/F) region.
        assert!((normal_quantile(1e-300) + 37.047_096_299_361_2).abs() < 1e-12);
        for p in [1e-12, 1e-5, 0.01, 0.2, 0.4, 0.6, 0.9, 0.999] {
            let x = normal_quantile(p);
            assert!((normal_cdf(x) - p).abs() < 1e-14 * p.max(1e-3), "Φ(Φ⁻¹({p})) = {}", normal_cdf(x));
            if p >= 1e-5 {
                assert!((normal_quantile(1.0 - p) + x).abs() < 1e-9, "symmetry at {p}");
            }
        }
        assert!((normal_cdf(1.959_963_984_540_054) - 0.975).abs() < 1e-16);
    }

    #[test]
    fn wilcoxon_by_hand() {
        // d = 1, −2, 3: ranks 1, 2, 3; R+ = 4, R− = 2. Of the 8 sign patterns, R+ takes
        // 0,1,2,3,3,4,5,6: P(R+ ≥ 4) = 3/8, P(R+ ≤ 4) = 6/8, p = 2·3/8.
        let w = wilcoxon(&[1.0, -2.0, 3.0]);
        assert_eq!((w.statistic, w.r_plus, w.method), (2.0, 4.0, WilcoxonMethod::Exact));
        assert_eq!(w.pvalue, Some(0.75));
        // A zero is dropped, a tie averages: d = 0, 1, −1, 2 → ranks of 1, 1, 2 are 1.5, 1.5, 3.
        let w = wilcoxon(&[0.0, 1.0, -1.0, 2.0]);
        assert_eq!((w.n, w.n_zero, w.r_plus, w.statistic), (4, 1, 4.5, 1.5));
        assert_eq!(average_ranks(&[3.0, 1.0, 3.0]), (vec![2.5, 1.0, 2.5], vec![1, 2]));
        assert_eq!(wilcoxon(&[0.0, 0.0]).pvalue, None);
    }

    #[test]
    fn wilcoxon_matches_scipy() {
        // scripts/fixtures/make_magbig_wilcoxon.py: scipy.stats.wilcoxon on exact and asymptotic cases.
        let fixture: serde_json::Value =
            serde_json::from_str(&culturelens_testkit::read_fixture("magbig/wilcoxon.json")).unwrap();
        for case in fixture["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let d: Vec<f64> = case["d"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
            let w = wilcoxon(&d);
            let (stat, p) = (case["statistic"].as_f64().unwrap(), case["pvalue"].as_f64().unwrap());
            assert!((w.statistic - stat).abs() < 1e-9, "{name}: statistic {} vs {stat}", w.statistic);
            let got = w.pvalue.unwrap();
            assert!((got - p).abs() < 1e-12 * p.max(1e-300) + 1e-15, "{name}: p {got} vs {p}");
            assert_eq!(serde_json::to_value(w.method).unwrap(), case["method"], "{name}");
        }
    }
}
