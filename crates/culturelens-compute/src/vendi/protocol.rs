//! The CUBE protocol (§5.2, App. J): per group, `repeats` seeded batches of `batch` items (8 in the
//! paper, matching the images an API returns per prompt), each scored, then mean ± sd; and the
//! intdiv companion `1 − mean off-diagonal similarity`.
//!
//! §5.2 scores batches of 8 images averaged over 50 repetitions; App. J also describes scoring
//! all 400 images of a prompt at once. Both readings are available: the protocol here, and the
//! plain score of the whole group ([`super::spectrum`]).

use burn::tensor::{Device, Tensor, TensorData};
use serde::Serialize;

use super::{
    Features, Order, ProductPrecision, VendiScore, clip_eigenvalues, kernel_submatrix, symmetric_eigenvalues,
};
use culturelens_rng::SplitMix64;

/// Mean and standard deviation (population, ddof = 0, as `numpy.std`) of repeated scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanSd {
    pub mean: f64,
    pub sd: f64,
}

impl MeanSd {
    pub fn of(values: &[f64]) -> MeanSd {
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / values.len() as f64;
        MeanSd { mean, sd: var.sqrt() }
    }
}

/// The protocol's result for one group: `VS_q`, `qVS_q`, `qVS_q / b` and intdiv over the batches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProtocolScore {
    /// Items per batch: `min(batch, group size)`.
    pub batch: usize,
    pub repeats: usize,
    pub vs: MeanSd,
    pub qvs: MeanSd,
    pub qvs_norm: MeanSd,
    /// `None` when a batch has a single item (no pairs).
    pub intdiv: Option<MeanSd>,
}

/// How the protocol draws its batches: `repeats` seeded draws of `batch` items (the paper: 8 and
/// 50).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolPlan {
    pub batch: usize,
    pub repeats: usize,
    pub seed: u64,
}

/// The batches of the protocol: `repeats` draws of `min(batch, n)` distinct items out of `0..n`,
/// each the head of a fresh Fisher–Yates shuffle (SplitMix64 seeded with `seed`), so a group no
/// larger than `batch` is scored whole every time.
pub fn protocol_batches(n: usize, plan: ProtocolPlan) -> Vec<Vec<usize>> {
    let ProtocolPlan { batch, repeats, seed } = plan;
    assert!(n > 0 && batch > 0 && repeats > 0, "the protocol needs items, a batch size and repetitions");
    let b = batch.min(n).max(1);
    let mut rng = SplitMix64::new(seed);
    let mut all: Vec<usize> = (0..n).collect();
    (0..repeats)
        .map(|_| {
            rng.shuffle(&mut all);
            all[..b].to_vec()
        })
        .collect()
}

/// Runs the protocol on `features` (one group's rows) with per-row `quality`, seeded. The batch
/// kernels are one batched product on `device`, read back once.
pub fn protocol(
    features: &Features,
    quality: Option<&[f64]>,
    q: Order,
    plan: ProtocolPlan,
    precision: ProductPrecision,
    device: &Device,
) -> ProtocolScore {
    let picks = protocol_batches(features.n, plan);
    let repeats = picks.len();
    let b = picks[0].len();
    let d = features.d;
    let gathered = features.select_rows(&picks.concat()).data;
    let f = Tensor::<3>::from_data(TensorData::new(gathered, [repeats, b, d]), (device, precision.dtype()));
    let kernels = f.clone().matmul(f.swap_dims(1, 2)).into_data();
    let k: Vec<f64> = kernels.try_into_vec_as::<f64>().expect("the kernel product holds floats");
    summarise(&picks, |r| k[r * b * b..(r + 1) * b * b].to_vec(), b.max(d), precision, quality, q)
}

/// Runs the protocol on a validated precomputed kernel `k` (row-major n × n, see
/// [`super::precomputed_spectrum`]), seeded.
pub fn protocol_precomputed(
    k: &[f64],
    n: usize,
    quality: Option<&[f64]>,
    q: Order,
    plan: ProtocolPlan,
    precision: ProductPrecision,
) -> ProtocolScore {
    protocol_of_kernel(k, n, 0, quality, q, plan, precision)
}

/// [`protocol_precomputed`] of the kernel of items with `d` features (0 for a precomputed
/// kernel): the batch spectra are clipped with size `max(batch, d)`, as [`protocol`] clips them.
pub(super) fn protocol_of_kernel(
    k: &[f64],
    n: usize,
    d: usize,
    quality: Option<&[f64]>,
    q: Order,
    plan: ProtocolPlan,
    precision: ProductPrecision,
) -> ProtocolScore {
    assert_eq!(k.len(), n * n, "the kernel matrix must be n × n");
    let picks = protocol_batches(n, plan);
    let b = picks[0].len();
    summarise(&picks, |r| kernel_submatrix(k, n, &picks[r]), b.max(d), precision, quality, q)
}

/// Scores every batch from its `b × b` kernel block (unscaled) and aggregates.
fn summarise(
    picks: &[Vec<usize>],
    block: impl Fn(usize) -> Vec<f64>,
    clip_size: usize,
    precision: ProductPrecision,
    quality: Option<&[f64]>,
    q: Order,
) -> ProtocolScore {
    let b = picks[0].len();
    let (mut vs, mut qvs, mut qvs_norm, mut div) = (vec![], vec![], vec![], vec![]);
    for (r, pick) in picks.iter().enumerate() {
        let kernel = block(r);
        let eig: Vec<f64> = symmetric_eigenvalues(&kernel, b).into_iter().map(|l| l / b as f64).collect();
        let eig = clip_eigenvalues(&eig, clip_size, precision.epsilon());
        let qual: Option<Vec<f64>> = quality.map(|s| pick.iter().map(|&i| s[i]).collect());
        let score = VendiScore::from_spectrum(&eig, b, q, qual.as_deref());
        vs.push(score.vs);
        qvs.push(score.qvs);
        qvs_norm.push(score.qvs_norm);
        div.extend(intdiv_of_kernel(&kernel, b));
    }
    ProtocolScore {
        batch: b,
        repeats: picks.len(),
        vs: MeanSd::of(&vs),
        qvs: MeanSd::of(&qvs),
        qvs_norm: MeanSd::of(&qvs_norm),
        intdiv: (!div.is_empty()).then(|| MeanSd::of(&div)),
    }
}

/// `intdiv = 1 − mean_{i≠j} k(x_i, x_j)` from the features in O(N·D), using
/// `Σ_{ij} k(x_i, x_j) = ‖Σ_i f_i‖²`; `None` for fewer than two items.
pub fn intdiv(features: &Features) -> Option<f64> {
    let n = features.n;
    if n < 2 {
        return None;
    }
    let mut sum = vec![0.0; features.d];
    let mut diag = 0.0;
    for row in features.data.chunks_exact(features.d) {
        assert_eq!(sum.len(), row.len());
        for (s, v) in sum.iter_mut().zip(row) {
            *s += v;
        }
        diag += row.iter().map(|v| v * v).sum::<f64>();
    }
    let total: f64 = sum.iter().map(|v| v * v).sum();
    Some(1.0 - (total - diag) / (n * (n - 1)) as f64)
}

/// `intdiv = 1 − mean_{i≠j} K_ij` of a kernel matrix (row-major n × n); `None` for n < 2.
pub fn intdiv_of_kernel(k: &[f64], n: usize) -> Option<f64> {
    if n < 2 {
        return None;
    }
    let trace: f64 = (0..n).map(|i| k[i * n + i]).sum();
    Some(1.0 - (k.iter().sum::<f64>() - trace) / (n * (n - 1)) as f64)
}
