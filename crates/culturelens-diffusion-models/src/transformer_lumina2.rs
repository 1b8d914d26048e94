//! `Lumina2Transformer2DModel` of diffusers 0.42 (Lumina-Image 2.0's "Unified Next-DiT"), as
//! `transformer_lumina2.py` computes it.
//!
//! - **Conditioning** (`time_caption_embed`): the timestep `t ∈ [0, 1]` (the pipeline passes
//!   `1 − σ`) through the sinusoidal embedding (256 channels, `cos` first, no frequency shift) and
//!   a `TimestepEmbedding` to `temb` (`min(hidden, 1024)` wide); the caption (Gemma 2's hidden
//!   states) through an RMS norm and a linear layer (`caption_embedder.{0,1}`) to the model width.
//! - **Patches**: `[c, h, w]` latents cut into `p × p` patches, each flattened `(pᵢ, pⱼ, c)`
//!   (row, column, channel) and embedded by `x_embedder`; unpatchified the same way back.
//! - **RoPE** over three axes (`axes_dim_rope`, `θ = 10000`, frequencies and angles in float64,
//!   as `get_1d_rotary_pos_embed(freqs_dtype=float64)`), the complex rotation of consecutive pairs
//!   (`apply_rotary_emb(use_real=False)`): caption token `i` (of the `n` the mask keeps) sits at
//!   `(i, 0, 0)`, image patch `(r, c)` at `(n, r, c)`; a padded caption position has no rotation
//!   at all (a zero `freqs_cis`, so its queries and keys are 0 in the caption refiner), a padded
//!   joint position the identity.
//! - **Blocks** (`Lumina2TransformerBlock`): attention with RMS-normed q and k per head (ε 10⁻⁵),
//!   grouped-query (`num_kv_heads`), scaled by `1/√head_dim`, keys masked by the caption padding
//!   where a mask is given, then `to_out.0`; the feed-forward `linear_2(silu(linear_1 x) ⊙
//!   linear_3 x)` (`LuminaFeedForward`, inner width `4·hidden` scaled by `ffn_dim_multiplier` and
//!   rounded up to `multiple_of`). With modulation (`LuminaRMSNormZero`: `linear(silu(temb))` cut
//!   into `scale_msa, gate_msa, scale_mlp, gate_mlp`):
//!   `x + tanh(gate_msa) · norm2(attn(norm1(x) (1 + scale_msa)))`, then
//!   `x + tanh(gate_mlp) · ffn_norm2(ff(ffn_norm1(x) (1 + scale_mlp)))`; without (the context
//!   refiner) the same with plain RMS norms, no scales and no gates.
//! - **Order**: the context refiner (no modulation) on the caption with its padding mask, the
//!   noise refiner on the image tokens (no mask), then per row `[caption[:n]; image]` padded to
//!   the longest row and the joint layers (masked only when the rows' lengths differ, as
//!   diffusers), then `LuminaLayerNormContinuous` (a layer norm without affine weights, ε 10⁻⁶,
//!   times `1 + linear_1(silu(temb))`, then `linear_2`) and the image tokens unpatchified.
//!
//! Caption masks are prefixes (`n` kept tokens then padding), as Lumina 2's tokenizer pads on the
//! right; the model takes the lengths `n`.

use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::silu;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::mmdit::{Rope, layer_norm};
use super::unet::{TimestepEmbedding, timestep_embedding};
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::weights::{Vars, WeightError, load_linear};

/// `transformer/config.json` of a `Lumina2Transformer2DModel`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lumina2TransformerConfig {
    pub sample_size: usize,
    pub patch_size: usize,
    pub in_channels: usize,
    /// `None`: `in_channels`.
    pub out_channels: Option<usize>,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_refiner_layers: usize,
    pub num_attention_heads: usize,
    pub num_kv_heads: usize,
    pub multiple_of: usize,
    pub ffn_dim_multiplier: Option<f64>,
    pub norm_eps: f64,
    pub axes_dim_rope: Vec<usize>,
    pub axes_lens: Vec<usize>,
    pub cap_feat_dim: usize,
}

/// The rotary embedding's base (`Lumina2RotaryPosEmbed(theta=10000)`).
const ROPE_THETA: f64 = 10000.0;
/// Channels of the sinusoidal timestep embedding (`frequency_embedding_size`).
const TIME_CHANNELS: usize = 256;
/// ε of the attention's q/k RMS norms.
const QK_EPS: f64 = 1e-5;

