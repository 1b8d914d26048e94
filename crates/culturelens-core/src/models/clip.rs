//! CLIP (Radford et al., 2021) in the transformers layout: `CLIPModel`'s vision tower with
//! `visual_projection` and text tower with `text_projection`. [`Clip::image_features`] and
//! [`Clip::text_features`] return exactly what transformers' `get_image_features` /
//! `get_text_features` return (projected, not normalised). OpenAI CLIP and the LAION/OpenCLIP
//! checkpoints converted to transformers share this code; they differ only in `hidden_act`.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::Deserialize;

use super::vit::{Activation, Encoder, EncoderShape};
use super::weights::{Checkpoint, WeightError, load_conv2d, load_embedding, load_layer_norm, load_linear};

/// `config.json` of a `CLIPModel` (fields the architecture needs; others are ignored).
#[derive(Clone, Debug, Deserialize)]
pub struct ClipConfig {
    pub text_config: ClipTextConfig,
    pub vision_config: ClipVisionConfig,
    #[serde(default = "defaults::projection_dim")]
    pub projection_dim: usize,
}

/// `text_config` of a `CLIPConfig` (defaults are transformers' `CLIPTextConfig` defaults).
#[derive(Clone, Debug, Deserialize)]
pub struct ClipTextConfig {
    #[serde(default = "defaults::vocab_size")]
    pub vocab_size: usize,
    #[serde(default = "defaults::text_hidden_size")]
    pub hidden_size: usize,
    #[serde(default = "defaults::text_intermediate_size")]
    pub intermediate_size: usize,
    #[serde(default = "defaults::num_hidden_layers")]
    pub num_hidden_layers: usize,
    #[serde(default = "defaults::text_num_attention_heads")]
    pub num_attention_heads: usize,
    #[serde(default = "defaults::max_position_embeddings")]
    pub max_position_embeddings: usize,
    #[serde(default = "defaults::hidden_act")]
    pub hidden_act: Activation,
    #[serde(default = "defaults::layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "defaults::eos_token_id")]
    pub eos_token_id: u32,
    #[serde(default)]
    pub pad_token_id: Option<u32>,
}

/// `vision_config` of a `CLIPConfig`.
#[derive(Clone, Debug, Deserialize)]
pub struct ClipVisionConfig {
    #[serde(default = "defaults::vision_hidden_size")]
    pub hidden_size: usize,
    #[serde(default = "defaults::vision_intermediate_size")]
    pub intermediate_size: usize,
    #[serde(default = "defaults::num_hidden_layers")]
    pub num_hidden_layers: usize,
    #[serde(default = "defaults::vision_num_attention_heads")]
    pub num_attention_heads: usize,
    #[serde(default = "defaults::num_channels")]
    pub num_channels: usize,
    #[serde(default = "defaults::image_size")]
    pub image_size: usize,
    #[serde(default = "defaults::patch_size")]
    pub patch_size: usize,
    #[serde(default = "defaults::hidden_act")]
    pub hidden_act: Activation,
    #[serde(default = "defaults::layer_norm_eps")]
    pub layer_norm_eps: f64,
}

mod defaults {
    use super::Activation;
    pub fn projection_dim() -> usize {
        512
    }
    pub fn vocab_size() -> usize {
        49408
    }
    pub fn text_hidden_size() -> usize {
        512
    }
    pub fn text_intermediate_size() -> usize {
        2048
    }
    pub fn num_hidden_layers() -> usize {
        12
    }
    pub fn text_num_attention_heads() -> usize {
        8
    }
    pub fn max_position_embeddings() -> usize {
        77
    }
    pub fn hidden_act() -> Activation {
        Activation::QuickGelu
    }
    pub fn layer_norm_eps() -> f64 {
        1e-5
    }
    pub fn eos_token_id() -> u32 {
        2
    }
    pub fn vision_hidden_size() -> usize {
        768
    }
    pub fn vision_intermediate_size() -> usize {
        3072
    }
    pub fn vision_num_attention_heads() -> usize {
        12
    }
    pub fn num_channels() -> usize {
        3
    }
    pub fn image_size() -> usize {
        224
    }
    pub fn patch_size() -> usize {
        32
    }
}

/// `vision_model` of `CLIPModel` (`CLIPVisionTransformer`).
#[derive(Module, Debug)]
pub struct ClipVisionTransformer {
    pub patch_embedding: Conv2d,
    pub class_embedding: Param<Tensor<1>>,
    pub position_embedding: Embedding,
    pub pre_layrnorm: LayerNorm,
    pub encoder: Encoder,
    pub post_layernorm: LayerNorm,
}

