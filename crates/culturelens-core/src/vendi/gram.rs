//! The dual product `Fᵀ F` of the cosine features on the host, straight from the f32 table: a
//! symmetric rank-k update (the lower triangle only) whose operands are packed block by block,
//! each f64 value `f64(x_ij) · (1/‖x_i‖)` made while packing, so no N × D f64 copy exists.
//!
//! Goto's scheme: the rows of the table in blocks of [`KC`]; each block packed twice, into
//! column panels [`MR`] wide (the rows of a tile of `C`) and [`NR`] wide (its columns); an
//! `MR × NR` register tile of `C` accumulates over the block with fused multiply-adds; row
//! panels of `C` are spread over the cores. On x86-64 with AVX2 and FMA the tile is written with
//! intrinsics; elsewhere faer's triangular GEMM computes each block's product.

use super::CosineRows;
use faer::Accum;
use faer::linalg::matmul::triangular::BlockStructure;

/// Rows of the table per block ([`HOST_BLOCK_ROWS`]): a left panel (`KC × MR` f64, 16 KiB)
/// stays in L1 while the right panels stream from L2.
const KC: usize = HOST_BLOCK_ROWS;
/// Rows of a register tile of `C` (two 4-lane vectors).
#[cfg(target_arch = "x86_64")]
const MR: usize = 8;
/// Columns of a register tile of `C`.
#[cfg(target_arch = "x86_64")]
const NR: usize = 6;

/// Rows of the table per block of the host dual product.
pub const HOST_BLOCK_ROWS: usize = 256;

/// The lower triangle (row-major, `d × d`; entries above the diagonal are unspecified) of
/// `Σ_i f_i f_iᵀ` over the feature rows `f_i` of `rows`: the AVX2 kernel where the CPU has it,
/// faer's triangular GEMM elsewhere.
pub(crate) fn cosine_lower_gram(rows: &CosineRows) -> Vec<f64> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return avx2_lower_gram(rows);
    }
    faer_lower_gram(rows)
}

/// [`cosine_lower_gram`] with the AVX2 register tiles (the caller checked AVX2 and FMA).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_lower_gram(rows: &CosineRows) -> Vec<f64> {
    let d = rows.d;
    let mut out = vec![0.0f64; d * d];
    let mut left = vec![0.0f64; KC * d.next_multiple_of(MR)];
    let mut right = vec![0.0f64; KC * d.next_multiple_of(NR)];
    for start in (0..rows.n).step_by(KC) {
        let k = KC.min(rows.n - start);
        pack(rows, start, k, MR, &mut left);
        pack(rows, start, k, NR, &mut right);
        add_block(&mut out, d, k, &left, &right);
    }
    out
}

/// Packs rows `start..start + k` of the features into column panels `width` wide: panel `p`
/// holds, row after row, the values of columns `p · width ..` (zeros past `d`).
#[cfg(target_arch = "x86_64")]
fn pack(rows: &CosineRows, start: usize, k: usize, width: usize, into: &mut [f64]) {
    let d = rows.d;
    let panel_len = k * width;
    let fill = |(panel, chunk): (usize, &mut [f64])| {
        let first = panel * width;
        for (r, dst) in chunk.chunks_exact_mut(width).enumerate() {
            for (c, v) in dst.iter_mut().enumerate() {
                let j = first + c;
                *v = if j < d { rows.feature(start + r, j) } else { 0.0 };
            }
        }
    };
    let panels = &mut into[..d.div_ceil(width) * panel_len];
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        panels.par_chunks_mut(panel_len).enumerate().for_each(fill);
    }
    #[cfg(not(feature = "rayon"))]
    panels.chunks_mut(panel_len).enumerate().for_each(fill);
}