impl Lumina2TransformerConfig {
    /// diffusers' `Lumina2Transformer2DModel()` defaults.
    pub fn class_defaults() -> Self {
        Self {
            sample_size: 128,
            patch_size: 2,
            in_channels: 16,
            out_channels: None,
            hidden_size: 2304,
            num_layers: 26,
            num_refiner_layers: 2,
            num_attention_heads: 24,
            num_kv_heads: 8,
            multiple_of: 256,
            ffn_dim_multiplier: None,
            norm_eps: 1e-5,
            axes_dim_rope: vec![32, 32, 32],
            axes_lens: vec![300, 512, 512],
            cap_feat_dim: 1024,
        }
    }

    /// `Alpha-VLLM/Lumina-Image-2.0`'s transformer (Gemma-2-2B captions).
    pub fn lumina_image_2_0() -> Self {
        Self { cap_feat_dim: 2304, ..Self::class_defaults() }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and refuses what cannot run.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        config::check_layers("num_layers", c.num_layers.saturating_add(2 * c.num_refiner_layers))?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return bad("num_attention_heads", format!("must divide hidden_size {}", c.hidden_size));
        }
        if c.num_kv_heads == 0 || !c.num_attention_heads.is_multiple_of(c.num_kv_heads) {
            return bad("num_kv_heads", format!("must divide num_attention_heads {}", c.num_attention_heads));
        }
        if c.patch_size == 0 || c.in_channels == 0 || c.multiple_of == 0 || c.cap_feat_dim == 0 {
            return bad(
                "patch_size",
                "patch_size, in_channels, multiple_of and cap_feat_dim must be positive".into(),
            );
        }
        let head = c.hidden_size / c.num_attention_heads;
        if c.axes_dim_rope.len() != 3
            || c.axes_dim_rope.iter().sum::<usize>() != head
            || c.axes_dim_rope.iter().any(|d| !d.is_multiple_of(2))
        {
            return bad(
                "axes_dim_rope",
                format!("{:?} must be three even widths adding up to the head width {head}", c.axes_dim_rope),
            );
        }
        if c.axes_lens.len() != 3 {
            return bad("axes_lens", "needs three axes".into());
        }
        if c.ffn_dim_multiplier.is_some_and(|m| !(m > 0.0 && m < 64.0)) {
            return bad("ffn_dim_multiplier", "must be positive (and below 64)".into());
        }
        Ok(c)
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    pub fn out_channels(&self) -> usize {
        self.out_channels.unwrap_or(self.in_channels)
    }

    /// `min(hidden_size, 1024)`: the width of `temb`.
    pub fn temb_dim(&self) -> usize {
        self.hidden_size.min(1024)
    }

    /// `LuminaFeedForward`'s inner width.
    pub fn ffn_dim(&self) -> usize {
        let mut inner = 4 * self.hidden_size;
        if let Some(m) = self.ffn_dim_multiplier {
            inner = (m * inner as f64) as usize;
        }
        self.multiple_of * inner.div_ceil(self.multiple_of)
    }

    /// A randomly initialised (lazily materialised) transformer.
    pub fn init(&self, device: &Device) -> Lumina2Transformer2DModel {
        let block = |modulation| Lumina2TransformerBlock::init(self, modulation, device);
        let p2c = self.patch_size * self.patch_size;
        Lumina2Transformer2DModel {
            x_embedder: LinearConfig::new(p2c * self.in_channels, self.hidden_size).init(device),
            timestep_embedder: TimestepEmbedding::init(TIME_CHANNELS, self.temb_dim(), device),
            caption_norm: RmsNormW::init(self.cap_feat_dim, self.norm_eps, device),
            caption_linear: LinearConfig::new(self.cap_feat_dim, self.hidden_size).init(device),
            noise_refiner: (0..self.num_refiner_layers).map(|_| block(true)).collect(),
            context_refiner: (0..self.num_refiner_layers).map(|_| block(false)).collect(),
            layers: (0..self.num_layers).map(|_| block(true)).collect(),
            norm_out_linear_1: LinearConfig::new(self.temb_dim(), self.hidden_size).init(device),
            norm_out_linear_2: LinearConfig::new(self.hidden_size, p2c * self.out_channels()).init(device),
            config: self.clone(),
        }
    }

