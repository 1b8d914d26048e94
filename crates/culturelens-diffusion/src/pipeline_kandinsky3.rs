//! `Kandinsky3Pipeline.__call__` of diffusers 0.42 (SoS Table 4 and Fig. 4's "Kandinsky 3"): it
//! wires the Flan-UL2 encoder (a T5 v1.1 encoder, [`culturelens_models::t5`]), the
//! [`culturelens_diffusion_models::unet_kandinsky3`] UNet, the scheduler (DDPM as shipped) and the MoVQ decoder
//! ([`culturelens_diffusion_models::vq_model`]).
//!
//! - **Text** (`encode_prompt` with `_cut_context=True`): ids padded and truncated to 128 tokens
//!   (the caller's tokenizer), `attention_mask` 1 up to and including `</s>` (the trailing pad ids
//!   are the mask's zeros), T5 run with that mask; `process_embeds` zeroes the padding, cuts
//!   the batch to `max(mask.sum(-1)) + 1` tokens (one padding position kept), and the
//!   embeddings are multiplied by the mask. With images per prompt `K`, the embeddings are
//!   repeated row by row and the mask is tiled (`attention_mask.repeat(K, 1)`), as diffusers
//!   does (the two orders differ for several prompts and `K > 1`; reproduced as it is).
//! - **Negative prompt** (guidance only): none given → zero embeddings and an all-zero mask;
//!   given → its T5 embeddings cut to the prompt's length, times its own mask (no
//!   `process_embeds`). The UNet sees `[negative; prompt]` and the mask as
//!   `encoder_attention_mask`.
//! - **DiffusionLens** (SoS §5.1): `--text-layer K` reads `final_layer_norm(hidden_states[K])`
//!   of the masked T5 (`K = L` is `last_hidden_state`), for the prompt and the negative prompt
//!   alike, then the same mask, cut and product.
//! - **Guidance**: on when `guidance > 1`; the prediction is `(g + 1) ε_c − g ε_u` (Kandinsky 3's
//!   form, not `ε_u + g (ε_c − ε_u)`). The scheduler's `scale_model_input` is not called (the
//!   pipeline does not).
//! - **Latents**: `(P·K, 4, h, w)` with `(h, w)` = diffusers' `downscale_height_and_width(H, W,
//!   8)`: `⌈H / 64⌉ · 8` (so the image is `⌈H / 64⌉ · 8 · 2^(movq levels − 1)` pixels high, 1024
//!   for Kandinsky 3 at `H = 1024`), times `init_noise_sigma`. DDPM's variance noise comes from
//!   the pipeline's generator, which the caller hands the scheduler
//!   (`Scheduler::set_noise_generator`).
//! - **Output**: `movq.decode(latents, force_not_quantize=True)`, then `(x · 0.5 + 0.5)`
//!   clamped to `[0, 1]`.

use burn::tensor::{Device, Tensor, TensorData};

use super::offload::on_device;
use super::request::{GenerateError, GenerateRequest, PromptIds, SizeRule, repeat_rows};
use culturelens_diffusion_models::unet_kandinsky3::Kandinsky3UNet;
use culturelens_diffusion_models::vq_model::VqDecoder;
use culturelens_diffusion_schedulers::Scheduler;
use culturelens_models::ModelError;
use culturelens_models::t5::T5EncoderModel;

/// The ids' length `encode_prompt` pads and truncates to.
pub const MAX_LENGTH: usize = 128;

/// The latent channels the pipeline draws (diffusers' literal 4).
const LATENT_CHANNELS: usize = 4;

/// The three models of a `Kandinsky3Pipeline` folder.
#[derive(Debug)]
pub struct Kandinsky3 {
    pub text_encoder: T5EncoderModel,
    pub unet: Kandinsky3UNet,
    pub movq: VqDecoder,
}

/// The tokens of a padded id row the attention mask keeps: up to the last non-pad id (T5's pad
/// id 0; every row ends in `</s>` before its padding).
fn real_tokens(row: &[u32]) -> usize {
    row.iter().rposition(|&id| id != 0).map_or(0, |i| i + 1)
}

/// Kandinsky 3's image sizes from its MoVQ config: by default 1024 (`__call__`'s); any positive
/// height and width, rounded as [`latent_side`] times the MoVQ's `2^(blocks − 1)`.
pub fn size_rule(movq_scale_factor: usize) -> SizeRule {
    SizeRule { rule_of_8: true, movq_scale_factor: Some(movq_scale_factor), ..SizeRule::multiple_of(1024, 1) }
}

pub use super::request::movq_latent_side as latent_side;