/// `C += Bᵀ B` on the tiles that meet the lower triangle, for one packed block of `k` rows.
#[cfg(target_arch = "x86_64")]
fn add_block(out: &mut [f64], d: usize, k: usize, left: &[f64], right: &[f64]) {
    let tile_rows = |(panel, c_rows): (usize, &mut [f64])| {
        let i0 = panel * MR;
        let l = &left[panel * k * MR..(panel + 1) * k * MR];
        // Column panels up to the diagonal of this row panel.
        for jp in 0..=((i0 + MR - 1).min(d - 1) / NR) {
            let r = &right[jp * k * NR..(jp + 1) * k * NR];
            // SAFETY: AVX2 and FMA were detected by the caller; `l` holds k × MR and `r` k × NR
            // values.
            let tile = unsafe { tile_avx2(k, l, r) };
            let j0 = jp * NR;
            for (row, c_row) in c_rows.chunks_exact_mut(d).enumerate() {
                for (col, acc) in tile.iter().enumerate().take(d.saturating_sub(j0).min(NR)) {
                    c_row[j0 + col] += acc[row];
                }
            }
        }
    };
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        out.par_chunks_mut(MR * d).enumerate().for_each(tile_rows);
    }
    #[cfg(not(feature = "rayon"))]
    out.chunks_mut(MR * d).enumerate().for_each(tile_rows);
}

/// `tile[c][r] = Σ_p l[p · MR + r] · r[p · NR + c]`: one `MR × NR` tile in twelve AVX2
/// accumulators.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `l` must hold `k · MR` and `r` `k · NR` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2(k: usize, l: &[f64], r: &[f64]) -> [[f64; MR]; NR] {
    use std::arch::x86_64::*;
    assert!(l.len() >= k * MR && r.len() >= k * NR);
    let mut lo = [_mm256_setzero_pd(); NR];
    let mut hi = [_mm256_setzero_pd(); NR];
    for p in 0..k {
        // SAFETY: p < k, so both loads and every broadcast stay inside the asserted lengths.
        unsafe {
            let a0 = _mm256_loadu_pd(l.as_ptr().add(p * MR));
            let a1 = _mm256_loadu_pd(l.as_ptr().add(p * MR + 4));
            for c in 0..NR {
                let b = _mm256_broadcast_sd(&*r.as_ptr().add(p * NR + c));
                lo[c] = _mm256_fmadd_pd(a0, b, lo[c]);
                hi[c] = _mm256_fmadd_pd(a1, b, hi[c]);
            }
        }
    }
    let mut tile = [[0.0; MR]; NR];
    for c in 0..NR {
        // SAFETY: each row of `tile` holds MR = 8 values: 4 at offset 0 and 4 at offset 4.
        unsafe {
            _mm256_storeu_pd(tile[c].as_mut_ptr(), lo[c]);
            _mm256_storeu_pd(tile[c].as_mut_ptr().add(4), hi[c]);
        }
    }
    tile
}

/// [`cosine_lower_gram`] with faer's triangular GEMM on f64 blocks built from the table.
pub(crate) fn faer_lower_gram(rows: &CosineRows) -> Vec<f64> {
    let d = rows.d;
    let mut out = vec![0.0f64; d * d];
    let mut block = vec![0.0f64; KC.min(rows.n) * d];
    for start in (0..rows.n).step_by(KC) {
        let k = KC.min(rows.n - start);
        for (i, row) in block[..k * d].chunks_exact_mut(d).enumerate() {
            rows.feature_row(start + i, row);
        }
        let a = faer::MatRef::from_row_major_slice(&block[..k * d], k, d);
        add_lower_gram(&mut out, a, Accum::Add);
    }
    out
}

/// `out ← aᵀa` (or `out += aᵀa`), S × S with S = `a.ncols()`, on the lower triangle of `out` read
/// row-major (faer's triangular GEMM, half the flops of the full product).
pub(super) fn add_lower_gram(out: &mut [f64], a: faer::MatRef<'_, f64>, accum: Accum) {
    let s = a.ncols();
    // The upper triangle of a column-major S × S matrix is the lower triangle of the same
    // buffer read row-major, the layout `spectrum_from_product` reads.
    faer::linalg::matmul::triangular::matmul(
        faer::MatMut::from_column_major_slice_mut(out, s, s),
        BlockStructure::TriangularUpper,
        accum,
        a.transpose(),
        BlockStructure::Rectangular,
        a,
        BlockStructure::Rectangular,
        1.0,
        faer::get_global_parallelism(),
    );
}
