//! `FluxPipeline.__call__` of diffusers 0.42 (FLUX.1 dev and schnell; SoS Table 4's "FX"): it
//! wires CLIP-L, T5, the FLUX transformer ([`culturelens_diffusion_models::transformer_flux`]), the flow-matching
//! scheduler and the 16-channel VAE.
//!
//! - **Text** (`encode_prompt`): CLIP-L (`text_encoder`, a `CLIPTextModel`, 77 tokens) gives
//!   only its pooled output (`pooler_output`: the final-layer-normed end-of-text token); T5
//!   (`text_encoder_2`, `tokenizer_2` padded to `max_sequence_length`, 512 by default) gives
//!   `last_hidden_state`, the transformer's text tokens.
//! - **DiffusionLens** (SoS §5.1): `--text-layer K` reads T5's layer K,
//!   `final_layer_norm(hidden_states[K])` (`K = 1..=24` for T5-XXL; 24 is the pipeline's own),
//!   as DiffusionLens reads DeepFloyd IF's T5: T5 gives every text token FLUX attends to;
//!   CLIP-L's pooled vector is held at the pipeline's own. A negative prompt (true CFG) is read
//!   at the same layer.
//! - **Guidance**: FLUX.1-dev is guidance-distilled: the scale `g` enters as an embedding
//!   (`guidance_embeds`), one transformer call per step; schnell ignores it. A negative prompt
//!   with `true_cfg_scale > 1` adds a second call on the negative prompt and
//!   `v = v_n + s (v_p − v_n)` (diffusers' "true CFG"; no negative prompt, no second call).
//! - **Latents**: `randn((K, c, 2⌊H/16⌋, 2⌊W/16⌋))` from the prompt's seed, then packed into
//!   2 × 2 patches, `(K, (H/16)(W/16), 4c)` — the array the pipeline's `latents=` takes; `H` and
//!   `W` must be multiples of 16 (`2 × vae_scale_factor`; diffusers would round them down). The σ
//!   schedule is `linspace(1, 1/n, n)` shifted with μ from the number of image tokens
//!   (`calculate_shift`) when the scheduler's config shifts dynamically (dev), as is (schnell).
//!   The VAE decodes the unpacked `latents / scaling_factor + shift_factor`.

use burn::tensor::{Device, Tensor};

use super::offload::on_device;
use super::request::{
    GenerateError, GenerateRequest, PromptIds, SizeRule, flow_scheduler, guided, repeat_rows,
};
use culturelens_diffusion_models::transformer_flux::{
    FluxTransformer2DModel, rotary_embedding, unpack_latents,
};
use culturelens_diffusion_models::vae::VaeDecoder;
use culturelens_diffusion_schedulers::{Scheduler, linspace};
use culturelens_models::ModelError;
use culturelens_models::clip::{ClipTextConfig, ClipTextTransformer};
use culturelens_models::t5::T5EncoderModel;
use culturelens_models::vit::pad_ids;

/// diffusers' default `height = width = default_sample_size × vae_scale_factor`, with FLUX's
/// `default_sample_size = 128`.
const DEFAULT_SAMPLE_SIZE: usize = 128;

/// The four models of a `FluxPipeline` folder.
#[derive(Debug)]
pub struct Flux {
    /// `CLIPTextModel`'s `text_model`.
    pub text_encoder: ClipTextTransformer,
    pub text_encoder_config: ClipTextConfig,
    pub text_encoder_2: T5EncoderModel,
    pub transformer: FluxTransformer2DModel,
    pub vae: VaeDecoder,
}

/// FLUX's image sizes from its VAE config: by default `128 × vae_scale_factor`; height and
/// width multiples of `2 × vae_scale_factor` (the latents pack into 2×2 patches).
pub fn size_rule(vae_scale_factor: usize) -> SizeRule {
    SizeRule::multiple_of(DEFAULT_SAMPLE_SIZE * vae_scale_factor, 2 * vae_scale_factor)
}

impl Flux {
    /// The pipeline of its loaded models, after checking that they fit together (an error names
    /// the transformer config key that does not match).
    pub fn new(
        text_encoder: ClipTextTransformer,
        text_encoder_config: ClipTextConfig,
        text_encoder_2: T5EncoderModel,
        transformer: FluxTransformer2DModel,
        vae: VaeDecoder,
    ) -> Result<Self, ModelError> {
        let c = &transformer.config;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if text_encoder_2.config.d_model != c.joint_attention_dim {
            return bad(
                "joint_attention_dim",
                format!(
                    "{} differs from T5's d_model {}",
                    c.joint_attention_dim, text_encoder_2.config.d_model
                ),
            );
        }
        if text_encoder_config.encoder.hidden_size != c.pooled_projection_dim {
            return bad(
                "pooled_projection_dim",
                format!(
                    "{} differs from CLIP's hidden_size {}",
                    c.pooled_projection_dim, text_encoder_config.encoder.hidden_size
                ),
            );
        }
        if 4 * vae.latent_channels != c.in_channels || c.out_channels() != c.in_channels {
            return bad(
                "in_channels",
                format!(
                    "{} / out_channels {} are not 4 × the VAE's latent_channels {}",
                    c.in_channels,
                    c.out_channels(),
                    vae.latent_channels
                ),
            );
        }
        Ok(Self { text_encoder, text_encoder_config, text_encoder_2, transformer, vae })
    }

