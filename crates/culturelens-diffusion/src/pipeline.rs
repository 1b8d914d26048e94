//! `StableDiffusionPipeline.__call__` of diffusers 0.31 (SoS §3 "Image Generation"), for SD 1.x
//! and 2.x pipelines and AltDiffusion (`AltDiffusionPipeline`, the same loop with an XLM-R text
//! encoder): text embeddings of the prompt and (with classifier-free guidance) of the negative
//! prompt, initial latents, the scheduler's denoising loop with the UNet, and the VAE decoder.
//! The caller tokenizes (padded to the tokenizer's length, as diffusers'
//! `padding="max_length"`), draws or reads the initial latents ([`seed_latents`]), and reads the
//! images back.
//!
//! - Text (SD): `last_hidden_state` of `CLIPTextModel`, i.e. the final layer norm of the last
//!   layer's output. SD 2.x checkpoints ship OpenCLIP ViT-H's tower already cut to its
//!   penultimate layer (`num_hidden_layers: 23`), so "penultimate layer" is what their config
//!   says. Text (AltDiffusion): `projection_state` of `RobertaSeriesModelWithTransformation`
//!   ([`culturelens_models::xlm_roberta`]).
//! - **DiffusionLens** (SoS §5.1): with `layer = Some(K)` the UNet is conditioned on layer K
//!   read as the pipeline reads its own: CLIP's `final_layer_norm(hidden_states[K])`, the output
//!   of the first K encoder layers through the encoder's final layer norm; XLM-R's
//!   `transformation_pre(pre_LN(hidden_states[K]))`; for the prompt and the negative prompt
//!   alike.
//! - Guidance: with `guidance > 1` the UNet sees `[negative; prompt]` embeddings and the
//!   prediction is `ε_u + g (ε_c − ε_u)`; `guidance ≤ 1` runs the prompt alone (no CFG).
//! - Latents: `randn((K, 4, h/8, w/8), generator=torch.Generator().manual_seed(s))` for one
//!   prompt's K images (one draw), times the scheduler's `init_noise_sigma`.

use burn::tensor::{Device, Tensor, TensorData};

use super::offload::{Component, on_device};
pub use super::request::GenerateError;
use super::request::{SizeRule, guided};
use culturelens_diffusion_models::unet::{AttentionSlice, TextTime, UNet2DConditionModel};
use culturelens_diffusion_models::vae::VaeDecoder;
use culturelens_diffusion_schedulers::Scheduler;
use culturelens_models::ModelError;
use culturelens_models::clip::{ClipConfig, ClipTextConfig, ClipTextTransformer, text_model_scope};
use culturelens_models::config;
use culturelens_models::vit::pad_ids;
use culturelens_models::weights::Vars;
use culturelens_models::xlm_roberta::{RobertaSeries, RobertaSeriesConfig};
use culturelens_rng::{TorchGenerator, TorchNormalPath};

/// `text_encoder/` of a pipeline.
#[derive(Clone, Debug)]
pub enum TextEncoder {
    /// transformers' `CLIPTextModel` (SD 1.x/2.x).
    Clip { model: Box<ClipTextTransformer>, config: ClipTextConfig },
    /// diffusers' `RobertaSeriesModelWithTransformation` (AltDiffusion).
    Roberta(Box<RobertaSeries>),
}

impl Component for TextEncoder {
    fn to_device(self, device: &Device) -> Self {
        match self {
            Self::Clip { model, config } => {
                Self::Clip { model: Box::new(Component::to_device(*model, device)), config }
            }
            Self::Roberta(model) => Self::Roberta(Box::new(Component::to_device(*model, device))),
        }
    }

    fn is_on(&self, device: &Device) -> bool {
        match self {
            Self::Clip { model, .. } => model.is_on(device),
            Self::Roberta(model) => model.is_on(device),
        }
    }
}

impl TextEncoder {
    /// Builds the CLIP tower of `text_encoder/config.json` (a flat `CLIPTextConfig`, read over
    /// transformers' defaults) and loads `text_model.*` of its checkpoint (the root's tensors in
    /// a `CLIPTextModel` saved by transformers 5).
    pub fn load_clip(json: &str, vars: Vars) -> Result<Self, ModelError> {
        let config: ClipTextConfig =
            config::from_json(json, &ClipConfig::clip_vit_base_patch32().text_config, &[])?;
        let mut model = config.init(vars.device());
        model.load(text_model_scope(&vars))?;
        Ok(Self::Clip { model: Box::new(model), config })
    }

    /// Builds AltDiffusion's XLM-R encoder and projection ([`culturelens_models::xlm_roberta`]).
    pub fn load_roberta(json: &str, vars: Vars) -> Result<Self, ModelError> {
        Ok(Self::Roberta(Box::new(RobertaSeriesConfig::load(json, vars)?)))
    }

    /// The layers DiffusionLens reads, `1..=lens_layers()`; the last of them is the pipeline's
    /// own conditioning (CLIP: the tower's last layer; XLM-R: the second-to-last).
    pub fn lens_layers(&self) -> usize {
        match self {
            Self::Clip { config, .. } => config.encoder.num_hidden_layers,
            Self::Roberta(model) => model.conditioning_layer(),
        }
    }

