//! diffusers' `UNet2DConditionModel` (0.42) in the configuration DeepFloyd IF's stage I and
//! stage II use: `ResnetDownsampleBlock2D` / `SimpleCrossAttnDownBlock2D` down,
//! `UNetMidBlock2DSimpleCrossAttn`, `SimpleCrossAttnUpBlock2D` / `ResnetUpsampleBlock2D` up. The
//! SD/SDXL configuration is [`crate::unet`]; this file shares its sinusoidal
//! [`timestep_embedding`] and [`crate::blocks`]' `ResnetBlock2D` (with [`ResnetOptions`]).
//!
//! - **Time**: `t` (and stage II's `class_labels`, the noise level, with `class_embed_type:
//!   "timestep"`) through the sinusoidal `time_proj` (`block_out_channels[0]` wide,
//!   `flip_sin_to_cos`, `freq_shift`) and a `TimestepEmbedding` (`linear_2(act(linear_1(·)))`,
//!   `act_fn`); the class embedding is added. `addition_embed_type: "text"` adds
//!   `TextTimeEmbedding` of the text embeddings *before* their projection: layer norm,
//!   `AttentionPooling` (a class token `mean(x) + positional_embedding` attending over itself and
//!   the tokens, `addition_embed_type_num_heads` heads, both sides scaled by `d^{-1/4}`), `proj`,
//!   layer norm. `time_embedding_act_fn` is applied to the sum.
//! - **Text**: `encoder_hid_proj` (`encoder_hid_dim → cross_attention_dim`, `encoder_hid_dim_type:
//!   "text_proj"`, the default when `encoder_hid_dim` is set).
//! - **Kandinsky 2.1** ([`TextImage`], the same UNet with `encoder_hid_dim_type:
//!   "text_image_proj"` and `addition_embed_type: "text_image"`): the context is `[image_embeds(image)
//!   as 10 tokens; text_proj(text states)]` (`TextImageProjection`, `cross_attention_dim` wide), and
//!   the time embedding gets `image_proj(image) + text_norm(text_proj(pooled text))`
//!   (`TextImageTimeEmbedding`, from `cross_attention_dim`).
//! - **Resnets**: `act_fn` (IF: exact GELU), `resnet_time_scale_shift: "scale_shift"`,
//!   `resnet_skip_time_act`, `resnet_out_scale_factor` (the mid block: `mid_block_scale_factor`);
//!   the down- and upsamplers are resnets with a 2×2 average pool / nearest 2× resize inside.
//! - **Attention** (`Attention` with `added_kv_proj_dim = cross_attention_dim` and
//!   `AttnAddedKVProcessor2_0`): group norm (`norm_num_groups`, ε 1e-5) of the feature map, then
//!   `to_q` of it; keys and values are `[add_k_proj(text); to_k(x)]` (`add_*` alone with
//!   `only_cross_attention`), optionally after `cross_attention_norm: "group_norm"` of the
//!   text; `softmax(q kᵀ/√d) v`, `to_out.0`, plus the input. Heads: `channels /
//!   attention_head_dim` of `attention_head_dim` each — here `attention_head_dim` *is* the head
//!   width; the up blocks take `attention_head_dim[i]` unreversed, as diffusers does.
//! - **Output**: `conv_out(act(conv_norm_out(x)))`, `out_channels` (IF: 6 = noise and learned
//!   variance).
//!
//! Options outside this configuration are refused by key ([`IfUNetConfig::check`]). The
//! pipeline passes no attention mask to the UNet (diffusers' IF pipelines do not).

use burn::module::{Module, Param};
use burn::nn::conv::Conv2d;
use burn::nn::{GroupNorm, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::{gelu, silu, softmax};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::blocks::{Resample, ResnetBlock2D, ResnetOptions, conv, group_norm};
use super::unet::{PerBlock, timestep_embedding};
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::weights::{
    Vars, WeightError, load_conv2d, load_group_norm, load_layer_norm, load_linear,
};

/// `only_cross_attention`: one flag for all blocks or one per block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Flags {
    All(bool),
    Each(Vec<bool>),
}

