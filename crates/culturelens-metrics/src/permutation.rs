//! Paired comparisons: the sign-flip permutation test of a mean difference and Holm's correction
//! across the cells of a comparison (`culturelens sos --compare-models`, `--compare-languages`).
//!
//! # Sign-flip test ([`sign_flip_test`])
//! For paired differences `d₁, …, d_n` the statistic is `T = mean(d)`. Under the null hypothesis
//! that each `d_i` is symmetric about 0, every sign pattern `s ∈ {−1, +1}ⁿ` is equally likely, so
//! the null distribution is `T(s) = mean(s_i d_i)`. As `scipy.stats.permutation_test((d,), mean,
//! permutation_type="samples")` (one sample: its signs are flipped):
//! - **exact** when `2ⁿ ≤ P` (the permutations asked for): all `2ⁿ` patterns, the identity
//!   included, `p_≥ = #{T(s) ≥ T − γ} / 2ⁿ`;
//! - otherwise `P` random patterns (bit `i` of seeded [`SplitMix64`] words gives `s_i`),
//!   `p_≥ = (#{T(s) ≥ T − γ} + 1) / (P + 1)` (the observed pattern counted once);
//! - `p_≤` likewise with `T(s) ≤ T + γ`, two-sided `p = min(1, 2 min(p_≤, p_≥))`;
//! - `γ = 100 ε |T|` (ε of f64) absorbs round-off between patterns that are equal in exact
//!   arithmetic, as scipy does.
//!
//! # Holm ([`holm`])
//! Holm's step-down adjustment of `m` p-values (Holm 1979): sorted ascending `p_(1) ≤ … ≤ p_(m)`,
//! `p̃_(j) = max_{k ≤ j} min(1, (m − k + 1) p_(k))`, returned in the input order (as
//! `statsmodels.stats.multitest.multipletests(method="holm")`). It controls the family-wise error
//! rate over the cells of one comparison.

use culturelens_rng::SplitMix64;

/// `--permutations`' default (scipy's `n_resamples`).
pub const DEFAULT_PERMUTATIONS: usize = 9999;

/// The result of one sign-flip test.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SignFlip {
    /// `mean(d)`.
    pub statistic: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Whether all `2ⁿ` sign patterns were enumerated.
    pub exact: bool,
    /// Sign patterns in the null distribution (`2ⁿ` when exact).
    pub patterns: usize,
}

/// The two-sided sign-flip permutation test of `mean(d) = 0` (module doc), with at most
/// `permutations` random patterns from `seed` when `2ⁿ` exceeds them.
pub fn sign_flip_test(d: &[f64], permutations: usize, seed: u64) -> SignFlip {
    assert!(!d.is_empty(), "a sign-flip test needs at least one difference");
    assert!(permutations > 0, "a sign-flip test needs at least one permutation");
    let n = d.len();
    let observed = mean_with_signs(d, |_| false);
    let gamma = (100.0 * f64::EPSILON * observed).abs();
    let (mut at_most, mut at_least) = (0usize, 0usize);
    let mut count = |t: f64| {
        at_most += usize::from(t <= observed + gamma);
        at_least += usize::from(t >= observed - gamma);
    };
    let exact = n < 64 && (1u64 << n) <= permutations as u64;
    let (patterns, adjustment) = if exact {
        let total = 1u64 << n;
        for pattern in 0..total {
            count(mean_with_signs(d, |i| pattern >> i & 1 == 1));
        }
        (total as usize, 0)
    } else {
        let mut rng = SplitMix64::new(seed);
        let mut words = vec![0u64; n.div_ceil(64)];
        for _ in 0..permutations {
            words.iter_mut().for_each(|w| *w = rng.next_u64());
            count(mean_with_signs(d, |i| words[i / 64] >> (i % 64) & 1 == 1));
        }
        (permutations, 1)
    };
    let p = |hits: usize| (hits + adjustment) as f64 / (patterns + adjustment) as f64;
    let p_value = (2.0 * p(at_most).min(p(at_least))).clamp(0.0, 1.0);
    SignFlip { statistic: observed, p_value, exact, patterns }
}

/// `mean(s_i d_i)` with `s_i = −1` where `negate(i)`.
fn mean_with_signs(d: &[f64], negate: impl Fn(usize) -> bool) -> f64 {
    d.iter().enumerate().map(|(i, &v)| if negate(i) { -v } else { v }).sum::<f64>() / d.len() as f64
}

/// Holm's step-down adjusted p-values, in the input order (module doc).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0f64;
    for (k, &i) in order.iter().enumerate() {
        running = running.max(((m - k) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_sign_flip_by_hand() {
        // d = 1, 2, 3: T = 2. The 8 patterns give sums ±1 ±2 ±3 = 6, 4, 2, 0, 0, −2, −4, −6, so
        // T(s) ∈ {2, 4/3, 2/3, 0, 0, −2/3, −4/3, −2}: one pattern ≥ 2, eight ≤ 2.
        // p = 2 · min(8/8, 1/8) = 0.25.
        let t = sign_flip_test(&[1.0, 2.0, 3.0], 9999, 0);
        assert_eq!((t.statistic, t.p_value, t.exact, t.patterns), (2.0, 0.25, true, 8));
        // d = 1, −1: T = 0, every pattern is ≥ and ≤ 0 − γ … p = min(1, 2) = 1.
        assert_eq!(sign_flip_test(&[1.0, -1.0], 10, 0).p_value, 1.0);
    }

    #[test]
    fn random_sign_flip_counts_the_observed_pattern() {
        // 20 equal positive differences: only the all-positive pattern reaches T, which a random
        // draw of 999 patterns almost surely misses: p = 2 (0 + 1) / 1000.
        let t = sign_flip_test(&[1.0; 20], 999, 3);
        assert!(!t.exact);
        assert_eq!((t.patterns, t.p_value), (999, 0.002));
        // Seeded: the same seed gives the same p-value.
        let d: Vec<f64> = (0..30).map(|i| (i as f64 * 0.37).sin() + 0.2).collect();
        assert_eq!(sign_flip_test(&d, 500, 11), sign_flip_test(&d, 500, 11));
    }

    #[test]
    fn holm_by_hand() {
        // p = 0.01, 0.04, 0.03, 0.5 (m = 4): sorted 0.01, 0.03, 0.04, 0.5 →
        // 4·0.01 = 0.04, 3·0.03 = 0.09, 2·0.04 = 0.08 → max(0.09, 0.08) = 0.09, 1·0.5 = 0.5.
        let adj = holm(&[0.01, 0.04, 0.03, 0.5]);
        let want = [0.04, 0.09, 0.09, 0.5];
        for (a, w) in adj.iter().zip(want) {
            assert!((a - w).abs() < 1e-15, "{adj:?}");
        }
        assert_eq!(holm(&[0.6, 0.7]), [1.0, 1.0]);
        assert!(holm(&[]).is_empty());
    }
}
