//! diffusers' `Kandinsky3UNet` (Kandinsky 3's BigGAN-deep-style UNet), forward pass as
//! diffusers 0.42 computes it.
//!
//! - **Time**: `Timesteps(C₀/2, flip_sin_to_cos=False, downscale_freq_shift=1)` of the integer
//!   timestep, then `TimestepEmbedding` (`linear_2(silu(linear_1(·)))`) to `time_embedding_dim`.
//! - **Text**: `encoder_hid_proj` = `LayerNorm(Linear_no_bias(states))` to
//!   `cross_attention_dim`. The 0/1 `encoder_attention_mask` becomes the additive bias
//!   `(1 − mask) · −10000` on the keys (not −∞: a row whose mask is all zeros, the
//!   unconditional row of a guided call without negative prompt, attends to all its keys).
//! - **Pooling** (`Kandinsky3AttentionPooling`): the time embedding plus an attention whose
//!   query is the mean of the projected text tokens over *all* positions (padding included,
//!   as `context.mean(dim=1)`), keys and values the tokens, with the mask bias.
//! - **Blocks**: `Kandinsky3ConditionalGroupNorm` is `GroupNorm(groups, C, affine=False)(x) ·
//!   (1 + scale) + shift` with `(scale, shift)` = `Linear(silu(time))` split in two;
//!   `Kandinsky3Block` = norm, SiLU, optional 2×2 stride-2 transposed convolution (up),
//!   `k×k` convolution (padding `k > 1`), optional 2×2 stride-2 convolution (down);
//!   `Kandinsky3ResNetBlock` = four blocks of kernels 1, 3, 3, 1 through
//!   `max(in, out) / 2` channels, plus a shortcut (transposed convolution, 1×1 projection,
//!   strided convolution, each where the main path changes size or width);
//!   `Kandinsky3AttentionBlock` = `x + attn(in_norm(x), context)`, then
//!   `x + ff(out_norm(x))` (`ff`: 1×1 conv ×4 channels, SiLU, 1×1 conv, no biases), its
//!   `Attention` bias-free with `C / attention_head_dim` heads of `attention_head_dim`.
//! - **Levels**: `len(block_out_channels)` ≤ 4 levels from `C₀/2 = block_out_channels[0] / 2`
//!   channels. diffusers' fixed tuples `add_cross_attention = add_self_attention =
//!   (False, True, True, True)` are zipped with the levels going down, and *reversed as
//!   4-tuples* going up: the up path of an `n`-level UNet reads entries `4 − 1 … 4 − n` (so a
//!   two-level UNet has attention at both up levels), reproduced here.
//!   Down level `i`: self-attention (input width), then `layers_per_block` × (resnet_in,
//!   cross-attention, resnet_out), the last resnet_out halving the size (all but the last
//!   level). Up level `i`: the skip of the mirrored down level concatenated first (all but the
//!   first), then `layers_per_block` × (resnet_in — the first doubling the size, all but the
//!   first level —, cross-attention, resnet_out), then self-attention (output width).
//!   diffusers zips the up resnets' channel plan with `layers_per_block` entries, so its
//!   `layers_per_block = 1` builds an up block that never reaches its output width and fails;
//!   it is refused here.
//!
//! [`Kandinsky3UNetConfig`] mirrors `unet/config.json` over the class defaults (Kandinsky 3's
//! own UNet).

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig, ConvTranspose2d, ConvTranspose2dConfig};
use burn::nn::{
    GroupNorm, GroupNormConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig, PaddingConfig2d,
};
use burn::tensor::activation::silu;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::unet::{TimestepEmbedding, timestep_embedding};
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::weights::{Vars, WeightError, load_conv2d, load_layer_norm, load_linear};

/// `unet/config.json` of a `Kandinsky3UNet`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Kandinsky3UNetConfig {
    pub in_channels: usize,
    pub time_embedding_dim: usize,
    pub groups: usize,
    pub attention_head_dim: usize,
    pub layers_per_block: usize,
    pub block_out_channels: Vec<usize>,
    pub cross_attention_dim: usize,
    pub encoder_hid_dim: usize,
}

/// diffusers' fixed `add_cross_attention` / `add_self_attention` of every level.
const ATTENTION_LEVELS: [bool; 4] = [false, true, true, true];

