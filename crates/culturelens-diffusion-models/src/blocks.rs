//! The convolutional pieces diffusers' `UNet2DConditionModel` and `AutoencoderKL` share
//! (`diffusers.models.resnet`, `downsampling`, `upsampling`): `ResnetBlock2D` with its optional
//! time-embedding projection, the strided-convolution `Downsample2D`, the nearest-neighbour
//! `Upsample2D`, and diffusers' default 3×3 convolution and group norm. DeepFloyd IF's UNet
//! builds its `ResnetBlock2D`s with [`ResnetOptions`] (GELU, `scale_shift` time embedding,
//! `skip_time_act`, an output scale, and the block's own 2× average-pool or nearest resize).

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{GroupNorm, GroupNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation::{gelu, silu};
use burn::tensor::module::avg_pool2d;
use burn::tensor::ops::AvgPoolOptions;
use burn::tensor::{Device, Int, Tensor, TensorData};

use culturelens_models::conv::conv2d;
use culturelens_models::norm::group_norm_act;
use culturelens_models::weights::{Vars, WeightError, load_conv2d, load_group_norm, load_linear};

/// `nn.Conv2d(c_in, c_out, kernel, stride, padding=kernel // 2)` with bias.
pub fn conv(c_in: usize, c_out: usize, kernel: usize, stride: usize, device: &Device) -> Conv2d {
    let pad = kernel / 2;
    Conv2dConfig::new([c_in, c_out], [kernel; 2])
        .with_stride([stride; 2])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
        .init(device)
}

/// `nn.GroupNorm(groups, channels, eps, affine=True)`.
pub fn group_norm(groups: usize, channels: usize, eps: f64, device: &Device) -> GroupNorm {
    GroupNormConfig::new(groups, channels).with_epsilon(eps).init(device)
}

/// The `ResnetBlock2D` arguments beyond the SD defaults ([`ResnetOptions::default`]: SiLU,
/// `time_embedding_norm="default"`, `output_scale_factor=1`, no resampling).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResnetOptions {
    /// `non_linearity` GELU (exact, `nn.GELU()`) instead of SiLU.
    pub gelu: bool,
    /// `time_embedding_norm="scale_shift"`: `proj(temb)` is `[scale; shift]` (twice the
    /// channels) and `norm2(h) · (1 + scale) + shift` replaces `norm2(h + proj(temb))`.
    pub scale_shift: bool,
    /// `skip_time_act`: `proj(temb)` without the activation before it.
    pub skip_time_act: bool,
    /// `output_scale_factor`: the sum is divided by it.
    pub output_scale: f64,
    /// `up=True` (nearest 2× resize of `x` and `h` after the first activation) or `down=True`
    /// (2×2 average pooling, `Downsample2D(use_conv=False)`).
    pub resample: Option<Resample>,
}

/// The resampling inside a `ResnetBlock2D` (`up` / `down`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resample {
    Up,
    Down,
}

impl Default for ResnetOptions {
    fn default() -> Self {
        Self { gelu: false, scale_shift: false, skip_time_act: false, output_scale: 1.0, resample: None }
    }
}

impl ResnetOptions {
    fn act<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        if self.gelu { gelu(x) } else { silu(x) }
    }

    /// `act(norm(x))`, the SiLU fused into the norm's pass ([`group_norm_act`]).
    fn norm_act(&self, norm: &GroupNorm, x: Tensor<4>) -> Tensor<4> {
        if self.gelu { gelu(group_norm_act(norm, x, false)) } else { group_norm_act(norm, x, true) }
    }
}

/// `ResnetBlock2D`, by default with `time_embedding_norm="default"` and `output_scale_factor=1`:
/// `shortcut(x) + conv2(silu(norm2(conv1(silu(norm1(x))) + proj(silu(temb)))))`; see
/// [`ResnetOptions`] for the rest.
#[derive(Module, Debug)]
pub struct ResnetBlock2D {
    pub norm1: GroupNorm,
    pub conv1: Conv2d,
    /// `time_emb_proj` (absent in the VAE, whose blocks get no time embedding).
    pub time_emb_proj: Option<Linear>,
    pub norm2: GroupNorm,
    pub conv2: Conv2d,
    /// `conv_shortcut`, a 1×1 convolution, when the channel count changes.
    pub conv_shortcut: Option<Conv2d>,
    #[module(skip)]
    pub options: ResnetOptions,
}

impl ResnetBlock2D {
    /// A block from `c_in` to `c_out` channels; `temb` is the time-embedding width (UNet) or
    /// `None` (VAE).
    pub fn init(
        c_in: usize,
        c_out: usize,
        temb: Option<usize>,
        groups: usize,
        eps: f64,
        device: &Device,
    ) -> Self {
        Self::init_with(c_in, c_out, temb, groups, eps, ResnetOptions::default(), device)
    }

    /// [`Self::init`] with the [`ResnetOptions`] beyond SD's.
    pub fn init_with(
        c_in: usize,
        c_out: usize,
        temb: Option<usize>,
        groups: usize,
        eps: f64,
        options: ResnetOptions,
        device: &Device,
    ) -> Self {
        let proj_out = if options.scale_shift { 2 * c_out } else { c_out };
        Self {
            norm1: group_norm(groups, c_in, eps, device),
            conv1: conv(c_in, c_out, 3, 1, device),
            time_emb_proj: temb.map(|t| LinearConfig::new(t, proj_out).init(device)),
            norm2: group_norm(groups, c_out, eps, device),
            conv2: conv(c_out, c_out, 3, 1, device),
            conv_shortcut: (c_in != c_out).then(|| conv(c_in, c_out, 1, 1, device)),
            options,
        }
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_group_norm(&mut self.norm1, vars.pp("norm1"))?;
        load_conv2d(&mut self.conv1, vars.pp("conv1"))?;
        if let Some(proj) = &mut self.time_emb_proj {
            load_linear(proj, vars.pp("time_emb_proj"))?;
        }
        load_group_norm(&mut self.norm2, vars.pp("norm2"))?;
        load_conv2d(&mut self.conv2, vars.pp("conv2"))?;
        if let Some(shortcut) = &mut self.conv_shortcut {
            load_conv2d(shortcut, vars.pp("conv_shortcut"))?;
        }
        Ok(())
    }

