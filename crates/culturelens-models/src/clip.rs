//! CLIP (Radford et al., 2021) in the transformers layout: `CLIPModel`'s vision tower with
//! `visual_projection` and text tower with `text_projection`. [`Clip::image_features`] and
//! [`Clip::text_features`] return exactly what transformers' `get_image_features` /
//! `get_text_features` return (projected, not normalised). OpenAI CLIP and the LAION/OpenCLIP
//! checkpoints converted to transformers share this code; they differ only in `hidden_act`.
//!
//! [`ClipTextModelWithProjection`] is the text tower alone with its projection, the class the
//! diffusion pipelines load as `text_encoder`/`text_encoder_2` (SD 3's CLIP-L and bigG, SDXL's
//! bigG): one pass gives a raw hidden state `hidden_states[n]` (the pipelines read the
//! penultimate one) and `text_embeds`, the projected pooled token.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Embedding, EmbeddingConfig, Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::Towers;
use super::config;
use super::vit::{Activation, Encoder, EncoderConfig, TextEmbeddings, pad_ids};
use super::weights::{Vars, WeightError, load_conv2d, load_embedding, load_layer_norm, load_linear};

/// `config.json` of a `CLIPModel` (the keys the architecture needs; others are ignored).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClipConfig {
    pub text_config: ClipTextConfig,
    pub vision_config: ClipVisionConfig,
    pub projection_dim: usize,
}

/// `text_config` of a `CLIPConfig`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClipTextConfig {
    pub vocab_size: usize,
    #[serde(flatten)]
    pub encoder: EncoderConfig,
    pub max_position_embeddings: usize,
    pub eos_token_id: u32,
    pub pad_token_id: Option<u32>,
}

/// `config.json` of a `CLIPTextModelWithProjection`: a flat `CLIPTextConfig` with
/// `projection_dim`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClipTextWithProjectionConfig {
    #[serde(flatten)]
    pub text: ClipTextConfig,
    pub projection_dim: usize,
}

/// `config.json` of a `CLIPVisionModelWithProjection`: a flat `CLIPVisionConfig` with
/// `projection_dim`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClipVisionWithProjectionConfig {
    #[serde(flatten)]
    pub vision: ClipVisionConfig,
    pub projection_dim: usize,
}

/// `vision_config` of a `CLIPConfig`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClipVisionConfig {
    #[serde(flatten)]
    pub encoder: EncoderConfig,
    pub num_channels: usize,
    pub image_size: usize,
    pub patch_size: usize,
}

impl ClipConfig {
    /// `openai/clip-vit-base-patch32`, whose values are transformers' `CLIPConfig` defaults:
    /// the values of every key a `config.json` leaves out.
    pub fn clip_vit_base_patch32() -> Self {
        Self {
            text_config: ClipTextConfig {
                vocab_size: 49408,
                encoder: EncoderConfig {
                    hidden_size: 512,
                    intermediate_size: 2048,
                    num_hidden_layers: 12,
                    num_attention_heads: 8,
                    hidden_act: Activation::QuickGelu,
                    layer_norm_eps: 1e-5,
                },
                max_position_embeddings: 77,
                eos_token_id: 2,
                pad_token_id: None,
            },
            vision_config: ClipVisionConfig {
                encoder: EncoderConfig {
                    hidden_size: 768,
                    intermediate_size: 3072,
                    num_hidden_layers: 12,
                    num_attention_heads: 12,
                    hidden_act: Activation::QuickGelu,
                    layer_norm_eps: 1e-5,
                },
                num_channels: 3,
                image_size: 224,
                patch_size: 32,
            },
            projection_dim: 512,
        }
    }

