//! diffusers' `UNet2DConditionModel` as Stable Diffusion 1.x, 2.x and XL use it: sinusoidal time
//! embedding, `CrossAttnDownBlock2D` / `DownBlock2D` down path, `UNetMidBlock2DCrossAttn`,
//! `UpBlock2D` / `CrossAttnUpBlock2D` up path with skip connections, and `Transformer2DModel`
//! blocks (group norm, 1×1-convolution or linear `proj_in`/`proj_out`, self-attention,
//! cross-attention on the text embeddings, GEGLU feed-forward), `transformer_layers_per_block`
//! of them per block (SDXL's `[1, 2, 10]`; reversed on the way up, the last block's in the
//! middle).
//!
//! SDXL's micro-conditioning is `addition_embed_type: "text_time"` ([`TextTime`]): each of the
//! `time_ids` (original height and width, crop top and left, target height and width) gets its
//! own sinusoidal embedding of `addition_time_embed_dim` (with the time embedding's
//! `flip_sin_to_cos` and `freq_shift`), they are laid after the pooled text embedding
//! (`projection_class_embeddings_input_dim` wide in all), and `add_embedding` (a
//! `TimestepEmbedding`) of that vector is added to the time embedding.
//!
//! [`UNetConfig`] mirrors `unet/config.json` field by field with SD 1.5's values as the preset;
//! options outside SD 1.x/2.x/XL (class embeddings, other addition embeddings, other time
//! embeddings, …) are refused by [`UNetConfig::check`] naming the key. Note diffusers' naming quirk, reproduced
//! here: `attention_head_dim` is the number of heads per block when `num_attention_heads` is
//! unset (SD 2's `[5, 10, 20, 20]`), and each head is `channels / heads` wide.
//!
//! Attention runs through Burn's fused `attention` (`softmax(q kᵀ/√d) v`); `upcast_attention`
//! computes it in float32 in an f16 run (what every f32 run does anyway). [`AttentionSlice`] is
//! diffusers' `unet.set_attention_slice`: the `batch × heads` score matrices of each attention
//! layer are computed a few at a time, which bounds the memory of a backend that materialises
//! them (Burn's wgpu and CUDA backends in this build; see docs/generate.md, "Memory").

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::nn::{GroupNorm, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::silu;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::blocks::{Downsample2D, ResnetBlock2D, Upsample2D, conv, group_norm};
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::conv::conv2d;
use culturelens_models::norm::group_norm_act;
use culturelens_models::vit::{AttendOptions, Attention};
use culturelens_models::weights::{
    Vars, WeightError, load_conv2d, load_group_norm, load_layer_norm, load_linear,
};

/// An integer per block, or one for all (`attention_head_dim`, `transformer_layers_per_block`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PerBlock {
    All(usize),
    Each(Vec<usize>),
}

impl PerBlock {
    fn resolve(&self, blocks: usize, key: &str) -> Result<Vec<usize>, ModelError> {
        match self {
            Self::All(n) => Ok(vec![*n; blocks]),
            Self::Each(v) if v.len() == blocks => Ok(v.clone()),
            Self::Each(v) => {
                Err(ModelError::Unsupported(format!("`{key}` lists {} values for {blocks} blocks", v.len())))
            }
        }
    }
}

/// `unet/config.json` of a `UNet2DConditionModel`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UNetConfig {
    pub sample_size: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub center_input_sample: bool,
    pub flip_sin_to_cos: bool,
    pub freq_shift: f64,
    pub down_block_types: Vec<String>,
    pub mid_block_type: Option<String>,
    pub up_block_types: Vec<String>,
    pub only_cross_attention: bool,
    pub block_out_channels: Vec<usize>,
    pub layers_per_block: usize,
    pub downsample_padding: usize,
    pub mid_block_scale_factor: f64,
    pub act_fn: String,
    pub norm_num_groups: usize,
    pub norm_eps: f64,
    pub cross_attention_dim: usize,
    pub transformer_layers_per_block: PerBlock,
    pub attention_head_dim: PerBlock,
    pub num_attention_heads: Option<PerBlock>,
    pub dual_cross_attention: bool,
    pub use_linear_projection: bool,
    pub upcast_attention: bool,
    pub class_embed_type: Option<String>,
    pub addition_embed_type: Option<String>,
    /// Width of each `time_ids` entry's sinusoidal embedding (`text_time`; SDXL: 256).
    pub addition_time_embed_dim: Option<usize>,
    /// Input width of `add_embedding` (`text_time`: the pooled text width plus 6 ×
    /// `addition_time_embed_dim`; SDXL: 1280 + 6 · 256 = 2816).
    pub projection_class_embeddings_input_dim: Option<usize>,
    pub num_class_embeds: Option<usize>,
    pub encoder_hid_dim: Option<usize>,
    pub encoder_hid_dim_type: Option<String>,
    pub resnet_time_scale_shift: String,
    pub resnet_skip_time_act: bool,
    pub resnet_out_scale_factor: f64,
    pub time_embedding_type: String,
    pub time_embedding_dim: Option<usize>,
    pub time_embedding_act_fn: Option<String>,
    pub timestep_post_act: Option<String>,
    pub time_cond_proj_dim: Option<usize>,
    pub conv_in_kernel: usize,
    pub conv_out_kernel: usize,
    pub attention_type: String,
    pub cross_attention_norm: Option<String>,
    pub reverse_transformer_layers_per_block: Option<Vec<usize>>,
}

