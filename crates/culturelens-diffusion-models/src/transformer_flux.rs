//! diffusers' `FluxTransformer2DModel` (Black Forest Labs' FLUX.1 dev and schnell) as diffusers
//! 0.42 computes it. The pipeline packs the latents into 2 × 2 patches beforehand
//! ([`pack_latents`]), so the transformer sees `[batch, (h/2)(w/2), 4c]` tokens:
//!
//! 1. `x_embedder` on the image tokens, `context_embedder` on the T5 tokens; `temb` is the
//!    timestep's sinusoidal embedding (`timestep_embedder`), plus, in guidance-distilled models
//!    (`guidance_embeds`, FLUX.1-dev), the guidance scale's (`guidance_embedder`), plus the
//!    pooled CLIP-L text (`text_embedder`); the pipeline's timestep is `t/1000` and the model
//!    multiplies it (and the guidance) by 1000 again, in float32.
//! 2. **Rotary position embeddings** over the joined `[text; image]` sequence
//!    ([`rotary_embedding`], `FluxPosEmbed`): each token has three position ids (text tokens
//!    `(0, 0, 0)`, image token `(0, row, column)`), axis `i` rotating `axes_dims_rope[i]` of the
//!    head's channels with frequencies `10000^(−2j/d_i)`.
//! 3. `num_layers` **double-stream blocks** (`FluxTransformerBlock`: SD 3's joint block with
//!    text first, q/k RMS norms and the rotary embedding), then `num_single_layers`
//!    **single-stream blocks** over the joined sequence (`FluxSingleTransformerBlock`: one
//!    `AdaLayerNormZeroSingle` modulation, attention and a tanh-GELU MLP side by side, their
//!    concatenation projected by `proj_out` and gated into the residual).
//! 4. `AdaLayerNormContinuous(temb)` and `proj_out` on the image tokens.
//!
//! In float16, as diffusers, the text stream of each double block and the joined stream of each
//! single block are clipped to ±65504.
//!
//! [`FluxTransformerConfig`] mirrors `transformer/config.json` over diffusers' class defaults.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::gelu_approximate;
use burn::tensor::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use super::mmdit::{
    AdaNorm, FeedForward, JointAttention, JointAttentionShape, JointOrder, Rope, TimeTextEmbedding,
    layer_norm, modulate,
};
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::weights::{Vars, WeightError, load_linear};

/// `transformer/config.json` of a `FluxTransformer2DModel`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FluxTransformerConfig {
    pub patch_size: usize,
    pub in_channels: usize,
    /// `None`: `in_channels`.
    pub out_channels: Option<usize>,
    pub num_layers: usize,
    pub num_single_layers: usize,
    pub attention_head_dim: usize,
    pub num_attention_heads: usize,
    pub joint_attention_dim: usize,
    pub pooled_projection_dim: usize,
    pub guidance_embeds: bool,
    pub axes_dims_rope: Vec<usize>,
}

/// The rotary embedding's base (`FluxPosEmbed(theta=10000)`).
const ROPE_THETA: f64 = 10000.0;

impl FluxTransformerConfig {
    /// diffusers' `FluxTransformer2DModel()` defaults (FLUX.1-schnell's shape).
    pub fn class_defaults() -> Self {
        Self {
            patch_size: 1,
            in_channels: 64,
            out_channels: None,
            num_layers: 19,
            num_single_layers: 38,
            attention_head_dim: 128,
            num_attention_heads: 24,
            joint_attention_dim: 4096,
            pooled_projection_dim: 768,
            guidance_embeds: false,
            axes_dims_rope: vec![16, 56, 56],
        }
    }

    /// `black-forest-labs/FLUX.1-dev`'s transformer.
    pub fn flux_1_dev() -> Self {
        Self { guidance_embeds: true, ..Self::class_defaults() }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and refuses what is not implemented.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        config::check_layers("num_layers", c.num_layers.saturating_add(c.num_single_layers))?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if c.patch_size != 1 {
            return bad(
                "patch_size",
                format!("{} is not supported (the pipeline packs 2×2 patches itself; 1)", c.patch_size),
            );
        }
        if c.num_attention_heads == 0 || c.attention_head_dim == 0 {
            return bad(
                "num_attention_heads",
                "num_attention_heads and attention_head_dim must be positive".into(),
            );
        }
        if c.axes_dims_rope.iter().sum::<usize>() != c.attention_head_dim
            || c.axes_dims_rope.iter().any(|d| d % 2 == 1)
        {
            return bad(
                "axes_dims_rope",
                format!(
                    "{:?} must be even widths adding up to attention_head_dim {}",
                    c.axes_dims_rope, c.attention_head_dim
                ),
            );
        }
        if c.axes_dims_rope.len() != 3 {
            return bad("axes_dims_rope", "needs three axes (the pipeline's position ids)".into());
        }
        if c.in_channels == 0 || !c.in_channels.is_multiple_of(4) {
            return bad("in_channels", format!("{} is not 4 × the VAE's latent channels", c.in_channels));
        }
        Ok(c)
    }

