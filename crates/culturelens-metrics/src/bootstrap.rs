//! Seeded nonparametric bootstrap confidence intervals (Efron & Tibshirani 1993, ch. 13–14), as
//! `scipy.stats.bootstrap` computes them given the same resamples.
//!
//! # Resampling
//! A statistic `θ̂ = s(x₁, …, x_n)` is computed over `n` *units* (the images of a SoS cell, the
//! prompts of a MAD group, …). A resample draws `n` unit indices uniformly with replacement; `B`
//! resamples give the replicates `θ̂*₁, …, θ̂*_B`. The indices come from
//! [`culturelens_rng::SplitMix64`] seeded with [`stream_seed`]`(seed, stratum)`, one stream per
//! stratum (a cell, a group), drawn resample by resample, unit by unit, with
//! [`SplitMix64::below`](culturelens_rng::SplitMix64::below) ([`UnitSampler`], [`Draws`]): the same seed gives
//! the same indices on every backend, thread count and machine, and a stratum's indices do not
//! change when other strata are added or removed.
//!
//! # Intervals at level `1 − 2α` (`--ci 0.95`: `α = 0.025`)
//! Quantiles are type 7 (linear interpolation, [`crate::stats::quantile_sorted`], numpy's and
//! `scipy.stats.quantile`'s default) of the `B` replicates.
//! - **Percentile**: `[q(α), q(1 − α)]`.
//! - **BCa** (bias-corrected and accelerated, Efron 1987; Efron & Tibshirani Eq. 14.9–14.15):
//!   `[q(α₁), q(α₂)]` with
//!   `α₁ = Φ(ẑ₀ + (ẑ₀ + z_α) / (1 − â(ẑ₀ + z_α)))`, `α₂` the same with `z_{1−α}`, where
//!   - `ẑ₀ = Φ⁻¹((#{θ̂*_b < θ̂} + #{θ̂*_b ≤ θ̂}) / 2B)` (the bias correction, ties counted half, as
//!     scipy's `_percentile_of_score`; a replicate equal to `θ̂` up to round-off is a tie,
//!     [`TIE_ULPS`]);
//!   - `â = Σ U_i³ / (6 (Σ U_i²)^{3/2})`, `U_i = (n − 1)(θ̂_(·) − θ̂_(i))`, from the jackknife values
//!     `θ̂_(i)` (the statistic without unit `i`) and their mean `θ̂_(·)` (the acceleration, Eq. 14.15).
//!
//!   Conventions where scipy returns NaN: a constant jackknife (no skewness to measure, e.g. a
//!   single unit) gives `â = 0`; `ẑ₀ = ±∞` (every replicate on one side of `θ̂`) leaves the BCa
//!   interval undefined (`None`: an empty cell).
//!
//! A statistic that is undefined on a resample (a precision whose denominator is empty) leaves the
//! interval undefined. Means and ratio means of units have closed-form jackknife values
//! ([`Replicates::of_ratio`]); any other statistic is re-evaluated on each leave-one-out index set
//! ([`Replicates::of_statistic`]).

use culturelens_rng::SplitMix64;

use crate::stats::{normal_cdf, normal_quantile, quantile_sorted};

/// `--bootstrap`'s default: the number of resamples.
pub const DEFAULT_RESAMPLES: usize = 1000;

/// Which interval is read off the replicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CiMethod {
    /// `[q(α), q(1 − α)]` of the replicates.
    Percentile,
    /// Bias-corrected and accelerated percentiles (the default, as scipy's).
    Bca,
}

impl CiMethod {
    /// The name the CLI and the provenance use (`percentile`, `bca`).
    pub fn name(self) -> &'static str {
        match self {
            CiMethod::Percentile => "percentile",
            CiMethod::Bca => "bca",
        }
    }
}

/// A confidence interval `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// Whether `value` lies in `[lo, hi]`.
    pub fn covers(&self, value: f64) -> bool {
        self.lo <= value && value <= self.hi
    }
}