    /// The image sizes the pipeline takes ([`size_rule`]).
    pub fn size_rule(&self) -> SizeRule {
        size_rule(self.vae.scale_factor)
    }

    /// diffusers' default height and width: `128 × vae_scale_factor`.
    pub fn default_size(&self) -> usize {
        self.size_rule().default
    }

    /// The unpacked latents' `[images, c, h, w]` of an `height × width` image.
    pub fn unpacked_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 4], GenerateError> {
        self.size_rule().check(height, width)?;
        let f = self.vae.scale_factor;
        Ok([images, self.vae.latent_channels, height / f, width / f])
    }

    /// The packed `latents=` shape `[images, (h/2)(w/2), 4c]`.
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 3], GenerateError> {
        let [n, c, h, w] = self.unpacked_shape(images, height, width)?;
        Ok([n, (h / 2) * (w / 2), 4 * c])
    }

    /// The layers DiffusionLens reads: T5's `1..=L`.
    pub fn lens_layers(&self) -> usize {
        self.text_encoder_2.num_layers()
    }

    /// `(prompt_embeds, pooled_prompt_embeds)` of token-id rows (each `[clip, t5]`), T5 at
    /// DiffusionLens layer `layer` (`None`: its last).
    pub fn encode(
        &self,
        rows: &[PromptIds],
        layer: Option<usize>,
        device: &Device,
    ) -> (Tensor<3>, Tensor<2>) {
        let clip: Vec<Vec<u32>> = rows.iter().map(|r| r[0].clone()).collect();
        let t5: Vec<Vec<u32>> = rows.iter().map(|r| r[1].clone()).collect();
        let config = &self.text_encoder_config;
        let positions: Vec<usize> = clip.iter().map(|row| config.pooled_position(row)).collect();
        let pad = config.pad_token_id.unwrap_or(config.eos_token_id);
        let pooled = on_device(&self.text_encoder, device).pooled(pad_ids(&clip, pad, device), &positions);
        let t5 =
            on_device(&self.text_encoder_2, device).encode(&t5, layer.unwrap_or(self.lens_layers()), device);
        (t5, pooled)
    }

    /// Runs the pipeline: `[P·K, 3, H, W]` images in `[0, 1]`.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let flow = flow_scheduler(scheduler, "Flux")?;
        let k = request.images_per_prompt;
        let prompts = request.prompt_ids.len();
        let [_, _, h, w] = self.unpacked_shape(prompts * k, request.height, request.width)?;
        let shape = self.latent_shape(prompts * k, request.height, request.width)?;
        let mut latents = request.latents(shape, device)?;
        let true_cfg = request.negative_given && request.true_cfg > 1.0;
        let rows: Vec<PromptIds> = if true_cfg {
            request.negative_ids.iter().chain(request.prompt_ids).cloned().collect()
        } else {
            request.prompt_ids.to_vec()
        };
        let (embeds, pooled) = self.encode(&rows, request.layer, device);
        let (context, pooled) = (repeat_rows(embeds, k), repeat_rows(pooled, k));
        let rope = rotary_embedding(
            &self.transformer.config.axes_dims_rope,
            context.dims()[1],
            h / 2,
            w / 2,
            device,
        );
        let steps = request.steps;
        let sigmas = linspace(1.0, 1.0 / steps as f64, steps);
        let mu = flow.mu(shape[1]);
        flow.set_timesteps(steps, Some(&sigmas), Some(mu))?;
        let guidance = request.guidance as f32;
        let transformer = on_device(&self.transformer, device);
        for (step, &t) in flow.timesteps().to_vec().iter().enumerate() {
            let input = if true_cfg {
                Tensor::cat(vec![latents.clone(), latents.clone()], 0)
            } else {
                latents.clone()
            };
            let velocity =
                transformer.forward(input, t, Some(guidance), pooled.clone(), context.clone(), &rope);
            let velocity = if true_cfg { guided(velocity, request.true_cfg) } else { velocity };
            latents = flow.step(velocity, step, latents);
        }
        drop(transformer);
        Ok(on_device(&self.vae, device).decode(unpack_latents(latents, h, w)))
    }
}