/// The keys of `unet/config.json` this configuration reads, with `UNet2DConditionModel`'s class
/// defaults as the preset ([`IfUNetConfig::class_defaults`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IfUNetConfig {
    pub sample_size: Option<usize>,
    pub in_channels: usize,
    pub out_channels: usize,
    pub center_input_sample: bool,
    pub flip_sin_to_cos: bool,
    pub freq_shift: f64,
    pub down_block_types: Vec<String>,
    pub mid_block_type: Option<String>,
    pub up_block_types: Vec<String>,
    pub only_cross_attention: Flags,
    pub mid_block_only_cross_attention: Option<bool>,
    pub block_out_channels: Vec<usize>,
    pub layers_per_block: usize,
    pub mid_block_scale_factor: f64,
    pub act_fn: String,
    pub norm_num_groups: Option<usize>,
    pub norm_eps: f64,
    pub cross_attention_dim: usize,
    pub attention_head_dim: PerBlock,
    pub num_attention_heads: Option<PerBlock>,
    pub class_embed_type: Option<String>,
    pub num_class_embeds: Option<usize>,
    pub class_embeddings_concat: bool,
    pub addition_embed_type: Option<String>,
    pub addition_embed_type_num_heads: usize,
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
}

const DOWN: [&str; 2] = ["ResnetDownsampleBlock2D", "SimpleCrossAttnDownBlock2D"];
const UP: [&str; 2] = ["ResnetUpsampleBlock2D", "SimpleCrossAttnUpBlock2D"];
const MID: &str = "UNetMidBlock2DSimpleCrossAttn";

impl IfUNetConfig {
    /// `UNet2DConditionModel.__init__`'s defaults for the keys read here.
    pub fn class_defaults() -> Self {
        let s = |v: &str| v.to_string();
        Self {
            sample_size: None,
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
            only_cross_attention: Flags::All(false),
            mid_block_only_cross_attention: None,
            block_out_channels: vec![320, 640, 1280, 1280],
            layers_per_block: 2,
            mid_block_scale_factor: 1.0,
            act_fn: s("silu"),
            norm_num_groups: Some(32),
            norm_eps: 1e-5,
            cross_attention_dim: 1280,
            attention_head_dim: PerBlock::All(8),
            num_attention_heads: None,
            class_embed_type: None,
            num_class_embeds: None,
            class_embeddings_concat: false,
            addition_embed_type: None,
            addition_embed_type_num_heads: 64,
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
        }
    }

    /// Whether a `unet/config.json` is in this configuration (its first down block is one of
    /// IF's), rather than SD's ([`crate::unet::UNetConfig`]).
    pub fn applies_to(json: &str) -> bool {
        let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        value["down_block_types"][0].as_str().is_some_and(|t| DOWN.contains(&t))
    }

    /// The factor height and width must be multiples of: `2^(blocks − 1)` (the resampling
    /// resnets take no output size).
    pub fn size_multiple(&self) -> usize {
        1 << (self.block_out_channels.len() - 1)
    }