/// A confidence level that is not strictly between 0 and 1, or no resamples.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CiError {
    #[error("a confidence level lies strictly between 0 and 1 (e.g. 0.95), got {0}")]
    Level(f64),
    #[error("the bootstrap needs at least 1 resample (1000 is usual), got 0")]
    Resamples,
}

/// What one interval computation is asked for: the level, `B` resamples, the seed of the index
/// streams and the method.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CiSpec {
    pub level: f64,
    pub resamples: usize,
    pub seed: u64,
    pub method: CiMethod,
}

impl CiSpec {
    /// Checks `0 < level < 1` and `resamples ≥ 1`.
    pub fn new(level: f64, resamples: usize, seed: u64, method: CiMethod) -> Result<CiSpec, CiError> {
        check_level(level)?;
        if resamples == 0 {
            return Err(CiError::Resamples);
        }
        Ok(CiSpec { level, resamples, seed, method })
    }

    /// The index draws of the stratum `key` with `units` units.
    pub fn draws(&self, units: usize, key: &str) -> Draws {
        Draws::new(units, self.resamples, stream_seed(self.seed, key))
    }
}

/// `Ok(level)` when `0 < level < 1` (the parser of `--ci`).
pub fn check_level(level: f64) -> Result<f64, CiError> {
    if level > 0.0 && level < 1.0 { Ok(level) } else { Err(CiError::Level(level)) }
}

/// The seed of one stratum's stream: `seed` XOR the 64-bit FNV-1a hash of `key`, so a stratum's
/// draws depend on its own name only (the CUBE protocol's batches are seeded the same way).
pub fn stream_seed(seed: u64, key: &str) -> u64 {
    let hash =
        key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    seed ^ hash
}

/// One stratum's index stream: resample after resample, `n` indices `below(n)` each.
#[derive(Debug, Clone)]
pub struct UnitSampler {
    rng: SplitMix64,
    units: u64,
}

impl UnitSampler {
    /// The stream of a stratum of `units ≥ 1` units seeded with `seed` (a [`stream_seed`]).
    pub fn new(units: usize, seed: u64) -> UnitSampler {
        assert!(units > 0, "a stratum to resample has at least one unit");
        UnitSampler { rng: SplitMix64::new(seed), units: units as u64 }
    }

    /// The next resample: fills `out` (one entry per unit) with indices in `0..units`.
    pub fn draw(&mut self, out: &mut [u32]) {
        for slot in out {
            *slot = self.rng.below(self.units) as u32;
        }
    }
}

/// `B` resamples of `n` unit indices, resample-major (the order they are drawn in).
#[derive(Debug, Clone, PartialEq)]
pub struct Draws {
    units: usize,
    indices: Vec<u32>,
}

impl Draws {
    /// `resamples` resamples of `units ≥ 1` indices from the stream seeded with `seed`.
    pub fn new(units: usize, resamples: usize, seed: u64) -> Draws {
        let mut sampler = UnitSampler::new(units, seed);
        let mut indices = vec![0u32; units * resamples];
        for resample in indices.chunks_mut(units) {
            crate::cancel::checkpoint();
            sampler.draw(resample);
        }
        Draws { units, indices }
    }

    /// Units per resample.
    pub fn units(&self) -> usize {
        self.units
    }

    /// Number of resamples `B`.
    pub fn resamples(&self) -> usize {
        self.indices.len() / self.units
    }

    /// The indices of resample `b`.
    pub fn resample(&self, b: usize) -> &[u32] {
        &self.indices[b * self.units..(b + 1) * self.units]
    }

    /// Every resample, in order.
    pub fn iter(&self) -> std::slice::Chunks<'_, u32> {
        self.indices.chunks(self.units)
    }
}

/// The bootstrap distribution of one statistic: its estimate on all units, the `B` replicates and
/// the jackknife values (for BCa's acceleration; empty for a single unit).
#[derive(Debug, Clone, PartialEq)]
pub struct Replicates {
    pub estimate: f64,
    pub values: Vec<f64>,
    pub jackknife: Vec<f64>,
}

