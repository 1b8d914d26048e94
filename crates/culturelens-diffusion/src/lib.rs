//! Text-to-image diffusion pipelines (issues 13, 30 and 31): diffusers' Stable Diffusion 1.x/2.x
//! (and AltDiffusion), SDXL (and Playground v2.5), Stable Diffusion 3 / 3.5, FLUX.1, CogView4,
//! Lumina 2, Kandinsky 2.1 and 3 and DeepFloyd IF pipelines re-implemented in Burn, written once
//! for every backend. This crate wires components: the networks are
//! [`culturelens_diffusion_models`]' (UNets, MMDiT/DiT transformers, the Kandinsky prior, the VAE
//! and MoVQ decoders), the noise schedulers [`culturelens_diffusion_schedulers`]', the text
//! encoders `culturelens-models`' (CLIP, XLM-R, T5, GLM, Gemma 2, M-CLIP).
//!
//! - [`pipeline`]: `StableDiffusionPipeline` (the text encoder, classifier-free guidance,
//!   DiffusionLens layers and the denoising loop); [`pipeline_stable_diffusion_xl`]:
//!   `StableDiffusionXLPipeline`; [`pipeline_stable_diffusion_3`]:
//!   `StableDiffusion3Pipeline`; [`pipeline_flux`]: `FluxPipeline`; [`pipeline_cogview4`]:
//!   `CogView4Pipeline`; [`pipeline_lumina2`]: `Lumina2Pipeline`; [`pipeline_kandinsky3`]:
//!   `Kandinsky3Pipeline`; [`pipeline_kandinsky21_prior`] and [`pipeline_kandinsky21`]:
//!   `KandinskyPriorPipeline` and `KandinskyPipeline` (Kandinsky 2.1), chained by
//!   [`pipeline_kandinsky21_combined`] (`KandinskyCombinedPipeline`); [`pipeline_if`] and
//!   [`pipeline_if_superresolution`]: DeepFloyd IF's stages I and II; [`pipelines`]: the
//!   [`pipelines::Pipeline`] enum over them; [`request`]: the request they all take;
//!   [`offload`]: where their components wait between uses (`--offload`).
//!
//! Initial latents come from [`culturelens_rng::TorchGenerator`], PyTorch's CPU generator
//! re-implemented bit for bit. No file I/O here: `culturelens-models-io` reads the pipeline
//! folder and hands in its configs and state dicts.

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
pub mod request;
