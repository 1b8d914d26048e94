//! diffusers' `SD3Transformer2DModel` (Esser et al. 2024), the MMDiT of Stable Diffusion 3 and
//! 3.5, as diffusers 0.42 computes it:
//!
//! 1. **Patches**: a `patch × patch` convolution of stride `patch` (`pos_embed.proj`), flattened
//!    to tokens, plus the fixed 2-D sine-cosine position table `pos_embed.pos_embed` (a
//!    `pos_embed_max_size²` grid stored in the checkpoint) cropped to the image's centre:
//!    rows from `(max − h/p) / 2`, columns from `(max − w/p) / 2`.
//! 2. **Conditioning** `temb`: the timestep's sinusoidal embedding through `timestep_embedder`
//!    plus the pooled text (CLIP-L ‖ CLIP-G `text_embeds`) through `text_embedder`
//!    ([`crate::mmdit::TimeTextEmbedding`]); the text tokens through `context_embedder`.
//! 3. **Joint blocks** (`JointTransformerBlock`): the image and text streams each modulated by
//!    `AdaLayerNormZero(temb)`, one attention over both (image tokens first), gated residuals,
//!    then each stream's own gated GELU MLP. The last block is `context_pre_only`: its text side
//!    is normed by `AdaLayerNormContinuous` and leaves the attention unprojected, and the text
//!    stream ends there. SD 3.5 adds per-head RMS norms of q and k (`qk_norm: "rms_norm"`) and,
//!    in the blocks listed in `dual_attention_layers`, a second self-attention of the image
//!    tokens (`attn2`) with its own modulation (`SD35AdaLayerNormZeroX`).
//! 4. **Output**: `AdaLayerNormContinuous(temb)`, `proj_out`, and the tokens folded back into
//!    `[batch, out_channels, h, w]`.
//!
//! [`Sd3TransformerConfig`] mirrors `transformer/config.json` over diffusers' class defaults;
//! options outside these (another `qk_norm`, a caption width other than the attention width)
//! are refused by key.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

use super::mmdit::{
    AdaNorm, FeedForward, JointAttention, JointAttentionShape, JointOrder, TimeTextEmbedding, layer_norm,
    modulate,
};
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::weights::{Vars, WeightError, load_conv2d, load_linear};

/// `transformer/config.json` of an `SD3Transformer2DModel`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sd3TransformerConfig {
    pub sample_size: usize,
    pub patch_size: usize,
    pub in_channels: usize,
    pub num_layers: usize,
    pub attention_head_dim: usize,
    pub num_attention_heads: usize,
    pub joint_attention_dim: usize,
    pub caption_projection_dim: usize,
    pub pooled_projection_dim: usize,
    pub out_channels: usize,
    pub pos_embed_max_size: usize,
    pub dual_attention_layers: Vec<usize>,
    pub qk_norm: Option<String>,
}

impl Sd3TransformerConfig {
    /// diffusers' `SD3Transformer2DModel()` defaults: the value of every key a file leaves out.
    pub fn class_defaults() -> Self {
        Self {
            sample_size: 128,
            patch_size: 2,
            in_channels: 16,
            num_layers: 18,
            attention_head_dim: 64,
            num_attention_heads: 18,
            joint_attention_dim: 4096,
            caption_projection_dim: 1152,
            pooled_projection_dim: 2048,
            out_channels: 16,
            pos_embed_max_size: 96,
            dual_attention_layers: Vec::new(),
            qk_norm: None,
        }
    }

    /// `stabilityai/stable-diffusion-3-medium-diffusers`' transformer.
    pub fn stable_diffusion_3_medium() -> Self {
        Self {
            num_layers: 24,
            num_attention_heads: 24,
            caption_projection_dim: 1536,
            pos_embed_max_size: 192,
            ..Self::class_defaults()
        }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and refuses what is not implemented.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        config::check_layers("num_layers", c.num_layers)?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if c.num_layers == 0 || c.num_attention_heads == 0 || c.attention_head_dim == 0 || c.patch_size == 0 {
            return bad(
                "num_layers",
                "num_layers, num_attention_heads, attention_head_dim and patch_size must be positive".into(),
            );
        }
        if c.caption_projection_dim != c.inner_dim() {
            return bad(
                "caption_projection_dim",
                format!(
                    "{} differs from num_attention_heads × attention_head_dim = {}",
                    c.caption_projection_dim,
                    c.inner_dim()
                ),
            );
        }
        if let Some(norm) = c.qk_norm.as_deref().filter(|n| *n != "rms_norm") {
            return bad("qk_norm", format!("`{norm}` is not supported (rms_norm or none)"));
        }
        if let Some(&i) = c.dual_attention_layers.iter().find(|&&i| i + 1 >= c.num_layers) {
            return bad("dual_attention_layers", format!("layer {i} is not a joint layer before the last"));
        }
        if c.pos_embed_max_size == 0 {
            return bad("pos_embed_max_size", "must be positive".into());
        }
        if !c.attention_head_dim.is_multiple_of(2) {
            return bad("attention_head_dim", "must be even".into());
        }
        Ok(c)
    }

