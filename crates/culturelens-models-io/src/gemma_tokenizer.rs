//! Gemma's tokenizer as Lumina 2's pipeline calls it (`GemmaTokenizer(Fast)`, transformers 5's one
//! class, from the folder's `tokenizer.json`): `tokenizer(text, padding="max_length",
//! max_length=max_sequence_length, truncation=True)` with the pipeline's `padding_side =
//! "right"`.
//!
//! The file's pipeline is used as it is (Gemma's: spaces replaced by `▁`, a split after each
//! space, BPE with byte fallback, the `<bos>` template); the ids keep `<bos>` and are truncated
//! to `max_sequence_length` tokens, `<bos>` included, as transformers truncates with a
//! post-processor. They come back unpadded: the pipeline pads them ([`culturelens_diffusion::
//! pipeline_lumina2`]), its attention mask being 1 on exactly these tokens. [`GemmaTokenizer::cut`]
//! counts the tokens truncation removes (diffusers warns about them).

use std::path::{Path, PathBuf};

use crate::{LoadError, read};

/// A Gemma tokenizer truncating to one length.
pub struct GemmaTokenizer {
    /// Truncating to `max_len`.
    tokenizer: tokenizers::Tokenizer,
    /// The same without truncation, to count what is cut.
    untruncated: tokenizers::Tokenizer,
    max_len: usize,
    path: PathBuf,
}

impl GemmaTokenizer {
    /// Reads `dir/tokenizer.json`; ids are truncated to `max_len`.
    pub fn load(dir: &Path, max_len: usize) -> Result<Self, LoadError> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(LoadError::Missing {
                dir: dir.to_owned(),
                what: "Gemma tokenizer",
                hint: "expected tokenizer.json, as GemmaTokenizerFast saves it".into(),
            });
        }
        let mut untruncated = crate::tokenizer_from_bytes(&read(&path)?, &path)?;
        untruncated.with_padding(None);
        untruncated
            .with_truncation(None)
            .map_err(|e| LoadError::Tokenizer { path: path.clone(), message: e.to_string() })?;
        let mut this = Self { tokenizer: untruncated.clone(), untruncated, max_len, path };
        this.set_max_len(max_len)?;
        Ok(this)
    }

    /// Truncates to `max_len` tokens from now on.
    pub fn set_max_len(&mut self, max_len: usize) -> Result<(), LoadError> {
        let bad = |message: String| LoadError::Tokenizer { path: self.path.clone(), message };
        if max_len < 1 {
            return Err(bad("a maximum length of 0 leaves no room for <bos>".into()));
        }
        self.tokenizer
            .with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| bad(e.to_string()))?;
        self.max_len = max_len;
        Ok(())
    }

    fn encode(&self, tokenizer: &tokenizers::Tokenizer, text: &str) -> Result<Vec<u32>, LoadError> {
        let encoding = tokenizer
            .encode(text, true)
            .map_err(|e| LoadError::Tokenizer { path: self.path.clone(), message: e.to_string() })?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The ids of `text` with `<bos>`, truncated, unpadded.
    pub fn ids(&self, text: &str) -> Result<Vec<u32>, LoadError> {
        self.encode(&self.tokenizer, text)
    }

    /// How many tokens truncation cuts from `text` (0 when it fits).
    pub fn cut(&self, text: &str) -> Result<usize, LoadError> {
        Ok(self.encode(&self.untruncated, text)?.len().saturating_sub(self.max_len))
    }
}