impl UNetConfig {
    /// `runwayml/stable-diffusion-v1-5`'s UNet, whose values (but for the widths) are the class
    /// defaults: the value of every key a `config.json` leaves out.
    pub fn stable_diffusion_v1_5() -> Self {
        let s = |v: &str| v.to_string();
        Self {
            sample_size: 64,
            in_channels: 4,
            out_channels: 4,
            center_input_sample: false,
            flip_sin_to_cos: true,
            freq_shift: 0.0,
            down_block_types: vec![
                s("CrossAttnDownBlock2D"),
                s("CrossAttnDownBlock2D"),
                s("CrossAttnDownBlock2D"),
                s("DownBlock2D"),
            ],
            mid_block_type: Some(s("UNetMidBlock2DCrossAttn")),
            up_block_types: vec![
                s("UpBlock2D"),
                s("CrossAttnUpBlock2D"),
                s("CrossAttnUpBlock2D"),
                s("CrossAttnUpBlock2D"),
            ],
            only_cross_attention: false,
            block_out_channels: vec![320, 640, 1280, 1280],
            layers_per_block: 2,
            downsample_padding: 1,
            mid_block_scale_factor: 1.0,
            act_fn: s("silu"),
            norm_num_groups: 32,
            norm_eps: 1e-5,
            cross_attention_dim: 768,
            transformer_layers_per_block: PerBlock::All(1),
            attention_head_dim: PerBlock::All(8),
            num_attention_heads: None,
            dual_cross_attention: false,
            use_linear_projection: false,
            upcast_attention: false,
            class_embed_type: None,
            addition_embed_type: None,
            addition_time_embed_dim: None,
            projection_class_embeddings_input_dim: None,
            num_class_embeds: None,
            encoder_hid_dim: None,
            encoder_hid_dim_type: None,
            resnet_time_scale_shift: s("default"),
            resnet_skip_time_act: false,
            resnet_out_scale_factor: 1.0,
            time_embedding_type: s("positional"),
            time_embedding_dim: None,
            time_embedding_act_fn: None,
            timestep_post_act: None,
            time_cond_proj_dim: None,
            conv_in_kernel: 3,
            conv_out_kernel: 3,
            attention_type: s("default"),
            cross_attention_norm: None,
            reverse_transformer_layers_per_block: None,
        }
    }