    /// Reads `config.json` over [`Self::class_defaults`] and [`Self::check`]s it.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let config: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        config.check()?;
        Ok(config)
    }

    /// Refuses what this re-implementation does not have, naming the key.
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
        for (key, types, known) in
            [("down_block_types", &self.down_block_types, DOWN), ("up_block_types", &self.up_block_types, UP)]
        {
            if let Some(t) = types.iter().find(|t| !known.contains(&t.as_str())) {
                return bad(key, format!("`{t}` is not supported with IF's blocks ({})", known.join(", ")));
            }
        }
        if self.mid_block_type.as_deref() != Some(MID) {
            return bad("mid_block_type", format!("{:?} is not supported (only {MID})", self.mid_block_type));
        }
        if self.sample_size.is_none() {
            return bad("sample_size", "missing (the pipeline's default image size)".into());
        }
        if self.norm_num_groups.is_none() {
            return bad("norm_num_groups", "null is not supported".into());
        }
        if self.num_attention_heads.is_some() {
            return bad("num_attention_heads", "diffusers refuses it; set attention_head_dim".into());
        }
        if let Flags::Each(v) = &self.only_cross_attention
            && v.len() != n
        {
            return bad("only_cross_attention", format!("lists {} values for {n} blocks", v.len()));
        }
        let flags = [
            ("center_input_sample", self.center_input_sample),
            ("class_embeddings_concat", self.class_embeddings_concat),
        ];
        for (key, set) in flags {
            if set {
                return bad(key, "true is not supported".into());
            }
        }
        let nulls = [
            ("num_class_embeds", self.num_class_embeds.is_some()),
            ("time_embedding_dim", self.time_embedding_dim.is_some()),
            ("timestep_post_act", self.timestep_post_act.is_some()),
            ("time_cond_proj_dim", self.time_cond_proj_dim.is_some()),
        ];
        for (key, set) in nulls {
            if set {
                return bad(key, "only null is supported (DeepFloyd IF's UNets)".into());
            }
        }
        let choices: [(&str, Option<&str>, &[&str]); 7] = [
            ("class_embed_type", self.class_embed_type.as_deref(), &["timestep"]),
            ("addition_embed_type", self.addition_embed_type.as_deref(), &["text", "text_image"]),
            ("encoder_hid_dim_type", self.encoder_hid_dim_type.as_deref(), &["text_proj", "text_image_proj"]),
            ("time_embedding_act_fn", self.time_embedding_act_fn.as_deref(), &["gelu", "silu", "swish"]),
            ("cross_attention_norm", self.cross_attention_norm.as_deref(), &["group_norm"]),
            ("act_fn", Some(self.act_fn.as_str()), &["gelu", "silu", "swish"]),
            (
                "resnet_time_scale_shift",
                Some(self.resnet_time_scale_shift.as_str()),
                &["default", "scale_shift"],
            ),
        ];
        for (key, value, known) in choices {
            if let Some(v) = value
                && !known.contains(&v)
            {
                return bad(
                    key,
                    format!(
                        "`{v}` is not supported ({}, or null where diffusers allows it)",
                        known.join(", ")
                    ),
                );
            }
        }
        for (key, value, only) in [
            ("time_embedding_type", self.time_embedding_type.as_str(), "positional"),
            ("attention_type", self.attention_type.as_str(), "default"),
        ] {
            if value != only {
                return bad(key, format!("`{value}` is not supported (only `{only}`)"));
            }
        }
        if self.encoder_hid_dim.is_none() && self.encoder_hid_dim_type.is_some() {
            return bad("encoder_hid_dim", "has to be set with `encoder_hid_dim_type`".into());
        }
        for (key, k) in [("conv_in_kernel", self.conv_in_kernel), ("conv_out_kernel", self.conv_out_kernel)] {
            if k.is_multiple_of(2) {
                return bad(key, format!("{k}: only odd kernels are supported"));
            }
        }
        let groups = self.norm_num_groups.unwrap_or(1);
        let head_dims = self.attention_head_dim.resolve_for(n, "attention_head_dim")?;
        for (i, &c) in self.block_out_channels.iter().enumerate() {
            let d = head_dims[i];
            if groups == 0 || !c.is_multiple_of(groups) || d == 0 || !c.is_multiple_of(d) {
                return bad(
                    "block_out_channels",
                    format!("block {i}: {c} channels split into neither {groups} groups nor heads of {d}"),
                );
            }
        }
        if self.cross_attention_norm.is_some() && !self.cross_attention_dim.is_multiple_of(32) {
            return bad(
                "cross_attention_dim",
                "has to split into 32 groups for `cross_attention_norm`".into(),
            );
        }
        let text = self.encoder_hid_dim.unwrap_or(self.cross_attention_dim);
        if self.addition_embed_type.as_deref() == Some("text")
            && (self.addition_embed_type_num_heads == 0
                || !text.is_multiple_of(self.addition_embed_type_num_heads))
        {
            return bad(
                "addition_embed_type_num_heads",
                format!("{} heads do not split the text width {text}", self.addition_embed_type_num_heads),
            );
        }
        let per_block = self.layers_per_block.saturating_mul(2).saturating_add(2);
        config::check_layers("layers_per_block", per_block.saturating_mul(n))?;
        Ok(())
    }

    fn time_embed_dim(&self) -> usize {
        4 * self.block_out_channels[0]
    }

    fn only_cross(&self, i: usize) -> bool {
        match &self.only_cross_attention {
            Flags::All(b) => *b,
            Flags::Each(v) => v[i],
        }
    }

    fn resnet_options(&self, output_scale: f64, resample: Option<Resample>) -> ResnetOptions {
        ResnetOptions {
            gelu: self.act_fn == "gelu",
            scale_shift: self.resnet_time_scale_shift == "scale_shift",
            skip_time_act: self.resnet_skip_time_act,
            output_scale,
            resample,
        }
    }

    /// A randomly initialised (lazily materialised) UNet; the config must have passed
    /// [`Self::check`].
    pub fn init(&self, device: &Device) -> Result<IfUNet, ModelError> {
        let n = self.block_out_channels.len();
        let groups = self.norm_num_groups.unwrap_or(32);
        let eps = self.norm_eps;
        let temb = self.time_embed_dim();
        let c0 = self.block_out_channels[0];
        let head_dims = self.attention_head_dim.resolve_for(n, "attention_head_dim")?;
        let scale = self.resnet_out_scale_factor;
        let resnet = |c_in: usize, c_out: usize, scale: f64, resample: Option<Resample>| {
            ResnetBlock2D::init_with(
                c_in,
                c_out,
                Some(temb),
                groups,
                eps,
                self.resnet_options(scale, resample),
                device,
            )
        };
        let attn = |c: usize, head_dim: usize, only_cross: bool| {
            AddedKvAttention::init(
                c,
                head_dim,
                self.cross_attention_dim,
                groups,
                only_cross,
                self.cross_attention_norm.is_some(),
                device,
            )
        };
        let mut down_blocks = Vec::with_capacity(n);
        let mut c_out = c0;
        for (i, kind) in self.down_block_types.iter().enumerate() {
            let c_in = c_out;
            c_out = self.block_out_channels[i];
            let resnets = (0..self.layers_per_block)
                .map(|j| resnet(if j == 0 { c_in } else { c_out }, c_out, scale, None))
                .collect();
            let attentions = if kind == "SimpleCrossAttnDownBlock2D" {
                (0..self.layers_per_block).map(|_| attn(c_out, head_dims[i], self.only_cross(i))).collect()
            } else {
                Vec::new()
            };
            let samplers =
                if i + 1 < n { vec![resnet(c_out, c_out, scale, Some(Resample::Down))] } else { Vec::new() };
            down_blocks.push(IfBlock { resnets, attentions, samplers });
        }
        let c_mid = self.block_out_channels[n - 1];
        let mid_scale = self.mid_block_scale_factor;
        let mid_only_cross =
            self.mid_block_only_cross_attention.unwrap_or(match &self.only_cross_attention {
                Flags::All(b) => *b,
                Flags::Each(_) => false,
            });
        let mid_block = IfBlock {
            resnets: (0..2).map(|_| resnet(c_mid, c_mid, mid_scale, None)).collect(),
            attentions: vec![attn(c_mid, head_dims[n - 1], mid_only_cross)],
            samplers: Vec::new(),
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
                    resnet(input + skip, c_out, scale, None)
                })
                .collect();
            // diffusers: `attention_head_dim[i]` (not reversed) and the reversed
            // `only_cross_attention` for up block i.
            let attentions = if kind == "SimpleCrossAttnUpBlock2D" {
                (0..count).map(|_| attn(c_out, head_dims[i], self.only_cross(n - 1 - i))).collect()
            } else {
                Vec::new()
            };
            let samplers =
                if i + 1 < n { vec![resnet(c_out, c_out, scale, Some(Resample::Up))] } else { Vec::new() };
            up_blocks.push(IfBlock { resnets, attentions, samplers });
        }
        let text_dim = self.encoder_hid_dim.unwrap_or(self.cross_attention_dim);
        let text_image_proj = self.encoder_hid_dim_type.as_deref() == Some("text_image_proj");
        let text_image_embedding = self.addition_embed_type.as_deref() == Some("text_image");
        let cross = self.cross_attention_dim;
        let linear = |a, b| LinearConfig::new(a, b).init(device);
        Ok(IfUNet {
            conv_in: conv(self.in_channels, c0, self.conv_in_kernel, 1, device),
            time_embedding: Mlp::init(c0, temb, device),
            class_embedding: self.class_embed_type.as_ref().map(|_| Mlp::init(c0, temb, device)),
            encoder_hid_proj: self
                .encoder_hid_dim
                .filter(|_| !text_image_proj)
                .map(|d| LinearConfig::new(d, self.cross_attention_dim).init(device)),
            add_embedding: self
                .addition_embed_type
                .as_ref()
                .filter(|_| !text_image_embedding)
                .map(|_| TextTimeEmbedding::init(text_dim, temb, self.addition_embed_type_num_heads, device)),
            text_image_proj: text_image_proj.then(|| TextImageProjection {
                image_embeds: linear(cross, IMAGE_TEXT_EMBEDS * cross),
                text_proj: linear(text_dim, cross),
            }),
            text_image_embedding: text_image_embedding.then(|| TextImageTimeEmbedding {
                text_proj: linear(cross, temb),
                text_norm: LayerNormConfig::new(temb).init(device),
                image_proj: linear(cross, temb),
            }),
            down_blocks,
            mid_block,
            up_blocks,
            conv_norm_out: group_norm(groups, c0, eps, device),
            conv_out: conv(c0, self.out_channels, self.conv_out_kernel, 1, device),
            config: self.clone(),
        })
    }

    /// Builds the UNet of `json` and loads `checkpoint` (`diffusion_pytorch_model.safetensors`).
    pub fn load(json: &str, vars: Vars) -> Result<IfUNet, ModelError> {
        let mut unet = Self::from_json(json)?.init(vars.device())?;
        unet.load(vars)?;
        Ok(unet)
    }
}

