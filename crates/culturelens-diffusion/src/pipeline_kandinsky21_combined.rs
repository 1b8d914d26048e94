//! `KandinskyCombinedPipeline.__call__` (text to image) of diffusers 0.42: Kandinsky 2.1's prior
//! ([`crate::pipeline_kandinsky21_prior`]) then its decoder ([`crate::pipeline_kandinsky21`]),
//! as the combined pipeline chains `KandinskyPriorPipeline` and `KandinskyPipeline`.
//!
//! - **One generator** flows through both: the prior's initial latents are drawn from it first
//!   (unless given: the combined pipeline's own `latents=` is the prior's), then the prior's
//!   `UnCLIPScheduler` variance noise, then the decoder's initial latents (unless given, as
//!   `KandinskyPipeline(latents=…)` takes them when the two pipelines are called one after the
//!   other with the same generator), then DDPM's variance noise (DDIM draws none).
//! - **Negative prompt**: the prior's alone (its negative image embeddings); the decoder is
//!   called without one, so its unconditional text is always `""`.
//! - **Prompts × images**: the prior returns `P·K` image embeddings, each prompt's `K` in a row
//!   (`[p1, p1, p2, p2]`); the combined pipeline tiles the prompt list to that length
//!   (`(P·K / P) * prompt`: `[p1, p2, p1, p2]`) and calls the decoder with one image per prompt,
//!   so with several prompts and images a decoder row pairs prompt `i mod P`'s text with prompt
//!   `⌊i / K⌋`'s image embedding. This is reproduced as is; one prompt per call (as `generate`
//!   runs it) pairs every row with its own prompt.
//! - **Defaults** (`__call__`'s): 25 prior steps at prior guidance 4, 100 decoder steps at
//!   guidance 4, 512 × 512.

use burn::tensor::{Device, Tensor};
use culturelens_models::ModelError;
use culturelens_rng::{TorchGenerator, TorchNormalPath};

use super::pipeline_kandinsky21::Kandinsky21Decoder;
use super::pipeline_kandinsky21_prior::Kandinsky21Prior;
use super::request::{GenerateError, GenerateRequest, PromptIds, SizeRule};
use culturelens_diffusion_schedulers::{Scheduler, UnClip};

/// `__call__`'s `prior_num_inference_steps`.
pub const PRIOR_STEPS: usize = 25;
/// `__call__`'s `prior_guidance_scale`.
pub const PRIOR_GUIDANCE: f64 = 4.0;

/// A `KandinskyCombinedPipeline` folder's models: the prior (`prior_*` components) and the
/// decoder.
#[derive(Debug)]
pub struct Kandinsky21 {
    pub prior: Kandinsky21Prior,
    /// `prior_scheduler`, set to each run's prior steps.
    pub prior_scheduler: UnClip,
    pub decoder: Kandinsky21Decoder,
    /// The decoder tokenizer's ids of `""`: the decoder's unconditional text.
    pub uncond_ids: Vec<u32>,
}

/// What a combined run takes besides the [`GenerateRequest`] (whose settings are the decoder's).
#[derive(Clone, Copy, Debug)]
pub struct PriorRun<'a> {
    /// `prior_num_inference_steps`.
    pub steps: usize,
    /// `prior_guidance_scale` (guidance on above 1).
    pub guidance: f64,
    /// The prior's initial latents ([`Kandinsky21::prior_latent_shape`]); `None`: drawn from the
    /// generator.
    pub latents: Option<&'a [f32]>,
}

impl Kandinsky21 {
    /// The pipeline of its prior and decoder (`uncond_ids`: the decoder tokenizer's ids of `""`).
    pub fn new(
        prior: Kandinsky21Prior,
        prior_scheduler: UnClip,
        decoder: Kandinsky21Decoder,
        uncond_ids: Vec<u32>,
    ) -> Result<Self, ModelError> {
        let width = prior.latent_shape(1, 1, false)[1];
        let embeds = decoder.unet.config.cross_attention_dim;
        if embeds != width {
            return Err(ModelError::Unsupported(format!(
                "`cross_attention_dim`: the decoder UNet takes image embeddings {embeds} wide, the prior makes {width}"
            )));
        }
        Ok(Self { prior, prior_scheduler, decoder, uncond_ids })
    }

    /// The image sizes the pipeline takes (the decoder's).
    pub fn size_rule(&self) -> SizeRule {
        self.decoder.size_rule()
    }

    /// The shape of the prior's initial latents for `prompts` prompts of `images_per_prompt`
    /// images: `[rows · K, embedding_dim]`, the rows doubled by a negative prompt.
    pub fn prior_latent_shape(
        &self,
        prompts: usize,
        images_per_prompt: usize,
        negative_given: bool,
    ) -> [usize; 2] {
        self.prior.latent_shape(prompts, images_per_prompt, negative_given)
    }

    /// Runs prior and decoder on `request` (its first id row of each prompt the prior's CLIP
    /// ids, the second the decoder's XLM-R ids; `negative_ids`' first rows the prior's;
    /// `request.latents` the decoder's initial latents, or empty to draw them after the prior),
    /// with `generator` drawing as diffusers' one generator does: `[P·K, 3, H, W]` images in
    /// `[0, 1]`. `scheduler` is the decoder's.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        prior_run: &PriorRun,
        scheduler: &mut Scheduler,
        mut generator: TorchGenerator,
        path: TorchNormalPath,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let (p, k) = (request.prompt_ids.len(), request.images_per_prompt);
        if request.prompt_ids.iter().chain(request.negative_ids).any(|ids| ids.len() != 2) {
            return Err(GenerateError::Input(
                "Kandinsky 2.1 takes two id rows per prompt: the prior's CLIP ids and the decoder's XLM-R ids".into(),
            ));
        }
        let prior_shape = self.prior_latent_shape(p, k, request.negative_given);
        let drawn;
        let prior_latents = match prior_run.latents {
            Some(values) => values,
            None => {
                drawn = generator.randn(prior_shape.iter().product(), path);
                &drawn
            }
        };
        let prior_request = GenerateRequest {
            steps: prior_run.steps,
            guidance: prior_run.guidance,
            layer: None,
            latents: prior_latents,
            ..*request
        };
        let mut prior_scheduler = self.prior_scheduler.clone();
        let embeds =
            self.prior.generate(&prior_request, &mut prior_scheduler, &mut generator, path, device)?;
        // `prompt = (image_embeds.shape[0] // len(prompt)) * prompt`, one image per prompt.
        let rows = p * k;
        let prompt_ids: Vec<PromptIds> =
            (0..rows).map(|i| vec![request.prompt_ids[i % p][1].clone()]).collect();
        let negative_ids = vec![vec![self.uncond_ids.clone()]; rows];
        let shape = self.decoder.latent_shape(rows, request.height, request.width)?;
        let drawn;
        let latents = if request.latents.is_empty() {
            drawn = generator.randn(shape.iter().product(), path);
            &drawn
        } else {
            request.latents
        };
        scheduler.set_noise_generator(generator, path);
        let decoder_request = GenerateRequest {
            prompt_ids: &prompt_ids,
            negative_ids: &negative_ids,
            negative_given: false,
            images_per_prompt: 1,
            latents,
            ..*request
        };
        self.decoder.generate(&decoder_request, &embeds, scheduler, device)
    }
}
