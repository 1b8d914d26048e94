//! `FluxPipeline` folders: `text_encoder` (`CLIPTextModel`, CLIP-L) with `tokenizer` (77
//! tokens), `text_encoder_2` (`T5EncoderModel`) with `tokenizer_2` (512 tokens, diffusers'
//! `max_sequence_length` default), `transformer` (`FluxTransformer2DModel`), `vae`.

use std::path::Path;

use culturelens_diffusion::pipeline::TextEncoder;
use culturelens_diffusion::pipeline_flux::Flux;
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::transformer_flux::FluxTransformerConfig;
use culturelens_diffusion_models::vae::VaeConfig;
use culturelens_models::t5::T5Config;

use super::{ClipTokenizer, Component, Placement, PromptTokenizer};
use crate::LoadError;
use crate::t5_tokenizer::T5Tokenizer;

/// diffusers' `max_sequence_length` default of the FLUX pipeline.
const MAX_SEQUENCE_LENGTH: usize = 512;

/// The pipeline of `dir` and its two tokenizers.
pub(super) fn load(dir: &Path, device: &Placement) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let (text_encoder, config) =
        match Component::read(dir, "text_encoder", "model")?.load(device, TextEncoder::load_clip)? {
            TextEncoder::Clip { model, config } => (*model, config),
            TextEncoder::Roberta(_) => unreachable!("load_clip builds CLIP"),
        };
    let text_encoder_2 = Component::read(dir, "text_encoder_2", "model")?.load(device, T5Config::load)?;
    let transformer = Component::read(dir, "transformer", "diffusion_pytorch_model")?;
    let transformer_model = transformer.load(device, FluxTransformerConfig::load)?;
    let vae = Component::read(dir, "vae", "diffusion_pytorch_model")?.load(device, VaeConfig::load)?;
    let tokenizers = vec![
        PromptTokenizer::Clip(Box::new(ClipTokenizer::load(
            &dir.join("tokenizer"),
            config.max_position_embeddings,
        )?)),
        PromptTokenizer::T5(Box::new(T5Tokenizer::load(&dir.join("tokenizer_2"), MAX_SEQUENCE_LENGTH)?)),
    ];
    let model = Flux::new(text_encoder, config, text_encoder_2, transformer_model, vae)
        .map_err(|source| LoadError::Model { path: transformer.config_path.clone(), source })?;
    Ok((Pipeline::Flux(Box::new(model)), tokenizers))
}
