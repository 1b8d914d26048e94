//! The networks of culturelens' text-to-image pipelines, as diffusers' `diffusers.models` has
//! them, re-implemented in Burn and written once for every backend. Each takes its config
//! (`config.json`, read key by key with the class defaults; options outside the supported
//! checkpoints refused by key) and a weight view (`culturelens_models::weights::Vars`); none
//! reads a file or knows a pipeline or a scheduler (`culturelens-diffusion` wires them).
//!
//! - [`unet`]: `UNet2DConditionModel` in SD 1.x/2.x/XL's configurations (SDXL's `text_time`
//!   embedding, `AttentionSlice`); [`unet_if`]: the same class in DeepFloyd IF's and
//!   Kandinsky 2.1's configurations (`SimpleCrossAttn`, added-KV attention);
//!   [`unet_kandinsky3`]: `Kandinsky3UNet`; [`blocks`]: the resnet and resampling blocks they
//!   and the decoders share.
//! - [`vae`]: the `AutoencoderKL` decoder; [`vq_model`]: the `VQModel` (MoVQ) decoder of the
//!   Kandinsky pipelines.
//! - [`transformer_sd3`]: `SD3Transformer2DModel`; [`transformer_flux`]:
//!   `FluxTransformer2DModel`; [`mmdit`]: the adaptive norms, embeddings and joint attention
//!   both share (and CogView4's and Lumina 2's transformers reuse);
//!   [`transformer_cogview4`]: `CogView4Transformer2DModel`; [`transformer_lumina2`]:
//!   `Lumina2Transformer2DModel`.
//! - [`prior_transformer`]: `PriorTransformer`, the Kandinsky 2.1 prior.
//!
//! Attention, group norms with SiLU, GEGLU and the linear layers are `culturelens-models`'
//! (`vit.rs`, `norm.rs`), so the fused CPU passes serve the encoders and these alike.

pub mod blocks;
pub mod mmdit;
pub mod prior_transformer;
pub mod transformer_cogview4;
pub mod transformer_flux;
pub mod transformer_lumina2;
pub mod transformer_sd3;
pub mod unet;
pub mod unet_if;
pub mod unet_kandinsky3;
pub mod vae;
pub mod vq_model;
