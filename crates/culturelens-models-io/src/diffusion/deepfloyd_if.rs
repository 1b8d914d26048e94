//! `IFPipeline` folders (DeepFloyd IF stage I): `text_encoder` (`T5EncoderModel`) with
//! `tokenizer` (`T5Tokenizer`, 77 tokens as IF's `encode_prompt` fixes them; the prompt
//! `lower().strip()`ed first, IF's `clean_caption=False` preprocessing), `unet`
//! (`UNet2DConditionModel` in IF's configuration, [`culturelens_diffusion_models::unet_if`]) and a
//! `DDPMScheduler`. The safety checker, feature extractor and watermarker components are not
//! read (culturelens writes `output_type="np"` images: diffusers applies neither to them).
//! `IFSuperResolutionPipeline` (stage II) folders load with [`load_super_resolution`], for the
//! library's [`DeepFloydIfSuperResolution::upscale`]; the ×4 upscaler (stage III) is not
//! supported.

use std::path::Path;

use culturelens_diffusion::pipeline_if::{DeepFloydIf, IF_MAX_LENGTH};
use culturelens_diffusion::pipeline_if_superresolution::DeepFloydIfSuperResolution;
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::unet_if::IfUNetConfig;
use culturelens_diffusion_schedulers::{Scheduler, SchedulerKind};
use culturelens_models::t5::T5Config;

use super::{Component, Placement, PromptTokenizer};
use crate::LoadError;
use crate::t5_tokenizer::T5Tokenizer;

/// The pipeline of `dir` and its tokenizer.
pub(super) fn load(dir: &Path, device: &Placement) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let text_encoder = Component::read(dir, "text_encoder", "model")?.load(device, T5Config::load)?;
    let unet = Component::read(dir, "unet", "diffusion_pytorch_model")?;
    let unet_model = unet.load(device, IfUNetConfig::load)?;
    let tokenizer = T5Tokenizer::load(&dir.join("tokenizer"), IF_MAX_LENGTH)?;
    let model = DeepFloydIf::new(text_encoder, unet_model)
        .map_err(|source| LoadError::Model { path: unet.config_path.clone(), source })?;
    Ok((Pipeline::DeepFloydIf(Box::new(model)), vec![PromptTokenizer::IfT5(Box::new(tokenizer))]))
}

/// An `IFSuperResolutionPipeline` folder (stage II): `text_encoder`, `tokenizer`, `unet` (6
/// input channels, the noise level as class label), `scheduler` and `image_noising_scheduler`
/// (both `DDPMScheduler`), checked by file and key. Stage II is a library call
/// ([`DeepFloydIfSuperResolution::upscale`]), not a `generate` pipeline: its folder has no row of
/// `PIPELINES`. Returns the pipeline, its tokenizer (IF's preprocessing included) and the
/// `scheduler/scheduler_config.json` text.
pub fn load_super_resolution(
    dir: &Path,
    device: impl Into<Placement>,
) -> Result<(DeepFloydIfSuperResolution, PromptTokenizer, String), LoadError> {
    let device = &device.into();
    let index_path = dir.join("model_index.json");
    let index: serde_json::Value = serde_json::from_str(&crate::read_string(&index_path)?)
        .map_err(|source| LoadError::Json { path: index_path.clone(), source })?;
    let class = index.get("_class_name").and_then(serde_json::Value::as_str).unwrap_or("");
    if class != "IFSuperResolutionPipeline" {
        return Err(super::unsupported(
            &index_path,
            format!("`_class_name`: `{class}` is not IFSuperResolutionPipeline"),
        ));
    }
    let schedulers = ["scheduler", "image_noising_scheduler"].map(|name| {
        let path = dir.join(name).join("scheduler_config.json");
        let json = crate::read_string(&path)?;
        let built = Scheduler::from_config(&json, None)
            .map_err(|source| LoadError::Scheduler { path: path.clone(), source })?;
        if built.kind() != SchedulerKind::Ddpm {
            return Err(super::unsupported(
                &path,
                format!(
                    "`_class_name`: {} does not fit IFSuperResolutionPipeline, which runs DDPMScheduler",
                    built.kind().class_name()
                ),
            ));
        }
        Ok((json, built))
    });
    let [scheduler, noising] = schedulers;
    let (scheduler_json, _) = scheduler?;
    let (_, noising) = noising?;
    let text_encoder = Component::read(dir, "text_encoder", "model")?.load(device, T5Config::load)?;
    let unet = Component::read(dir, "unet", "diffusion_pytorch_model")?;
    let unet_model = unet.load(device, IfUNetConfig::load)?;
    let tokenizer = T5Tokenizer::load(&dir.join("tokenizer"), IF_MAX_LENGTH)?;
    let model = DeepFloydIfSuperResolution::new(text_encoder, unet_model, noising)
        .map_err(|source| LoadError::Model { path: unet.config_path.clone(), source })?;
    Ok((model, PromptTokenizer::IfT5(Box::new(tokenizer)), scheduler_json))
}

/// IF's `_text_preprocessing` with `clean_caption=False`: `text.lower().strip()` (Python's
/// `strip()` also removes the separators U+001C–U+001F, which Rust's `trim` keeps).
pub(super) fn preprocess(text: &str) -> String {
    text.to_lowercase()
        .trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::preprocess;

    #[test]
    fn prompts_are_lowered_and_stripped_as_python_does() {
        assert_eq!(preprocess("  A Photo of the FOOD in China \n"), "a photo of the food in china");
        assert_eq!(preprocess("\u{1f}ÉTÉ\u{3000}"), "été");
        // Final sigma, as Python's `str.lower`.
        assert_eq!(preprocess("ΟΔΟΣ"), "οδος");
    }
}
