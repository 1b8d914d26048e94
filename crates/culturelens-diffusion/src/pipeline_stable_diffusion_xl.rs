//! `StableDiffusionXLPipeline.__call__` of diffusers 0.42: SDXL base 1.0 (SoS Table 4's
//! "SDXL", one of CUBE §5's open models) and Playground v2.5 (CUBE's "Playground", the same
//! class with an EDM scheduler and per-channel VAE statistics). It only wires components: the
//! two CLIP text towers of [`culturelens_models::clip`], the UNet with its `text_time`
//! micro-conditioning ([`culturelens_diffusion_models::unet`]), the UNet pipelines' denoising loop
//! ([`crate::pipeline::denoise`]) and the VAE.
//!
//! - **Text** (`encode_prompt`): `text_encoder` (CLIP ViT-L, a `CLIPTextModel`) and
//!   `text_encoder_2` (OpenCLIP ViT-bigG, a `CLIPTextModelWithProjection`), each with its own
//!   tokenizer padded to 77 tokens, give their penultimate hidden states (`hidden_states[-2]`,
//!   raw: no final layer norm), concatenated on the channel axis (768 + 1280 = the UNet's
//!   `cross_attention_dim` 2048); `text_encoder_2`'s `text_embeds` (its projected pooled token)
//!   is the pooled conditioning.
//! - **Micro-conditioning**: `time_ids = (H, W, 0, 0, H, W)` (original size = target size = the
//!   image's, crop at the top left), embedded by the UNet after the pooled text
//!   (`addition_embed_type: "text_time"`).
//! - **Guidance**: with `guidance > 1` the UNet sees `[negative; prompt]`; without a negative
//!   prompt and with `force_zeros_for_empty_prompt` (`model_index.json`, true unless set
//!   false) the negative embeddings and pooled vector are zeros, otherwise they are the encoded
//!   negative prompt (`""` when none is given). `guidance ≤ 1` runs the prompt alone.
//! - **DiffusionLens** (SoS §5.1, Toker et al. 2024): DiffusionLens itself covers SD 1.4/2.1 and
//!   DeepFloyd IF, not SDXL, so culturelens extends its rule — read the layer as the pipeline
//!   reads its own conditioning — to the dual encoder: `--text-layer K` replaces
//!   `text_encoder_2`'s part of the embeddings by its raw `hidden_states[K]`
//!   (`K = 1..=L₂ − 1`, 31 for bigG; `L₂ − 1` is the pipeline's own), since bigG is the larger
//!   encoder (1280 of the 2048 channels) and gives the pooled vector. `text_encoder` (CLIP-L) is
//!   held at its own penultimate layer and the pooled vector at bigG's full pass. A given
//!   negative prompt is read at the same layer; the zero negative stays zero. The manifest's
//!   `layer` column is `K`, or `L₂ − 1` without `--text-layer`.
//! - **Latents**: `randn((K, 4, H/8, W/8))` from the prompt's seed (one draw per prompt), times
//!   the scheduler's `init_noise_sigma` (√(σ_max² + 1) for the EDM schedulers); `H` and `W`
//!   multiples of 8.
//! - **VAE**: `latents / scaling_factor`, or `latents · latents_std / scaling_factor +
//!   latents_mean` (Playground v2.5), decoded ([`culturelens_diffusion_models::vae`]); with `force_upcast` (SDXL's and
//!   Playground's VAEs overflow in float16) a VAE stored in half precision decodes in float32
//!   ([`StableDiffusionXl::new`]).

use burn::tensor::{DType, Device, Tensor};

use super::offload::on_device;
use super::pipeline::{denoise, set_unet_attention_slice, unet_latent_shape, unet_size_rule};
use super::request::{GenerateError, GenerateRequest, PromptIds, SizeRule, repeat_rows};
use culturelens_diffusion_models::unet::{AttentionSlice, TextTime, UNet2DConditionModel};
use culturelens_diffusion_models::vae::VaeDecoder;
use culturelens_diffusion_schedulers::Scheduler;
use culturelens_models::ModelError;
use culturelens_models::clip::{ClipTextConfig, ClipTextModelWithProjection, ClipTextTransformer};
use culturelens_models::vit::pad_ids;

/// The models of a `StableDiffusionXLPipeline` folder and its one pipeline setting.
#[derive(Debug)]
pub struct StableDiffusionXl {
    /// `CLIPTextModel`'s `text_model` (CLIP ViT-L).
    pub text_encoder: ClipTextTransformer,
    pub text_encoder_config: ClipTextConfig,
    /// OpenCLIP ViT-bigG with its projection.
    pub text_encoder_2: ClipTextModelWithProjection,
    pub unet: UNet2DConditionModel,
    pub vae: VaeDecoder,
    /// `force_zeros_for_empty_prompt` of `model_index.json`.
    pub force_zeros_for_empty_prompt: bool,
}

