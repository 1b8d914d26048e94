//! The encoders' element-wise work on the CPU backend (crate feature `flex-fused`, native only):
//! the bias, activation and residual that follow a linear layer's GEMM, in one pass over its
//! output, rows split over the cores, each row's loops vectorised ([`culturelens_simd`]).
//!
//! The backend would run each of them as its own pass, and its sigmoid branches on the sign of
//! every value (half of them mispredicted on activations) around a scalar `expf`. Here the
//! sigmoid is branch-free with a vectorisable [`exp`] (Cephes' `expf` polynomial, within 2 ulp
//! of the correctly rounded value), so a value differs from the backend's by a few ulp at
//! most (tested below, and the towers' parity tests against transformers are unchanged).

use burn::backend::flex::FlexTensor;
use burn::backend::{DispatchDevice, Flex};
use burn::tensor::{DType, Shape, Tensor};
use rayon::prelude::*;

/// Rows per parallel task: about 0.5–2 MiB of f32 outputs at the widths of the towers.
const ROWS_PER_TASK: usize = 64;

/// Queries per parallel task of [`attention`].
const QUERIES_PER_TASK: usize = 32;

/// Heads narrower than this (one AVX-512 vector of f32) weigh the values by dot products over
/// the keys rather than by a sum of value rows (the small UNets' 4-wide heads).
const NARROW_HEAD: usize = 16;

/// Whether `x` lives on the CPU backend in f32 (where [`bias_act_residual`] applies).
pub(super) fn fused<const D: usize>(x: &Tensor<D>) -> bool {
    matches!(x.device().as_dispatch(), DispatchDevice::Flex(_)) && x.dtype() == DType::F32
}

/// `residual + act(y + bias)` with `act` the quick-GELU `v · sigmoid(1.702 v)` or nothing, in
/// that order of operations, rows split over the cores.
pub(super) fn bias_act_residual<const D: usize>(
    y: Tensor<D>,
    bias: Tensor<1>,
    quick_gelu: bool,
    residual: Option<Tensor<D>>,
) -> Tensor<D> {
    let mut out = primitive(y, true);
    let width = *out.layout().shape().last().expect("a linear layer's output has a last dimension");
    let n = out.layout().num_elements();
    let bias = bias.try_into_primitive::<Flex>().expect("a CPU-backend tensor").to_contiguous();
    let bias: &[f32] = &bias.storage::<f32>()[..width];
    let residual = residual.map(|r| primitive(r, false));
    let residual: Option<&[f32]> = residual.as_ref().map(|r| &r.storage::<f32>()[..n]);
    let chunk = ROWS_PER_TASK * width;
    out.storage_mut::<f32>()[..n].par_chunks_mut(chunk).enumerate().for_each(|(task, rows)| {
        let res = residual.map(|r| &r[task * chunk..task * chunk + rows.len()]);
        culturelens_simd::dispatch(|| {
            for (r, row) in rows.chunks_exact_mut(width).enumerate() {
                row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
                if quick_gelu {
                    row.iter_mut().for_each(|v| *v *= sigmoid(*v * 1.702));
                }
                if let Some(res) = res {
                    row.iter_mut().zip(&res[r * width..(r + 1) * width]).for_each(|(v, a)| *v += a);
                }
            }
        })
    });
    Tensor::from_primitive::<Flex>(out)
}

/// `t` as a CPU-backend tensor, contiguous from offset 0 (and, when it is to be `written` in
/// place, not shared).
fn primitive<const D: usize>(t: Tensor<D>, written: bool) -> FlexTensor {
    let t = t.try_into_primitive::<Flex>().expect("a CPU-backend tensor");
    let ready = t.is_contiguous() && t.layout().start_offset() == 0 && (!written || t.is_unique());
    if ready { t } else { t.to_contiguous() }
}

