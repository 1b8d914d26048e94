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