    /// Builds the transformer of `json` and loads its checkpoint.
    pub fn load(json: &str, vars: Vars) -> Result<Lumina2Transformer2DModel, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// diffusers' `RMSNorm(dim, eps, elementwise_affine=True)`: `x / √(mean(x²) + ε) · weight`.
#[derive(Module, Debug)]
pub struct RmsNormW {
    pub weight: Param<Tensor<1>>,
    #[module(skip)]
    pub eps: f64,
}

impl RmsNormW {
    fn init(dim: usize, eps: f64, device: &Device) -> Self {
        Self { weight: Param::from_tensor(Tensor::ones([dim], device)), eps }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.weight = vars.param("weight", &self.weight)?;
        Ok(())
    }

    fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let rms = x.clone().powi_scalar(2).mean_dim(D - 1).add_scalar(self.eps).sqrt().recip();
        x * rms * self.weight.val().unsqueeze::<D>()
    }
}

/// `Lumina2TransformerBlock`: attention and feed-forward with (or without) modulation.
#[derive(Module, Debug)]
pub struct Lumina2TransformerBlock {
    pub to_q: Linear,
    pub to_k: Linear,
    pub to_v: Linear,
    pub to_out: Linear,
    pub norm_q: RmsNormW,
    pub norm_k: RmsNormW,
    pub linear_1: Linear,
    pub linear_2: Linear,
    pub linear_3: Linear,
    /// `norm1.linear` of `LuminaRMSNormZero` (`None`: no modulation).
    pub modulation: Option<Linear>,
    /// `norm1.norm` (with modulation) or `norm1`.
    pub norm1: RmsNormW,
    pub norm2: RmsNormW,
    pub ffn_norm1: RmsNormW,
    pub ffn_norm2: RmsNormW,
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub kv_heads: usize,
}

impl Lumina2TransformerBlock {
    fn init(c: &Lumina2TransformerConfig, modulation: bool, device: &Device) -> Self {
        let (dim, hd) = (c.hidden_size, c.head_dim());
        let plain = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        let norm = || RmsNormW::init(dim, c.norm_eps, device);
        Self {
            to_q: plain(dim, c.num_attention_heads * hd),
            to_k: plain(dim, c.num_kv_heads * hd),
            to_v: plain(dim, c.num_kv_heads * hd),
            to_out: plain(c.num_attention_heads * hd, dim),
            norm_q: RmsNormW::init(hd, QK_EPS, device),
            norm_k: RmsNormW::init(hd, QK_EPS, device),
            linear_1: plain(dim, c.ffn_dim()),
            linear_2: plain(c.ffn_dim(), dim),
            linear_3: plain(dim, c.ffn_dim()),
            modulation: modulation.then(|| LinearConfig::new(c.temb_dim(), 4 * dim).init(device)),
            norm1: norm(),
            norm2: norm(),
            ffn_norm1: norm(),
            ffn_norm2: norm(),
            heads: c.num_attention_heads,
            kv_heads: c.num_kv_heads,
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let attn = vars.pp("attn");
        load_linear(&mut self.to_q, attn.pp("to_q"))?;
        load_linear(&mut self.to_k, attn.pp("to_k"))?;
        load_linear(&mut self.to_v, attn.pp("to_v"))?;
        load_linear(&mut self.to_out, attn.pp("to_out.0"))?;
        self.norm_q.load(attn.pp("norm_q"))?;
        self.norm_k.load(attn.pp("norm_k"))?;
        let ff = vars.pp("feed_forward");
        load_linear(&mut self.linear_1, ff.pp("linear_1"))?;
        load_linear(&mut self.linear_2, ff.pp("linear_2"))?;
        load_linear(&mut self.linear_3, ff.pp("linear_3"))?;
        match &mut self.modulation {
            Some(linear) => {
                load_linear(linear, vars.pp("norm1.linear"))?;
                self.norm1.load(vars.pp("norm1.norm"))?;
            }
            None => self.norm1.load(vars.pp("norm1"))?,
        }
        self.norm2.load(vars.pp("norm2"))?;
        self.ffn_norm1.load(vars.pp("ffn_norm1"))?;
        self.ffn_norm2.load(vars.pp("ffn_norm2"))
    }

    /// `Lumina2AttnProcessor2_0` of self-attention; `mask` `[batch, heads, len, len]` is true
    /// where a key is masked.
    fn attention(&self, x: Tensor<3>, rope: &Rope, mask: Option<Tensor<4, Bool>>) -> Tensor<3> {
        let [batch, len, _] = x.dims();
        let hd = self.norm_q.weight.dims()[0];
        let heads = |t: Tensor<3>, n: usize| t.reshape([batch, len, n, hd]);
        let q = self.norm_q.forward(heads(self.to_q.forward(x.clone()), self.heads)).swap_dims(1, 2);
        let k = self.norm_k.forward(heads(self.to_k.forward(x.clone()), self.kv_heads)).swap_dims(1, 2);
        let v = heads(self.to_v.forward(x), self.kv_heads).swap_dims(1, 2);
        let (q, k) = (rope.apply(q), rope.apply(k));
        let rep = self.heads / self.kv_heads;
        let repeat = |t: Tensor<4>| {
            let kv = self.kv_heads;
            t.unsqueeze_dim::<5>(2).expand([batch, kv, rep, len, hd]).reshape([batch, kv * rep, len, hd])
        };
        let (k, v) = (repeat(k), repeat(v));
        let options =
            AttentionModuleOptions { scale: Some((hd as f64).powf(-0.5)), softcap: None, is_causal: false };
        let out = attention(q, k, v, mask, None, options);
        self.to_out.forward(out.swap_dims(1, 2).reshape([batch, len, self.heads * hd]))
    }

    fn feed_forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.linear_2.forward(silu(self.linear_1.forward(x.clone())) * self.linear_3.forward(x))
    }