    /// Reads `config.json` over [`Self::clip_vit_base_patch32`] (`null` is "not set"); both tower
    /// configs must be present.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        let c: Self =
            config::from_json(json, &Self::clip_vit_base_patch32(), &["text_config", "vision_config"])?;
        let layers = c.text_config.encoder.num_hidden_layers + c.vision_config.encoder.num_hidden_layers;
        config::check_layers("num_hidden_layers", layers)?;
        let (text, vision) = (&c.text_config.encoder, &c.vision_config);
        config::check_tower("text_config.", text.hidden_size, text.num_attention_heads, None)?;
        config::check_tower(
            "vision_config.",
            vision.encoder.hidden_size,
            vision.encoder.num_attention_heads,
            Some((vision.image_size, vision.patch_size)),
        )?;
        Ok(c)
    }
}

/// transformers' `CLIPTextModelWithProjection`: `text_model` and a bias-free `text_projection`.
#[derive(Module, Debug)]
pub struct ClipTextModelWithProjection {
    pub text_model: ClipTextTransformer,
    pub text_projection: Linear,
    #[module(skip)]
    pub config: ClipTextWithProjectionConfig,
}

impl ClipTextWithProjectionConfig {
    /// Reads a text tower's `config.json` over transformers' `CLIPTextConfig` defaults
    /// (`projection_dim` 512) and checks the tower's shape.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        let defaults = ClipConfig::clip_vit_base_patch32();
        let preset = Self { text: defaults.text_config, projection_dim: defaults.projection_dim };
        let c: Self = config::from_json(json, &preset, &[])?;
        config::check_layers("num_hidden_layers", c.text.encoder.num_hidden_layers)?;
        config::check_tower("", c.text.encoder.hidden_size, c.text.encoder.num_attention_heads, None)?;
        Ok(c)
    }

    pub fn init(&self, device: &Device) -> ClipTextModelWithProjection {
        ClipTextModelWithProjection {
            text_model: self.text.init(device),
            text_projection: LinearConfig::new(self.text.encoder.hidden_size, self.projection_dim)
                .with_bias(false)
                .init(device),
            config: self.clone(),
        }
    }

    /// Builds the tower of `json` and loads `text_model.*` and `text_projection` of its checkpoint.
    pub fn load(json: &str, vars: Vars) -> Result<ClipTextModelWithProjection, super::ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.text_model.load(text_model_scope(&vars))?;
        load_linear(&mut model.text_projection, vars.pp("text_projection"))?;
        Ok(model)
    }
}

impl ClipTextModelWithProjection {
    /// The number of encoder layers, `L` (`hidden_states` has `L + 1` entries).
    pub fn num_layers(&self) -> usize {
        self.text_model.encoder.layers.len()
    }

    /// One pass over token-id rows of equal length (padded with any id, which the causal mask
    /// keeps from the pooled token): `hidden_states[n]` `[rows, len, hidden]` (raw, before the
    /// final layer norm) and `text_embeds` `[rows, projection_dim]`.
    pub fn forward(&self, ids: &[Vec<u32>], n: usize, device: &Device) -> (Tensor<3>, Tensor<2>) {
        let text = &self.config.text;
        let tower = &self.text_model;
        let mut x = tower.embeddings.forward(pad_ids(ids, 0, device));
        let [batch, len, d] = x.dims();
        let layers = &tower.encoder;
        x = layers.forward_range(x, true, 0..n);
        let hidden = x.clone();
        x = tower.final_layer_norm.forward(layers.forward_range(x, true, n..self.num_layers()));
        let rows: Vec<i64> =
            ids.iter().enumerate().map(|(b, row)| (b * len + text.pooled_position(row)) as i64).collect();
        let rows = Tensor::<1, Int>::from_data(TensorData::new(rows, [batch]), device);
        (hidden, self.text_projection.forward(x.reshape([batch * len, d]).select(0, rows)))
    }
}

/// transformers' `CLIPVisionModelWithProjection` (the Kandinsky 2.1 prior's `image_encoder`):
/// `vision_model` and a bias-free `visual_projection`.
#[derive(Module, Debug)]
pub struct ClipVisionModelWithProjection {
    pub vision_model: ClipVisionTransformer,
    pub visual_projection: Linear,
}