impl Kandinsky3 {
    /// The pipeline of its loaded models, after checking that they fit together (an error names
    /// the UNet or MoVQ config key that does not match).
    pub fn new(
        text_encoder: T5EncoderModel,
        unet: Kandinsky3UNet,
        movq: VqDecoder,
    ) -> Result<Self, ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let d = text_encoder.config.d_model;
        if unet.config.encoder_hid_dim != d {
            return bad(
                "encoder_hid_dim",
                format!("{} differs from the text encoder's d_model {d}", unet.config.encoder_hid_dim),
            );
        }
        if unet.config.in_channels != LATENT_CHANNELS {
            return bad(
                "in_channels",
                format!(
                    "{}: the Kandinsky 3 pipeline draws {LATENT_CHANNELS}-channel latents",
                    unet.config.in_channels
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

    /// The image sizes the pipeline takes ([`size_rule`]).
    pub fn size_rule(&self) -> SizeRule {
        size_rule(self.movq.scale_factor)
    }

    /// diffusers' default height and width (`__call__`'s 1024).
    pub fn default_size(&self) -> usize {
        self.size_rule().default
    }

    /// The shape of `images` latents for an `height × width` request
    /// (`downscale_height_and_width(height, width, 8)`).
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 4], GenerateError> {
        self.size_rule().check(height, width)?;
        Ok([images, LATENT_CHANNELS, latent_side(height), latent_side(width)])
    }

    /// The `[height, width]` of the images for an `height × width` request: the latents'
    /// size times the MoVQ's upsampling.
    pub fn image_size(&self, height: usize, width: usize) -> [usize; 2] {
        self.size_rule().image_size(height, width)
    }

    /// The layers DiffusionLens reads: T5's `1..=L`.
    pub fn lens_layers(&self) -> usize {
        self.text_encoder.num_layers()
    }

    /// T5's masked output at `layer` for id rows, times their masks, cut to `len` tokens (`None`:
    /// `max(mask.sum) + 1`, `process_embeds`): `(embeddings, mask)`.
    fn encode(
        &self,
        ids: &[Vec<u32>],
        layer: usize,
        len: Option<usize>,
        device: &Device,
    ) -> (Tensor<3>, Tensor<2>) {
        let embeds = on_device(&self.text_encoder, device).encode_masked(ids, layer, device);
        let [n, full, _] = embeds.dims();
        let real: Vec<usize> = ids.iter().map(|row| real_tokens(row)).collect();
        let len = len.unwrap_or_else(|| real.iter().max().copied().unwrap_or(0) + 1).min(full);
        let mask: Vec<f32> =
            real.iter().flat_map(|&r| (0..len).map(move |j| if j < r { 1.0 } else { 0.0 })).collect();
        let mask = Tensor::<2>::from_data(TensorData::new(mask, [n, len]), device);
        let embeds = embeds.slice([0..n, 0..len]) * mask.clone().unsqueeze_dim::<3>(2);
        (embeds, mask)
    }

    /// `encode_prompt`: `(embeddings, mask)` of the UNet batch — `[negative; prompt]` with
    /// guidance — for `k` images per prompt, T5 read at `layer`.
    pub fn encode_prompt(
        &self,
        prompts: &[PromptIds],
        negatives: Option<&[PromptIds]>,
        guided: bool,
        k: usize,
        layer: usize,
        device: &Device,
    ) -> (Tensor<3>, Tensor<2>) {
        let first = |rows: &[PromptIds]| rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>();
        let (embeds, mask) = self.encode(&first(prompts), layer, None, device);
        let len = mask.dims()[1];
        let (embeds, mask) = (repeat_rows(embeds, k), mask.repeat_dim(0, k));
        if !guided {
            return (embeds, mask);
        }
        let (negative, negative_mask) = match negatives {
            None => (embeds.zeros_like(), mask.zeros_like()),
            Some(rows) => {
                let (e, m) = self.encode(&first(rows), layer, Some(len), device);
                (repeat_rows(e, k), m.repeat_dim(0, k))
            }
        };
        (Tensor::cat(vec![negative, embeds], 0), Tensor::cat(vec![negative_mask, mask], 0))
    }

    /// Runs the pipeline: `[P·K, 3, H', W']` images in `[0, 1]` (`H'`, `W'` per
    /// [`Self::latent_shape`]).
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let k = request.images_per_prompt;
        let shape = self.latent_shape(request.prompt_ids.len() * k, request.height, request.width)?;
        let latents = request.latents(shape, device)?;
        let guided = request.guidance > 1.0;
        let layer = request.layer.unwrap_or(self.lens_layers());
        let negatives = request.negative_given.then_some(request.negative_ids);
        let (context, mask) = self.encode_prompt(request.prompt_ids, negatives, guided, k, layer, device);
        scheduler.set_timesteps(request.steps)?;
        let mut latents = latents * scheduler.init_noise_sigma();
        let g = request.guidance;
        let unet = on_device(&self.unet, device);
        for (step, &t) in scheduler.timesteps().iter().enumerate() {
            let input =
                if guided { Tensor::cat(vec![latents.clone(), latents.clone()], 0) } else { latents.clone() };
            let noise = unet.forward(input, t, context.clone(), mask.clone());
            let noise = if guided {
                let mut halves = noise.chunk(2, 0);
                let text = halves.pop().expect("two halves");
                let uncond = halves.pop().expect("two halves");
                text * (g + 1.0) - uncond * g
            } else {
                noise
            };
            latents = scheduler.step(noise, step, latents);
        }
        drop(unet);
        Ok((on_device(&self.movq, device).decode(latents) * 0.5 + 0.5).clamp(0.0, 1.0))
    }
}