impl StableDiffusionXl {
    /// The pipeline of its loaded models, after checking that they fit together (an error names
    /// the UNet config key that does not match).
    pub fn new(
        text_encoder: ClipTextTransformer,
        text_encoder_config: ClipTextConfig,
        text_encoder_2: ClipTextModelWithProjection,
        unet: UNet2DConditionModel,
        vae: VaeDecoder,
        force_zeros_for_empty_prompt: bool,
    ) -> Result<Self, ModelError> {
        let c = &unet.config;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let (w1, w2) =
            (text_encoder_config.encoder.hidden_size, text_encoder_2.config.text.encoder.hidden_size);
        if c.cross_attention_dim != w1 + w2 {
            return bad(
                "cross_attention_dim",
                format!("{} is not the two text encoders' widths {w1} + {w2}", c.cross_attention_dim),
            );
        }
        let projection = text_encoder_2.config.projection_dim;
        match (unet.text_time_width(), c.addition_time_embed_dim) {
            (Some(width), Some(dim)) if width == projection + TIME_IDS * dim => {}
            (Some(width), Some(dim)) => {
                return bad(
                    "projection_class_embeddings_input_dim",
                    format!(
                        "{width} is not text_encoder_2's projection_dim {projection} + {TIME_IDS} × addition_time_embed_dim {dim}"
                    ),
                );
            }
            _ => return bad("addition_embed_type", "the SDXL pipeline needs `text_time`".into()),
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
        // diffusers upcasts a half-precision VAE with `force_upcast` at every decode and casts it
        // back after; keeping the float32 copy is the same arithmetic.
        let half = matches!(vae.dtype(), DType::F16 | DType::BF16);
        let vae = if half && vae.force_upcast { vae.upcast() } else { vae };
        Ok(Self {
            text_encoder,
            text_encoder_config,
            text_encoder_2,
            unet,
            vae,
            force_zeros_for_empty_prompt,
        })
    }

    /// Attention slicing for the UNet and the VAE's mid-block attention, as for SD 1.x/2.x.
    pub fn set_attention_slice(&mut self, slice: Option<AttentionSlice>) -> Result<(), ModelError> {
        set_unet_attention_slice(&mut self.unet, &mut self.vae, slice)
    }

    /// The image sizes the pipeline takes (SD's rule, [`unet_size_rule`]).
    pub fn size_rule(&self) -> SizeRule {
        unet_size_rule(self.unet.config.sample_size, self.vae.scale_factor)
    }

    /// diffusers' default height and width: `unet.sample_size × vae_scale_factor` (1024 for SDXL).
    pub fn default_size(&self) -> usize {
        self.size_rule().default
    }

    /// The shape of `images` latents (`latents=`) for a `height × width` image.
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<[usize; 4], GenerateError> {
        unet_latent_shape(&self.unet, &self.vae, images, height, width)
    }

    /// The layers DiffusionLens reads: `text_encoder_2`'s `1..=L₂ − 1`, the last its
    /// penultimate layer (the pipeline's own).
    pub fn lens_layers(&self) -> usize {
        self.text_encoder_2.num_layers().saturating_sub(1)
    }

    /// `(prompt_embeds, pooled_prompt_embeds)` of token-id rows (each `[clip_l, clip_g]`):
    /// `[rows, 77, w₁ + w₂]` and `[rows, projection_dim]`, `text_encoder_2` at DiffusionLens
    /// layer `layer` (`None`: its penultimate).
    pub fn encode(
        &self,
        rows: &[PromptIds],
        layer: Option<usize>,
        device: &Device,
    ) -> (Tensor<3>, Tensor<2>) {
        let column = |i: usize| rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>();
        let tower = on_device(&self.text_encoder, device);
        let x = tower.embeddings.forward(pad_ids(&column(0), 0, device));
        let penultimate = tower.encoder.layers.len().saturating_sub(1);
        let h1 = tower.encoder.forward_layers(x, true, penultimate);
        drop(tower);
        let (h2, pooled) = on_device(&self.text_encoder_2, device).forward(
            &column(1),
            layer.unwrap_or(self.lens_layers()),
            device,
        );
        (Tensor::cat(vec![h1, h2], 2), pooled)
    }

    /// Runs the pipeline: `[P·K, 3, H, W]` images in `[0, 1]` on `device`. `scheduler` is reset
    /// to `request.steps`.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        let layers = self.lens_layers();
        if let Some(k) = request.layer.filter(|&k| k == 0 || k > layers) {
            return Err(GenerateError::Layer { layer: k, layers });
        }
        if let Some(row) = request.prompt_ids.iter().chain(request.negative_ids).find(|r| r.len() != 2) {
            return Err(GenerateError::Input(format!(
                "the SDXL pipeline takes two token-id rows per prompt (tokenizer, tokenizer_2), not {}",
                row.len()
            )));
        }
        let k = request.images_per_prompt;
        let shape = self.latent_shape(request.prompt_ids.len() * k, request.height, request.width)?;
        let latents = request.latents(shape, device)?;
        scheduler.set_timesteps(request.steps)?;
        let (embeds, pooled) = self.encode(request.prompt_ids, request.layer, device);
        let cfg = request.guidance > 1.0;
        let (context, pooled) = if cfg {
            let (negative, negative_pooled) = if !request.negative_given && self.force_zeros_for_empty_prompt
            {
                (embeds.zeros_like(), pooled.zeros_like())
            } else {
                self.encode(request.negative_ids, request.layer, device)
            };
            (Tensor::cat(vec![negative, embeds], 0), Tensor::cat(vec![negative_pooled, pooled], 0))
        } else {
            (embeds, pooled)
        };
        let (h, w) = (request.height as f32, request.width as f32);
        let added = TextTime { text_embeds: repeat_rows(pooled, k), time_ids: vec![h, w, 0.0, 0.0, h, w] };
        let context = repeat_rows(context, k);
        let latents = denoise(
            &on_device(&self.unet, device),
            scheduler,
            latents,
            &context,
            Some(&added),
            cfg.then_some(request.guidance),
        );
        Ok(self.decode(latents))
    }

    /// The VAE's decode as the SDXL pipeline runs it: the latents in the VAE's float type (float32
    /// after the `force_upcast` rule, [`Self::new`]).
    pub fn decode(&self, latents: Tensor<4>) -> Tensor<4> {
        let vae = on_device(&self.vae, &latents.device());
        vae.decode(latents.cast(vae.dtype()))
    }
}

/// The number of `time_ids` (original size, crop top-left, target size).
const TIME_IDS: usize = 6;