impl Kandinsky3UNetConfig {
    /// diffusers' `Kandinsky3UNet` class defaults (Kandinsky 3's widths).
    pub fn kandinsky_3() -> Self {
        Self {
            in_channels: 4,
            time_embedding_dim: 1536,
            groups: 32,
            attention_head_dim: 64,
            layers_per_block: 3,
            block_out_channels: vec![384, 768, 1536, 3072],
            cross_attention_dim: 4096,
            encoder_hid_dim: 4096,
        }
    }

    /// Reads `config.json` over [`Self::kandinsky_3`] and checks every width the UNet builds,
    /// naming the key.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::kandinsky_3(), &[])?;
        c.check()?;
        Ok(c)
    }

    fn check(&self) -> Result<(), ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let levels = self.block_out_channels.len();
        if levels == 0 || levels > ATTENTION_LEVELS.len() {
            return bad("block_out_channels", format!("{levels} levels (diffusers builds 1 to 4)"));
        }
        if self.layers_per_block < 2 {
            return bad(
                "layers_per_block",
                format!(
                    "{} is below 2, with which diffusers' up blocks never reach their output width",
                    self.layers_per_block
                ),
            );
        }
        config::check_layers(
            "layers_per_block",
            levels.saturating_mul(self.layers_per_block).saturating_mul(8),
        )?;
        if self.groups == 0
            || self.attention_head_dim == 0
            || self.in_channels == 0
            || self.time_embedding_dim == 0
        {
            return bad(
                "groups",
                "groups, attention_head_dim, in_channels and time_embedding_dim must be positive".into(),
            );
        }
        let init = self.block_out_channels[0] / 2;
        if init < 4 {
            // Timesteps(init, downscale_freq_shift=1) divides by init / 2 − 1.
            return bad(
                "block_out_channels",
                format!(
                    "{} is below 8: the time projection's frequencies divide by zero",
                    self.block_out_channels[0]
                ),
            );
        }
        let dims = self.level_dims();
        let mut widths = vec![init];
        let mut heads = vec![self.time_embedding_dim];
        for (i, &(c_in, c_out)) in dims.iter().enumerate() {
            // The down resnets' widths and hidden widths, and the up path's concatenation.
            widths.extend([c_in, c_out, c_in.max(c_out) / 2, c_out / 2]);
            if i + 1 < levels {
                widths.push(2 * c_out);
            }
            if ATTENTION_LEVELS[i] {
                heads.extend([c_in, c_out]);
            }
            // Up level `levels − 1 − i` mirrors down level `i`.
            if ATTENTION_LEVELS[ATTENTION_LEVELS.len() - levels + i] {
                heads.extend([c_in, c_out, 2 * c_out]);
            }
        }
        if let Some(w) = widths.iter().find(|&&w| w == 0 || !w.is_multiple_of(self.groups)) {
            return bad("groups", format!("{w} channels do not split into {} groups", self.groups));
        }
        if let Some(w) = heads.iter().find(|&&w| !w.is_multiple_of(self.attention_head_dim)) {
            return bad(
                "attention_head_dim",
                format!("{w} channels are not a whole number of {}-wide heads", self.attention_head_dim),
            );
        }
        Ok(())
    }

    /// `(in, out)` channels of each level, `[C₀/2] + block_out_channels` pairwise.
    fn level_dims(&self) -> Vec<(usize, usize)> {
        let mut dims = vec![self.block_out_channels[0] / 2];
        dims.extend(&self.block_out_channels);
        dims.windows(2).map(|w| (w[0], w[1])).collect()
    }

    /// A randomly initialised (lazily materialised) UNet.
    pub fn init(&self, device: &Device) -> Result<Kandinsky3UNet, ModelError> {
        self.check()?;
        let g = self.groups;
        let te = self.time_embedding_dim;
        let hd = self.attention_head_dim;
        let ctx = self.cross_attention_dim;
        let n = self.layers_per_block;
        let init = self.block_out_channels[0] / 2;
        let dims = self.level_dims();
        let levels = dims.len();
        let resnet = |c_in, c_out, up: Resample| ResNetBlock::init(c_in, c_out, te, g, up, device);
        let attn = |c, context: Option<usize>| AttentionBlock::init(c, te, context, g, hd, device);
        let mut down_blocks = Vec::new();
        for (level, &(c_in, c_out)) in dims.iter().enumerate() {
            let with_attention = ATTENTION_LEVELS[level];
            let down = level + 1 < levels;
            down_blocks.push(LevelBlock {
                self_attention: with_attention.then(|| attn(c_in, None)),
                resnets_in: (0..n)
                    .map(|j| resnet(if j == 0 { c_in } else { c_out }, c_out, Resample::None))
                    .collect(),
                cross_attentions: if with_attention {
                    (0..n).map(|_| attn(c_out, Some(ctx))).collect()
                } else {
                    Vec::new()
                },
                resnets_out: (0..n)
                    .map(|j| {
                        resnet(c_out, c_out, if down && j + 1 == n { Resample::Down } else { Resample::None })
                    })
                    .collect(),
            });
        }
        let mut up_blocks = Vec::new();
        for (level, &(c_out, c_in)) in dims.iter().rev().enumerate() {
            let with_attention = ATTENTION_LEVELS[ATTENTION_LEVELS.len() - 1 - level];
            let cat = if level == 0 { 0 } else { c_in };
            let pairs: Vec<(usize, usize)> = std::iter::once((c_in + cat, c_in))
                .chain(std::iter::repeat_n((c_in, c_in), n.saturating_sub(2)))
                .chain(std::iter::once((c_in, c_out)))
                .take(n)
                .collect();
            up_blocks.push(LevelBlock {
                self_attention: with_attention.then(|| attn(c_out, None)),
                resnets_in: pairs
                    .iter()
                    .enumerate()
                    .map(|(j, &(i, _))| {
                        resnet(i, i, if level != 0 && j == 0 { Resample::Up } else { Resample::None })
                    })
                    .collect(),
                cross_attentions: if with_attention {
                    pairs.iter().map(|&(i, _)| attn(i, Some(ctx))).collect()
                } else {
                    Vec::new()
                },
                resnets_out: pairs.iter().map(|&(i, o)| resnet(i, o, Resample::None)).collect(),
            });
        }
        Ok(Kandinsky3UNet {
            time_embedding: TimestepEmbedding::init(init, te, device),
            add_time_condition: KAttention::init(ctx, ctx, te, hd, device),
            conv_in: conv(self.in_channels, init, 3, 1, true, device),
            projection_linear: LinearConfig::new(self.encoder_hid_dim, ctx).with_bias(false).init(device),
            projection_norm: LayerNormConfig::new(ctx).init(device),
            down_blocks,
            up_blocks,
            conv_norm_out: GroupNormConfig::new(g, init).init(device),
            conv_out: conv(init, self.in_channels, 3, 1, true, device),
            config: self.clone(),
        })
    }

    /// Builds the UNet of `json` and loads its checkpoint.
    pub fn load(json: &str, vars: Vars) -> Result<Kandinsky3UNet, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device())?;
        model.load(vars)?;
        Ok(model)
    }
}

