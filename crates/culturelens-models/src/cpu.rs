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
use burn::tensor::{DType, Shape, Tensor, TensorData};
use rayon::prelude::*;

use super::activation::Activation;

/// Rows per parallel task: about 0.5–2 MiB of f32 outputs at the widths of the towers.
const ROWS_PER_TASK: usize = 64;

/// Queries per parallel task of [`attention`].
const QUERIES_PER_TASK: usize = 64;

/// Queries scored together by [`attention`]: each load of a key vector serves all of them.
const GROUP: usize = 4;

/// Keys per step of [`attention`]'s loops: one AVX-512 vector of f32 (two of AVX2). Key
/// columns are padded to a multiple of it (zero keys, masked out).
const LANE: usize = 16;

/// Heads narrower than this weigh the values by dot products over the keys (with `Vᵀ`) rather
/// than by sums of value rows (the small UNets' 4-wide heads).
const NARROW_HEAD: usize = 16;

/// Whether `x` lives on the CPU backend in f32 (where [`bias_act_residual`] applies).
pub(super) fn fused<const D: usize>(x: &Tensor<D>) -> bool {
    matches!(x.device().as_dispatch(), DispatchDevice::Flex(_)) && x.dtype() == DType::F32
}

/// `residual + act(y + bias)` (without `act` or `residual` where `None`), in that order of
/// operations, rows split over the cores; the activations are [`quick_gelu`], [`gelu`] and
/// [`gelu_tanh`], vectorisable forms within a few ulp of the backend's.
pub(super) fn bias_act_residual<const D: usize>(
    y: Tensor<D>,
    bias: Tensor<1>,
    act: Option<Activation>,
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
        culturelens_simd::dispatch!({
            for (r, row) in rows.chunks_exact_mut(width).enumerate() {
                row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
                match act {
                    Some(Activation::QuickGelu) => row.iter_mut().for_each(|v| *v = quick_gelu(*v)),
                    Some(Activation::Gelu) => row.iter_mut().for_each(|v| *v = gelu(*v)),
                    Some(Activation::GeluPytorchTanh) => row.iter_mut().for_each(|v| *v = gelu_tanh(*v)),
                    None => {}
                }
                if let Some(res) = res {
                    row.iter_mut().zip(&res[r * width..(r + 1) * width]).for_each(|(v, a)| *v += a);
                }
            }
        })
    });
    Tensor::from_primitive::<Flex>(out)
}

/// `x · W` of `x` `[…, k]` and a linear layer's `weight` `[k, n]` (Burn's layout, any strides),
/// `[…, n]`: every row of `x` in one `gemm` call, the batch folded into the rows, so the weight
/// is packed once a call (the backend's `linear` multiplies image by image where the rows per
/// image are many, packing the weight each time), into a buffer that `gemm` fills without
/// reading it (the backend zero-fills each output first). The call is the backend's own
/// (`read_dst` off, its rule for running on every core), so each value is the same dot
/// product in the same order.
pub(super) fn matmul_weight<const D: usize>(x: Tensor<D>, weight: Tensor<2>) -> Tensor<D> {
    let mut dims = x.dims();
    let k = dims[D - 1];
    let [k_w, n] = weight.dims();
    assert_eq!(k, k_w, "a linear layer's input width");
    let m: usize = dims[..D - 1].iter().product();
    dims[D - 1] = n;
    if m * n * k == 0 {
        return Tensor::zeros(dims, &x.device());
    }
    let x = primitive(x, false);
    let w = weight.try_into_primitive::<Flex>().expect("a CPU-backend tensor");
    let (strides, offset) = (w.layout().strides(), w.layout().start_offset());
    let (w_rs, w_cs) = (strides[0], strides[1]);
    let xs = &x.storage::<f32>()[..m * k];
    let ws = &w.storage::<f32>()[offset..];
    let mut out = Vec::<f32>::with_capacity(m * n);
    // One thread (a worker of the embedding loop runs in a rayon pool of one) calls gemm serially.
    let parallelism = match m * n * k >= GEMM_PARALLEL_OPS && rayon::current_num_threads() > 1 {
        true => gemm::Parallelism::Rayon(0),
        false => gemm::Parallelism::None,
    };
    // SAFETY: `out` has room for `m × n` floats, row-major, which `gemm` writes without reading
    // (`read_dst` off) before `set_len`; `xs` is `m × k` row-major, `ws` the weight's `k × n`
    // values at its strides from its offset; all outlive the call.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            xs.as_ptr(),
            1,
            k as isize,
            ws.as_ptr(),
            w_cs,
            w_rs,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
        out.set_len(m * n);
    }
    Tensor::from_primitive::<Flex>(FlexTensor::from_data(TensorData::new(out, dims)))
}