/// `text_model` of `CLIPModel` (`CLIPTextTransformer`).
#[derive(Module, Debug)]
pub struct ClipTextTransformer {
    pub token_embedding: Embedding,
    pub position_embedding: Embedding,
    pub encoder: Encoder,
    pub final_layer_norm: LayerNorm,
}

/// Both CLIP towers with their projections.
#[derive(Module, Debug)]
pub struct Clip {
    pub vision_model: ClipVisionTransformer,
    pub visual_projection: Linear,
    pub text_model: ClipTextTransformer,
    pub text_projection: Linear,
    #[module(skip)]
    pub config: ClipConfig,
}

impl ClipVisionConfig {
    fn encoder_shape(&self) -> EncoderShape {
        EncoderShape {
            hidden: self.hidden_size,
            intermediate: self.intermediate_size,
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            layer_norm_eps: self.layer_norm_eps,
            act: self.hidden_act,
        }
    }

    pub fn num_positions(&self) -> usize {
        (self.image_size / self.patch_size).pow(2) + 1
    }

    pub fn init(&self, device: &Device) -> ClipVisionTransformer {
        let d = self.hidden_size;
        let norm = || LayerNormConfig::new(d).with_epsilon(self.layer_norm_eps).init(device);
        ClipVisionTransformer {
            patch_embedding: Conv2dConfig::new([self.num_channels, d], [self.patch_size; 2])
                .with_stride([self.patch_size; 2])
                .with_bias(false)
                .init(device),
            class_embedding: Param::from_tensor(Tensor::zeros([d], device)),
            position_embedding: EmbeddingConfig::new(self.num_positions(), d).init(device),
            pre_layrnorm: norm(),
            encoder: Encoder::init(&self.encoder_shape(), device),
            post_layernorm: norm(),
        }
    }
}

impl ClipTextConfig {
    fn encoder_shape(&self) -> EncoderShape {
        EncoderShape {
            hidden: self.hidden_size,
            intermediate: self.intermediate_size,
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            layer_norm_eps: self.layer_norm_eps,
            act: self.hidden_act,
        }
    }

    pub fn init(&self, device: &Device) -> ClipTextTransformer {
        let d = self.hidden_size;
        ClipTextTransformer {
            token_embedding: EmbeddingConfig::new(self.vocab_size, d).init(device),
            position_embedding: EmbeddingConfig::new(self.max_position_embeddings, d).init(device),
            encoder: Encoder::init(&self.encoder_shape(), device),
            final_layer_norm: LayerNormConfig::new(d).with_epsilon(self.layer_norm_eps).init(device),
        }
    }

    /// Position of the pooled token in `ids`: the first `eos_token_id`, or, for the configs
    /// written before transformers PR #24773 (`eos_token_id == 2`), the highest id.
    pub fn pooled_position(&self, ids: &[u32]) -> usize {
        if self.eos_token_id == 2 {
            let max = ids.iter().copied().max().unwrap_or(0);
            ids.iter().position(|&t| t == max).unwrap_or(0)
        } else {
            ids.iter().position(|&t| t == self.eos_token_id).unwrap_or(0)
        }
    }
}

impl ClipConfig {
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// A randomly initialised model (parameters are materialised lazily).
    pub fn init(&self, device: &Device) -> Clip {
        Clip {
            vision_model: self.vision_config.init(device),
            visual_projection: LinearConfig::new(self.vision_config.hidden_size, self.projection_dim)
                .with_bias(false)
                .init(device),
            text_model: self.text_config.init(device),
            text_projection: LinearConfig::new(self.text_config.hidden_size, self.projection_dim)
                .with_bias(false)
                .init(device),
            config: self.clone(),
        }
    }
}

impl ClipVisionTransformer {
    /// Loads `{prefix}.embeddings.*`, `pre_layrnorm`, `encoder`, `post_layernorm`.
    pub fn load(&mut self, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
        let [d] = self.class_embedding.lazy_shape().dims();
        load_conv2d(&mut self.patch_embedding, ck, &format!("{prefix}.embeddings.patch_embedding"))?;
        self.class_embedding = ck.param(&format!("{prefix}.embeddings.class_embedding"), [d])?;
        load_embedding(
            &mut self.position_embedding,
            ck,
            &format!("{prefix}.embeddings.position_embedding.weight"),
        )?;
        load_layer_norm(&mut self.pre_layrnorm, ck, &format!("{prefix}.pre_layrnorm"))?;
        self.encoder.load(ck, &format!("{prefix}.encoder"))?;
        load_layer_norm(&mut self.post_layernorm, ck, &format!("{prefix}.post_layernorm"))
    }

