//! Eigenvalues of a large symmetric matrix in two stages, the way PLASMA, MAGMA and LAPACK's
//! `dsyevd_2stage` do it when no eigenvectors are wanted:
//!
//! 1. **Full to band** ([`reduce_to_band`]): blocked Householder reductions of `b` columns at a
//!    time, each applied to the trailing matrix as one symmetric rank-`2b` update. All the
//!    `4n³/3` flops of this stage are matrix products (faer's GEMM, multi-threaded), unlike the
//!    one-stage tridiagonal reduction, half of whose flops are matrix-vector products that stream
//!    the whole trailing matrix from memory once per column.
//! 2. **Band to tridiagonal** ([`band_to_tridiagonal`]): bulge chasing with Householder
//!    reflectors of length `b` (the three kernels of LAPACK's `dsb2st_kernels`), `6n²b` flops on
//!    `b × b` blocks that stay in L1.
//! 3. **Tridiagonal eigenvalues** ([`tridiagonal_eigenvalues`]): the Pal–Walker–Kahan root-free
//!    QL iteration (LAPACK's `dsterf`, what `dsyevd` uses when no eigenvectors are wanted), with
//!    faer's implicit QR as the fallback should it not converge.
//!
//! Every step is an orthogonal similarity, so the eigenvalues are those of the input up to
//! round-off of order `n · ε · ‖A‖` (backward stable), as with the one-stage reduction; only the
//! order of the sums differs. The loops of stages 1 (panel) and 2 are compiled for AVX-512 or
//! AVX2 and picked at run time (`simd`); they add in a fixed order, so the value does not depend
//! on the CPU.

use faer::linalg::matmul::matmul;
use faer::prelude::{Reborrow, ReborrowMut};
use faer::{Accum, Mat, MatMut, MatRef, Par};

/// Band width `b` of the first stage: wide enough that the rank-`2b` updates run near GEMM
/// speed, narrow enough that the second stage's `6n²b` flops stay small.
pub const BAND: usize = 32;

/// Ascending eigenvalues of the symmetric `n × n` row-major `matrix`, of which only the lower
/// triangle (`i ≥ j`) is read, computed in two stages with band width `band ≥ 1`.
pub fn two_stage_eigenvalues(matrix: &[f64], n: usize, band: usize) -> Vec<f64> {
    assert_eq!(matrix.len(), n * n, "matrix must be n × n");
    assert!(band >= 1, "the band width is at least 1");
    if n == 0 {
        return Vec::new();
    }
    // Column-major working copy of the lower triangle (a transpose, in 32 × 32 tiles).
    let mut a = vec![0.0; n * n];
    for i0 in (0..n).step_by(32) {
        for j0 in (0..=i0).step_by(32) {
            for j in j0..(j0 + 32).min(n) {
                for i in i0.max(j)..(i0 + 32).min(n) {
                    a[j * n + i] = matrix[i * n + j];
                }
            }
        }
    }
    let band = band.min(n.saturating_sub(1)).max(1);
    reduce_to_band(MatMut::from_column_major_slice_mut(&mut a, n, n), band, faer::get_global_parallelism());
    let (diag, sub) = band_to_tridiagonal(&mut a, n, band);
    tridiagonal_eigenvalues(&diag, &sub)
}

/// A Householder reflector `H = I − τ v vᵀ` with `v[0] = 1` (LAPACK's `dlarfg`): `H x = β e₁`.
/// Returns `(τ, β)` and overwrites `x[1..]` with `v[1..]`; `τ = 0` (`H = I`) when `x[1..]` is
/// already zero.
#[inline(always)]
fn householder(x: &mut [f64]) -> (f64, f64) {
    let alpha = x[0];
    // ‖x[1..]‖, scaled by its largest entry so the squares neither overflow nor underflow.
    let big = x[1..].iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if big == 0.0 {
        return (0.0, alpha);
    }
    let tail = big * x[1..].iter().map(|v| (v / big) * (v / big)).sum::<f64>().sqrt();
    let beta = -alpha.signum() * alpha.hypot(tail);
    let scale = 1.0 / (alpha - beta);
    for v in &mut x[1..] {
        *v *= scale;
    }
    ((beta - alpha) / beta, beta)
}