impl PerBlock {
    /// One value per block (`attention_head_dim` as IF reads it: the head width).
    fn resolve_for(&self, blocks: usize, key: &str) -> Result<Vec<usize>, ModelError> {
        match self {
            Self::All(n) => Ok(vec![*n; blocks]),
            Self::Each(v) if v.len() == blocks => Ok(v.clone()),
            Self::Each(v) => {
                Err(ModelError::Unsupported(format!("`{key}` lists {} values for {blocks} blocks", v.len())))
            }
        }
    }
}

/// The activation of `act_fn` / `time_embedding_act_fn`: exact GELU or SiLU.
fn act<const D: usize>(name: &str, x: Tensor<D>) -> Tensor<D> {
    if name == "gelu" { gelu(x) } else { silu(x) }
}

/// `TimestepEmbedding`: `linear_2(act(linear_1(x)))` (`act_fn`).
#[derive(Module, Debug)]
pub struct Mlp {
    pub linear_1: Linear,
    pub linear_2: Linear,
}

impl Mlp {
    fn init(d_in: usize, d_out: usize, device: &Device) -> Self {
        Self {
            linear_1: LinearConfig::new(d_in, d_out).init(device),
            linear_2: LinearConfig::new(d_out, d_out).init(device),
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.linear_1, vars.pp("linear_1"))?;
        load_linear(&mut self.linear_2, vars.pp("linear_2"))
    }

