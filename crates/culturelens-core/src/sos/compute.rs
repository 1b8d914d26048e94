//! Per-output SoS on a Burn device (SoS paper Eq. (1)), written once for every backend.
//!
//! The work is tensor-only and ends in one packed 1-D tensor, so the caller reads it back with a
//! single synchronous (`into_data`) or asynchronous (`into_data_async`, browser) read and hands
//! the values to [`unpack`].

use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};

use super::layout::SosLayout;

/// A reference vector whose unit-vector mean is shorter than this has no usable direction.
pub const MIN_REFERENCE_NORM: f32 = 1e-6;

/// Uploads `embeddings` (row-major N × d) and the layout's group ids, and builds the packed
/// result tensor `[sos_0 … sos_{N-1}, |sur_g| …, |sem_g| …]` (see [`sos_tensor`]).
pub fn sos_on_device(embeddings: &[f32], dim: usize, layout: &SosLayout, device: &Device) -> Tensor<1> {
    let n = layout.len();
    assert_eq!(embeddings.len(), n * dim, "embeddings must be N × d with N = number of outputs");
    let emb = Tensor::<2>::from_data(TensorData::new(embeddings.to_vec(), [n, dim]), device);
    let ids = |g: &[u32]| {
        let v: Vec<i32> = g.iter().map(|x| *x as i32).collect();
        Tensor::<1, Int>::from_data(TensorData::new(v, [n]), device)
    };
    sos_tensor(
        emb,
        ids(&layout.sur_group),
        layout.sur_names.len(),
        ids(&layout.sem_group),
        layout.sem_names.len(),
    )
}

/// SoS paper Eq. (1) for every output, as tensors:
///
/// 1. `e_o ← e_o / ‖e_o‖` (embeddings are L2-normalised first);
/// 2. `sur_l = Σ_{o∈O_l} e_o`, `sem_c = Σ_{o∈O_c} e_o` (the means of the paper, up to the positive
///    factor `1/|O|`, which cosine ignores; the output itself is included);
/// 3. `SoS(o) = cos(sem_c, e_o) − cos(sur_l, e_o)`.
///
/// Returns `[SoS(o) for o in 0..N] ++ [‖sur_g‖/|O_g|] ++ [‖sem_g‖/|O_g|]` without the division by
/// group size (the caller divides; see [`unpack`]), i.e. the norms of the group *sums*.
pub fn sos_tensor(
    emb: Tensor<2>,
    sur_group: Tensor<1, Int>,
    n_sur: usize,
    sem_group: Tensor<1, Int>,
    n_sem: usize,
) -> Tensor<1> {
    let [n, _] = emb.dims();
    let unit = l2_normalize_rows(emb);
    let (cos_sur, sur_norm) = cosine_to_group_reference(unit.clone(), sur_group, n_sur);
    let (cos_sem, sem_norm) = cosine_to_group_reference(unit, sem_group, n_sem);
    let sos = (cos_sem - cos_sur).reshape([n]);
    Tensor::cat(vec![sos, sur_norm.reshape([n_sur]), sem_norm.reshape([n_sem])], 0)
}

/// Rows divided by their L2 norm.
pub fn l2_normalize_rows(x: Tensor<2>) -> Tensor<2> {
    let norm = x.clone().square().sum_dim(1).sqrt();
    x / norm
}

/// For unit rows `unit` and a group id per row: the cosine of each row with the sum of its group,
/// and the norm of every group sum (`[G, 1]`).
fn cosine_to_group_reference(
    unit: Tensor<2>,
    group: Tensor<1, Int>,
    groups: usize,
) -> (Tensor<2>, Tensor<2>) {
    let [_, d] = unit.dims();
    let sums = Tensor::<2>::zeros([groups, d], &unit.device()).select_assign(
        0,
        group.clone(),
        unit.clone(),
        IndexingUpdateOp::Add,
    );
    let norm = sums.clone().square().sum_dim(1).sqrt();
    let reference = sums / norm.clone().clamp_min(f32::MIN_POSITIVE);
    let cos = (unit * reference.select(0, group)).sum_dim(1);
    (cos, norm)
}

/// The read-back of [`sos_tensor`]: per-output scores and per-group reference norms.
#[derive(Debug, Clone, PartialEq)]
pub struct SosValues {
    /// SoS of every output, in row order.
    pub per_image: Vec<f32>,
    /// ‖mean of unit vectors‖ of each surface group, in `[0, 1]`.
    pub sur_mean_norm: Vec<f32>,
    /// ‖mean of unit vectors‖ of each semantic group, in `[0, 1]`.
    pub sem_mean_norm: Vec<f32>,
}

/// A reference vector without direction: its outputs' unit embeddings cancel out.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the {kind} reference of group `{group}` has near-zero norm ({norm:e}): its outputs' unit embeddings cancel, so cosines to it are undefined"
)]
pub struct DegenerateReference {
    pub kind: &'static str,
    pub group: String,
    pub norm: f32,
}

/// Splits the packed read-back of [`sos_tensor`] and checks that every reference has a direction.
pub fn unpack(data: TensorData, layout: &SosLayout) -> Result<SosValues, DegenerateReference> {
    let values: Vec<f32> = data.try_into_vec_as::<f32>().expect("SoS result tensor holds float values");
    let n = layout.len();
    let (n_sur, n_sem) = (layout.sur_names.len(), layout.sem_names.len());
    assert_eq!(values.len(), n + n_sur + n_sem, "packed SoS tensor has the wrong length");
    let (sur_count, sem_count) = layout.group_counts();
    let mean_norms = |norms: &[f32], counts: &[usize]| -> Vec<f32> {
        norms.iter().zip(counts).map(|(s, c)| s / *c as f32).collect()
    };
    let sur_mean_norm = mean_norms(&values[n..n + n_sur], &sur_count);
    let sem_mean_norm = mean_norms(&values[n + n_sur..], &sem_count);
    for (kind, norms, names) in
        [("surface", &sur_mean_norm, &layout.sur_names), ("semantic", &sem_mean_norm, &layout.sem_names)]
    {
        if let Some(g) = norms.iter().position(|v| *v < MIN_REFERENCE_NORM) {
            return Err(DegenerateReference { kind, group: names[g].clone(), norm: norms[g] });
        }
    }
    Ok(SosValues { per_image: values[..n].to_vec(), sur_mean_norm, sem_mean_norm })
}
