//! `IFSuperResolutionPipeline.__call__` of diffusers 0.42 (DeepFloyd IF stage II): a stage I
//! image upscaled to `sample_size²` (256² for IF-II) conditioned on T5, the upscaled image
//! noise-augmented and concatenated to the UNet's input. Stage III (the ×4 upscaler) is not run.
//!
//! - **Text**: as stage I ([`crate::pipeline_if`]): T5 with its attention mask, 77 tokens,
//!   `lower().strip()`ed prompts, `""` as the default negative prompt; DiffusionLens layers alike.
//! - **Noise, in diffusers' order from one generator**: the initial noise `randn((K, 3, H, W))`
//!   (`prepare_intermediate_images`, given by the caller), then the augmentation noise
//!   `randn((K, 3, H, W))` drawn here, then DDPM's variance noise at every step `t > 0`.
//! - **Upscaling**: the input image (in `[−1, 1]`, one per prompt, repeated for its K images)
//!   `F.interpolate(…, (H, W), mode="bilinear", align_corners=True)`, then
//!   `image_noising_scheduler.add_noise(x, z, noise_level)` (`√ᾱ x + √(1 − ᾱ) z`); the UNet gets
//!   `[x_t; upscaled]` (6 channels) and `class_labels = noise_level` (its `class_embed_type:
//!   "timestep"`), both doubled with guidance; guidance and the learned-variance split as stage I
//!   over the first 3 channels.
//! - **Output**: `(x / 2 + 0.5).clamp(0, 1)`.

use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{Device, Tensor, TensorData};
use culturelens_rng::{TorchGenerator, TorchNormalPath};

use super::offload::on_device;
use super::request::{GenerateError, PromptIds, guided_noise, repeat_rows};
use culturelens_diffusion_models::unet_if::IfUNet;
use culturelens_diffusion_schedulers::{Scheduler, VarianceType};
use culturelens_models::ModelError;
use culturelens_models::t5::T5EncoderModel;

/// The models of an `IFSuperResolutionPipeline` folder (stage II).
#[derive(Debug)]
pub struct DeepFloydIfSuperResolution {
    pub text_encoder: T5EncoderModel,
    pub unet: IfUNet,
    /// `image_noising_scheduler` (a `DDPMScheduler`; only its `add_noise` is used).
    pub image_noising_scheduler: Scheduler,
}

/// One stage II run: `P` prompts with their stage I images, `K` images each.
pub struct UpscaleRequest<'a> {
    pub prompt_ids: &'a [PromptIds],
    pub negative_ids: &'a [PromptIds],
    /// `[P, 3, h, w]` in `[−1, 1]` (stage I's `output_type="pt"` images).
    pub images: Tensor<4>,
    pub images_per_prompt: usize,
    pub height: usize,
    pub width: usize,
    pub steps: usize,
    pub guidance: f64,
    /// `noise_level`, the augmentation's timestep (diffusers' default 250).
    pub noise_level: usize,
    pub layer: Option<usize>,
    /// `[P·K, 3, H, W]` initial noise.
    pub latents: Tensor<4>,
}