    /// Reads `config.json` over [`Self::stable_diffusion_v1_5`] and [`Self::check`]s it.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let config: Self = config::from_json(json, &Self::stable_diffusion_v1_5(), &[])?;
        config.check()?;
        Ok(config)
    }

    /// Refuses the options this re-implementation does not have, naming the key.
    pub fn check(&self) -> Result<(), ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let n = self.block_out_channels.len();
        if n == 0 || self.down_block_types.len() != n || self.up_block_types.len() != n {
            return bad(
                "block_out_channels",
                format!(
                    "{n} blocks but {} down_block_types and {} up_block_types",
                    self.down_block_types.len(),
                    self.up_block_types.len()
                ),
            );
        }
        for t in &self.down_block_types {
            if t != "CrossAttnDownBlock2D" && t != "DownBlock2D" {
                return bad(
                    "down_block_types",
                    format!("`{t}` is not supported (CrossAttnDownBlock2D, DownBlock2D)"),
                );
            }
        }
        for t in &self.up_block_types {
            if t != "CrossAttnUpBlock2D" && t != "UpBlock2D" {
                return bad(
                    "up_block_types",
                    format!("`{t}` is not supported (CrossAttnUpBlock2D, UpBlock2D)"),
                );
            }
        }
        if self.mid_block_type.as_deref() != Some("UNetMidBlock2DCrossAttn") {
            return bad(
                "mid_block_type",
                format!("{:?} is not supported (UNetMidBlock2DCrossAttn)", self.mid_block_type),
            );
        }
        let flags = [
            ("center_input_sample", self.center_input_sample),
            ("only_cross_attention", self.only_cross_attention),
            ("dual_cross_attention", self.dual_cross_attention),
            ("resnet_skip_time_act", self.resnet_skip_time_act),
        ];
        for (key, set) in flags {
            if set {
                return bad(key, "true is not supported".into());
            }
        }
        match self.addition_embed_type.as_deref() {
            None => {
                let dims = [
                    ("addition_time_embed_dim", self.addition_time_embed_dim),
                    ("projection_class_embeddings_input_dim", self.projection_class_embeddings_input_dim),
                ];
                if let Some((key, _)) = dims.iter().find(|(_, d)| d.is_some()) {
                    return bad(key, "is set but `addition_embed_type` is null".into());
                }
            }
            Some("text_time") => {
                for (key, dim) in [
                    ("addition_time_embed_dim", self.addition_time_embed_dim),
                    ("projection_class_embeddings_input_dim", self.projection_class_embeddings_input_dim),
                ] {
                    if !matches!(dim, Some(d) if d > 0) {
                        return bad(
                            key,
                            "`addition_embed_type: \"text_time\"` needs a positive width".into(),
                        );
                    }
                }
            }
            Some(other) => {
                return bad(
                    "addition_embed_type",
                    format!("`{other}` is not supported (null, or SDXL's `text_time`)"),
                );
            }
        }
        let options = [
            ("class_embed_type", self.class_embed_type.is_some()),
            ("num_class_embeds", self.num_class_embeds.is_some()),
            ("encoder_hid_dim", self.encoder_hid_dim.is_some()),
            ("encoder_hid_dim_type", self.encoder_hid_dim_type.is_some()),
            ("time_embedding_dim", self.time_embedding_dim.is_some()),
            ("time_embedding_act_fn", self.time_embedding_act_fn.is_some()),
            ("timestep_post_act", self.timestep_post_act.is_some()),
            ("time_cond_proj_dim", self.time_cond_proj_dim.is_some()),
            ("cross_attention_norm", self.cross_attention_norm.is_some()),
            ("reverse_transformer_layers_per_block", self.reverse_transformer_layers_per_block.is_some()),
        ];
        for (key, set) in options {
            if set {
                return bad(key, "only null is supported (Stable Diffusion 1.x/2.x/XL UNets)".into());
            }
        }
        let names = [
            ("act_fn", self.act_fn.as_str(), "silu"),
            ("resnet_time_scale_shift", self.resnet_time_scale_shift.as_str(), "default"),
            ("time_embedding_type", self.time_embedding_type.as_str(), "positional"),
            ("attention_type", self.attention_type.as_str(), "default"),
        ];
        for (key, value, only) in names {
            if value != only {
                return bad(key, format!("`{value}` is not supported (only `{only}`)"));
            }
        }
        if self.mid_block_scale_factor != 1.0 || self.resnet_out_scale_factor != 1.0 {
            return bad(
                "mid_block_scale_factor",
                "only 1 is supported (also resnet_out_scale_factor)".into(),
            );
        }
        if self.downsample_padding != 1 {
            return bad(
                "downsample_padding",
                format!("{} is not supported (only 1)", self.downsample_padding),
            );
        }
        for (key, k) in [("conv_in_kernel", self.conv_in_kernel), ("conv_out_kernel", self.conv_out_kernel)] {
            if k.is_multiple_of(2) {
                return bad(key, format!("{k}: only odd kernels are supported"));
            }
        }
        let heads = self.heads()?;
        for (i, (&c, &h)) in self.block_out_channels.iter().zip(&heads).enumerate() {
            if h == 0 || !c.is_multiple_of(h) || !c.is_multiple_of(self.norm_num_groups) {
                return bad(
                    "block_out_channels",
                    format!(
                        "block {i}: {c} channels split into neither {h} heads nor {} groups",
                        self.norm_num_groups
                    ),
                );
            }
        }
        let transformer_layers =
            self.transformer_layers_per_block.resolve(n, "transformer_layers_per_block")?;
        // Each block has `layers_per_block` resnets going down and one more going up, each with
        // its transformer layers in the cross-attention blocks (counted for every block here).
        let per_block = self.layers_per_block.saturating_mul(2).saturating_add(1);
        let layers = transformer_layers
            .iter()
            .fold(0usize, |sum, &t| sum.saturating_add(per_block.saturating_mul(t.saturating_add(1))));
        config::check_layers("layers_per_block", layers)?;
        Ok(())
    }

    /// Heads per down block (`num_attention_heads or attention_head_dim`, diffusers' rule).
    pub fn heads(&self) -> Result<Vec<usize>, ModelError> {
        let n = self.block_out_channels.len();
        match &self.num_attention_heads {
            Some(h) => h.resolve(n, "num_attention_heads"),
            None => self.attention_head_dim.resolve(n, "attention_head_dim"),
        }
    }

    /// Width of the time embedding (`4 × block_out_channels[0]`).
    fn time_embed_dim(&self) -> usize {
        4 * self.block_out_channels[0]
    }

    /// A randomly initialised (lazily materialised) UNet; the config must have passed
    /// [`Self::check`].
    pub fn init(&self, device: &Device) -> Result<UNet2DConditionModel, ModelError> {
        let n = self.block_out_channels.len();
        let heads = self.heads()?;
        let layers = self.transformer_layers_per_block.resolve(n, "transformer_layers_per_block")?;
        let (groups, eps) = (self.norm_num_groups, self.norm_eps);
        let temb = self.time_embed_dim();
        let c0 = self.block_out_channels[0];
        let transformer = |c: usize, h: usize, l: usize| {
            Transformer2D::init(c, h, l, self.cross_attention_dim, groups, self.use_linear_projection, device)
        };
        let mut down_blocks = Vec::with_capacity(n);
        let mut c_out = c0;
        for (i, kind) in self.down_block_types.iter().enumerate() {
            let c_in = c_out;
            c_out = self.block_out_channels[i];
            let resnets = (0..self.layers_per_block)
                .map(|j| {
                    ResnetBlock2D::init(
                        if j == 0 { c_in } else { c_out },
                        c_out,
                        Some(temb),
                        groups,
                        eps,
                        device,
                    )
                })
                .collect();
            let attentions = if kind == "CrossAttnDownBlock2D" {
                (0..self.layers_per_block).map(|_| transformer(c_out, heads[i], layers[i])).collect()
            } else {
                Vec::new()
            };
            let downsamplers = if i + 1 < n { vec![Downsample2D::init(c_out, device)] } else { Vec::new() };
            down_blocks.push(Block { resnets, attentions, downsamplers, upsamplers: Vec::new() });
        }
        let c_mid = self.block_out_channels[n - 1];
        let mid_block = Block {
            resnets: (0..2)
                .map(|_| ResnetBlock2D::init(c_mid, c_mid, Some(temb), groups, eps, device))
                .collect(),
            attentions: vec![transformer(c_mid, heads[n - 1], layers[n - 1])],
            downsamplers: Vec::new(),
            upsamplers: Vec::new(),
        };
        let reversed: Vec<usize> = self.block_out_channels.iter().rev().copied().collect();
        let mut up_blocks = Vec::with_capacity(n);
        let mut c_out = reversed[0];
        for (i, kind) in self.up_block_types.iter().enumerate() {
            let c_prev = c_out;
            c_out = reversed[i];
            let c_in = reversed[(i + 1).min(n - 1)];
            let count = self.layers_per_block + 1;
            let resnets = (0..count)
                .map(|j| {
                    let skip = if j + 1 == count { c_in } else { c_out };
                    let input = if j == 0 { c_prev } else { c_out };
                    ResnetBlock2D::init(input + skip, c_out, Some(temb), groups, eps, device)
                })
                .collect();
            let attentions = if kind == "CrossAttnUpBlock2D" {
                (0..count).map(|_| transformer(c_out, heads[n - 1 - i], layers[n - 1 - i])).collect()
            } else {
                Vec::new()
            };
            let upsamplers = if i + 1 < n { vec![Upsample2D::init(c_out, device)] } else { Vec::new() };
            up_blocks.push(Block { resnets, attentions, downsamplers: Vec::new(), upsamplers });
        }
        let add_embedding = match (&self.addition_embed_type, self.projection_class_embeddings_input_dim) {
            (Some(_), Some(width)) => Some(TimestepEmbedding::init(width, temb, device)),
            _ => None,
        };
        Ok(UNet2DConditionModel {
            conv_in: conv(self.in_channels, c0, self.conv_in_kernel, 1, device),
            time_embedding: TimestepEmbedding::init(c0, temb, device),
            add_embedding,
            down_blocks,
            mid_block,
            up_blocks,
            conv_norm_out: group_norm(groups, c0, eps, device),
            conv_out: conv(c0, self.out_channels, self.conv_out_kernel, 1, device),
            config: self.clone(),
            attention_slice: None,
        })
    }

    /// Builds the UNet of `json` and loads `checkpoint` (`diffusion_pytorch_model.safetensors`).
    pub fn load(json: &str, vars: Vars) -> Result<UNet2DConditionModel, ModelError> {
        let mut unet = Self::from_json(json)?.init(vars.device())?;
        unet.load(vars)?;
        Ok(unet)
    }
}