/// Multiply-adds from which the backend's matmul runs `gemm` on every core (its
/// `PARALLEL_THRESHOLD`; [`matmul_weight`] follows the same rule).
const GEMM_PARALLEL_OPS: usize = 192 * 192 * 192;

/// `act(group_norm(x))` of `x` `[batch, channels, …]`: per (image, group) the mean and the
/// biased variance of its `channels / groups · spatial` values, summed in f64 (two passes, 8
/// interleaved lanes, a fixed order), then per value `((x − mean) · rstd) · γ + β` in f32 with
/// `rstd = 1 / √(var + eps)` (the graph divides by `√(var + eps)`; here one reciprocal a group,
/// so values differ from Burn's `GroupNorm` by an ulp or two), followed by SiLU `v · sigmoid(v)`
/// when `silu` ([`sigmoid`]), in the same pass. Groups run in parallel, one task each, written
/// in place where `x` is not shared. The backend would run about a dozen passes, its sigmoid
/// with a scalar `expf`.
pub(super) fn group_norm<const D: usize>(
    x: Tensor<D>,
    groups: usize,
    eps: f64,
    affine: Option<(Tensor<1>, Tensor<1>)>,
    silu: bool,
) -> Tensor<D> {
    let dims = x.dims();
    let channels = dims[1];
    let spatial: usize = dims[2..].iter().product();
    let per_group = channels / groups;
    let mut out = primitive(x, true);
    let n = out.layout().num_elements();
    let affine = affine.map(|(g, b)| (primitive(g, false), primitive(b, false)));
    let affine: Option<(&[f32], &[f32])> =
        affine.as_ref().map(|(g, b)| (&g.storage::<f32>()[..channels], &b.storage::<f32>()[..channels]));
    out.storage_mut::<f32>()[..n].par_chunks_mut(per_group * spatial).enumerate().for_each(|(task, xs)| {
        let first = task % groups * per_group;
        culturelens_simd::dispatch!({
            let count = xs.len() as f64;
            let mut acc = [0f64; 8];
            let mut chunks = xs.chunks_exact(8);
            for chunk in &mut chunks {
                acc.iter_mut().zip(chunk).for_each(|(a, x)| *a += *x as f64);
            }
            acc.iter_mut().zip(chunks.remainder()).for_each(|(a, x)| *a += *x as f64);
            let mean = acc.iter().sum::<f64>() / count;
            let mut acc = [0f64; 8];
            let mut chunks = xs.chunks_exact(8);
            for chunk in &mut chunks {
                acc.iter_mut().zip(chunk).for_each(|(a, x)| *a += (*x as f64 - mean) * (*x as f64 - mean));
            }
            acc.iter_mut()
                .zip(chunks.remainder())
                .for_each(|(a, x)| *a += (*x as f64 - mean) * (*x as f64 - mean));
            let var = acc.iter().sum::<f64>() / count;
            let (mean, rstd) = (mean as f32, (1.0 / (var + eps).sqrt()) as f32);
            for (c, plane) in xs.chunks_exact_mut(spatial).enumerate() {
                let (gamma, beta) = affine.map_or((1.0, 0.0), |(g, b)| (g[first + c], b[first + c]));
                plane.iter_mut().for_each(|v| *v = ((*v - mean) * rstd) * gamma + beta);
                if silu {
                    plane.iter_mut().for_each(|v| *v *= sigmoid(*v));
                }
            }
        })
    });
    Tensor::from_primitive::<Flex>(out)
}

