//! Vendi scores (CUBE paper §5.1, Def. 5.1), quality-weighted and normalised Vendi (Eq. 2–3), the
//! CUBE kernels (Eq. 4) and the CUBE protocol (§5.2, App. J: batches of 8, repeated, mean ± sd).
//!
//! Every kernel culturelens builds is linear in a feature map, `K = F Fᵀ`:
//! - cosine on embeddings: `F` = rows L2-normalised;
//! - categorical (Eq. 4): `k = w₁[same continent] + w₂[same country] + w₃[same artifact]`, i.e.
//!   `F` = one-hot columns scaled by `√w_c` (weights ≥ 0 summing to 1, so `k(x, x) = 1`).
//!
//! so the eigenvalues of `K/N` can come from either route (same non-zero spectrum):
//! - **kernel route**: eigenvalues of `F Fᵀ / N` (N × N);
//! - **dual route**: eigenvalues of `Fᵀ F / N` (D × D), D = embedding dimension or number of
//!   one-hot columns.
//!
//! [`Route::Auto`] takes the smaller matrix. The product runs on the Burn device. With
//! [`Precision::F64`] (CPU) it is accumulated in f64. With [`Precision::F32`] (backends without
//! f64, e.g. WebGPU) it is accumulated in f32, and the eigen-tolerance uses f32's epsilon. The
//! eigenvalues are then computed in f64 on the host with faer. A precomputed kernel matrix is
//! validated (symmetric, unit diagonal, PSD) and goes straight to the eigensolver.
//!
//! Differences from the `vendi-score` Python package (0.0.3, checked by the parity fixtures of
//! `scripts/fixtures/vendi_parity.py`): its `score_X` always computes the Shannon (q = 1) score and
//! ignores `q`, while here every route honours `q` (its `score_dual` does too). Its `score_K`
//! returns NaN for `q = inf`; here `q = ∞` is the limit `1 / max λ̄`. It keeps every eigenvalue
//! `> 0`, without a tolerance; here round-off eigenvalues below a relative tolerance are zeroed
//! first (see [`score`]), which only changes `q = 0` (the rank instead of a count of round-off).

mod score;

pub use score::{Order, clip_eigenvalues, quality_weighted, symmetric_eigenvalues, vendi_from_eigenvalues};

use burn::tensor::{DType, Device, Tensor, TensorData};
use serde::Serialize;

use crate::rng::SplitMix64;

/// Which eigenproblem gives the spectrum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The smaller of N × N and D × D.
    Auto,
    /// Eigenvalues of `F Fᵀ / N`.
    Kernel,
    /// Eigenvalues of `Fᵀ F / N`.
    Dual,
}

impl Route {
    /// The concrete route for `n` items with `d` features.
    pub fn resolve(self, n: usize, d: usize) -> Route {
        match self {
            Route::Auto if d < n => Route::Dual,
            Route::Auto => Route::Kernel,
            r => r,
        }
    }
}

/// Precision of the kernel product on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F64,
    F32,
}

impl Precision {
    fn epsilon(self) -> f64 {
        match self {
            Precision::F64 => f64::EPSILON,
            Precision::F32 => f64::from(f32::EPSILON),
        }
    }

    fn dtype(self) -> DType {
        match self {
            Precision::F64 => DType::F64,
            Precision::F32 => DType::F32,
        }
    }
}

/// An N × D feature matrix whose linear kernel `F Fᵀ` is the similarity (row-major, f64).
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    pub n: usize,
    pub d: usize,
    pub data: Vec<f64>,
}

/// Invalid input to a Vendi computation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VendiError {
    #[error("row {row}: zero-norm embedding has no direction (cosine kernel undefined)")]
    ZeroNorm { row: usize },
    #[error("row {row}, column {column}: empty category")]
    EmptyCategory { row: usize, column: String },
    #[error("kernel weights must be >= 0 and sum to 1 (so that k(x, x) = 1), got {weights:?}")]
    Weights { weights: Vec<f64> },
    #[error("kernel matrix entry ({row}, {col}) = {value} but k(x, x) must be 1")]
    Diagonal { row: usize, col: usize, value: f64 },
    #[error("kernel matrix is not symmetric: K[{row}][{col}] = {a} but K[{col}][{row}] = {b}")]
    Asymmetric { row: usize, col: usize, a: f64, b: f64 },
    #[error("kernel matrix is not positive semi-definite: smallest eigenvalue {min} (tolerance {tol})")]
    NotPsd { min: f64, tol: f64 },
    #[error("a Vendi score needs at least one item")]
    Empty,
}

