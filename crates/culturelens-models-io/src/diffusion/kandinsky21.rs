//! `KandinskyCombinedPipeline` folders (Kandinsky 2.1, as the combined pipeline's
//! `save_pretrained` writes them): the decoder's `text_encoder` (`MultilingualCLIP`) with
//! `tokenizer` (`XLMRobertaTokenizer`, 77 tokens: `KandinskyPipeline._encode_prompt`'s fixed
//! length), `unet`, `movq` (`VQModel`) and `scheduler`; the prior's `prior_prior`
//! (`PriorTransformer`), `prior_text_encoder` (`CLIPTextModelWithProjection`) with
//! `prior_tokenizer` (`CLIPTokenizer`, its `model_max_length`, which must be the prior's
//! `num_embeddings`), `prior_image_encoder` (`CLIPVisionModelWithProjection`: only its embedding
//! of the all-zero image, `get_zero_embed`, is kept) and `prior_scheduler` (`UnCLIPScheduler`).
//! `prior_image_processor` is not read (text to image encodes no image).

use std::path::Path;

use culturelens_diffusion::pipeline_kandinsky21::{Kandinsky21Decoder, MAX_LENGTH};
use culturelens_diffusion::pipeline_kandinsky21_combined::Kandinsky21;
use culturelens_diffusion::pipeline_kandinsky21_prior::{Kandinsky21Prior, zero_image};
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::prior_transformer::PriorTransformerConfig;
use culturelens_diffusion_models::unet_if::IfUNetConfig;
use culturelens_diffusion_models::vq_model::VqModelConfig;
use culturelens_diffusion_schedulers::UnClip;
use culturelens_models::clip::{ClipTextWithProjectionConfig, ClipVisionWithProjectionConfig};
use culturelens_models::multilingual_clip::MultilingualClipConfig;

use super::{ClipTokenizer, Component, Placement, PromptTokenizer, model_max_length, unsupported};
use crate::xlm_roberta_tokenizer::XlmRobertaTokenizer;
use crate::{LoadError, read_string};

/// The pipeline of `dir` and its tokenizers: the prior's CLIP one, then the decoder's XLM-R one.
pub(super) fn load(dir: &Path, device: &Placement) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let prior_path = dir.join("prior_scheduler").join("scheduler_config.json");
    let prior_scheduler = UnClip::from_config(&read_string(&prior_path)?)
        .map_err(|source| LoadError::Scheduler { path: prior_path.clone(), source })?;
    let prior = Component::read(dir, "prior_prior", "diffusion_pytorch_model")?;
    let prior_model = prior.load(device, PriorTransformerConfig::load)?;
    let clip = Component::read(dir, "prior_text_encoder", "model")?;
    let clip_model = clip.load(device, ClipTextWithProjectionConfig::load)?;
    let vision = Component::read(dir, "prior_image_encoder", "model")?;
    let size = ClipVisionWithProjectionConfig::from_json(&vision.json)
        .map_err(|source| LoadError::Json { path: vision.config_path.clone(), source })?
        .vision
        .image_size;
    // The zero image's embedding is all the prior keeps of the image encoder: computed on the
    // compute device, the encoder dropped at once.
    let zero_embed = vision
        .load(&Placement::resident(&device.device), ClipVisionWithProjectionConfig::load)?
        .image_embeds(zero_image(size, &device.device));
    let tokens = prior_model.num_embeddings;
    let prior_model = Kandinsky21Prior::new(prior_model, clip_model, zero_embed)
        .map_err(|source| LoadError::Model { path: prior.config_path.clone(), source })?;
    let clip_dir = dir.join("prior_tokenizer");
    let clip_len = model_max_length(&clip_dir)?;
    if clip_len != tokens {
        return Err(LoadError::Tokenizer {
            path: clip_dir.join("tokenizer_config.json"),
            message: format!(
                "`model_max_length` {clip_len} differs from prior_prior's `num_embeddings` {tokens} (the prior reads the tokenizer's ids as they are)"
            ),
        });
    }
    let clip_tokenizer = ClipTokenizer::load(&clip_dir, clip_len)?;

    let text = Component::read(dir, "text_encoder", "model")?;
    let text_model = text.load(device, MultilingualClipConfig::load)?;
    let positions = text_model.transformer.position_embeddings.weight.val().dims()[0];
    let pad = text_model.transformer.pad_token_id as usize;
    if MAX_LENGTH + pad + 1 > positions {
        return Err(unsupported(
            &text.config_path,
            format!(
                "`max_position_embeddings` {positions} is too small for the decoder's {MAX_LENGTH} tokens (positions start after the padding index {pad})"
            ),
        ));
    }
    let unet = Component::read(dir, "unet", "diffusion_pytorch_model")?;
    let unet_model = unet.load(device, IfUNetConfig::load)?;
    let movq = Component::read(dir, "movq", "diffusion_pytorch_model")?;
    let movq_model = movq.load(device, VqModelConfig::load)?;
    let decoder = Kandinsky21Decoder::new(text_model, unet_model, movq_model).map_err(|source| {
        // The MoVQ's key names its file; the others are the UNet's.
        let path =
            if source.to_string().contains("`vq_embed_dim`") { &movq.config_path } else { &unet.config_path };
        LoadError::Model { path: path.clone(), source }
    })?;
    let xlmr = XlmRobertaTokenizer::load(&dir.join("tokenizer"), MAX_LENGTH)?;
    let uncond_ids = xlmr.ids("")?;
    let model = Kandinsky21::new(prior_model, prior_scheduler, decoder, uncond_ids)
        .map_err(|source| LoadError::Model { path: unet.config_path.clone(), source })?;
    let tokenizers = vec![PromptTokenizer::Clip(Box::new(clip_tokenizer)), PromptTokenizer::XlmRoberta(xlmr)];
    Ok((Pipeline::Kandinsky21(Box::new(model)), tokenizers))
}