/// Floats of im2col columns per tile of [`conv3x3`] at most (8 MiB): the output rows of a tile
/// are as many as fit.
const CONV_TILE_FLOATS: usize = 1 << 21;

/// A 3×3 convolution of stride 1 with one pixel of zero padding (diffusers' `conv_in`,
/// `conv_out` and the ResNet blocks' convolutions) of `x` `[batch, c_in, h, w]` with `weight`
/// `[c_out, c_in, 3, 3]` and an optional `bias`, as im2col and one GEMM per tile of output rows:
/// the columns are rows `(c, ky, kx)` of `x` shifted by `(ky − 1, kx − 1)`, each a copy of whole
/// image rows (so the copies are `memcpy`s, channels in parallel), and `gemm` multiplies the
/// weight, whose layout is already `[c_out, c_in · 9]` in that order, with them straight into
/// the NCHW output, which holds the bias beforehand (`out = bias + W · cols`). The backend's
/// convolution re-lays the weight out on every call, converts the input to NHWC and writes
/// its result back to NCHW value by value; its sums run in another order, so values differ
/// by rounding (tested in `conv.rs`).
pub(super) fn conv3x3(x: Tensor<4>, weight: Tensor<4>, bias: Option<Tensor<1>>) -> Tensor<4> {
    let [batch, c_in, h, w] = x.dims();
    let c_out = weight.dims()[0];
    let (k, plane) = (c_in * 9, h * w);
    let (x, weight) = (primitive(x, false), primitive(weight, false));
    let bias = bias.map(|b| primitive(b, false));
    let (xs, ws) = (x.storage::<f32>(), &weight.storage::<f32>()[..c_out * k]);
    let bias: Option<&[f32]> = bias.as_ref().map(|b| &b.storage::<f32>()[..c_out]);
    let mut out = FlexTensor::empty(Shape::new([batch, c_out, h, w]), DType::F32);
    let rows_per_tile = (CONV_TILE_FLOATS / (k * w)).clamp(1, h);
    let mut cols = vec![0f32; k * rows_per_tile * w];
    let dst = &mut out.storage_mut::<f32>()[..batch * c_out * plane];
    for (image, out_image) in
        xs[..batch * c_in * plane].chunks_exact(c_in * plane).zip(dst.chunks_exact_mut(c_out * plane))
    {
        if let Some(bias) = bias {
            out_image.chunks_exact_mut(plane).zip(bias).for_each(|(o, b)| o.fill(*b));
        }
        for y0 in (0..h).step_by(rows_per_tile) {
            let n = rows_per_tile.min(h - y0) * w;
            let cols = &mut cols[..k * n];
            cols.par_chunks_mut(9 * n).zip(image.par_chunks_exact(plane)).for_each(|(taps, src)| {
                for (tap, col) in taps.chunks_exact_mut(n).enumerate() {
                    let (dy, dx) = (tap / 3, tap % 3);
                    for (r, row) in col.chunks_exact_mut(w).enumerate() {
                        // The source row y0 + r + dy − 1, zero outside the image.
                        let Some(y) = (y0 + r + dy).checked_sub(1).filter(|y| *y < h) else {
                            row.fill(0.0);
                            continue;
                        };
                        let src = &src[y * w..][..w];
                        match dx {
                            0 => {
                                row[0] = 0.0;
                                row[1..].copy_from_slice(&src[..w - 1]);
                            }
                            1 => row.copy_from_slice(src),
                            _ => {
                                row[..w - 1].copy_from_slice(&src[1..]);
                                row[w - 1] = 0.0;
                            }
                        }
                    }
                }
            });
            // SAFETY: `dst` is `c_out` rows of `plane` floats (row stride `plane`), written at
            // columns `y0 · w..y0 · w + n`, inside each row; `ws` is `c_out × k` and `cols`
            // `k × n`, both row-major and alive for the call.
            unsafe {
                gemm::gemm(
                    c_out,
                    n,
                    k,
                    out_image.as_mut_ptr().add(y0 * w),
                    1,
                    plane as isize,
                    bias.is_some(),
                    ws.as_ptr(),
                    1,
                    k as isize,
                    cols.as_ptr(),
                    1,
                    n as isize,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::Rayon(0),
                )
            };
        }
    }
    Tensor::from_primitive::<Flex>(out)
}

