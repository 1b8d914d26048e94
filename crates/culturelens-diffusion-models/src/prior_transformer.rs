//! diffusers' `PriorTransformer` (the unCLIP prior of Kandinsky 2.1 and Karlo), forward pass as
//! diffusers 0.42 computes it: from CLIP text features to a CLIP image embedding.
//!
//! - **Tokens**: `encoder_hidden_states_proj(text states)` (`[batch, num_embeddings, inner]`),
//!   then `embedding_proj(proj_embedding)` (the pooled text embedding, optionally layer-normed
//!   first: `embedding_proj_norm_type: "layer"`), the time embedding (`Timesteps(inner,
//!   flip_sin_to_cos=True, shift=0)` of the integer timestep through `TimestepEmbedding`
//!   `inner → time_embed_dim → inner` with SiLU), `proj_in(hidden_states)` (the noisy image
//!   embedding) and the learned `prd_embedding`, plus `positional_embedding` over all
//!   `num_embeddings + 4` of them.
//! - **Attention mask**: causal over the whole sequence and the text tokens' padding, both as
//!   diffusers' additive −10000 (whose softmax weights underflow to exactly 0 in float32, as
//!   the boolean masks here give; the first text token is never padding, so no row is empty).
//! - **Blocks**: `num_layers` × `BasicTransformerBlock` without cross-attention (pre-norm
//!   `norm1` → self-attention with biased q/k/v, `norm3` → `FeedForward` with exact GELU, ×4),
//!   the [`culturelens_models::vit::Encoder`] layer; `norm_in` before them (`norm_in_type:
//!   "layer"`), `norm_out` after.
//! - **Output**: `proj_to_clip_embeddings` of the last (`prd`) token; the pipeline maps the
//!   final latents back with [`PriorTransformer::post_process_latents`] (`· clip_std +
//!   clip_mean`).
//!
//! [`PriorTransformerConfig`] mirrors `prior/config.json` over the class defaults (Kandinsky
//! 2.1's prior sets only the widths). Keys the class does not have are refused by name, and so
//! are the options not implemented: `added_emb_type` other than `prd`, `encoder_hid_proj_type`
//! other than `linear` (each also when set to null), `additional_embeddings` other than 4 (the
//! four tokens `prd` adds), and `time_embed_act_fn` other than `silu`.

use burn::module::{Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Bool, Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::unet::{ATTENTION_KEYS, TimestepEmbedding, timestep_embedding};
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::vit::{Activation, AttendOptions, Encoder, EncoderConfig};
use culturelens_models::weights::{Vars, WeightError, load_layer_norm, load_linear};

/// `prior/config.json` of a `PriorTransformer`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PriorTransformerConfig {
    pub num_attention_heads: usize,
    pub attention_head_dim: usize,
    pub num_layers: usize,
    pub embedding_dim: usize,
    pub num_embeddings: usize,
    pub additional_embeddings: usize,
    pub dropout: f64,
    pub time_embed_act_fn: String,
    pub norm_in_type: Option<String>,
    pub embedding_proj_norm_type: Option<String>,
    pub encoder_hid_proj_type: Option<String>,
    pub added_emb_type: Option<String>,
    pub time_embed_dim: Option<usize>,
    pub embedding_proj_dim: Option<usize>,
    pub clip_embed_dim: Option<usize>,
}

/// The tokens `prd` adds after the text: the pooled text, the time, the image embedding, `prd`.
const ADDITIONAL_EMBEDDINGS: usize = 4;

impl PriorTransformerConfig {
    /// diffusers' class defaults (Kandinsky 2.1's and Karlo's prior widths).
    pub fn class_defaults() -> Self {
        Self {
            num_attention_heads: 32,
            attention_head_dim: 64,
            num_layers: 20,
            embedding_dim: 768,
            num_embeddings: 77,
            additional_embeddings: ADDITIONAL_EMBEDDINGS,
            dropout: 0.0,
            time_embed_act_fn: "silu".into(),
            norm_in_type: None,
            embedding_proj_norm_type: None,
            encoder_hid_proj_type: Some("linear".into()),
            added_emb_type: Some("prd".into()),
            time_embed_dim: None,
            embedding_proj_dim: None,
            clip_embed_dim: None,
        }
    }

