//! Bootstrap intervals of the Vendi scores (`culturelens vendi --ci`): the unit is an **item
//! within its group**, and every resample re-runs the whole Vendi computation on the resampled
//! collection (a collection's diversity is no mean over its items, so nothing short of that is the
//! statistic): `VS_q`, `qVS_q = mean(s) · VS_q` and `qVS_q / N` (CUBE Def. 5.1, Eq. 2–3), or the
//! means over the CUBE protocol's batches (§5.2) drawn from the resample.
//!
//! A resample repeats items. The kernel of a collection with item `i` taken `c_i` times has the
//! same non-zero eigenvalues as the weighted kernel of its distinct items,
//! `K̃_ab = √(c_a c_b) K_{u_a u_b}` (both are `Gᵀ G`-similar to `Fᵀ C F`, `C = diag(c)`), so a
//! resample is scored from the distinct items only: by that `n' × n'` kernel, or by the dual
//! `Fᵀ C F` (`d × d`) when the items have `d < n'` features. The spectrum is that of `K/N` with
//! `N` the resample's size, clipped with the size `max(N, d)` of the point estimate. The
//! protocol's batches are drawn over the resample's positions with the group's protocol seed and
//! scored from their `b × b` kernels (repeats included).
//!
//! The BCa acceleration re-runs the Vendi computation without each item (the jackknife), so BCa
//! costs `n` more Vendi computations than percentile intervals.

use culturelens_metrics::bootstrap::{CiSpec, Draws, Interval, Replicates};

use super::protocol::protocol_of_kernel;
use super::{
    Collection, Features, Order, ProductPrecision, ProtocolPlan, Route, VendiScore, clip_eigenvalues,
    host_product, kernel_submatrix, symmetric_eigenvalues,
};

/// The items of one group, as the bootstrap scores them.
#[derive(Debug, Clone, Copy)]
pub enum VendiItems<'a> {
    /// A feature map (cosine or categorical kernel): `K = F Fᵀ`.
    Features(&'a Features),
    /// A precomputed kernel matrix (row-major n × n, symmetric).
    Kernel { k: &'a [f64], n: usize },
}

impl VendiItems<'_> {
    fn n(&self) -> usize {
        match self {
            VendiItems::Features(f) => f.n,
            VendiItems::Kernel { n, .. } => *n,
        }
    }

    /// Features per item (0 for a precomputed kernel: only the kernel route exists).
    fn d(&self) -> usize {
        match self {
            VendiItems::Features(f) => f.d,
            VendiItems::Kernel { .. } => 0,
        }
    }

    /// `K_ij` of two items.
    fn k(&self, i: usize, j: usize) -> f64 {
        match self {
            VendiItems::Features(f) => f.data[i * f.d..(i + 1) * f.d]
                .iter()
                .zip(&f.data[j * f.d..(j + 1) * f.d])
                .map(|(a, b)| a * b)
                .sum(),
            VendiItems::Kernel { k, n } => k[i * n + j],
        }
    }
}

/// `vendi --ci`'s intervals of one group (`name`; `""` for the whole collection): `[VS_q, qVS_q,
/// qVS_q / N]` of its items resampled with replacement from the stream of `bootstrap` and `name`,
/// each resample scored as [`VendiStatistic`] (the CUBE protocol's batches with `protocol`); a
/// precomputed kernel's products always in f32 (as its point estimate).
pub fn group_intervals(
    group: &Collection,
    quality: Option<&[f64]>,
    q: Order,
    protocol: Option<ProtocolPlan>,
    precision: ProductPrecision,
    spec: &CiSpec,
    name: &str,
) -> [Option<Interval>; 3] {
    let features = group.features();
    let (items, precision) = match (group, &features) {
        (Collection::Kernel { k, n }, _) => (VendiItems::Kernel { k, n: *n }, ProductPrecision::F32),
        (_, Some(f)) => (VendiItems::Features(f), precision),
        (_, None) => unreachable!("only a precomputed kernel has no feature map"),
    };
    let stat = VendiStatistic { items, quality, q, protocol, precision };
    let draws = vendi_draws(spec, group.n(), name);
    stat.replicates(&draws).map(|r| r.interval(spec.level, spec.method))
}

/// What is computed per collection: the protocol (with its plan) or the whole collection.
#[derive(Debug, Clone, Copy)]
pub struct VendiStatistic<'a> {
    pub items: VendiItems<'a>,
    pub quality: Option<&'a [f64]>,
    pub q: Order,
    pub protocol: Option<ProtocolPlan>,
    pub precision: ProductPrecision,
}