/// Multi-head attention `softmax(q kᵀ · scale) v` of `q` `[batch, n_q, hidden]` over `k`, `v`
/// `[batch, n_kv, hidden]`, the heads being consecutive column blocks of `hidden` (as the
/// projections write them), returned in the same layout: what the tensor graph computes with
/// its head reshapes, transposes and copies, read and written in place. `causal` lets query
/// `i` see keys `0..=i`; `key_padding` (`[batch, n_kv]`, `true` for padding) hides keys.
///
/// Each task takes up to [`QUERIES_PER_TASK`] queries of one (image, head) pair, one query at
/// a time: its scores `q_i Kᵀ` as `Σ_c q_ic Kᵀ[c]` over a transposed copy of the head's keys,
/// the softmax with [`exp`], then `Σ_j p_ij v_j` (as a sum of value rows, or for heads
/// narrower than [`NARROW_HEAD`] as dot products with `Vᵀ`). Every loop runs over a contiguous
/// row, so it vectorises; the sums run in another order than the backend's GEMMs, so values differ
/// from the graph's by rounding (tested below).
pub(super) fn attention(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    heads: usize,
    scale: f32,
    causal: bool,
    key_padding: Option<&[bool]>,
) -> Tensor<3> {
    let [batch, n_q, hidden] = q.dims();
    let n_kv = k.dims()[1];
    let d = hidden / heads;
    let (q, k, v) = (primitive(q, false), primitive(k, false), primitive(v, false));
    let (q, k, v) = (q.storage::<f32>(), k.storage::<f32>(), v.storage::<f32>());
    let mut out = FlexTensor::empty(Shape::new([batch, n_q, hidden]), DType::F32);
    let blocks = n_q.div_ceil(QUERIES_PER_TASK);
    let dst = Rows(out.storage_mut::<f32>().as_mut_ptr());
    (0..batch * heads * blocks).into_par_iter().for_each(|task| {
        let (b, h, block) = (task / (heads * blocks), task / blocks % heads, task % blocks);
        let col = h * d;
        fn head(t: &[f32], start: usize, d: usize) -> &[f32] {
            &t[start..start + d]
        }
        let at = |n: usize, j: usize| (b * n + j) * hidden + col;
        culturelens_simd::dispatch(|| {
            // Kᵀ of this head, d × n_kv (and Vᵀ for heads narrower than a vector).
            let transposed = |t: &[f32]| {
                let mut tt = vec![0f32; d * n_kv];
                for j in 0..n_kv {
                    for (c, x) in head(t, at(n_kv, j), d).iter().enumerate() {
                        tt[c * n_kv + j] = *x;
                    }
                }
                tt
            };
            let kt = transposed(k);
            let vt = if d < NARROW_HEAD { transposed(v) } else { Vec::new() };
            let mut p = vec![0f32; n_kv];
            let mut row = vec![0f32; d];
            for i in block * QUERIES_PER_TASK..((block + 1) * QUERIES_PER_TASK).min(n_q) {
                let seen = if causal { (i + 1).min(n_kv) } else { n_kv };
                let p = &mut p[..seen];
                p.fill(0.0);
                for (c, qc) in head(q, at(n_q, i), d).iter().enumerate() {
                    p.iter_mut().zip(&kt[c * n_kv..c * n_kv + seen]).for_each(|(s, kc)| *s += qc * kc);
                }
                p.iter_mut().for_each(|s| *s *= scale);
                if let Some(mask) = key_padding {
                    let mask = &mask[b * n_kv..b * n_kv + seen];
                    p.iter_mut()
                        .zip(mask)
                        .for_each(|(s, pad)| *s = if *pad { f32::NEG_INFINITY } else { *s });
                }
                let max = lanes(p, f32::NEG_INFINITY, f32::max);
                p.iter_mut().for_each(|s| *s = exp(*s - max));
                let sum = lanes(p, 0.0, |a, b| a + b);
                p.iter_mut().for_each(|s| *s /= sum);
                if d < NARROW_HEAD {
                    // One dot product over the keys per output column.
                    for (c, o) in row.iter_mut().enumerate() {
                        *o = dot(p, &vt[c * n_kv..c * n_kv + seen]);
                    }
                } else {
                    row.fill(0.0);
                    for (j, pj) in p.iter().enumerate() {
                        row.iter_mut().zip(head(v, at(n_kv, j), d)).for_each(|(o, vj)| *o += pj * vj);
                    }
                }
                // SAFETY: `dst` points at `batch · n_q · hidden` floats; this task alone
                // writes the columns `col..col + d` of row `(b, i)`, which lie inside.
                unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), dst.at(at(n_q, i)), d) };
            }
        })
    });
    Tensor::from_primitive::<Flex>(out)
}

/// `xs` folded with `op` in 16 interleaved lanes, then the lanes pairwise: a fixed order that
/// vectorises (a sequential fold would not, for sums).
#[inline(always)]
fn lanes(xs: &[f32], init: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; 16];
    let mut chunks = xs.chunks_exact(16);
    for chunk in &mut chunks {
        acc.iter_mut().zip(chunk).for_each(|(a, x)| *a = op(*a, *x));
    }
    acc.iter_mut().zip(chunks.remainder()).for_each(|(a, x)| *a = op(*a, *x));
    let mut width = 16;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] = op(acc[l], acc[l + width]);
        }
    }
    acc[0]
}