impl DeepFloydIfSuperResolution {
    /// The pipeline of its loaded models, after checking that they fit together.
    pub fn new(
        text_encoder: T5EncoderModel,
        unet: IfUNet,
        image_noising_scheduler: Scheduler,
    ) -> Result<Self, ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let d = text_encoder.config.d_model;
        if unet.text_dim() != d {
            return bad("encoder_hid_dim", format!("{} differs from T5's d_model {d}", unet.text_dim()));
        }
        let (c_in, c_out) = (unet.config.in_channels, unet.config.out_channels);
        if c_in != 6 || !(c_out == 3 || c_out == 6) {
            return bad(
                "in_channels",
                format!("{c_in} / out_channels {c_out}: stage II takes 6 and predicts 3 or 6"),
            );
        }
        if !unet.takes_class_labels() {
            return bad("class_embed_type", "stage II's UNet takes the noise level (`timestep`)".into());
        }
        let mut noising = image_noising_scheduler;
        if noising.ddpm().is_none() {
            return bad(
                "image_noising_scheduler",
                format!("{} is not DDPMScheduler", noising.kind().class_name()),
            );
        }
        Ok(Self { text_encoder, unet, image_noising_scheduler: noising })
    }

    /// diffusers' default height and width: `unet.sample_size`.
    pub fn default_size(&self) -> usize {
        self.unet.config.sample_size.unwrap_or(256)
    }

    /// Runs stage II with `generator` in its state after drawing `request.latents` (or fresh
    /// when they were given): `[P·K, 3, H, W]` images in `[0, 1]`. `scheduler` must be DDPM; it
    /// is reset to `request.steps` and takes the generator for its variance noise.
    pub fn upscale(
        &self,
        request: &UpscaleRequest,
        scheduler: &mut Scheduler,
        mut generator: TorchGenerator,
        path: TorchNormalPath,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let kind = scheduler.kind();
        let Some(ddpm) = scheduler.ddpm() else {
            return Err(GenerateError::Input(format!(
                "the IF super-resolution pipeline runs with DDPMScheduler, not {}",
                kind.class_name()
            )));
        };
        let learned = ddpm.variance_type() == VarianceType::LearnedRange;
        let k = request.images_per_prompt;
        let p = request.prompt_ids.len();
        let (h, w) = (request.height, request.width);
        let multiple = self.unet.config.size_multiple();
        if h == 0 || w == 0 || !h.is_multiple_of(multiple) || !w.is_multiple_of(multiple) {
            return Err(GenerateError::SizeMultiple { height: h, width: w, multiple });
        }
        let channels = 3;
        let expected = [p * k, channels, h, w];
        if request.latents.dims() != expected
            || request.images.dims()[0] != p
            || request.negative_ids.len() != p
        {
            return Err(GenerateError::Latents { expected, found: request.latents.dims() });
        }
        let cfg = request.guidance > 1.0;
        let rows: Vec<PromptIds> = if cfg {
            request.negative_ids.iter().chain(request.prompt_ids).cloned().collect()
        } else {
            request.prompt_ids.to_vec()
        };
        let ids: Vec<Vec<u32>> = rows.iter().map(|r| r[0].clone()).collect();
        let layer = request.layer.unwrap_or(self.text_encoder.num_layers());
        let context =
            repeat_rows(on_device(&self.text_encoder, device).encode_masked(&ids, layer, device), k);
        scheduler.set_timesteps(request.steps)?;
        let images = repeat_rows(request.images.clone(), k);
        let options = InterpolateOptions::new(InterpolateMode::Bilinear)
            .with_align_corners(true)
            .with_output_size([h, w]);
        let upscaled = interpolate(images, options);
        let noise = generator.randn(expected.iter().product(), path);
        let noise = Tensor::<4>::from_data(TensorData::new(noise, expected), device);
        let noising = self.image_noising_scheduler.clone().ddpm().cloned().expect("checked in new");
        if request.noise_level >= noising.train_steps() {
            return Err(GenerateError::Input(format!(
                "noise level {} is past the noising scheduler's {} training steps",
                request.noise_level,
                noising.train_steps()
            )));
        }
        let upscaled = noising.add_noise(upscaled, noise, request.noise_level);
        scheduler.set_noise_generator(generator, path);
        let label = request.noise_level as f32;
        let mut x = request.latents.clone() * scheduler.init_noise_sigma();
        let unet = on_device(&self.unet, device);
        for (step, &t) in scheduler.timesteps().iter().enumerate() {
            let input = Tensor::cat(vec![x.clone(), upscaled.clone()], 1);
            let input = if cfg { Tensor::cat(vec![input.clone(), input], 0) } else { input };
            let input = scheduler.scale_model_input(input, step);
            let prediction = unet.forward(input, t, &context, Some(label));
            let prediction = guided_noise(prediction, channels, cfg.then_some(request.guidance), learned);
            x = scheduler.step(prediction, step, x);
        }
        Ok(x.div_scalar(2.0).add_scalar(0.5).clamp(0.0, 1.0))
    }
}