    fn forward(
        &self,
        x: Tensor<3>,
        mask: Option<Tensor<4, Bool>>,
        rope: &Rope,
        temb: &Tensor<2>,
    ) -> Tensor<3> {
        match &self.modulation {
            Some(linear) => {
                let emb = linear.forward(silu(temb.clone()));
                let mut parts = emb.chunk(4, 1).into_iter().map(|c| c.unsqueeze_dim::<3>(1));
                let mut next = || parts.next().expect("four modulation vectors");
                let (scale_msa, gate_msa, scale_mlp, gate_mlp) = (next(), next(), next(), next());
                let normed = self.norm1.forward(x.clone()) * (scale_msa + 1.0);
                let attn = self.attention(normed, rope, mask);
                let x = x + gate_msa.tanh() * self.norm2.forward(attn);
                let mlp = self.feed_forward(self.ffn_norm1.forward(x.clone()) * (scale_mlp + 1.0));
                x + gate_mlp.tanh() * self.ffn_norm2.forward(mlp)
            }
            None => {
                let attn = self.attention(self.norm1.forward(x.clone()), rope, mask);
                let x = x + self.norm2.forward(attn);
                let mlp = self.feed_forward(self.ffn_norm1.forward(x.clone()));
                x + self.ffn_norm2.forward(mlp)
            }
        }
    }
}

/// diffusers' `Lumina2Transformer2DModel`.
#[derive(Module, Debug)]
pub struct Lumina2Transformer2DModel {
    pub x_embedder: Linear,
    /// `time_caption_embed.timestep_embedder`.
    pub timestep_embedder: TimestepEmbedding,
    /// `time_caption_embed.caption_embedder.0`.
    pub caption_norm: RmsNormW,
    /// `time_caption_embed.caption_embedder.1`.
    pub caption_linear: Linear,
    pub noise_refiner: Vec<Lumina2TransformerBlock>,
    pub context_refiner: Vec<Lumina2TransformerBlock>,
    pub layers: Vec<Lumina2TransformerBlock>,
    pub norm_out_linear_1: Linear,
    pub norm_out_linear_2: Linear,
    #[module(skip)]
    pub config: Lumina2TransformerConfig,
}

/// The `(cos, sin)` pair values of position `(a, b, c)` over the three axes, each frequency
/// repeated for the two elements of its pair: `head_dim` values each.
fn rope_row(axes: &[usize], pos: [usize; 3], cos: &mut Vec<f32>, sin: &mut Vec<f32>) {
    for (axis, &d) in axes.iter().enumerate() {
        for j in 0..d / 2 {
            let freq = 1.0 / ROPE_THETA.powf((2 * j) as f64 / d as f64);
            let angle = pos[axis] as f64 * freq;
            let (s, c) = angle.sin_cos();
            cos.extend([c as f32; 2]);
            sin.extend([s as f32; 2]);
        }
    }
}

/// Positions of one sequence: `Some(position)` or `None` for no rotation at all (zero).
type Positions = Vec<Option<[usize; 3]>>;