impl VendiStatistic<'_> {
    /// `[VS_q, qVS_q, qVS_q / N]` of the collection `items` (indices into the group, repeats
    /// allowed), scored as the Vendi computation of that collection would score it.
    pub fn score(&self, items: &[u32]) -> [f64; 3] {
        let m = items.len();
        let quality: Option<Vec<f64>> = self.quality.map(|s| items.iter().map(|&i| s[i as usize]).collect());
        if let Some(plan) = self.protocol {
            let rows: Vec<usize> = items.iter().map(|&i| i as usize).collect();
            let k = match self.items {
                VendiItems::Kernel { k, n } => kernel_submatrix(k, n, &rows),
                VendiItems::Features(_) => rows
                    .iter()
                    .flat_map(|&i| rows.iter().map(move |&j| (i, j)))
                    .map(|(i, j)| self.items.k(i, j))
                    .collect(),
            };
            let p =
                protocol_of_kernel(&k, m, self.items.d(), quality.as_deref(), self.q, plan, self.precision);
            return [p.vs.mean, p.qvs.mean, p.qvs_norm.mean];
        }
        let spectrum = self.spectrum(items);
        let VendiScore { vs, qvs, qvs_norm, .. } =
            VendiScore::from_spectrum(&spectrum, m, self.q, quality.as_deref());
        [vs, qvs, qvs_norm]
    }

    /// Clipped eigenvalues of `K/N` for the collection `items`, from its distinct items weighted
    /// by their counts (module doc).
    fn spectrum(&self, items: &[u32]) -> Vec<f64> {
        let m = items.len();
        let mut distinct: Vec<u32> = items.to_vec();
        distinct.sort_unstable();
        let mut counts: Vec<(usize, f64)> = Vec::new();
        for &i in &distinct {
            match counts.last_mut() {
                Some((last, c)) if *last == i as usize => *c += 1.0,
                _ => counts.push((i as usize, 1.0)),
            }
        }
        let (u, d) = (counts.len(), self.items.d());
        let eig = match self.items {
            VendiItems::Features(f) if d < u => {
                // Fᵀ C F from the distinct rows scaled by √c.
                let mut data = Vec::with_capacity(u * d);
                for &(i, c) in &counts {
                    data.extend(f.data[i * d..(i + 1) * d].iter().map(|v| v * c.sqrt()));
                }
                let product = host_product(&Features { n: u, d, data }, Route::Dual);
                let m_: Vec<f64> = product.try_into_vec_as::<f64>().expect("the product holds floats");
                symmetric_eigenvalues(&m_, d)
            }
            _ => {
                // The weighted kernel's lower triangle (the solver reads no more).
                let mut k = vec![0.0; u * u];
                for (a, &(i, ci)) in counts.iter().enumerate() {
                    for (b, &(j, cj)) in counts.iter().enumerate().take(a + 1) {
                        k[a * u + b] = (ci * cj).sqrt() * self.items.k(i, j);
                    }
                }
                symmetric_eigenvalues(&k, u)
            }
        };
        let eig: Vec<f64> = eig.into_iter().map(|l| l / m as f64).collect();
        clip_eigenvalues(&eig, m.max(d), self.precision.epsilon())
    }

    /// The replicates of `[VS_q, qVS_q, qVS_q / N]` over `draws` of the group's items.
    pub fn replicates(&self, draws: &Draws) -> [Replicates; 3] {
        assert_eq!(draws.units(), self.items.n(), "the draws resample this group's items");
        Replicates::of_statistics(draws, |idx| self.statistics(idx)).map(defined)
    }

    /// [`VendiStatistic::score`] as the bootstrap's statistics (`StatisticRuns::step`, for a
    /// caller that runs the replicates a few at a time).
    pub fn statistics(&self, items: &[u32]) -> [Option<f64>; 3] {
        self.score(items).map(Some)
    }
}

/// The replicates of a Vendi score, defined on every non-empty collection.
pub fn defined(replicates: Option<Replicates>) -> Replicates {
    replicates.expect("a Vendi score is defined on every non-empty collection")
}

/// The draws of `vendi --ci` for the `n` items of one group (`group`: its value, `""` for the
/// whole collection): a stream of its own per group, so a group's interval does not change when
/// other groups are added or removed.
pub fn vendi_draws(spec: &CiSpec, n: usize, group: &str) -> Draws {
    spec.draws(n, &format!("bootstrap\u{1f}{group}"))
}