/// `TimestepEmbedding`: `linear_2(silu(linear_1(t)))`. The MMDiTs' `PixArtAlphaTextProjection`
/// with `act_fn="silu"` is the same two layers.
#[derive(Module, Debug)]
pub struct TimestepEmbedding {
    pub linear_1: Linear,
    pub linear_2: Linear,
}

impl TimestepEmbedding {
    /// `in_dim → out_dim → out_dim`, both layers biased.
    pub fn init(in_dim: usize, out_dim: usize, device: &Device) -> Self {
        Self {
            linear_1: LinearConfig::new(in_dim, out_dim).init(device),
            linear_2: LinearConfig::new(out_dim, out_dim).init(device),
        }
    }

    /// Loads `linear_1` and `linear_2`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.linear_1, vars.pp("linear_1"))?;
        load_linear(&mut self.linear_2, vars.pp("linear_2"))
    }

    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.linear_2.forward(silu(self.linear_1.forward(x)))
    }
}

/// `added_cond_kwargs` of the `text_time` addition embedding (SDXL): the pooled text
/// embeddings, one row per UNet batch row, and the `time_ids` every row shares (diffusers'
/// `add_time_ids`, `(original_size, crops_coords_top_left, target_size)`).
#[derive(Clone, Debug)]
pub struct TextTime {
    /// `[batch, projection_dim]`.
    pub text_embeds: Tensor<2>,
    pub time_ids: Vec<f32>,
}

/// `GEGLU` then the output projection: `net.2(h · gelu(g))` with `[h, g] = net.0.proj(x)`.
#[derive(Module, Debug)]
pub struct FeedForward {
    pub proj: Linear,
    pub out: Linear,
}

impl FeedForward {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.out.forward(culturelens_models::vit::geglu(&self.proj, x))
    }
}

/// `BasicTransformerBlock` (layer norms, self-attention `attn1`, cross-attention `attn2` on
/// the text embeddings, GEGLU feed-forward `ff`).
#[derive(Module, Debug)]
pub struct TransformerBlock {
    pub norm1: LayerNorm,
    pub attn1: Attention,
    pub norm2: LayerNorm,
    pub attn2: Attention,
    pub norm3: LayerNorm,
    pub ff: FeedForward,
}

/// diffusers' `Attention` with q/k/v without bias and `to_out.0` with bias, keys of width
/// `kv_dim`.
fn attention(dim: usize, kv_dim: usize, heads: usize, device: &Device) -> Attention {
    let proj = |d_in| LinearConfig::new(d_in, dim).with_bias(false).init(device);
    Attention {
        q_proj: proj(dim),
        k_proj: proj(kv_dim),
        v_proj: proj(kv_dim),
        out_proj: LinearConfig::new(dim, dim).init(device),
        num_heads: heads,
    }
}

/// The names of diffusers' `Attention` projections.
pub const ATTENTION_KEYS: [&str; 4] = ["to_q", "to_k", "to_v", "to_out.0"];

