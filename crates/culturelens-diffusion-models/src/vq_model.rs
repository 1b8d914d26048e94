//! The decoder half of diffusers' `VQModel` (the MoVQ of Kandinsky 2.1, 2.2 and 3), as
//! `movq.decode(latents, force_not_quantize=True)` runs it: the latents are used as they are
//! (no codebook lookup, no scaling), `post_quant_conv`, then the decoder (`decoder.conv_in`, a
//! mid block of two resnets around one single-head self-attention, `UpDecoderBlock2D` /
//! `AttnUpDecoderBlock2D` blocks with nearest-neighbour upsampling, the output norm and
//! convolution). The result is the decoder's raw output (`[-1, 1]` in training); the pipelines
//! postprocess it themselves.
//!
//! - **`norm_type: "spatial"`** (MoVQ, Zheng et al. 2022): every norm of the decoder (the
//!   resnets' `norm1`/`norm2`, the attentions' `spatial_norm`, `conv_norm_out`) is diffusers'
//!   `SpatialNorm`, `GroupNorm(32, C, eps=1e-6)(f) · conv_y(zq) + conv_b(zq)` with `zq` the
//!   *quantized latents* (the decoder's input before `post_quant_conv`) resized to `f`'s size by
//!   nearest-neighbour (`F.interpolate(mode="nearest")`); the resnets are
//!   `ResnetBlockCondNorm2D`. 32 groups are fixed by diffusers whatever `norm_num_groups` says.
//! - **`norm_type: "group"`**: the plain `ResnetBlock2D` / group norms of [`crate::blocks`], as
//!   the `AutoencoderKL` decoder ([`crate::vae`]) has them (`norm_num_groups`, eps 1e-6), and the
//!   attentions' `group_norm`.
//! - `lookup_from_codebook: true` is refused (`decode` would index the codebook with the
//!   latents, which Kandinsky's pipelines pass as floats); `force_upcast` is read and unused
//!   (`VQModel.decode` does not read it). `scaling_factor` is not applied (the Kandinsky
//!   pipelines decode the latents unscaled).
//!
//! [`VqModelConfig`] mirrors `movq/config.json` over diffusers' `VQModel` class defaults.

use burn::module::Module;
use burn::nn::GroupNorm;
use burn::nn::LinearConfig;
use burn::nn::conv::Conv2d;
use burn::tensor::activation::silu;
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

use super::blocks::{ResnetBlock2D, Upsample2D, conv, group_norm, nearest};
use super::unet::ATTENTION_KEYS;
use culturelens_models::ModelError;
use culturelens_models::config;
use culturelens_models::vit::{AttendOptions, Attention};
use culturelens_models::weights::{Vars, WeightError, load_conv2d, load_group_norm};

/// `movq/config.json` of a `VQModel` (the decoder's keys and the ones it must check).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VqModelConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub down_block_types: Vec<String>,
    pub up_block_types: Vec<String>,
    pub block_out_channels: Vec<usize>,
    pub layers_per_block: usize,
    pub act_fn: String,
    pub latent_channels: usize,
    pub sample_size: usize,
    pub num_vq_embeddings: usize,
    pub norm_num_groups: usize,
    pub vq_embed_dim: Option<usize>,
    pub scaling_factor: f64,
    pub norm_type: String,
    pub mid_block_add_attention: bool,
    pub lookup_from_codebook: bool,
    pub force_upcast: bool,
}

/// `SpatialNorm`'s fixed group count.
const SPATIAL_GROUPS: usize = 32;