/// diffusers' `GEGLU` after its projection's GEMM: `y` `[…, 2n]` (without bias) becomes
/// `(y[.., :n] + b[:n]) · gelu(y[.., n:] + b[n:])` `[…, n]`, in that order of operations, one
/// vectorised pass over the rows on every core ([`gelu`], PyTorch's order); the graph adds the
/// bias, splits, runs the backend's scalar `erff` and multiplies, a pass each.
pub(super) fn bias_geglu<const D: usize>(y: Tensor<D>, bias: Tensor<1>) -> Tensor<D> {
    let mut dims = y.dims();
    let width = dims[D - 1];
    let half = width / 2;
    let y = primitive(y, false);
    let rows = y.layout().num_elements() / width;
    let bias = bias.try_into_primitive::<Flex>().expect("a CPU-backend tensor").to_contiguous();
    let bias: &[f32] = &bias.storage::<f32>()[..width];
    dims[D - 1] = half;
    let mut out = FlexTensor::empty(Shape::new(dims), DType::F32);
    let ys = &y.storage::<f32>()[..rows * width];
    out.storage_mut::<f32>()[..rows * half]
        .par_chunks_mut(ROWS_PER_TASK * half)
        .zip(ys.par_chunks(ROWS_PER_TASK * width))
        .for_each(|(out, ys)| {
            culturelens_simd::dispatch!({
                for (o, y) in out.chunks_exact_mut(half).zip(ys.chunks_exact(width)) {
                    let (h, g) = y.split_at(half);
                    let (bh, bg) = bias.split_at(half);
                    for (((o, h), g), (bh, bg)) in o.iter_mut().zip(h).zip(g).zip(bh.iter().zip(bg)) {
                        *o = (h + bh) * gelu(g + bg);
                    }
                }
            })
        });
    Tensor::from_primitive::<Flex>(out)
}

/// `x · sigmoid(1.702 x)`, OpenAI CLIP's quick-GELU.
#[inline(always)]
fn quick_gelu(x: f32) -> f32 {
    x * sigmoid(x * 1.702)
}

/// The exact GELU `½ x (1 + erf(x/√2))` in PyTorch's and the backend's order of operations, with
/// `erf(z) = 1 − erfc(z)` for `z = |x|/√2` by Numerical Recipes' Chebyshev fit `erfc(z) = t ·
/// exp(-z² + P(t))`, `t = 1 / (1 + z/2)` (fractional error below 1.2e-7 for every `z ≥ 0`). No
/// branches, one [`exp`]: within about 3e-7 · max(1, |x|) of the exact GELU (tested), and within
/// a few ulp of the backend's scalar `erff` form, whose f32 cancellation for negative `x` it
/// shares (a form without it moved Kandinsky 2.1's parity against diffusers from 9.1e-6 to
/// 1.13e-5 under the workspace's features).
#[inline(always)]
fn gelu(x: f32) -> f32 {
    let z = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -0.822_152_23 + t * 0.170_872_77;
    let p = 1.488_515_9 + t * p;
    let p = -1.135_204 + t * p;
    let p = 0.278_868_07 + t * p;
    let p = -0.186_288_06 + t * p;
    let p = 0.096_784_18 + t * p;
    let p = 0.374_091_96 + t * p;
    let p = 1.000_023_7 + t * p;
    let p = -1.265_512_2 + t * p;
    // erf(|x|/√2) = 1 − erfc, rounded to f32 as PyTorch's and the backend's `erf` return it;
    // then their `½ x (1 + erf(x/√2))`, with the same cancellation for negative x (parity
    // against them is the point; the exact value would be `x · ½ erfc` there).
    let erf = 1.0 - t * exp(p - z * z);
    let erf = if x < 0.0 { -erf } else { erf };
    0.5 * x * (1.0 + erf)
}