/// Stage 1: reduces the symmetric `a` (lower triangle read and written) in place to a band of
/// half-width `band`: on return `a[i, j] = 0` for `i > j + band`. Panel `k` (columns
/// `k..k + band`) is QR-factored below the band, and the trailing matrix takes the two-sided
/// update of its reflectors ([`two_sided_update`]).
pub fn reduce_to_band(mut a: MatMut<'_, f64>, band: usize, par: Par) {
    let n = a.nrows();
    // Work space of the updates, sized for the first panel and reused: [Y V] and [V Y].
    let mut left = Mat::<f64>::zeros(n, 2 * band);
    let mut right = Mat::<f64>::zeros(n, 2 * band);
    let mut k = 0;
    // Panel: columns k..k + band, rows k + band..n; the reduction is done once it has ≤ 1 row.
    while k + band + 1 < n {
        let m = n - k - band;
        let width = band.min(m);
        let (mut v, t) =
            culturelens_simd::dispatch!(panel_qr(a.rb_mut().submatrix_mut(k + band, k, m, band)));
        let v = v.as_mut().subcols_mut(0, width);
        let a22 = a.rb_mut().submatrix_mut(k + band, k + band, m, m);
        let left = left.as_mut().submatrix_mut(0, 0, m, 2 * width);
        let right = right.as_mut().submatrix_mut(0, 0, m, 2 * width);
        two_sided_update(a22, v.rb(), t.as_ref(), left, right, par);
        k += band;
    }
}

/// Householder QR of the `m × w` panel in place: `R` stays in its upper triangle, zeros below.
/// Returns the reflectors `V` (`m × w`, unit lower trapezoidal) and the upper triangular `T` of
/// their compact WY form `H₀ H₁ ⋯ = I − V T Vᵀ` (LAPACK's `dlarft`, forward, columnwise).
#[inline(always)]
fn panel_qr(mut p: MatMut<'_, f64>) -> (Mat<f64>, Mat<f64>) {
    let (m, w) = (p.nrows(), p.ncols());
    let r = w.min(m);
    let mut v = Mat::<f64>::zeros(m, w);
    let mut tau = vec![0.0; r];
    let mut x = vec![0.0; m];
    for (c, tau_c) in tau.iter_mut().enumerate() {
        let len = m - c;
        let col = column(p.rb_mut(), c, c, len);
        x[..len].copy_from_slice(col);
        let (t, beta) = householder(&mut x[..len]);
        *tau_c = t;
        x[0] = 1.0;
        col.fill(0.0);
        col[0] = beta;
        column(v.as_mut(), c, c, len).copy_from_slice(&x[..len]);
        if t != 0.0 {
            // P[c.., c+1..] −= τ v (vᵀ P[c.., c+1..])
            for j in c + 1..w {
                let col = column(p.rb_mut(), j, c, len);
                let s = t * dot(&x[..len], col);
                axpy(col, -s, &x[..len]);
            }
        }
    }
    // T: T[c, c] = τ_c, T[..c, c] = −τ_c T[..c, ..c] (V[:, ..c]ᵀ v_c).
    let mut vtv = Mat::<f64>::zeros(r, r);
    matmul(
        vtv.as_mut(),
        Accum::Replace,
        v.as_ref().subcols(0, r).transpose(),
        v.as_ref().subcols(0, r),
        1.0,
        Par::Seq,
    );
    let mut t = Mat::<f64>::zeros(r, r);
    for c in 0..r {
        t[(c, c)] = tau[c];
        for i in 0..c {
            let s: f64 = (i..c).map(|l| t[(i, l)] * vtv[(l, c)]).sum();
            t[(i, c)] = -tau[c] * s;
        }
    }
    (v, t)
}

/// Rows `start..start + len` of column `j` of a column-major view, as a slice.
#[inline(always)]
fn column<'a>(m: MatMut<'a, f64>, j: usize, start: usize, len: usize) -> &'a mut [f64] {
    m.col_mut(j).subrows_mut(start, len).try_as_col_major_mut().expect("a column-major matrix").as_slice_mut()
}

