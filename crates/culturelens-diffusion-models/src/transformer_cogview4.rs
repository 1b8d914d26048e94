//! `CogView4Transformer2DModel` of diffusers 0.42 (`transformer_cogview4.py`), the denoiser of
//! CogView4 (MAGBIG §4):
//!
//! 1. **Patch embedding** (`CogView4PatchEmbed`): the latents `[B, c, H, W]` cut into `p × p`
//!    patches, each flattened in `(channel, row, column)` order and projected (`proj`); the
//!    text hidden states projected by `text_proj` to the same width.
//! 2. **Conditioning** (`CogView3CombinedTimestepSizeEmbeddings`): the sinusoidal embedding of
//!    the timestep (`inner_dim` channels, `cos` first, no frequency shift) through
//!    `timestep_embedder`, plus the sinusoidal embeddings (`condition_dim` channels each) of
//!    `original_size (h, w)`, `crop_coords (top, left)` and `target_size (h, w)`, in that order,
//!    through `condition_embedder` (`PixArtAlphaTextProjection`, SiLU); `temb = silu(sum)`.
//! 3. **Blocks** (`CogView4TransformerBlock`): `CogView4AdaLayerNormZero` cuts `linear(temb)`
//!    into twelve vectors (shift, scale, gate of the attention and of the MLP, for the image
//!    and the text stream interleaved: `shift_msa, c_shift_msa, scale_msa, c_scale_msa, …`)
//!    that modulate layer norms without affine weights (ε = 10⁻⁵) as `norm(x)(1 + scale) +
//!    shift`. The attention is one set of `to_q`/`to_k`/`to_v` (biased) over the joined
//!    sequence `[text; image]`, per-head layer norms of q and k (`qk_norm="layer_norm"`, no
//!    affine, ε = 10⁻⁵), the rotary embedding on the image tokens only, softmax scaled by
//!    `1/√d_head` with no mask, then `to_out.0`. Each stream adds its gated attention output,
//!    then its gated feed-forward output; one `FeedForward` (tanh GELU, 4×) serves both.
//! 4. **Rotary embedding** (`CogView4RotaryPosEmbed`, θ = 10⁴): of the `d_head` dimensions,
//!    the first quarter of frequencies is the patch row's and the second the column's, each
//!    axis with `d_head / 4` frequencies `θ^(−2i / (d_head/2))`; the position on an axis of `n`
//!    patches is `⌊i · rope_axes_dim / n⌋` (the grid stretched over `rope_axes_dim` positions).
//!    The angles are concatenated twice (`[f, f]`) and rotate halves: `x cos + [−x₂, x₁] sin`
//!    (diffusers' `apply_rotary_emb` with `use_real_unbind_dim=-2`).
//! 5. **Output** (`CogView4AdaLayerNormContinuous`): `norm(x)(1 + scale) + shift` with
//!    `[scale, shift] = linear(temb)` (ε = 10⁻⁵), `proj_out`, and the patches put back.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::silu;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::mmdit::{FeedForward, modulate};
use super::unet::{TimestepEmbedding, timestep_embedding};
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::weights::{Vars, WeightError, load_linear};

/// `transformer/config.json` of a `CogView4Transformer2DModel`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CogView4TransformerConfig {
    pub patch_size: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub num_layers: usize,
    pub attention_head_dim: usize,
    pub num_attention_heads: usize,
    pub text_embed_dim: usize,
    pub time_embed_dim: usize,
    pub condition_dim: usize,
    pub pos_embed_max_size: usize,
    pub sample_size: usize,
    pub rope_axes_dim: Vec<usize>,
}

/// The rotary embedding's base (`CogView4RotaryPosEmbed(theta=10000.0)`).
const ROPE_THETA: f32 = 10000.0;
/// The layer norms' ε (`CogView4AdaLayerNormZero`, the q/k norms, the output norm).
const NORM_EPS: f64 = 1e-5;

impl CogView4TransformerConfig {
    /// diffusers' `CogView4Transformer2DModel()` defaults.
    pub fn class_defaults() -> Self {
        Self {
            patch_size: 2,
            in_channels: 16,
            out_channels: 16,
            num_layers: 30,
            attention_head_dim: 40,
            num_attention_heads: 64,
            text_embed_dim: 4096,
            time_embed_dim: 512,
            condition_dim: 256,
            pos_embed_max_size: 128,
            sample_size: 128,
            rope_axes_dim: vec![256, 256],
        }
    }

