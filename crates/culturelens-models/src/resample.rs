//! Resampling weights, computed on the host so every backend sees the same numbers.
//!
//! - [`pil_resize_u8`]: Pillow's `Image.resize` for 8-bit RGB or RGBa (libImaging `Resample.c`): a
//!   separable convolution whose per-output-pixel coefficients are normalised, quantised to
//!   22-bit fixed point, applied along one axis (result rounded to u8) then the other. The
//!   transformers image processors (PIL backend) resize this way, so reproducing it bit for bit
//!   is what makes `pixel_values` identical.
//! - [`torch_bicubic_matrix`] / [`torch_bicubic_aa_matrix`]: the 1-D weights of
//!   `torch.nn.functional.interpolate(mode="bicubic", align_corners=False)` without and with
//!   `antialias=True`, used to resize DINOv2 position embeddings.

/// A Pillow resampling filter (`PIL.Image.Resampling`, the `resample` code of a
/// preprocessor_config.json).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PilFilter {
    Lanczos,
    Bilinear,
    Bicubic,
    Box,
    Hamming,
}

impl PilFilter {
    /// From Pillow's integer code; `0` (nearest) is not a convolution and is not supported.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::Lanczos),
            2 => Some(Self::Bilinear),
            3 => Some(Self::Bicubic),
            4 => Some(Self::Box),
            5 => Some(Self::Hamming),
            _ => None,
        }
    }

    fn support(self) -> f64 {
        match self {
            Self::Box => 0.5,
            Self::Bilinear | Self::Hamming => 1.0,
            Self::Bicubic => 2.0,
            Self::Lanczos => 3.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        match self {
            Self::Box => f64::from(u8::from(x > -0.5 && x <= 0.5)),
            Self::Bilinear => (1.0 - x.abs()).max(0.0),
            Self::Hamming => {
                let x = x.abs();
                if x == 0.0 {
                    1.0
                } else if x >= 1.0 {
                    0.0
                } else {
                    let px = x * std::f64::consts::PI;
                    px.sin() / px * (0.54 + 0.46 * px.cos())
                }
            }
            Self::Bicubic => keys_cubic(x, -0.5),
            Self::Lanczos => {
                if (-3.0..3.0).contains(&x) {
                    sinc(x) * sinc(x / 3.0)
                } else {
                    0.0
                }
            }
        }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let px = x * std::f64::consts::PI;
        px.sin() / px
    }
}

/// Keys' cubic convolution kernel with parameter `a` (Pillow and torch antialias: −0.5,
/// torch bicubic without antialias: −0.75).
fn keys_cubic(x: f64, a: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * a
    } else {
        0.0
    }
}

/// For each output index: the first input index and the normalised weights of the inputs it
/// reads (`precompute_coeffs` in Pillow, `_compute_indices_min_size_weights_aa` in torch).
pub fn antialias_coefficients(in_size: usize, out_size: usize, filter: PilFilter) -> Vec<(usize, Vec<f64>)> {
    let scale = in_size as f64 / out_size as f64;
    let filter_scale = scale.max(1.0);
    let support = filter.support() * filter_scale;
    (0..out_size)
        .map(|xx| {
            let center = (xx as f64 + 0.5) * scale;
            // C's (int) cast truncates toward zero, as `as i64` does.
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let mut w: Vec<f64> =
                (xmin..xmax).map(|x| filter.weight((x as f64 - center + 0.5) / filter_scale)).collect();
            let total: f64 = w.iter().sum();
            if total != 0.0 {
                w.iter_mut().for_each(|v| *v /= total);
            }
            (xmin, w)
        })
        .collect()
}

/// Pillow's fixed-point precision for 8-bit images (`PRECISION_BITS = 32 - 8 - 2`).
const PRECISION_BITS: u32 = 22;

fn fixed_point(coefficients: Vec<(usize, Vec<f64>)>) -> Vec<(usize, Vec<i64>)> {
    let one = f64::from(1u32 << PRECISION_BITS);
    coefficients
        .into_iter()
        .map(|(start, w)| {
            let k = w
                .iter()
                .map(|&v| if v < 0.0 { (-0.5 + v * one) as i64 } else { (0.5 + v * one) as i64 })
                .collect();
            (start, k)
        })
        .collect()
}

fn clip8(acc: i64) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Resizes interleaved 8-bit pixels of `C` channels (`width × height`) to `out_w × out_h`
/// exactly as Pillow's `Image.resize(size, resample=filter)` does: every channel alike, as for
/// the three bands of `RGB` and the four of premultiplied `RGBa`.
///
/// The horizontal pass runs first, except when the width grows while the height shrinks: then
/// Pillow (checked against Pillow 13) shrinks vertically first. The order matters because the
/// intermediate image is rounded to u8.
pub fn pil_resize_u8<const C: usize>(
    px: &[u8],
    width: usize,
    height: usize,
    out_w: usize,
    out_h: usize,
    filter: PilFilter,
) -> Vec<u8> {
    if out_w > width && out_h < height {
        let t = transpose_u8::<C>(px, width, height);
        let resized = resize_horizontal_first::<C>(&t, (height, width), (out_h, out_w), filter);
        return transpose_u8::<C>(&resized, out_h, out_w);
    }
    resize_horizontal_first::<C>(px, (width, height), (out_w, out_h), filter)
}