    /// Reads `config.json` over [`Self::class_defaults`]; unknown keys and unsupported options
    /// are refused by name.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let value: Value = serde_json::from_str(json).map_err(config_error)?;
        let known = serde_json::to_value(Self::class_defaults()).map_err(config_error)?;
        if let (Some(fields), Some(known)) = (value.as_object(), known.as_object()) {
            if let Some(key) = fields.keys().find(|k| !k.starts_with('_') && !known.contains_key(*k)) {
                return bad(key, "is not a key of diffusers' PriorTransformer".into());
            }
            // `null` here means "none" to diffusers, not "the default" (config::from_json's rule).
            for key in ["encoder_hid_proj_type", "added_emb_type"] {
                if fields.get(key).is_some_and(Value::is_null) {
                    return bad(key, "null is not supported".into());
                }
            }
        }
        let c: Self = config::from_value(value, &Self::class_defaults(), &[]).map_err(config_error)?;
        c.check()?;
        Ok(c)
    }

    fn check(&self) -> Result<(), ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let choice = |key: &str, value: &Option<String>, allowed: &[Option<&str>]| {
            if allowed.contains(&value.as_deref()) {
                Ok(())
            } else {
                bad(key, format!("{value:?} is not supported ({allowed:?})"))
            }
        };
        choice("added_emb_type", &self.added_emb_type, &[Some("prd")])?;
        choice("encoder_hid_proj_type", &self.encoder_hid_proj_type, &[Some("linear")])?;
        choice("norm_in_type", &self.norm_in_type, &[None, Some("layer")])?;
        choice("embedding_proj_norm_type", &self.embedding_proj_norm_type, &[None, Some("layer")])?;
        if self.time_embed_act_fn != "silu" {
            return bad("time_embed_act_fn", format!("`{}` is not supported (silu)", self.time_embed_act_fn));
        }
        if self.additional_embeddings != ADDITIONAL_EMBEDDINGS {
            return bad(
                "additional_embeddings",
                format!(
                    "{} is not supported (4: the pooled text, time, image and prd tokens)",
                    self.additional_embeddings
                ),
            );
        }
        config::check_layers("num_layers", self.num_layers).map_err(config_error)?;
        let widths = [
            ("num_attention_heads", self.num_attention_heads),
            ("attention_head_dim", self.attention_head_dim),
            ("embedding_dim", self.embedding_dim),
            ("num_embeddings", self.num_embeddings),
            ("time_embed_dim", self.time_embed_dim.unwrap_or(1)),
            ("embedding_proj_dim", self.embedding_proj_dim.unwrap_or(1)),
            ("clip_embed_dim", self.clip_embed_dim.unwrap_or(1)),
        ];
        if let Some((key, _)) = widths.iter().find(|(_, w)| *w == 0) {
            return bad(key, "must be positive".into());
        }
        if !self.inner_dim().is_multiple_of(2) {
            return bad("attention_head_dim", "heads × head width must be even (the time embedding)".into());
        }
        Ok(())
    }

    /// `num_attention_heads · attention_head_dim`.
    pub fn inner_dim(&self) -> usize {
        self.num_attention_heads * self.attention_head_dim
    }

    /// The width of the output image embedding (`clip_embed_dim`, else `embedding_dim`).
    pub fn clip_embed_dim(&self) -> usize {
        self.clip_embed_dim.unwrap_or(self.embedding_dim)
    }

    pub fn init(&self, device: &Device) -> PriorTransformer {
        let inner = self.inner_dim();
        let time = self.time_embed_dim.unwrap_or(inner);
        let proj_dim = self.embedding_proj_dim.unwrap_or(self.embedding_dim);
        let clip = self.clip_embed_dim();
        let norm = |d| LayerNormConfig::new(d).with_epsilon(1e-5).init(device);
        let linear = |a, b| LinearConfig::new(a, b).init(device);
        let sequence = self.num_embeddings + self.additional_embeddings;
        let zeros = |shape: [usize; 2]| Param::from_tensor(Tensor::zeros(shape, device));
        PriorTransformer {
            time_embedding: TimestepEmbedding {
                linear_1: linear(inner, time),
                linear_2: linear(time, inner),
            },
            proj_in: linear(self.embedding_dim, inner),
            embedding_proj_norm: self.embedding_proj_norm_type.is_some().then(|| norm(proj_dim)),
            embedding_proj: linear(proj_dim, inner),
            encoder_hidden_states_proj: linear(self.embedding_dim, inner),
            positional_embedding: zeros([sequence, inner]),
            prd_embedding: zeros([1, inner]),
            norm_in: self.norm_in_type.is_some().then(|| norm(inner)),
            blocks: Encoder::init(
                &EncoderConfig {
                    hidden_size: inner,
                    intermediate_size: 4 * inner,
                    num_hidden_layers: self.num_layers,
                    num_attention_heads: self.num_attention_heads,
                    hidden_act: Activation::Gelu,
                    layer_norm_eps: 1e-5,
                },
                device,
            ),
            norm_out: norm(inner),
            proj_to_clip_embeddings: linear(inner, clip),
            clip_mean: zeros([1, clip]),
            clip_std: zeros([1, clip]),
            num_embeddings: self.num_embeddings,
        }
    }

    /// The prior of `json` with the weights of `vars`.
    pub fn load(json: &str, vars: Vars) -> Result<PriorTransformer, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

