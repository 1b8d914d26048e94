//! The decoder half of diffusers' `AutoencoderKL` (Stable Diffusion's VAE): `post_quant_conv`,
//! `decoder.conv_in`, a mid block of two resnets around one single-head self-attention,
//! `UpDecoderBlock2D`s with nearest-neighbour upsampling, and the output convolution. Latents
//! are divided by `scaling_factor` from `vae/config.json` before decoding (and `shift_factor`
//! added where the config has one: the 16-channel VAE of SD 3 and FLUX, whose pipelines decode
//! `latents / scaling_factor + shift_factor`; where it has per-channel `latents_mean` and
//! `latents_std` instead, Playground v2.5's, they become `latents · std / scaling_factor + mean`
//! as the SDXL pipeline decodes them), and the decoded image `[-1, 1]` is mapped to `[0, 1]` as
//! diffusers' `VaeImageProcessor.postprocess` does.
//!
//! [`VaeConfig`] mirrors `vae/config.json` field by field, preset to SD 1.5's VAE.

use burn::module::{Module, ModuleMapper, Param};
use burn::nn::conv::Conv2d;
use burn::nn::{GroupNorm, LinearConfig};
use burn::tensor::Device;
use burn::tensor::{DType, FloatDType, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::blocks::{ResnetBlock2D, Upsample2D, conv, group_norm};
use super::unet::ATTENTION_KEYS;
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::conv::conv2d;
use culturelens_models::norm::group_norm_act;
use culturelens_models::vit::{AttendOptions, Attention};
use culturelens_models::weights::{Vars, WeightError, load_conv2d, load_group_norm};

/// `vae/config.json` of an `AutoencoderKL`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VaeConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub down_block_types: Vec<String>,
    pub up_block_types: Vec<String>,
    pub block_out_channels: Vec<usize>,
    pub layers_per_block: usize,
    pub act_fn: String,
    pub latent_channels: usize,
    pub norm_num_groups: usize,
    pub sample_size: usize,
    pub scaling_factor: f64,
    pub shift_factor: Option<f64>,
    pub latents_mean: Option<Vec<f64>>,
    pub latents_std: Option<Vec<f64>>,
    pub force_upcast: bool,
    pub use_quant_conv: bool,
    pub use_post_quant_conv: bool,
    pub mid_block_add_attention: bool,
}

impl VaeConfig {
    /// The VAE of `runwayml/stable-diffusion-v1-5` (SD 2.x ships the same one); the values of
    /// every key a `config.json` leaves out are diffusers' class defaults where SD sets none.
    pub fn stable_diffusion_v1_5() -> Self {
        Self {
            in_channels: 3,
            out_channels: 3,
            down_block_types: vec!["DownEncoderBlock2D".into(); 4],
            up_block_types: vec!["UpDecoderBlock2D".into(); 4],
            block_out_channels: vec![128, 256, 512, 512],
            layers_per_block: 2,
            act_fn: "silu".into(),
            latent_channels: 4,
            norm_num_groups: 32,
            sample_size: 512,
            scaling_factor: 0.18215,
            shift_factor: None,
            latents_mean: None,
            latents_std: None,
            force_upcast: true,
            use_quant_conv: true,
            use_post_quant_conv: true,
            mid_block_add_attention: true,
        }
    }