impl TransformerBlock {
    fn init(dim: usize, heads: usize, cross_dim: usize, device: &Device) -> Self {
        let norm = || LayerNormConfig::new(dim).with_epsilon(1e-5).init(device);
        Self {
            norm1: norm(),
            attn1: attention(dim, dim, heads, device),
            norm2: norm(),
            attn2: attention(dim, cross_dim, heads, device),
            norm3: norm(),
            ff: FeedForward {
                proj: LinearConfig::new(dim, 8 * dim).init(device),
                out: LinearConfig::new(4 * dim, dim).init(device),
            },
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_layer_norm(&mut self.norm1, vars.pp("norm1"))?;
        self.attn1.load(&vars.pp("attn1"), ATTENTION_KEYS)?;
        load_layer_norm(&mut self.norm2, vars.pp("norm2"))?;
        self.attn2.load(&vars.pp("attn2"), ATTENTION_KEYS)?;
        load_layer_norm(&mut self.norm3, vars.pp("norm3"))?;
        load_linear(&mut self.ff.proj, vars.pp("ff.net.0.proj"))?;
        load_linear(&mut self.ff.out, vars.pp("ff.net.2"))
    }

    fn forward(&self, x: Tensor<3>, context: &Tensor<3>, run: Run) -> Tensor<3> {
        let how = |attn: &Attention| AttendOptions {
            slice: run.slice.map(|s| s.rows(attn.num_heads)),
            upcast: run.upcast,
            ..AttendOptions::default()
        };
        let h = self.norm1.forward(x.clone());
        let x = x + self.attn1.attend_with(self.attn1.q_proj.forward(h.clone()), h, how(&self.attn1));
        let h = self.norm2.forward(x.clone());
        let x = x + self.attn2.attend_with(self.attn2.q_proj.forward(h), context.clone(), how(&self.attn2));
        x.clone() + self.ff.forward(self.norm3.forward(x))
    }
}

/// `Transformer2DModel` on a feature map: group norm (eps 1e-6), `proj_in`, transformer
/// blocks over the `h·w` positions, `proj_out`, plus the input.
#[derive(Module, Debug)]
pub struct Transformer2D {
    pub norm: GroupNorm,
    /// `proj_in` / `proj_out` as 1×1 convolutions (SD 1.x) …
    pub proj_in_conv: Option<Conv2d>,
    pub proj_out_conv: Option<Conv2d>,
    /// … or as linear layers (`use_linear_projection`, SD 2.x).
    pub proj_in_linear: Option<Linear>,
    pub proj_out_linear: Option<Linear>,
    pub transformer_blocks: Vec<TransformerBlock>,
}

impl Transformer2D {
    fn init(
        channels: usize,
        heads: usize,
        layers: usize,
        cross_dim: usize,
        groups: usize,
        linear: bool,
        device: &Device,
    ) -> Self {
        let lin = || LinearConfig::new(channels, channels).init(device);
        let c1 = || conv(channels, channels, 1, 1, device);
        Self {
            norm: group_norm(groups, channels, 1e-6, device),
            proj_in_conv: (!linear).then(c1),
            proj_out_conv: (!linear).then(c1),
            proj_in_linear: linear.then(lin),
            proj_out_linear: linear.then(lin),
            transformer_blocks: (0..layers)
                .map(|_| TransformerBlock::init(channels, heads, cross_dim, device))
                .collect(),
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_group_norm(&mut self.norm, vars.pp("norm"))?;
        if let (Some(p_in), Some(p_out)) = (&mut self.proj_in_conv, &mut self.proj_out_conv) {
            load_conv2d(p_in, vars.pp("proj_in"))?;
            load_conv2d(p_out, vars.pp("proj_out"))?;
        }
        if let (Some(p_in), Some(p_out)) = (&mut self.proj_in_linear, &mut self.proj_out_linear) {
            load_linear(p_in, vars.pp("proj_in"))?;
            load_linear(p_out, vars.pp("proj_out"))?;
        }
        for (i, block) in self.transformer_blocks.iter_mut().enumerate() {
            block.load(vars.pp("transformer_blocks").pp(i))?;
        }
        Ok(())
    }

    fn forward(&self, x: Tensor<4>, context: &Tensor<3>, run: Run) -> Tensor<4> {
        let [b, c, h, w] = x.dims();
        let mut hidden = group_norm_act(&self.norm, x.clone(), false);
        if let Some(p) = &self.proj_in_conv {
            hidden = p.forward(hidden);
        }
        let mut tokens = hidden.reshape([b, c, h * w]).swap_dims(1, 2);
        if let Some(p) = &self.proj_in_linear {
            tokens = p.forward(tokens);
        }
        for block in &self.transformer_blocks {
            tokens = block.forward(tokens, context, run);
        }
        if let Some(p) = &self.proj_out_linear {
            tokens = p.forward(tokens);
        }
        let mut hidden = tokens.swap_dims(1, 2).reshape([b, c, h, w]);
        if let Some(p) = &self.proj_out_conv {
            hidden = p.forward(hidden);
        }
        hidden + x
    }
}

/// One down, mid or up block: resnets, each followed by its transformer when the block has
/// attention, then a down- or upsampler.
#[derive(Module, Debug)]
pub struct Block {
    pub resnets: Vec<ResnetBlock2D>,
    pub attentions: Vec<Transformer2D>,
    pub downsamplers: Vec<Downsample2D>,
    pub upsamplers: Vec<Upsample2D>,
}

impl Block {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        for (i, r) in self.resnets.iter_mut().enumerate() {
            r.load(vars.pp("resnets").pp(i))?;
        }
        for (i, a) in self.attentions.iter_mut().enumerate() {
            a.load(vars.pp("attentions").pp(i))?;
        }
        for (i, d) in self.downsamplers.iter_mut().enumerate() {
            d.load(vars.pp("downsamplers").pp(i))?;
        }
        for (i, u) in self.upsamplers.iter_mut().enumerate() {
            u.load(vars.pp("upsamplers").pp(i))?;
        }
        Ok(())
    }