fn rope_of(axes: &[usize], rows: &[Positions], device: &Device) -> Rope {
    let hd: usize = axes.iter().sum();
    let len = rows.first().map_or(0, Vec::len);
    let (mut cos, mut sin) = (Vec::new(), Vec::new());
    for row in rows {
        for p in row {
            match p {
                Some(p) => rope_row(axes, *p, &mut cos, &mut sin),
                None => {
                    cos.extend(std::iter::repeat_n(0.0, hd));
                    sin.extend(std::iter::repeat_n(0.0, hd));
                }
            }
        }
    }
    let t =
        |v| Tensor::<3>::from_data(TensorData::new(v, [rows.len(), len, hd]), device).unsqueeze_dim::<4>(1);
    Rope { cos: t(cos), sin: t(sin) }
}

/// The key mask `[batch, heads, len, len]` (true: masked) of rows keeping their first `keep[b]`
/// positions.
fn key_mask(keep: &[usize], len: usize, heads: usize, device: &Device) -> Tensor<4, Bool> {
    let values: Vec<bool> = keep.iter().flat_map(|&n| (0..len).map(move |j| j >= n)).collect();
    Tensor::<2, Bool>::from_data(TensorData::new(values, [keep.len(), len]), device)
        .reshape([keep.len(), 1, 1, len])
        .expand([keep.len(), heads, len, len])
}

