//! 2-D PCA of the embeddings for the scatter view (SoS paper App. E), on the compute device.
//!
//! Rows are L2-normalised (as SoS does). The covariance is estimated from an evenly strided sample of the
//! rows (`culturelens_view::pca::sample_rows`; a d × d product on the device, read back asynchronously), its
//! two leading eigenvectors come from block (subspace) iteration with Rayleigh–Ritz on the host (f64,
//! `culturelens_view::pca::principal_axes`), and every row is projected on the device, part by part of the
//! table.

use burn::tensor::{Tensor, TensorData};
use culturelens_view::pca::{principal_axes, sample_rows};

use crate::compute::read_f32;
use crate::table::DeviceTable;

/// Rows scaled to unit length.
fn unit(x: Tensor<2>) -> Tensor<2> {
    x.clone() / x.square().sum_dim(1).sqrt()
}

/// Row-major N × 2 coordinates on the first two principal components.
pub async fn pca2(table: &DeviceTable) -> Result<Vec<f32>, String> {
    let (n, d) = (table.rows(), table.dim());
    let sample = unit(table.gather(&sample_rows(n)));
    let mean = sample.clone().mean_dim(0);
    let centred = sample - mean.clone();
    let cov = read_f32(centred.clone().transpose().matmul(centred)).await?;
    let cov: Vec<f64> = cov.into_iter().map(f64::from).collect();
    let [v1, v2] = principal_axes(&cov, d);
    let basis: Vec<f32> = (0..d).flat_map(|k| [v1[k] as f32, v2[k] as f32]).collect();
    let basis = Tensor::<2>::from_data(TensorData::new(basis, [d, 2]), table.device());
    let coords: Vec<Tensor<2>> = table
        .blocks(None, None)
        .into_iter()
        .map(|x| (unit(x) - mean.clone()).matmul(basis.clone()))
        .collect();
    read_f32(Tensor::cat(coords, 0)).await
}
