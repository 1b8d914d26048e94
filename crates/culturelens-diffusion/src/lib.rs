//! Text-to-image diffusion (issue 13): diffusers' Stable Diffusion 1.x/2.x pipeline
//! re-implemented in Burn, written once for every backend.
//!
//! - [`scheduler`]: the noise schedulers, pure math over latents, read from a pipeline's
//!   `scheduler/scheduler_config.json`.
//! - [`unet`]: `UNet2DConditionModel`; [`vae`]: the `AutoencoderKL` decoder; [`blocks`]: the
//!   resnet and resampling blocks both share.
//! - [`pipeline`]: the text encoder (the CLIP text tower of [`culturelens_models::clip`]),
//!   classifier-free guidance, DiffusionLens layers and the denoising loop.
//!
//! Initial latents come from [`culturelens_rng::TorchGenerator`], PyTorch's CPU generator
//! re-implemented bit for bit. No file I/O here: `culturelens-models-io` reads the pipeline
//! folder and hands in its configs and state dicts.

pub mod blocks;
pub mod pipeline;
pub mod scheduler;
pub mod unet;
pub mod vae;