    fn forward(&self, x: Tensor<2>, act_fn: &str) -> Tensor<2> {
        self.linear_2.forward(act(act_fn, self.linear_1.forward(x)))
    }
}

/// `TextImageProjection`'s `num_image_text_embeds` (diffusers' default; the UNet does not set it).
const IMAGE_TEXT_EMBEDS: usize = 10;

/// Kandinsky 2.1's `added_cond_kwargs`: one row per UNet batch row.
#[derive(Clone, Debug)]
pub struct TextImage {
    /// The pooled text embedding (M-CLIP's `LinearTransformation` output), `[batch,
    /// cross_attention_dim]`.
    pub text_embeds: Tensor<2>,
    /// The prior's image embedding, `[batch, cross_attention_dim]`.
    pub image_embeds: Tensor<2>,
}

/// `TextImageProjection` (`encoder_hid_proj`): `image_embeds` → 10 context tokens, `text_proj`.
#[derive(Module, Debug)]
pub struct TextImageProjection {
    pub image_embeds: Linear,
    pub text_proj: Linear,
}

/// `TextImageTimeEmbedding` (`add_embedding`): `image_proj(image) + text_norm(text_proj(text))`.
#[derive(Module, Debug)]
pub struct TextImageTimeEmbedding {
    pub text_proj: Linear,
    pub text_norm: LayerNorm,
    pub image_proj: Linear,
}

/// `TextTimeEmbedding` (`norm1`, `pool` = `AttentionPooling`, `proj`, `norm2`).
#[derive(Module, Debug)]
pub struct TextTimeEmbedding {
    pub norm1: LayerNorm,
    pub positional_embedding: Param<Tensor<2>>,
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub proj: Linear,
    pub norm2: LayerNorm,
    #[module(skip)]
    pub heads: usize,
}

