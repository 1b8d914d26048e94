//! `IFPipeline.__call__` of diffusers 0.42 (DeepFloyd IF stage I): pixel-space diffusion of a
//! `sample_size²` RGB image conditioned on T5; it wires the T5 encoder, IF's UNet
//! ([`culturelens_diffusion_models::unet_if`]) and the DDPM scheduler ([`culturelens_diffusion_schedulers::Ddpm`]). Stage II
//! (`IFSuperResolutionPipeline`) and stage III (the ×4 upscaler) are not run: `generate` gives
//! stage I's images.
//!
//! - **Text** (`encode_prompt`, `clean_caption=False`): the prompt `lower().strip()`ed (done by
//!   the tokenizer of models-io's IF loader), T5's ids padded to 77 tokens, and
//!   `T5EncoderModel(ids, attention_mask)`'s `last_hidden_state` (the padding masked out of
//!   T5's attention, [`T5EncoderModel::encode_masked`]). `clean_caption=True` (diffusers'
//!   `__call__` default) needs bs4 and ftfy, and diffusers itself falls back to `False` without
//!   them; culturelens runs the `False` path only.
//! - **DiffusionLens** (SoS §5.1, whose DeepFloyd IF code reads T5 this way): `--text-layer K` is
//!   `final_layer_norm(hidden_states[K])` of the same masked encoder, for the prompt and the
//!   negative prompt alike.
//! - **Guidance**: with `guidance > 1` the UNet sees `[negative; prompt]` (`""` when no negative
//!   prompt is given); of its 6 output channels the first 3 are noise, guided
//!   `ε_u + g (ε_c − ε_u)`, the last 3 the learned variance, taken from the prompt's half; the
//!   scheduler gets `[ε; ν]` when its `variance_type` is `learned_range`, `ε` alone otherwise.
//! - **Initial noise and variance noise**: `randn((K, 3, H, W), generator)` (IF's `__call__` has
//!   no `latents=`; culturelens' given latents replace this draw), then every DDPM step at
//!   `t > 0` draws `randn((K, 3, H, W))` from the same generator: the caller hands the scheduler
//!   the generator(s) in their state after the initial draw
//!   (`Pipeline::noise_generator`, `Scheduler::set_noise_generators`).
//! - **Output**: `(x / 2 + 0.5).clamp(0, 1)` (`output_type="np"`; no safety checker and no
//!   watermark, which diffusers applies to PIL output only).

use burn::tensor::{Device, Tensor};

use super::offload::on_device;
use super::request::{GenerateError, GenerateRequest, PromptIds, SizeRule, guided_noise, repeat_rows};
use culturelens_diffusion_models::unet_if::{IfUNet, IfUNetConfig};
use culturelens_diffusion_schedulers::{Scheduler, VarianceType};
use culturelens_models::ModelError;
use culturelens_models::t5::T5EncoderModel;

/// IF's fixed T5 length (`max_length = 77` in `encode_prompt`).
pub const IF_MAX_LENGTH: usize = 77;

/// The models of an `IFPipeline` folder (stage I).
#[derive(Debug)]
pub struct DeepFloydIf {
    pub text_encoder: T5EncoderModel,
    pub unet: IfUNet,
}

/// IF stage I's image sizes from its UNet config: by default `sample_size` (64 when unset);
/// height and width multiples of `2^(blocks − 1)` ([`IfUNetConfig::size_multiple`]).
pub fn size_rule(unet: &IfUNetConfig) -> SizeRule {
    SizeRule::multiple_of(unet.sample_size.unwrap_or(64), unet.size_multiple())
}