/// Cosine-kernel features: rows of `x` (row-major n × d) L2-normalised, in f64.
pub fn cosine_features(x: &[f32], n: usize, d: usize) -> Result<Features, VendiError> {
    assert_eq!(x.len(), n * d);
    let mut data = Vec::with_capacity(n * d);
    for (row, v) in x.chunks(d.max(1)).enumerate() {
        let norm = v.iter().map(|a| f64::from(*a) * f64::from(*a)).sum::<f64>().sqrt();
        if norm == 0.0 {
            return Err(VendiError::ZeroNorm { row });
        }
        data.extend(v.iter().map(|a| f64::from(*a) / norm));
    }
    Ok(Features { n, d, data })
}

/// Categorical CUBE kernel features (Eq. 4): for each column `c`, one-hot indicators scaled by
/// `√w_c`, so `F Fᵀ = Σ_c w_c [x_c = y_c]`. Weights must be ≥ 0 and sum to 1 (±1e-9).
pub fn categorical_features(columns: &[(&str, &[String])], weights: &[f64]) -> Result<Features, VendiError> {
    assert_eq!(columns.len(), weights.len(), "one weight per column");
    if weights.iter().any(|w| *w < 0.0 || !w.is_finite()) || (weights.iter().sum::<f64>() - 1.0).abs() > 1e-9
    {
        return Err(VendiError::Weights { weights: weights.to_vec() });
    }
    let n = columns.first().map_or(0, |(_, v)| v.len());
    let mut blocks: Vec<(Vec<usize>, usize, f64)> = Vec::new();
    for ((name, values), w) in columns.iter().zip(weights) {
        let mut ids = std::collections::HashMap::new();
        let mut codes = Vec::with_capacity(n);
        for (row, v) in values.iter().enumerate() {
            if v.trim().is_empty() {
                return Err(VendiError::EmptyCategory { row, column: name.to_string() });
            }
            let next = ids.len();
            codes.push(*ids.entry(v.as_str()).or_insert(next));
        }
        blocks.push((codes, ids.len(), w.sqrt()));
    }
    let d: usize = blocks.iter().map(|b| b.1).sum();
    let mut data = vec![0.0; n * d];
    let mut offset = 0;
    for (codes, width, scale) in &blocks {
        for (row, c) in codes.iter().enumerate() {
            data[row * d + offset + c] = *scale;
        }
        offset += width;
    }
    Ok(Features { n, d, data })
}

/// The kernel (N × N, route Kernel) or covariance (D × D, route Dual) product of `features` on
/// `device`, unscaled. Read it back (sync or async) and pass it to [`spectrum_from_product`].
pub fn product_tensor(features: &Features, route: Route, precision: Precision, device: &Device) -> Tensor<2> {
    let f = Tensor::<2>::from_data(
        TensorData::new(features.data.clone(), [features.n, features.d]),
        (device, precision.dtype()),
    );
    match route.resolve(features.n, features.d) {
        Route::Dual => f.clone().transpose().matmul(f),
        _ => f.clone().matmul(f.transpose()),
    }
}

/// Clipped eigenvalues of `K/N` from a read-back of [`product_tensor`].
pub fn spectrum_from_product(product: TensorData, features: &Features, precision: Precision) -> Vec<f64> {
    let size = product.shape()[0];
    let m: Vec<f64> = product.try_into_vec_as::<f64>().expect("kernel product holds floats");
    let scaled: Vec<f64> = m.iter().map(|v| v / features.n as f64).collect();
    let eig = symmetric_eigenvalues(&scaled, size);
    clip_eigenvalues(&eig, features.n.max(features.d), precision.epsilon())
}

/// Clipped eigenvalues of `K/N` computed on `device` (synchronous read-back).
pub fn spectrum(features: &Features, route: Route, precision: Precision, device: &Device) -> Vec<f64> {
    let data = product_tensor(features, route, precision, device).into_data();
    spectrum_from_product(data, features, precision)
}

/// Validates a precomputed kernel matrix (row-major n × n): symmetric and unit diagonal to 1e-6,
/// PSD up to `−1e-6 · n`; returns the clipped eigenvalues of `K/N`.
pub fn precomputed_spectrum(k: &[f64], n: usize) -> Result<Vec<f64>, VendiError> {
    if n == 0 {
        return Err(VendiError::Empty);
    }
    for i in 0..n {
        let v = k[i * n + i];
        if (v - 1.0).abs() > 1e-6 {
            return Err(VendiError::Diagonal { row: i, col: i, value: v });
        }
        for j in 0..i {
            let (a, b) = (k[i * n + j], k[j * n + i]);
            if (a - b).abs() > 1e-6 {
                return Err(VendiError::Asymmetric { row: i, col: j, a, b });
            }
        }
    }
    let eig: Vec<f64> = symmetric_eigenvalues(k, n).iter().map(|l| l / n as f64).collect();
    let min = eig.iter().copied().fold(f64::INFINITY, f64::min);
    let tol = 1e-6;
    if min < -tol {
        return Err(VendiError::NotPsd { min, tol });
    }
    Ok(clip_eigenvalues(&eig, n, f64::EPSILON))
}

