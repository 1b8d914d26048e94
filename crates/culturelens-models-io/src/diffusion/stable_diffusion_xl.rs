//! `StableDiffusionXLPipeline` folders (SDXL base 1.0, Playground v2.5): `text_encoder`
//! (`CLIPTextModel`, CLIP ViT-L) with `tokenizer`, `text_encoder_2`
//! (`CLIPTextModelWithProjection`, OpenCLIP ViT-bigG) with `tokenizer_2` (77 tokens each, padded
//! with each tokenizer's own pad token), `unet` (`UNet2DConditionModel` with `text_time`), `vae`,
//! and `model_index.json`'s `force_zeros_for_empty_prompt` (true when absent, as the class).

use std::path::Path;

use culturelens_diffusion::pipeline::TextEncoder;
use culturelens_diffusion::pipeline_stable_diffusion_xl::StableDiffusionXl;
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::unet::UNetConfig;
use culturelens_diffusion_models::vae::VaeConfig;
use culturelens_models::clip::ClipTextWithProjectionConfig;
use serde_json::Value;

use super::{ClipTokenizer, Component, Placement, PromptTokenizer, unsupported};
use crate::LoadError;

/// The pipeline of `dir` (whose `model_index.json` is `index`, read from `index_path`) and its
/// two tokenizers.
pub(super) fn load(
    dir: &Path,
    index: &Value,
    index_path: &Path,
    device: &Placement,
) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let force_zeros = match index.get("force_zeros_for_empty_prompt") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(unsupported(
                index_path,
                format!("`force_zeros_for_empty_prompt`: expected true or false, found {other}"),
            ));
        }
    };
    let (text_encoder, config) =
        match Component::read(dir, "text_encoder", "model")?.load(device, TextEncoder::load_clip)? {
            TextEncoder::Clip { model, config } => (*model, config),
            TextEncoder::Roberta(_) => unreachable!("load_clip builds CLIP"),
        };
    let text_encoder_2 =
        Component::read(dir, "text_encoder_2", "model")?.load(device, ClipTextWithProjectionConfig::load)?;
    let unet = Component::read(dir, "unet", "diffusion_pytorch_model")?;
    let unet_model = unet.load(device, UNetConfig::load)?;
    let vae = Component::read(dir, "vae", "diffusion_pytorch_model")?.load(device, VaeConfig::load)?;
    let clip_tokenizer = |name: &str, max: usize| -> Result<PromptTokenizer, LoadError> {
        Ok(PromptTokenizer::Clip(Box::new(ClipTokenizer::load(&dir.join(name), max)?)))
    };
    let tokenizers = vec![
        clip_tokenizer("tokenizer", config.max_position_embeddings)?,
        clip_tokenizer("tokenizer_2", text_encoder_2.config.text.max_position_embeddings)?,
    ];
    let model = StableDiffusionXl::new(text_encoder, config, text_encoder_2, unet_model, vae, force_zeros)
        .map_err(|source| LoadError::Model { path: unet.config_path.clone(), source })?;
    Ok((Pipeline::StableDiffusionXl(Box::new(model)), tokenizers))
}
