//! The spectrum of `K/N`: the kernel or covariance product on the Burn device (lower block
//! triangle only) or on the host CPU with faer's triangular GEMM, its read-back, and the f64
//! eigenvalues; and the validated spectrum of a precomputed kernel matrix.

use burn::tensor::{Device, Tensor, TensorData};
use faer::Accum;

use super::gram::{add_lower_gram, cosine_lower_gram};
use super::{
    CosineRows, Features, ProductPrecision, Route, VendiError, clip_eigenvalues, clip_tolerance,
    symmetric_eigenvalues,
};

/// Width of the blocks of the symmetric product: [`product_tensor`] computes the block rows
/// `Aᵢᵀ A[:, ..end_i]` of `AᵀA`, i.e. `(m + 1) / 2m` of the full product for `m` blocks, in GEMMs
/// still large enough to run at full speed.
pub const PRODUCT_BLOCK: usize = 256;

/// Largest deviation from symmetry and from `k(x, x) = 1` accepted in a precomputed kernel (an
/// f32 kernel matrix rounds its entries to about 6e-8).
pub const KERNEL_ENTRY_TOLERANCE: f64 = 1e-6;

/// The product whose eigenvalues are `N ×` those of `K/N`, on `device`: `F Fᵀ` (N × N, route
/// Kernel) or `Fᵀ F` (D × D, route Dual), accumulated in `precision`.
///
/// Only the **lower triangle** is meaningful: the product is computed as block rows of width
/// [`PRODUCT_BLOCK`] up to the diagonal, and the blocks above it are zero. Read it back (sync or
/// async) and pass it to [`spectrum_from_product`].
pub fn product_tensor(
    features: &Features,
    route: Route,
    precision: ProductPrecision,
    device: &Device,
) -> Tensor<2> {
    let f = Tensor::<2>::from_data(
        TensorData::new(features.data.clone(), [features.n, features.d]),
        (device, precision.dtype()),
    );
    // `a` is K × S with AᵀA the wanted S × S product.
    let a = match route.resolve(features.n, features.d) {
        Route::Dual => f,
        _ => f.transpose(),
    };
    lower_gram(a, precision, device)
}

/// The product of [`product_tensor`] computed on the host CPU in f64 with faer's triangular
/// GEMM (a symmetric rank-k update: only the lower triangle, half the flops of the full
/// product, multi-threaded with the crate feature `rayon`). Same layout and meaning as the
/// read-back of [`product_tensor`] with [`ProductPrecision::F64`] (row-major, lower triangle
/// meaningful), so it goes to [`spectrum_from_product`] unchanged. The native CLI uses it for
/// `--device cpu`, where it is faster than the Burn CPU backend's f64 GEMM.
pub fn host_product(features: &Features, route: Route) -> TensorData {
    let f = faer::MatRef::from_row_major_slice(&features.data, features.n, features.d);
    // `a` is K × S with AᵀA the wanted S × S product.
    let a = match route.resolve(features.n, features.d) {
        Route::Dual => f,
        _ => f.transpose(),
    };
    let s = a.ncols();
    let mut out = vec![0.0f64; s * s];
    add_lower_gram(&mut out, a, Accum::Replace);
    TensorData::new(out, [s, s])
}

/// [`host_product`] of the dual route (`Fᵀ F`, D × D) for cosine features, without an N × D f64
/// copy: the f64 rows of `F` are made from the f32 table while the rank-k update packs its
/// operands, [`HOST_BLOCK_ROWS`](super::HOST_BLOCK_ROWS) rows at a time (`gram.rs`: AVX2 register
/// tiles on x86-64, faer's triangular GEMM elsewhere). Equal to
/// `host_product(&rows.features(), Route::Dual)` up to the order of summation.
pub fn host_dual_product(rows: &CosineRows) -> TensorData {
    TensorData::new(cosine_lower_gram(rows), [rows.d, rows.d])
}

