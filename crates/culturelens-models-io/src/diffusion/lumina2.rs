//! `Lumina2Pipeline` folders: `text_encoder` (`Gemma2Model`) with `tokenizer`
//! (`GemmaTokenizer(Fast)`, `tokenizer.json`, 256 tokens: diffusers' `max_sequence_length`
//! default), `transformer` (`Lumina2Transformer2DModel`), `vae` (the 16-channel
//! `AutoencoderKL` with `scaling_factor` and `shift_factor`).

use std::path::Path;

use culturelens_diffusion::pipeline_lumina2::{Lumina2, MAX_SEQUENCE_LENGTH};
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::transformer_lumina2::Lumina2TransformerConfig;
use culturelens_diffusion_models::vae::VaeConfig;
use culturelens_models::gemma2::Gemma2Config;

use super::{Component, Placement, PromptTokenizer};
use crate::LoadError;
use crate::gemma_tokenizer::GemmaTokenizer;

/// The pipeline of `dir` and its tokenizer.
pub(super) fn load(dir: &Path, device: &Placement) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let text_encoder = Component::read(dir, "text_encoder", "model")?.load(device, Gemma2Config::load)?;
    let transformer = Component::read(dir, "transformer", "diffusion_pytorch_model")?;
    let transformer_model = transformer.load(device, Lumina2TransformerConfig::load)?;
    let vae = Component::read(dir, "vae", "diffusion_pytorch_model")?.load(device, VaeConfig::load)?;
    let tokenizers = vec![PromptTokenizer::Gemma(Box::new(GemmaTokenizer::load(
        &dir.join("tokenizer"),
        MAX_SEQUENCE_LENGTH,
    )?))];
    let model = Lumina2::new(text_encoder, transformer_model, vae)
        .map_err(|source| LoadError::Model { path: transformer.config_path.clone(), source })?;
    Ok((Pipeline::Lumina2(Box::new(model)), tokenizers))
}
