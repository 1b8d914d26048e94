//! The host half of the scatter's PCA (SoS paper App. E): which rows estimate the covariance,
//! and the two leading eigenvectors of the covariance (f64).
//! The device half (normalise, covariance product, projection) is `web/src/pca.rs`.
//!
//! The eigenvectors come from subspace (block power) iteration with a Rayleigh–Ritz step
//! (Golub & Van Loan §8.3): a block of [`BLOCK`] orthonormal vectors is multiplied by the matrix
//! and re-orthonormalised until the two leading Ritz pairs have relative residuals
//! `‖A u − θ u‖ ≤` [`TOLERANCE`]` · |θ₁|`. The block converges at the rate `λ_{BLOCK+1} / λ₂`, not
//! the `λ₂ / λ₁` of one power vector, so two close leading eigenvalues (a real embedding table's
//! usual case) separate within a few dozen steps; the 2 × 2 … [`BLOCK`] × [`BLOCK`] projected
//! problem is solved by cyclic Jacobi. [`MAX_ITERATIONS`] caps the work on matrices whose
//! leading block never separates (e.g. many equal eigenvalues, where every basis of the
//! eigenspace is as good).
//!
//! Sign convention (scikit-learn's `PCA`, `svd_flip(u_based_decision=False)`): each axis has its
//! entry of largest absolute value positive (the first such entry on ties).

/// Rows used to estimate the covariance.
pub const SAMPLE_ROWS: usize = 4096;
/// Vectors in the iterated block.
pub const BLOCK: usize = 6;
/// The relative residual at which the two leading Ritz pairs count as converged.
pub const TOLERANCE: f64 = 1e-12;
/// The most block iterations.
pub const MAX_ITERATIONS: usize = 2000;

/// The evenly strided sample of at most [`SAMPLE_ROWS`] of `n` rows: every `⌈n / SAMPLE_ROWS⌉`-th.
pub fn sample_rows(n: usize) -> Vec<u32> {
    let stride = n.div_ceil(SAMPLE_ROWS).max(1);
    (0..n).step_by(stride).map(|i| i as u32).collect()
}

/// The two leading unit eigenvectors of the symmetric `d × d` matrix `cov` (row-major), in the
/// sign convention of the module doc; the second is orthogonal to the first.
pub fn principal_axes(cov: &[f64], d: usize) -> [Vec<f64>; 2] {
    principal_axes_with_stats(cov, d).0
}

/// How the iteration ended: the Ritz values of the two axes, the iterations run, and whether
/// the residuals met [`TOLERANCE`] (false only when [`MAX_ITERATIONS`] ran out).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Convergence {
    pub eigenvalues: [f64; 2],
    pub iterations: usize,
    pub converged: bool,
}

