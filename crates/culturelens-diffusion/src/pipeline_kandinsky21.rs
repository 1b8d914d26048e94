//! `KandinskyPipeline.__call__` of diffusers 0.42 (Kandinsky 2.1's decoder, SoS Table 4): it
//! wires the multilingual text encoder ([`culturelens_models::multilingual_clip`]), the
//! [`culturelens_diffusion_models::unet_if`] UNet with Kandinsky 2.1's image conditioning ([`TextImage`]), the
//! scheduler (DDIM as shipped, or DDPM) and the MoVQ decoder ([`culturelens_diffusion_models::vq_model`]), conditioned
//! on the CLIP image embeddings the prior made.
//!
//! - **Text** (`_encode_prompt`): ids padded and truncated to 77 tokens (the caller's
//!   tokenizer); M-CLIP's pooled projection (`text_embeds`) and its states (the UNet's
//!   `encoder_hidden_states`), repeated for each prompt's `K` images. DiffusionLens
//!   (`--text-layer K`) reads both at XLM-R layer `K` ([`MultilingualClip::encode`]).
//! - **Guidance** (on when `guidance > 1`): the UNet sees `[negative; prompt]` rows — the
//!   negative prompt's text (`""` without one) and `negative_image_embeds`, each image
//!   embedding repeated `K` times; the noise channels are `ε_u + g (ε_c − ε_u)`, the learned
//!   variance channels the prompt half's ([`guided_noise`]). The variance channels reach the
//!   scheduler only when its `variance_type` is `learned_range` (DDPM), as diffusers checks.
//!   Without guidance `image_embeds` is used as given (diffusers does not repeat it), so it
//!   must have one row per image.
//! - **Latents**: `(P·K, 4, h, w)` with `(h, w)` = `get_new_h_w(H, W, s)` for the MoVQ's scale
//!   `s`: `⌈H / s²⌉ · s` (the image is `⌈H / s²⌉ · s²` pixels high: 512 for Kandinsky 2.1 at
//!   `H = 512`), times `init_noise_sigma`; `scale_model_input` is not called (the pipeline does
//!   not). DDPM's variance noise comes from the pipeline's generator, which the caller hands
//!   the scheduler (`Scheduler::set_noise_generator`).
//! - **Output**: `movq.decode(latents, force_not_quantize=True)`, then `(x · 0.5 + 0.5)`
//!   clamped to `[0, 1]`.

use burn::tensor::{Device, Tensor};

use super::offload::on_device;
use super::request::{GenerateError, GenerateRequest, PromptIds, SizeRule, guided_noise, repeat_rows};
use culturelens_diffusion_models::unet_if::{IfUNet, TextImage};
use culturelens_diffusion_models::vq_model::VqDecoder;
use culturelens_diffusion_schedulers::{Scheduler, VarianceType};
use culturelens_models::ModelError;
use culturelens_models::multilingual_clip::MultilingualClip;

/// The ids' length `_encode_prompt` pads and truncates to.
pub const MAX_LENGTH: usize = 77;

/// The latent channels of the decoder (its UNet's `in_channels`).
const LATENT_CHANNELS: usize = 4;

/// Kandinsky 2.1's image sizes from its MoVQ's scale factor `s`: by default 512 (`__call__`'s);
/// any positive height and width, the images `⌈n / s²⌉ · s²` pixels (`get_new_h_w`).
pub fn size_rule(movq_scale_factor: usize) -> SizeRule {
    SizeRule { movq_square_factor: Some(movq_scale_factor), ..SizeRule::multiple_of(512, 1) }
}

/// The three models of a `KandinskyPipeline` folder (the decoder).
#[derive(Debug)]
pub struct Kandinsky21Decoder {
    pub text_encoder: MultilingualClip,
    pub unet: IfUNet,
    pub movq: VqDecoder,
}

/// The CLIP image embeddings the decoder is conditioned on: one row per prompt with guidance,
/// one per image without (`negative` is read only with guidance).
pub struct ImageEmbeds {
    pub positive: Tensor<2>,
    pub negative: Tensor<2>,
}