impl ClipVisionWithProjectionConfig {
    /// Reads a vision tower's `config.json` over transformers' `CLIPVisionConfig` defaults
    /// (`projection_dim` 512) and checks the tower's shape.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        let defaults = ClipConfig::clip_vit_base_patch32();
        let preset = Self { vision: defaults.vision_config, projection_dim: defaults.projection_dim };
        let c: Self = config::from_json(json, &preset, &[])?;
        let v = &c.vision;
        config::check_layers("num_hidden_layers", v.encoder.num_hidden_layers)?;
        config::check_tower(
            "",
            v.encoder.hidden_size,
            v.encoder.num_attention_heads,
            Some((v.image_size, v.patch_size)),
        )?;
        Ok(c)
    }

    /// Builds the tower of `json` and loads `vision_model.*` and `visual_projection` of its
    /// checkpoint.
    pub fn load(json: &str, vars: Vars) -> Result<ClipVisionModelWithProjection, super::ModelError> {
        let c = Self::from_json(json)?;
        let device = vars.device();
        let mut model = ClipVisionModelWithProjection {
            vision_model: c.vision.init(device),
            visual_projection: LinearConfig::new(c.vision.encoder.hidden_size, c.projection_dim)
                .with_bias(false)
                .init(device),
        };
        model.vision_model.load(vars.pp("vision_model"))?;
        load_linear(&mut model.visual_projection, vars.pp("visual_projection"))?;
        Ok(model)
    }
}

impl ClipVisionModelWithProjection {
    /// `image_embeds`: the projected class token, `[batch, projection_dim]`, of `pixel_values`.
    pub fn image_embeds(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        self.visual_projection.forward(self.vision_model.pooled(pixel_values))
    }
}

/// The scope of a text tower's `text_model` in a `CLIPTextModel` or
/// `CLIPTextModelWithProjection` checkpoint: `text_model.*` as transformers 4 saves them, or the
/// root, where transformers 5 saves a `CLIPTextModel`'s tower.
pub fn text_model_scope<'c, 'a>(vars: &Vars<'c, 'a>) -> Vars<'c, 'a> {
    let nested = vars.pp("text_model");
    if nested.contains("embeddings.token_embedding.weight") { nested } else { vars.clone() }
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
    pub embeddings: TextEmbeddings,
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
    /// `logit_scale` of the checkpoint (the log of the temperature that multiplies the cosines
    /// in `logits_per_image`), `None` when the checkpoint has none.
    #[module(skip)]
    pub logit_scale: Option<f32>,
    #[module(skip)]
    pub config: ClipConfig,
    /// The towers whose weights were loaded (the others keep lazy, unread parameters).
    #[module(skip)]
    pub towers: Towers,
}

impl ClipVisionConfig {
    pub fn num_positions(&self) -> usize {
        (self.image_size / self.patch_size).pow(2) + 1
    }

    pub fn init(&self, device: &Device) -> ClipVisionTransformer {
        let d = self.encoder.hidden_size;
        let norm = || LayerNormConfig::new(d).with_epsilon(self.encoder.layer_norm_eps).init(device);
        ClipVisionTransformer {
            patch_embedding: Conv2dConfig::new([self.num_channels, d], [self.patch_size; 2])
                .with_stride([self.patch_size; 2])
                .with_bias(false)
                .init(device),
            class_embedding: Initializer::Zeros.init([d], device),
            position_embedding: EmbeddingConfig::new(self.num_positions(), d).init(device),
            pre_layrnorm: norm(),
            encoder: Encoder::init(&self.encoder, device),
            post_layernorm: norm(),
        }
    }
}