/// The tanh GELU `½ x (1 + tanh(u))`, `u = √(2/π) (x + 0.044715 x³)` (SigLIP's
/// `gelu_pytorch_tanh`), as `x · sigmoid(2u)`: the same function, since `1 + tanh(u) =
/// 2 sigmoid(2u)`, without the cancellation of `1 + tanh(u)` for negative `u`.
#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    const TWO_SQRT_2_OVER_PI: f32 = 2.0 * 0.797_884_6;
    x * sigmoid(TWO_SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x))
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
/// First every head's keys are transposed once (`Kᵀ`, `d × n_kv`, padded with zero keys to a
/// multiple of [`LANE`]), and for heads narrower than [`NARROW_HEAD`] its values too. Then each
/// task takes up to [`QUERIES_PER_TASK`] queries of one (image, head) pair, [`GROUP`] at a time:
/// their scores in base 2 (`q · scale · log₂e` against `Kᵀ`, each key vector loaded once for the
/// group), the hidden keys set to `-∞`, `2^(s − max)` ([`exp2`]) with its sum in the same pass,
/// the weighted values (dot products with `Vᵀ` for narrow heads, sums of value rows in column
/// blocks for wide ones), and one division by the sum per output. Every loop runs over
/// contiguous rows of fixed width, so it vectorises; the sums run in another order than the
/// backend's GEMMs, so values differ from the graph's by rounding (tested in `vit.rs`).
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
    let n_pad = n_kv.next_multiple_of(LANE);
    let (q, k, v) = (primitive(q, false), primitive(k, false), primitive(v, false));
    let (q, k, v) = (q.storage::<f32>(), k.storage::<f32>(), v.storage::<f32>());
    // Kᵀ (and Vᵀ) of every (image, head) pair, `d × n_pad` each, in pair order.
    let transposed = |t: &[f32]| {
        let mut tt = vec![0f32; batch * heads * d * n_pad];
        tt.par_chunks_mut(d * n_pad).enumerate().for_each(|(pair, tt)| {
            let (b, col) = (pair / heads, pair % heads * d);
            for j in 0..n_kv {
                let row = &t[(b * n_kv + j) * hidden + col..][..d];
                for (c, x) in row.iter().enumerate() {
                    tt[c * n_pad + j] = *x;
                }
            }
        });
        tt
    };
    let kt = transposed(k);
    let vt = if d < NARROW_HEAD { transposed(v) } else { Vec::new() };
    let scale = scale * std::f32::consts::LOG2_E;
    let mut out = FlexTensor::empty(Shape::new([batch, n_q, hidden]), DType::F32);
    let blocks = n_q.div_ceil(QUERIES_PER_TASK);
    let dst = Rows(out.storage_mut::<f32>().as_mut_ptr());
    (0..batch * heads * blocks).into_par_iter().for_each(|task| {
        let (pair, block) = (task / blocks, task % blocks);
        let (b, col) = (pair / heads, pair % heads * d);
        let kt = &kt[pair * d * n_pad..][..d * n_pad];
        let vt = if vt.is_empty() { &[][..] } else { &vt[pair * d * n_pad..][..d * n_pad] };
        let hidden_keys = key_padding.map(|m| &m[b * n_kv..(b + 1) * n_kv]);
        let queries = block * QUERIES_PER_TASK..((block + 1) * QUERIES_PER_TASK).min(n_q);
        culturelens_simd::dispatch!({
            let mut qs = vec![0f32; GROUP * d];
            let mut s = vec![0f32; GROUP * n_pad];
            let mut o = vec![0f32; GROUP * d];
            for first in queries.clone().step_by(GROUP) {
                let rows = GROUP.min(queries.end - first);
                for (r, qs) in qs.chunks_exact_mut(d).enumerate() {
                    match r < rows {
                        true => {
                            let row = &q[(b * n_q + first + r) * hidden + col..][..d];
                            qs.iter_mut().zip(row).for_each(|(a, x)| *a = x * scale);
                        }
                        false => qs.fill(0.0),
                    }
                }
                scores(&qs, kt, d, &mut s);
                let mut sums = [0f32; GROUP];
                for (r, (p, sum)) in s.chunks_exact_mut(n_pad).zip(&mut sums).take(rows).enumerate() {
                    let seen = if causal { (first + r + 1).min(n_kv) } else { n_kv };
                    p[seen..].fill(f32::NEG_INFINITY);
                    if let Some(hidden_keys) = hidden_keys {
                        p.iter_mut().zip(&hidden_keys[..seen]).for_each(|(s, h)| {
                            *s = if *h { f32::NEG_INFINITY } else { *s };
                        });
                    }
                    *sum = softmax_numerators(p);
                }
                match d < NARROW_HEAD {
                    true => {
                        for (p, o) in s.chunks_exact(n_pad).zip(o.chunks_exact_mut(d)).take(rows) {
                            for (c, o) in o.iter_mut().enumerate() {
                                *o = dot(p, &vt[c * n_pad..(c + 1) * n_pad]);
                            }
                        }
                    }
                    false => weigh_value_rows(&s, v, (b * n_kv * hidden + col, hidden), n_kv, &mut o),
                }
                for (r, (o, sum)) in o.chunks_exact_mut(d).zip(sums).take(rows).enumerate() {
                    o.iter_mut().for_each(|x| *x /= sum);
                    // SAFETY: `dst` points at `batch · n_q · hidden` floats; this task alone
                    // writes the columns `col..col + d` of row `(b, first + r)`, inside them.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            o.as_ptr(),
                            dst.at((b * n_q + first + r) * hidden + col),
                            d,
                        )
                    };
                }
            }
        })
    });
    Tensor::from_primitive::<Flex>(out)
}