    pub fn inner_dim(&self) -> usize {
        self.num_attention_heads * self.attention_head_dim
    }

    pub fn out_channels(&self) -> usize {
        self.out_channels.unwrap_or(self.in_channels)
    }

    /// A randomly initialised (lazily materialised) transformer.
    pub fn init(&self, device: &Device) -> FluxTransformer2DModel {
        let dim = self.inner_dim();
        let shape = JointAttentionShape {
            dim,
            heads: self.num_attention_heads,
            d_head: self.attention_head_dim,
            context: true,
            context_out: true,
            out: true,
            qk_norm: true,
        };
        let transformer_blocks = (0..self.num_layers)
            .map(|_| FluxTransformerBlock {
                norm1: AdaNorm::init(dim, 6, device),
                norm1_context: AdaNorm::init(dim, 6, device),
                attn: JointAttention::init(shape, device),
                ff: FeedForward::init(dim, device),
                ff_context: FeedForward::init(dim, device),
            })
            .collect();
        let mlp = 4 * dim;
        let single = JointAttentionShape { context: false, context_out: false, out: false, ..shape };
        let single_transformer_blocks = (0..self.num_single_layers)
            .map(|_| FluxSingleTransformerBlock {
                norm: AdaNorm::init(dim, 3, device),
                proj_mlp: LinearConfig::new(dim, mlp).init(device),
                attn: JointAttention::init(single, device),
                proj_out: LinearConfig::new(dim + mlp, dim).init(device),
            })
            .collect();
        FluxTransformer2DModel {
            x_embedder: LinearConfig::new(self.in_channels, dim).init(device),
            context_embedder: LinearConfig::new(self.joint_attention_dim, dim).init(device),
            time_text_embed: TimeTextEmbedding::init(
                dim,
                self.pooled_projection_dim,
                self.guidance_embeds,
                device,
            ),
            transformer_blocks,
            single_transformer_blocks,
            norm_out: AdaNorm::init(dim, 2, device),
            proj_out: LinearConfig::new(dim, self.patch_size * self.patch_size * self.out_channels())
                .init(device),
            config: self.clone(),
        }
    }

    /// Builds the transformer of `json` and loads its state dict.
    pub fn load(json: &str, vars: Vars) -> Result<FluxTransformer2DModel, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// `FluxTransformerBlock` (double stream).
#[derive(Module, Debug)]
pub struct FluxTransformerBlock {
    pub norm1: AdaNorm,
    pub norm1_context: AdaNorm,
    pub attn: JointAttention,
    pub ff: FeedForward,
    pub ff_context: FeedForward,
}

impl FluxTransformerBlock {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.norm1.load(vars.pp("norm1"))?;
        self.norm1_context.load(vars.pp("norm1_context"))?;
        self.attn.load(vars.pp("attn"))?;
        self.ff.load(vars.pp("ff"))?;
        self.ff_context.load(vars.pp("ff_context"))
    }

    fn forward(
        &self,
        x: Tensor<3>,
        context: Tensor<3>,
        temb: &Tensor<2>,
        rope: &Rope,
    ) -> (Tensor<3>, Tensor<3>) {
        let c = self.norm1.chunks(temb);
        let cc = self.norm1_context.chunks(temb);
        let hidden = modulate(layer_norm(x.clone()), &c[0], &c[1]);
        let ctx_in = modulate(layer_norm(context.clone()), &cc[0], &cc[1]);
        let (attn, ctx_attn) = self.attn.forward(hidden, Some(ctx_in), JointOrder::TextFirst, Some(rope));
        let x = x + c[2].clone() * attn;
        let x = x.clone() + c[5].clone() * self.ff.forward(modulate(layer_norm(x), &c[3], &c[4]));
        let ctx = context + cc[2].clone() * ctx_attn.expect("a joint attention returns the text part");
        let ctx =
            ctx.clone() + cc[5].clone() * self.ff_context.forward(modulate(layer_norm(ctx), &cc[3], &cc[4]));
        (x, clip_f16(ctx))
    }
}

/// `FluxSingleTransformerBlock` (single stream over `[text; image]`).
#[derive(Module, Debug)]
pub struct FluxSingleTransformerBlock {
    /// `AdaLayerNormZeroSingle`: shift, scale, gate.
    pub norm: AdaNorm,
    pub proj_mlp: Linear,
    /// `pre_only`: no output projection of its own.
    pub attn: JointAttention,
    pub proj_out: Linear,
}