    /// Resnet `i` then, when present, transformer `i`.
    fn layer(&self, i: usize, x: Tensor<4>, temb: &Tensor<2>, context: &Tensor<3>, run: Run) -> Tensor<4> {
        let x = self.resnets[i].forward(x, Some(temb));
        match self.attentions.get(i) {
            Some(attn) => attn.forward(x, context, run),
            None => x,
        }
    }
}

/// The UNet: `sample` `[batch, in_channels, h, w]` and text embeddings → the noise (or `v`)
/// prediction.
#[derive(Module, Debug)]
pub struct UNet2DConditionModel {
    pub conv_in: Conv2d,
    pub time_embedding: TimestepEmbedding,
    /// `add_embedding` of `addition_embed_type: "text_time"` (SDXL).
    pub add_embedding: Option<TimestepEmbedding>,
    pub down_blocks: Vec<Block>,
    pub mid_block: Block,
    pub up_blocks: Vec<Block>,
    pub conv_norm_out: GroupNorm,
    pub conv_out: Conv2d,
    #[module(skip)]
    pub config: UNetConfig,
    /// Attention slicing (`None`: every layer's scores at once), set with
    /// [`UNet2DConditionModel::set_attention_slice`].
    #[module(skip)]
    pub attention_slice: Option<AttentionSlice>,
}

/// How the attention layers of one UNet call run: slicing and `upcast_attention`.
#[derive(Clone, Copy, Debug)]
struct Run {
    slice: Option<AttentionSlice>,
    upcast: bool,
}

/// diffusers' `set_attention_slice` argument: how many of an attention layer's `batch × heads`
/// score matrices are computed at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionSlice {
    /// Half the layer's heads (`heads // 2`, at least 1), diffusers' `"auto"`.
    Auto,
    /// One at a time, diffusers' `"max"`.
    Max,
    /// `N` at a time; at most the smallest head count of the model's attention layers.
    Size(usize),
}

impl AttentionSlice {
    /// `auto`, `max` or a positive integer.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Self::Auto),
            "max" => Ok(Self::Max),
            n => match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(Self::Size(n)),
                _ => Err(format!("`{text}` is not an attention slice (auto, max or a positive integer)")),
            },
        }
    }

    /// Score matrices per attention call in a layer of `heads` heads.
    pub fn rows(self, heads: usize) -> usize {
        match self {
            Self::Auto => (heads / 2).max(1),
            Self::Max => 1,
            Self::Size(n) => n,
        }
    }
}

/// The text [`AttentionSlice::parse`] reads: `auto`, `max` or N.
impl std::fmt::Display for AttentionSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Max => f.write_str("max"),
            Self::Size(n) => write!(f, "{n}"),
        }
    }
}

/// `get_timestep_embedding(t, dim, flip_sin_to_cos, downscale_freq_shift)` in float32 as torch
/// computes it: frequencies `exp(−ln(10⁴)·i / (dim/2 − shift))`, then `[sin, cos]` of `t·f`
/// (`[cos, sin]` when flipped).
pub fn timestep_embedding(t: f32, dim: usize, flip_sin_to_cos: bool, shift: f64) -> Vec<f32> {
    let half = dim / 2;
    let log_period = -(10000f64.ln()) as f32;
    let (mut sin, mut cos) = (Vec::with_capacity(half), Vec::with_capacity(half));
    for i in 0..half {
        let exponent = log_period * i as f32 / (half as f64 - shift) as f32;
        let arg = t * exponent.exp();
        sin.push(arg.sin());
        cos.push(arg.cos());
    }
    let mut emb = if flip_sin_to_cos { [cos, sin].concat() } else { [sin, cos].concat() };
    emb.resize(dim, 0.0);
    emb
}

impl UNet2DConditionModel {
    /// `concat([text_embeds, add_time_proj(time_ids)])`, `add_embedding`'s input: the time ids'
    /// sinusoidal embeddings, computed on the host as the time step's are.
    fn text_time_embeds(&self, added: &TextTime) -> Tensor<2> {
        let dim = self.config.addition_time_embed_dim.unwrap_or(0);
        let (flip, shift) = (self.config.flip_sin_to_cos, self.config.freq_shift);
        let ids: Vec<f32> =
            added.time_ids.iter().flat_map(|&id| timestep_embedding(id, dim, flip, shift)).collect();
        let [batch, _] = added.text_embeds.dims();
        let width = ids.len();
        let device = added.text_embeds.device();
        let ids = Tensor::<2>::from_data(TensorData::new(ids, [1, width]), &device).expand([batch, width]);
        Tensor::cat(vec![added.text_embeds.clone(), ids], 1)
    }

    /// The width `add_embedding` takes (`projection_class_embeddings_input_dim`), `None` without
    /// the `text_time` embedding.
    pub fn text_time_width(&self) -> Option<usize> {
        self.add_embedding.as_ref().and(self.config.projection_class_embeddings_input_dim)
    }

    /// The head counts of every attention module (self- and cross-attention of each transformer
    /// block), in module order.
    fn attention_heads(&self) -> Vec<usize> {
        let blocks = self.down_blocks.iter().chain([&self.mid_block]).chain(&self.up_blocks);
        blocks
            .flat_map(|b| &b.attentions)
            .flat_map(|t| &t.transformer_blocks)
            .flat_map(|tb| [tb.attn1.num_heads, tb.attn2.num_heads])
            .collect()
    }

    /// Sets attention slicing, as diffusers' `set_attention_slice`: a size larger than the
    /// smallest head count of the model's attention layers is refused.
    pub fn set_attention_slice(&mut self, slice: Option<AttentionSlice>) -> Result<(), ModelError> {
        if let Some(AttentionSlice::Size(n)) = slice {
            let fewest = self.attention_heads().into_iter().min().unwrap_or(0);
            if n > fewest {
                return Err(ModelError::Unsupported(format!(
                    "attention slice {n}: has to be at most {fewest}, the fewest heads of an attention layer of this UNet"
                )));
            }
        }
        self.attention_slice = slice;
        Ok(())
    }