impl DeepFloydIf {
    /// The pipeline of its loaded models, after checking that they fit together (an error names
    /// the UNet config key that does not match).
    pub fn new(text_encoder: T5EncoderModel, unet: IfUNet) -> Result<Self, ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let d = text_encoder.config.d_model;
        if unet.text_dim() != d {
            let key =
                if unet.config.encoder_hid_dim.is_some() { "encoder_hid_dim" } else { "cross_attention_dim" };
            return bad(key, format!("{} differs from T5's d_model {d}", unet.text_dim()));
        }
        let (c_in, c_out) = (unet.config.in_channels, unet.config.out_channels);
        if c_in != 3 || !(c_out == c_in || c_out == 2 * c_in) {
            return bad(
                "in_channels",
                format!("{c_in} / out_channels {c_out}: stage I takes 3 channels and predicts 3 or 6"),
            );
        }
        if unet.takes_class_labels() {
            return bad(
                "class_embed_type",
                "a stage I UNet has none (this is a super-resolution UNet: IFSuperResolutionPipeline)".into(),
            );
        }
        Ok(Self { text_encoder, unet })
    }

    /// The image sizes the pipeline takes ([`size_rule`]).
    pub fn size_rule(&self) -> SizeRule {
        size_rule(&self.unet.config)
    }

    /// diffusers' default height and width: `unet.sample_size`.
    pub fn default_size(&self) -> usize {
        self.size_rule().default
    }

    /// The shape of `images` initial images `(K, 3, H, W)`; `H` and `W` must be multiples of
    /// `2^(blocks − 1)` (the UNet's resampling resnets take no output size).
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 4], GenerateError> {
        self.size_rule().check(height, width)?;
        Ok([images, self.unet.config.in_channels, height, width])
    }

    /// The layers DiffusionLens reads: T5's `1..=L`.
    pub fn lens_layers(&self) -> usize {
        self.text_encoder.num_layers()
    }

    /// T5's masked output (at DiffusionLens layer `layer`; `None`: the last) of id rows.
    pub fn encode(&self, rows: &[PromptIds], layer: Option<usize>, device: &Device) -> Tensor<3> {
        let ids: Vec<Vec<u32>> = rows.iter().map(|r| r[0].clone()).collect();
        on_device(&self.text_encoder, device).encode_masked(&ids, layer.unwrap_or(self.lens_layers()), device)
    }

    /// Runs stage I: `[P·K, 3, H, W]` images in `[0, 1]`. `scheduler` must be DDPM with the
    /// generator(s) of the run already handed to it; it is reset to `request.steps`.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        Ok(self.generate_raw(request, scheduler, device)?.div_scalar(2.0).add_scalar(0.5).clamp(0.0, 1.0))
    }

    /// Stage I's images as `output_type="pt"` returns them, what stage II takes: the last
    /// denoised images, about `[−1, 1]`, not clamped.
    pub fn generate_raw(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let kind = scheduler.kind();
        let Some(ddpm) = scheduler.ddpm() else {
            return Err(GenerateError::Input(format!(
                "the IF pipeline runs with DDPMScheduler (its learned variance and noise), not {}",
                kind.class_name()
            )));
        };
        if !ddpm.has_noise_generator() {
            return Err(GenerateError::Input(
                "DDPMScheduler needs the run's torch generator (Scheduler::set_noise_generators)".into(),
            ));
        }
        let learned = ddpm.variance_type() == VarianceType::LearnedRange;
        let c_out = self.unet.config.out_channels;
        if learned && c_out != 6 {
            return Err(GenerateError::Input(format!(
                "the scheduler's `variance_type` is learned_range but the UNet predicts {c_out} channels, not 6"
            )));
        }
        let k = request.images_per_prompt;
        let shape = self.latent_shape(request.prompt_ids.len() * k, request.height, request.width)?;
        let mut images = request.latents(shape, device)?;
        let channels = shape[1];
        let cfg = request.guidance > 1.0;
        let rows: Vec<PromptIds> = if cfg {
            request.negative_ids.iter().chain(request.prompt_ids).cloned().collect()
        } else {
            request.prompt_ids.to_vec()
        };
        let context = repeat_rows(self.encode(&rows, request.layer, device), k);
        scheduler.set_timesteps(request.steps)?;
        images = images * scheduler.init_noise_sigma();
        let unet = on_device(&self.unet, device);
        for (step, &t) in scheduler.timesteps().iter().enumerate() {
            let input =
                if cfg { Tensor::cat(vec![images.clone(), images.clone()], 0) } else { images.clone() };
            let input = scheduler.scale_model_input(input, step);
            let prediction = unet.forward(input, t, &context, None);
            let prediction = guided_noise(prediction, channels, cfg.then_some(request.guidance), learned);
            images = scheduler.step(prediction, step, images);
        }
        Ok(images)
    }
}