    pub fn inner_dim(&self) -> usize {
        self.num_attention_heads * self.attention_head_dim
    }

    /// A randomly initialised (lazily materialised) transformer.
    pub fn init(&self, device: &Device) -> Sd3Transformer2DModel {
        let (dim, p) = (self.inner_dim(), self.patch_size);
        let qk_norm = self.qk_norm.is_some();
        let attention = |context: bool, context_out: bool| {
            JointAttention::init(
                JointAttentionShape {
                    dim,
                    heads: self.num_attention_heads,
                    d_head: self.attention_head_dim,
                    context,
                    context_out,
                    out: true,
                    qk_norm,
                },
                device,
            )
        };
        let transformer_blocks = (0..self.num_layers)
            .map(|i| {
                let last = i + 1 == self.num_layers;
                let dual = self.dual_attention_layers.contains(&i);
                JointTransformerBlock {
                    norm1: AdaNorm::init(dim, if dual { 9 } else { 6 }, device),
                    norm1_context: AdaNorm::init(dim, if last { 2 } else { 6 }, device),
                    attn: attention(true, !last),
                    attn2: dual.then(|| attention(false, false)),
                    ff: FeedForward::init(dim, device),
                    ff_context: (!last).then(|| FeedForward::init(dim, device)),
                    context_pre_only: last,
                }
            })
            .collect();
        let grid = self.pos_embed_max_size * self.pos_embed_max_size;
        Sd3Transformer2DModel {
            proj: Conv2dConfig::new([self.in_channels, dim], [p, p]).with_stride([p, p]).init(device),
            pos_embed: Initializer::Zeros.init([grid, dim], device),
            time_text_embed: TimeTextEmbedding::init(dim, self.pooled_projection_dim, false, device),
            context_embedder: LinearConfig::new(self.joint_attention_dim, self.caption_projection_dim)
                .init(device),
            transformer_blocks,
            norm_out: AdaNorm::init(dim, 2, device),
            proj_out: LinearConfig::new(dim, p * p * self.out_channels).init(device),
            config: self.clone(),
        }
    }

    /// Builds the transformer of `json` and loads its state dict.
    pub fn load(json: &str, vars: Vars) -> Result<Sd3Transformer2DModel, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// `JointTransformerBlock`.
#[derive(Module, Debug)]
pub struct JointTransformerBlock {
    /// `AdaLayerNormZero` (6 vectors) or, with a second attention, `SD35AdaLayerNormZeroX` (9).
    pub norm1: AdaNorm,
    /// `AdaLayerNormZero`, or `AdaLayerNormContinuous` (2) in the `context_pre_only` block.
    pub norm1_context: AdaNorm,
    pub attn: JointAttention,
    pub attn2: Option<JointAttention>,
    pub ff: FeedForward,
    pub ff_context: Option<FeedForward>,
    #[module(skip)]
    pub context_pre_only: bool,
}

impl JointTransformerBlock {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.norm1.load(vars.pp("norm1"))?;
        self.norm1_context.load(vars.pp("norm1_context"))?;
        self.attn.load(vars.pp("attn"))?;
        if let Some(a) = &mut self.attn2 {
            a.load(vars.pp("attn2"))?;
        }
        self.ff.load(vars.pp("ff"))?;
        if let Some(f) = &mut self.ff_context {
            f.load(vars.pp("ff_context"))?;
        }
        Ok(())
    }

    /// One block: the image tokens `x`, the text tokens `context` (`None` after the
    /// `context_pre_only` block).
    fn forward(&self, x: Tensor<3>, context: Tensor<3>, temb: &Tensor<2>) -> (Tensor<3>, Option<Tensor<3>>) {
        let c = self.norm1.chunks(temb);
        let normed = layer_norm(x.clone());
        let hidden = modulate(normed.clone(), &c[0], &c[1]);
        let (ctx_in, ctx_mod) = if self.context_pre_only {
            (self.norm1_context.continuous(context.clone(), temb), None)
        } else {
            let cc = self.norm1_context.chunks(temb);
            (modulate(layer_norm(context.clone()), &cc[0], &cc[1]), Some(cc))
        };
        let (attn, ctx_attn) = self.attn.forward(hidden, Some(ctx_in), JointOrder::ImageFirst, None);
        let mut x = x + c[2].clone() * attn;
        if let Some(attn2) = &self.attn2 {
            let hidden2 = modulate(normed, &c[6], &c[7]);
            x = x + c[8].clone() * attn2.forward(hidden2, None, JointOrder::ImageFirst, None).0;
        }
        let mlp = self.ff.forward(modulate(layer_norm(x.clone()), &c[3], &c[4]));
        let x = x + c[5].clone() * mlp;
        let context = match (ctx_mod, ctx_attn, &self.ff_context) {
            (Some(cc), Some(ctx_attn), Some(ff)) => {
                let ctx = context + cc[2].clone() * ctx_attn;
                let mlp = ff.forward(modulate(layer_norm(ctx.clone()), &cc[3], &cc[4]));
                Some(ctx + cc[5].clone() * mlp)
            }
            _ => None,
        };
        (x, context)
    }
}