fn config_error(e: serde_json::Error) -> ModelError {
    ModelError::Unsupported(e.to_string())
}

/// `PriorTransformer`.
#[derive(Module, Debug)]
pub struct PriorTransformer {
    pub time_embedding: TimestepEmbedding,
    pub proj_in: Linear,
    pub embedding_proj_norm: Option<LayerNorm>,
    pub embedding_proj: Linear,
    pub encoder_hidden_states_proj: Linear,
    /// `[num_embeddings + 4, inner]` (diffusers' leading 1 dropped).
    pub positional_embedding: Param<Tensor<2>>,
    /// `[1, inner]`.
    pub prd_embedding: Param<Tensor<2>>,
    pub norm_in: Option<LayerNorm>,
    /// `transformer_blocks`.
    pub blocks: Encoder,
    pub norm_out: LayerNorm,
    pub proj_to_clip_embeddings: Linear,
    /// `[1, clip_embed_dim]`.
    pub clip_mean: Param<Tensor<2>>,
    pub clip_std: Param<Tensor<2>>,
    #[module(skip)]
    pub num_embeddings: usize,
}

impl PriorTransformer {
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.time_embedding.load(vars.pp("time_embedding"))?;
        load_linear(&mut self.proj_in, vars.pp("proj_in"))?;
        if let Some(norm) = &mut self.embedding_proj_norm {
            load_layer_norm(norm, vars.pp("embedding_proj_norm"))?;
        }
        load_linear(&mut self.embedding_proj, vars.pp("embedding_proj"))?;
        load_linear(&mut self.encoder_hidden_states_proj, vars.pp("encoder_hidden_states_proj"))?;
        let [sequence, inner] = self.positional_embedding.lazy_shape().dims();
        self.positional_embedding = Param::from_tensor(
            vars.tensor::<3>("positional_embedding", [1, sequence, inner])?.reshape([sequence, inner]),
        );
        self.prd_embedding =
            Param::from_tensor(vars.tensor::<3>("prd_embedding", [1, 1, inner])?.reshape([1, inner]));
        if let Some(norm) = &mut self.norm_in {
            load_layer_norm(norm, vars.pp("norm_in"))?;
        }
        for (i, layer) in self.blocks.layers.iter_mut().enumerate() {
            let vars = vars.pp("transformer_blocks").pp(i);
            load_layer_norm(&mut layer.layer_norm1, vars.pp("norm1"))?;
            layer.self_attn.load(&vars.pp("attn1"), ATTENTION_KEYS)?;
            load_layer_norm(&mut layer.layer_norm2, vars.pp("norm3"))?;
            load_linear(&mut layer.mlp.fc1, vars.pp("ff.net.0.proj"))?;
            load_linear(&mut layer.mlp.fc2, vars.pp("ff.net.2"))?;
        }
        load_layer_norm(&mut self.norm_out, vars.pp("norm_out"))?;
        load_linear(&mut self.proj_to_clip_embeddings, vars.pp("proj_to_clip_embeddings"))?;
        self.clip_mean = vars.param("clip_mean", &self.clip_mean)?;
        self.clip_std = vars.param("clip_std", &self.clip_std)?;
        Ok(())
    }

    /// The predicted image embedding `[batch, clip_embed_dim]` of the noisy image embeddings
    /// `hidden_states` `[batch, embedding_dim]` at integer timestep `t`, conditioned on the
    /// pooled text `proj_embedding` `[batch, embedding_proj_dim]` and the text states
    /// `[batch, num_embeddings, embedding_dim]`, whose padding `text_padding` (row-major
    /// `[batch, num_embeddings]`, `true` = padding: the tokenizer's `attention_mask == 0`) marks.
    pub fn forward(
        &self,
        hidden_states: Tensor<2>,
        t: f32,
        proj_embedding: Tensor<2>,
        text_states: Tensor<3>,
        text_padding: Option<&[bool]>,
    ) -> Tensor<2> {
        let [batch, _] = hidden_states.dims();
        let [_, n_text, _] = text_states.dims();
        assert_eq!(
            n_text, self.num_embeddings,
            "PriorTransformer: {n_text} text tokens, the config's num_embeddings is {}",
            self.num_embeddings
        );
        let device = hidden_states.device();
        let inner = self.proj_in.weight.lazy_shape().dims::<2>()[1];
        let t_proj = Tensor::<2>::from_data(
            TensorData::new(timestep_embedding(t, inner, true, 0.0), [1, inner]),
            &device,
        );
        let time = self.time_embedding.forward(t_proj).expand([batch, inner]);
        let proj_embedding = match &self.embedding_proj_norm {
            Some(norm) => norm.forward(proj_embedding),
            None => proj_embedding,
        };
        let tokens = |x: Tensor<2>| x.reshape([batch, 1, inner]);
        let x = Tensor::cat(
            vec![
                self.encoder_hidden_states_proj.forward(text_states),
                tokens(self.embedding_proj.forward(proj_embedding)),
                tokens(time),
                tokens(self.proj_in.forward(hidden_states)),
                tokens(self.prd_embedding.val().expand([batch, inner])),
            ],
            1,
        );
        let sequence = n_text + ADDITIONAL_EMBEDDINGS;
        let x = x + self.positional_embedding.val().reshape([1, sequence, inner]);
        let key_padding = text_padding.map(|padding| {
            assert_eq!(padding.len(), batch * n_text, "PriorTransformer: text padding mask size");
            let rows: Vec<bool> = padding
                .chunks(n_text)
                .flat_map(|row| row.iter().copied().chain([false; ADDITIONAL_EMBEDDINGS]))
                .collect();
            Tensor::<2, Bool>::from_data(TensorData::new(rows, [batch, sequence]), &device)
        });
        let x = match &self.norm_in {
            Some(norm) => norm.forward(x),
            None => x,
        };
        let how = AttendOptions { causal: true, key_padding, ..AttendOptions::default() };
        let x = self.blocks.forward_range_with(x, &how, 0..self.blocks.layers.len());
        let x = self.norm_out.forward(x).narrow(1, sequence - 1, 1).reshape([batch, inner]);
        self.proj_to_clip_embeddings.forward(x)
    }

    /// `post_process_latents`: `latents · clip_std + clip_mean`.
    pub fn post_process_latents(&self, latents: Tensor<2>) -> Tensor<2> {
        latents * self.clip_std.val() + self.clip_mean.val()
    }
}