    /// `THUDM/CogView4-6B`'s transformer.
    pub fn cogview4_6b() -> Self {
        Self { num_layers: 28, attention_head_dim: 128, num_attention_heads: 32, ..Self::class_defaults() }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and refuses what cannot be built.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        config::check_layers("num_layers", c.num_layers)?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if c.num_attention_heads == 0 || c.attention_head_dim == 0 || !c.attention_head_dim.is_multiple_of(4)
        {
            return bad(
                "attention_head_dim",
                format!(
                    "{} heads of {}: both must be positive and the head a multiple of 4 (two rotary axes)",
                    c.num_attention_heads, c.attention_head_dim
                ),
            );
        }
        if c.patch_size == 0 || c.in_channels == 0 || c.out_channels == 0 {
            return bad("patch_size", "patch_size, in_channels and out_channels must be positive".into());
        }
        if c.rope_axes_dim.len() != 2 || c.rope_axes_dim.contains(&0) {
            return bad("rope_axes_dim", format!("{:?} is not two positive lengths", c.rope_axes_dim));
        }
        if c.time_embed_dim == 0 || c.condition_dim == 0 || c.text_embed_dim == 0 {
            return bad(
                "time_embed_dim",
                "time_embed_dim, condition_dim and text_embed_dim must be positive".into(),
            );
        }
        Ok(c)
    }

    pub fn inner_dim(&self) -> usize {
        self.num_attention_heads * self.attention_head_dim
    }

    /// A randomly initialised (lazily materialised) transformer.
    pub fn init(&self, device: &Device) -> CogView4Transformer2DModel {
        let dim = self.inner_dim();
        let linear = |i, o| LinearConfig::new(i, o).init(device);
        let transformer_blocks = (0..self.num_layers)
            .map(|_| CogView4TransformerBlock {
                norm1: linear(self.time_embed_dim, 12 * dim),
                to_q: linear(dim, dim),
                to_k: linear(dim, dim),
                to_v: linear(dim, dim),
                to_out: linear(dim, dim),
                ff: FeedForward::init(dim, device),
            })
            .collect();
        let p = self.patch_size;
        CogView4Transformer2DModel {
            proj: linear(self.in_channels * p * p, dim),
            text_proj: linear(self.text_embed_dim, dim),
            timestep_embedder: TimestepEmbedding::init(dim, self.time_embed_dim, device),
            condition_embedder: TimestepEmbedding::init(6 * self.condition_dim, self.time_embed_dim, device),
            transformer_blocks,
            norm_out: linear(self.time_embed_dim, 2 * dim),
            proj_out: linear(dim, p * p * self.out_channels),
            config: self.clone(),
        }
    }

    /// Builds the transformer of `json` and loads its state dict.
    pub fn load(json: &str, vars: Vars) -> Result<CogView4Transformer2DModel, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// `CogView4TransformerBlock`: `norm1.linear`, the attention `attn1` and the shared `ff`.
#[derive(Module, Debug)]
pub struct CogView4TransformerBlock {
    /// `norm1.linear`: `time_embed_dim → 12 · dim`.
    pub norm1: Linear,
    pub to_q: Linear,
    pub to_k: Linear,
    pub to_v: Linear,
    /// `attn1.to_out.0`.
    pub to_out: Linear,
    pub ff: FeedForward,
}

/// diffusers' `CogView4Transformer2DModel`.
#[derive(Module, Debug)]
pub struct CogView4Transformer2DModel {
    /// `patch_embed.proj`.
    pub proj: Linear,
    /// `patch_embed.text_proj`.
    pub text_proj: Linear,
    /// `time_condition_embed.timestep_embedder`.
    pub timestep_embedder: TimestepEmbedding,
    /// `time_condition_embed.condition_embedder` (`PixArtAlphaTextProjection`).
    pub condition_embedder: TimestepEmbedding,
    pub transformer_blocks: Vec<CogView4TransformerBlock>,
    /// `norm_out.linear`: `time_embed_dim → 2 · dim`.
    pub norm_out: Linear,
    pub proj_out: Linear,
    #[module(skip)]
    pub config: CogView4TransformerConfig,
}

/// `nn.LayerNorm(…, elementwise_affine=False, eps=1e-5)` over the last axis.
fn layer_norm<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let (var, mean) = x.clone().var_mean_bias(D - 1);
    (x - mean) / (var + NORM_EPS).sqrt()
}

/// The rotary tables of the image tokens: `cos` and `sin` `[1, 1, tokens, d_head]`.
#[derive(Clone, Debug)]
pub struct ImageRope {
    pub cos: Tensor<4>,
    pub sin: Tensor<4>,
}

