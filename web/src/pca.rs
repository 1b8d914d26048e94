//! 2-D PCA of the embeddings for the scatter view (SoS paper App. E), on the compute device.
//!
//! Rows are L2-normalised (as SoS does). The covariance is estimated from an evenly strided
//! sample of at most [`SAMPLE_ROWS`] rows (a d × d product on the device, read back
//! asynchronously), its two leading eigenvectors come from power iteration with deflation on the
//! host (f64), and every row is projected on the device.

use burn::tensor::{Int, Tensor, TensorData};

/// Rows used to estimate the covariance.
pub const SAMPLE_ROWS: usize = 4096;
const POWER_ITERATIONS: usize = 200;

/// Row-major N × 2 coordinates on the first two principal components.
pub async fn pca2(table: &Tensor<2>) -> Result<Vec<f32>, String> {
    let [n, d] = table.dims();
    let device = table.device();
    let x = table.clone();
    let x = x.clone() / x.square().sum_dim(1).sqrt();
    let stride = n.div_ceil(SAMPLE_ROWS).max(1);
    let idx: Vec<i32> = (0..n).step_by(stride).map(|i| i as i32).collect();
    let m = idx.len();
    let sample = x.clone().select(0, Tensor::<1, Int>::from_data(TensorData::new(idx, [m]), &device));
    let mean = sample.clone().mean_dim(0);
    let centred = sample - mean.clone();
    let cov = centred.clone().transpose().matmul(centred);
    let cov: Vec<f32> = cov
        .into_data_async()
        .await
        .map_err(|e| format!("{e:?}"))?
        .try_to_vec::<f32>()
        .map_err(|e| format!("{e:?}"))?;
    let cov: Vec<f64> = cov.into_iter().map(f64::from).collect();
    let v1 = leading_eigenvector(&cov, d, None);
    let v2 = leading_eigenvector(&cov, d, Some(&v1));
    let basis: Vec<f32> = (0..d).flat_map(|k| [v1[k] as f32, v2[k] as f32]).collect();
    let basis = Tensor::<2>::from_data(TensorData::new(basis, [d, 2]), &device);
    let coords = (x - mean).matmul(basis);
    coords
        .into_data_async()
        .await
        .map_err(|e| format!("{e:?}"))?
        .try_to_vec::<f32>()
        .map_err(|e| format!("{e:?}"))
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