impl TextTimeEmbedding {
    fn init(dim: usize, out: usize, heads: usize, device: &Device) -> Self {
        let lin = || LinearConfig::new(dim, dim).init(device);
        Self {
            norm1: LayerNormConfig::new(dim).init(device),
            positional_embedding: Param::from_tensor(Tensor::zeros([1, dim], device)),
            q_proj: lin(),
            k_proj: lin(),
            v_proj: lin(),
            proj: LinearConfig::new(dim, out).init(device),
            norm2: LayerNormConfig::new(out).init(device),
            heads,
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_layer_norm(&mut self.norm1, vars.pp("norm1"))?;
        let pool = vars.pp("pool");
        self.positional_embedding = pool.param("positional_embedding", &self.positional_embedding)?;
        load_linear(&mut self.q_proj, pool.pp("q_proj"))?;
        load_linear(&mut self.k_proj, pool.pp("k_proj"))?;
        load_linear(&mut self.v_proj, pool.pp("v_proj"))?;
        load_linear(&mut self.proj, vars.pp("proj"))?;
        load_layer_norm(&mut self.norm2, vars.pp("norm2"))
    }

    /// `[batch, tokens, dim]` → `[batch, out]`.
    fn forward(&self, x: Tensor<3>) -> Tensor<2> {
        let x = self.norm1.forward(x);
        let [b, len, w] = x.dims();
        let (h, d) = (self.heads, w / self.heads);
        let pos = self.positional_embedding.val().reshape([1, 1, w]);
        let class_token = x.clone().mean_dim(1) + pos;
        let x = Tensor::cat(vec![class_token.clone(), x], 1);
        let split = |t: Tensor<3>, n: usize| t.reshape([b, n, h, d]).swap_dims(1, 2);
        let scale = 1.0 / (d as f64).sqrt().sqrt();
        let q = split(self.q_proj.forward(class_token), 1).mul_scalar(scale);
        let k = split(self.k_proj.forward(x.clone()), len + 1).mul_scalar(scale);
        let v = split(self.v_proj.forward(x), len + 1);
        let weight = softmax(q.matmul(k.swap_dims(2, 3)), 3);
        let pooled = weight.matmul(v).reshape([b, w]);
        self.norm2.forward(self.proj.forward(pooled))
    }
}

/// diffusers' `Attention` with `added_kv_proj_dim` run by `AttnAddedKVProcessor2_0`.
#[derive(Module, Debug)]
pub struct AddedKvAttention {
    pub group_norm: GroupNorm,
    /// `norm_cross` (`cross_attention_norm: "group_norm"`, 32 groups over the text width).
    pub norm_cross: Option<GroupNorm>,
    pub to_q: Linear,
    /// `to_k` / `to_v` of the feature map (absent with `only_cross_attention`).
    pub to_k: Option<Linear>,
    pub to_v: Option<Linear>,
    pub add_k_proj: Linear,
    pub add_v_proj: Linear,
    pub to_out: Linear,
    #[module(skip)]
    pub heads: usize,
}

impl AddedKvAttention {
    fn init(
        c: usize,
        head_dim: usize,
        text_dim: usize,
        groups: usize,
        only_cross: bool,
        norm_cross: bool,
        device: &Device,
    ) -> Self {
        let heads = c / head_dim;
        let inner = heads * head_dim;
        let lin = |d_in: usize, d_out: usize| LinearConfig::new(d_in, d_out).init(device);
        Self {
            group_norm: group_norm(groups, c, 1e-5, device),
            norm_cross: norm_cross.then(|| group_norm(32, text_dim, 1e-5, device)),
            to_q: lin(c, inner),
            to_k: (!only_cross).then(|| lin(c, inner)),
            to_v: (!only_cross).then(|| lin(c, inner)),
            add_k_proj: lin(text_dim, inner),
            add_v_proj: lin(text_dim, inner),
            to_out: lin(inner, c),
            heads,
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_group_norm(&mut self.group_norm, vars.pp("group_norm"))?;
        if let Some(n) = &mut self.norm_cross {
            load_group_norm(n, vars.pp("norm_cross"))?;
        }
        load_linear(&mut self.to_q, vars.pp("to_q"))?;
        if let (Some(k), Some(v)) = (&mut self.to_k, &mut self.to_v) {
            load_linear(k, vars.pp("to_k"))?;
            load_linear(v, vars.pp("to_v"))?;
        }
        load_linear(&mut self.add_k_proj, vars.pp("add_k_proj"))?;
        load_linear(&mut self.add_v_proj, vars.pp("add_v_proj"))?;
        load_linear(&mut self.to_out, vars.pp("to_out.0"))
    }

    fn forward(&self, x: Tensor<4>, text: &Tensor<3>) -> Tensor<4> {
        let [b, c, h, w] = x.dims();
        let text = match &self.norm_cross {
            Some(norm) => norm.forward(text.clone().swap_dims(1, 2)).swap_dims(1, 2),
            None => text.clone(),
        };
        let tokens = self.group_norm.forward(x.clone()).reshape([b, c, h * w]).swap_dims(1, 2);
        let heads = self.heads;
        let split = |t: Tensor<3>| {
            let [b, n, inner] = t.dims();
            t.reshape([b, n, heads, inner / heads]).swap_dims(1, 2)
        };
        let q = split(self.to_q.forward(tokens.clone()));
        let mut k = split(self.add_k_proj.forward(text.clone()));
        let mut v = split(self.add_v_proj.forward(text));
        if let (Some(to_k), Some(to_v)) = (&self.to_k, &self.to_v) {
            k = Tensor::cat(vec![k, split(to_k.forward(tokens.clone()))], 2);
            v = Tensor::cat(vec![v, split(to_v.forward(tokens))], 2);
        }
        let options = AttentionModuleOptions { scale: None, softcap: None, is_causal: false };
        let out = attention(q, k, v, None, None, options);
        let [_, _, n, d] = out.dims();
        let out = self.to_out.forward(out.swap_dims(1, 2).reshape([b, n, heads * d]));
        out.swap_dims(1, 2).reshape([b, c, h, w]) + x
    }
}

/// One down, mid or up block: resnets (each followed by its attention when the block has
/// them) and the resampling resnet.
#[derive(Module, Debug)]
pub struct IfBlock {
    pub resnets: Vec<ResnetBlock2D>,
    pub attentions: Vec<AddedKvAttention>,
    /// `downsamplers.0` / `upsamplers.0`.
    pub samplers: Vec<ResnetBlock2D>,
}

impl IfBlock {
    fn load(&mut self, vars: Vars, sampler: &str) -> Result<(), WeightError> {
        for (i, r) in self.resnets.iter_mut().enumerate() {
            r.load(vars.pp("resnets").pp(i))?;
        }
        for (i, a) in self.attentions.iter_mut().enumerate() {
            a.load(vars.pp("attentions").pp(i))?;
        }
        for (i, s) in self.samplers.iter_mut().enumerate() {
            s.load(vars.pp(sampler).pp(i))?;
        }
        Ok(())
    }

