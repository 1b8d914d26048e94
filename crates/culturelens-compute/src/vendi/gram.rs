//! The dual product `Fᵀ F` of the cosine features on the host, straight from the f32 table: a
//! symmetric rank-k update whose operands are packed block by block, each f64 value
//! `f64(x_ij) · (1/‖x_i‖)` made while packing, so no N × D f64 copy exists.
//!
//! Goto's scheme: the rows of the table in blocks of `KC`; each block packed twice, into column
//! panels `MR` wide (the left operand) and `NR` wide (the right one). The cores share out the
//! right panels; for its panel `j`, a core keeps the `KC × NR` sliver in L1 and streams the left
//! panels `i ≥ j` from L2 (the block's `KC × D` f64), each `MR × NR` register tile accumulating
//! over the block with fused multiply-adds. A tile of `Σ f_i f_jᵀ` (rows `i`, columns `j`) is
//! added, by symmetry, into rows `j` of `C` as the vectors it was computed in, so the update
//! lands in `C`'s upper triangle with vector adds; the lower triangle is mirrored from it once
//! at the end. On x86-64 the tiles are written with intrinsics: AVX-512 (16 × 12, 24 of the 32
//! vector registers) where the CPU has it, else AVX2 and FMA (8 × 6); elsewhere faer's
//! triangular GEMM computes each block's product.

use super::CosineRows;
use faer::Accum;
use faer::linalg::matmul::triangular::BlockStructure;

/// Rows of the table per block of the host dual product (the AVX2 kernel and faer's fallback).
pub const HOST_BLOCK_ROWS: usize = 256;
/// Rows per block of the AVX-512 kernel: a block's left panels (128 × 1280 f64 = 1.3 MB at
/// D = 1280) stay in a 2 MB L2.
#[cfg(target_arch = "x86_64")]
const KC_AVX512: usize = 128;

/// The lower triangle (row-major, `d × d`; entries above the diagonal are unspecified) of
/// `Σ_i f_i f_iᵀ` over the feature rows `f_i` of `rows`: the AVX-512 or AVX2 kernel where the
/// CPU has it, faer's triangular GEMM elsewhere.
pub(crate) fn cosine_lower_gram(rows: &CosineRows) -> Vec<f64> {
    #[cfg(target_arch = "x86_64")]
    if let Some(gram) = avx512_lower_gram(rows).or_else(|| avx2_lower_gram(rows)) {
        return gram;
    }
    faer_lower_gram(rows)
}

/// [`cosine_lower_gram`] with the AVX-512 register tiles; `None` where the CPU lacks AVX-512F.
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx512_lower_gram(rows: &CosineRows) -> Option<Vec<f64>> {
    std::arch::is_x86_feature_detected!("avx512f")
        .then(|| simd_lower_gram::<16, 12>(rows, KC_AVX512, tile_avx512))
}

