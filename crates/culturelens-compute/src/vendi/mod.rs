//! Vendi scores (CUBE paper §5.1, Def. 5.1), quality-weighted and normalised Vendi (Eq. 2–3), the
//! CUBE kernels (Eq. 4) and the CUBE protocol (§5.2, App. J: batches of 8, repeated, mean ± sd).
//!
//! # Conventions
//! - `VS_q` is computed from the eigenvalues of `K/N` (N items, `K` the kernel matrix with
//!   `k(x, x) = 1`), normalised to sum to 1; the order is any `q ≥ 0` or `q = ∞` ([`Order`]).
//!   `q = 0` is the numerical rank, `q = 1` the Shannon limit `exp(−Σ λ̄ ln λ̄)` with
//!   `0 · ln 0 = 0`, `q = ∞` is `1 / max λ̄`, any other `q` is `(Σ λ̄^q)^{1/(1−q)}`.
//! - Round-off eigenvalues `λ ≤ max(N, D) · ε · λ_max` (and negative ones) are set to 0 first,
//!   `ε` being the machine epsilon of the precision the kernel was accumulated in
//!   ([`clip_eigenvalues`]); so `q = 0` is the numerical rank and `q = ∞` is stable.
//! - `qVS_q = mean(s) · VS_q` (Eq. 2) and `qVS_q / N` (Eq. 3) with per-item quality `s`
//!   (e.g. HPS-v2 scores computed elsewhere), or `s = 1` for every item.
//!
//! # Kernels and routes
//! Every kernel culturelens builds is linear in a feature map, `K = F Fᵀ`:
//! - cosine on embeddings: `F` = rows L2-normalised ([`cosine_features`]);
//! - categorical (Eq. 4): `k = w₁[same continent] + w₂[same country] + w₃[same artifact]`, i.e.
//!   `F` = one-hot columns scaled by `√w_c` (weights ≥ 0 summing to 1, so `k(x, x) = 1`)
//!   ([`categorical_features`]);
//!
//! so the eigenvalues of `K/N` can come from either route (same non-zero spectrum):
//! - **kernel route**: eigenvalues of `F Fᵀ / N` (N × N);
//! - **dual route**: eigenvalues of `Fᵀ F / N` (D × D), D = embedding dimension or number of
//!   one-hot columns.
//!
//! [`Route::Auto`] takes the smaller matrix. A precomputed kernel matrix is validated (finite,
//! symmetric, unit diagonal, PSD) and goes straight to the eigensolver ([`precomputed_spectrum`]).
//!
//! # Devices and precision
//! The product (`F Fᵀ` or `Fᵀ F`) runs on the Burn device ([`product_tensor`]); only its lower
//! block triangle is computed, which halves the work. On the native CPU the CLI computes it on
//! the host instead ([`host_product`]: faer's f64 triangular GEMM, the lower triangle only),
//! which is faster than the CPU backend's f64 GEMM and gives the same values to round-off. [`ProductPrecision::for_device`] is the rule: on a
//! device that computes in f64 (CPU, CUDA, wgpu adapters with `SHADER_F64`) it is accumulated in
//! f64 ([`ProductPrecision::F64`]). WebGPU in the browser has no f64: with [`ProductPrecision::F32`] the product
//! is accumulated in f32 and the clipping tolerance uses f32's epsilon, so scores agree with the
//! f64 ones to about 1e-6 rather than 1e-12. The eigenvalues are always computed in f64 on the host
//! ([`symmetric_eigenvalues`]): from order 512 on by a two-stage reduction of our own (`eigen.rs`:
//! full → band on faer's GEMM, bulge chasing, root-free QL), below it by faer's one-stage
//! self-adjoint eigensolver (both multi-threaded with the crate feature `rayon`). The one
//! read-back sits between [`product_tensor`] and [`spectrum_from_product`], so the browser can
//! await `into_data_async` there; [`spectrum`] does both synchronously.
//!
//! # Intervals
//! `vendi --ci` resamples the items of a group and re-runs the whole computation per resample
//! (`bootstrap.rs`: [`VendiStatistic`], a resample's spectrum from its distinct items weighted by
//! their counts).
//!
//! # Differences from the `vendi-score` package
//! Checked by the parity fixtures of `scripts/fixtures/make_vendi.py` (vendi-score 0.0.3):
//! - its `score_X` (kernel route on embeddings) ignores `q` and always returns the Shannon
//!   (`q = 1`) score, while its `score_dual` and `score_K` honour `q`. Here every route honours
//!   `q`: Def. 5.1 defines `VS_q` for every order and the two routes have the same non-zero
//!   spectrum, so which matrix is diagonalised must not change the answer;
//! - its `score_K` returns NaN for `q = inf` (it evaluates `log Σ p^q / (1 − q)`); here `q = ∞`
//!   is the limit `1 / max λ̄`, which is the value its README quotes (1.57895);
//! - it keeps every eigenvalue `> 0` without a tolerance, so its `q = 0` counts round-off and
//!   its `q < 1` scores of rank-deficient kernels include round-off terms (about 1e-8 relative);
//!   here those eigenvalues are zeroed first, so `q = 0` is the rank and every route agrees.

