//! `Lumina2Pipeline.__call__` of diffusers 0.42 (Lumina-Image 2.0; MAGBIG §4): it wires Gemma 2
//! (`culturelens_models::gemma2`), the Lumina 2 transformer ([`culturelens_diffusion_models::transformer_lumina2`]),
//! the flow-matching scheduler and the 16-channel VAE.
//!
//! - **Text** (`encode_prompt`): a prompt becomes `"{system_prompt} <Prompt Start> {prompt}"`
//!   ([`SYSTEM_PROMPT`], the pipeline's default); a negative prompt (`""` without one) gets no
//!   system prompt. Each is tokenized with `<bos>` and truncated to `max_sequence_length` (256)
//!   by the folder's reader (`culturelens-models-io`, which warns with the number of tokens
//!   cut); the token rows reach [`Lumina2::generate`] unpadded, and are padded here on the right
//!   with Gemma's pad id to the longest row, with the attention mask 1 on the tokens. diffusers
//!   pads to `max_sequence_length`; the outputs do not depend on it (Gemma is causal, so no
//!   token sees the padding, and the transformer masks the padded caption keys and reads only
//!   the kept caption tokens), so the shorter padding gives the same numbers in less time.
//!   The conditioning is Gemma 2's `hidden_states[-2]` (`hidden_states[L − 1]`, before the final
//!   norm) with that mask.
//! - **DiffusionLens** (SoS §5.1): `--text-layer K` reads Gemma 2's `hidden_states[K]` instead,
//!   `K = 1..=L − 1` (`L − 1` is the pipeline's own; the final-normed `hidden_states[L]`, which
//!   the pipeline never reads, is not offered), for the prompt and the negative prompt alike.
//! - **Guidance** with `guidance_scale > 1`: a second transformer call on the negative prompt
//!   (separate batches, as diffusers), `v = v_n + g (v_c − v_n)`; with `cfg_normalization` (the
//!   default) then rescaled by `‖v_c‖ / ‖v‖`, the norms over the last axis (the latents' width,
//!   `torch.norm(·, dim=-1)`); from the step `i` with `(i + 1) / n > cfg_trunc_ratio` on (the
//!   default 1 never) only the conditional call runs.
//! - **Model output**: Lumina 2 is called at `1 − t / num_train_timesteps` (its time runs from
//!   noise at 0 to image at 1) and predicts the negated velocity: the scheduler steps with
//!   `−v`.
//! - **Latents**: `randn((K, c, 2⌊H/16⌋, 2⌊W/16⌋))` from the prompt's seed (the pipeline assumes a
//!   VAE scale factor of 8 whatever the VAE; `H` and `W` must be multiples of 16 here, where
//!   diffusers would round them down). The σ schedule is `linspace(1, 1/n, n)`, shifted with
//!   `μ = calculate_shift(latents.shape[1])` when the scheduler shifts dynamically — diffusers
//!   passes the latents' *channel* count there, not the number of image tokens, and so does
//!   this. The VAE decodes `latents / scaling_factor + shift_factor`.

use burn::tensor::{Device, Tensor};

use super::offload::on_device;
use super::request::{GenerateError, GenerateRequest, PromptIds, SizeRule, flow_scheduler, repeat_rows};
use culturelens_diffusion_models::transformer_lumina2::Lumina2Transformer2DModel;
use culturelens_diffusion_models::vae::VaeDecoder;
use culturelens_diffusion_schedulers::{Scheduler, linspace};
use culturelens_models::ModelError;
use culturelens_models::gemma2::Gemma2Model;

/// `Lumina2Pipeline.system_prompt`, the default `system_prompt` every prompt is prefixed with.
pub const SYSTEM_PROMPT: &str = "You are an assistant designed to generate superior images with the superior degree of image-text alignment based on textual prompts or user prompts.";

/// The text between the system prompt and the prompt.
pub const PROMPT_START: &str = " <Prompt Start> ";

/// diffusers' `max_sequence_length` default.
pub const MAX_SEQUENCE_LENGTH: usize = 256;