    fn layer(&self, i: usize, x: Tensor<4>, temb: &Tensor<2>, text: &Tensor<3>) -> Tensor<4> {
        let x = self.resnets[i].forward(x, Some(temb));
        match self.attentions.get(i) {
            Some(attn) => attn.forward(x, text),
            None => x,
        }
    }
}

/// DeepFloyd IF's UNet: `sample` `[batch, in_channels, h, w]`, the T5 embeddings and (stage II)
/// the noise level → `[batch, out_channels, h, w]`.
#[derive(Module, Debug)]
pub struct IfUNet {
    pub conv_in: Conv2d,
    pub time_embedding: Mlp,
    /// `class_embedding` (`class_embed_type: "timestep"`, stage II).
    pub class_embedding: Option<Mlp>,
    pub encoder_hid_proj: Option<Linear>,
    /// `add_embedding` (`addition_embed_type: "text"`).
    pub add_embedding: Option<TextTimeEmbedding>,
    /// `encoder_hid_proj` of `encoder_hid_dim_type: "text_image_proj"` (Kandinsky 2.1).
    pub text_image_proj: Option<TextImageProjection>,
    /// `add_embedding` of `addition_embed_type: "text_image"` (Kandinsky 2.1).
    pub text_image_embedding: Option<TextImageTimeEmbedding>,
    pub down_blocks: Vec<IfBlock>,
    pub mid_block: IfBlock,
    pub up_blocks: Vec<IfBlock>,
    pub conv_norm_out: GroupNorm,
    pub conv_out: Conv2d,
    #[module(skip)]
    pub config: IfUNetConfig,
}

impl IfUNet {
    /// Loads every tensor of the UNet's state dict.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_conv2d(&mut self.conv_in, vars.pp("conv_in"))?;
        self.time_embedding.load(vars.pp("time_embedding"))?;
        if let Some(c) = &mut self.class_embedding {
            c.load(vars.pp("class_embedding"))?;
        }
        if let Some(p) = &mut self.encoder_hid_proj {
            load_linear(p, vars.pp("encoder_hid_proj"))?;
        }
        if let Some(a) = &mut self.add_embedding {
            a.load(vars.pp("add_embedding"))?;
        }
        if let Some(p) = &mut self.text_image_proj {
            load_linear(&mut p.image_embeds, vars.pp("encoder_hid_proj.image_embeds"))?;
            load_linear(&mut p.text_proj, vars.pp("encoder_hid_proj.text_proj"))?;
        }
        if let Some(a) = &mut self.text_image_embedding {
            load_linear(&mut a.text_proj, vars.pp("add_embedding.text_proj"))?;
            load_layer_norm(&mut a.text_norm, vars.pp("add_embedding.text_norm"))?;
            load_linear(&mut a.image_proj, vars.pp("add_embedding.image_proj"))?;
        }
        for (i, b) in self.down_blocks.iter_mut().enumerate() {
            b.load(vars.pp("down_blocks").pp(i), "downsamplers")?;
        }
        self.mid_block.load(vars.pp("mid_block"), "-")?;
        for (i, b) in self.up_blocks.iter_mut().enumerate() {
            b.load(vars.pp("up_blocks").pp(i), "upsamplers")?;
        }
        load_group_norm(&mut self.conv_norm_out, vars.pp("conv_norm_out"))?;
        load_conv2d(&mut self.conv_out, vars.pp("conv_out"))
    }