/// `nn.Conv2d(c_in, c_out, kernel, stride, padding)` (padding `kernel > 1` when `stride` is 1,
/// none for the strided 2×2 downsampling).
fn conv(c_in: usize, c_out: usize, kernel: usize, stride: usize, bias: bool, device: &Device) -> Conv2d {
    let pad = usize::from(kernel > 1 && stride == 1);
    Conv2dConfig::new([c_in, c_out], [kernel; 2])
        .with_stride([stride; 2])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
        .with_bias(bias)
        .init(device)
}

/// `nn.ConvTranspose2d(c, c, kernel_size=2, stride=2)`.
fn conv_up(c: usize, device: &Device) -> ConvTranspose2d {
    ConvTranspose2dConfig::new([c, c], [2, 2]).with_stride([2, 2]).init(device)
}

fn load_conv_up(conv: &mut ConvTranspose2d, vars: Vars) -> Result<(), WeightError> {
    conv.weight = vars.param("weight", &conv.weight)?;
    if let Some(bias) = &conv.bias {
        conv.bias = Some(vars.param("bias", bias)?);
    }
    Ok(())
}

/// Where a block changes the size: `up_resolution` `True` (up), `False` (down), `None`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resample {
    None,
    Up,
    Down,
}

/// `Kandinsky3ConditionalGroupNorm`.
#[derive(Module, Debug)]
pub struct ConditionalGroupNorm {
    pub norm: GroupNorm,
    /// `context_mlp.1`: `time → 2C`.
    pub context_mlp: Linear,
}

