//! `StableDiffusion3Pipeline.__call__` of diffusers 0.42 (SD 3 and 3.5; SoS Table 4's "SD3"):
//! it wires three text encoders, the MMDiT ([`culturelens_diffusion_models::transformer_sd3`]), the flow-matching
//! scheduler and the 16-channel VAE.
//!
//! - **Text** (`encode_prompt`): CLIP-L (`text_encoder`) and CLIP-G (`text_encoder_2`), both
//!   `CLIPTextModelWithProjection` with 77 tokens, give their penultimate hidden states
//!   (`hidden_states[-2]`, no final layer norm), concatenated on the channel axis and
//!   zero-padded to T5's width, and their `text_embeds`, concatenated into the pooled vector;
//!   T5 (`text_encoder_3`, `tokenizer_3` padded to `max_sequence_length`, 256 by default) gives
//!   `last_hidden_state`. The transformer's text tokens are `[CLIP (77); T5]`.
//! - **DiffusionLens** (SoS §5.1): `--text-layer K` reads T5's layer K,
//!   `final_layer_norm(hidden_states[K])` (`K = 1..=24` for T5-XXL; 24 is the pipeline's own
//!   output), as DiffusionLens reads DeepFloyd IF's T5 — the encoder that gives 256 of the 333
//!   text tokens; CLIP-L and CLIP-G are held at the pipeline's own outputs (penultimate layers
//!   and pooled projections). The negative prompt is read at the same layer, as for SD 1.x/2.x.
//! - **Guidance**: with `guidance > 1` the transformer sees `[negative; prompt]` (the negative
//!   prompt `""` when none is given) and the velocity is `v_u + g (v_c − v_u)`.
//! - **Latents**: `randn((K, 16, H/8, W/8))` from the prompt's seed, unscaled; `H` and `W` must
//!   be multiples of `8 × patch_size`. The σ schedule is the scheduler's own for `n` steps (with
//!   μ from the latents' patch count when its config shifts dynamically), and the VAE decodes
//!   `latents / scaling_factor + shift_factor`.

use burn::tensor::{Device, Tensor};

use super::offload::on_device;
use super::request::{
    GenerateError, GenerateRequest, PatchLimit, PromptIds, SizeRule, flow_scheduler, guided, repeat_rows,
};
use culturelens_diffusion_models::transformer_sd3::{Sd3Transformer2DModel, Sd3TransformerConfig};
use culturelens_diffusion_models::vae::VaeDecoder;
use culturelens_diffusion_schedulers::Scheduler;
use culturelens_models::ModelError;
use culturelens_models::clip::ClipTextModelWithProjection;
use culturelens_models::t5::T5EncoderModel;

/// The five models of a `StableDiffusion3Pipeline` folder.
#[derive(Debug)]
pub struct StableDiffusion3 {
    pub text_encoder: ClipTextModelWithProjection,
    pub text_encoder_2: ClipTextModelWithProjection,
    pub text_encoder_3: T5EncoderModel,
    pub transformer: Sd3Transformer2DModel,
    pub vae: VaeDecoder,
}

/// SD 3's image sizes from its configs: by default `transformer.sample_size × vae_scale_factor`;
/// height and width multiples of `vae_scale_factor × patch_size`, and latents of at most
/// `pos_embed_max_size` patches a side (the transformer's position table).
pub fn size_rule(transformer: &Sd3TransformerConfig, vae_scale_factor: usize) -> SizeRule {
    let (f, p) = (vae_scale_factor, transformer.patch_size);
    let limit =
        PatchLimit { vae_scale_factor: f, patch_size: p, max_patches: transformer.pos_embed_max_size };
    SizeRule { patch_limit: Some(limit), ..SizeRule::multiple_of(transformer.sample_size * f, f * p) }
}

