//! `StableDiffusionPipeline` / `AltDiffusionPipeline` folders: `text_encoder` (CLIP, or
//! AltDiffusion's XLM-R with its projection), `tokenizer` (CLIP's, or XLM-R's from
//! [`crate::xlm_roberta_tokenizer`]), `unet`, `vae`.

use std::path::Path;

use culturelens_diffusion::pipeline::{StableDiffusion, TextEncoder};
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::unet::UNetConfig;
use culturelens_diffusion_models::vae::VaeConfig;

use super::{ClipTokenizer, Component, Placement, PromptTokenizer, model_max_length, unsupported};
use crate::LoadError;
use crate::xlm_roberta_tokenizer::XlmRobertaTokenizer;

/// The pipeline of `dir` (`alt`: AltDiffusion's text side) and its one tokenizer.
pub(super) fn load(
    dir: &Path,
    device: &Placement,
    alt: bool,
) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let text = Component::read(dir, "text_encoder", "model")?;
    let load_text = if alt { TextEncoder::load_roberta } else { TextEncoder::load_clip };
    let text_encoder = text.load(device, load_text)?;
    let unet = Component::read(dir, "unet", "diffusion_pytorch_model")?;
    let unet_model = unet.load(device, UNetConfig::load)?;
    let vae = Component::read(dir, "vae", "diffusion_pytorch_model")?.load(device, VaeConfig::load)?;
    let model = StableDiffusion::new(text_encoder, unet_model, vae)
        .map_err(|source| LoadError::Model { path: unet.config_path.clone(), source })?;
    let tokenizer = match &model.text_encoder {
        TextEncoder::Clip { config, .. } => {
            let tokenizer = ClipTokenizer::load(&dir.join("tokenizer"), config.max_position_embeddings)?;
            PromptTokenizer::Clip(Box::new(tokenizer))
        }
        TextEncoder::Roberta(encoder) => {
            let max_len = model_max_length(&dir.join("tokenizer"))?;
            let c = &encoder.config.encoder;
            if max_len + c.pad_token_id as usize + 1 > c.max_position_embeddings {
                return Err(unsupported(
                    &text.config_path,
                    format!(
                        "`max_position_embeddings` {} is too small for the tokenizer's `model_max_length` {max_len} (positions start after the padding index {})",
                        c.max_position_embeddings, c.pad_token_id
                    ),
                ));
            }
            PromptTokenizer::XlmRoberta(XlmRobertaTokenizer::load(&dir.join("tokenizer"), max_len)?)
        }
    };
    Ok((Pipeline::StableDiffusion(Box::new(model)), vec![tokenizer]))
}