    /// The pooled (class-token) output, `[batch, hidden]`, of `pixel_values` `[batch, 3, H, W]`.
    pub fn pooled(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        let batch = pixel_values.dims()[0];
        let patches = self.patch_embedding.forward(pixel_values).flatten::<3>(2, 3).swap_dims(1, 2);
        let [_, _, d] = patches.dims();
        let class = self.class_embedding.val().reshape([1, 1, d]).expand([batch, 1, d]);
        let positions = self.position_embedding.weight.val().unsqueeze::<3>();
        let x = Tensor::cat(vec![class, patches], 1) + positions;
        let x = self.encoder.forward(self.pre_layrnorm.forward(x), false);
        let class_out = x.slice([0..batch, 0..1, 0..d]).reshape([batch, d]);
        self.post_layernorm.forward(class_out)
    }
}

impl ClipTextTransformer {
    pub fn load(&mut self, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
        load_embedding(
            &mut self.token_embedding,
            ck,
            &format!("{prefix}.embeddings.token_embedding.weight"),
        )?;
        load_embedding(
            &mut self.position_embedding,
            ck,
            &format!("{prefix}.embeddings.position_embedding.weight"),
        )?;
        self.encoder.load(ck, &format!("{prefix}.encoder"))?;
        load_layer_norm(&mut self.final_layer_norm, ck, &format!("{prefix}.final_layer_norm"))
    }

    /// Final-layer-normed hidden state at `pooled[b]` of each row of `input_ids` `[batch, len]`
    /// under the causal mask.
    pub fn pooled(&self, input_ids: Tensor<2, Int>, pooled: &[usize]) -> Tensor<2> {
        let [batch, len] = input_ids.dims();
        let device = input_ids.device();
        let positions = self.position_embedding.weight.val();
        let d = positions.dims()[1];
        let x = self.token_embedding.forward(input_ids) + positions.slice([0..len, 0..d]).unsqueeze::<3>();
        let x = self.final_layer_norm.forward(self.encoder.forward(x, true));
        let rows: Vec<i64> = pooled.iter().enumerate().map(|(b, &p)| (b * len + p) as i64).collect();
        let rows = Tensor::<1, Int>::from_data(TensorData::new(rows, [batch]), &device);
        x.reshape([batch * len, d]).select(0, rows)
    }
}

impl Clip {
    /// Loads every tensor of a transformers `CLIPModel` checkpoint.
    pub fn load(&mut self, ck: &Checkpoint) -> Result<(), WeightError> {
        self.vision_model.load(ck, "vision_model")?;
        load_linear(&mut self.visual_projection, ck, "visual_projection")?;
        self.text_model.load(ck, "text_model")?;
        load_linear(&mut self.text_projection, ck, "text_projection")
    }

    /// `get_image_features`: projected class token, `[batch, projection_dim]`.
    pub fn image_features(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        self.visual_projection.forward(self.vision_model.pooled(pixel_values))
    }

    /// `get_text_features` of token ids (each with its end-of-text token; rows are padded to
    /// one length with any id, which the causal mask keeps from the pooled token).
    pub fn text_features(&self, ids: &[Vec<u32>], device: &Device) -> Tensor<2> {
        let text = &self.config.text_config;
        let pad = text.pad_token_id.unwrap_or(text.eos_token_id);
        let (input_ids, _) = pad_ids(ids, pad, device);
        let pooled: Vec<usize> = ids.iter().map(|row| text.pooled_position(row)).collect();
        self.text_projection.forward(self.text_model.pooled(input_ids, &pooled))
    }
}

/// Right-pads `ids` with `pad` to the longest row; returns the `[batch, len]` tensor and `len`.
pub fn pad_ids(ids: &[Vec<u32>], pad: u32, device: &Device) -> (Tensor<2, Int>, usize) {
    let len = ids.iter().map(Vec::len).max().unwrap_or(0);
    let flat: Vec<i64> = ids
        .iter()
        .flat_map(|row| row.iter().copied().chain(std::iter::repeat(pad)).take(len).map(i64::from))
        .collect();
    (Tensor::from_data(TensorData::new(flat, [ids.len(), len]), device), len)
}