impl ConditionalGroupNorm {
    fn init(groups: usize, channels: usize, context: usize, device: &Device) -> Self {
        Self {
            norm: GroupNormConfig::new(groups, channels).with_affine(false).init(device),
            context_mlp: LinearConfig::new(context, 2 * channels).init(device),
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.context_mlp, vars.pp("context_mlp.1"))
    }

    fn forward(&self, x: Tensor<4>, time: &Tensor<2>) -> Tensor<4> {
        let context = self.context_mlp.forward(silu(time.clone()));
        let [b, c2] = context.dims();
        let mut halves = context.reshape([b, c2, 1, 1]).chunk(2, 1);
        let shift = halves.pop().expect("two halves");
        let scale = halves.pop().expect("two halves");
        self.norm.forward(x) * (scale + 1.0) + shift
    }
}

/// `Kandinsky3Block`.
#[derive(Module, Debug)]
pub struct Block {
    pub group_norm: ConditionalGroupNorm,
    pub up_sample: Option<ConvTranspose2d>,
    pub projection: Conv2d,
    pub down_sample: Option<Conv2d>,
}

impl Block {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.group_norm.load(vars.pp("group_norm"))?;
        if let Some(up) = &mut self.up_sample {
            load_conv_up(up, vars.pp("up_sample"))?;
        }
        load_conv2d(&mut self.projection, vars.pp("projection"))?;
        if let Some(down) = &mut self.down_sample {
            load_conv2d(down, vars.pp("down_sample"))?;
        }
        Ok(())
    }

    fn forward(&self, x: Tensor<4>, time: &Tensor<2>) -> Tensor<4> {
        let mut x = silu(self.group_norm.forward(x, time));
        if let Some(up) = &self.up_sample {
            x = up.forward(x);
        }
        x = self.projection.forward(x);
        match &self.down_sample {
            Some(down) => down.forward(x),
            None => x,
        }
    }
}

/// `Kandinsky3ResNetBlock`.
#[derive(Module, Debug)]
pub struct ResNetBlock {
    pub resnet_blocks: Vec<Block>,
    pub shortcut_up_sample: Option<ConvTranspose2d>,
    pub shortcut_projection: Option<Conv2d>,
    pub shortcut_down_sample: Option<Conv2d>,
}