impl VqModelConfig {
    /// diffusers' `VQModel.__init__` defaults.
    pub fn class_defaults() -> Self {
        Self {
            in_channels: 3,
            out_channels: 3,
            down_block_types: vec!["DownEncoderBlock2D".into()],
            up_block_types: vec!["UpDecoderBlock2D".into()],
            block_out_channels: vec![64],
            layers_per_block: 1,
            act_fn: "silu".into(),
            latent_channels: 3,
            sample_size: 32,
            num_vq_embeddings: 256,
            norm_num_groups: 32,
            vq_embed_dim: None,
            scaling_factor: 0.18215,
            norm_type: "group".into(),
            mid_block_add_attention: true,
            lookup_from_codebook: false,
            force_upcast: false,
        }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and refuses what the decoder does not
    /// have, naming the key.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if c.block_out_channels.is_empty() || c.up_block_types.len() != c.block_out_channels.len() {
            return bad("up_block_types", "needs one entry per block_out_channels entry".into());
        }
        let layers = c.block_out_channels.len().saturating_mul(c.layers_per_block.saturating_add(1));
        config::check_layers("layers_per_block", layers)?;
        if let Some(t) = c
            .up_block_types
            .iter()
            .find(|t| !matches!(t.as_str(), "UpDecoderBlock2D" | "AttnUpDecoderBlock2D"))
        {
            return bad(
                "up_block_types",
                format!("`{t}` is not supported (UpDecoderBlock2D, AttnUpDecoderBlock2D)"),
            );
        }
        if c.act_fn != "silu" {
            return bad("act_fn", format!("`{}` is not supported (silu)", c.act_fn));
        }
        if c.lookup_from_codebook {
            return bad(
                "lookup_from_codebook",
                "true is not supported (the pipelines decode float latents with force_not_quantize)".into(),
            );
        }
        if c.latent_channels == 0 || c.out_channels == 0 || c.vq_embed_dim() == 0 {
            return bad(
                "latent_channels",
                "latent_channels, vq_embed_dim and out_channels must be positive".into(),
            );
        }
        let groups = match c.norm_type.as_str() {
            "group" => c.norm_num_groups,
            "spatial" => {
                // SpatialNorm's convolutions take `latent_channels` inputs and are fed the
                // quantized latents, which have `vq_embed_dim` channels.
                if c.vq_embed_dim() != c.latent_channels {
                    return bad(
                        "vq_embed_dim",
                        format!(
                            "{} differs from latent_channels {}: the spatial norms read the quantized latents",
                            c.vq_embed_dim(),
                            c.latent_channels
                        ),
                    );
                }
                SPATIAL_GROUPS
            }
            other => return bad("norm_type", format!("`{other}` is not supported (group, spatial)")),
        };
        if let Some(&ch) = c.block_out_channels.iter().find(|&&ch| groups == 0 || !ch.is_multiple_of(groups))
        {
            let key = if c.norm_type == "spatial" { "block_out_channels" } else { "norm_num_groups" };
            return bad(key, format!("{ch} channels do not split into {groups} groups"));
        }
        Ok(c)
    }

    /// `vq_embed_dim`, `latent_channels` when unset: the channels of the latents `decode` takes.
    pub fn vq_embed_dim(&self) -> usize {
        self.vq_embed_dim.unwrap_or(self.latent_channels)
    }

    /// How much larger the image is than the latents (`2^(blocks − 1)`).
    pub fn scale_factor(&self) -> usize {
        1 << (self.block_out_channels.len() - 1)
    }

    /// A randomly initialised (lazily materialised) decoder.
    pub fn init(&self, device: &Device) -> VqDecoder {
        let spatial = self.norm_type == "spatial";
        let groups = self.norm_num_groups;
        let latent = self.latent_channels;
        let norm = |c: usize| CondNorm::init(c, spatial.then_some(latent), groups, device);
        let resnet = |c_in: usize, c_out: usize| {
            VqResnet::init(c_in, c_out, spatial.then_some(latent), groups, device)
        };
        let attention = |c: usize| VqAttention {
            norm: norm(c),
            attention: Attention {
                q_proj: LinearConfig::new(c, c).init(device),
                k_proj: LinearConfig::new(c, c).init(device),
                v_proj: LinearConfig::new(c, c).init(device),
                out_proj: LinearConfig::new(c, c).init(device),
                num_heads: 1,
            },
        };
        let reversed: Vec<usize> = self.block_out_channels.iter().rev().copied().collect();
        let top = reversed[0];
        let mut up_blocks = Vec::new();
        let mut c_out = top;
        for (i, &channels) in reversed.iter().enumerate() {
            let c_prev = c_out;
            c_out = channels;
            let n = self.layers_per_block + 1;
            let with_attention = self.up_block_types[i] == "AttnUpDecoderBlock2D";
            up_blocks.push(VqUpBlock {
                resnets: (0..n).map(|j| resnet(if j == 0 { c_prev } else { c_out }, c_out)).collect(),
                attentions: if with_attention {
                    (0..n).map(|_| attention(c_out)).collect()
                } else {
                    Vec::new()
                },
                upsamplers: if i + 1 < reversed.len() {
                    vec![Upsample2D::init(c_out, device)]
                } else {
                    Vec::new()
                },
            });
        }
        let c0 = self.block_out_channels[0];
        VqDecoder {
            post_quant_conv: conv(self.vq_embed_dim(), latent, 1, 1, device),
            conv_in: conv(latent, top, 3, 1, device),
            mid_resnets: vec![resnet(top, top), resnet(top, top)],
            mid_attention: self.mid_block_add_attention.then(|| attention(top)),
            up_blocks,
            conv_norm_out: norm(c0),
            conv_out: conv(c0, self.out_channels, 3, 1, device),
            scale_factor: self.scale_factor(),
            latent_channels: self.vq_embed_dim(),
        }
    }

    /// Builds the decoder of `json` and loads it from the `VQModel`'s state dict (the encoder's
    /// and codebook's tensors are not read).
    pub fn load(json: &str, vars: Vars) -> Result<VqDecoder, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// diffusers' `SpatialNorm`: `norm_layer(f) · conv_y(zq) + conv_b(zq)`, `zq` resized to `f`.