/// The lower block triangle of `aᵀa` (upper blocks zero), block row by block row.
fn lower_gram(a: Tensor<2>, precision: ProductPrecision, device: &Device) -> Tensor<2> {
    let [k, s] = a.dims();
    if s <= PRODUCT_BLOCK {
        return a.clone().transpose().matmul(a);
    }
    let rows = (0..s)
        .step_by(PRODUCT_BLOCK)
        .map(|start| {
            let end = (start + PRODUCT_BLOCK).min(s);
            let left = a.clone().slice([0..k, 0..end]);
            let block_row = a.clone().slice([0..k, start..end]).transpose().matmul(left);
            if end == s {
                block_row
            } else {
                let zeros = Tensor::<2>::zeros([end - start, s - end], (device, precision.dtype()));
                Tensor::cat(vec![block_row, zeros], 1)
            }
        })
        .collect();
    Tensor::cat(rows, 0)
}

/// Clipped eigenvalues of `K/N` (ascending) from a read-back of [`product_tensor`]: the
/// eigenvalues of the product's lower triangle, divided by N, then [`clip_eigenvalues`] with
/// size `max(N, D)` and the epsilon of `precision`.
pub fn spectrum_from_product(
    product: TensorData,
    features: &Features,
    precision: ProductPrecision,
) -> Vec<f64> {
    spectrum_of_product(product, features.n, features.d, precision)
}

/// [`spectrum_from_product`] for a product of `n` items with `d` features.
pub fn spectrum_of_product(product: TensorData, n: usize, d: usize, precision: ProductPrecision) -> Vec<f64> {
    let size = product.shape()[0];
    let m: Vec<f64> = product.try_into_vec_as::<f64>().expect("the kernel product holds floats");
    let eig: Vec<f64> = symmetric_eigenvalues(&m, size).into_iter().map(|l| l / n as f64).collect();
    clip_eigenvalues(&eig, n.max(d), precision.epsilon())
}

/// Clipped eigenvalues of `K/N` computed on `device` (synchronous read-back).
pub fn spectrum(features: &Features, route: Route, precision: ProductPrecision, device: &Device) -> Vec<f64> {
    let data = product_tensor(features, route, precision, device).into_data();
    spectrum_from_product(data, features, precision)
}

/// Validates a precomputed kernel matrix `k` (row-major n × n, values of the given `precision`)
/// and returns the clipped eigenvalues of `K/N`.
///
/// Checks, in order: every entry finite; `k(x, x) = 1` and symmetry to
/// [`KERNEL_ENTRY_TOLERANCE`]; positive semi-definite, i.e. no eigenvalue of `K/N` below
/// `−tol`, `tol` the [`clip_tolerance`] with size n and the epsilon of `precision` (eigenvalues
/// within `±tol` are round-off and are zeroed).
pub fn precomputed_spectrum(
    k: &[f64],
    n: usize,
    precision: ProductPrecision,
) -> Result<Vec<f64>, VendiError> {
    assert_eq!(k.len(), n * n, "the kernel matrix must be n × n");
    if n == 0 {
        return Err(VendiError::Empty);
    }
    if let Some(i) = k.iter().position(|v| !v.is_finite()) {
        return Err(VendiError::NonFinite { row: i / n, col: i % n, value: k[i] });
    }
    for i in 0..n {
        let v = k[i * n + i];
        if (v - 1.0).abs() > KERNEL_ENTRY_TOLERANCE {
            return Err(VendiError::Diagonal { row: i, col: i, value: v });
        }
        for j in 0..i {
            let (a, b) = (k[i * n + j], k[j * n + i]);
            if (a - b).abs() > KERNEL_ENTRY_TOLERANCE {
                return Err(VendiError::Asymmetric { row: i, col: j, a, b });
            }
        }
    }
    let eig: Vec<f64> = symmetric_eigenvalues(k, n).into_iter().map(|l| l / n as f64).collect();
    let tol = clip_tolerance(&eig, n, precision.epsilon());
    let min = eig.iter().copied().fold(f64::INFINITY, f64::min);
    if min < -tol {
        return Err(VendiError::NotPsd { min, tol });
    }
    Ok(clip_eigenvalues(&eig, n, precision.epsilon()))
}

/// The principal submatrix of the kernel `k` (row-major n × n) on the items `rows`, in that order.
pub fn kernel_submatrix(k: &[f64], n: usize, rows: &[usize]) -> Vec<f64> {
    assert_eq!(k.len(), n * n, "the kernel matrix must be n × n");
    rows.iter().flat_map(|&i| rows.iter().map(move |&j| k[i * n + j])).collect()
}