/// `CogView4RotaryPosEmbed` of a grid of `rows × cols` patches, in float32 as torch.
pub fn rotary_embedding(
    d_head: usize,
    axes: [usize; 2],
    rows: usize,
    cols: usize,
    device: &Device,
) -> ImageRope {
    let half = d_head / 2;
    // 1 / θ^(arange(0, half, 2)[: half / 2] / half), float32.
    let inv: Vec<f32> = (0..half / 2).map(|i| 1.0 / ROPE_THETA.powf((2 * i) as f32 / half as f32)).collect();
    let (mut cos, mut sin) =
        (Vec::with_capacity(rows * cols * d_head), Vec::with_capacity(rows * cols * d_head));
    for r in 0..rows {
        for c in 0..cols {
            let (pr, pc) = ((r * axes[0] / rows) as f32, (c * axes[1] / cols) as f32);
            let freqs: Vec<f32> = inv.iter().map(|&f| pr * f).chain(inv.iter().map(|&f| pc * f)).collect();
            for _ in 0..2 {
                cos.extend(freqs.iter().map(|a| a.cos()));
                sin.extend(freqs.iter().map(|a| a.sin()));
            }
        }
    }
    let t = |v| Tensor::<2>::from_data(TensorData::new(v, [rows * cols, d_head]), device).unsqueeze::<4>();
    ImageRope { cos: t(cos), sin: t(sin) }
}

impl ImageRope {
    /// `x cos + [−x₂, x₁] sin` over `[batch, heads, tokens, d_head]` (halves `x₁`, `x₂`).
    fn apply(&self, x: Tensor<4>) -> Tensor<4> {
        let [b, h, s, d] = x.dims();
        let x1 = x.clone().slice([0..b, 0..h, 0..s, 0..d / 2]);
        let x2 = x.clone().slice([0..b, 0..h, 0..s, d / 2..d]);
        x * self.cos.clone() + Tensor::cat(vec![x2.neg(), x1], 3) * self.sin.clone()
    }
}

impl CogView4TransformerBlock {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.norm1, vars.pp("norm1.linear"))?;
        let attn = vars.pp("attn1");
        load_linear(&mut self.to_q, attn.pp("to_q"))?;
        load_linear(&mut self.to_k, attn.pp("to_k"))?;
        load_linear(&mut self.to_v, attn.pp("to_v"))?;
        load_linear(&mut self.to_out, attn.pp("to_out.0"))?;
        self.ff.load(vars.pp("ff"))
    }

    fn forward(
        &self,
        x: Tensor<3>,
        context: Tensor<3>,
        temb: &Tensor<2>,
        rope: &ImageRope,
        heads: usize,
    ) -> (Tensor<3>, Tensor<3>) {
        let [batch, n, dim] = x.dims();
        let m = context.dims()[1];
        let chunks: Vec<Tensor<3>> =
            self.norm1.forward(temb.clone()).chunk(12, 1).into_iter().map(|c| c.unsqueeze_dim(1)).collect();
        let [shift_msa, c_shift_msa, scale_msa, c_scale_msa, gate_msa, c_gate_msa] =
            std::array::from_fn(|i| chunks[i].clone());
        let [shift_mlp, c_shift_mlp, scale_mlp, c_scale_mlp, gate_mlp, c_gate_mlp] =
            std::array::from_fn(|i| chunks[6 + i].clone());
        let nx = modulate(layer_norm(x.clone()), &shift_msa, &scale_msa);
        let nc = modulate(layer_norm(context.clone()), &c_shift_msa, &c_scale_msa);
        let joined = Tensor::cat(vec![nc, nx], 1);
        let total = n + m;
        let d = dim / heads;
        let split = |t: Tensor<3>| t.reshape([batch, total, heads, d]).swap_dims(1, 2);
        let rotate = |t: Tensor<4>| {
            let text = t.clone().slice([0..batch, 0..heads, 0..m, 0..d]);
            let image = rope.apply(t.slice([0..batch, 0..heads, m..total, 0..d]));
            Tensor::cat(vec![text, image], 2)
        };
        let q = rotate(layer_norm(split(self.to_q.forward(joined.clone()))));
        let k = rotate(layer_norm(split(self.to_k.forward(joined.clone()))));
        let v = split(self.to_v.forward(joined));
        let options =
            AttentionModuleOptions { scale: Some((d as f64).powf(-0.5)), softcap: None, is_causal: false };
        let out = attention(q, k, v, None, None, options).swap_dims(1, 2).reshape([batch, total, dim]);
        let out = self.to_out.forward(out);
        let attn_text = out.clone().slice([0..batch, 0..m, 0..dim]);
        let attn_image = out.slice([0..batch, m..total, 0..dim]);
        let x = x + attn_image * gate_msa;
        let context = context + attn_text * c_gate_msa;
        let nx = modulate(layer_norm(x.clone()), &shift_mlp, &scale_mlp);
        let nc = modulate(layer_norm(context.clone()), &c_shift_mlp, &c_scale_mlp);
        let x = x + self.ff.forward(nx) * gate_mlp;
        let context = context + self.ff.forward(nc) * c_gate_mlp;
        (x, context)
    }
}