    /// Loads every tensor of a diffusers `UNet2DConditionModel` state dict.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_conv2d(&mut self.conv_in, vars.pp("conv_in"))?;
        self.time_embedding.load(vars.pp("time_embedding"))?;
        if let Some(add) = &mut self.add_embedding {
            add.load(vars.pp("add_embedding"))?;
        }
        for (i, b) in self.down_blocks.iter_mut().enumerate() {
            b.load(vars.pp("down_blocks").pp(i))?;
        }
        self.mid_block.load(vars.pp("mid_block"))?;
        for (i, b) in self.up_blocks.iter_mut().enumerate() {
            b.load(vars.pp("up_blocks").pp(i))?;
        }
        load_group_norm(&mut self.conv_norm_out, vars.pp("conv_norm_out"))?;
        load_conv2d(&mut self.conv_out, vars.pp("conv_out"))
    }

    /// One UNet call: `sample` `[batch, c, h, w]` at timestep `t` (the same for every row),
    /// conditioned on `context` `[batch, tokens, cross_attention_dim]`.
    pub fn forward(&self, sample: Tensor<4>, t: f32, context: &Tensor<3>) -> Tensor<4> {
        self.forward_with(sample, t, context, None)
    }

    /// [`Self::forward`] with the `text_time` conditioning (`added_cond_kwargs`), which a UNet
    /// with `addition_embed_type: "text_time"` needs and any other ignores.
    pub fn forward_with(
        &self,
        sample: Tensor<4>,
        t: f32,
        context: &Tensor<3>,
        added: Option<&TextTime>,
    ) -> Tensor<4> {
        let batch = sample.dims()[0];
        let device = sample.device();
        let c0 = self.config.block_out_channels[0];
        let emb = timestep_embedding(t, c0, self.config.flip_sin_to_cos, self.config.freq_shift);
        let emb = Tensor::<2>::from_data(TensorData::new(emb, [1, c0]), &device).expand([batch, c0]);
        let mut temb = self.time_embedding.forward(emb);
        if let (Some(add), Some(added)) = (&self.add_embedding, added) {
            temb = temb + add.forward(self.text_time_embeds(added));
        }

        let run = Run { slice: self.attention_slice, upcast: self.config.upcast_attention };
        let mut x = conv2d(&self.conv_in, sample);
        let mut skips = vec![x.clone()];
        for block in &self.down_blocks {
            for i in 0..block.resnets.len() {
                x = block.layer(i, x, &temb, context, run);
                skips.push(x.clone());
            }
            for down in &block.downsamplers {
                x = down.forward(x);
                skips.push(x.clone());
            }
        }
        let mid = &self.mid_block;
        x = mid.resnets[0].forward(x, Some(&temb));
        x = mid.attentions[0].forward(x, context, run);
        x = mid.resnets[1].forward(x, Some(&temb));
        for block in &self.up_blocks {
            for i in 0..block.resnets.len() {
                let skip = skips.pop().expect("one skip connection per up resnet");
                x = block.layer(i, Tensor::cat(vec![x, skip], 1), &temb, context, run);
            }
            for up in &block.upsamplers {
                let [_, _, h, w] = skips.last().expect("a skip below every upsampler").dims();
                x = up.forward(x, Some([h, w]));
            }
        }
        conv2d(&self.conv_out, group_norm_act(&self.conv_norm_out, x, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_with_too_many_layers_is_refused_with_its_key() {
        // Found by the fuzz harness (vae-config.json, seed 1, input 1604): 4 blocks × 65,536.
        let err = crate::vae::VaeConfig::from_json(r#"{"layers_per_block": 65535}"#).unwrap_err();
        assert!(err.to_string().contains("`layers_per_block`: the model would have 262144 layers"), "{err}");
        let err = UNetConfig::from_json(r#"{"layers_per_block": 400}"#).unwrap_err();
        assert!(err.to_string().contains("`layers_per_block`: the model would have"), "{err}");
        assert!(UNetConfig::from_json("{}").is_ok());
    }

    #[test]
    fn timestep_embedding_by_hand() {
        // dim 4, t = 1: frequencies exp(0) = 1 and exp(−ln(10⁴)/2) = 0.01.
        let e = timestep_embedding(1.0, 4, true, 0.0);
        let want = [1f32.cos(), 0.01f32.cos(), 1f32.sin(), 0.01f32.sin()];
        for (g, w) in e.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{e:?}");
        }
        // Unflipped with shift 1: one frequency per half over (2 − 1): exp(0), exp(−ln 10⁴) = 1e-4.
        let e = timestep_embedding(100.0, 4, false, 1.0);
        let want = [100f32.sin(), 0.01f32.sin(), 100f32.cos(), 0.01f32.cos()];
        for (g, w) in e.iter().zip(want) {
            assert!((g - w).abs() < 1e-5, "{e:?}");
        }
    }

    /// Sliced attention (any slice size, with a key padding mask, on flex's naive and flash
    /// paths) equals the unsliced attention: each (batch, head) pair is computed alone.
    #[test]
    fn sliced_attention_equals_unsliced() {
        use burn::tensor::{Bool, Distribution};
        let device = Device::flex();
        // 70 tokens: flex's naive path; 600: its flash path (more than 256 K scores).
        for (tokens, heads) in [(70, 4), (600, 2)] {
            let attn = Attention::init(16, heads, true, &device);
            let x = Tensor::<3>::random([2, tokens, 16], Distribution::Normal(0.0, 1.0), &device);
            let padding: Vec<bool> = (0..2 * tokens).map(|i| i % tokens >= tokens - 5 + i / tokens).collect();
            let mask = Tensor::<2, Bool>::from_data(TensorData::new(padding, [2, tokens]), &device);
            let run = |slice: Option<usize>| {
                let how =
                    AttendOptions { key_padding: Some(mask.clone()), slice, ..AttendOptions::default() };
                let q = attn.q_proj.forward(x.clone());
                attn.attend_with(q, x.clone(), how)
                    .into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .unwrap()
            };
            let whole = run(None);
            for rows in [1, 3, 2 * heads - 1] {
                let sliced = run(Some(rows));
                let err = sliced.iter().zip(&whole).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
                assert!(err <= 1e-6, "{tokens} tokens, {rows} rows per slice: {err:.2e}");
            }
        }
        assert_eq!(AttentionSlice::Auto.rows(5), 2);
        assert_eq!(AttentionSlice::Auto.rows(1), 1);
        assert_eq!(AttentionSlice::parse("max"), Ok(AttentionSlice::Max));
        assert_eq!(AttentionSlice::parse("3"), Ok(AttentionSlice::Size(3)));
        assert!(AttentionSlice::parse("0").is_err());
        for text in ["auto", "max", "3"] {
            assert_eq!(AttentionSlice::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn heads_follow_diffusers_naming_and_unsupported_keys_are_named() {
        // SD 2.x: attention_head_dim lists heads per block.
        let c = UNetConfig::from_json(r#"{"attention_head_dim": [5, 10, 20, 20]}"#).unwrap();
        assert_eq!(c.heads().unwrap(), [5, 10, 20, 20]);
        let c = UNetConfig::from_json(r#"{"attention_head_dim": 8, "num_attention_heads": 4}"#).unwrap();
        assert_eq!(c.heads().unwrap(), [4; 4]);
        let e = UNetConfig::from_json(r#"{"addition_embed_type": "text"}"#).unwrap_err();
        assert!(e.to_string().contains("`addition_embed_type`: `text` is not supported"), "{e}");
        let e = UNetConfig::from_json(r#"{"addition_embed_type": "text_time"}"#).unwrap_err();
        assert!(e.to_string().contains("`addition_time_embed_dim`"), "{e}");
        let e = UNetConfig::from_json(r#"{"projection_class_embeddings_input_dim": 8}"#).unwrap_err();
        assert!(e.to_string().contains("`projection_class_embeddings_input_dim`: is set"), "{e}");
        let e = UNetConfig::from_json(r#"{"attention_head_dim": [5, 10]}"#).unwrap_err();
        assert!(e.to_string().contains("`attention_head_dim` lists 2 values for 4 blocks"), "{e}");
        let e = UNetConfig::from_json(r#"{"down_block_types": ["SimpleCrossAttnDownBlock2D", "DownBlock2D", "DownBlock2D", "DownBlock2D"]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("SimpleCrossAttnDownBlock2D"), "{e}");
    }

    /// `stabilityai/stable-diffusion-xl-base-1.0`'s `unet/config.json` as published: every key
    /// is read (or, for `text`-only and class-embedding options it leaves null, ignored), the
    /// UNet builds, and its `text_time` widths add up (1280 + 6 × 256 = 2816).
    #[test]
    fn sdxl_base_unet_config_builds() {
        let c = UNetConfig::from_json(SDXL_BASE_UNET).unwrap();
        assert_eq!(c.heads().unwrap(), [5, 10, 20]);
        assert_eq!(c.transformer_layers_per_block, PerBlock::Each(vec![1, 2, 10]));
        assert_eq!(
            (c.addition_time_embed_dim, c.projection_class_embeddings_input_dim),
            (Some(256), Some(2816))
        );
        let unet = c.init(&Device::flex()).unwrap();
        assert_eq!(unet.text_time_width(), Some(2816));
        // Down: DownBlock2D, then 2 resnets × 2 and × 10 transformer layers; the up path
        // mirrors it with 3 resnets per block: 10 per attention in the first up block.
        let layers = |b: &Block| b.attentions.iter().map(|a| a.transformer_blocks.len()).collect::<Vec<_>>();
        assert_eq!(layers(&unet.down_blocks[0]), Vec::<usize>::new());
        assert_eq!(layers(&unet.down_blocks[2]), [10, 10]);
        assert_eq!(layers(&unet.mid_block), [10]);
        assert_eq!(layers(&unet.up_blocks[0]), [10, 10, 10]);
        assert_eq!(layers(&unet.up_blocks[1]), [2, 2, 2]);
    }

    const SDXL_BASE_UNET: &str = r#"{
      "_class_name": "UNet2DConditionModel", "_diffusers_version": "0.19.0.dev0", "act_fn": "silu",
      "addition_embed_type": "text_time", "addition_embed_type_num_heads": 64,
      "addition_time_embed_dim": 256, "attention_head_dim": [5, 10, 20],
      "block_out_channels": [320, 640, 1280], "center_input_sample": false,
      "class_embed_type": null, "class_embeddings_concat": false, "conv_in_kernel": 3,
      "conv_out_kernel": 3, "cross_attention_dim": 2048, "cross_attention_norm": null,
      "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
      "downsample_padding": 1, "dual_cross_attention": false, "encoder_hid_dim": null,
      "encoder_hid_dim_type": null, "flip_sin_to_cos": true, "freq_shift": 0, "in_channels": 4,
      "layers_per_block": 2, "mid_block_only_cross_attention": null, "mid_block_scale_factor": 1,
      "mid_block_type": "UNetMidBlock2DCrossAttn", "norm_eps": 1e-05, "norm_num_groups": 32,
      "num_attention_heads": null, "num_class_embeds": null, "only_cross_attention": false,
      "out_channels": 4, "projection_class_embeddings_input_dim": 2816,
      "resnet_out_scale_factor": 1.0, "resnet_skip_time_act": false,
      "resnet_time_scale_shift": "default", "sample_size": 128, "time_cond_proj_dim": null,
      "time_embedding_act_fn": null, "time_embedding_dim": null,
      "time_embedding_type": "positional", "timestep_post_act": null,
      "transformer_layers_per_block": [1, 2, 10],
      "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
      "upcast_attention": null, "use_linear_projection": true
    }"#;
}