    /// Reads `config.json` over [`Self::stable_diffusion_v1_5`] and refuses what the decoder does not have.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::stable_diffusion_v1_5(), &[])?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if c.block_out_channels.is_empty() || c.up_block_types.len() != c.block_out_channels.len() {
            return bad("up_block_types", "needs one entry per block_out_channels entry".into());
        }
        // The decoder builds `layers_per_block + 1` resnets per block.
        let layers = c.block_out_channels.len().saturating_mul(c.layers_per_block.saturating_add(1));
        config::check_layers("layers_per_block", layers)?;
        if let Some(t) = c.up_block_types.iter().find(|t| *t != "UpDecoderBlock2D") {
            return bad("up_block_types", format!("`{t}` is not supported (UpDecoderBlock2D)"));
        }
        if c.act_fn != "silu" {
            return bad("act_fn", format!("`{}` is not supported (silu)", c.act_fn));
        }
        if c.shift_factor.is_some() && c.latents_mean.is_some() {
            return bad("shift_factor", "and latents_mean both set: no pipeline reads both".into());
        }
        match (&c.latents_mean, &c.latents_std) {
            (None, None) => {}
            (Some(mean), Some(std)) if mean.len() == c.latent_channels && std.len() == c.latent_channels => {}
            (Some(_), Some(_)) => {
                return bad(
                    "latents_mean",
                    format!(
                        "latents_mean and latents_std need latent_channels = {} values each",
                        c.latent_channels
                    ),
                );
            }
            (Some(_), None) => return bad("latents_std", "missing while latents_mean is set".into()),
            (None, Some(_)) => return bad("latents_mean", "missing while latents_std is set".into()),
        }
        if let Some(&ch) = c.block_out_channels.iter().find(|&&ch| !ch.is_multiple_of(c.norm_num_groups)) {
            return bad(
                "norm_num_groups",
                format!("{ch} channels do not split into {} groups", c.norm_num_groups),
            );
        }
        Ok(c)
    }

    /// How much smaller the latents are than the image (`2^(blocks − 1)`).
    pub fn scale_factor(&self) -> usize {
        1 << (self.block_out_channels.len() - 1)
    }

    /// A randomly initialised (lazily materialised) decoder.
    pub fn init(&self, device: &Device) -> VaeDecoder {
        let (groups, eps) = (self.norm_num_groups, 1e-6);
        let reversed: Vec<usize> = self.block_out_channels.iter().rev().copied().collect();
        let top = reversed[0];
        let latent = self.latent_channels;
        let resnet = |c_in, c_out| ResnetBlock2D::init(c_in, c_out, None, groups, eps, device);
        let mut up_blocks = Vec::new();
        let mut c_out = top;
        for (i, &channels) in reversed.iter().enumerate() {
            let c_prev = c_out;
            c_out = channels;
            up_blocks.push(UpDecoderBlock {
                resnets: (0..=self.layers_per_block)
                    .map(|j| resnet(if j == 0 { c_prev } else { c_out }, c_out))
                    .collect(),
                upsamplers: if i + 1 < reversed.len() {
                    vec![Upsample2D::init(c_out, device)]
                } else {
                    Vec::new()
                },
            });
        }
        let attention = self.mid_block_add_attention.then(|| MidAttention {
            group_norm: group_norm(groups, top, eps, device),
            attention: Attention {
                q_proj: LinearConfig::new(top, top).init(device),
                k_proj: LinearConfig::new(top, top).init(device),
                v_proj: LinearConfig::new(top, top).init(device),
                out_proj: LinearConfig::new(top, top).init(device),
                num_heads: 1,
            },
        });
        let c0 = self.block_out_channels[0];
        VaeDecoder {
            post_quant_conv: self.use_post_quant_conv.then(|| conv(latent, latent, 1, 1, device)),
            conv_in: conv(latent, top, 3, 1, device),
            mid_resnets: vec![resnet(top, top), resnet(top, top)],
            mid_attention: attention,
            up_blocks,
            conv_norm_out: group_norm(groups, c0, eps, device),
            conv_out: conv(c0, self.out_channels, 3, 1, device),
            scaling_factor: self.scaling_factor,
            shift_factor: self.shift_factor,
            latents_mean_std: self.latents_mean.as_ref().zip(self.latents_std.as_ref()).map(|(mean, std)| {
                let floats = |v: &Vec<f64>| v.iter().map(|&x| x as f32).collect();
                (floats(mean), floats(std))
            }),
            force_upcast: self.force_upcast,
            scale_factor: self.scale_factor(),
            latent_channels: latent,
            sliced_attention: false,
        }
    }

    /// Builds the decoder of `json` and loads it from the VAE's state dict (the encoder's
    /// tensors are not read).
    pub fn load(json: &str, vars: Vars) -> Result<VaeDecoder, ModelError> {
        let mut vae = Self::from_json(json)?.init(vars.device());
        vae.load(vars)?;
        Ok(vae)
    }
}

/// The mid block's `Attention` with its own group norm (diffusers' `_from_deprecated_attn_block`
/// layout: one head over all channels, biased projections, residual added).
#[derive(Module, Debug)]
pub struct MidAttention {
    pub group_norm: GroupNorm,
    pub attention: Attention,
}

/// `UpDecoderBlock2D`.
#[derive(Module, Debug)]
pub struct UpDecoderBlock {
    pub resnets: Vec<ResnetBlock2D>,
    pub upsamplers: Vec<Upsample2D>,
}

/// `post_quant_conv` and `decoder.*` of an `AutoencoderKL`.
#[derive(Module, Debug)]
pub struct VaeDecoder {
    pub post_quant_conv: Option<Conv2d>,
    pub conv_in: Conv2d,
    pub mid_resnets: Vec<ResnetBlock2D>,
    pub mid_attention: Option<MidAttention>,
    pub up_blocks: Vec<UpDecoderBlock>,
    pub conv_norm_out: GroupNorm,
    pub conv_out: Conv2d,
    #[module(skip)]
    pub scaling_factor: f64,
    /// `shift_factor` (SD 3, FLUX), added after the scaling.
    #[module(skip)]
    pub shift_factor: Option<f64>,
    /// `latents_mean` and `latents_std`, float32 (Playground v2.5's VAE).
    #[module(skip)]
    pub latents_mean_std: Option<(Vec<f32>, Vec<f32>)>,
    /// `force_upcast`: the SDXL pipeline decodes in float32 when the VAE is float16.
    #[module(skip)]
    pub force_upcast: bool,
    /// How much smaller the latents are than the image ([`VaeConfig::scale_factor`]).
    #[module(skip)]
    pub scale_factor: usize,
    #[module(skip)]
    pub latent_channels: usize,
    /// Attention slicing: the mid block's one-head attention is computed image by image
    /// (diffusers slices only the UNet; its VAE attends over all images at once).
    #[module(skip)]
    pub sliced_attention: bool,
}

