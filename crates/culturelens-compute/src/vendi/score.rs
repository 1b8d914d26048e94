//! Vendi scores from eigenvalues — CUBE paper Def. 5.1 (after Friedman & Dieng 2023 and
//! Pasarkar & Dieng 2023):
//!
//! `VS_q = exp( H_q(λ̄) )`, with `λ̄_i = λ_i / Σ_j λ_j` the normalised eigenvalues of `K` and `H_q`
//! the Rényi entropy of order `q`:
//! - `q = 0`: `VS_0 = #{λ̄_i > 0}`, the numerical rank;
//! - `q = 1` (Shannon limit): `VS_1 = exp(−Σ λ̄_i ln λ̄_i)`, with `0 · ln 0 = 0`;
//! - `q = ∞`: `VS_∞ = 1 / max_i λ̄_i`;
//! - otherwise `VS_q = (Σ λ̄_i^q)^{1/(1−q)}`.
//!
//! Round-off makes eigenvalues that should be zero slightly negative or tiny positive. Every
//! eigenvalue `λ ≤ tol` is set to exactly 0 before normalising, with the relative tolerance
//! `tol = max(N, d) · ε · λ_max` (numpy's `matrix_rank` convention), where `ε` is the machine
//! epsilon of the precision the kernel product was accumulated in (f64, or f32 on backends
//! without f64). This makes `q = 0` the numerical rank and keeps `q = ∞` and small `q` stable.

/// The order `q ≥ 0` of a Vendi score (the `vendi --out` schema's, where it is stored).
pub use culturelens_results::vendi::Order;

/// The round-off tolerance `size · eps · λ_max` of a spectrum, `size = max(N, d)` (numpy's
/// `matrix_rank` convention).
pub fn clip_tolerance(eigenvalues: &[f64], size: usize, eps: f64) -> f64 {
    let max = eigenvalues.iter().copied().fold(0.0f64, f64::max);
    size as f64 * eps * max
}

/// Eigenvalues `λ ≤` [`clip_tolerance`] (and all negative ones) set to zero.
pub fn clip_eigenvalues(eigenvalues: &[f64], size: usize, eps: f64) -> Vec<f64> {
    let tol = clip_tolerance(eigenvalues, size, eps);
    eigenvalues.iter().map(|&l| if l > tol { l } else { 0.0 }).collect()
}

/// `VS_q` of a spectrum (Def. 5.1); `eigenvalues` need not be normalised (they are divided by
/// their sum) but must already be clipped ([`clip_eigenvalues`]).
pub fn vendi_from_eigenvalues(eigenvalues: &[f64], q: Order) -> f64 {
    let total: f64 = eigenvalues.iter().filter(|l| **l > 0.0).sum();
    assert!(total > 0.0, "a Vendi score needs a non-zero spectrum");
    let p: Vec<f64> = eigenvalues.iter().filter(|l| **l > 0.0).map(|l| l / total).collect();
    match q {
        Order::Infinity => 1.0 / p.iter().copied().fold(0.0, f64::max),
        Order::Finite(0.0) => p.len() as f64,
        Order::Finite(1.0) => (-p.iter().map(|x| x * x.ln()).sum::<f64>()).exp(),
        Order::Finite(q) => (p.iter().map(|x| x.powf(q)).sum::<f64>().ln() / (1.0 - q)).exp(),
    }
}

/// Eigenvalues of a symmetric `n × n` row-major matrix (f64), ascending; only the lower triangle
/// (`i ≥ j`) is read. From `n ≥` [`TWO_STAGE_MIN`] on, by the two-stage reduction of
/// [`super::eigen`] (full → band → tridiagonal, its first stage all matrix products); below,
/// by faer's one-stage self-adjoint eigensolver.
pub fn symmetric_eigenvalues(matrix: &[f64], n: usize) -> Vec<f64> {
    assert_eq!(matrix.len(), n * n, "matrix must be n × n");
    if n >= TWO_STAGE_MIN {
        return super::eigen::two_stage_eigenvalues(matrix, n, super::eigen::BAND);
    }
    faer::MatRef::from_row_major_slice(matrix, n, n)
        .self_adjoint_eigenvalues(faer::Side::Lower)
        .expect("the self-adjoint eigensolver converges on finite input")
}

/// The order from which [`symmetric_eigenvalues`] reduces in two stages. Below it the whole
/// solve takes milliseconds either way (the one-stage reduction's matrix-vector products stay in
/// cache), and the cross-backend bounds of the small kernel-route tests were set with faer's
/// one-stage solver, whose round-off eigenvalues of rank-deficient kernels they reflect.
pub const TWO_STAGE_MIN: usize = 512;

