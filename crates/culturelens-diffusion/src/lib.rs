//! Text-to-image diffusion (issues 13 and 30): diffusers' Stable Diffusion 1.x/2.x, SDXL (and
//! Playground v2.5), Stable Diffusion 3 / 3.5 and FLUX.1 pipelines re-implemented in Burn,
//! written once for every backend.
//!
//! - [`scheduler`]: the noise schedulers (EDM ones for Playground v2.5, and SD 3 / FLUX's
//!   flow-matching one), pure math over latents, read from a pipeline's
//!   `scheduler/scheduler_config.json`.
//! - [`unet`]: `UNet2DConditionModel`; [`vae`]: the `AutoencoderKL` decoder; [`blocks`]: the
//!   resnet and resampling blocks both share.
//! - [`prior_transformer`]: `PriorTransformer`, the Kandinsky 2.1 prior (with
//!   [`scheduler::UnClip`]).
//! - [`unet_kandinsky3`]: `Kandinsky3UNet`; [`vq_model`]: the `VQModel` (MoVQ) decoder of the
//!   Kandinsky pipelines.
//! - [`transformer_sd3`]: `SD3Transformer2DModel`; [`transformer_flux`]:
//!   `FluxTransformer2DModel`; [`mmdit`]: the adaptive norms, embeddings and joint attention
//!   both share.
//! - [`pipeline`]: `StableDiffusionPipeline` (the text encoder, classifier-free guidance,
//!   DiffusionLens layers and the denoising loop); [`pipeline_stable_diffusion_xl`]:
//!   `StableDiffusionXLPipeline`; [`pipeline_stable_diffusion_3`]:
//!   `StableDiffusion3Pipeline`; [`pipeline_flux`]: `FluxPipeline`; [`pipeline_cogview4`]:
//!   `CogView4Pipeline` (on [`transformer_cogview4`]); [`pipeline_kandinsky3`]:
//!   `Kandinsky3Pipeline`; [`pipeline_kandinsky21_prior`] and [`pipeline_kandinsky21`]:
//!   `KandinskyPriorPipeline` and `KandinskyPipeline` (Kandinsky 2.1), chained by
//!   [`pipeline_kandinsky21_combined`] (`KandinskyCombinedPipeline`); [`pipelines`]: the
//!   [`pipelines::Pipeline`] enum over them; [`request`]: the request they all take;
//!   [`offload`]: where their components wait between uses (`--offload`).
//!
//! Initial latents come from [`culturelens_rng::TorchGenerator`], PyTorch's CPU generator
//! re-implemented bit for bit. No file I/O here: `culturelens-models-io` reads the pipeline
//! folder and hands in its configs and state dicts.

pub mod blocks;
pub mod mmdit;
pub mod offload;
pub mod pipeline;
pub mod pipeline_cogview4;
pub mod pipeline_flux;
pub mod pipeline_if;
pub mod pipeline_if_superresolution;
pub mod pipeline_kandinsky21;
pub mod pipeline_kandinsky21_combined;
pub mod pipeline_kandinsky21_prior;
pub mod pipeline_kandinsky3;
pub mod pipeline_lumina2;
pub mod pipeline_stable_diffusion_3;
pub mod pipeline_stable_diffusion_xl;
pub mod pipelines;
pub mod prior_transformer;
pub mod request;
pub mod scheduler;
pub mod transformer_cogview4;
pub mod transformer_flux;
pub mod transformer_lumina2;
pub mod transformer_sd3;
pub mod unet;
pub mod unet_if;
pub mod unet_kandinsky3;
pub mod vae;
pub mod vq_model;