/// The scores `s[r] = qs[r] · Kᵀ` of [`GROUP`] queries (`qs`: `GROUP × d`) against `kt`
/// (`d × n_pad`), into `s` (`GROUP × n_pad`): per [`LANE`] keys, `GROUP` register rows summed
/// over the `d` columns, so each key vector is loaded once for the group.
#[inline(always)]
fn scores(qs: &[f32], kt: &[f32], d: usize, s: &mut [f32]) {
    let n_pad = kt.len() / d;
    for j in (0..n_pad).step_by(LANE) {
        let mut acc = [[0f32; LANE]; GROUP];
        for c in 0..d {
            let keys: &[f32; LANE] = kt[c * n_pad + j..][..LANE].try_into().expect("LANE keys");
            for (r, acc) in acc.iter_mut().enumerate() {
                let qc = qs[r * d + c];
                acc.iter_mut().zip(keys).for_each(|(a, k)| *a += qc * k);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            s[r * n_pad + j..][..LANE].copy_from_slice(acc);
        }
    }
}

/// `p ← 2^(p − max p)` over a row of base-2 scores (a multiple of [`LANE`] long, hidden keys
/// at `-∞`, which become 0), returning the sum of the new values (in [`LANE`] partial sums).
#[inline(always)]
fn softmax_numerators(p: &mut [f32]) -> f32 {
    let max = lanes(p, f32::NEG_INFINITY, f32::max);
    let mut acc = [0f32; LANE];
    for chunk in p.chunks_exact_mut(LANE) {
        for (x, a) in chunk.iter_mut().zip(&mut acc) {
            *x = exp2(*x - max);
            *a += *x;
        }
    }
    lanes(&acc, 0.0, |a, b| a + b)
}

/// `o[r] = Σ_j s[r][j] v_j` for the [`GROUP`] rows of weights `s` (`GROUP × n_pad`, zero past
/// `n_kv`) over the value rows `v[start + j · stride..][..d]`, `d = o.len() / GROUP`: in blocks
/// of 16 or 8 columns, each block's `GROUP` rows of sums held in registers across the keys, so
/// each value row is loaded once for the group (the last `d mod 8` columns one at a time).
#[inline(always)]
fn weigh_value_rows(s: &[f32], v: &[f32], (start, stride): (usize, usize), n_kv: usize, o: &mut [f32]) {
    let d = o.len() / GROUP;
    let mut c = 0;
    while c < d {
        c += match d - c {
            16.. => weigh_block::<16>(s, v, (start + c, stride), n_kv, o, c),
            8.. => weigh_block::<8>(s, v, (start + c, stride), n_kv, o, c),
            _ => weigh_block::<1>(s, v, (start + c, stride), n_kv, o, c),
        };
    }
}

/// The columns `c..c + W` of [`weigh_value_rows`]; returns `W`.
#[inline(always)]
fn weigh_block<const W: usize>(
    s: &[f32],
    v: &[f32],
    (start, stride): (usize, usize),
    n_kv: usize,
    o: &mut [f32],
    c: usize,
) -> usize {
    let (n_pad, d) = (s.len() / GROUP, o.len() / GROUP);
    let mut acc = [[0f32; W]; GROUP];
    for j in 0..n_kv {
        let row: &[f32; W] = v[start + j * stride..][..W].try_into().expect("W values");
        for (r, acc) in acc.iter_mut().enumerate() {
            let w = s[r * n_pad + j];
            acc.iter_mut().zip(row).for_each(|(a, x)| *a += w * x);
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        o[r * d + c..][..W].copy_from_slice(acc);
    }
    W
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

/// `2^x` for the softmax's `x ≤ 0`, without branches or table lookups (so loops over it
/// vectorise): `x = n + f`, `|f| ≤ ½`, `2^f` by a degree-5 polynomial in `f` (a relative-error
/// minimax fit, 9.1e-8 on [−½, ½] in exact arithmetic, fitted by Lawson's iteration in
/// `scripts/fixtures/fit_exp2.py`), scaled by `2^n` through the exponent bits. Within 2 ulp of the
/// correctly rounded value down to `2^-126` (tested); 0 below about `-126.5` (and for `-∞`), NaN
/// for NaN. Five multiply-adds where [`exp`]'s form (a degree-7 polynomial in `f ln 2`) takes
/// eight operations more: the softmax's exponentials are most of the attention's time.
#[inline(always)]
fn exp2(x: f32) -> f32 {
    // 1.5 · 2²³: adding it rounds to an integer, held in the low bits of the sum.
    const SHIFT: f32 = 12_582_912.0;
    // c1 is the fit's, not ln 2 (0.693 147 18): the minimax trades it against the other four.
    #[allow(clippy::approx_constant)]
    const C: [f32; 5] = [0.693_147, 0.240_222_42, 0.055_507_336, 0.009_671_513, 0.001_326_472_7];
    let x = if x < -127.0 { -127.0 } else { x };
    let t = x + SHIFT;
    let n = t - SHIFT;
    let k = t.to_bits() as i32 - SHIFT.to_bits() as i32;
    let f = x - n;
    let p = ((((C[4] * f + C[3]) * f + C[2]) * f + C[1]) * f + C[0]) * f + 1.0;
    // k ∈ [-127, 0]: the exponent field k + 127 (0 for k = -127, so the product is 0).
    p * f32::from_bits(((k + 127) << 23) as u32)
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
    fn exp2_is_within_2_ulp_down_to_the_smallest_normal() {
        let mut worst = (0, 0.0f32);
        // Every 31st f32 in [-126, 0], and the points where the rounding of `n` changes.
        let mut xs: Vec<f32> = (0..f32::to_bits(126.0)).step_by(31).map(|b| -f32::from_bits(b)).collect();
        xs.extend((0..=252).map(|i| -(i as f32) * 0.5));
        for x in xs {
            let want = (x as f64).exp2() as f32;
            let e = ulps(exp2(x), want);
            if e > worst.0 {
                worst = (e, x);
            }
        }
        assert!(worst.0 <= 2, "{} ulp at x = {:e}", worst.0, worst.1);
        assert_eq!(exp2(0.0), 1.0);
        assert_eq!(exp2(-1.0), 0.5);
        assert_eq!(exp2(-126.0), f32::MIN_POSITIVE);
        assert_eq!(exp2(-127.0), 0.0);
        assert_eq!(exp2(-1000.0), 0.0);
        assert_eq!(exp2(f32::NEG_INFINITY), 0.0);
        assert!(exp2(f32::NAN).is_nan());
    }

    /// The vectorisable GELUs against the exact functions in f64, on a grid over [-12, 12]:
    /// absolute error within 3e-7 · max(1, |x|) (the f32 rounding of the arguments alone is
    /// about 1e-7 of |x|), and the limits.
    #[test]
    fn gelus_match_the_exact_functions() {
        let erf_gelu = |x: f64| 0.5 * x * libm_erfc(-x / std::f64::consts::SQRT_2);
        // `½ x (1 + tanh(u))` as `x · sigmoid(2u)`, exact in f64 (1 + tanh(u) cancels there too).
        let tanh_gelu = |x: f64| {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            x / (1.0 + (-2.0 * u).exp())
        };
        let mut worst = [(0.0f64, 0.0f32); 2];
        for i in -1_200_000..=1_200_000 {
            let x = i as f32 * 1e-5;
            let scale = (x.abs() as f64).max(1.0);
            for (w, (got, want)) in
                worst.iter_mut().zip([(gelu(x), erf_gelu(x as f64)), (gelu_tanh(x), tanh_gelu(x as f64))])
            {
                let e = (got as f64 - want).abs() / scale;
                if e > w.0 {
                    *w = (e, x);
                }
            }
        }
        assert!(worst[0].0 <= 3e-7, "erf GELU: {:e} at x = {}", worst[0].0, worst[0].1);
        assert!(worst[1].0 <= 3e-7, "tanh GELU: {:e} at x = {}", worst[1].0, worst[1].1);
        for f in [gelu, gelu_tanh] {
            assert_eq!(f(0.0), 0.0);
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert_eq!(f(100.0), 100.0);
            assert_eq!(f(-100.0), 0.0);
            assert!(f(f32::NAN).is_nan());
        }
    }

    /// `erfc` in f64 by its continued fraction / series (the reference of the GELU test; std has
    /// no `erf`): the series `erf(x) = 2/√π Σ (-1)ⁿ x^(2n+1) / (n! (2n+1))` below 3 and Lentz's
    /// continued fraction above, both to f64 rounding, far below the f32 errors tested.
    fn libm_erfc(x: f64) -> f64 {
        if x < 0.0 {
            return 2.0 - libm_erfc(-x);
        }
        if x < 3.0 {
            let (mut term, mut sum, mut n) = (x, x, 0.0);
            while term.abs() > 1e-17 * sum.abs() {
                n += 1.0;
                term *= -x * x / n;
                sum += term / (2.0 * n + 1.0);
            }
            return 1.0 - 2.0 / std::f64::consts::PI.sqrt() * sum;
        }
        // erfc(x) = e^(-x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...))))).
        let mut f = x;
        for k in (1..200).rev() {
            f = x + (k as f64 / 2.0) / f;
        }
        (-x * x).exp() / std::f64::consts::PI.sqrt() / f
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