mod bootstrap;
mod collection;
mod eigen;
mod gram;
mod product;
mod protocol;
mod score;

pub use bootstrap::{VendiItems, VendiStatistic, defined, group_intervals, vendi_draws};
pub use collection::{Collection, point_scores};
pub use gram::HOST_BLOCK_ROWS;
pub use product::{
    KERNEL_ENTRY_TOLERANCE, PRODUCT_BLOCK, host_dual_product, host_product, kernel_submatrix,
    precomputed_spectrum, product_tensor, spectrum, spectrum_from_product, spectrum_of_product,
};
pub use protocol::{
    MeanSd, ProtocolPlan, ProtocolScore, intdiv, intdiv_of_kernel, protocol, protocol_batches,
    protocol_precomputed,
};
pub use score::{
    Order, clip_eigenvalues, clip_tolerance, quality_weighted, symmetric_eigenvalues, vendi_from_eigenvalues,
};

use crate::device::HostRows;
use burn::tensor::{DType, Device};
use serde::Serialize;

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

/// ProductPrecision of the kernel product on the device (and of a precomputed kernel's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProductPrecision {
    F64,
    /// For backends without f64 (WebGPU) and kernels stored as f32.
    F32,
}

impl ProductPrecision {
    /// The precision rule, one per device: the product is accumulated in f64 where the device
    /// computes in f64 (the CPU backend, CUDA, wgpu adapters with `SHADER_F64`) and in f32 where
    /// it cannot (WebGPU in the browser, other wgpu adapters). The CLI and the browser both take
    /// it from here.
    pub fn for_device(device: &Device) -> ProductPrecision {
        if device.supports_dtype(DType::F64) { ProductPrecision::F64 } else { ProductPrecision::F32 }
    }

    /// The machine epsilon that scales the clipping tolerance.
    pub fn epsilon(self) -> f64 {
        match self {
            ProductPrecision::F64 => f64::EPSILON,
            ProductPrecision::F32 => f64::from(f32::EPSILON),
        }
    }

    fn dtype(self) -> DType {
        match self {
            ProductPrecision::F64 => DType::F64,
            ProductPrecision::F32 => DType::F32,
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

impl Features {
    /// The features of the items `rows` (in that order).
    pub fn select_rows(&self, rows: &[usize]) -> Features {
        let data =
            rows.iter().flat_map(|&i| self.data[i * self.d..(i + 1) * self.d].iter().copied()).collect();
        Features { n: rows.len(), d: self.d, data }
    }
}

/// Invalid input to a Vendi computation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VendiError {
    #[error("row {row}: zero-norm embedding has no direction (cosine kernel undefined)")]
    ZeroNorm { row: usize },
    #[error("row {row}, column {col}: non-finite value {value}")]
    NonFinite { row: usize, col: usize, value: f64 },
    #[error("row {row}, column {column}: empty category")]
    EmptyCategory { row: usize, column: String },
    #[error("kernel weights must be >= 0 and sum to 1 (so that k(x, x) = 1), got {weights:?}")]
    Weights { weights: Vec<f64> },
    #[error("kernel matrix entry ({row}, {col}) = {value} but k(x, x) must be 1")]
    Diagonal { row: usize, col: usize, value: f64 },
    #[error("kernel matrix is not symmetric: K[{row}][{col}] = {a} but K[{col}][{row}] = {b}")]
    Asymmetric { row: usize, col: usize, a: f64, b: f64 },
    #[error(
        "kernel matrix is not positive semi-definite: K/N has eigenvalue {min} (round-off tolerance {tol})"
    )]
    NotPsd { min: f64, tol: f64 },
    #[error("a Vendi score needs at least one item")]
    Empty,
}