impl Lumina2Transformer2DModel {
    /// Loads a `Lumina2Transformer2DModel` state dict.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.x_embedder, vars.pp("x_embedder"))?;
        let tc = vars.pp("time_caption_embed");
        self.timestep_embedder.load(tc.pp("timestep_embedder"))?;
        self.caption_norm.load(tc.pp("caption_embedder.0"))?;
        load_linear(&mut self.caption_linear, tc.pp("caption_embedder.1"))?;
        for (name, blocks) in [
            ("noise_refiner", &mut self.noise_refiner),
            ("context_refiner", &mut self.context_refiner),
            ("layers", &mut self.layers),
        ] {
            for (i, block) in blocks.iter_mut().enumerate() {
                block.load(vars.pp(name).pp(i))?;
            }
        }
        load_linear(&mut self.norm_out_linear_1, vars.pp("norm_out.linear_1"))?;
        load_linear(&mut self.norm_out_linear_2, vars.pp("norm_out.linear_2"))
    }

    /// The prediction `[batch, out_channels, h, w]` for latents `x` `[batch, in_channels, h, w]`
    /// (`h`, `w` multiples of the patch size), one timestep per row, captions `[batch, len,
    /// cap_feat_dim]` whose row `b` keeps its first `caption_lengths[b]` tokens.
    pub fn forward(
        &self,
        x: Tensor<4>,
        timesteps: &[f32],
        caption: Tensor<3>,
        caption_lengths: &[usize],
    ) -> Tensor<4> {
        let c = &self.config;
        let device = x.device();
        let [batch, channels, height, width] = x.dims();
        let p = c.patch_size;
        let (ph, pw) = (height / p, width / p);
        let image_len = ph * pw;
        let cap_len = caption.dims()[1];
        let axes = &c.axes_dim_rope;

        let sinusoids: Vec<f32> =
            timesteps.iter().flat_map(|&t| timestep_embedding(t, TIME_CHANNELS, true, 0.0)).collect();
        let temb = self
            .timestep_embedder
            .forward(Tensor::<2>::from_data(TensorData::new(sinusoids, [batch, TIME_CHANNELS]), &device));
        let caption = self.caption_linear.forward(self.caption_norm.forward(caption));

        // Positions: caption i at (i, 0, 0), padding unrotated; image (n, r, c).
        let image_positions = |n: usize| -> Positions {
            (0..ph).flat_map(|r| (0..pw).map(move |col| Some([n, r, col]))).collect()
        };
        let cap_rows: Vec<Positions> = caption_lengths
            .iter()
            .map(|&n| (0..cap_len).map(|i| (i < n).then_some([i, 0, 0])).collect())
            .collect();
        let img_rows: Vec<Positions> = caption_lengths.iter().map(|&n| image_positions(n)).collect();
        let seq_lengths: Vec<usize> = caption_lengths.iter().map(|&n| n + image_len).collect();
        let max_len = seq_lengths.iter().copied().max().unwrap_or(0);
        let joint_rows: Vec<Positions> = caption_lengths
            .iter()
            .map(|&n| {
                let mut row: Positions = (0..n).map(|i| Some([i, 0, 0])).collect();
                row.extend(image_positions(n));
                row.resize(max_len, Some([0, 0, 0]));
                row
            })
            .collect();

        // Patchify: [b, c, ph, p, pw, p] → [b, ph, pw, p, p, c] → [b, ph·pw, p·p·c].
        let patches = x.reshape([batch, channels, ph, p, pw, p]).permute([0, 2, 4, 3, 5, 1]).reshape([
            batch,
            image_len,
            p * p * channels,
        ]);
        let mut image = self.x_embedder.forward(patches);

        let mut caption = caption;
        let cap_rope = rope_of(axes, &cap_rows, &device);
        let cap_mask = key_mask(caption_lengths, cap_len, c.num_attention_heads, &device);
        for block in &self.context_refiner {
            caption = block.forward(caption, Some(cap_mask.clone()), &cap_rope, &temb);
        }
        let img_rope = rope_of(axes, &img_rows, &device);
        for block in &self.noise_refiner {
            image = block.forward(image, None, &img_rope, &temb);
        }

        let dim = c.hidden_size;
        let rows: Vec<Tensor<3>> = (0..batch)
            .map(|b| {
                let n = caption_lengths[b];
                let mut parts = Vec::new();
                if n > 0 {
                    parts.push(caption.clone().slice([b..b + 1, 0..n, 0..dim]));
                }
                parts.push(image.clone().slice([b..b + 1, 0..image_len, 0..dim]));
                if max_len > n + image_len {
                    parts.push(Tensor::zeros([1, max_len - n - image_len, dim], &device));
                }
                Tensor::cat(parts, 1)
            })
            .collect();
        let mut h = Tensor::cat(rows, 0);
        let use_mask = seq_lengths.iter().any(|&l| l != seq_lengths[0]);
        let mask = use_mask.then(|| key_mask(&seq_lengths, max_len, c.num_attention_heads, &device));
        let rope = rope_of(axes, &joint_rows, &device);
        for block in &self.layers {
            h = block.forward(h, mask.clone(), &rope, &temb);
        }

        let scale = self.norm_out_linear_1.forward(silu(temb)).unsqueeze_dim::<3>(1);
        let h = self.norm_out_linear_2.forward(layer_norm(h) * (scale + 1.0));
        let out_c = c.out_channels();
        let width_out = p * p * out_c;
        let images: Vec<Tensor<4>> = (0..batch)
            .map(|b| {
                let n = caption_lengths[b];
                h.clone()
                    .slice([b..b + 1, n..n + image_len, 0..width_out])
                    .reshape([1, ph, pw, p, p, out_c])
                    .permute([0, 5, 1, 3, 2, 4])
                    .reshape([1, out_c, height, width])
            })
            .collect();
        Tensor::cat(images, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_lumina_image_2_0_config_reads_to_the_preset() {
        // Alpha-VLLM/Lumina-Image-2.0's transformer/config.json.
        let json = r#"{"_class_name": "Lumina2Transformer2DModel", "_diffusers_version": "0.33.0.dev0",
            "axes_dim_rope": [32, 32, 32], "axes_lens": [300, 512, 512], "cap_feat_dim": 2304,
            "ffn_dim_multiplier": null, "hidden_size": 2304, "in_channels": 16, "multiple_of": 256,
            "norm_eps": 1e-05, "num_attention_heads": 24, "num_kv_heads": 8, "num_layers": 26,
            "num_refiner_layers": 2, "out_channels": null, "patch_size": 2, "sample_size": 128,
            "scaling_factor": 1.0}"#;
        let c = Lumina2TransformerConfig::from_json(json).unwrap();
        assert_eq!(c, Lumina2TransformerConfig::lumina_image_2_0());
        // 4 × 2304 rounded up to a multiple of 256; the head width 96 = 32 + 32 + 32.
        assert_eq!((c.ffn_dim(), c.head_dim(), c.temb_dim()), (9216, 96, 1024));
        let with = |m: f64| Lumina2TransformerConfig { ffn_dim_multiplier: Some(m), ..c.clone() }.ffn_dim();
        assert_eq!(with(1.3), 12032, "int(1.3 · 9216) = 11980, rounded up to 256");
        for (json, key) in [
            (r#"{"num_kv_heads": 5}"#, "`num_kv_heads`"),
            (r#"{"axes_dim_rope": [32, 32, 30]}"#, "`axes_dim_rope`"),
            (r#"{"hidden_size": 100}"#, "`num_attention_heads`"),
        ] {
            let e = Lumina2TransformerConfig::from_json(json).unwrap_err().to_string();
            assert!(e.contains(key), "{json}: {e}");
        }
    }
}