/// `A ← Qᵀ A Q` for `Q = I − V T Vᵀ` and symmetric `A`, of which only the lower triangle is read
/// and written, as one symmetric rank-`2w` update: `W = A V T`, `Y = W − ½ V (Tᵀ Vᵀ W)`,
/// `A ← A − Y Vᵀ − V Yᵀ` (`A V` as `tril(A) V + stril(A)ᵀ V`). `left` and `right` (`m × 2w`)
/// are work space: they end as `[Y V]` and `[V Y]`.
fn two_sided_update(
    mut a: MatMut<'_, f64>,
    v: MatRef<'_, f64>,
    t: MatRef<'_, f64>,
    mut left: MatMut<'_, f64>,
    mut right: MatMut<'_, f64>,
    par: Par,
) {
    use faer::linalg::matmul::triangular::{BlockStructure::*, matmul as tri};
    let w = v.ncols();
    // A V into the right half of `right` (free until the end).
    let mut av = right.rb_mut().subcols_mut(w, w);
    tri(av.rb_mut(), Rectangular, Accum::Replace, a.rb(), TriangularLower, v, Rectangular, 1.0, par);
    tri(
        av.rb_mut(),
        Rectangular,
        Accum::Add,
        a.rb().transpose(),
        StrictTriangularUpper,
        v,
        Rectangular,
        1.0,
        par,
    );
    let (mut y, mut v_copy) = left.rb_mut().split_at_col_mut(w);
    matmul(y.rb_mut(), Accum::Replace, av.rb(), t, 1.0, Par::Seq);
    let mut vtw = Mat::<f64>::zeros(w, w);
    matmul(vtw.as_mut(), Accum::Replace, v.transpose(), y.rb(), 1.0, Par::Seq);
    let mut half = Mat::<f64>::zeros(w, w);
    matmul(half.as_mut(), Accum::Replace, t.transpose(), vtw.as_ref(), 0.5, Par::Seq);
    matmul(y.rb_mut(), Accum::Add, v, half.as_ref(), -1.0, Par::Seq);
    v_copy.copy_from(v);
    right.rb_mut().subcols_mut(0, w).copy_from(v);
    right.rb_mut().subcols_mut(w, w).copy_from(y.rb());
    // [Y V] [V Y]ᵀ in one product of inner size 2w, lower triangle only.
    tri(
        a.rb_mut(),
        TriangularLower,
        Accum::Add,
        left.rb(),
        Rectangular,
        right.rb().transpose(),
        Rectangular,
        -1.0,
        par,
    );
}

/// Stage 2: reduces the symmetric band (half-width `band`, lower triangle of `a`) to
/// tridiagonal form by bulge chasing and returns its diagonal and sub-diagonal.
///
/// Sweep `j` annihilates column `j` below its sub-diagonal with a reflector on rows
/// `j+1..=j+band` (applied to the diagonal block on both sides), which fills the block below it
/// (a bulge); step `s` of the sweep applies the previous reflector from the right to the block
/// `s` rows further down, annihilates that block's first column with a new reflector (applied
/// from the left to the rest of the block and to the next diagonal block on both sides), and so
/// on to the bottom. What remains of each bulge lies where the next sweeps annihilate it.
pub fn band_to_tridiagonal(data: &mut [f64], n: usize, band: usize) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(data.len(), n * n, "a column-major n × n matrix");
    let mut band_matrix = Band { data, n };
    let (mut v, mut w) = (vec![0.0; band], vec![0.0; band]);
    culturelens_simd::dispatch!({
        for j in 0..n.saturating_sub(2) {
            sweep(&mut band_matrix, j, band, &mut v, &mut w);
        }
    });
    let at = |i: usize, j: usize| band_matrix.data[j * n + i];
    let diag = (0..n).map(|i| at(i, i)).collect();
    let sub = (0..n.saturating_sub(1)).map(|i| at(i + 1, i)).collect();
    (diag, sub)
}

/// The column-major `n × n` matrix being chased.
struct Band<'a> {
    data: &'a mut [f64],
    n: usize,
}

impl Band<'_> {
    /// Rows `row..row + len` of column `col`.
    #[inline(always)]
    fn segment(&mut self, col: usize, row: usize, len: usize) -> &mut [f64] {
        &mut self.data[col * self.n + row..col * self.n + row + len]
    }
}