impl FluxSingleTransformerBlock {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.norm.load(vars.pp("norm"))?;
        load_linear(&mut self.proj_mlp, vars.pp("proj_mlp"))?;
        self.attn.load(vars.pp("attn"))?;
        load_linear(&mut self.proj_out, vars.pp("proj_out"))
    }

    fn forward(&self, joined: Tensor<3>, temb: &Tensor<2>, rope: &Rope) -> Tensor<3> {
        let c = self.norm.chunks(temb);
        let normed = modulate(layer_norm(joined.clone()), &c[0], &c[1]);
        let mlp = gelu_approximate(self.proj_mlp.forward(normed.clone()));
        let (attn, _) = self.attn.forward(normed, None, JointOrder::TextFirst, Some(rope));
        clip_f16(joined + c[2].clone() * self.proj_out.forward(Tensor::cat(vec![attn, mlp], 2)))
    }
}

/// diffusers' `clip(-65504, 65504)` of a float16 stream (other float types pass unchanged).
fn clip_f16(x: Tensor<3>) -> Tensor<3> {
    if x.dtype() == DType::F16 { x.clamp(-65504.0, 65504.0) } else { x }
}

/// diffusers' `FluxTransformer2DModel`.
#[derive(Module, Debug)]
pub struct FluxTransformer2DModel {
    pub x_embedder: Linear,
    pub context_embedder: Linear,
    pub time_text_embed: TimeTextEmbedding,
    pub transformer_blocks: Vec<FluxTransformerBlock>,
    pub single_transformer_blocks: Vec<FluxSingleTransformerBlock>,
    /// `AdaLayerNormContinuous`.
    pub norm_out: AdaNorm,
    pub proj_out: Linear,
    #[module(skip)]
    pub config: FluxTransformerConfig,
}

impl FluxTransformer2DModel {
    /// Loads every tensor of a diffusers `FluxTransformer2DModel` state dict.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.x_embedder, vars.pp("x_embedder"))?;
        load_linear(&mut self.context_embedder, vars.pp("context_embedder"))?;
        self.time_text_embed.load(vars.pp("time_text_embed"))?;
        for (i, block) in self.transformer_blocks.iter_mut().enumerate() {
            block.load(vars.pp("transformer_blocks").pp(i))?;
        }
        for (i, block) in self.single_transformer_blocks.iter_mut().enumerate() {
            block.load(vars.pp("single_transformer_blocks").pp(i))?;
        }
        self.norm_out.load(vars.pp("norm_out"))?;
        load_linear(&mut self.proj_out, vars.pp("proj_out"))
    }

    /// One call on packed latents `[batch, tokens, in_channels]` at the pipeline's timestep `t`
    /// (`1000 σ`; the model sees `(t / 1000) · 1000` in float32, as diffusers), with the guidance
    /// scale (models with `guidance_embeds`), the pooled CLIP text `[batch, pooled_dim]`, the T5
    /// tokens `context` `[batch, text_tokens, joint_attention_dim]` and the rotary embedding of
    /// the joined sequence; returns `[batch, tokens, out_channels]`.
    pub fn forward(
        &self,
        latents: Tensor<3>,
        t: f32,
        guidance: Option<f32>,
        pooled: Tensor<2>,
        context: Tensor<3>,
        rope: &Rope,
    ) -> Tensor<3> {
        let timestep = (t / 1000.0) * 1000.0;
        let guidance = guidance.filter(|_| self.config.guidance_embeds).map(|g| g * 1000.0);
        let temb = self.time_text_embed.forward(timestep, guidance, pooled);
        let mut x = self.x_embedder.forward(latents);
        let mut ctx = self.context_embedder.forward(context);
        for block in &self.transformer_blocks {
            (x, ctx) = block.forward(x, ctx, &temb, rope);
        }
        let text = ctx.dims()[1];
        let mut joined = Tensor::cat(vec![ctx, x], 1);
        for block in &self.single_transformer_blocks {
            joined = block.forward(joined, &temb, rope);
        }
        let [batch, total, dim] = joined.dims();
        let x = joined.slice([0..batch, text..total, 0..dim]);
        self.proj_out.forward(self.norm_out.continuous(x, &temb))
    }
}