impl ResNetBlock {
    /// `resample`: the size change of the second (up) or third (down) block, diffusers'
    /// `up_resolutions` `[None, True, None, None]` / `[None, None, False, None]`.
    fn init(
        c_in: usize,
        c_out: usize,
        time: usize,
        groups: usize,
        resample: Resample,
        device: &Device,
    ) -> Self {
        let hidden = c_in.max(c_out) / 2;
        let plan = [(c_in, hidden, 1), (hidden, hidden, 3), (hidden, hidden, 3), (hidden, c_out, 1)];
        let resnet_blocks = plan
            .iter()
            .enumerate()
            .map(|(k, &(i, o, kernel))| Block {
                group_norm: ConditionalGroupNorm::init(groups, i, time, device),
                up_sample: (resample == Resample::Up && k == 1).then(|| conv_up(i, device)),
                projection: conv(i, o, kernel, 1, true, device),
                down_sample: (resample == Resample::Down && k == 2).then(|| conv(o, o, 2, 2, true, device)),
            })
            .collect();
        Self {
            resnet_blocks,
            shortcut_up_sample: (resample == Resample::Up).then(|| conv_up(c_in, device)),
            shortcut_projection: (c_in != c_out).then(|| conv(c_in, c_out, 1, 1, true, device)),
            shortcut_down_sample: (resample == Resample::Down)
                .then(|| conv(c_out, c_out, 2, 2, true, device)),
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        for (k, block) in self.resnet_blocks.iter_mut().enumerate() {
            block.load(vars.pp("resnet_blocks").pp(k))?;
        }
        if let Some(c) = &mut self.shortcut_up_sample {
            load_conv_up(c, vars.pp("shortcut_up_sample"))?;
        }
        if let Some(c) = &mut self.shortcut_projection {
            load_conv2d(c, vars.pp("shortcut_projection"))?;
        }
        if let Some(c) = &mut self.shortcut_down_sample {
            load_conv2d(c, vars.pp("shortcut_down_sample"))?;
        }
        Ok(())
    }

    fn forward(&self, x: Tensor<4>, time: &Tensor<2>) -> Tensor<4> {
        let mut out = x.clone();
        for block in &self.resnet_blocks {
            out = block.forward(out, time);
        }
        let mut x = x;
        if let Some(c) = &self.shortcut_up_sample {
            x = c.forward(x);
        }
        if let Some(c) = &self.shortcut_projection {
            x = c.forward(x);
        }
        if let Some(c) = &self.shortcut_down_sample {
            x = c.forward(x);
        }
        x + out
    }
}

/// diffusers' `Attention(query_dim, context_dim, dim_head, out_dim, out_bias=False)` as the
/// Kandinsky 3 blocks build it: bias-free `to_q`, `to_k`, `to_v`, `to_out.0`, `out_dim /
/// dim_head` heads, `softmax(q kᵀ / √d + bias) v` with an optional additive key bias.
#[derive(Module, Debug)]
pub struct KAttention {
    pub to_q: Linear,
    pub to_k: Linear,
    pub to_v: Linear,
    pub to_out: Linear,
    #[module(skip)]
    pub heads: usize,
}

impl KAttention {
    fn init(query: usize, context: usize, out: usize, head_dim: usize, device: &Device) -> Self {
        let linear = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        Self {
            to_q: linear(query, out),
            to_k: linear(context, out),
            to_v: linear(context, out),
            to_out: linear(out, out),
            heads: out / head_dim,
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.to_q, vars.pp("to_q"))?;
        load_linear(&mut self.to_k, vars.pp("to_k"))?;
        load_linear(&mut self.to_v, vars.pp("to_v"))?;
        load_linear(&mut self.to_out, vars.pp("to_out.0"))
    }

    /// `x` `[batch, n, query]`, `context` `[batch, l, context]`, `bias` `[batch, l]` (the
    /// mask's `(1 − m) · −10000`).
    fn forward(&self, x: Tensor<3>, context: Tensor<3>, bias: Option<&Tensor<2>>) -> Tensor<3> {
        let [batch, n, _] = x.dims();
        let l = context.dims()[1];
        let q = self.to_q.forward(x);
        let inner = q.dims()[2];
        let d = inner / self.heads;
        let split = |t: Tensor<3>, len: usize| t.reshape([batch, len, self.heads, d]).swap_dims(1, 2);
        let q = split(q, n);
        let k = split(self.to_k.forward(context.clone()), l);
        let v = split(self.to_v.forward(context), l);
        let bias = bias.map(|b| b.clone().reshape([batch, 1, 1, l]).expand([batch, self.heads, n, l]));
        let options =
            AttentionModuleOptions { scale: Some((d as f64).powf(-0.5)), softcap: None, is_causal: false };
        let out = attention(q, k, v, None, bias, options);
        self.to_out.forward(out.swap_dims(1, 2).reshape([batch, n, inner]))
    }
}

/// `Kandinsky3AttentionBlock` (self-attention without `context_dim`, cross-attention with it).
#[derive(Module, Debug)]
pub struct AttentionBlock {
    pub in_norm: ConditionalGroupNorm,
    pub attention: KAttention,
    pub out_norm: ConditionalGroupNorm,
    /// `feed_forward.0` and `feed_forward.2`: 1×1 convolutions without bias.
    pub ff_in: Conv2d,
    pub ff_out: Conv2d,
}

impl AttentionBlock {
    fn init(
        c: usize,
        time: usize,
        context: Option<usize>,
        groups: usize,
        head_dim: usize,
        device: &Device,
    ) -> Self {
        Self {
            in_norm: ConditionalGroupNorm::init(groups, c, time, device),
            attention: KAttention::init(c, context.unwrap_or(c), c, head_dim, device),
            out_norm: ConditionalGroupNorm::init(groups, c, time, device),
            ff_in: conv(c, 4 * c, 1, 1, false, device),
            ff_out: conv(4 * c, c, 1, 1, false, device),
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.in_norm.load(vars.pp("in_norm"))?;
        self.attention.load(vars.pp("attention"))?;
        self.out_norm.load(vars.pp("out_norm"))?;
        load_conv2d(&mut self.ff_in, vars.pp("feed_forward.0"))?;
        load_conv2d(&mut self.ff_out, vars.pp("feed_forward.2"))
    }

    /// `context`: the projected text and its mask bias (cross-attention), or `None`.
    fn forward(
        &self,
        x: Tensor<4>,
        time: &Tensor<2>,
        context: Option<(&Tensor<3>, &Tensor<2>)>,
    ) -> Tensor<4> {
        let [b, c, h, w] = x.dims();
        let out = self.in_norm.forward(x.clone(), time).reshape([b, c, h * w]).swap_dims(1, 2);
        let out = match context {
            Some((context, bias)) => self.attention.forward(out, context.clone(), Some(bias)),
            None => self.attention.forward(out.clone(), out, None),
        };
        let x = x + out.swap_dims(1, 2).reshape([b, c, h, w]);
        let out = self.ff_out.forward(silu(self.ff_in.forward(self.out_norm.forward(x.clone(), time))));
        x + out
    }
}

/// `Kandinsky3DownSampleBlock` / `Kandinsky3UpSampleBlock`: the self-attention (`attentions.0`,
/// where the level has one), and per layer a resnet in, a cross-attention (`attentions.{j+1}`)
/// and a resnet out.
#[derive(Module, Debug)]
pub struct LevelBlock {
    pub self_attention: Option<AttentionBlock>,
    pub resnets_in: Vec<ResNetBlock>,
    pub cross_attentions: Vec<AttentionBlock>,
    pub resnets_out: Vec<ResNetBlock>,
}

impl LevelBlock {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        if let Some(a) = &mut self.self_attention {
            a.load(vars.pp("attentions.0"))?;
        }
        for (j, r) in self.resnets_in.iter_mut().enumerate() {
            r.load(vars.pp("resnets_in").pp(j))?;
        }
        for (j, a) in self.cross_attentions.iter_mut().enumerate() {
            a.load(vars.pp("attentions").pp(j + 1))?;
        }
        for (j, r) in self.resnets_out.iter_mut().enumerate() {
            r.load(vars.pp("resnets_out").pp(j))?;
        }
        Ok(())
    }