/// The VAE scale factor the pipeline hard-codes (`self.vae_scale_factor = 8`).
const VAE_SCALE_FACTOR: usize = 8;

/// The text Gemma 2 reads for a prompt: `"{SYSTEM_PROMPT} <Prompt Start> {prompt}"`.
pub fn prompt_text(prompt: &str) -> String {
    format!("{SYSTEM_PROMPT}{PROMPT_START}{prompt}")
}

/// The three models of a `Lumina2Pipeline` folder and the call's guidance settings.
#[derive(Debug)]
pub struct Lumina2 {
    pub text_encoder: Gemma2Model,
    pub transformer: Lumina2Transformer2DModel,
    pub vae: VaeDecoder,
    /// `cfg_trunc_ratio` (default 1: guidance at every step).
    pub cfg_trunc_ratio: f64,
    /// `cfg_normalization` (default true).
    pub cfg_normalization: bool,
}

/// Lumina 2's image sizes from its transformer config: by default `sample_size × 8`; height and
/// width multiples of 16 (the hard-coded VAE scale factor 8 times the latents' 2×2 patches).
pub fn size_rule(transformer_sample_size: usize) -> SizeRule {
    SizeRule::multiple_of(transformer_sample_size * VAE_SCALE_FACTOR, 2 * VAE_SCALE_FACTOR)
}

impl Lumina2 {
    /// The pipeline of its loaded models, after checking that they fit together (an error names
    /// the transformer config key that does not match).
    pub fn new(
        text_encoder: Gemma2Model,
        transformer: Lumina2Transformer2DModel,
        vae: VaeDecoder,
    ) -> Result<Self, ModelError> {
        let c = &transformer.config;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if text_encoder.config.hidden_size != c.cap_feat_dim {
            return bad(
                "cap_feat_dim",
                format!(
                    "{} differs from Gemma 2's hidden_size {}",
                    c.cap_feat_dim, text_encoder.config.hidden_size
                ),
            );
        }
        if vae.latent_channels != c.in_channels || c.out_channels() != c.in_channels {
            return bad(
                "in_channels",
                format!(
                    "{} / out_channels {} differ from the VAE's latent_channels {}",
                    c.in_channels,
                    c.out_channels(),
                    vae.latent_channels
                ),
            );
        }
        if c.patch_size != 2 {
            return bad(
                "patch_size",
                format!("{} is not supported (the pipeline's latents pair up: 2)", c.patch_size),
            );
        }
        if text_encoder.num_layers() < 2 {
            return Err(ModelError::Unsupported(
                "text_encoder `num_hidden_layers`: the pipeline reads hidden_states[-2], so at least 2"
                    .into(),
            ));
        }
        Ok(Self { text_encoder, transformer, vae, cfg_trunc_ratio: 1.0, cfg_normalization: true })
    }

    /// The image sizes the pipeline takes ([`size_rule`]).
    pub fn size_rule(&self) -> SizeRule {
        size_rule(self.transformer.config.sample_size)
    }

    /// diffusers' default height and width: `sample_size × 8`.
    pub fn default_size(&self) -> usize {
        self.size_rule().default
    }