    /// The width the text embeddings must have (`encoder_hid_dim`, else `cross_attention_dim`).
    pub fn text_dim(&self) -> usize {
        self.config.encoder_hid_dim.unwrap_or(self.config.cross_attention_dim)
    }

    /// Whether the UNet takes `class_labels` (stage II's noise level).
    pub fn takes_class_labels(&self) -> bool {
        self.class_embedding.is_some()
    }

    /// `t` embedded as `time_proj` does, one row per batch row.
    fn proj(&self, t: f32, batch: usize, device: &Device) -> Tensor<2> {
        let c0 = self.config.block_out_channels[0];
        let emb = timestep_embedding(t, c0, self.config.flip_sin_to_cos, self.config.freq_shift);
        Tensor::<2>::from_data(TensorData::new(emb, [1, c0]), device).expand([batch, c0])
    }

    /// Whether the UNet takes Kandinsky 2.1's [`TextImage`] conditioning.
    pub fn takes_image_embeds(&self) -> bool {
        self.text_image_proj.is_some() || self.text_image_embedding.is_some()
    }

    /// One UNet call at timestep `t` (every row), text `[batch, tokens, text_dim]`, and the class
    /// label (noise level) every row shares when the UNet has a class embedding.
    pub fn forward(
        &self,
        sample: Tensor<4>,
        t: f32,
        text: &Tensor<3>,
        class_label: Option<f32>,
    ) -> Tensor<4> {
        self.forward_with(sample, t, text, class_label, None)
    }

    /// [`Self::forward`] with Kandinsky 2.1's image and pooled-text conditioning (`image` is
    /// required when [`Self::takes_image_embeds`]).
    pub fn forward_with(
        &self,
        sample: Tensor<4>,
        t: f32,
        text: &Tensor<3>,
        class_label: Option<f32>,
        image: Option<&TextImage>,
    ) -> Tensor<4> {
        assert!(
            image.is_some() || !self.takes_image_embeds(),
            "this UNet (text_image) needs the image embeddings"
        );
        let batch = sample.dims()[0];
        let device = sample.device();
        let act_fn = self.config.act_fn.as_str();
        let mut temb = self.time_embedding.forward(self.proj(t, batch, &device), act_fn);
        if let (Some(class), Some(label)) = (&self.class_embedding, class_label) {
            temb = temb + class.forward(self.proj(label, batch, &device), act_fn);
        }
        if let Some(add) = &self.add_embedding {
            temb = temb + add.forward(text.clone());
        }
        if let (Some(add), Some(image)) = (&self.text_image_embedding, image) {
            let text_part = add.text_norm.forward(add.text_proj.forward(image.text_embeds.clone()));
            temb = temb + (add.image_proj.forward(image.image_embeds.clone()) + text_part);
        }
        if let Some(name) = &self.config.time_embedding_act_fn {
            temb = act(name, temb);
        }
        let text = match (&self.encoder_hid_proj, &self.text_image_proj, image) {
            (Some(p), _, _) => p.forward(text.clone()),
            (None, Some(p), Some(image)) => {
                let [batch, _] = image.image_embeds.dims();
                let image_tokens = p.image_embeds.forward(image.image_embeds.clone()).reshape([
                    batch,
                    IMAGE_TEXT_EMBEDS,
                    self.config.cross_attention_dim,
                ]);
                Tensor::cat(vec![image_tokens, p.text_proj.forward(text.clone())], 1)
            }
            _ => text.clone(),
        };
        let mut x = self.conv_in.forward(sample);
        let mut skips = vec![x.clone()];
        for block in &self.down_blocks {
            for i in 0..block.resnets.len() {
                x = block.layer(i, x, &temb, &text);
                skips.push(x.clone());
            }
            for down in &block.samplers {
                x = down.forward(x, Some(&temb));
                skips.push(x.clone());
            }
        }
        let mid = &self.mid_block;
        x = mid.resnets[0].forward(x, Some(&temb));
        x = mid.attentions[0].forward(x, &text);
        x = mid.resnets[1].forward(x, Some(&temb));
        for block in &self.up_blocks {
            for i in 0..block.resnets.len() {
                let skip = skips.pop().expect("one skip connection per up resnet");
                x = block.layer(i, Tensor::cat(vec![x, skip], 1), &temb, &text);
            }
            for up in &block.samplers {
                x = up.forward(x, Some(&temb));
            }
        }
        self.conv_out.forward(act(act_fn, self.conv_norm_out.forward(x)))
    }
}
