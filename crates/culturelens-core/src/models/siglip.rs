//! SigLIP (Zhai et al., 2023) in the transformers layout (`SiglipModel`). The image embedding
//! is the attention-pooling head's output (`get_image_features`), the text embedding the
//! `head` projection of the last position (`get_text_features`; SigLIP is trained with text
//! padded to `max_position_embeddings`, so callers pad there). Neither is normalised.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor};
use serde::Deserialize;

use super::vit::{Activation, Attention, Encoder, EncoderShape, Mlp};
use super::weights::{Checkpoint, WeightError, load_conv2d, load_embedding, load_layer_norm, load_linear};

/// `config.json` of a `SiglipModel`.
#[derive(Clone, Debug, Deserialize)]
pub struct SiglipConfig {
    pub text_config: SiglipTextConfig,
    pub vision_config: SiglipVisionConfig,
}

/// `text_config` (defaults: transformers' `SiglipTextConfig`).
#[derive(Clone, Debug, Deserialize)]
pub struct SiglipTextConfig {
    #[serde(default = "defaults::vocab_size")]
    pub vocab_size: usize,
    #[serde(default = "defaults::hidden_size")]
    pub hidden_size: usize,
    #[serde(default = "defaults::intermediate_size")]
    pub intermediate_size: usize,
    #[serde(default = "defaults::layers_heads")]
    pub num_hidden_layers: usize,
    #[serde(default = "defaults::layers_heads")]
    pub num_attention_heads: usize,
    #[serde(default = "defaults::max_position_embeddings")]
    pub max_position_embeddings: usize,
    #[serde(default = "defaults::hidden_act")]
    pub hidden_act: Activation,
    #[serde(default = "defaults::layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "defaults::pad_token_id")]
    pub pad_token_id: u32,
    /// Output size of `head`; transformers defaults it to `hidden_size`.
    #[serde(default)]
    pub projection_size: Option<usize>,
}

/// `vision_config` (defaults: transformers' `SiglipVisionConfig`).
#[derive(Clone, Debug, Deserialize)]
pub struct SiglipVisionConfig {
    #[serde(default = "defaults::hidden_size")]
    pub hidden_size: usize,
    #[serde(default = "defaults::intermediate_size")]
    pub intermediate_size: usize,
    #[serde(default = "defaults::layers_heads")]
    pub num_hidden_layers: usize,
    #[serde(default = "defaults::layers_heads")]
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
    pub fn vocab_size() -> usize {
        32000
    }
    pub fn hidden_size() -> usize {
        768
    }
    pub fn intermediate_size() -> usize {
        3072
    }
    pub fn layers_heads() -> usize {
        12
    }
    pub fn max_position_embeddings() -> usize {
        64
    }
    pub fn hidden_act() -> Activation {
        Activation::GeluPytorchTanh
    }
    pub fn layer_norm_eps() -> f64 {
        1e-6
    }
    pub fn pad_token_id() -> u32 {
        1
    }
    pub fn num_channels() -> usize {
        3
    }
    pub fn image_size() -> usize {
        224
    }
    pub fn patch_size() -> usize {
        16
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
    pub token_embedding: Embedding,
    pub position_embedding: Embedding,
    pub encoder: Encoder,
    pub final_layer_norm: LayerNorm,
    pub head: Linear,
}

/// Both SigLIP towers.
#[derive(Module, Debug)]
pub struct Siglip {
    pub vision_model: SiglipVisionTransformer,
    pub text_model: SiglipTextTransformer,
    #[module(skip)]
    pub config: SiglipConfig,
}

impl SiglipVisionConfig {
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

