//! 2-D PCA of the embeddings for the scatter view (SoS paper App. E), on the compute device.
//!
//! Rows are L2-normalised (as SoS does). The covariance is estimated from an evenly strided
//! sample of the rows (`culturelens_view::pca::sample_rows`; a d × d product on the device, read
//! back asynchronously), its two leading eigenvectors come from power iteration with deflation on
//! the host (f64, `culturelens_view::pca::principal_axes`), and every row is projected on the
//! device.

use burn::tensor::{Tensor, TensorData};
use culturelens_core::sos::id_tensor;
use culturelens_view::pca::{principal_axes, sample_rows};

use crate::compute::read_f32;

/// Row-major N × 2 coordinates on the first two principal components.
pub async fn pca2(table: &Tensor<2>) -> Result<Vec<f32>, String> {
    let [n, d] = table.dims();
    let device = table.device();
    let x = table.clone();
    let x = x.clone() / x.square().sum_dim(1).sqrt();
    let sample = x.clone().select(0, id_tensor(&sample_rows(n), &device));
    let mean = sample.clone().mean_dim(0);
    let centred = sample - mean.clone();
    let cov = read_f32(centred.clone().transpose().matmul(centred)).await?;
    let cov: Vec<f64> = cov.into_iter().map(f64::from).collect();
    let [v1, v2] = principal_axes(&cov, d);
    let basis: Vec<f32> = (0..d).flat_map(|k| [v1[k] as f32, v2[k] as f32]).collect();
    let basis = Tensor::<2>::from_data(TensorData::new(basis, [d, 2]), &device);
    read_f32((x - mean).matmul(basis)).await
}