    /// The `latents=` shape `[images, c, H/8, W/8]` (`H`, `W` multiples of 16).
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 4], GenerateError> {
        self.size_rule().check(height, width)?;
        let c = self.transformer.config.in_channels;
        Ok([images, c, height / VAE_SCALE_FACTOR, width / VAE_SCALE_FACTOR])
    }

    /// The layers DiffusionLens reads: Gemma 2's `hidden_states[1..=L − 1]`.
    pub fn lens_layers(&self) -> usize {
        self.text_encoder.num_layers() - 1
    }

    /// `(prompt_embeds, lengths)` of unpadded token rows: Gemma 2's `hidden_states[layer]`
    /// (`None`: `L − 1`) of the rows padded to the longest, and each row's token count.
    pub fn encode(
        &self,
        rows: &[Vec<u32>],
        layer: Option<usize>,
        device: &Device,
    ) -> (Tensor<3>, Vec<usize>) {
        let pad = self.text_encoder.config.pad_token_id.unwrap_or(0);
        let len = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let lengths: Vec<usize> = rows.iter().map(Vec::len).collect();
        let ids: Vec<Vec<u32>> = rows
            .iter()
            .map(|r| r.iter().copied().chain(std::iter::repeat(pad)).take(len).collect())
            .collect();
        let mask: Vec<Vec<u32>> =
            lengths.iter().map(|&n| (0..len).map(|j| u32::from(j < n)).collect()).collect();
        let k = layer.unwrap_or(self.lens_layers());
        (on_device(&self.text_encoder, device).hidden_state(&ids, &mask, k, device), lengths)
    }

    /// Runs the pipeline: `[P·K, 3, H, W]` images in `[0, 1]`. Each prompt's ids are one row
    /// (the tokenizer's, unpadded, system prompt included), each negative's one row.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let flow = flow_scheduler(scheduler, "Lumina2")?;
        let k = request.images_per_prompt;
        let shape = self.latent_shape(request.prompt_ids.len() * k, request.height, request.width)?;
        let mut latents = request.latents(shape, device)?;
        // diffusers' rotary tables hold `axes_lens` positions per axis: the caption tokens (and the
        // image tokens' first coordinate) on the first, the patch rows and columns on the others.
        let c = &self.transformer.config;
        let (ph, pw) = (shape[2] / c.patch_size, shape[3] / c.patch_size);
        let longest = request
            .prompt_ids
            .iter()
            .chain(request.negative_ids)
            .map(|r| r.first().map_or(0, Vec::len))
            .max();
        if longest.unwrap_or(0) >= c.axes_lens[0] || ph > c.axes_lens[1] || pw > c.axes_lens[2] {
            return Err(GenerateError::Input(format!(
                "{} caption tokens and {ph}×{pw} patches exceed the transformer's `axes_lens` {:?}",
                longest.unwrap_or(0),
                c.axes_lens
            )));
        }
        let first = |rows: &[PromptIds]| {
            rows.iter().map(|r| r.first().cloned().unwrap_or_default()).collect::<Vec<_>>()
        };
        let repeat_lengths =
            |l: Vec<usize>| l.into_iter().flat_map(|n| std::iter::repeat_n(n, k)).collect::<Vec<_>>();
        let (cond, cond_lengths) = self.encode(&first(request.prompt_ids), request.layer, device);
        let (cond, cond_lengths) = (repeat_rows(cond, k), repeat_lengths(cond_lengths));
        let guided = request.guidance > 1.0;
        let uncond = guided.then(|| {
            let (embeds, lengths) = self.encode(&first(request.negative_ids), request.layer, device);
            (repeat_rows(embeds, k), repeat_lengths(lengths))
        });
        let steps = request.steps;
        let sigmas = linspace(1.0, 1.0 / steps as f64, steps);
        let mu = flow.mu(shape[1]);
        flow.set_timesteps(steps, Some(&sigmas), Some(mu))?;
        let train = flow.num_train_timesteps() as f32;
        let batch = shape[0];
        let transformer = on_device(&self.transformer, device);
        for (step, &t) in flow.timesteps().to_vec().iter().enumerate() {
            let truncated = (step + 1) as f64 / steps as f64 > self.cfg_trunc_ratio;
            let time = vec![1.0 - t / train; batch];
            let v_cond = transformer.forward(latents.clone(), &time, cond.clone(), &cond_lengths);
            let velocity = match &uncond {
                Some((embeds, lengths)) if !truncated => {
                    let v_uncond = transformer.forward(latents.clone(), &time, embeds.clone(), lengths);
                    let v = v_uncond.clone() + (v_cond.clone() - v_uncond) * request.guidance;
                    if self.cfg_normalization {
                        let norm = |x: Tensor<4>| x.powi_scalar(2).sum_dim(3).sqrt();
                        let ratio = norm(v_cond) / norm(v.clone());
                        v * ratio
                    } else {
                        v
                    }
                }
                _ => v_cond,
            };
            latents = flow.step(velocity.neg(), step, latents);
        }
        drop(transformer);
        Ok(on_device(&self.vae, device).decode(latents))
    }
}