    fn layers(&self, mut x: Tensor<4>, time: &Tensor<2>, context: (&Tensor<3>, &Tensor<2>)) -> Tensor<4> {
        for (j, (resnet_in, resnet_out)) in self.resnets_in.iter().zip(&self.resnets_out).enumerate() {
            x = resnet_in.forward(x, time);
            if let Some(a) = self.cross_attentions.get(j) {
                x = a.forward(x, time, Some(context));
            }
            x = resnet_out.forward(x, time);
        }
        x
    }

    fn self_attend(&self, x: Tensor<4>, time: &Tensor<2>) -> Tensor<4> {
        match &self.self_attention {
            Some(a) => a.forward(x, time, None),
            None => x,
        }
    }
}

/// diffusers' `Kandinsky3UNet`.
#[derive(Module, Debug)]
pub struct Kandinsky3UNet {
    pub time_embedding: TimestepEmbedding,
    /// `add_time_condition.attention` (`Kandinsky3AttentionPooling`).
    pub add_time_condition: KAttention,
    pub conv_in: Conv2d,
    /// `encoder_hid_proj.projection_linear` / `projection_norm`.
    pub projection_linear: Linear,
    pub projection_norm: LayerNorm,
    pub down_blocks: Vec<LevelBlock>,
    pub up_blocks: Vec<LevelBlock>,
    pub conv_norm_out: GroupNorm,
    pub conv_out: Conv2d,
    #[module(skip)]
    pub config: Kandinsky3UNetConfig,
}

impl Kandinsky3UNet {
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.time_embedding.load(vars.pp("time_embedding"))?;
        self.add_time_condition.load(vars.pp("add_time_condition.attention"))?;
        load_conv2d(&mut self.conv_in, vars.pp("conv_in"))?;
        load_linear(&mut self.projection_linear, vars.pp("encoder_hid_proj.projection_linear"))?;
        load_layer_norm(&mut self.projection_norm, vars.pp("encoder_hid_proj.projection_norm"))?;
        for (i, b) in self.down_blocks.iter_mut().enumerate() {
            b.load(vars.pp("down_blocks").pp(i))?;
        }
        for (i, b) in self.up_blocks.iter_mut().enumerate() {
            b.load(vars.pp("up_blocks").pp(i))?;
        }
        let norm = vars.pp("conv_norm_out");
        if let Some(gamma) = &self.conv_norm_out.gamma {
            self.conv_norm_out.gamma = Some(norm.param("weight", gamma)?);
        }
        if let Some(beta) = &self.conv_norm_out.beta {
            self.conv_norm_out.beta = Some(norm.param("bias", beta)?);
        }
        load_conv2d(&mut self.conv_out, vars.pp("conv_out"))
    }

