//! The diffusion models' 3×3 convolutions (diffusers' `conv_in`, `conv_out` and ResNet-block
//! convolutions: stride 1, one pixel of zero padding).

#[cfg(feature = "flex-fused")]
use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2d;
use burn::tensor::Tensor;

#[cfg(feature = "flex-fused")]
use super::cpu;

/// `conv.forward(x)` of `x` `[batch, c_in, h, w]`.
///
/// With the crate feature `flex-fused`, on the CPU backend (f32), a 3×3 convolution of stride 1,
/// dilation 1, one group and one pixel of padding on every side runs as im2col by row copies
/// and one GEMM per tile of output rows, written straight into the NCHW output over its bias
/// (`cpu::conv3x3`); other convolutions, and other backends, run `conv.forward`. Values differ
/// from the backend's by the GEMM's order of summation (tested below).
pub fn conv2d(conv: &Conv2d, x: Tensor<4>) -> Tensor<4> {
    #[cfg(feature = "flex-fused")]
    if cpu::fused(&x)
        && conv.kernel_size == [3, 3]
        && conv.stride == [1, 1]
        && conv.dilation == [1, 1]
        && conv.groups == 1
        && matches!(conv.padding, PaddingConfig2d::Explicit(1, 1, 1, 1))
    {
        return cpu::conv3x3(x, conv.weight.val(), conv.bias.as_ref().map(|b| b.val()));
    }
    conv.forward(x)
}

#[cfg(all(test, feature = "flex-fused"))]
mod tests {
    use super::*;
    use burn::nn::conv::Conv2dConfig;
    use burn::tensor::{Device, TensorData};
    use culturelens_rng::SplitMix64;

    /// The CPU convolution against the backend's on images of one row, one column, an odd
    /// size and one of many output-row tiles (c_in · 9 · w large), with and without a bias. The
    /// bound, relative to the largest |value|, is 3× the worst measured (6.8e-7).
    #[test]
    fn cpu_conv3x3_matches_the_backend() {
        let device = Device::flex();
        let mut rng = SplitMix64::new(17);
        let cases: [(usize, usize, usize, usize, bool); 5] = [
            (3, 5, 1, 9, true),
            (4, 2, 7, 1, true),
            (6, 8, 11, 13, false),
            (2, 3, 2, 2, true),
            (64, 4, 40, 900, true),
        ];
        for (c_in, c_out, h, w, bias) in cases {
            let conv = Conv2dConfig::new([c_in, c_out], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_bias(bias)
                .init(&device);
            let data: Vec<f32> = (0..2 * c_in * h * w).map(|_| rng.normal() as f32).collect();
            let x = Tensor::<4>::from_data(TensorData::new(data, [2, c_in, h, w]), &device);
            let values = |t: Tensor<4>| t.into_data().try_into_vec::<f32>().unwrap();
            let (fused, graph) = (values(conv2d(&conv, x.clone())), values(conv.forward(x)));
            let scale = graph.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let worst = fused.iter().zip(&graph).map(|(f, g)| (f - g).abs()).fold(0.0, f32::max) / scale;
            println!("{c_in}→{c_out} at {h}×{w}: worst {worst:.2e}");
            assert!(worst <= 2e-6, "{c_in}→{c_out} at {h}×{w}: {worst:e}");
        }
    }
}
