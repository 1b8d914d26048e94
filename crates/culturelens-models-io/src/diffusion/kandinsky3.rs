//! `Kandinsky3Pipeline` folders: `text_encoder` (`T5EncoderModel`, Flan-UL2's encoder) with
//! `tokenizer` (`T5Tokenizer`, 128 tokens: `encode_prompt`'s fixed `max_length`), `unet`
//! (`Kandinsky3UNet`), `movq` (`VQModel`).

use std::path::Path;

use culturelens_diffusion::pipeline_kandinsky3::{Kandinsky3, MAX_LENGTH};
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::unet_kandinsky3::Kandinsky3UNetConfig;
use culturelens_diffusion_models::vq_model::VqModelConfig;
use culturelens_models::t5::T5Config;

use super::{Component, Placement, PromptTokenizer};
use crate::LoadError;
use crate::t5_tokenizer::T5Tokenizer;

/// The pipeline of `dir` and its tokenizer.
pub(super) fn load(dir: &Path, device: &Placement) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let text_encoder = Component::read(dir, "text_encoder", "model")?.load(device, T5Config::load)?;
    let unet = Component::read(dir, "unet", "diffusion_pytorch_model")?;
    let unet_model = unet.load(device, Kandinsky3UNetConfig::load)?;
    let movq = Component::read(dir, "movq", "diffusion_pytorch_model")?;
    let movq_model = movq.load(device, VqModelConfig::load)?;
    let tokenizers =
        vec![PromptTokenizer::T5(Box::new(T5Tokenizer::load(&dir.join("tokenizer"), MAX_LENGTH)?))];
    let model = Kandinsky3::new(text_encoder, unet_model, movq_model).map_err(|source| {
        // The MoVQ's key names its file; the others are the UNet's.
        let path =
            if source.to_string().contains("`vq_embed_dim`") { &movq.config_path } else { &unet.config_path };
        LoadError::Model { path: path.clone(), source }
    })?;
    Ok((Pipeline::Kandinsky3(Box::new(model)), tokenizers))
}