#[derive(Module, Debug)]
pub struct SpatialNorm {
    pub norm_layer: GroupNorm,
    pub conv_y: Conv2d,
    pub conv_b: Conv2d,
}

impl SpatialNorm {
    pub fn init(channels: usize, zq_channels: usize, device: &Device) -> Self {
        Self {
            norm_layer: group_norm(SPATIAL_GROUPS, channels, 1e-6, device),
            conv_y: conv(zq_channels, channels, 1, 1, device),
            conv_b: conv(zq_channels, channels, 1, 1, device),
        }
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_group_norm(&mut self.norm_layer, vars.pp("norm_layer"))?;
        load_conv2d(&mut self.conv_y, vars.pp("conv_y"))?;
        load_conv2d(&mut self.conv_b, vars.pp("conv_b"))
    }

    pub fn forward(&self, f: Tensor<4>, zq: &Tensor<4>) -> Tensor<4> {
        let [_, _, h, w] = f.dims();
        let zq = nearest(zq.clone(), [h, w]);
        self.norm_layer.forward(f) * self.conv_y.forward(zq.clone()) + self.conv_b.forward(zq)
    }
}

/// A decoder norm: a [`SpatialNorm`] (`norm_type: "spatial"`) or a plain group norm.
#[derive(Module, Debug)]
pub struct CondNorm {
    pub spatial: Option<SpatialNorm>,
    pub group: Option<GroupNorm>,
}