impl Replicates {
    /// The ratio mean `Σ sums / Σ sizes` of units (`sizes` all 1: the plain mean of `sums`; a
    /// cluster of images: its score sum and image count), over `draws` of these units. The
    /// jackknife is closed-form: `(S − sᵢ) / (C − cᵢ)`.
    pub fn of_ratio(sums: &[f64], sizes: &[f64], draws: &Draws) -> Replicates {
        assert_eq!(sums.len(), sizes.len(), "one size per unit");
        assert_eq!(draws.units(), sums.len(), "the draws resample these units");
        let (estimate, jackknife) = ratio_jackknife(sums, sizes);
        let values = draws
            .iter()
            .map(|idx| {
                crate::cancel::checkpoint();
                let (mut num, mut den) = (0.0, 0.0);
                for &i in idx {
                    num += sums[i as usize];
                    den += sizes[i as usize];
                }
                num / den
            })
            .collect();
        Replicates { estimate, values, jackknife }
    }

    /// The mean of `values` over `draws` ([`Replicates::of_ratio`] with unit sizes).
    pub fn of_mean(values: &[f64], draws: &Draws) -> Replicates {
        Replicates::of_ratio(values, &vec![1.0; values.len()], draws)
    }

    /// Any statistic of a multiset of unit indices (`stat(&[0, 1, …, n−1])` is the estimate),
    /// over `draws`; the jackknife re-evaluates it without each unit. `None` when the statistic is
    /// undefined on the data or on a resample.
    pub fn of_statistic(draws: &Draws, stat: impl Fn(&[u32]) -> Option<f64>) -> Option<Replicates> {
        let [r] = Replicates::of_statistics(draws, |idx| [stat(idx)]);
        r
    }

    /// `K` statistics of the same resamples at once ([`Replicates::of_statistic`] for each, the
    /// statistic evaluated once per index set): statistic `k` is `None` when it is undefined on the
    /// data or on a resample, the others unaffected.
    pub fn of_statistics<const K: usize>(
        draws: &Draws,
        stat: impl Fn(&[u32]) -> [Option<f64>; K],
    ) -> [Option<Replicates>; K] {
        let mut runs = StatisticRuns::new(draws);
        runs.step(usize::MAX, &stat);
        runs.finish()
    }

    /// The interval at `level` by `method`; `None` where it is undefined (a non-finite replicate,
    /// or BCa with every replicate on one side of the estimate).
    pub fn interval(&self, level: f64, method: CiMethod) -> Option<Interval> {
        match method {
            CiMethod::Percentile => percentile_interval(&self.values, level),
            CiMethod::Bca => bca_interval(self.estimate, &self.values, &self.jackknife, level),
        }
    }
}

/// [`Replicates::of_statistics`] a few evaluations at a time, so a caller can report progress
/// and yield between steps (the browser's Vendi intervals): the estimate on all units first, then
/// each resample in order, then the jackknife (each unit left out in turn, for `n ≥ 2`).
pub struct StatisticRuns<'a, const K: usize> {
    draws: &'a Draws,
    all: Vec<u32>,
    done: usize,
    out: Option<[Option<Replicates>; K]>,
}