/// Cosine-kernel features: rows of `x` (row-major n × d) L2-normalised, in f64
/// ([`CosineRows::features`]).
pub fn cosine_features(x: &[f32], n: usize, d: usize) -> Result<Features, VendiError> {
    Ok(CosineRows::new(x.to_vec(), n, d)?.features())
}

/// The cosine kernel's feature map `F = diag(1/‖x_i‖) X` kept as the f32 rows and one f64
/// inverse norm per row: an f64 feature row is `f64(x_ij) · (1/‖x_i‖)`, built where it is needed
/// ([`CosineRows::features`] for the whole matrix, [`host_dual_product`] block by block), so
/// the dual route on the CPU never holds an N × D f64 copy. The rows are the caller's own or lent
/// ([`HostRows`]: the Python package reads a numpy array in place).
#[derive(Debug, Clone, PartialEq)]
pub struct CosineRows {
    pub n: usize,
    pub d: usize,
    x: HostRows,
    inv_norm: Vec<f64>,
}

impl CosineRows {
    /// Takes the rows of `x` (row-major n × d); every row must be finite with a non-zero norm.
    pub fn new(x: impl Into<HostRows>, n: usize, d: usize) -> Result<CosineRows, VendiError> {
        let rows = x.into();
        let x = rows.as_slice();
        assert_eq!(x.len(), n * d, "x must be n × d");
        if n == 0 || d == 0 {
            return Err(VendiError::Empty);
        }
        // The norms on every core (one pass over the table); the checks then read only them.
        let row_norm = |v: &[f32]| sum_of_squares(v).sqrt();
        #[cfg(feature = "rayon")]
        let norms: Vec<f64> = {
            use rayon::prelude::*;
            x.par_chunks_exact(d).map(row_norm).collect()
        };
        #[cfg(not(feature = "rayon"))]
        let norms: Vec<f64> = x.chunks_exact(d).map(row_norm).collect();
        let mut inv_norm = Vec::with_capacity(n);
        for (row, (v, &norm)) in x.chunks_exact(d).zip(&norms).enumerate() {
            if !norm.is_finite() {
                let col = v.iter().position(|a| !a.is_finite()).unwrap_or(0);
                return Err(VendiError::NonFinite { row, col, value: f64::from(v[col]) });
            }
            if norm == 0.0 {
                return Err(VendiError::ZeroNorm { row });
            }
            inv_norm.push(1.0 / norm);
        }
        Ok(CosineRows { n, d, x: rows, inv_norm })
    }

    /// `F[i][j]`, the one rule for a feature value: `f64(x_ij) · (1/‖x_i‖)`.
    #[inline]
    pub fn feature(&self, i: usize, j: usize) -> f64 {
        f64::from(self.x.as_slice()[i * self.d + j]) * self.inv_norm[i]
    }

    /// Row `i` of `F` into `out` (length d).
    pub fn feature_row(&self, i: usize, out: &mut [f64]) {
        self.feature_span(i, 0, out);
    }

    /// `F[i][j0 ..j0 + out.len()]` into `out` by the rule of [`feature`](Self::feature), as one
    /// pass over a slice of the row (vectorised).
    #[inline]
    pub fn feature_span(&self, i: usize, j0: usize, out: &mut [f64]) {
        let s = self.inv_norm[i];
        let (at, len) = (i * self.d + j0, out.len());
        for (o, x) in out.iter_mut().zip(&self.x.as_slice()[at..at + len]) {
            *o = f64::from(*x) * s;
        }
    }

