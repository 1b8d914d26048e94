//! `CogView4Pipeline.__call__` of diffusers 0.42 (CogView4, MAGBIG §4): it wires GLM
//! (`culturelens_models::glm`), the CogView4 transformer ([`culturelens_diffusion_models::transformer_cogview4`]), the
//! flow-matching scheduler and the 16-channel VAE.
//!
//! - **Text** (`_get_glm_embeds`): the tokenizer's ids (`[gMASK]<sop>` prefixed by its
//!   post-processor, truncated to `max_sequence_length`, 1024 by default) left-padded with the
//!   pad token to a multiple of 16 — models-io's CogView4 tokenizer gives exactly these ids —
//!   then GLM **without an attention mask** (the pipeline passes none, so the padding is
//!   attended to, causally) and `hidden_states[-2]`, i.e. `hidden_states[L − 1]`, the output of
//!   the first `L − 1` layers before the final norm. Each prompt is encoded as a batch of one
//!   (diffusers pads a list of prompts to the longest, which changes a shorter prompt's
//!   embeddings; one prompt at a time keeps a prompt's images independent of its batch).
//! - **DiffusionLens** (SoS §5.1): `--text-layer K` reads `hidden_states[K]` of the same call,
//!   `K = 1..=L − 1` (`L − 1` is the pipeline's own; `hidden_states[L]`, the normed output, is
//!   not what CogView4 conditions on); the negative prompt is read at the same layer.
//! - **Guidance**: with `guidance_scale > 1` the transformer runs on the prompt and, in a second
//!   call, on the negative prompt (`""` when none is given; its own padded length), and
//!   `v = v_n + s (v_p − v_n)`.
//! - **Latents**: `randn((K, 16, H/f, W/f))` (`f` the VAE's scale factor) from the prompt's
//!   seed; `H` and `W` multiples of 16 (diffusers' `check_inputs`) and of `f × patch_size`.
//!   The size conditions are `original_size = target_size = (H, W)`, `crops_coords_top_left
//!   = (0, 0)`.
//! - **Schedule**: timesteps `⌊linspace(1000, 1, n)⌋` (int64, then float32), σ = timestep /
//!   1000 (float32), shifted with `time_shift(μ, 1, σ)` of the scheduler config (CogView4-6B:
//!   `linear`), where `μ = √(image_seq_len / base_image_seq_len) · max_shift + base_shift`
//!   (CogView4's own `calculate_shift`, not FLUX's line) and `image_seq_len` the number of
//!   image patches; the model is called at the unshifted timesteps.
//! - **VAE**: `vae.decode(latents / scaling_factor)`: CogView4's pipeline adds no
//!   `shift_factor` (nor per-channel statistics), whatever `vae/config.json` says.

use burn::tensor::{Device, Tensor};

use super::offload::on_device;
use super::request::{GenerateError, GenerateRequest, SizeRule, flow_scheduler, guided, repeat_rows};
use culturelens_diffusion_models::transformer_cogview4::{
    CogView4Transformer2DModel, CogView4TransformerConfig, rotary_embedding,
};
use culturelens_diffusion_models::vae::VaeDecoder;
use culturelens_diffusion_schedulers::{Scheduler, linspace};
use culturelens_models::ModelError;
use culturelens_models::glm::GlmModel;

/// The three models of a `CogView4Pipeline` folder.
#[derive(Debug)]
pub struct CogView4 {
    pub text_encoder: GlmModel,
    pub transformer: CogView4Transformer2DModel,
    /// The VAE decoder, its `shift_factor` and per-channel statistics dropped.
    pub vae: VaeDecoder,
}

/// diffusers' `check_inputs`: height and width multiples of 16.
const SIZE_MULTIPLE: usize = 16;

/// CogView4's image sizes from its configs: by default `transformer.sample_size ×
/// vae_scale_factor`; height and width multiples of 16 (`check_inputs`) and of
/// `vae_scale_factor × patch_size`.
pub fn size_rule(transformer: &CogView4TransformerConfig, vae_scale_factor: usize) -> SizeRule {
    let multiple = lcm(SIZE_MULTIPLE, vae_scale_factor * transformer.patch_size);
    SizeRule::multiple_of(transformer.sample_size * vae_scale_factor, multiple)
}

impl CogView4 {
    /// The pipeline of its loaded models, after checking that they fit together (an error names
    /// the transformer config key that does not match).
    pub fn new(
        text_encoder: GlmModel,
        transformer: CogView4Transformer2DModel,
        mut vae: VaeDecoder,
    ) -> Result<Self, ModelError> {
        let c = &transformer.config;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if text_encoder.config.hidden_size != c.text_embed_dim {
            return bad(
                "text_embed_dim",
                format!(
                    "{} differs from GLM's hidden_size {}",
                    c.text_embed_dim, text_encoder.config.hidden_size
                ),
            );
        }
        if vae.latent_channels != c.in_channels || c.in_channels != c.out_channels {
            return bad(
                "in_channels",
                format!(
                    "{} / out_channels {} do not match the VAE's latent_channels {}",
                    c.in_channels, c.out_channels, vae.latent_channels
                ),
            );
        }
        if text_encoder.num_layers() < 2 {
            return Err(ModelError::Unsupported(
                "text_encoder `num_hidden_layers`: CogView4 reads hidden_states[-2], which needs 2 layers"
                    .into(),
            ));
        }
        vae.shift_factor = None;
        vae.latents_mean_std = None;
        Ok(Self { text_encoder, transformer, vae })
    }