/// [`principal_axes`] and how its iteration ended.
pub fn principal_axes_with_stats(cov: &[f64], d: usize) -> ([Vec<f64>; 2], Convergence) {
    assert_eq!(cov.len(), d * d, "the covariance is d × d");
    assert!(d >= 2, "two axes need d ≥ 2");
    let p = BLOCK.min(d);
    // A fixed start block: column k is a quasi-random sequence, then orthonormalised.
    let mut v: Vec<Vec<f64>> = (0..p)
        .map(|k| {
            (0..d)
                .map(|i| ((i * (k + 1)) as f64 * 0.618_033_988_749_895 + k as f64 * 0.3).fract() - 0.5)
                .collect()
        })
        .collect();
    orthonormalise(&mut v);
    let mut stats = Convergence { eigenvalues: [0.0; 2], iterations: 0, converged: false };
    let mut best: [Vec<f64>; 2] = [v[0].clone(), v[1].clone()];
    for iteration in 1..=MAX_ITERATIONS {
        let z: Vec<Vec<f64>> = v.iter().map(|x| mat_vec(cov, d, x)).collect();
        // Rayleigh–Ritz: H = Vᵀ A V, H = Y Θ Yᵀ, U = V Y, A U = Z Y.
        let h: Vec<f64> = (0..p * p).map(|ij| dot(&v[ij / p], &z[ij % p])).collect();
        let (theta, y) = jacobi_eigen(h, p);
        let combine = |basis: &[Vec<f64>], k: usize| -> Vec<f64> {
            (0..d).map(|i| (0..p).map(|j| basis[j][i] * y[j * p + k]).sum()).collect()
        };
        let u: Vec<Vec<f64>> = (0..p).map(|k| combine(&v, k)).collect();
        let au: Vec<Vec<f64>> = (0..p).map(|k| combine(&z, k)).collect();
        let scale = theta[0].abs().max(f64::MIN_POSITIVE);
        let residual = |k: usize| {
            au[k].iter().zip(&u[k]).map(|(a, x)| (a - theta[k] * x).powi(2)).sum::<f64>().sqrt() / scale
        };
        stats = Convergence { eigenvalues: [theta[0], theta[1]], iterations: iteration, converged: false };
        best = [u[0].clone(), u[1].clone()];
        if theta[0] == 0.0 || (residual(0) <= TOLERANCE && residual(1) <= TOLERANCE) {
            stats.converged = true;
            break;
        }
        v = au;
        orthonormalise(&mut v);
    }
    best.iter_mut().for_each(|axis| flip_sign(axis));
    (best, stats)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn mat_vec(a: &[f64], d: usize, x: &[f64]) -> Vec<f64> {
    a.chunks_exact(d).map(|row| dot(row, x)).collect()
}

/// Modified Gram–Schmidt, twice (reorthogonalisation keeps the block orthonormal to rounding
/// when its columns are nearly parallel). A column that vanishes is replaced by a unit vector.
fn orthonormalise(v: &mut [Vec<f64>]) {
    for k in 0..v.len() {
        for _ in 0..2 {
            for j in 0..k {
                let (done, rest) = v.split_at_mut(k);
                let c = dot(&rest[0], &done[j]);
                rest[0].iter_mut().zip(&done[j]).for_each(|(a, b)| *a -= c * b);
            }
        }
        let norm = dot(&v[k], &v[k]).sqrt();
        if norm > 0.0 && norm.is_finite() {
            v[k].iter_mut().for_each(|a| *a /= norm);
        } else {
            let d = v[k].len();
            v[k] = (0..d).map(|i| if i == k % d { 1.0 } else { 0.0 }).collect();
        }
    }
}

/// Eigenvalues (descending) and eigenvectors (column k of the row-major `p × p` result) of the
/// small symmetric matrix `a`, by cyclic Jacobi rotations.
fn jacobi_eigen(mut a: Vec<f64>, p: usize) -> (Vec<f64>, Vec<f64>) {
    let mut q: Vec<f64> = (0..p * p).map(|ij| if ij / p == ij % p { 1.0 } else { 0.0 }).collect();
    for _sweep in 0..100 {
        let off: f64 = (0..p * p).filter(|ij| ij / p != ij % p).map(|ij| a[ij] * a[ij]).sum();
        let diag: f64 = (0..p).map(|i| a[i * p + i] * a[i * p + i]).sum();
        if off <= f64::EPSILON * f64::EPSILON * diag || off == 0.0 {
            break;
        }
        for i in 0..p {
            for j in i + 1..p {
                let aij = a[i * p + j];
                if aij == 0.0 {
                    continue;
                }
                let tau = (a[j * p + j] - a[i * p + i]) / (2.0 * aij);
                let t = tau.signum() / (tau.abs() + (1.0 + tau * tau).sqrt());
                let t = if tau == 0.0 { 1.0 } else { t };
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = t * c;
                for k in 0..p {
                    let (aki, akj) = (a[k * p + i], a[k * p + j]);
                    a[k * p + i] = c * aki - s * akj;
                    a[k * p + j] = s * aki + c * akj;
                }
                for k in 0..p {
                    let (aik, ajk) = (a[i * p + k], a[j * p + k]);
                    a[i * p + k] = c * aik - s * ajk;
                    a[j * p + k] = s * aik + c * ajk;
                }
                for k in 0..p {
                    let (qki, qkj) = (q[k * p + i], q[k * p + j]);
                    q[k * p + i] = c * qki - s * qkj;
                    q[k * p + j] = s * qki + c * qkj;
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..p).collect();
    order.sort_by(|&x, &y| a[y * p + y].total_cmp(&a[x * p + x]));
    let values = order.iter().map(|&k| a[k * p + k]).collect();
    let vectors = (0..p * p).map(|ij| q[(ij / p) * p + order[ij % p]]).collect();
    (values, vectors)
}

/// scikit-learn's sign: the entry of largest absolute value positive.
fn flip_sign(axis: &mut [f64]) {
    let pivot = (0..axis.len()).fold(0, |best, i| if axis[i].abs() > axis[best].abs() { i } else { best });
    if axis[pivot] < 0.0 {
        axis.iter_mut().for_each(|x| *x = -*x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(a: &[f64], b: &[f64]) -> f64 {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn sample_is_strided_and_bounded() {
        assert_eq!(sample_rows(5), vec![0, 1, 2, 3, 4]);
        let big = sample_rows(10_000);
        // ⌈10000 / 4096⌉ = 3: rows 0, 3, 6, …, 9999.
        assert_eq!(big.len(), 3334);
        assert_eq!((big[1], *big.last().unwrap()), (3, 9999));
        assert!(sample_rows(SAMPLE_ROWS * 7 + 1).len() <= SAMPLE_ROWS);
        assert!(sample_rows(0).is_empty());
    }

    #[test]
    fn axes_of_a_diagonal_matrix_are_its_largest_coordinates() {
        let cov = [1.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 3.0];
        let [v1, v2] = principal_axes(&cov, 3);
        assert!((v1[1].abs() - 1.0).abs() < 1e-12, "{v1:?}");
        assert!((v2[2].abs() - 1.0).abs() < 1e-12, "{v2:?}");
    }

    #[test]
    fn axes_of_a_rotated_matrix_match_the_closed_form() {
        // [[2, 1], [1, 2]] has eigenvalues 3 (axis (1, 1)/√2) and 1 (axis (1, −1)/√2).
        let cov = [2.0, 1.0, 1.0, 2.0];
        let [v1, v2] = principal_axes(&cov, 2);
        let h = std::f64::consts::FRAC_1_SQRT_2;
        assert!((dot(&v1, &[h, h]).abs() - 1.0).abs() < 1e-12, "{v1:?}");
        assert!((dot(&v2, &[h, -h]).abs() - 1.0).abs() < 1e-9, "{v2:?}");
        assert!(dot(&v1, &v2).abs() < 1e-9);
    }
}