impl CondNorm {
    /// `zq_channels`: the spatial norm's condition width, `None` for a group norm.
    fn init(channels: usize, zq_channels: Option<usize>, groups: usize, device: &Device) -> Self {
        match zq_channels {
            Some(zq) => Self { spatial: Some(SpatialNorm::init(channels, zq, device)), group: None },
            None => Self { spatial: None, group: Some(group_norm(groups, channels, 1e-6, device)) },
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        if let Some(s) = &mut self.spatial {
            s.load(vars.clone())?;
        }
        if let Some(g) = &mut self.group {
            load_group_norm(g, vars)?;
        }
        Ok(())
    }

    fn forward(&self, x: Tensor<4>, zq: &Tensor<4>) -> Tensor<4> {
        match (&self.spatial, &self.group) {
            (Some(s), _) => s.forward(x, zq),
            (None, Some(g)) => g.forward(x),
            (None, None) => x,
        }
    }
}

/// `ResnetBlockCondNorm2D` with spatial norms, or the plain `ResnetBlock2D` of
/// [`crate::blocks`] (the same math with group norms): `shortcut(x) +
/// conv2(silu(norm2(conv1(silu(norm1(x))))))`.
#[derive(Module, Debug)]
pub struct VqResnet {
    pub plain: Option<ResnetBlock2D>,
    pub norm1: Option<SpatialNorm>,
    pub conv1: Option<Conv2d>,
    pub norm2: Option<SpatialNorm>,
    pub conv2: Option<Conv2d>,
    pub conv_shortcut: Option<Conv2d>,
}

impl VqResnet {
    fn init(c_in: usize, c_out: usize, zq: Option<usize>, groups: usize, device: &Device) -> Self {
        match zq {
            None => Self {
                plain: Some(ResnetBlock2D::init(c_in, c_out, None, groups, 1e-6, device)),
                norm1: None,
                conv1: None,
                norm2: None,
                conv2: None,
                conv_shortcut: None,
            },
            Some(zq) => Self {
                plain: None,
                norm1: Some(SpatialNorm::init(c_in, zq, device)),
                conv1: Some(conv(c_in, c_out, 3, 1, device)),
                norm2: Some(SpatialNorm::init(c_out, zq, device)),
                conv2: Some(conv(c_out, c_out, 3, 1, device)),
                conv_shortcut: (c_in != c_out).then(|| conv(c_in, c_out, 1, 1, device)),
            },
        }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        if let Some(plain) = &mut self.plain {
            return plain.load(vars);
        }
        for (norm, name) in [(&mut self.norm1, "norm1"), (&mut self.norm2, "norm2")] {
            if let Some(n) = norm {
                n.load(vars.pp(name))?;
            }
        }
        for (c, name) in [
            (&mut self.conv1, "conv1"),
            (&mut self.conv2, "conv2"),
            (&mut self.conv_shortcut, "conv_shortcut"),
        ] {
            if let Some(c) = c {
                load_conv2d(c, vars.pp(name))?;
            }
        }
        Ok(())
    }

    fn forward(&self, x: Tensor<4>, zq: &Tensor<4>) -> Tensor<4> {
        if let Some(plain) = &self.plain {
            return plain.forward(x, None);
        }
        let (Some(norm1), Some(conv1), Some(norm2), Some(conv2)) =
            (&self.norm1, &self.conv1, &self.norm2, &self.conv2)
        else {
            unreachable!("a spatial resnet has both norms and convolutions")
        };
        let h = conv1.forward(silu(norm1.forward(x.clone(), zq)));
        let h = conv2.forward(silu(norm2.forward(h, zq)));
        let x = match &self.conv_shortcut {
            Some(shortcut) => shortcut.forward(x),
            None => x,
        };
        x + h
    }
}

/// The decoder's `Attention` (`_from_deprecated_attn_block`: one head over all channels,
/// biased projections, residual added) with its norm (`spatial_norm` or `group_norm`).
#[derive(Module, Debug)]
pub struct VqAttention {
    pub norm: CondNorm,
    pub attention: Attention,
}

impl VqAttention {
    fn load(&mut self, vars: Vars, spatial: bool) -> Result<(), WeightError> {
        self.norm.load(vars.pp(if spatial { "spatial_norm" } else { "group_norm" }))?;
        self.attention.load(&vars, ATTENTION_KEYS)
    }