/// `FluxPosEmbed` of the pipeline's position ids: `text_tokens` text tokens at `(0, 0, 0)`, then
/// the `rows × columns` image tokens at `(0, row, column)`. Each axis `i` of width `d_i` gives
/// angles `position · 10000^(−2j/d_i)` (float64, as diffusers), cos and sin repeated per pair,
/// rounded to float32; the axes are concatenated.
pub fn rotary_embedding(
    axes: &[usize],
    text_tokens: usize,
    rows: usize,
    columns: usize,
    device: &Device,
) -> Rope {
    let ids: Vec<[f64; 3]> = std::iter::repeat_n([0.0; 3], text_tokens)
        .chain((0..rows).flat_map(|r| (0..columns).map(move |c| [0.0, r as f64, c as f64])))
        .collect();
    let d_head: usize = axes.iter().sum();
    let (mut cos, mut sin) = (Vec::with_capacity(ids.len() * d_head), Vec::with_capacity(ids.len() * d_head));
    for id in &ids {
        for (axis, &d) in axes.iter().enumerate() {
            for j in (0..d).step_by(2) {
                let freq = 1.0 / ROPE_THETA.powf(j as f64 / d as f64);
                let angle = id[axis] * freq;
                let (c, s) = (angle.cos() as f32, angle.sin() as f32);
                cos.extend([c, c]);
                sin.extend([s, s]);
            }
        }
    }
    Rope::new(cos, sin, ids.len(), d_head, device)
}

/// `_pack_latents`: `[batch, c, h, w]` → `[batch, (h/2)(w/2), 4c]`, each 2 × 2 patch's
/// channels in `(c, row, column)` order.
pub fn pack_latents(latents: Tensor<4>) -> Tensor<3> {
    let [b, c, h, w] = latents.dims();
    latents.reshape([b, c, h / 2, 2, w / 2, 2]).permute([0, 2, 4, 1, 3, 5]).reshape([
        b,
        (h / 2) * (w / 2),
        c * 4,
    ])
}

/// `_unpack_latents`: the inverse of [`pack_latents`] for latents of `h × w`.
pub fn unpack_latents(packed: Tensor<3>, h: usize, w: usize) -> Tensor<4> {
    let [b, _, channels] = packed.dims();
    let c = channels / 4;
    packed.reshape([b, h / 2, w / 2, c, 2, 2]).permute([0, 3, 1, 4, 2, 5]).reshape([b, c, h, w])
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;

    use super::*;

    #[test]
    fn packing_by_hand_and_back() {
        let device = Device::flex();
        // One channel, 2 × 4: the patches are [[0, 1], [4, 5]] and [[2, 3], [6, 7]].
        let x = Tensor::<4>::from_data(
            TensorData::new((0..8).map(|v| v as f32).collect::<Vec<_>>(), [1, 1, 2, 4]),
            &device,
        );
        let packed = pack_latents(x.clone());
        assert_eq!(packed.dims(), [1, 2, 4]);
        assert_eq!(
            packed.clone().into_data().try_into_vec::<f32>().unwrap(),
            [0., 1., 4., 5., 2., 3., 6., 7.]
        );
        let back = unpack_latents(packed, 2, 4).into_data().try_into_vec::<f32>().unwrap();
        assert_eq!(back, (0..8).map(|v| v as f32).collect::<Vec<_>>());
    }

    #[test]
    fn rotary_angles_by_hand() {
        // Axes (2, 2, 4): the image token at (0, 1, 2) turns its row pair by 1 radian and its
        // two column pairs by 2·10000^0 = 2 and 2·10000^(−2/4) = 0.02; text tokens not at all.
        let rope = rotary_embedding(&[2, 2, 4], 1, 2, 3, &Device::flex());
        let cos = rope.cos.into_data().try_into_vec::<f32>().unwrap();
        assert_eq!(cos.len(), 7 * 8);
        assert!(cos[..8].iter().all(|&c| c == 1.0));
        let token = &cos[6 * 8..7 * 8]; // (0, 1, 2)
        let want = [1.0, 1.0, 1f64.cos(), 1f64.cos(), 2f64.cos(), 2f64.cos(), 0.02f64.cos(), 0.02f64.cos()];
        for (g, w) in token.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() < 1e-7, "{g} vs {w}");
        }
    }

    #[test]
    fn published_configs_read_and_unsupported_options_are_named() {
        // black-forest-labs/FLUX.1-dev, transformer/config.json.
        let json = r#"{"_class_name": "FluxTransformer2DModel", "_diffusers_version": "0.30.0.dev0",
            "attention_head_dim": 128, "guidance_embeds": true, "in_channels": 64,
            "joint_attention_dim": 4096, "num_attention_heads": 24, "num_layers": 19,
            "num_single_layers": 38, "patch_size": 1, "pooled_projection_dim": 768}"#;
        assert_eq!(FluxTransformerConfig::from_json(json).unwrap(), FluxTransformerConfig::flux_1_dev());
        let e =
            FluxTransformerConfig::from_json(r#"{"axes_dims_rope": [16, 56, 50]}"#).unwrap_err().to_string();
        assert!(e.contains("`axes_dims_rope`"), "{e}");
        let e = FluxTransformerConfig::from_json(r#"{"patch_size": 2}"#).unwrap_err().to_string();
        assert!(e.contains("`patch_size`"), "{e}");
    }
}
