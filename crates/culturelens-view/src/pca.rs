//! The host half of the scatter's PCA (SoS paper App. E): which rows estimate the covariance,
//! and the two leading eigenvectors of the covariance by power iteration with deflation (f64).
//! The device half (normalise, covariance product, projection) is `web/src/pca.rs`.

/// Rows used to estimate the covariance.
pub const SAMPLE_ROWS: usize = 4096;
/// Power-iteration steps per axis.
pub const POWER_ITERATIONS: usize = 200;

/// The evenly strided sample of at most [`SAMPLE_ROWS`] of `n` rows: every `⌈n / SAMPLE_ROWS⌉`-th.
pub fn sample_rows(n: usize) -> Vec<u32> {
    let stride = n.div_ceil(SAMPLE_ROWS).max(1);
    (0..n).step_by(stride).map(|i| i as u32).collect()
}

/// The two leading unit eigenvectors of the symmetric `d × d` matrix `cov` (row-major); the
/// second is orthogonal to the first. Signs follow the power iteration's fixed start vector.
pub fn principal_axes(cov: &[f64], d: usize) -> [Vec<f64>; 2] {
    assert_eq!(cov.len(), d * d, "the covariance is d × d");
    let v1 = leading_eigenvector(cov, d, None);
    let v2 = leading_eigenvector(cov, d, Some(&v1));
    [v1, v2]
}

/// Power iteration on the symmetric `d × d` matrix `a`, orthogonal to `deflate` when given.
fn leading_eigenvector(a: &[f64], d: usize, deflate: Option<&[f64]>) -> Vec<f64> {
    let mut v: Vec<f64> = (0..d).map(|k| 1.0 + (k as f64 * 0.618).fract()).collect();
    for _ in 0..POWER_ITERATIONS {
        if let Some(u) = deflate {
            let dot: f64 = v.iter().zip(u).map(|(a, b)| a * b).sum();
            v.iter_mut().zip(u).for_each(|(a, b)| *a -= dot * b);
        }
        let mut w: Vec<f64> = (0..d).map(|i| (0..d).map(|j| a[i * d + j] * v[j]).sum()).collect();
        let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm == 0.0 {
            break;
        }
        w.iter_mut().for_each(|x| *x /= norm);
        v = w;
    }
    v
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
