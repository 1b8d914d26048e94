//! Per-output SoS on a Burn device (SoS paper Eq. (1)), written once for every backend.
//!
//! The work is tensor-only and ends in one packed 1-D tensor, so the caller reads it back with a
//! single synchronous (`into_data`) or asynchronous (`into_data_async`, browser) read and hands
//! the values to [`unpack`].

use burn::tensor::{IndexingUpdateOp, Int, Tensor, TensorData};

use std::ops::Range;

use super::fused::sos_fused;
use super::layout::SosLayout;
use super::plan::RowBlocks;
use crate::tensor::id_tensor;

/// A reference vector whose unit-vector mean is shorter than this has no usable direction.
pub const MIN_REFERENCE_NORM: f32 = 1e-6;

/// The one device entry point of SoS, for the CLI and the browser alike: the packed result tensor
/// of [`sos_tensor`] for the rows `rows` of the table stored in `blocks` (consecutive row blocks on
/// one device, in order: one block, or the parts of a table larger than one GPU buffer, see
/// [`crate::device::upload_rows`]), all rows for `None`. `rows` index the concatenated table;
/// `layout` is built from the same rows, in the same order. No block is copied into a larger one.
///
/// Nothing is read back here: the caller reads the result once, synchronously (`into_data`,
/// native) or asynchronously (`into_data_async`, the browser), and hands it to [`unpack`].
/// On a CubeCL device (GPU) an f32 table goes through the fused kernels ([`super::fused`]);
/// elsewhere through the tensor graph, in blocks of `chunk_rows` rows
/// ([`Blocking::chunk_rows`](super::Blocking::chunk_rows) of the device's rule).
pub fn sos_packed(
    blocks: &[Tensor<2>],
    rows: Option<&[u32]>,
    layout: &SosLayout,
    chunk_rows: Option<usize>,
) -> Tensor<1> {
    let table = RowBlocks::new(blocks);
    let n = rows.map_or(table.rows(), <[u32]>::len);
    assert_eq!(n, layout.len(), "the scored rows and the layout must have the same number of outputs");
    if let Some(r) = rows {
        assert!(r.iter().all(|&row| (row as usize) < table.rows()), "a scored row lies outside the table");
    }
    if let Some(packed) = sos_fused(blocks, rows, layout) {
        return packed;
    }
    let device = blocks[0].device();
    let mut parts = Vec::new();
    for (block, outputs) in runs(&table, rows) {
        let x = match rows {
            Some(r) => {
                let start = table.start(block);
                let local: Vec<u32> = r[outputs.clone()].iter().map(|&row| row - start as u32).collect();
                blocks[block].clone().select(0, id_tensor(&local, &device))
            }
            None => blocks[block].clone(),
        };
        parts.extend(chunks(x, id_tensor(&layout.pair[outputs], &device), chunk_rows));
    }
    sos_tensor_blocks(
        parts,
        id_tensor(&layout.pair_sur, &device),
        layout.sur_names.len(),
        id_tensor(&layout.pair_sem, &device),
        layout.sem_names.len(),
    )
}

/// Maximal runs of consecutive outputs that lie in one block: `(block, output range)`, in output
/// order (every non-empty block, whole, for `rows = None`).
fn runs(blocks: &RowBlocks, rows: Option<&[u32]>) -> Vec<(usize, Range<usize>)> {
    let Some(rows) = rows else {
        return (0..blocks.len())
            .map(|b| (b, blocks.start(b)..blocks.start(b + 1)))
            .filter(|(_, range)| !range.is_empty())
            .collect();
    };
    let mut runs: Vec<(usize, Range<usize>)> = Vec::new();
    for (o, &row) in rows.iter().enumerate() {
        let (block, _) = blocks.locate(row as usize);
        match runs.last_mut() {
            Some((b, range)) if *b == block => range.end = o + 1,
            _ => runs.push((block, o..o + 1)),
        }
    }
    runs
}

/// `x` and its outputs' pairs in blocks of `chunk_rows` rows (one block for `None`).
fn chunks(x: Tensor<2>, pair: Tensor<1, Int>, chunk_rows: Option<usize>) -> Vec<(Tensor<2>, Tensor<1, Int>)> {
    let [n, d] = x.dims();
    let step = chunk_rows.unwrap_or(n).clamp(1, n.max(1));
    (0..n)
        .step_by(step)
        .map(|start| {
            let rows = start..(start + step).min(n);
            (x.clone().slice([rows.clone(), 0..d]), pair.clone().slice([rows]))
        })
        .collect()
}