    /// The text width the UNet takes (`encoder_hid_dim`).
    pub fn encoder_hid_dim(&self) -> usize {
        self.config.encoder_hid_dim
    }

    /// The noise prediction for `sample` `[batch, in, h, w]` at timestep `t`, conditioned on
    /// `states` `[batch, l, encoder_hid_dim]` with the 0/1 `mask` `[batch, l]`.
    pub fn forward(&self, sample: Tensor<4>, t: f32, states: Tensor<3>, mask: Tensor<2>) -> Tensor<4> {
        let batch = sample.dims()[0];
        let device = sample.device();
        let bias = (mask.neg() + 1.0) * -10000.0;
        let init = self.config.block_out_channels[0] / 2;
        let emb = timestep_embedding(t, init, false, 1.0);
        let emb = Tensor::<2>::from_data(TensorData::new(emb, [1, init]), &device).expand([batch, init]);
        let time = self.time_embedding.forward(emb);
        let context = self.projection_norm.forward(self.projection_linear.forward(states));
        let pooled =
            self.add_time_condition.forward(context.clone().mean_dim(1), context.clone(), Some(&bias));
        let time = time + pooled.squeeze_dim::<2>(1);
        let text = (&context, &bias);

        let levels = self.down_blocks.len();
        let mut x = self.conv_in.forward(sample);
        let mut skips = Vec::new();
        for (level, block) in self.down_blocks.iter().enumerate() {
            x = block.self_attend(x, &time);
            x = block.layers(x, &time, text);
            if level + 1 < levels {
                skips.push(x.clone());
            }
        }
        for (level, block) in self.up_blocks.iter().enumerate() {
            if level != 0 {
                x = Tensor::cat(vec![x, skips.pop().expect("one skip per level")], 1);
            }
            x = block.layers(x, &time, text);
            x = block.self_attend(x, &time);
        }
        self.conv_out.forward(silu(self.conv_norm_out.forward(x)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_defaults_pass_the_checks() {
        Kandinsky3UNetConfig::kandinsky_3().check().unwrap();
    }

    #[test]
    fn attention_levels_follow_diffusers_reversed_tuples() {
        // Two levels: down level 0 has no attention, level 1 has; going up, diffusers reverses
        // the 4-tuples, so both up levels (entries 3 and 2) have attention.
        let c = Kandinsky3UNetConfig {
            block_out_channels: vec![8, 8],
            groups: 1,
            attention_head_dim: 4,
            time_embedding_dim: 8,
            cross_attention_dim: 8,
            encoder_hid_dim: 16,
            layers_per_block: 2,
            in_channels: 4,
        };
        let unet = c.init(&Device::flex()).unwrap();
        let has = |b: &LevelBlock| (b.self_attention.is_some(), b.cross_attentions.len());
        assert_eq!(unet.down_blocks.iter().map(has).collect::<Vec<_>>(), [(false, 0), (true, 2)]);
        assert_eq!(unet.up_blocks.iter().map(has).collect::<Vec<_>>(), [(true, 2), (true, 2)]);
        // The last down resnet of level 0 halves the size; the first up resnet of level 1 doubles it.
        assert!(unet.down_blocks[0].resnets_out[1].shortcut_down_sample.is_some());
        assert!(unet.down_blocks[1].resnets_out[1].shortcut_down_sample.is_none());
        assert!(unet.up_blocks[1].resnets_in[0].shortcut_up_sample.is_some());
        assert!(unet.up_blocks[0].resnets_in[0].shortcut_up_sample.is_none());
    }
}