    pub fn init(&self, device: &Device) -> SiglipVisionTransformer {
        let d = self.hidden_size;
        let norm = || LayerNormConfig::new(d).with_epsilon(self.layer_norm_eps).init(device);
        SiglipVisionTransformer {
            patch_embedding: Conv2dConfig::new([self.num_channels, d], [self.patch_size; 2])
                .with_stride([self.patch_size; 2])
                .init(device),
            position_embedding: EmbeddingConfig::new((self.image_size / self.patch_size).pow(2), d)
                .init(device),
            encoder: Encoder::init(&self.encoder_shape(), device),
            post_layernorm: norm(),
            head: PoolingHead {
                probe: Param::from_tensor(Tensor::zeros([1, 1, d], device)),
                attention: Attention::init(d, self.num_attention_heads, true, device),
                layernorm: norm(),
                mlp: Mlp::init(d, self.intermediate_size, self.hidden_act, device),
            },
        }
    }
}

impl SiglipTextConfig {
    pub fn init(&self, device: &Device) -> SiglipTextTransformer {
        let d = self.hidden_size;
        let shape = EncoderShape {
            hidden: d,
            intermediate: self.intermediate_size,
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            layer_norm_eps: self.layer_norm_eps,
            act: self.hidden_act,
        };
        SiglipTextTransformer {
            token_embedding: EmbeddingConfig::new(self.vocab_size, d).init(device),
            position_embedding: EmbeddingConfig::new(self.max_position_embeddings, d).init(device),
            encoder: Encoder::init(&shape, device),
            final_layer_norm: LayerNormConfig::new(d).with_epsilon(self.layer_norm_eps).init(device),
            head: LinearConfig::new(d, self.projection_size.unwrap_or(d)).init(device),
        }
    }
}

impl SiglipConfig {
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    pub fn init(&self, device: &Device) -> Siglip {
        Siglip {
            vision_model: self.vision_config.init(device),
            text_model: self.text_config.init(device),
            config: self.clone(),
        }
    }
}

impl SiglipVisionTransformer {
    pub fn load(&mut self, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
        load_conv2d(&mut self.patch_embedding, ck, &format!("{prefix}.embeddings.patch_embedding"))?;
        load_embedding(
            &mut self.position_embedding,
            ck,
            &format!("{prefix}.embeddings.position_embedding.weight"),
        )?;
        self.encoder.load(ck, &format!("{prefix}.encoder"))?;
        load_layer_norm(&mut self.post_layernorm, ck, &format!("{prefix}.post_layernorm"))?;
        let head = &mut self.head;
        let shape: [usize; 3] = head.probe.lazy_shape().dims();
        head.probe = ck.param(&format!("{prefix}.head.probe"), shape)?;
        // nn.MultiheadAttention stacks q, k, v in `in_proj_weight` / `in_proj_bias`.
        head.attention.load_fused(ck, &format!("{prefix}.head.attention"))?;
        load_layer_norm(&mut head.layernorm, ck, &format!("{prefix}.head.layernorm"))?;
        head.mlp.load(ck, &format!("{prefix}.head.mlp"))
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
        load_layer_norm(&mut self.final_layer_norm, ck, &format!("{prefix}.final_layer_norm"))?;
        load_linear(&mut self.head, ck, &format!("{prefix}.head"))
    }

    /// `pooler_output` of `input_ids` `[batch, len]` (the `head` of the last position).
    pub fn pooled(&self, input_ids: Tensor<2, Int>) -> Tensor<2> {
        let [batch, len] = input_ids.dims();
        let positions = self.position_embedding.weight.val();
        let d = positions.dims()[1];
        let x = self.token_embedding.forward(input_ids) + positions.slice([0..len, 0..d]).unsqueeze::<3>();
        let x = self.final_layer_norm.forward(self.encoder.forward(x, false));
        self.head.forward(x.slice([0..batch, len - 1..len, 0..d]).reshape([batch, d]))
    }
}

impl Siglip {
    /// Loads every tensor of a transformers `SiglipModel` checkpoint used for embeddings.
    pub fn load(&mut self, ck: &Checkpoint) -> Result<(), WeightError> {
        self.vision_model.load(ck, "vision_model")?;
        self.text_model.load(ck, "text_model")
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
        let (input_ids, _) = super::clip::pad_ids(&padded, text.pad_token_id, device);
        self.text_model.pooled(input_ids)
    }
}