/// Pillow's `Image.resize(size, NEAREST)` on interleaved `C`-channel pixels, which Pillow also
/// uses for every palette (`P`) and bilevel (`1`) image whatever filter is asked for. Output
/// pixel `x` reads input `int(x0)`, `x0` stepping from `w / out_w / 2` by `w / out_w` in f64,
/// accumulated as Pillow's affine transform does (rows alike). The rule matched Pillow 13 on
/// 300 random size pairs when written; the palette and bilevel fixtures test it end to end.
pub fn pil_resize_nearest_u8<const C: usize>(
    px: &[u8],
    width: usize,
    height: usize,
    out_w: usize,
    out_h: usize,
) -> Vec<u8> {
    assert_eq!(px.len(), width * height * C, "{C}-channel buffer does not match {width} × {height}");
    let sources = |size: usize, out: usize| {
        let step = size as f64 / out as f64;
        let mut at = step * 0.5;
        (0..out)
            .map(|_| {
                let i = (at as usize).min(size - 1);
                at += step;
                i
            })
            .collect::<Vec<_>>()
    };
    let (xs, ys) = (sources(width, out_w), sources(height, out_h));
    let mut out = Vec::with_capacity(out_w * out_h * C);
    for &y in &ys {
        for &x in &xs {
            out.extend_from_slice(&px[(y * width + x) * C..(y * width + x) * C + C]);
        }
    }
    out
}

/// Swaps rows and columns of interleaved `C`-channel pixels (`width × height` → `height × width`).
fn transpose_u8<const C: usize>(px: &[u8], width: usize, height: usize) -> Vec<u8> {
    let mut out = vec![0u8; px.len()];
    for y in 0..height {
        for x in 0..width {
            out[(x * height + y) * C..(x * height + y) * C + C]
                .copy_from_slice(&px[(y * width + x) * C..(y * width + x) * C + C]);
        }
    }
    out
}

/// `ImagingResampleInner`: horizontal pass (on the rows the vertical pass reads), then vertical,
/// from `(width, height)` to `(out_w, out_h)`.
fn resize_horizontal_first<const C: usize>(
    px: &[u8],
    (width, height): (usize, usize),
    (out_w, out_h): (usize, usize),
    filter: PilFilter,
) -> Vec<u8> {
    assert_eq!(px.len(), width * height * C, "{C}-channel buffer does not match {width} × {height}");
    if (width, height) == (out_w, out_h) {
        return px.to_vec();
    }
    let horizontal = fixed_point(antialias_coefficients(width, out_w, filter));
    let vertical = fixed_point(antialias_coefficients(height, out_h, filter));
    let round = 1i64 << (PRECISION_BITS - 1);

    // Horizontal pass, restricted (as in Pillow) to the rows the vertical pass reads.
    let (row_first, row_last) = if out_h != height {
        let (first, _) = vertical[0];
        let (last_start, last_w) = &vertical[out_h - 1];
        (first, last_start + last_w.len())
    } else {
        (0, height)
    };
    let (mut tmp, tmp_w) = if out_w != width {
        let mut tmp = Vec::with_capacity((row_last - row_first) * out_w * C);
        for y in row_first..row_last {
            let row = &px[y * width * C..(y + 1) * width * C];
            for (start, k) in &horizontal {
                let mut acc = [round; C];
                for (i, &kv) in k.iter().enumerate() {
                    let p = &row[(start + i) * C..(start + i) * C + C];
                    for c in 0..C {
                        acc[c] += i64::from(p[c]) * kv;
                    }
                }
                tmp.extend(acc.map(clip8));
            }
        }
        (tmp, out_w)
    } else {
        (px[row_first * width * C..row_last * width * C].to_vec(), width)
    };
    if out_h == height {
        return tmp;
    }
    let mut out = Vec::with_capacity(out_w * out_h * C);
    for (start, k) in &vertical {
        let start = start - row_first;
        for x in 0..tmp_w {
            let mut acc = [round; C];
            for (i, &kv) in k.iter().enumerate() {
                let p = &tmp[((start + i) * tmp_w + x) * C..((start + i) * tmp_w + x) * C + C];
                for c in 0..C {
                    acc[c] += i64::from(p[c]) * kv;
                }
            }
            out.extend(acc.map(clip8));
        }
    }
    tmp.clear();
    out
}