    /// The width of the embeddings the UNet attends to.
    pub fn output_dim(&self) -> usize {
        match self {
            Self::Clip { config, .. } => config.encoder.hidden_size,
            Self::Roberta(model) => model.config.project_dim,
        }
    }

    /// `[rows, len, output_dim]` conditioning of token-id rows of equal length at DiffusionLens
    /// layer `layer` (`None`: the pipeline's own). CLIP: `final_layer_norm(hidden_states[K])`;
    /// XLM-R: `transformation_pre(pre_LN(hidden_states[K]))`.
    pub fn encode(&self, ids: &[Vec<u32>], layer: Option<usize>, device: &Device) -> Tensor<3> {
        let layer = layer.unwrap_or(self.lens_layers());
        match self {
            Self::Clip { model, .. } => {
                let x = model.embeddings.forward(pad_ids(ids, 0, device));
                model.final_layer_norm.forward(model.encoder.forward_layers(x, true, layer))
            }
            Self::Roberta(model) => model.encode(ids, layer, device),
        }
    }
}

/// The three models of a Stable Diffusion 1.x/2.x pipeline.
#[derive(Debug)]
pub struct StableDiffusion {
    pub text_encoder: TextEncoder,
    pub unet: UNet2DConditionModel,
    pub vae: VaeDecoder,
}

/// One batch of prompts: `latents.dims()[0] = P × K` images, the K of each prompt together.
pub struct Request<'a> {
    /// Each prompt's token ids, padded to the tokenizer's length.
    pub prompt_ids: &'a [Vec<u32>],
    /// Each prompt's negative prompt (`""` when none), padded likewise; unused without guidance.
    pub negative_ids: &'a [Vec<u32>],
    pub steps: usize,
    pub guidance: f64,
    /// DiffusionLens text layer (`None`: the pipeline's own conditioning).
    pub layer: Option<usize>,
    /// Initial latents `(P·K, 4, h/8, w/8)` before scaling by `init_noise_sigma`.
    pub latents: Tensor<4>,
}

/// `torch.randn(shape, generator=torch.Generator().manual_seed(seed))` in float32.
pub fn seed_latents(seed: u64, shape: [usize; 4], path: TorchNormalPath) -> Vec<f32> {
    TorchGenerator::manual_seed(seed).randn(shape.iter().product(), path)
}

impl StableDiffusion {
    /// The pipeline of three loaded models, after checking that they fit together (an error
    /// names the UNet config key that does not match).
    pub fn new(
        text_encoder: TextEncoder,
        unet: UNet2DConditionModel,
        vae: VaeDecoder,
    ) -> Result<Self, ModelError> {
        let (hidden, cross) = (text_encoder.output_dim(), unet.config.cross_attention_dim);
        if hidden != cross {
            return Err(ModelError::Unsupported(format!(
                "`cross_attention_dim` is {cross} but the text encoder's output width is {hidden}"
            )));
        }
        let (c_in, c_out) = (unet.config.in_channels, unet.config.out_channels);
        if vae.latent_channels != c_in || c_in != c_out {
            return Err(ModelError::Unsupported(format!(
                "`in_channels` {c_in} / `out_channels` {c_out} do not match the VAE's latent_channels {}",
                vae.latent_channels
            )));
        }
        Ok(Self { text_encoder, unet, vae })
    }

    /// Attention slicing for the UNet (diffusers' `set_attention_slice`, refused by its rule) and
    /// the VAE's mid-block attention (image by image); `None` turns it off.
    pub fn set_attention_slice(&mut self, slice: Option<AttentionSlice>) -> Result<(), ModelError> {
        set_unet_attention_slice(&mut self.unet, &mut self.vae, slice)
    }

    /// The image sizes the pipeline takes ([`unet_size_rule`]).
    pub fn size_rule(&self) -> SizeRule {
        unet_size_rule(self.unet.config.sample_size, self.vae.scale_factor)
    }

    /// diffusers' default height and width: `unet.sample_size × vae_scale_factor`.
    pub fn default_size(&self) -> usize {
        self.size_rule().default
    }