/// [`cosine_lower_gram`] with the AVX2 register tiles; `None` where the CPU lacks AVX2 or FMA.
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_lower_gram(rows: &CosineRows) -> Option<Vec<f64>> {
    (std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"))
        .then(|| simd_lower_gram::<8, 6>(rows, HOST_BLOCK_ROWS, tile_avx2))
}

/// A register-tile kernel: `Σ_p l[p · MR + a] · r[p · NR + b]` over `p < k`, added to
/// `c[b · ldc + a]` for `a < MR`, `b < NR`. Its CPU features must have been checked.
#[cfg(target_arch = "x86_64")]
type TileFn = unsafe fn(k: usize, l: &[f64], r: &[f64], c: &mut [f64], ldc: usize);

/// The blocked rank-k update with `MR × NR` register tiles and blocks of `kc` rows.
#[cfg(target_arch = "x86_64")]
fn simd_lower_gram<const MR: usize, const NR: usize>(rows: &CosineRows, kc: usize, tile: TileFn) -> Vec<f64> {
    let d = rows.d;
    // `C` with room for whole tiles: `dr` rows (a multiple of NR), `dc` columns (of MR).
    let (dr, dc) = (d.next_multiple_of(NR), d.next_multiple_of(MR));
    let mut c = vec![0.0f64; dr * dc];
    let mut left = AlignedBuf::new(kc * dc);
    let mut right = AlignedBuf::new(kc * dr);
    for start in (0..rows.n).step_by(kc) {
        let k = kc.min(rows.n - start);
        pack(rows, start, k, MR, left.as_mut());
        pack(rows, start, k, NR, right.as_mut());
        add_block::<MR, NR>(&mut c, dc, k, left.as_mut(), right.as_mut(), tile);
    }
    // Rows j of `c` hold `C[j][i]` for every tile that meets `i ≥ j`: the upper triangle. It is
    // copied into the lower one in place, in 32 × 32 blocks (reads of a column stay in cache),
    // then the rows are moved left to the result's width d (`dc ≥ d`; row i moves to i · d ≤
    // i · dc, so no row is overwritten before it is moved) and `c` is cut to d × d.
    const B: usize = 32;
    for i0 in (0..d).step_by(B) {
        for j0 in (0..=i0).step_by(B) {
            for i in i0..(i0 + B).min(d) {
                for j in j0..(j0 + B).min(i) {
                    c[i * dc + j] = c[j * dc + i];
                }
            }
        }
    }
    if dc != d {
        for i in 1..d {
            c.copy_within(i * dc..i * dc + d, i * d);
        }
    }
    c.truncate(d * d);
    c
}

/// A zeroed f64 buffer whose usable part starts on a 64-byte boundary, so the packed panels'
/// vector loads never straddle two cache lines (a large `Vec` from the system allocator is only
/// 16-byte aligned).
#[cfg(target_arch = "x86_64")]
struct AlignedBuf {
    data: Vec<f64>,
    offset: usize,
    len: usize,
}

#[cfg(target_arch = "x86_64")]
impl AlignedBuf {
    fn new(len: usize) -> Self {
        let data = vec![0.0f64; len + 8];
        let offset = data.as_ptr().align_offset(64);
        Self { data, offset, len }
    }

    fn as_mut(&mut self) -> &mut [f64] {
        &mut self.data[self.offset..self.offset + self.len]
    }
}

/// Packs rows `start..start + k` of the features into column panels `width` wide: panel `p`
/// holds, row after row, the values of columns `p · width ..` (zeros past `d`).
#[cfg(target_arch = "x86_64")]
fn pack(rows: &CosineRows, start: usize, k: usize, width: usize, into: &mut [f64]) {
    let d = rows.d;
    let panel_len = k * width;
    let fill = |(panel, chunk): (usize, &mut [f64])| {
        let first = panel * width;
        let valid = width.min(d - first);
        for (r, dst) in chunk.chunks_exact_mut(width).enumerate() {
            rows.feature_span(start + r, first, &mut dst[..valid]);
            dst[valid..].fill(0.0);
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

/// Adds one packed block of `k` rows: for each right panel `j` (NR rows of `c`, `ldc` wide), the
/// tiles of the left panels `i` that meet `i ≥ j`.
#[cfg(target_arch = "x86_64")]
fn add_block<const MR: usize, const NR: usize>(
    c: &mut [f64],
    ldc: usize,
    k: usize,
    left: &[f64],
    right: &[f64],
    tile: TileFn,
) {
    let left_panels = ldc / MR;
    let c_rows = |(jp, c_rows): (usize, &mut [f64])| {
        let r = &right[jp * k * NR..(jp + 1) * k * NR];
        for ip in (jp * NR / MR)..left_panels {
            let l = &left[ip * k * MR..(ip + 1) * k * MR];
            // SAFETY: `*_lower_gram` checked the tile's CPU features; `l` holds k × MR and `r`
            // k × NR values, and `c_rows` NR rows of `ldc ≥ (ip + 1) · MR` values.
            unsafe { tile(k, l, r, &mut c_rows[ip * MR..], ldc) };
        }
    };
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        c.par_chunks_mut(NR * ldc).enumerate().for_each(c_rows);
    }
    #[cfg(not(feature = "rayon"))]
    c.chunks_mut(NR * ldc).enumerate().for_each(c_rows);
}

/// One 8 × 6 tile in twelve AVX2 accumulators.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `l` must hold `k · 8` and `r` `k · 6` values, and `c`
/// `5 · ldc + 8`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2(k: usize, l: &[f64], r: &[f64], c: &mut [f64], ldc: usize) {
    use std::arch::x86_64::*;
    const MR: usize = 8;
    const NR: usize = 6;
    assert!(l.len() >= k * MR && r.len() >= k * NR && c.len() >= (NR - 1) * ldc + MR);
    let mut lo = [_mm256_setzero_pd(); NR];
    let mut hi = [_mm256_setzero_pd(); NR];
    for p in 0..k {
        // SAFETY: p < k, so both loads and every broadcast stay inside the asserted lengths.
        unsafe {
            let a0 = _mm256_loadu_pd(l.as_ptr().add(p * MR));
            let a1 = _mm256_loadu_pd(l.as_ptr().add(p * MR + 4));
            for b in 0..NR {
                let x = _mm256_broadcast_sd(&*r.as_ptr().add(p * NR + b));
                lo[b] = _mm256_fmadd_pd(a0, x, lo[b]);
                hi[b] = _mm256_fmadd_pd(a1, x, hi[b]);
            }
        }
    }
    for b in 0..NR {
        // SAFETY: row b of the tile is c[b · ldc .. b · ldc + 8], inside the asserted length.
        unsafe {
            let row = c.as_mut_ptr().add(b * ldc);
            _mm256_storeu_pd(row, _mm256_add_pd(_mm256_loadu_pd(row), lo[b]));
            _mm256_storeu_pd(row.add(4), _mm256_add_pd(_mm256_loadu_pd(row.add(4)), hi[b]));
        }
    }
}

/// One 16 × 12 tile in 24 AVX-512 accumulators.
///
/// # Safety
/// The CPU must support AVX-512F; `l` must hold `k · 16` and `r` `k · 12` values, and `c`
/// `11 · ldc + 16`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512(k: usize, l: &[f64], r: &[f64], c: &mut [f64], ldc: usize) {
    use std::arch::x86_64::*;
    const MR: usize = 16;
    const NR: usize = 12;
    assert!(l.len() >= k * MR && r.len() >= k * NR && c.len() >= (NR - 1) * ldc + MR);
    let mut lo = [_mm512_setzero_pd(); NR];
    let mut hi = [_mm512_setzero_pd(); NR];
    for p in 0..k {
        // SAFETY: p < k, so both loads and every broadcast stay inside the asserted lengths.
        unsafe {
            let a0 = _mm512_loadu_pd(l.as_ptr().add(p * MR));
            let a1 = _mm512_loadu_pd(l.as_ptr().add(p * MR + 8));
            for b in 0..NR {
                let x = _mm512_set1_pd(*r.as_ptr().add(p * NR + b));
                lo[b] = _mm512_fmadd_pd(a0, x, lo[b]);
                hi[b] = _mm512_fmadd_pd(a1, x, hi[b]);
            }
        }
    }
    for b in 0..NR {
        // SAFETY: row b of the tile is c[b · ldc .. b · ldc + 16], inside the asserted length.
        unsafe {
            let row = c.as_mut_ptr().add(b * ldc);
            _mm512_storeu_pd(row, _mm512_add_pd(_mm512_loadu_pd(row), lo[b]));
            _mm512_storeu_pd(row.add(8), _mm512_add_pd(_mm512_loadu_pd(row.add(8)), hi[b]));
        }
    }
}

/// [`cosine_lower_gram`] with faer's triangular GEMM on f64 blocks built from the table.
pub(crate) fn faer_lower_gram(rows: &CosineRows) -> Vec<f64> {
    let d = rows.d;
    let mut out = vec![0.0f64; d * d];
    let mut block = vec![0.0f64; HOST_BLOCK_ROWS.min(rows.n) * d];
    for start in (0..rows.n).step_by(HOST_BLOCK_ROWS) {
        let k = HOST_BLOCK_ROWS.min(rows.n - start);
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