    fn forward(&self, x: Tensor<4>, zq: &Tensor<4>) -> Tensor<4> {
        let [b, c, h, w] = x.dims();
        let tokens = self.norm.forward(x.clone(), zq).reshape([b, c, h * w]).swap_dims(1, 2);
        let q = self.attention.q_proj.forward(tokens.clone());
        let out = self.attention.attend_with(q, tokens, AttendOptions::default());
        out.swap_dims(1, 2).reshape([b, c, h, w]) + x
    }
}

/// `UpDecoderBlock2D` (no attentions) or `AttnUpDecoderBlock2D` (one after each resnet).
#[derive(Module, Debug)]
pub struct VqUpBlock {
    pub resnets: Vec<VqResnet>,
    pub attentions: Vec<VqAttention>,
    pub upsamplers: Vec<Upsample2D>,
}

/// `post_quant_conv` and `decoder.*` of a `VQModel`.
#[derive(Module, Debug)]
pub struct VqDecoder {
    pub post_quant_conv: Conv2d,
    pub conv_in: Conv2d,
    pub mid_resnets: Vec<VqResnet>,
    pub mid_attention: Option<VqAttention>,
    pub up_blocks: Vec<VqUpBlock>,
    pub conv_norm_out: CondNorm,
    pub conv_out: Conv2d,
    /// How much larger the image is than the latents ([`VqModelConfig::scale_factor`]).
    #[module(skip)]
    pub scale_factor: usize,
    /// The channels of the latents `decode` takes (`vq_embed_dim`).
    #[module(skip)]
    pub latent_channels: usize,
}

impl VqDecoder {
    fn spatial(&self) -> bool {
        self.conv_norm_out.spatial.is_some()
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let spatial = self.spatial();
        load_conv2d(&mut self.post_quant_conv, vars.pp("post_quant_conv"))?;
        let dec = vars.pp("decoder");
        load_conv2d(&mut self.conv_in, dec.pp("conv_in"))?;
        let mid = dec.pp("mid_block");
        for (i, r) in self.mid_resnets.iter_mut().enumerate() {
            r.load(mid.pp("resnets").pp(i))?;
        }
        if let Some(a) = &mut self.mid_attention {
            a.load(mid.pp("attentions.0"), spatial)?;
        }
        for (i, block) in self.up_blocks.iter_mut().enumerate() {
            let vars = dec.pp("up_blocks").pp(i);
            for (j, r) in block.resnets.iter_mut().enumerate() {
                r.load(vars.pp("resnets").pp(j))?;
            }
            for (j, a) in block.attentions.iter_mut().enumerate() {
                a.load(vars.pp("attentions").pp(j), spatial)?;
            }
            for (j, u) in block.upsamplers.iter_mut().enumerate() {
                u.load(vars.pp("upsamplers").pp(j))?;
            }
        }
        self.conv_norm_out.load(dec.pp("conv_norm_out"))?;
        load_conv2d(&mut self.conv_out, dec.pp("conv_out"))
    }

    /// `movq.decode(latents, force_not_quantize=True).sample`: `[batch, out_channels, H, W]`,
    /// not postprocessed.
    pub fn decode(&self, latents: Tensor<4>) -> Tensor<4> {
        let zq = latents;
        let mut x = self.conv_in.forward(self.post_quant_conv.forward(zq.clone()));
        x = self.mid_resnets[0].forward(x, &zq);
        if let Some(a) = &self.mid_attention {
            x = a.forward(x, &zq);
        }
        x = self.mid_resnets[1].forward(x, &zq);
        for block in &self.up_blocks {
            for (j, r) in block.resnets.iter().enumerate() {
                x = r.forward(x, &zq);
                if let Some(a) = block.attentions.get(j) {
                    x = a.forward(x, &zq);
                }
            }
            for u in &block.upsamplers {
                x = u.forward(x, None);
            }
        }
        self.conv_out.forward(silu(self.conv_norm_out.forward(x, &zq)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spatial_norms_need_32_groups_and_the_latent_width() {
        let json = |extra: &str| {
            format!(
                r#"{{"block_out_channels": [32, 64], "up_block_types": ["AttnUpDecoderBlock2D", "UpDecoderBlock2D"],
                "latent_channels": 4, "vq_embed_dim": 4, "norm_type": "spatial"{extra}}}"#
            )
        };
        let c = VqModelConfig::from_json(&json("")).unwrap();
        assert_eq!((c.scale_factor(), c.vq_embed_dim()), (2, 4));
        let decoder = c.init(&Device::flex());
        assert_eq!(
            decoder.up_blocks[0].attentions.len(),
            2,
            "one attention per resnet (layers_per_block + 1)"
        );
        assert!(decoder.up_blocks[1].attentions.is_empty());
        let e =
            VqModelConfig::from_json(&json(r#", "block_out_channels": [48, 64]"#)).unwrap_err().to_string();
        assert!(e.contains("`block_out_channels`") && e.contains("32 groups"), "{e}");
        let e = VqModelConfig::from_json(&json(r#", "up_block_types": ["UpBlock2D", "UpDecoderBlock2D"]"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`up_block_types`"), "{e}");
        let e = VqModelConfig::from_json(&json(r#", "vq_embed_dim": 3"#)).unwrap_err().to_string();
        assert!(e.contains("`vq_embed_dim`"), "{e}");
    }
}