impl Kandinsky21Decoder {
    /// The pipeline of its loaded models, after checking that they fit together (an error names
    /// the UNet or MoVQ config key that does not match).
    pub fn new(text_encoder: MultilingualClip, unet: IfUNet, movq: VqDecoder) -> Result<Self, ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if !unet.takes_image_embeds() {
            return bad(
                "encoder_hid_dim_type",
                "the Kandinsky 2.1 decoder needs a UNet with `text_image_proj` conditioning".into(),
            );
        }
        let width = text_encoder.transformer.word_embeddings.weight.val().dims()[1];
        if unet.text_dim() != width {
            return bad(
                "encoder_hid_dim",
                format!("{} differs from the text encoder's hidden_size {width}", unet.text_dim()),
            );
        }
        let (c_in, c_out) = (unet.config.in_channels, unet.config.out_channels);
        if c_in != LATENT_CHANNELS || !(c_out == c_in || c_out == 2 * c_in) {
            return bad(
                "in_channels",
                format!(
                    "{c_in} / out_channels {c_out}: the decoder takes {LATENT_CHANNELS} and predicts 4 or 8"
                ),
            );
        }
        if movq.latent_channels != LATENT_CHANNELS {
            return bad(
                "vq_embed_dim",
                format!("{}: the MoVQ must decode {LATENT_CHANNELS}-channel latents", movq.latent_channels),
            );
        }
        Ok(Self { text_encoder, unet, movq })
    }

    /// The image sizes the decoder takes ([`size_rule`]).
    pub fn size_rule(&self) -> SizeRule {
        size_rule(self.movq.scale_factor)
    }

    /// diffusers' default height and width (`__call__`'s 512).
    pub fn default_size(&self) -> usize {
        self.size_rule().default
    }

    /// `get_new_h_w(n)` for the MoVQ's scale factor `s`: `⌈n / s²⌉ · s`.
    fn latent_side(&self, n: usize) -> usize {
        let s = self.movq.scale_factor;
        n.div_ceil(s * s) * s
    }

    /// The shape of `images` latents for an `height × width` request.
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 4], GenerateError> {
        if height == 0 || width == 0 {
            return Err(GenerateError::Size { height, width });
        }
        let [h, w] = [self.latent_side(height), self.latent_side(width)];
        let multiple = self.unet.config.size_multiple();
        if h % multiple != 0 || w % multiple != 0 {
            let s = self.movq.scale_factor;
            return Err(GenerateError::SizeMultiple { height, width, multiple: multiple * s * s });
        }
        Ok([images, LATENT_CHANNELS, h, w])
    }

    /// The `[height, width]` of the images for an `height × width` request.
    pub fn image_size(&self, height: usize, width: usize) -> [usize; 2] {
        self.size_rule().image_size(height, width)
    }

    /// The layers DiffusionLens reads: XLM-R's `1..=L`.
    pub fn lens_layers(&self) -> usize {
        self.text_encoder.num_hidden_layers
    }

    /// `_encode_prompt`: `(text_embeds, states)` of the UNet batch — `[negative; prompt]` with
    /// guidance — for `k` images per prompt, M-CLIP read at `layer`.
    pub fn encode_prompt(
        &self,
        prompts: &[PromptIds],
        negatives: &[PromptIds],
        guided: bool,
        k: usize,
        layer: usize,
        device: &Device,
    ) -> (Tensor<2>, Tensor<3>) {
        let mut rows: Vec<Vec<u32>> = Vec::new();
        if guided {
            rows.extend(negatives.iter().map(|r| r[0].clone()));
        }
        rows.extend(prompts.iter().map(|r| r[0].clone()));
        let (pooled, states) = on_device(&self.text_encoder, device).encode(&rows, layer, device);
        (repeat_rows(pooled, k), repeat_rows(states, k))
    }

    /// Runs the decoder on the prior's image embeddings: `[P·K, 3, H', W']` images in `[0, 1]`
    /// (`H'`, `W'` per [`Self::image_size`]).
    pub fn generate(
        &self,
        request: &GenerateRequest,
        image_embeds: &ImageEmbeds,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let k = request.images_per_prompt;
        let prompts = request.prompt_ids.len();
        let shape = self.latent_shape(prompts * k, request.height, request.width)?;
        let latents = request.latents(shape, device)?;
        let guided = request.guidance > 1.0;
        let layer = request.layer.unwrap_or(self.lens_layers());
        if !(1..=self.lens_layers()).contains(&layer) {
            return Err(GenerateError::Layer { layer, layers: self.lens_layers() });
        }
        let rows = image_embeds.positive.dims()[0];
        let want = if guided { prompts } else { prompts * k };
        if rows != want || (guided && image_embeds.negative.dims()[0] != want) {
            return Err(GenerateError::Input(format!(
                "{rows} image embedding rows for {prompts} prompt(s) and {k} image(s) each: the decoder takes {want}"
            )));
        }
        let image_embeds = if guided {
            let negative = repeat_rows(image_embeds.negative.clone(), k);
            Tensor::cat(vec![negative, repeat_rows(image_embeds.positive.clone(), k)], 0)
        } else {
            image_embeds.positive.clone()
        };
        let (text_embeds, states) =
            self.encode_prompt(request.prompt_ids, request.negative_ids, guided, k, layer, device);
        let condition = TextImage { text_embeds, image_embeds };
        let learned = scheduler.ddpm().is_some_and(|d| d.variance_type() == VarianceType::LearnedRange);
        if learned && self.unet.config.out_channels != 2 * LATENT_CHANNELS {
            return Err(GenerateError::Input(format!(
                "the scheduler's `variance_type` is learned_range but the UNet predicts {} channels, not 8",
                self.unet.config.out_channels
            )));
        }
        scheduler.set_timesteps(request.steps)?;
        let mut latents = latents * scheduler.init_noise_sigma();
        let unet = on_device(&self.unet, device);
        for (step, &t) in scheduler.timesteps().iter().enumerate() {
            let input =
                if guided { Tensor::cat(vec![latents.clone(), latents.clone()], 0) } else { latents.clone() };
            let prediction = unet.forward_with(input, t, &states, None, Some(&condition));
            let prediction =
                guided_noise(prediction, LATENT_CHANNELS, guided.then_some(request.guidance), learned);
            latents = scheduler.step(prediction, step, latents);
        }
        drop(unet);
        Ok((on_device(&self.movq, device).decode(latents) * 0.5 + 0.5).clamp(0.0, 1.0))
    }
}
