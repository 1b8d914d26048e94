//! `StableDiffusion3Pipeline` folders: `text_encoder` and `text_encoder_2`
//! (`CLIPTextModelWithProjection`, CLIP-L and bigG) with `tokenizer` and `tokenizer_2` (77
//! tokens), `text_encoder_3` (`T5EncoderModel`) with `tokenizer_3` (256 tokens, diffusers'
//! `max_sequence_length` default), `transformer` (`SD3Transformer2DModel`), `vae`.

use std::path::Path;

use culturelens_diffusion::pipeline_stable_diffusion_3::StableDiffusion3;
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::transformer_sd3::Sd3TransformerConfig;
use culturelens_diffusion_models::vae::VaeConfig;
use culturelens_models::clip::ClipTextWithProjectionConfig;
use culturelens_models::t5::T5Config;

use super::{ClipTokenizer, Component, Placement, PromptTokenizer};
use crate::LoadError;
use crate::t5_tokenizer::T5Tokenizer;

/// diffusers' `max_sequence_length` default of the SD 3 pipeline.
const MAX_SEQUENCE_LENGTH: usize = 256;

/// The pipeline of `dir` and its three tokenizers.
pub(super) fn load(dir: &Path, device: &Placement) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let clip =
        |name: &str| Component::read(dir, name, "model")?.load(device, ClipTextWithProjectionConfig::load);
    let (text_encoder, text_encoder_2) = (clip("text_encoder")?, clip("text_encoder_2")?);
    let text_encoder_3 = Component::read(dir, "text_encoder_3", "model")?.load(device, T5Config::load)?;
    let transformer = Component::read(dir, "transformer", "diffusion_pytorch_model")?;
    let transformer_model = transformer.load(device, Sd3TransformerConfig::load)?;
    let vae = Component::read(dir, "vae", "diffusion_pytorch_model")?.load(device, VaeConfig::load)?;
    let clip_tokenizer = |name: &str, max: usize| -> Result<PromptTokenizer, LoadError> {
        Ok(PromptTokenizer::Clip(Box::new(ClipTokenizer::load(&dir.join(name), max)?)))
    };
    let tokenizers = vec![
        clip_tokenizer("tokenizer", text_encoder.config.text.max_position_embeddings)?,
        clip_tokenizer("tokenizer_2", text_encoder_2.config.text.max_position_embeddings)?,
        PromptTokenizer::T5(Box::new(T5Tokenizer::load(&dir.join("tokenizer_3"), MAX_SEQUENCE_LENGTH)?)),
    ];
    let model = StableDiffusion3::new(text_encoder, text_encoder_2, text_encoder_3, transformer_model, vae)
        .map_err(|source| LoadError::Model { path: transformer.config_path.clone(), source })?;
    Ok((Pipeline::StableDiffusion3(Box::new(model)), tokenizers))
}