/// diffusers' `SD3Transformer2DModel`.
#[derive(Module, Debug)]
pub struct Sd3Transformer2DModel {
    /// `pos_embed.proj`.
    pub proj: Conv2d,
    /// `pos_embed.pos_embed`, `[pos_embed_max_size², inner_dim]`.
    pub pos_embed: Param<Tensor<2>>,
    pub time_text_embed: TimeTextEmbedding,
    pub context_embedder: Linear,
    pub transformer_blocks: Vec<JointTransformerBlock>,
    /// `AdaLayerNormContinuous`.
    pub norm_out: AdaNorm,
    pub proj_out: Linear,
    #[module(skip)]
    pub config: Sd3TransformerConfig,
}

impl Sd3Transformer2DModel {
    /// Loads every tensor of a diffusers `SD3Transformer2DModel` state dict.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let pos = vars.pp("pos_embed");
        load_conv2d(&mut self.proj, pos.pp("proj"))?;
        let [grid, dim] = self.pos_embed.lazy_shape().dims();
        self.pos_embed =
            Param::from_tensor(pos.tensor::<3>("pos_embed", [1, grid, dim])?.reshape([grid, dim]));
        self.time_text_embed.load(vars.pp("time_text_embed"))?;
        load_linear(&mut self.context_embedder, vars.pp("context_embedder"))?;
        for (i, block) in self.transformer_blocks.iter_mut().enumerate() {
            block.load(vars.pp("transformer_blocks").pp(i))?;
        }
        self.norm_out.load(vars.pp("norm_out"))?;
        load_linear(&mut self.proj_out, vars.pp("proj_out"))
    }

    /// One call: `latents` `[batch, in_channels, h, w]` at timestep `t`, conditioned on the text
    /// tokens `context` `[batch, tokens, joint_attention_dim]` and `pooled`
    /// `[batch, pooled_projection_dim]`; returns `[batch, out_channels, h, w]`.
    pub fn forward(&self, latents: Tensor<4>, t: f32, context: Tensor<3>, pooled: Tensor<2>) -> Tensor<4> {
        let c = &self.config;
        let p = c.patch_size;
        let [batch, _, h, w] = latents.dims();
        let (hp, wp) = (h / p, w / p);
        let dim = c.inner_dim();
        let x = self.proj.forward(latents).flatten::<3>(2, 3).swap_dims(1, 2);
        let max = c.pos_embed_max_size;
        let (top, left) = ((max - hp) / 2, (max - wp) / 2);
        let pos =
            self.pos_embed.val().reshape([max, max, dim]).slice([top..top + hp, left..left + wp, 0..dim]);
        let mut x = x + pos.reshape([1, hp * wp, dim]);
        let temb = self.time_text_embed.forward(t, None, pooled);
        let mut context = Some(self.context_embedder.forward(context));
        for block in &self.transformer_blocks {
            let ctx = context.take().expect("only the last block drops the text stream");
            (x, context) = block.forward(x, ctx, &temb);
        }
        let x = self.proj_out.forward(self.norm_out.continuous(x, &temb));
        let out = c.out_channels;
        x.reshape([batch, hp, wp, p, p, out]).permute([0, 5, 1, 3, 2, 4]).reshape([batch, out, h, w])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_configs_read_and_unsupported_options_are_named() {
        // stabilityai/stable-diffusion-3-medium-diffusers, transformer/config.json.
        let json = r#"{"_class_name": "SD3Transformer2DModel", "_diffusers_version": "0.29.0.dev0",
            "attention_head_dim": 64, "caption_projection_dim": 1536, "in_channels": 16,
            "joint_attention_dim": 4096, "num_attention_heads": 24, "num_layers": 24,
            "out_channels": 16, "patch_size": 2, "pooled_projection_dim": 2048,
            "pos_embed_max_size": 192, "sample_size": 128}"#;
        assert_eq!(
            Sd3TransformerConfig::from_json(json).unwrap(),
            Sd3TransformerConfig::stable_diffusion_3_medium()
        );
        let e = Sd3TransformerConfig::from_json(r#"{"qk_norm": "layer_norm"}"#).unwrap_err().to_string();
        assert!(e.contains("`qk_norm`: `layer_norm`"), "{e}");
        let e =
            Sd3TransformerConfig::from_json(r#"{"caption_projection_dim": 100}"#).unwrap_err().to_string();
        assert!(e.contains("`caption_projection_dim`"), "{e}");
        let e = Sd3TransformerConfig::from_json(r#"{"num_layers": 2, "dual_attention_layers": [1]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`dual_attention_layers`"), "{e}");
    }
}
