//! `CogView4Pipeline` folders: `text_encoder` (`GlmModel`), `tokenizer` (a
//! `PreTrainedTokenizerFast` `tokenizer.json`, saved by transformers 5 as `TokenizersBackend`),
//! `transformer` (`CogView4Transformer2DModel`), `vae`.
//!
//! [`GlmTokenizer`] gives the ids `_get_glm_embeds` hands GLM for one prompt: the tokenizer's
//! ids with its special tokens (the post-processor's `[gMASK]<sop>`), truncated to
//! `max_sequence_length` (1024, diffusers' default; `--max-sequence-length`) as transformers
//! truncates (`truncation=True`, the specials kept), then left-padded with `pad_token`
//! (`tokenizer_config.json`) to a multiple of 16. A prompt that is cut is counted
//! ([`GlmTokenizer::cut`]), so the caller can warn as diffusers does.

use std::path::{Path, PathBuf};

use culturelens_diffusion::pipeline_cogview4::CogView4;
use culturelens_diffusion::pipelines::Pipeline;
use culturelens_diffusion_models::transformer_cogview4::CogView4TransformerConfig;
use culturelens_diffusion_models::vae::VaeConfig;
use culturelens_models::glm::GlmConfig;
use serde_json::Value;

use super::{Component, Placement, PromptTokenizer, token_string};
use crate::{LoadError, read_string};

/// diffusers' `max_sequence_length` default of the CogView4 pipeline.
pub const MAX_SEQUENCE_LENGTH: usize = 1024;
/// `_get_glm_embeds` left-pads the ids to a multiple of this.
const PAD_MULTIPLE: usize = 16;
/// The longest `max_sequence_length` accepted (far above GLM-4's 8192 positions in CogView4).
const MAX_LENGTH_LIMIT: usize = 1 << 16;

/// CogView4's tokenizer as `_get_glm_embeds` calls it, for one prompt.
pub struct GlmTokenizer {
    /// The tokenizer with transformers' truncation to `max_len`.
    truncating: tokenizers::Tokenizer,
    /// The same without truncation (to count what is cut).
    full: tokenizers::Tokenizer,
    pad: u32,
    max_len: usize,
    path: PathBuf,
}

impl GlmTokenizer {
    /// Reads `tokenizer.json` and the pad token of `tokenizer_config.json` in `dir`.
    pub fn load(dir: &Path, max_len: usize) -> Result<Self, LoadError> {
        let config_path = dir.join("tokenizer_config.json");
        let config: Value = serde_json::from_str(&read_string(&config_path)?)
            .map_err(|source| LoadError::Json { path: config_path.clone(), source })?;
        let pad = token_string(&config, "pad_token").ok_or_else(|| LoadError::Tokenizer {
            path: config_path.clone(),
            message: "`pad_token` is missing (CogView4 left-pads the ids with it)".into(),
        })?;
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(LoadError::Missing {
                dir: dir.to_owned(),
                what: "tokenizer",
                hint: "expected tokenizer.json (CogView4's PreTrainedTokenizerFast)".into(),
            });
        }
        let mut full = crate::tokenizer_from_bytes(&crate::read(&path)?, &path)?;
        let pad_id = full.token_to_id(&pad).ok_or_else(|| LoadError::Tokenizer {
            path: config_path.clone(),
            message: format!("`pad_token` `{pad}` is not in the vocabulary of tokenizer.json"),
        })?;
        full.with_padding(None);
        full.with_truncation(None)
            .map_err(|e| LoadError::Tokenizer { path: path.clone(), message: e.to_string() })?;
        let mut tokenizer =
            Self { truncating: full.clone(), full, pad: pad_id, max_len: 0, path: path.clone() };
        tokenizer.set_max_len(max_len)?;
        Ok(tokenizer)
    }

    /// Truncates to `n` tokens, specials included (`max_sequence_length`).
    pub fn set_max_len(&mut self, n: usize) -> Result<(), LoadError> {
        let specials =
            self.full.get_post_processor().map_or(0, |p| tokenizers::PostProcessor::added_tokens(p, false));
        if n <= specials || n > MAX_LENGTH_LIMIT {
            return Err(LoadError::Tokenizer {
                path: self.path.clone(),
                message: format!(
                    "--max-sequence-length {n}: must exceed the {specials} special tokens and be at most {MAX_LENGTH_LIMIT}"
                ),
            });
        }
        self.truncating
            .with_truncation(Some(tokenizers::TruncationParams { max_length: n, ..Default::default() }))
            .map_err(|e| LoadError::Tokenizer { path: self.path.clone(), message: e.to_string() })?;
        self.max_len = n;
        Ok(())
    }

    fn encode(&self, tokenizer: &tokenizers::Tokenizer, text: &str) -> Result<Vec<u32>, LoadError> {
        let encoding = tokenizer
            .encode(text, true)
            .map_err(|e| LoadError::Tokenizer { path: self.path.clone(), message: e.to_string() })?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The ids GLM reads for `text`: truncated, then left-padded to a multiple of 16.
    pub fn ids(&self, text: &str) -> Result<Vec<u32>, LoadError> {
        let ids = self.encode(&self.truncating, text)?;
        let pad = (PAD_MULTIPLE - ids.len() % PAD_MULTIPLE) % PAD_MULTIPLE;
        Ok(std::iter::repeat_n(self.pad, pad).chain(ids).collect())
    }

    /// How many tokens of `text` truncation cuts (0 for a prompt that fits).
    pub fn cut(&self, text: &str) -> Result<usize, LoadError> {
        Ok(self.encode(&self.full, text)?.len().saturating_sub(self.max_len))
    }
}

/// The pipeline of `dir` and its tokenizer.
pub(super) fn load(dir: &Path, device: &Placement) -> Result<(Pipeline, Vec<PromptTokenizer>), LoadError> {
    let text_encoder = Component::read(dir, "text_encoder", "model")?.load(device, GlmConfig::load)?;
    let transformer = Component::read(dir, "transformer", "diffusion_pytorch_model")?;
    let transformer_model = transformer.load(device, CogView4TransformerConfig::load)?;
    let vae = Component::read(dir, "vae", "diffusion_pytorch_model")?.load(device, VaeConfig::load)?;
    let tokenizer = GlmTokenizer::load(&dir.join("tokenizer"), MAX_SEQUENCE_LENGTH)?;
    let model = CogView4::new(text_encoder, transformer_model, vae)
        .map_err(|source| LoadError::Model { path: transformer.config_path.clone(), source })?;
    Ok((Pipeline::CogView4(Box::new(model)), vec![PromptTokenizer::Glm(Box::new(tokenizer))]))
}
