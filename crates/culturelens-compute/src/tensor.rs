//! Tensor helpers that every device computation shares, named after the math rather than a
//! paper: unit rows, cosine matrices and paired cosines, and integer id tensors for gathers and
//! scatters. Used by SoS, the zero-shot classifier and the CLI's CulText2I, CLIPScore and MAGBIG
//! commands, and by the browser app.

use burn::tensor::{Device, Int, Tensor, TensorData};

/// `cos(a_i, b_j)` for every row pair: rows L2-normalised, then `a · bᵀ` (`[n_a, n_b]`). A zero
/// row gives NaN; callers reject zero embeddings first.
pub fn cosine_tensor(a: Tensor<2>, b: Tensor<2>) -> Tensor<2> {
    unit_rows(a).matmul(unit_rows(b).transpose())
}

/// `cos(a_i, b_i)` of matching rows (`[n]`), e.g. each image against its own prompt.
pub fn paired_cosine_tensor(a: Tensor<2>, b: Tensor<2>) -> Tensor<1> {
    let [n, _] = a.dims();
    (unit_rows(a) * unit_rows(b)).sum_dim(1).reshape([n])
}

/// CLIPScore (Hessel et al., 2021; SoS §4.2) of paired rows: `cos(image_i, caption_i)` of two
/// `n × dim` row-major tables on `device`, and `w · max(cos, 0)`
/// (`culturelens_metrics::validation::clipscore`), as `culturelens clipscore` and the Python
/// `culturelens.clipscore` write them.
pub fn clip_scores(
    images: Vec<f32>,
    captions: Vec<f32>,
    dim: usize,
    w: f64,
    device: &Device,
) -> Vec<(f32, f64)> {
    let n = images.len() / dim.max(1);
    let upload = |rows: Vec<f32>| Tensor::<2>::from_data(TensorData::new(rows, [n, dim]), device);
    let cos = paired_cosine_tensor(upload(images), upload(captions)).into_data();
    let cos = cos.convert::<f32>().try_to_vec::<f32>().expect("f32 data");
    cos.into_iter().map(|c| (c, culturelens_metrics::validation::clipscore(f64::from(c), w))).collect()
}

/// Each row divided by its L2 norm.
pub fn unit_rows(x: Tensor<2>) -> Tensor<2> {
    let norm = (x.clone() * x.clone()).sum_dim(1).sqrt();
    x / norm
}

/// `values` as an integer tensor on `device` (row indices for `select`, group ids for
/// `select_assign`).
pub fn id_tensor(values: &[u32], device: &Device) -> Tensor<1, Int> {
    let v: Vec<i32> = values.iter().map(|&x| x as i32).collect();
    let len = v.len();
    Tensor::<1, Int>::from_data(TensorData::new(v, [len]), device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_tensor_by_hand() {
        let device = Device::flex();
        let a = Tensor::<2>::from_data(TensorData::new(vec![3.0f32, 4.0, 0.0, 2.0], [2, 2]), &device);
        let b = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 0.0, 1.0, 1.0], [2, 2]), &device);
        let got: Vec<f32> = cosine_tensor(a, b).into_data().try_to_vec::<f32>().unwrap();
        // (3,4)/5 against (1,0) and (1,1)/√2; (0,1) against the same.
        let want = [0.6, 1.4 / 2f32.sqrt(), 0.0, 1.0 / 2f32.sqrt()];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?}");
        }
    }
}