/// SoS paper Eq. (1) for every output, as tensors:
///
/// 1. `e_o ← e_o / ‖e_o‖` (embeddings are L2-normalised first);
/// 2. `sur_l = Σ_{o∈O_l} e_o`, `sem_c = Σ_{o∈O_c} e_o` (the paper's means up to the positive factor
///    `1/|O|`, which cosine ignores; the output itself is included), summed once per reference
///    pair `p = (l, c)` and then per group;
/// 3. `SoS(o) = cos(sem_c, e_o) − cos(sur_l, e_o) = (x_o · (sem_c/‖sem_c‖ − sur_l/‖sur_l‖)) / ‖x_o‖`,
///    one dot product per output with its pair's difference vector.
///
/// `pair` maps outputs to pairs, `pair_sur`/`pair_sem` map pairs to groups. Rows are processed in
/// blocks of `chunk_rows` (all at once for `None`): on a CPU, blocks that fit the cache keep every
/// temporary small and reused; on a GPU one block avoids launch overhead. The result does not
/// depend on the block size beyond f32 rounding. Returns
/// `[SoS(o) for o in 0..N] ++ [‖sur_g‖ for g] ++ [‖sem_g‖ for g]`: the scores, then the norms of
/// the group *sums* (see [`unpack`]). This is the tensor graph on every device, the reference the
/// fused kernels of [`sos_packed`] are tested against.
pub fn sos_tensor(
    emb: Tensor<2>,
    pair: Tensor<1, Int>,
    pair_sur: Tensor<1, Int>,
    n_sur: usize,
    pair_sem: Tensor<1, Int>,
    n_sem: usize,
    chunk_rows: Option<usize>,
) -> Tensor<1> {
    sos_tensor_blocks(chunks(emb, pair, chunk_rows), pair_sur, n_sur, pair_sem, n_sem)
}

/// [`sos_tensor`] on outputs already split into row blocks: `(rows of the block, their pairs)`,
/// in output order, on one device; the result is that of the concatenated blocks.
fn sos_tensor_blocks(
    blocks: Vec<(Tensor<2>, Tensor<1, Int>)>,
    pair_sur: Tensor<1, Int>,
    n_sur: usize,
    pair_sem: Tensor<1, Int>,
    n_sem: usize,
) -> Tensor<1> {
    let (first, _) = blocks.first().expect("at least one block of outputs");
    let [_, d] = first.dims();
    let device = first.device();
    let [n_pairs] = pair_sur.dims();

    // Pass 1: inverse row norms, and the sums of unit rows per reference pair.
    let ones = Tensor::<2>::ones([d, 1], &device);
    let mut pair_sums = Tensor::<2>::zeros([n_pairs, d], &device);
    let mut inv_norms = Vec::with_capacity(blocks.len());
    for (x, p) in &blocks {
        let inv_norm = row_sums(x.clone().square(), &ones).sqrt().recip();
        pair_sums =
            pair_sums.select_assign(0, p.clone(), x.clone() * inv_norm.clone(), IndexingUpdateOp::Add);
        inv_norms.push(inv_norm);
    }

    // References: group sums, their norms, and each pair's direction sem_c/‖sem_c‖ − sur_l/‖sur_l‖.
    let group_sums = |groups: Tensor<1, Int>, count: usize| {
        Tensor::<2>::zeros([count, d], &device).select_assign(
            0,
            groups,
            pair_sums.clone(),
            IndexingUpdateOp::Add,
        )
    };
    let (sur, sem) = (group_sums(pair_sur.clone(), n_sur), group_sums(pair_sem.clone(), n_sem));
    let (sur_norm, sem_norm) =
        (row_sums(sur.clone().square(), &ones).sqrt(), row_sums(sem.clone().square(), &ones).sqrt());
    let unit_ref = |sums: Tensor<2>, norm: Tensor<2>| sums / norm.clamp_min(f32::MIN_POSITIVE);
    let direction = unit_ref(sem, sem_norm.clone()).select(0, pair_sem)
        - unit_ref(sur, sur_norm.clone()).select(0, pair_sur);

    // Pass 2: one dot product per output with its pair's direction, divided by ‖x_o‖.
    let scores: Vec<Tensor<1>> = blocks
        .into_iter()
        .zip(inv_norms)
        .map(|((x, p), inv_norm)| {
            let [rows, _] = x.dims();
            (row_sums(x * direction.clone().select(0, p), &ones) * inv_norm).reshape([rows])
        })
        .collect();
    let sos = Tensor::cat(scores, 0);
    Tensor::cat(vec![sos, sur_norm.reshape([n_sur]), sem_norm.reshape([n_sem])], 0)
}

/// Sum of every row of `x` (`[rows, d]`) as a `[rows, 1]` column: the product with a `[d, 1]`
/// column of ones. Same value as `sum_dim(1)`, but it runs through the backend's GEMM, which on
/// the CPU (`flex`) is several times faster than the generic reduction (BENCHMARKS.md).
fn row_sums(x: Tensor<2>, ones: &Tensor<2>) -> Tensor<2> {
    x.matmul(ones.clone())
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