/// Quality-weighted Vendi score `qVS_q = mean(s) · VS_q` (CUBE Eq. 2) and its normalised form
/// `qVS_q / N` (Eq. 3).
pub fn quality_weighted(vs: f64, quality: &[f64]) -> (f64, f64) {
    let n = quality.len() as f64;
    let qvs = quality.iter().sum::<f64>() / n * vs;
    (qvs, qvs / n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendi-score README example: K = [[1, .9, 0], [.9, 1, 0], [0, 0, 1]].
    fn readme_k() -> Vec<f64> {
        vec![1.0, 0.9, 0.0, 0.9, 1.0, 0.0, 0.0, 0.0, 1.0]
    }

    fn vs(k: &[f64], n: usize, q: Order) -> f64 {
        let eig: Vec<f64> = symmetric_eigenvalues(k, n).iter().map(|l| l / n as f64).collect();
        vendi_from_eigenvalues(&clip_eigenvalues(&eig, n, f64::EPSILON), q)
    }

    #[test]
    fn vendi_score_readme_values() {
        // Eigenvalues of K/3: 1.9/3, 1/3, 0.1/3 (by hand: K has blocks [[1,.9],[.9,1]] and [1]).
        let k = readme_k();
        assert!((vs(&k, 3, Order::Finite(1.0)) - 2.1573).abs() < 5e-5);
        assert_eq!(vs(&k, 3, Order::Finite(0.0)), 3.0);
        assert!((vs(&k, 3, Order::Finite(2.0)) - 1.94805).abs() < 5e-6);
        assert!((vs(&k, 3, Order::Infinity) - 1.57895).abs() < 5e-6);
        // Exact forms: q=2 → 1 / Σp², q=∞ → 3/1.9.
        let p = [1.9 / 3.0, 1.0 / 3.0, 0.1 / 3.0];
        let q2 = 1.0 / p.iter().map(|x| x * x).sum::<f64>();
        assert!((vs(&k, 3, Order::Finite(2.0)) - q2).abs() < 1e-12);
        assert!((vs(&k, 3, Order::Infinity) - 3.0 / 1.9).abs() < 1e-12);
    }

    #[test]
    fn vendi_score_readme_exponential_kernel() {
        // samples [0, 0, 10, 10, 20, 20], k(a, b) = exp(-|a - b|): three near-distinct pairs → 2.9999.
        let s = [0.0f64, 0.0, 10.0, 10.0, 20.0, 20.0];
        let k: Vec<f64> = s.iter().flat_map(|a| s.iter().map(move |b| (-(a - b).abs()).exp())).collect();
        let v = vs(&k, 6, Order::Finite(1.0));
        assert!((v - 2.9999).abs() < 1e-4, "{v}");
    }

    #[test]
    fn quality_weighted_readme_value() {
        // q_vendi README: samples [0, 0, 2], k = exp(-|a-b|), s = exp(-|a-2|) → 0.793705659274703.
        let s = [0.0f64, 0.0, 2.0];
        let k: Vec<f64> = s.iter().flat_map(|a| s.iter().map(move |b| (-(a - b).abs()).exp())).collect();
        let quality: Vec<f64> = s.iter().map(|a| (-(a - 2.0f64).abs()).exp()).collect();
        let (qvs, qvs_norm) = quality_weighted(vs(&k, 3, Order::Finite(1.0)), &quality);
        assert!((qvs - 0.793705659274703).abs() < 1e-12, "{qvs}");
        assert!((qvs_norm - qvs / 3.0).abs() < 1e-15);
    }

    #[test]
    fn orders_parse_and_limits_are_continuous() {
        assert_eq!(Order::parse("inf").unwrap(), Order::Infinity);
        assert_eq!(Order::parse("0.5").unwrap(), Order::Finite(0.5));
        assert!(Order::parse("-1").is_err() && Order::parse("x").is_err());
        let k = readme_k();
        let near_one = vs(&k, 3, Order::Finite(1.0 + 1e-7));
        assert!((near_one - vs(&k, 3, Order::Finite(1.0))).abs() < 1e-5);
        let large = vs(&k, 3, Order::Finite(400.0));
        assert!((large - vs(&k, 3, Order::Infinity)).abs() < 1e-2);
    }

    #[test]
    fn clipping_gives_numerical_rank() {
        // Two identical items: K = [[1,1],[1,1]] has eigenvalues 2 and ~0 (maybe -1e-17).
        let k = vec![1.0, 1.0, 1.0, 1.0];
        assert_eq!(vs(&k, 2, Order::Finite(0.0)), 1.0);
        assert!((vs(&k, 2, Order::Finite(1.0)) - 1.0).abs() < 1e-12);
        assert!((vs(&k, 2, Order::Infinity) - 1.0).abs() < 1e-12);
    }
}