impl VaeDecoder {
    /// The float type the decoder's weights are stored in.
    pub fn dtype(&self) -> DType {
        self.conv_out.weight.val().dtype()
    }

    /// The decoder with its weights in float32 (diffusers' `vae.to(torch.float32)`, which the SDXL
    /// pipeline does for a half-precision VAE with `force_upcast`): each half-precision weight
    /// widened exactly.
    pub fn upcast(self) -> Self {
        /// Casts every float parameter to float32.
        struct ToF32;
        impl ModuleMapper for ToF32 {
            fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
                param.map(|t| t.cast(FloatDType::F32))
            }
        }
        self.map(&mut ToF32)
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        if let Some(c) = &mut self.post_quant_conv {
            load_conv2d(c, vars.pp("post_quant_conv"))?;
        }
        let dec = vars.pp("decoder");
        load_conv2d(&mut self.conv_in, dec.pp("conv_in"))?;
        let mid = dec.pp("mid_block");
        for (i, r) in self.mid_resnets.iter_mut().enumerate() {
            r.load(mid.pp("resnets").pp(i))?;
        }
        if let Some(a) = &mut self.mid_attention {
            let vars = mid.pp("attentions.0");
            load_group_norm(&mut a.group_norm, vars.pp("group_norm"))?;
            a.attention.load(&vars, ATTENTION_KEYS)?;
        }
        for (i, block) in self.up_blocks.iter_mut().enumerate() {
            let vars = dec.pp("up_blocks").pp(i);
            for (j, r) in block.resnets.iter_mut().enumerate() {
                r.load(vars.pp("resnets").pp(j))?;
            }
            for (j, u) in block.upsamplers.iter_mut().enumerate() {
                u.load(vars.pp("upsamplers").pp(j))?;
            }
        }
        load_group_norm(&mut self.conv_norm_out, dec.pp("conv_norm_out"))?;
        load_conv2d(&mut self.conv_out, dec.pp("conv_out"))
    }

    /// `vae.decode(latents / scaling_factor [+ shift_factor])` (`latents · std / scaling_factor
    /// + mean` with per-channel statistics), postprocessed: `[batch, 3, H, W]` in `[0, 1]`.
    pub fn decode(&self, latents: Tensor<4>) -> Tensor<4> {
        let mut x = match &self.latents_mean_std {
            None => latents / self.scaling_factor,
            Some((mean, std)) => {
                // In the latents' float type, as diffusers' `.to(latents.device, latents.dtype)`.
                let (device, dtype) = (latents.device(), latents.dtype());
                let channel = |v: &Vec<f32>| {
                    Tensor::<4>::from_data(TensorData::new(v.clone(), [1, v.len(), 1, 1]), (&device, dtype))
                };
                (latents * channel(std)) / self.scaling_factor + channel(mean)
            }
        };
        if let Some(shift) = self.shift_factor {
            x = x + shift;
        }
        if let Some(c) = &self.post_quant_conv {
            x = c.forward(x);
        }
        x = conv2d(&self.conv_in, x);
        x = self.mid_resnets[0].forward(x, None);
        if let Some(a) = &self.mid_attention {
            let [b, c, h, w] = x.dims();
            let tokens =
                group_norm_act(&a.group_norm, x.clone(), false).reshape([b, c, h * w]).swap_dims(1, 2);
            let q = a.attention.q_proj.forward(tokens.clone());
            let how = AttendOptions { slice: self.sliced_attention.then_some(1), ..AttendOptions::default() };
            let out = a.attention.attend_with(q, tokens, how);
            x = out.swap_dims(1, 2).reshape([b, c, h, w]) + x;
        }
        x = self.mid_resnets[1].forward(x, None);
        for block in &self.up_blocks {
            for r in &block.resnets {
                x = r.forward(x, None);
            }
            for u in &block.upsamplers {
                x = u.forward(x, None);
            }
        }
        let x = conv2d(&self.conv_out, group_norm_act(&self.conv_norm_out, x, true));
        (x / 2.0 + 0.5).clamp(0.0, 1.0)
    }
}
