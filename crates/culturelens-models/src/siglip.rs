//! SigLIP (Zhai et al., 2023) in the transformers layout (`SiglipModel`). The image embedding
//! is the attention-pooling head's output (`get_image_features`), the text embedding the
//! `head` projection of the last position (`get_text_features`; SigLIP is trained with text
//! padded to `max_position_embeddings`, so callers pad there). Neither is normalised.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Embedding, EmbeddingConfig, Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor};
use serde::{Deserialize, Serialize};

use super::Towers;
use super::config;
use super::vit::{Activation, Attention, Encoder, EncoderConfig, Mlp, TextEmbeddings, pad_ids};
use super::weights::{Vars, WeightError, load_conv2d, load_embedding, load_layer_norm, load_linear};

/// `config.json` of a `SiglipModel`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SiglipConfig {
    pub text_config: SiglipTextConfig,
    pub vision_config: SiglipVisionConfig,
}

/// `text_config` of a `SiglipConfig`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SiglipTextConfig {
    pub vocab_size: usize,
    #[serde(flatten)]
    pub encoder: EncoderConfig,
    pub max_position_embeddings: usize,
    pub pad_token_id: u32,
    /// Output size of `head`; transformers defaults it to `hidden_size`.
    pub projection_size: Option<usize>,
}

/// `vision_config` of a `SiglipConfig`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SiglipVisionConfig {
    #[serde(flatten)]
    pub encoder: EncoderConfig,
    pub num_channels: usize,
    pub image_size: usize,
    pub patch_size: usize,
}

impl SiglipConfig {
    /// `google/siglip-base-patch16-224`, whose values are transformers' `SiglipConfig`
    /// defaults: the values of every key a `config.json` leaves out.
    pub fn siglip_base_patch16_224() -> Self {
        let encoder = EncoderConfig {
            hidden_size: 768,
            intermediate_size: 3072,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            hidden_act: Activation::GeluPytorchTanh,
            layer_norm_eps: 1e-6,
        };
        Self {
            text_config: SiglipTextConfig {
                vocab_size: 32000,
                encoder,
                max_position_embeddings: 64,
                pad_token_id: 1,
                projection_size: None,
            },
            vision_config: SiglipVisionConfig { encoder, num_channels: 3, image_size: 224, patch_size: 16 },
        }
    }

    /// Reads `config.json` over [`Self::siglip_base_patch16_224`] (`null` is "not set"); both tower
    /// configs must be present.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        let c: Self =
            config::from_json(json, &Self::siglip_base_patch16_224(), &["text_config", "vision_config"])?;
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

    pub fn init(&self, device: &Device) -> Siglip {
        Siglip {
            vision_model: self.vision_config.init(device),
            text_model: self.text_config.init(device),
            logit_scale: None,
            config: self.clone(),
            towers: Towers::Both,
        }
    }
}

/// `SiglipMultiheadAttentionPoolingHead`: a learned probe attends over the patch tokens.
#[derive(Module, Debug)]
pub struct PoolingHead {
    pub probe: Param<Tensor<3>>,
    pub attention: Attention,
    pub layernorm: LayerNorm,
    pub mlp: Mlp,
}

impl PoolingHead {
    /// Loads `probe`, `attention` (an `nn.MultiheadAttention`: q, k, v stacked in
    /// `in_proj_weight` / `in_proj_bias`), `layernorm` and `mlp`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.probe = vars.param("probe", &self.probe)?;
        self.attention.load_fused(vars.pp("attention"))?;
        load_layer_norm(&mut self.layernorm, vars.pp("layernorm"))?;
        self.mlp.load(vars.pp("mlp"))
    }
}

/// `vision_model` of `SiglipModel`.
#[derive(Module, Debug)]
pub struct SiglipVisionTransformer {
    pub patch_embedding: Conv2d,
    pub position_embedding: Embedding,
    pub encoder: Encoder,
    pub post_layernorm: LayerNorm,
    pub head: PoolingHead,
}

/// `text_model` of `SiglipModel`.
#[derive(Module, Debug)]
pub struct SiglipTextTransformer {
    pub embeddings: TextEmbeddings,
    pub encoder: Encoder,
    pub final_layer_norm: LayerNorm,
    pub head: Linear,
}

/// Both SigLIP towers.
#[derive(Module, Debug)]
pub struct Siglip {
    pub vision_model: SiglipVisionTransformer,
    pub text_model: SiglipTextTransformer,
    /// `logit_scale` of the checkpoint (log of the temperature of the cosines; SigLIP's
    /// `logit_bias` shifts every class alike, so a softmax over classes does not need it).
    #[module(skip)]
    pub logit_scale: Option<f32>,
    #[module(skip)]
    pub config: SiglipConfig,
    /// The towers whose weights were loaded (the others keep lazy, unread parameters).
    #[module(skip)]
    pub towers: Towers,
}