/// Sweep `j` of [`band_to_tridiagonal`].
#[inline(always)]
fn sweep(a: &mut Band<'_>, j: usize, band: usize, v: &mut [f64], w: &mut [f64]) {
    let n = a.n;
    // Step 0: column j, rows j+1..=j+band.
    let mut rows = j + 1..(j + band + 1).min(n);
    let col = a.segment(j, rows.start, rows.len());
    let len = col.len();
    v[..len].copy_from_slice(col);
    let (mut tau, beta) = householder(&mut v[..len]);
    v[0] = 1.0;
    col.fill(0.0);
    col[0] = beta;
    symmetric_two_sided(a, rows.start, &v[..len], tau, w);
    loop {
        let below = rows.end..(rows.end + band).min(n);
        if below.is_empty() {
            break;
        }
        let (plen, blen) = (rows.len(), below.len());
        // The block B: rows `below`, columns `rows`.
        let (b0, c0) = (below.start, rows.start);
        // Right: B ← B (I − τ v vᵀ).
        if tau != 0.0 {
            let w = &mut w[..blen];
            w.fill(0.0);
            for (c, &vc) in v[..plen].iter().enumerate() {
                axpy(w, vc, a.segment(c0 + c, b0, blen));
            }
            for (c, &vc) in v[..plen].iter().enumerate() {
                axpy(a.segment(c0 + c, b0, blen), -tau * vc, w);
            }
        }
        // New reflector from the block's first column; left-apply it to the other columns.
        let first = a.segment(c0, b0, blen);
        v[..blen].copy_from_slice(first);
        let (t, beta) = householder(&mut v[..blen]);
        tau = t;
        v[0] = 1.0;
        first.fill(0.0);
        first[0] = beta;
        if tau != 0.0 {
            for c in 1..plen {
                let col = a.segment(c0 + c, b0, blen);
                let s = tau * dot(&v[..blen], col);
                axpy(col, -s, &v[..blen]);
            }
        }
        symmetric_two_sided(a, below.start, &v[..blen], tau, w);
        rows = below;
    }
}

/// `D ← H D H` for `H = I − τ v vᵀ` and the symmetric diagonal block `D` of `a` starting at
/// row and column `at`, of which only the lower triangle is read and written:
/// `w = τ D v`, `w −= ½ τ (vᵀ w) v`, `D −= v wᵀ + w vᵀ`.
#[inline(always)]
fn symmetric_two_sided(a: &mut Band<'_>, at: usize, v: &[f64], tau: f64, w: &mut [f64]) {
    if tau == 0.0 {
        return;
    }
    let len = v.len();
    let w = &mut w[..len];
    w.fill(0.0);
    for c in 0..len {
        let col = a.segment(at + c, at + c, len - c);
        // col[0] is the diagonal entry D[c, c]; col[1..] the entries below it.
        w[c] += col[0] * v[c] + dot(&col[1..], &v[c + 1..]);
        axpy(&mut w[c + 1..], v[c], &col[1..]);
    }
    for wi in w.iter_mut() {
        *wi *= tau;
    }
    let alpha = -0.5 * tau * dot(v, w);
    axpy(w, alpha, v);
    for c in 0..len {
        let col = a.segment(at + c, at + c, len - c);
        axpy(col, -w[c], &v[c..]);
        axpy(col, -v[c], &w[c..]);
    }
}

/// `y += alpha · x`.
#[inline(always)]
fn axpy(y: &mut [f64], alpha: f64, x: &[f64]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += alpha * x;
    }
}