    /// The shape of `images` latents for a `height × width` image, after checking that both are
    /// multiples of 8.
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 4], GenerateError> {
        unet_latent_shape(&self.unet, &self.vae, images, height, width)
    }

    /// Checks a DiffusionLens layer against the text encoder.
    pub fn check_layer(&self, layer: Option<usize>) -> Result<(), GenerateError> {
        let layers = self.text_encoder.lens_layers();
        match layer {
            Some(k) if k == 0 || k > layers => Err(GenerateError::Layer { layer: k, layers }),
            _ => Ok(()),
        }
    }

    /// Runs the pipeline: `[K, 3, H, W]` images in `[0, 1]` (diffusers' `output_type="np"`,
    /// channels first). `scheduler` is reset to `request.steps`.
    pub fn generate(&self, request: &Request, scheduler: &mut Scheduler) -> Result<Tensor<4>, GenerateError> {
        self.check_layer(request.layer)?;
        let device = request.latents.device();
        let [n_images, c, h, w] = request.latents.dims();
        let prompts = request.prompt_ids.len();
        let expected = [n_images, self.unet.config.in_channels, h, w];
        if c != expected[1]
            || prompts == 0
            || !n_images.is_multiple_of(prompts)
            || request.negative_ids.len() != prompts
        {
            return Err(GenerateError::Latents { expected, found: [n_images, c, h, w] });
        }
        let k = n_images / prompts;
        scheduler.set_timesteps(request.steps)?;
        let cfg = request.guidance > 1.0;
        let rows: Vec<Vec<u32>> = if cfg {
            request.negative_ids.iter().chain(request.prompt_ids).cloned().collect()
        } else {
            request.prompt_ids.to_vec()
        };
        let embeds = on_device(&self.text_encoder, &device).encode(&rows, request.layer, &device);
        let [n, len, d] = embeds.dims();
        // Each row repeated for its prompt's K images: [negatives × K; prompts × K].
        let context = embeds.unsqueeze_dim::<4>(1).expand([n, k, len, d]).reshape([n * k, len, d]);
        let guidance = cfg.then_some(request.guidance);
        let latents = denoise(
            &on_device(&self.unet, &device),
            scheduler,
            request.latents.clone(),
            &context,
            None,
            guidance,
        );
        Ok(on_device(&self.vae, &device).decode(latents))
    }
}

/// Attention slicing of a UNet pipeline (SD, SDXL): the UNet's (diffusers' `set_attention_slice`,
/// refused by its rule) and the VAE's mid-block attention (image by image); `None` turns it off.
pub fn set_unet_attention_slice(
    unet: &mut UNet2DConditionModel,
    vae: &mut VaeDecoder,
    slice: Option<AttentionSlice>,
) -> Result<(), ModelError> {
    unet.set_attention_slice(slice)?;
    vae.sliced_attention = slice.is_some();
    Ok(())
}

/// The image sizes of a UNet pipeline (SD 1.x/2.x, AltDiffusion, SDXL) from its configs: by
/// default `unet.sample_size × vae_scale_factor` (the VAE's `2^(blocks − 1)`), and height and
/// width multiples of 8 (diffusers' rule).
pub fn unet_size_rule(unet_sample_size: usize, vae_scale_factor: usize) -> SizeRule {
    SizeRule { rule_of_8: true, ..SizeRule::multiple_of(unet_sample_size * vae_scale_factor, 8) }
}

/// The shape of `images` latents `(images, in_channels, H/f, W/f)` of a UNet pipeline, after
/// checking that `height` and `width` are multiples of 8 (diffusers' rule for SD and SDXL).
pub fn unet_latent_shape(
    unet: &UNet2DConditionModel,
    vae: &VaeDecoder,
    images: usize,
    height: usize,
    width: usize,
) -> Result<[usize; 4], GenerateError> {
    unet_size_rule(unet.config.sample_size, vae.scale_factor).check(height, width)?;
    let f = vae.scale_factor;
    Ok([images, unet.config.in_channels, height / f, width / f])
}

/// The UNet pipelines' denoising loop (`StableDiffusionPipeline` and `StableDiffusionXLPipeline`
/// alike), the scheduler already set to its steps: the latents times `init_noise_sigma`, then per
/// timestep the UNet on the scheduler's scaled input (`[latents; latents]` against
/// `[negative; prompt]` conditioning when `guidance` is `Some`, then `ε_u + g (ε_c − ε_u)`) and
/// the scheduler's step.
pub fn denoise(
    unet: &UNet2DConditionModel,
    scheduler: &mut Scheduler,
    latents: Tensor<4>,
    context: &Tensor<3>,
    added: Option<&TextTime>,
    guidance: Option<f64>,
) -> Tensor<4> {
    let mut latents = latents * scheduler.init_noise_sigma();
    for (step, &t) in scheduler.timesteps().iter().enumerate() {
        let input = match guidance {
            Some(_) => Tensor::cat(vec![latents.clone(), latents.clone()], 0),
            None => latents.clone(),
        };
        let input = scheduler.scale_model_input(input, step);
        let prediction = unet.forward_with(input, t, context, added);
        let prediction = match guidance {
            Some(g) => guided(prediction, g),
            None => prediction,
        };
        latents = scheduler.step(prediction, step, latents);
    }
    latents
}

/// `[K, 3, H, W]` images as diffusers' `output_type="np"`: `(K, H, W, 3)` float32 in `[0, 1]`,
/// read back to the host.
pub fn images_hwc(images: Tensor<4>) -> (Vec<f32>, [usize; 4]) {
    let [k, c, h, w] = images.dims();
    let data = images.permute([0, 2, 3, 1]).into_data().convert::<f32>();
    (data.try_into_vec::<f32>().expect("f32 images"), [k, h, w, c])
}

/// Latents from the host: `values` of shape `shape` on `device`.
pub fn latents_tensor(values: Vec<f32>, shape: [usize; 4], device: &Device) -> Tensor<4> {
    Tensor::from_data(TensorData::new(values, shape), device)
}