    /// The image sizes the pipeline takes ([`size_rule`]).
    pub fn size_rule(&self) -> SizeRule {
        size_rule(&self.transformer.config, self.vae.scale_factor)
    }

    /// diffusers' default height and width: `transformer.sample_size × vae_scale_factor`.
    pub fn default_size(&self) -> usize {
        self.size_rule().default
    }

    /// The shape of `images` latents for an `height × width` image (`latents=` of the pipeline).
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 4], GenerateError> {
        self.size_rule().check(height, width)?;
        let f = self.vae.scale_factor;
        Ok([images, self.transformer.config.in_channels, height / f, width / f])
    }

    /// The layers DiffusionLens reads: GLM's `hidden_states[1..=L − 1]`.
    pub fn lens_layers(&self) -> usize {
        self.text_encoder.num_layers() - 1
    }

    /// `_get_glm_embeds` of one prompt's padded ids: `hidden_states[K]` (`None`: `L − 1`),
    /// `[1, len, hidden]`.
    pub fn encode(&self, ids: &[u32], layer: Option<usize>, device: &Device) -> Tensor<3> {
        let k = layer.unwrap_or(self.lens_layers());
        on_device(&self.text_encoder, device).hidden_state(&[ids.to_vec()], None, k, device)
    }

    /// Runs the pipeline: `[P·K, 3, H, W]` images in `[0, 1]`.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let flow = flow_scheduler(scheduler, "CogView4")?;
        let k = request.images_per_prompt;
        let prompts = request.prompt_ids.len();
        let shape = self.latent_shape(prompts * k, request.height, request.width)?;
        let all = request.latents(shape, device)?;
        let [_, c, h, w] = shape;
        let config = &self.transformer.config;
        let p = config.patch_size;
        let rope = rotary_embedding(
            config.attention_head_dim,
            [config.rope_axes_dim[0], config.rope_axes_dim[1]],
            h / p,
            w / p,
            device,
        );
        let (height, width) = (request.height as f32, request.width as f32);
        let sizes = [height, width, 0.0, 0.0, height, width];
        // The pipeline's schedule: ⌊linspace(N, 1, n)⌋ as float32, σ = t / N in float32.
        let n = flow.train_steps();
        let timesteps: Vec<f32> =
            linspace(n as f64, 1.0, request.steps).into_iter().map(|t| t as i64 as f32).collect();
        let sigmas: Vec<f64> = timesteps.iter().map(|&t| f64::from(t / n as f32)).collect();
        let (base_len, base_shift, max_shift) = flow.shift_config();
        let image_seq_len = ((h * w) / (p * p)) as f64;
        let mu = (image_seq_len / base_len).sqrt() * max_shift + base_shift;
        let cfg = request.guidance > 1.0;
        // Phases, each component on the device once (`offload`): every prompt's text, then
        // every prompt's denoising loop, then the decoder.
        let first = |rows: &Vec<Vec<u32>>| rows.first().cloned().unwrap_or_default();
        let texts: Vec<(Tensor<3>, Option<Tensor<3>>)> = {
            let encoder = on_device(&self.text_encoder, device);
            let encode = |ids: &Vec<Vec<u32>>| {
                let layer = request.layer.unwrap_or(self.lens_layers());
                repeat_rows(encoder.hidden_state(&[first(ids)], None, layer, device), k)
            };
            let negatives = request.negative_ids.iter().map(|ids| cfg.then(|| encode(ids)));
            request.prompt_ids.iter().map(encode).zip(negatives).collect()
        };
        let transformer = on_device(&self.transformer, device);
        let mut denoised = Vec::with_capacity(prompts);
        for (i, (context, negative)) in texts.into_iter().enumerate() {
            let mut latents = all.clone().slice([i * k..(i + 1) * k, 0..c, 0..h, 0..w]);
            flow.set_timesteps_given(&sigmas, &timesteps, Some(mu))?;
            for (step, &t) in flow.timesteps().to_vec().iter().enumerate() {
                let cond = transformer.forward(latents.clone(), context.clone(), t, &sizes, &rope);
                let velocity = match &negative {
                    Some(negative) => {
                        let uncond = transformer.forward(latents.clone(), negative.clone(), t, &sizes, &rope);
                        guided(Tensor::cat(vec![uncond, cond], 0), request.guidance)
                    }
                    None => cond,
                };
                latents = flow.step(velocity, step, latents);
            }
            denoised.push(latents);
        }
        drop(transformer);
        let vae = on_device(&self.vae, device);
        let images: Vec<Tensor<4>> = denoised.into_iter().map(|latents| vae.decode(latents)).collect();
        Ok(Tensor::cat(images, 0))
    }
}

fn lcm(a: usize, b: usize) -> usize {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    a / gcd(a, b) * b
}