impl StableDiffusion3 {
    /// The pipeline of its loaded models, after checking that they fit together (an error names
    /// the transformer config key that does not match).
    pub fn new(
        text_encoder: ClipTextModelWithProjection,
        text_encoder_2: ClipTextModelWithProjection,
        text_encoder_3: T5EncoderModel,
        transformer: Sd3Transformer2DModel,
        vae: VaeDecoder,
    ) -> Result<Self, ModelError> {
        let c = &transformer.config;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let clip =
            text_encoder.config.text.encoder.hidden_size + text_encoder_2.config.text.encoder.hidden_size;
        let t5 = text_encoder_3.config.d_model;
        if t5 != c.joint_attention_dim || clip > t5 {
            return bad(
                "joint_attention_dim",
                format!(
                    "{} must be T5's d_model {t5} and hold the two CLIP widths ({clip})",
                    c.joint_attention_dim
                ),
            );
        }
        let pooled = text_encoder.config.projection_dim + text_encoder_2.config.projection_dim;
        if pooled != c.pooled_projection_dim {
            return bad(
                "pooled_projection_dim",
                format!("{} differs from the two CLIP projections' {pooled}", c.pooled_projection_dim),
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
        Ok(Self { text_encoder, text_encoder_2, text_encoder_3, transformer, vae })
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
        let (h, w) = (height / self.vae.scale_factor, width / self.vae.scale_factor);
        Ok([images, self.transformer.config.in_channels, h, w])
    }

    /// The layers DiffusionLens reads: T5's `1..=L`.
    pub fn lens_layers(&self) -> usize {
        self.text_encoder_3.num_layers()
    }

    /// `(prompt_embeds, pooled_prompt_embeds)` of token-id rows (each `[clip_l, clip_g, t5]`),
    /// T5 at DiffusionLens layer `layer` (`None`: its last).
    pub fn encode(
        &self,
        rows: &[PromptIds],
        layer: Option<usize>,
        device: &Device,
    ) -> (Tensor<3>, Tensor<2>) {
        let column = |i: usize| rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>();
        let penultimate = |m: &ClipTextModelWithProjection| m.num_layers().saturating_sub(1);
        let clip = |m: &ClipTextModelWithProjection, i: usize| {
            on_device(m, device).forward(&column(i), penultimate(m), device)
        };
        let (h_l, pooled_l) = clip(&self.text_encoder, 0);
        let (h_g, pooled_g) = clip(&self.text_encoder_2, 1);
        let t5_layer = layer.unwrap_or(self.lens_layers());
        let t5 = on_device(&self.text_encoder_3, device).encode(&column(2), t5_layer, device);
        let [n, len, _] = h_l.dims();
        let width = t5.dims()[2];
        let mut clip = vec![h_l, h_g];
        let used = clip.iter().map(|t| t.dims()[2]).sum::<usize>();
        if used < width {
            clip.push(Tensor::zeros([n, len, width - used], device));
        }
        let embeds = Tensor::cat(vec![Tensor::cat(clip, 2), t5], 1);
        (embeds, Tensor::cat(vec![pooled_l, pooled_g], 1))
    }

    /// Runs the pipeline: `[P·K, 3, H, W]` images in `[0, 1]`.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let flow = flow_scheduler(scheduler, "StableDiffusion3")?;
        let k = request.images_per_prompt;
        let shape = self.latent_shape(request.prompt_ids.len() * k, request.height, request.width)?;
        let latents = request.latents(shape, device)?;
        let [_, _, h, w] = shape;
        let cfg = request.guidance > 1.0;
        let rows: Vec<PromptIds> = if cfg {
            request.negative_ids.iter().chain(request.prompt_ids).cloned().collect()
        } else {
            request.prompt_ids.to_vec()
        };
        let (embeds, pooled) = self.encode(&rows, request.layer, device);
        let (context, pooled) = (repeat_rows(embeds, k), repeat_rows(pooled, k));
        let p = self.transformer.config.patch_size;
        let mu = flow.dynamic_shifting().then(|| flow.mu((h / p) * (w / p)));
        flow.set_timesteps(request.steps, None, mu)?;
        let mut latents = latents;
        let transformer = on_device(&self.transformer, device);
        for (step, &t) in flow.timesteps().to_vec().iter().enumerate() {
            let input =
                if cfg { Tensor::cat(vec![latents.clone(), latents.clone()], 0) } else { latents.clone() };
            let velocity = transformer.forward(input, t, context.clone(), pooled.clone());
            let velocity = if cfg { guided(velocity, request.guidance) } else { velocity };
            latents = flow.step(velocity, step, latents);
        }
        drop(transformer);
        Ok(on_device(&self.vae, device).decode(latents))
    }
}