impl<'a, const K: usize> StatisticRuns<'a, K> {
    pub fn new(draws: &'a Draws) -> StatisticRuns<'a, K> {
        StatisticRuns { draws, all: (0..draws.units() as u32).collect(), done: 0, out: None }
    }

    /// Evaluations in all: `1 + B + n` (`1 + B` for a single unit).
    pub fn total(&self) -> usize {
        let n = self.draws.units();
        1 + self.draws.resamples() + if n >= 2 { n } else { 0 }
    }

    /// Evaluations done so far.
    pub fn done(&self) -> usize {
        self.done
    }

    /// Evaluates `stat` on up to `count` more index sets; whether all are done.
    pub fn step(&mut self, count: usize, stat: &impl Fn(&[u32]) -> [Option<f64>; K]) -> bool {
        let (b, end) = (self.draws.resamples(), self.done.saturating_add(count).min(self.total()));
        let mut rest = Vec::new();
        for t in self.done..end {
            crate::cancel::checkpoint();
            let idx: &[u32] = match t {
                0 => &self.all,
                t if t <= b => self.draws.resample(t - 1),
                t => {
                    let left_out = (t - 1 - b) as u32;
                    rest.clear();
                    rest.extend(self.all.iter().copied().filter(|&u| u != left_out));
                    &rest
                }
            };
            let values = stat(idx);
            let Some(out) = self.out.as_mut() else {
                self.out = Some(std::array::from_fn(|k| {
                    values[k].map(|e| Replicates {
                        estimate: e,
                        values: Vec::with_capacity(b),
                        jackknife: Vec::new(),
                    })
                }));
                continue;
            };
            for (slot, v) in out.iter_mut().zip(values) {
                match (slot.as_mut(), v) {
                    (Some(r), Some(v)) if t > b => r.jackknife.push(v),
                    (Some(r), Some(v)) => r.values.push(v),
                    (Some(_), None) => *slot = None,
                    (None, _) => {}
                }
            }
        }
        self.done = end;
        end == self.total()
    }

    /// The replicates, once every evaluation is done ([`Replicates::of_statistics`]).
    pub fn finish(self) -> [Option<Replicates>; K] {
        assert_eq!(self.done, self.total(), "every evaluation is done");
        self.out.expect("the estimate is evaluated first")
    }
}

/// The ratio mean `Σ sums / Σ sizes` of units and its jackknife values `(S − sᵢ) / (C − cᵢ)`
/// (none for a single unit), the parts of [`Replicates::of_ratio`] that need no resamples.
pub fn ratio_jackknife(sums: &[f64], sizes: &[f64]) -> (f64, Vec<f64>) {
    let (s, c) = (sums.iter().sum::<f64>(), sizes.iter().sum::<f64>());
    let jackknife = if sums.len() < 2 {
        Vec::new()
    } else {
        sums.iter().zip(sizes).map(|(si, ci)| (s - si) / (c - ci)).collect()
    };
    (s / c, jackknife)
}

/// `α = (1 − level) / 2`.
fn tail(level: f64) -> f64 {
    (1.0 - level) / 2.0
}

/// The percentile interval `[q(α), q(1 − α)]` of `replicates` (type-7 quantiles).
pub fn percentile_interval(replicates: &[f64], level: f64) -> Option<Interval> {
    let a = tail(level);
    quantile_pair(replicates, a, 1.0 - a)
}

/// The BCa interval of `replicates` around `estimate` with the `jackknife` values (module doc).
pub fn bca_interval(estimate: f64, replicates: &[f64], jackknife: &[f64], level: f64) -> Option<Interval> {
    let z0 = bias_correction(estimate, replicates);
    if !z0.is_finite() {
        return None;
    }
    let a = acceleration(jackknife);
    let z_alpha = normal_quantile(tail(level));
    let adjusted = |z: f64| {
        let num = z0 + z;
        normal_cdf(z0 + num / (1.0 - a * num))
    };
    quantile_pair(replicates, adjusted(z_alpha), adjusted(-z_alpha))
}

/// `ẑ₀ = Φ⁻¹((#{θ̂* < θ̂} + #{θ̂* ≤ θ̂}) / 2B)`, where a replicate within [`TIE_ULPS`] units of
/// roundoff of `θ̂` counts as equal to it.
pub fn bias_correction(estimate: f64, replicates: &[f64]) -> f64 {
    let scale = replicates.iter().fold(estimate.abs(), |m, v| m.max(v.abs()));
    let tie = TIE_ULPS * f64::EPSILON * scale;
    let below = replicates.iter().filter(|&&v| v < estimate - tie).count();
    let at_most = replicates.iter().filter(|&&v| v <= estimate + tie).count();
    normal_quantile((below + at_most) as f64 / (2 * replicates.len()) as f64)
}

/// A replicate within `TIE_ULPS · ε · max(|θ̂|, |θ̂*|)` of the estimate is a tie in BCa's bias
/// correction. A resample that permutes the sample has the estimate's value in exact arithmetic
/// but, summed in another order, may differ from it in the last bits (and differently on another
/// backend); counting it as a tie keeps `ẑ₀`, hence the interval, from jumping with the summation
/// order. Replicates that differ for real differ by far more.
pub const TIE_ULPS: f64 = 256.0;

/// `â = Σ U³ / n³ / (6 (Σ U² / n²)^{3/2})`, `U_i = (n − 1)(mean − θ̂_(i))` (scipy's arithmetic); 0
/// for fewer than two values or a constant jackknife.
pub fn acceleration(jackknife: &[f64]) -> f64 {
    let n = jackknife.len() as f64;
    if jackknife.len() < 2 {
        return 0.0;
    }
    let mean = jackknife.iter().sum::<f64>() / n;
    let u: Vec<f64> = jackknife.iter().map(|t| (n - 1.0) * (mean - t)).collect();
    let num = u.iter().map(|v| v * v * v).sum::<f64>() / (n * n * n);
    let den = u.iter().map(|v| v * v).sum::<f64>() / (n * n);
    if den == 0.0 { 0.0 } else { num / 6.0 / den.powf(1.5) }
}

/// Type-7 quantiles `p ≤ q` of unsorted `values` (two selections, no full sort); `None` for no
/// values, a non-finite value or a non-finite `p`, `q`.
fn quantile_pair(values: &[f64], p: f64, q: f64) -> Option<Interval> {
    if values.is_empty() || !p.is_finite() || !q.is_finite() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut v = values.to_vec();
    Some(Interval { lo: select_quantile(&mut v, p), hi: select_quantile(&mut v, q) })
}

/// The type-7 `p`-quantile of `values` (reordered in place), equal to
/// [`quantile_sorted`] of the sorted values.
fn select_quantile(values: &mut [f64], p: f64) -> f64 {
    let n = values.len();
    let h = (n - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let (_, &mut below, above) = values.select_nth_unstable_by(lo, f64::total_cmp);
    let next = if lo + 1 < n { above.iter().copied().fold(f64::INFINITY, f64::min) } else { below };
    quantile_sorted(&[below, next], h - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn bca_on_a_five_point_sample_by_hand() {
        // x = [1, 2, 3, 4, 10], θ̂ = mean = 4. Four resamples given by hand:
        //   [0,0,1,1,2] → 9/5 = 1.8    [1,2,3,4,4] → 29/5 = 5.8
        //   [2,3,3,4,4] → 31/5 = 6.2   [0,1,2,3,3] → 14/5 = 2.8
        // Sorted replicates 1.8, 2.8, 5.8, 6.2.
        // ẑ₀ = Φ⁻¹((2 + 2) / 8) = Φ⁻¹(½) = 0 (two replicates below 4, none equal).
        // Jackknife means (leave one out): 19/4, 18/4, 17/4, 16/4, 10/4 = 4.75, 4.5, 4.25, 4, 2.5,
        // mean 4; U = 4·(4 − θ̂_(i)) = −3, −2, −1, 0, 6; ΣU³ = −27 − 8 − 1 + 216 = 180,
        // ΣU² = 9 + 4 + 1 + 36 = 50: â = (180/125) / (6 (50/25)^{3/2}) = 1.44 / (6 · 2√2)
        // = 0.0848528137423857.
        // Level 0.5: z_α = Φ⁻¹(0.25) = −0.674489750196082.
        //   α₁ = Φ(z/(1 − âz)) with z = −0.674489750196082: 1 − âz = 1.0572324 →
        //        z' = −0.6379768, α₁ = Φ(z') = 0.2617444;
        //   α₂ with z = +0.674489750196082: 1 − âz = 0.9427676 → z' = 0.7154358, α₂ = 0.7628301.
        // Quantiles (h = 3α): α₁ → h = 0.7852331 → 1.8 + 0.7852331·1.0 = 2.5852331;
        //                     α₂ → h = 2.2884903 → 5.8 + 0.2884903·0.4 = 5.9153961.
        let x = [1.0, 2.0, 3.0, 4.0, 10.0];
        let resamples: [[usize; 5]; 4] = [[0, 0, 1, 1, 2], [1, 2, 3, 4, 4], [2, 3, 3, 4, 4], [0, 1, 2, 3, 3]];
        let values: Vec<f64> = resamples.iter().map(|r| r.iter().map(|&i| x[i]).sum::<f64>() / 5.0).collect();
        let want = [1.8, 5.8, 6.2, 2.8];
        assert!(values.iter().zip(want).all(|(v, w)| close(*v, w, 1e-15)), "{values:?}");
        let jack: Vec<f64> = (0..5).map(|i| (20.0 - x[i]) / 4.0).collect();
        assert_eq!(jack, [4.75, 4.5, 4.25, 4.0, 2.5]);
        let a = acceleration(&jack);
        assert!(close(a, 1.44 / (12.0 * 2f64.sqrt()), 1e-15), "â = {a}");
        assert_eq!(bias_correction(4.0, &values), 0.0);
        let z = normal_quantile(0.25);
        let alpha1 = normal_cdf(z / (1.0 - a * z));
        let alpha2 = normal_cdf(-z / (1.0 + a * z));
        assert!(close(alpha1, 0.261_744_4, 1e-7) && close(alpha2, 0.762_830_1, 1e-7), "{alpha1} {alpha2}");
        let ci = bca_interval(4.0, &values, &jack, 0.5).unwrap();
        assert!(close(ci.lo, 1.8 + 3.0 * alpha1, 1e-14), "lo {}", ci.lo);
        assert!(close(ci.lo, 2.585_233_1, 1e-7));
        assert!(close(ci.hi, 5.8 + 0.4 * (3.0 * alpha2 - 2.0), 1e-14), "hi {}", ci.hi);
        assert!(close(ci.hi, 5.915_396_1, 1e-7));
        // Percentile at 0.5: h = 0.75 → 1.8 + 0.75 = 2.55; h = 2.25 → 5.8 + 0.25·0.4 = 5.9.
        let p = percentile_interval(&values, 0.5).unwrap();
        assert!(close(p.lo, 2.55, 1e-15) && close(p.hi, 5.9, 1e-15), "{p:?}");
    }

    #[test]
    fn closed_form_jackknife_equals_leaving_each_unit_out() {
        let sums = [3.0, -1.0, 4.0, 1.5];
        let sizes = [2.0, 1.0, 3.0, 1.0];
        let draws = Draws::new(4, 50, 9);
        let ratio = Replicates::of_ratio(&sums, &sizes, &draws);
        let generic = Replicates::of_statistic(&draws, |idx| {
            let num: f64 = idx.iter().map(|&i| sums[i as usize]).sum();
            let den: f64 = idx.iter().map(|&i| sizes[i as usize]).sum();
            Some(num / den)
        })
        .unwrap();
        assert!(close(ratio.estimate, 7.5 / 7.0, 1e-15));
        for (a, b) in
            ratio.values.iter().zip(&generic.values).chain(ratio.jackknife.iter().zip(&generic.jackknife))
        {
            assert!(close(*a, *b, 1e-14), "{a} vs {b}");
        }
    }

    #[test]
    fn several_statistics_share_resamples_and_fail_alone() {
        let x = [1.0, 4.0, 2.0, 8.0];
        let draws = Draws::new(4, 30, 5);
        let mean = |idx: &[u32]| idx.iter().map(|&i| x[i as usize]).sum::<f64>() / idx.len() as f64;
        let [m, never, max] = Replicates::of_statistics(&draws, |idx| {
            [Some(mean(idx)), None, Some(idx.iter().map(|&i| x[i as usize]).fold(f64::MIN, f64::max))]
        });
        assert_eq!(m.unwrap(), Replicates::of_mean(&x, &draws));
        assert!(never.is_none());
        let max = max.unwrap();
        assert_eq!((max.estimate, max.jackknife.as_slice()), (8.0, &[8.0, 8.0, 8.0, 4.0][..]));
    }

    #[test]
    fn statistic_runs_in_steps_equal_all_at_once() {
        let x = [1.0, 4.0, 2.0, 8.0, 5.0];
        let draws = Draws::new(5, 12, 3);
        let stat = |idx: &[u32]| [Some(idx.iter().map(|&i| x[i as usize]).sum::<f64>() / idx.len() as f64)];
        let mut runs = StatisticRuns::new(&draws);
        assert_eq!(runs.total(), 1 + 12 + 5);
        let mut steps = 0;
        while !runs.step(4, &stat) {
            steps += 1;
            assert_eq!(runs.done(), 4 * steps);
        }
        assert_eq!(steps, 4);
        let [stepped] = runs.finish();
        let stepped = stepped.unwrap();
        assert_eq!(stepped, Replicates::of_mean(&x, &draws));
        assert_eq!(stepped, Replicates::of_statistic(&draws, |idx| stat(idx)[0]).unwrap());
    }

    #[test]
    fn draws_are_one_seeded_stream_per_stratum() {
        let a = Draws::new(7, 3, 42);
        assert_eq!(a.resamples(), 3);
        assert!(a.iter().all(|r| r.len() == 7 && r.iter().all(|&i| i < 7)));
        // The stream is SplitMix64's `below`, resample by resample.
        let mut rng = SplitMix64::new(42);
        let first: Vec<u32> = (0..7).map(|_| rng.below(7) as u32).collect();
        assert_eq!(a.resample(0), first.as_slice());
        // A sampler advanced resample by resample gives the same indices as the whole draw.
        let mut s = UnitSampler::new(7, 42);
        let mut out = [0u32; 7];
        for b in 0..3 {
            s.draw(&mut out);
            assert_eq!(out.as_slice(), a.resample(b));
        }
        assert_ne!(stream_seed(1, "de/X"), stream_seed(1, "de/Y"));
        assert_eq!(stream_seed(0, ""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn round_off_ties_count_half() {
        // A permuted sample's mean may differ from the estimate in the last bit: still a tie.
        let x = [0.1, 0.7, 0.2, -0.3, 0.05, 0.9, 0.33];
        let estimate = x.iter().sum::<f64>() / 7.0;
        let permuted = [x[6], x[5], x[4], x[3], x[2], x[1], x[0]].iter().sum::<f64>() / 7.0;
        let nudged = if permuted == estimate { estimate + estimate * f64::EPSILON } else { permuted };
        assert_ne!(nudged, estimate);
        // One tie and one value above: (0 + 1) / 4 → Φ⁻¹(0.25).
        assert_eq!(bias_correction(estimate, &[nudged, 1.0]), normal_quantile(0.25));
        assert_eq!(bias_correction(estimate, &[estimate, 1.0]), normal_quantile(0.25));
    }

    #[test]
    fn degenerate_cases() {
        // One unit: every replicate is the estimate, the jackknife is empty, â = 0, ẑ₀ = 0.
        let r = Replicates::of_mean(&[0.3], &Draws::new(1, 20, 1));
        assert!(r.jackknife.is_empty());
        for m in [CiMethod::Percentile, CiMethod::Bca] {
            assert_eq!(r.interval(0.95, m), Some(Interval { lo: 0.3, hi: 0.3 }));
        }
        // Every replicate above the estimate: ẑ₀ = +∞, BCa undefined, percentile defined.
        let above = Replicates { estimate: 0.0, values: vec![1.0, 2.0], jackknife: vec![0.0, 1.0] };
        assert_eq!(above.interval(0.9, CiMethod::Bca), None);
        assert!(above.interval(0.9, CiMethod::Percentile).is_some());
        // An undefined resample leaves the interval undefined.
        assert!(Replicates::of_statistic(&Draws::new(3, 5, 2), |idx| (idx[0] != 0).then_some(1.0)).is_none());
        assert_eq!(CiSpec::new(1.5, 10, 0, CiMethod::Bca), Err(CiError::Level(1.5)));
        assert_eq!(CiSpec::new(0.95, 0, 0, CiMethod::Bca), Err(CiError::Resamples));
        assert!(check_level(0.0).is_err() && check_level(f64::NAN).is_err() && check_level(0.5).is_ok());
    }

    #[test]
    fn intervals_match_scipy_from_the_same_indices() {
        // scripts/fixtures/make_bootstrap.py: scipy.stats.bootstrap (percentile, BCa) on the
        // indices culturelens draws, exported with the intervals.
        let fixture: serde_json::Value =
            serde_json::from_str(&culturelens_testkit::read_fixture("bootstrap/scipy.json")).unwrap();
        let floats = |v: &serde_json::Value| -> Vec<f64> {
            v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
        };
        for case in fixture["intervals"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let data: Vec<Vec<f64>> = case["data"].as_array().unwrap().iter().map(floats).collect();
            let (resamples, seed) =
                (case["resamples"].as_u64().unwrap() as usize, case["seed"].as_u64().unwrap());
            let spec = CiSpec::new(0.95, resamples, seed, CiMethod::Bca).unwrap();
            let draws = spec.draws(data[0].len(), case["key"].as_str().unwrap());
            let want: Vec<Vec<u32>> = case["indices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as u32).collect())
                .collect();
            assert!(draws.iter().eq(want.iter().map(Vec::as_slice)), "{name}: indices");
            let replicates = match case["statistic"].as_str().unwrap() {
                "mean" => Replicates::of_mean(&data[0], &draws),
                "ratio" => Replicates::of_ratio(&data[0], &data[1], &draws),
                "median" => Replicates::of_statistic(&draws, |idx| {
                    Some(crate::stats::median(&idx.iter().map(|&i| data[0][i as usize]).collect::<Vec<_>>()))
                })
                .unwrap(),
                other => panic!("unknown statistic {other}"),
            };
            for ci in case["intervals"].as_array().unwrap() {
                let level = ci["level"].as_f64().unwrap();
                let method = match ci["method"].as_str().unwrap() {
                    "percentile" => CiMethod::Percentile,
                    _ => CiMethod::Bca,
                };
                let got = replicates.interval(level, method).unwrap();
                let (lo, hi) = (ci["lo"].as_f64().unwrap(), ci["hi"].as_f64().unwrap());
                assert!(
                    close(got.lo, lo, 1e-12) && close(got.hi, hi, 1e-12),
                    "{name} {level} {method:?}: {got:?} vs [{lo}, {hi}]"
                );
            }
        }
        for case in fixture["sign_flip"].as_array().unwrap() {
            let d = floats(&case["d"]);
            let t = crate::permutation::sign_flip_test(&d, 1 << 20, 0);
            let name = case["name"].as_str().unwrap();
            assert!(t.exact && t.patterns as u64 == case["patterns"].as_u64().unwrap(), "{name}");
            assert!(close(t.statistic, case["statistic"].as_f64().unwrap(), 1e-15), "{name}");
            assert!(close(t.p_value, case["pvalue"].as_f64().unwrap(), 1e-12), "{name}: {}", t.p_value);
        }
    }

    #[test]
    fn selection_equals_sorted_quantiles() {
        let mut rng = SplitMix64::new(5);
        for n in [1, 2, 3, 10, 999, 1000] {
            let v: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
            let sorted = crate::stats::sorted(&v);
            for p in [0.0, 0.025, 0.3, 0.5, 0.975, 1.0] {
                assert_eq!(select_quantile(&mut v.clone(), p), quantile_sorted(&sorted, p), "n {n} p {p}");
            }
        }
    }
}