/// `Σ a_i b_i` in 16 interleaved lanes, then the lanes pairwise (as [`lanes`]).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let (mut xs, mut ys) = (a.chunks_exact(16), b.chunks_exact(16));
    for (x, y) in (&mut xs).zip(&mut ys) {
        acc.iter_mut().zip(x.iter().zip(y)).for_each(|(s, (x, y))| *s += x * y);
    }
    acc.iter_mut().zip(xs.remainder().iter().zip(ys.remainder())).for_each(|(s, (x, y))| *s += x * y);
    lanes(&acc, 0.0, |a, b| a + b)
}

/// The output of [`attention`], shared by its tasks, each writing its own disjoint cells.
struct Rows(*mut f32);

impl Rows {
    /// The cell `offset`; the caller keeps within the output and off other tasks' cells.
    unsafe fn at(&self, offset: usize) -> *mut f32 {
        // SAFETY: the caller's.
        unsafe { self.0.add(offset) }
    }
}
// SAFETY: the tasks write disjoint cells (see `attention`) and nothing reads them before all
// tasks have finished.
unsafe impl Send for Rows {}
unsafe impl Sync for Rows {}

/// `1 / (1 + e^-x)`, as the backend's sigmoid: `1 / (1 + e^-x)` for `x ≥ 0`, `e^x / (1 + e^x)`
/// below (no cancellation on either side), computed on both sides and selected without a
/// branch.
#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let d = 1.0 + e;
    if x >= 0.0 { 1.0 / d } else { e / d }
}

/// `e^x` in f32 without branches or table lookups, so loops over it vectorise: Cephes' `expf`
/// (`x = n ln 2 + r`, `|r| ≤ ln 2 / 2`, a degree-7 polynomial in `r`, scaled by `2^n` in two
/// exact steps so subnormal results round once). Within 2 ulp of the correctly rounded value
/// (tested over the whole range); `0` below `-104`, `inf` above `89`, NaN for NaN.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that `n · LN2_HI` is exact for |n| ≤ 150.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2²³: adding it rounds to an integer, held in the low bits of the sum.
    const SHIFT: f32 = 12_582_912.0;
    let x = x.clamp(-104.0, 89.0);
    let t = x * LOG2E + SHIFT;
    let n = t - SHIFT;
    let k = t.to_bits() as i32 - SHIFT.to_bits() as i32;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let p = p * (r * r) + r + 1.0;
    // 2^k = 2^(k/2) · 2^(k - k/2), both within the normal exponents for k ∈ [-150, 128].
    let half = k >> 1;
    let pow2 = |e: i32| f32::from_bits(((e + 127) << 23) as u32);
    p * pow2(half) * pow2(k - half)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in ulp between two finite f32 of the same sign (or zero).
    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn exp_is_within_2_ulp_over_the_whole_range() {
        let mut worst = (0, 0.0f32);
        // Every 97th f32 in [-104, 89], both signs, plus the ends.
        let mut xs: Vec<f32> = (0..f32::to_bits(104.0)).step_by(97).map(f32::from_bits).collect();
        xs.extend(xs.clone().iter().map(|x| -x).filter(|x| *x <= 89.0 && *x >= -89.0));
        xs.extend([0.0, -0.0, 88.72, 88.722_83, -87.336_55, -103.97, -104.0, 89.0, 1e-30, -1e-30]);
        for x in xs {
            let want = (x as f64).exp() as f32;
            let got = exp(x);
            let e =
                if want == 0.0 || got == 0.0 { got.to_bits().max(want.to_bits()) } else { ulps(got, want) };
            if e > worst.0 {
                worst = (e, x);
            }
        }
        assert!(worst.0 <= 2, "{} ulp at x = {:e}", worst.0, worst.1);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(1.0), std::f32::consts::E);
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(-104.0), 0.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        // Subnormal results: e^-100 = 3.72e-44 = 27 · 2^-149 (rounded once).
        assert_eq!(exp(-100.0).to_bits(), 27);
    }

    #[test]
    fn sigmoid_is_within_3_ulp_and_saturates() {
        let mut worst = (0, 0.0f32);
        for i in -2_000_000..=2_000_000 {
            let x = i as f32 * 5e-5;
            let want = (1.0 / (1.0 + (-(x as f64)).exp())) as f32;
            let e = ulps(sigmoid(x), want);
            if e > worst.0 {
                worst = (e, x);
            }
        }
        assert!(worst.0 <= 3, "{} ulp at x = {}", worst.0, worst.1);
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(200.0), 1.0);
        assert_eq!(sigmoid(-200.0), 0.0);
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        // e^-100 / (1 + e^-100): the tiny side keeps its relative precision.
        assert_eq!(sigmoid(-100.0), exp(-100.0));
    }
}