/// `out_size × in_size` weights of torch's bicubic interpolation (`align_corners=False`,
/// `antialias=False`): four taps of Keys' kernel with a = −0.75, borders clamped.
pub fn torch_bicubic_matrix(in_size: usize, out_size: usize) -> Vec<f64> {
    let scale = in_size as f64 / out_size as f64;
    let mut m = vec![0.0; out_size * in_size];
    for o in 0..out_size {
        let src = scale * (o as f64 + 0.5) - 0.5;
        let floor = src.floor();
        let t = src - floor;
        let taps = [
            keys_cubic(t + 1.0, -0.75),
            keys_cubic(t, -0.75),
            keys_cubic(1.0 - t, -0.75),
            keys_cubic(2.0 - t, -0.75),
        ];
        for (k, w) in taps.iter().enumerate() {
            let idx = (floor as i64 - 1 + k as i64).clamp(0, in_size as i64 - 1) as usize;
            m[o * in_size + idx] += w;
        }
    }
    m
}

/// `out_size × in_size` weights of torch's bicubic interpolation with `antialias=True`
/// (`align_corners=False`), which uses Pillow's coefficients (a = −0.5).
pub fn torch_bicubic_aa_matrix(in_size: usize, out_size: usize) -> Vec<f64> {
    let mut m = vec![0.0; out_size * in_size];
    for (o, (start, w)) in
        antialias_coefficients(in_size, out_size, PilFilter::Bicubic).into_iter().enumerate()
    {
        for (i, v) in w.into_iter().enumerate() {
            m[o * in_size + start + i] = v;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_picks_pillows_source_pixels() {
        // 5 → 2: steps of 2.5 from 1.25 read pixels 1 and 3; 2 → 4: steps of 0.5 from 0.25
        // read 0, 0, 1, 1.
        let row: Vec<u8> = (0..5).collect();
        assert_eq!(pil_resize_nearest_u8::<1>(&row, 5, 1, 2, 1), [1, 3]);
        assert_eq!(pil_resize_nearest_u8::<1>(&[7, 9], 2, 1, 4, 1), [7, 7, 9, 9]);
        let column = [10u8, 11, 12, 20, 21, 22];
        let doubled = pil_resize_nearest_u8::<3>(&column, 1, 2, 1, 4);
        assert_eq!(doubled, [10, 11, 12, 10, 11, 12, 20, 21, 22, 20, 21, 22]);
    }

    #[test]
    fn identity_resize_is_a_copy() {
        let px: Vec<u8> = (0..2 * 3 * 3).map(|v| v as u8).collect();
        assert_eq!(pil_resize_u8::<3>(&px, 3, 2, 3, 2, PilFilter::Bicubic), px);
    }

    #[test]
    fn constant_image_stays_constant() {
        let px = vec![77u8; 7 * 5 * 3];
        for f in
            [PilFilter::Bicubic, PilFilter::Bilinear, PilFilter::Lanczos, PilFilter::Box, PilFilter::Hamming]
        {
            let out = pil_resize_u8::<3>(&px, 7, 5, 3, 4, f);
            assert!(out.iter().all(|&v| v == 77), "{f:?}");
            let out = pil_resize_u8::<3>(&px, 7, 5, 11, 9, f);
            assert!(out.iter().all(|&v| v == 77), "{f:?}");
        }
    }

    #[test]
    fn box_halving_averages_pairs() {
        // 4 × 1 → 2 × 1 with the box filter averages (10, 30) and (50, 70), rounding half up.
        let px: Vec<u8> = [10u8, 30, 50, 71].iter().flat_map(|&v| [v, v, v]).collect();
        let out = pil_resize_u8::<3>(&px, 4, 1, 2, 1, PilFilter::Box);
        assert_eq!(out, vec![20, 20, 20, 61, 61, 61]);
    }

    #[test]
    fn bicubic_coefficients_sum_to_one_and_hand_value() {
        for (start, w) in antialias_coefficients(37, 16, PilFilter::Bicubic) {
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12, "at {start}");
        }
        // Upsampling 2 → 4, output 0: centre 0.25, inputs 0 and 1 whose centres lie 0.25 and
        // 1.25 away; Keys(a = -0.5) gives 0.8671875 and -0.0703125, normalised by their sum.
        let c = antialias_coefficients(2, 4, PilFilter::Bicubic);
        let (start, w) = &c[0];
        assert_eq!(*start, 0);
        let total = 0.8671875 - 0.0703125;
        assert!((w[0] - 0.8671875 / total).abs() < 1e-12);
        assert!((w[1] + 0.0703125 / total).abs() < 1e-12);
    }

    #[test]
    fn torch_bicubic_rows_sum_to_one() {
        for (i, o) in [(37, 16), (4, 7), (7, 7)] {
            let m = torch_bicubic_matrix(i, o);
            for row in m.chunks(i) {
                assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            }
        }
        // Same size: the identity.
        let m = torch_bicubic_matrix(3, 3);
        assert_eq!(m, vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    }
}