/// The six size conditions `(original h, w, crop top, left, target h, w)` of diffusers' call.
pub type SizeConditions = [f32; 6];

impl CogView4Transformer2DModel {
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let embed = vars.pp("patch_embed");
        load_linear(&mut self.proj, embed.pp("proj"))?;
        load_linear(&mut self.text_proj, embed.pp("text_proj"))?;
        let cond = vars.pp("time_condition_embed");
        self.timestep_embedder.load(cond.pp("timestep_embedder"))?;
        self.condition_embedder.load(cond.pp("condition_embedder"))?;
        for (i, block) in self.transformer_blocks.iter_mut().enumerate() {
            block.load(vars.pp("transformer_blocks").pp(i))?;
        }
        load_linear(&mut self.norm_out, vars.pp("norm_out.linear"))?;
        load_linear(&mut self.proj_out, vars.pp("proj_out"))
    }

    /// The velocity `[B, out_channels, H, W]` of latents `[B, in_channels, H, W]` at timestep
    /// `t`, conditioned on the text hidden states `[B, m, text_embed_dim]` and the size
    /// conditions every row shares; `rope` is [`rotary_embedding`] of the patch grid.
    pub fn forward(
        &self,
        latents: Tensor<4>,
        context: Tensor<3>,
        t: f32,
        sizes: &SizeConditions,
        rope: &ImageRope,
    ) -> Tensor<4> {
        let c = &self.config;
        let [batch, channels, height, width] = latents.dims();
        let p = c.patch_size;
        let (rows, cols) = (height / p, width / p);
        let device = latents.device();
        let patches = latents
            .reshape([batch, channels, rows, p, cols, p])
            .permute([0, 2, 4, 1, 3, 5])
            .reshape([batch, rows * cols, channels * p * p]);
        let mut x = self.proj.forward(patches);
        let mut context = self.text_proj.forward(context);
        let row = |values: Vec<f32>| {
            let w = values.len();
            Tensor::<2>::from_data(TensorData::new(values, [1, w]), &device).expand([batch, w])
        };
        let time = row(timestep_embedding(t, c.inner_dim(), true, 0.0));
        let conditions: Vec<f32> =
            sizes.iter().flat_map(|&v| timestep_embedding(v, c.condition_dim, true, 0.0)).collect();
        let temb = self.timestep_embedder.forward(time) + self.condition_embedder.forward(row(conditions));
        let temb = silu(temb);
        for block in &self.transformer_blocks {
            (x, context) = block.forward(x, context, &temb, rope, c.num_attention_heads);
        }
        let mut out = self.norm_out.forward(temb).chunk(2, 1);
        let shift = out.pop().expect("two halves").unsqueeze_dim(1);
        let scale = out.pop().expect("two halves").unsqueeze_dim(1);
        let x = self.proj_out.forward(modulate(layer_norm(x), &shift, &scale));
        x.reshape([batch, rows, cols, c.out_channels, p, p]).permute([0, 3, 1, 4, 2, 5]).reshape([
            batch,
            c.out_channels,
            height,
            width,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_cogview4_transformer_config_reads_to_the_preset() {
        // THUDM/CogView4-6B's transformer/config.json.
        let json = r#"{"_class_name": "CogView4Transformer2DModel", "_diffusers_version": "0.33.0.dev0",
            "attention_head_dim": 128, "condition_dim": 256, "in_channels": 16, "num_attention_heads": 32,
            "num_layers": 28, "out_channels": 16, "patch_size": 2, "pos_embed_max_size": 128,
            "rope_axes_dim": [256, 256], "sample_size": 128, "text_embed_dim": 4096, "time_embed_dim": 512}"#;
        assert_eq!(
            CogView4TransformerConfig::from_json(json).unwrap(),
            CogView4TransformerConfig::cogview4_6b()
        );
        for (json, key) in [
            (r#"{"attention_head_dim": 6}"#, "`attention_head_dim`"),
            (r#"{"rope_axes_dim": [256]}"#, "`rope_axes_dim`"),
            (r#"{"patch_size": 0}"#, "`patch_size`"),
        ] {
            let e = CogView4TransformerConfig::from_json(json).unwrap_err().to_string();
            assert!(e.contains(key), "{json}: {e}");
        }
    }
}