impl ClipTextConfig {
    pub fn init(&self, device: &Device) -> ClipTextTransformer {
        let d = self.encoder.hidden_size;
        ClipTextTransformer {
            embeddings: TextEmbeddings::init(self.vocab_size, self.max_position_embeddings, d, device),
            encoder: Encoder::init(&self.encoder, device),
            final_layer_norm: LayerNormConfig::new(d).with_epsilon(self.encoder.layer_norm_eps).init(device),
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
    /// A randomly initialised model (parameters are materialised lazily).
    pub fn init(&self, device: &Device) -> Clip {
        Clip {
            vision_model: self.vision_config.init(device),
            visual_projection: LinearConfig::new(self.vision_config.encoder.hidden_size, self.projection_dim)
                .with_bias(false)
                .init(device),
            text_model: self.text_config.init(device),
            text_projection: LinearConfig::new(self.text_config.encoder.hidden_size, self.projection_dim)
                .with_bias(false)
                .init(device),
            logit_scale: None,
            config: self.clone(),
            towers: Towers::Both,
        }
    }
}

impl ClipVisionTransformer {
    /// Loads `embeddings.*`, `pre_layrnorm`, `encoder`, `post_layernorm`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let embeddings = vars.pp("embeddings");
        load_conv2d(&mut self.patch_embedding, embeddings.pp("patch_embedding"))?;
        self.class_embedding = embeddings.param("class_embedding", &self.class_embedding)?;
        load_embedding(&mut self.position_embedding, embeddings.pp("position_embedding"))?;
        load_layer_norm(&mut self.pre_layrnorm, vars.pp("pre_layrnorm"))?;
        self.encoder.load(vars.pp("encoder"))?;
        load_layer_norm(&mut self.post_layernorm, vars.pp("post_layernorm"))
    }

    /// The pooled (class-token) output, `[batch, hidden]`, of `pixel_values` `[batch, 3, H, W]`.
    pub fn pooled(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        let batch = pixel_values.dims()[0];
        let patches = self.patch_embedding.forward(pixel_values).flatten::<3>(2, 3).swap_dims(1, 2);
        let [_, _, d] = patches.dims();
        let class = self.class_embedding.val().reshape([1, 1, d]).expand([batch, 1, d]);
        let positions = self.position_embedding.weight.val().unsqueeze::<3>();
        let x = Tensor::cat(vec![class, patches], 1) + positions;
        let class_out = self.encoder.forward_token(self.pre_layrnorm.forward(x), 0).reshape([batch, d]);
        self.post_layernorm.forward(class_out)
    }
}

impl ClipTextTransformer {
    /// Loads `embeddings`, `encoder`, `final_layer_norm`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.embeddings.load(vars.pp("embeddings"))?;
        self.encoder.load(vars.pp("encoder"))?;
        load_layer_norm(&mut self.final_layer_norm, vars.pp("final_layer_norm"))
    }

    /// Final-layer-normed hidden state at `pooled[b]` of each row of `input_ids` `[batch, len]`
    /// under the causal mask.
    pub fn pooled(&self, input_ids: Tensor<2, Int>, pooled: &[usize]) -> Tensor<2> {
        let [batch, len] = input_ids.dims();
        let device = input_ids.device();
        let x = self.embeddings.forward(input_ids);
        let d = x.dims()[2];
        let x = self.final_layer_norm.forward(self.encoder.forward(x, true));
        let rows: Vec<i64> = pooled.iter().enumerate().map(|(b, &p)| (b * len + p) as i64).collect();
        let rows = Tensor::<1, Int>::from_data(TensorData::new(rows, [batch]), &device);
        x.reshape([batch * len, d]).select(0, rows)
    }
}

impl Clip {
    /// Loads the tensors of a transformers `CLIPModel` checkpoint for the towers `towers`
    /// (every tensor for [`Towers::Both`]).
    pub fn load(&mut self, vars: Vars, towers: Towers) -> Result<(), WeightError> {
        if towers.image() {
            self.vision_model.load(vars.pp("vision_model"))?;
            load_linear(&mut self.visual_projection, vars.pp("visual_projection"))?;
        }
        if towers.text() {
            self.text_model.load(vars.pp("text_model"))?;
            load_linear(&mut self.text_projection, vars.pp("text_projection"))?;
        }
        self.logit_scale = vars.optional_scalar("logit_scale")?;
        self.towers = towers;
        Ok(())
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
        let input_ids = pad_ids(ids, pad, device);
        let pooled: Vec<usize> = ids.iter().map(|row| text.pooled_position(row)).collect();
        self.text_projection.forward(self.text_model.pooled(input_ids, &pooled))
    }
}