impl SiglipVisionConfig {
    pub fn init(&self, device: &Device) -> SiglipVisionTransformer {
        let EncoderConfig { hidden_size: d, intermediate_size, num_attention_heads, hidden_act, .. } =
            self.encoder;
        let norm = || LayerNormConfig::new(d).with_epsilon(self.encoder.layer_norm_eps).init(device);
        SiglipVisionTransformer {
            patch_embedding: Conv2dConfig::new([self.num_channels, d], [self.patch_size; 2])
                .with_stride([self.patch_size; 2])
                .init(device),
            position_embedding: EmbeddingConfig::new((self.image_size / self.patch_size).pow(2), d)
                .init(device),
            encoder: Encoder::init(&self.encoder, device),
            post_layernorm: norm(),
            head: PoolingHead {
                probe: Initializer::Zeros.init([1, 1, d], device),
                attention: Attention::init(d, num_attention_heads, true, device),
                layernorm: norm(),
                mlp: Mlp::init(d, intermediate_size, hidden_act, device),
            },
        }
    }
}

impl SiglipTextConfig {
    pub fn init(&self, device: &Device) -> SiglipTextTransformer {
        let d = self.encoder.hidden_size;
        SiglipTextTransformer {
            embeddings: TextEmbeddings::init(self.vocab_size, self.max_position_embeddings, d, device),
            encoder: Encoder::init(&self.encoder, device),
            final_layer_norm: LayerNormConfig::new(d).with_epsilon(self.encoder.layer_norm_eps).init(device),
            head: LinearConfig::new(d, self.projection_size.unwrap_or(d)).init(device),
        }
    }
}

impl SiglipVisionTransformer {
    /// Loads `embeddings.*`, `encoder`, `post_layernorm` and the pooling `head`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let embeddings = vars.pp("embeddings");
        load_conv2d(&mut self.patch_embedding, embeddings.pp("patch_embedding"))?;
        load_embedding(&mut self.position_embedding, embeddings.pp("position_embedding"))?;
        self.encoder.load(vars.pp("encoder"))?;
        load_layer_norm(&mut self.post_layernorm, vars.pp("post_layernorm"))?;
        self.head.load(vars.pp("head"))
    }

    /// `pooler_output` `[batch, hidden]` of `pixel_values` `[batch, 3, H, W]`.
    pub fn pooled(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        let patches = self.patch_embedding.forward(pixel_values).flatten::<3>(2, 3).swap_dims(1, 2);
        let [batch, _, d] = patches.dims();
        let x = patches + self.position_embedding.weight.val().unsqueeze::<3>();
        let x = self.post_layernorm.forward(self.encoder.forward(x, false));
        let head = &self.head;
        let probe = head.probe.val().expand([batch, 1, d]);
        let pooled = head.attention.attend(head.attention.q_proj.forward(probe), x, false);
        let pooled = pooled.clone() + head.mlp.forward(head.layernorm.forward(pooled));
        pooled.reshape([batch, d])
    }
}

impl SiglipTextTransformer {
    /// Loads `embeddings`, `encoder`, `final_layer_norm` and `head`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.embeddings.load(vars.pp("embeddings"))?;
        self.encoder.load(vars.pp("encoder"))?;
        load_layer_norm(&mut self.final_layer_norm, vars.pp("final_layer_norm"))?;
        load_linear(&mut self.head, vars.pp("head"))
    }

    /// `pooler_output` of `input_ids` `[batch, len]` (the `head` of the last position).
    pub fn pooled(&self, input_ids: Tensor<2, Int>) -> Tensor<2> {
        let [batch, len] = input_ids.dims();
        let x = self.embeddings.forward(input_ids);
        let d = x.dims()[2];
        let last = self.encoder.forward_token(x, len - 1).reshape([batch, d]);
        self.head.forward(self.final_layer_norm.forward(last))
    }
}

impl Siglip {
    /// Loads the tensors of a transformers `SiglipModel` checkpoint used for embeddings, of the
    /// towers `towers` (both for [`Towers::Both`]).
    pub fn load(&mut self, vars: Vars, towers: Towers) -> Result<(), WeightError> {
        if towers.image() {
            self.vision_model.load(vars.pp("vision_model"))?;
        }
        if towers.text() {
            self.text_model.load(vars.pp("text_model"))?;
        }
        self.logit_scale = vars.optional_scalar("logit_scale")?;
        self.towers = towers;
        Ok(())
    }

    /// `get_image_features`, `[batch, hidden]`.
    pub fn image_features(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        self.vision_model.pooled(pixel_values)
    }

    /// `get_text_features` of ids right-padded with `pad_token_id` to `max_position_embeddings`.
    pub fn text_features(&self, ids: &[Vec<u32>], device: &Device) -> Tensor<2> {
        let text = &self.config.text_config;
        let padded: Vec<Vec<u32>> = ids
            .iter()
            .map(|row| {
                row.iter()
                    .copied()
                    .chain(std::iter::repeat(text.pad_token_id))
                    .take(text.max_position_embeddings)
                    .collect()
            })
            .collect();
        let input_ids = pad_ids(&padded, text.pad_token_id, device);
        self.text_model.pooled(input_ids)
    }
}