    /// The whole feature matrix in f64 (row-major n × d).
    pub fn features(&self) -> Features {
        let mut data = vec![0.0; self.n * self.d];
        for (i, row) in data.chunks_exact_mut(self.d).enumerate() {
            self.feature_row(i, row);
        }
        Features { n: self.n, d: self.d, data }
    }

    /// The rows `rows`, in that order.
    pub fn select_rows(&self, rows: &[usize]) -> CosineRows {
        let all = self.x.as_slice();
        let x: Vec<f32> =
            rows.iter().flat_map(|&i| all[i * self.d..(i + 1) * self.d].iter().copied()).collect();
        let inv_norm = rows.iter().map(|&i| self.inv_norm[i]).collect();
        CosineRows { n: rows.len(), d: self.d, x: x.into(), inv_norm }
    }
}

/// `Σ a²` in f64 over 8 independent partial sums, so the loop vectorises instead of waiting on
/// one running sum (the load stage of `culturelens vendi` normalises N × D values).
fn sum_of_squares(v: &[f32]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let chunks = v.chunks_exact(8);
    let tail: f64 = chunks.remainder().iter().map(|a| f64::from(*a) * f64::from(*a)).sum();
    for c in chunks {
        for (l, a) in lanes.iter_mut().zip(c) {
            *l += f64::from(*a) * f64::from(*a);
        }
    }
    lanes.iter().sum::<f64>() + tail
}

/// Tolerance on the sum of categorical kernel weights (they must sum to 1 so `k(x, x) = 1`).
pub const WEIGHT_SUM_TOLERANCE: f64 = 1e-9;

/// Categorical CUBE kernel features (Eq. 4): for each column `c`, one-hot indicators scaled by
/// `√w_c`, so `F Fᵀ = Σ_c w_c [x_c = y_c]`. Weights must be ≥ 0 and sum to 1
/// (± [`WEIGHT_SUM_TOLERANCE`]); a blank value is an error naming its row and column.
pub fn categorical_features(columns: &[(&str, &[String])], weights: &[f64]) -> Result<Features, VendiError> {
    assert_eq!(columns.len(), weights.len(), "one weight per column");
    if weights.iter().any(|w| *w < 0.0 || !w.is_finite())
        || (weights.iter().sum::<f64>() - 1.0).abs() > WEIGHT_SUM_TOLERANCE
    {
        return Err(VendiError::Weights { weights: weights.to_vec() });
    }
    let n = columns.first().map_or(0, |(_, v)| v.len());
    if n == 0 {
        return Err(VendiError::Empty);
    }
    let mut blocks: Vec<(Vec<usize>, usize, f64)> = Vec::new();
    for ((name, values), w) in columns.iter().zip(weights) {
        assert_eq!(values.len(), n, "every column has one value per item");
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

/// The CUBE diversity numbers of one collection: `VS_q`, `qVS_q` (Eq. 2), `qVS_q / N` (Eq. 3).
/// Serialised as `{"n", "q", "vs", "qvs", "qvs_norm"}` with `q = ∞` as the string `"inf"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VendiScore {
    pub n: usize,
    pub q: Order,
    pub vs: f64,
    pub qvs: f64,
    pub qvs_norm: f64,
}

impl VendiScore {
    /// Scores a clipped spectrum of `K/N` with per-item `quality` (uniform 1 when `None`).
    pub fn from_spectrum(spectrum: &[f64], n: usize, q: Order, quality: Option<&[f64]>) -> VendiScore {
        let vs = vendi_from_eigenvalues(spectrum, q);
        let (qvs, qvs_norm) = match quality {
            Some(s) => {
                assert_eq!(s.len(), n, "one quality score per item");
                quality_weighted(vs, s)
            }
            None => (vs, vs / n as f64),
        };
        VendiScore { n, q, vs, qvs, qvs_norm }
    }
}

#[cfg(test)]
mod tests;