/// `xᵀ y` summed in eight interleaved partial sums (so it vectorises; the order is fixed, so
/// every instruction set gives the same value).
#[inline(always)]
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let len = x.len().min(y.len());
    let (x, y) = (&x[..len], &y[..len]);
    let mut acc = [0.0f64; 8];
    let mut xs = x.chunks_exact(8);
    let mut ys = y.chunks_exact(8);
    for (xc, yc) in (&mut xs).zip(&mut ys) {
        for l in 0..8 {
            acc[l] += xc[l] * yc[l];
        }
    }
    for (l, (a, b)) in xs.remainder().iter().zip(ys.remainder()).enumerate() {
        acc[l] += a * b;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// Ascending eigenvalues of the symmetric tridiagonal matrix with diagonal `diag` and
/// sub-diagonal `sub` (stage 3): the Pal–Walker–Kahan root-free QL iteration (as LAPACK's `dsterf`), on
/// the matrix scaled by a power of two so its largest entry is near 1; faer's implicit QR if
/// it does not converge in `30 n` sweeps.
fn tridiagonal_eigenvalues(diag: &[f64], sub: &[f64]) -> Vec<f64> {
    let max = diag.iter().chain(sub).fold(0.0f64, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return faer_tridiagonal_eigenvalues(diag, sub);
    }
    // 2^-e with 2^e ≥ max: exact scaling.
    let scale = 2f64.powi(-(max.log2().ceil() as i32));
    let mut d: Vec<f64> = diag.iter().map(|x| x * scale).collect();
    let mut e2: Vec<f64> = sub.iter().map(|x| (x * scale) * (x * scale)).collect();
    e2.push(0.0);
    if !pwk_ql(&mut d, &mut e2) {
        return faer_tridiagonal_eigenvalues(diag, sub);
    }
    let mut eig: Vec<f64> = d.iter().map(|x| x / scale).collect();
    eig.sort_by(f64::total_cmp);
    eig
}

/// Root-free QL on `d` and the squared sub-diagonal `e2` (`e2[n − 1] = 0`); the eigenvalues
/// are left in `d`. Returns false if some eigenvalue needs more than `30 n` sweeps.
fn pwk_ql(d: &mut [f64], e2: &mut [f64]) -> bool {
    let n = d.len();
    let eps2 = f64::EPSILON * f64::EPSILON;
    let mut budget = 30 * n;
    let mut l = 0;
    while l < n {
        // The first negligible e[m], m ≥ l, splits off the block l..=m.
        let mut m = l;
        while m + 1 < n && e2[m] > eps2 * (d[m] * d[m + 1]).abs() {
            m += 1;
        }
        if m + 1 < n {
            e2[m] = 0.0;
        }
        if m == l {
            l += 1;
            continue;
        }
        if m == l + 1 {
            let (r1, r2) = eigenvalues_2x2(d[l], e2[l].sqrt(), d[l + 1]);
            d[l] = r1;
            d[l + 1] = r2;
            e2[l] = 0.0;
            l += 2;
            continue;
        }
        if budget == 0 {
            return false;
        }
        budget -= 1;
        // Wilkinson's shift from the leading 2 × 2 block.
        let rte = e2[l].sqrt();
        let t = (d[l + 1] - d[l]) / (2.0 * rte);
        let r = t.hypot(1.0);
        let sigma = d[l] - rte / (t + r.copysign(t));
        let (mut c, mut s) = (1.0, 0.0);
        let mut gamma = d[m] - sigma;
        let mut p = gamma * gamma;
        for i in (l..m).rev() {
            let bb = e2[i];
            let r = p + bb;
            if i + 1 != m {
                e2[i + 1] = s * r;
            }
            let old_c = c;
            c = p / r;
            s = bb / r;
            let old_gamma = gamma;
            let alpha = d[i];
            gamma = c * (alpha - sigma) - s * old_gamma;
            d[i + 1] = old_gamma + (alpha - gamma);
            p = if c != 0.0 { gamma * gamma / c } else { old_c * bb };
        }
        e2[l] = s * p;
        d[l] = sigma + gamma;
    }
    true
}

/// Eigenvalues of `[[a, b], [b, c]]`, larger first, the smaller one from the determinant to
/// avoid cancellation (LAPACK's `dlae2`).
fn eigenvalues_2x2(a: f64, b: f64, c: f64) -> (f64, f64) {
    let sum = a + c;
    let rt = (a - c).hypot(2.0 * b);
    let (big, small) = if a.abs() > c.abs() { (a, c) } else { (c, a) };
    if sum > 0.0 {
        let r1 = 0.5 * (sum + rt);
        (r1, (big / r1) * small - (b / r1) * b)
    } else if sum < 0.0 {
        let r1 = 0.5 * (sum - rt);
        (r1, (big / r1) * small - (b / r1) * b)
    } else {
        (0.5 * rt, -0.5 * rt)
    }
}

/// faer's implicit QR without eigenvectors, ascending.
fn faer_tridiagonal_eigenvalues(diag: &[f64], sub: &[f64]) -> Vec<f64> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    let n = diag.len();
    let d = faer::ColRef::from_slice(diag);
    let mut e = sub.to_vec();
    e.push(0.0);
    let e = faer::ColRef::from_slice(&e);
    let mut s = faer::diag::Diag::<f64>::zeros(n);
    let scratch =
        faer::linalg::temp_mat_scratch::<f64>(n, 1).and(faer::linalg::temp_mat_scratch::<f64>(n, 1));
    faer::linalg::evd::tridiagonal_self_adjoint_evd(
        d.as_diagonal(),
        e.as_diagonal(),
        s.as_mut(),
        None,
        Par::Seq,
        MemStack::new(&mut MemBuffer::new(scratch)),
        Default::default(),
    )
    .expect("the tridiagonal QR algorithm converges on finite input");
    let mut eig: Vec<f64> = s.column_vector().iter().copied().collect();
    eig.sort_by(f64::total_cmp);
    eig
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [−1, 1) (a 64-bit LCG), so the tests need no RNG crate.
    fn values(seed: u64, count: usize) -> Vec<f64> {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..count)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    fn random_symmetric(n: usize, seed: u64) -> Vec<f64> {
        let r = values(seed, n * n);
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                a[i * n + j] = r[i * n + j];
                a[j * n + i] = r[i * n + j];
            }
        }
        a
    }

    fn faer_eigenvalues(a: &[f64], n: usize) -> Vec<f64> {
        faer::MatRef::from_row_major_slice(a, n, n).self_adjoint_eigenvalues(faer::Side::Lower).unwrap()
    }

    fn max_diff(a: &[f64], b: &[f64]) -> f64 {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
    }

    #[test]
    fn householder_maps_x_onto_beta_e1() {
        // x = (3, 4): ‖x‖ = 5, β = −5 (opposite sign to x₀), τ = (β − α)/β = 8/5, v = (1, 4/8).
        let mut x = [3.0, 4.0];
        let (tau, beta) = householder(&mut x);
        assert_eq!(beta, -5.0);
        assert!((tau - 1.6).abs() < 1e-15);
        assert!((x[1] - 0.5).abs() < 1e-15);
        // H x = x − τ v (vᵀ x) with x the original (3, 4).
        let vtx = 3.0 + 0.5 * 4.0;
        assert!((3.0 - tau * vtx - beta).abs() < 1e-14 && (4.0 - tau * 0.5 * vtx).abs() < 1e-14);
        let mut zero_tail = [2.0, 0.0, 0.0];
        assert_eq!(householder(&mut zero_tail), (0.0, 2.0));
    }

    #[test]
    fn a_known_spectrum_is_recovered() {
        // Q diag(λ) Qᵀ with Q a product of reflectors: the eigenvalues are λ exactly.
        let n = 70;
        let lambda: Vec<f64> = (0..n).map(|i| (i as f64 - 20.0) * 0.37).collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            a[i * n + i] = lambda[i];
        }
        for r in 0..3u64 {
            let u = values(100 + r, n);
            let norm2: f64 = u.iter().map(|x| x * x).sum();
            // A ← H A H, H = I − 2 u uᵀ / ‖u‖².
            let au: Vec<f64> = (0..n).map(|i| (0..n).map(|j| a[i * n + j] * u[j]).sum()).collect();
            let uau: f64 = u.iter().zip(&au).map(|(x, y)| x * y).sum();
            let c = 2.0 / norm2;
            for i in 0..n {
                for j in 0..n {
                    a[i * n + j] += -c * (u[i] * au[j] + au[i] * u[j]) + c * c * uau * u[i] * u[j];
                }
            }
        }
        let mut want = lambda.clone();
        want.sort_by(f64::total_cmp);
        for band in [1, 2, 5, 8, 32] {
            let got = two_stage_eigenvalues(&a, n, band);
            assert!(max_diff(&got, &want) < 1e-12, "band {band}: {}", max_diff(&got, &want));
        }
    }

    #[test]
    fn agrees_with_the_one_stage_solver_at_every_size_and_band() {
        for (n, seed) in
            [(1, 1), (2, 2), (3, 3), (4, 4), (9, 5), (33, 6), (64, 7), (65, 8), (130, 9), (301, 10)]
        {
            let a = random_symmetric(n, seed);
            let want = faer_eigenvalues(&a, n);
            for band in [1, 2, 3, 4, 7, 8, 16, 32, 200] {
                let got = two_stage_eigenvalues(&a, n, band);
                let tol = 1e-13 * n as f64;
                assert!(max_diff(&got, &want) < tol, "n {n}, band {band}: {}", max_diff(&got, &want));
            }
        }
    }

    /// At an order the public path reduces in two stages (≥ `TWO_STAGE_MIN` = 512), every SIMD
    /// path the CPU can execute (`culturelens_simd::available`) gives the same bits, and faer's
    /// one-stage values to round-off.
    #[test]
    fn every_simd_path_gives_the_same_bits_at_a_two_stage_order() {
        let n = 520;
        let a = random_symmetric(n, 11);
        let want = faer_eigenvalues(&a, n);
        let levels = culturelens_simd::available();
        let mut first: Option<Vec<f64>> = None;
        for &level in &levels {
            culturelens_simd::force(Some(level)).unwrap();
            let got = two_stage_eigenvalues(&a, n, BAND);
            culturelens_simd::force(None).unwrap();
            let diff = max_diff(&got, &want);
            println!("{level:?}: max |two-stage − faer| {diff:.1e}");
            assert!(diff < 1e-13 * n as f64, "{level:?}: {diff:e}");
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            match &first {
                None => first = Some(got),
                Some(f) => assert_eq!(bits(&got), bits(f), "{level:?} differs from scalar"),
            }
        }
    }

    #[test]
    fn root_free_ql_agrees_with_faer_on_tridiagonal_matrices() {
        for (n, seed) in [(1, 31), (2, 32), (3, 33), (50, 34), (300, 35)] {
            let d = values(seed, n);
            let mut e = values(seed + 100, n.saturating_sub(1));
            // Some exact zeros (split blocks) and a graded stretch.
            for (i, x) in e.iter_mut().enumerate() {
                if i % 17 == 5 {
                    *x = 0.0;
                }
                if i % 23 == 7 {
                    *x *= 1e-9;
                }
            }
            let got = tridiagonal_eigenvalues(&d, &e);
            let want = faer_tridiagonal_eigenvalues(&d, &e);
            assert!(max_diff(&got, &want) < 1e-14 * n as f64, "n {n}: {}", max_diff(&got, &want));
            // Scaled by 2^600 and 2^-600: the same eigenvalues, scaled.
            for k in [600, -600] {
                let f = 2f64.powi(k);
                let ds: Vec<f64> = d.iter().map(|x| x * f).collect();
                let es: Vec<f64> = e.iter().map(|x| x * f).collect();
                let scaled: Vec<f64> = tridiagonal_eigenvalues(&ds, &es).iter().map(|x| x / f).collect();
                assert_eq!(scaled, got, "n {n}, scale 2^{k}");
            }
        }
        // [[2, 1], [1, 2]] → 1, 3; [[0, 1], [1, 0]] → −1, 1.
        assert_eq!(tridiagonal_eigenvalues(&[2.0, 2.0], &[1.0]), vec![1.0, 3.0]);
        assert_eq!(tridiagonal_eigenvalues(&[0.0, 0.0], &[1.0]), vec![-1.0, 1.0]);
        assert_eq!(tridiagonal_eigenvalues(&[0.0, 0.0, 0.0], &[0.0, 0.0]), vec![0.0; 3]);
    }

    #[test]
    fn dot_sums_in_its_fixed_order() {
        let x: Vec<f64> = (1..=19).map(f64::from).collect();
        assert_eq!(dot(&x, &x), (1..=19).map(|i| (i * i) as f64).sum::<f64>());
        assert_eq!(dot(&[], &[]), 0.0);
    }

    #[test]
    fn reads_only_the_lower_triangle() {
        let n = 40;
        let a = random_symmetric(n, 11);
        let mut lower = a.clone();
        for i in 0..n {
            for j in i + 1..n {
                lower[i * n + j] = f64::NAN;
            }
        }
        assert_eq!(two_stage_eigenvalues(&lower, n, 8), two_stage_eigenvalues(&a, n, 8));
    }

    #[test]
    fn a_rank_deficient_gram_matrix_keeps_its_zero_eigenvalues_at_round_off() {
        // XᵀX with X 20 × 90: rank 20, so 70 eigenvalues are zero up to n·ε·λ_max.
        let (rows, d) = (20, 90);
        let x = values(21, rows * d);
        let mut g = vec![0.0; d * d];
        for i in 0..d {
            for j in 0..d {
                g[i * d + j] = (0..rows).map(|r| x[r * d + i] * x[r * d + j]).sum();
            }
        }
        let got = two_stage_eigenvalues(&g, d, 16);
        let want = faer_eigenvalues(&g, d);
        let max = want[d - 1];
        assert!(max_diff(&got, &want) < 1e-13 * max * d as f64);
        assert!(got[..d - rows].iter().all(|l| l.abs() < d as f64 * f64::EPSILON * max));
        assert!(got[d - rows..].iter().all(|l| *l > 1e-3 * max));
    }
}