/// The CUBE diversity numbers of one collection: `VS_q`, `qVS_q` (Eq. 2), `qVS_q / N` (Eq. 3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VendiScore {
    pub n: usize,
    #[serde(serialize_with = "serialize_order")]
    pub q: Order,
    pub vs: f64,
    pub qvs: f64,
    pub qvs_norm: f64,
}

fn serialize_order<S: serde::Serializer>(q: &Order, s: S) -> Result<S::Ok, S::Error> {
    match q {
        Order::Finite(v) => s.serialize_f64(*v),
        Order::Infinity => s.serialize_str("inf"),
    }
}

impl VendiScore {
    /// Scores a clipped spectrum of `K/N` with per-item `quality` (uniform 1 when `None`).
    pub fn from_spectrum(spectrum: &[f64], n: usize, q: Order, quality: Option<&[f64]>) -> VendiScore {
        let vs = vendi_from_eigenvalues(spectrum, q);
        let ones = vec![1.0; n];
        let (qvs, qvs_norm) = quality_weighted(vs, quality.unwrap_or(&ones));
        VendiScore { n, q, vs, qvs, qvs_norm }
    }
}

/// `intdiv = 1 − mean_{i≠j} k(x_i, x_j)`, the mean off-diagonal similarity's complement (the
/// internal-diversity companion of App. J), from the features in O(N·D): `Σ_{ij} k = ‖Σ_i f_i‖²`.
pub fn intdiv(features: &Features) -> Option<f64> {
    let n = features.n;
    if n < 2 {
        return None;
    }
    let mut sum = vec![0.0; features.d];
    let mut diag = 0.0;
    for row in features.data.chunks(features.d.max(1)) {
        for (s, v) in sum.iter_mut().zip(row) {
            *s += v;
        }
        diag += row.iter().map(|v| v * v).sum::<f64>();
    }
    let total: f64 = sum.iter().map(|v| v * v).sum();
    Some(1.0 - (total - diag) / (n * (n - 1)) as f64)
}

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

/// The CUBE protocol for one group (§5.2, App. J): `repeats` batches of `batch` items drawn
/// without replacement (all items when the group has at most `batch`), each scored, then
/// mean ± sd. The batch kernels are one batched product on the device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProtocolScore {
    pub batch: usize,
    pub repeats: usize,
    pub vs: MeanSd,
    pub qvs: MeanSd,
    pub qvs_norm: MeanSd,
}

/// Runs the protocol on `features` (the group's rows) with per-row `quality`, seeded.
#[allow(clippy::too_many_arguments)]
pub fn protocol(
    features: &Features,
    quality: Option<&[f64]>,
    q: Order,
    batch: usize,
    repeats: usize,
    seed: u64,
    precision: Precision,
    device: &Device,
) -> ProtocolScore {
    let b = batch.min(features.n).max(1);
    let mut rng = SplitMix64::new(seed);
    let mut all: Vec<usize> = (0..features.n).collect();
    let picks: Vec<Vec<usize>> = (0..repeats)
        .map(|_| {
            rng.shuffle(&mut all);
            all[..b].to_vec()
        })
        .collect();
    let d = features.d;
    let gathered: Vec<f64> =
        picks.iter().flatten().flat_map(|&i| features.data[i * d..(i + 1) * d].iter().copied()).collect();
    let f = Tensor::<3>::from_data(TensorData::new(gathered, [repeats, b, d]), (device, precision.dtype()));
    let kernels = f.clone().matmul(f.swap_dims(1, 2)).into_data();
    let k: Vec<f64> = kernels.try_into_vec_as::<f64>().expect("kernel product holds floats");
    let (mut vs, mut qvs, mut qvs_norm) = (vec![], vec![], vec![]);
    for (r, pick) in picks.iter().enumerate() {
        let block: Vec<f64> = k[r * b * b..(r + 1) * b * b].iter().map(|v| v / b as f64).collect();
        let eig = clip_eigenvalues(&symmetric_eigenvalues(&block, b), b.max(d), precision.epsilon());
        let qual: Option<Vec<f64>> = quality.map(|s| pick.iter().map(|&i| s[i]).collect());
        let score = VendiScore::from_spectrum(&eig, b, q, qual.as_deref());
        vs.push(score.vs);
        qvs.push(score.qvs);
        qvs_norm.push(score.qvs_norm);
    }
    ProtocolScore {
        batch: b,
        repeats,
        vs: MeanSd::of(&vs),
        qvs: MeanSd::of(&qvs),
        qvs_norm: MeanSd::of(&qvs_norm),
    }
}

#[cfg(test)]
mod tests;
