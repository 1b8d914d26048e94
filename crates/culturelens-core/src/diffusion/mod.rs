//! Text-to-image diffusion (issue 13): the pieces of diffusers' Stable Diffusion pipelines that
//! culturelens re-implements in Burn. So far: the noise schedulers ([`scheduler`]), pure math
//! over latents, read from a pipeline's `scheduler/scheduler_config.json`. Initial latents come
//! from [`crate::rng::TorchGenerator`], PyTorch's CPU generator re-implemented bit for bit.

pub mod scheduler;