    /// `x` `[batch, c_in, h, w]`, `temb` `[batch, temb]` (ignored without `time_emb_proj`).
    pub fn forward(&self, x: Tensor<4>, temb: Option<&Tensor<2>>) -> Tensor<4> {
        let o = &self.options;
        let mut x = x;
        let mut h = o.norm_act(&self.norm1, x.clone());
        match o.resample {
            Some(Resample::Up) => {
                let [_, _, hh, ww] = h.dims();
                x = nearest(x, [2 * hh, 2 * ww]);
                h = nearest(h, [2 * hh, 2 * ww]);
            }
            Some(Resample::Down) => {
                x = avg_pool2d(x, AvgPoolOptions::new([2, 2]));
                h = avg_pool2d(h, AvgPoolOptions::new([2, 2]));
            }
            None => {}
        }
        let h = conv2d(&self.conv1, h);
        let t = match (&self.time_emb_proj, temb) {
            (Some(proj), Some(temb)) => {
                let temb = if o.skip_time_act { temb.clone() } else { o.act(temb.clone()) };
                let t = proj.forward(temb);
                let [b, c] = t.dims();
                Some(t.reshape([b, c, 1, 1]))
            }
            _ => None,
        };
        let h = match t {
            Some(t) if o.scale_shift => {
                let mut halves = t.chunk(2, 1);
                let shift = halves.pop().expect("two halves");
                let scale = halves.pop().expect("two halves");
                o.act(group_norm_act(&self.norm2, h, false) * scale.add_scalar(1.0) + shift)
            }
            Some(t) => o.norm_act(&self.norm2, h + t),
            None => o.norm_act(&self.norm2, h),
        };
        let h = conv2d(&self.conv2, h);
        let x = match &self.conv_shortcut {
            Some(shortcut) => shortcut.forward(x),
            None => x,
        };
        if o.output_scale == 1.0 { x + h } else { (x + h).div_scalar(o.output_scale) }
    }
}

/// `Downsample2D(use_conv=True, padding=1)`: a 3×3 convolution of stride 2 (`conv`).
#[derive(Module, Debug)]
pub struct Downsample2D {
    pub conv: Conv2d,
}

impl Downsample2D {
    pub fn init(channels: usize, device: &Device) -> Self {
        Self { conv: conv(channels, channels, 3, 2, device) }
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_conv2d(&mut self.conv, vars.pp("conv"))
    }

    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.conv.forward(x)
    }
}

/// `Upsample2D(use_conv=True)`: nearest-neighbour resize (to twice the size, or to the size of
/// the skip connection it meets), then a 3×3 convolution (`conv`).
#[derive(Module, Debug)]
pub struct Upsample2D {
    pub conv: Conv2d,
}

impl Upsample2D {
    pub fn init(channels: usize, device: &Device) -> Self {
        Self { conv: conv(channels, channels, 3, 1, device) }
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_conv2d(&mut self.conv, vars.pp("conv"))
    }

    /// `size`: the output's `[h, w]` (`None`: twice the input's).
    pub fn forward(&self, x: Tensor<4>, size: Option<[usize; 2]>) -> Tensor<4> {
        let [_, _, h, w] = x.dims();
        conv2d(&self.conv, nearest(x, size.unwrap_or([2 * h, 2 * w])))
    }
}

/// `F.interpolate(x, size, mode="nearest")`: output row `i` reads input row
/// `floor(i · h_in / h_out)` (torch's nearest index rule, in float32 as torch computes it).
pub fn nearest(x: Tensor<4>, [h_out, w_out]: [usize; 2]) -> Tensor<4> {
    let [_, _, h, w] = x.dims();
    let device = x.device();
    let index = |n_in: usize, n_out: usize| {
        let scale = n_in as f32 / n_out as f32;
        let ids: Vec<i64> =
            (0..n_out).map(|i| ((i as f32 * scale).floor() as usize).min(n_in - 1) as i64).collect();
        Tensor::<1, Int>::from_data(TensorData::new(ids, [n_out]), &device)
    };
    x.select(2, index(h, h_out)).select(3, index(w, w_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_resize_by_hand() {
        let device = Device::flex();
        let x =
            Tensor::<4>::from_data(TensorData::new(vec![1f32, 2., 3., 4., 5., 6.], [1, 1, 2, 3]), &device);
        // Doubling repeats each row and column; 2×3 → 3×2 reads rows floor(i·2/3) = 0, 0, 1
        // and columns floor(j·3/2) = 0, 1.
        let up = nearest(x.clone(), [4, 6]).into_data().try_into_vec::<f32>().unwrap();
        assert_eq!(
            up,
            [1., 1., 2., 2., 3., 3., 1., 1., 2., 2., 3., 3., 4., 4., 5., 5., 6., 6., 4., 4., 5., 5., 6., 6.]
        );
        let odd = nearest(x, [3, 2]).into_data().try_into_vec::<f32>().unwrap();
        assert_eq!(odd, [1., 2., 1., 2., 4., 5.]);
    }
}
