//! T5's tokenizer as transformers 5 computes it (`T5Tokenizer`; 4.x's `T5TokenizerFast` is the
//! same class now) and as diffusers' SD3 and FLUX pipelines call it: `padding="max_length",
//! max_length=max_sequence_length, truncation=True`.
//!
//! transformers 5 builds one pipeline whichever file it reads, and so does this module:
//! 1. the SentencePiece model's precompiled character map (`Precompiled`, NFKC for T5's
//!    `nmt_nfkc`), nothing else, as normaliser;
//! 2. `WhitespaceSplit`, then `Metaspace("▁", prepend_scheme="always", split=True)`: every
//!    whitespace-separated word gets its own `▁` (a `tokenizer.json` written by transformers 4,
//!    whose normaliser also collapsed runs of spaces and whose pre-tokeniser had no whitespace
//!    split, is read into this pipeline, as transformers 5 reads it);
//! 3. the Unigram model (Viterbi over the piece scores; unknown pieces → `<unk>`, id 2);
//! 4. `</s>` appended (`$A </s>`), after truncation to `max_length − 1` pieces; then `<pad>` (id
//!    0) up to `max_length`.
//!
//! The special tokens (`<pad>`, `</s>`, `<unk>`, `<extra_id_0…N>`) are matched whole in the text
//! before anything else, as transformers' added tokens. From `tokenizer.json` (what
//! `save_pretrained` writes and the hub's SD3/FLUX folders ship) the vocabulary, the character
//! map and the added tokens are the file's; from `spiece.model` alone they are the
//! SentencePiece model's pieces and scores followed by `tokenizer_config.json`'s `extra_ids`
//! (default 100) sentinels `<extra_id_{N−1}> … <extra_id_0>`, as transformers converts it.

use std::path::{Path, PathBuf};

use prost::Message;
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::Precompiled;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::whitespace::WhitespaceSplit;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, ModelWrapper, NormalizerWrapper, Tokenizer};

use crate::spiece::{BYTE, ModelProto};
use crate::{LoadError, read, read_string};

const EOS: &str = "</s>";
const PAD: &str = "<pad>";
const UNK: &str = "<unk>";

/// A T5 tokenizer padding and truncating to one length.
pub struct T5Tokenizer {
    tokenizer: Tokenizer,
    pad: u32,
    max_len: usize,
    path: PathBuf,
}

impl T5Tokenizer {
    /// Reads `dir/tokenizer.json`, else `dir/spiece.model` (with `dir/tokenizer_config.json`'s
    /// `extra_ids` when the folder has one); ids are padded and truncated to `max_len`.
    pub fn load(dir: &Path, max_len: usize) -> Result<Self, LoadError> {
        if max_len < 1 {
            return Err(LoadError::Tokenizer {
                path: dir.to_owned(),
                message: "a maximum length of 0 leaves no room for </s>".into(),
            });
        }
        let json = dir.join("tokenizer.json");
        let spiece = dir.join("spiece.model");
        let (tokenizer, path) = if json.is_file() {
            (from_json(&read(&json)?, &json)?, json)
        } else if spiece.is_file() {
            let extra_ids = extra_ids(dir)?;
            (from_spiece(&read(&spiece)?, extra_ids, &spiece)?, spiece)
        } else {
            return Err(LoadError::Missing {
                dir: dir.to_owned(),
                what: "T5 tokenizer",
                hint: "expected tokenizer.json or spiece.model".into(),
            });
        };
        Self::finish(tokenizer, max_len, path)
    }

    fn finish(mut tokenizer: Tokenizer, max_len: usize, path: PathBuf) -> Result<Self, LoadError> {
        let bad = |message: String| LoadError::Tokenizer { path: path.clone(), message };
        let id = |token: &str| {
            tokenizer.token_to_id(token).ok_or_else(|| bad(format!("no `{token}` token in the vocabulary")))
        };
        let (eos, pad) = (id(EOS)?, id(PAD)?);
        let pre = Sequence::new(vec![
            WhitespaceSplit.into(),
            Metaspace::new('▁', PrependScheme::Always, true).into(),
        ]);
        tokenizer.with_pre_tokenizer(Some(pre));
        let template = TemplateProcessing::builder()
            .try_single(format!("$A {EOS}"))
            .map_err(|e| bad(e.to_string()))?
            .special_tokens(vec![(EOS, eos)])
            .build()
            .map_err(|e| bad(e.to_string()))?;
        tokenizer.with_post_processor(Some(template));
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| bad(e.to_string()))?;
        Ok(Self { tokenizer, pad, max_len, path })
    }

    /// The ids of `text` with `</s>`, truncated and padded to the maximum length.
    pub fn ids(&self, text: &str) -> Result<Vec<u32>, LoadError> {
        crate::padded_ids(&self.tokenizer, &self.path, text, self.max_len, self.pad)
    }

    /// The length ids are padded and truncated to.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Pads and truncates to `max_len` tokens from now on.
    pub fn set_max_len(&mut self, max_len: usize) -> Result<(), LoadError> {
        let bad = |message: String| LoadError::Tokenizer { path: self.path.clone(), message };
        if max_len < 1 {
            return Err(bad("a maximum length of 0 leaves no room for </s>".into()));
        }
        self.tokenizer
            .with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| bad(e.to_string()))?;
        self.max_len = max_len;
        Ok(())
    }
}

/// `extra_ids` of `dir/tokenizer_config.json` (100, transformers' default, without one).
fn extra_ids(dir: &Path) -> Result<usize, LoadError> {
    let path = dir.join("tokenizer_config.json");
    if !path.is_file() {
        return Ok(100);
    }
    let config: serde_json::Value = serde_json::from_str(&read_string(&path)?)
        .map_err(|source| LoadError::Json { path: path.clone(), source })?;
    match config.get("extra_ids") {
        None | Some(serde_json::Value::Null) => Ok(100),
        Some(v) => v.as_u64().filter(|&n| n <= 10_000).map(|n| n as usize).ok_or_else(|| {
            LoadError::Tokenizer { path, message: format!("`extra_ids` is not a count (found {v})") }
        }),
    }
}

/// The vocabulary, character map and added tokens of a `tokenizer.json` (a Unigram model).
fn from_json(bytes: &[u8], path: &Path) -> Result<Tokenizer, LoadError> {
    let bad = |message: String| LoadError::Tokenizer { path: path.to_owned(), message };
    let mut tokenizer = crate::tokenizer_from_bytes(bytes, path)?;
    if !matches!(tokenizer.get_model(), ModelWrapper::Unigram(_)) {
        return Err(bad("`model.type` is not Unigram, the model of T5's tokenizer".into()));
    }
    let charsmap = match tokenizer.get_normalizer() {
        None => None,
        Some(NormalizerWrapper::Precompiled(p)) => Some(p.clone()),
        Some(NormalizerWrapper::Sequence(steps)) => steps.as_ref().iter().find_map(|n| match n {
            NormalizerWrapper::Precompiled(p) => Some(p.clone()),
            _ => None,
        }),
        Some(_) => None,
    };
    tokenizer.with_normalizer(charsmap);
    Ok(tokenizer)
}

/// transformers' conversion of a SentencePiece `spiece.model`: its pieces and scores, then
/// `extra_ids` sentinels in reverse order, all special tokens added whole.
fn from_spiece(bytes: &[u8], extra_ids: usize, path: &Path) -> Result<Tokenizer, LoadError> {
    let bad = |message: String| LoadError::Tokenizer { path: path.to_owned(), message };
    let proto = ModelProto::decode(bytes).map_err(|e| bad(format!("not a SentencePiece model: {e}")))?;
    if proto.pieces.iter().any(|p| p.r#type == Some(BYTE)) {
        return Err(bad("byte-fallback SentencePiece models are not T5's".into()));
    }
    if proto.trainer_spec.as_ref().and_then(|t| t.model_type).is_some_and(|t| t != 1) {
        return Err(bad("not a Unigram SentencePiece model (T5's is Unigram)".into()));
    }
    let mut vocab: Vec<(String, f64)> = proto
        .pieces
        .iter()
        .map(|p| (p.piece.clone().unwrap_or_default(), f64::from(p.score.unwrap_or(0.0))))
        .collect();
    let sentinels: Vec<String> = (0..extra_ids).rev().map(|i| format!("<extra_id_{i}>")).collect();
    vocab.extend(sentinels.iter().map(|s| (s.clone(), 0.0)));
    let unk = vocab.iter().position(|(piece, _)| piece == UNK);
    let model = Unigram::from(vocab, unk, false).map_err(|e| bad(e.to_string()))?;
    let mut tokenizer = Tokenizer::new(model);
    let map = proto.normalizer_spec.and_then(|s| s.precompiled_charsmap).filter(|m| !m.is_empty());
    if let Some(map) = map {
        let map = Precompiled::from(&map).map_err(|e| bad(format!("precompiled_charsmap: {e}")))?;
        tokenizer.with_normalizer(Some(map));
    }
    let specials: Vec<AddedToken> = [PAD, EOS, UNK]
        .into_iter()
        .map(str::to_owned)
        .chain(sentinels)
        .map(|t| AddedToken::from(t, true))
        .collect();
    tokenizer.add_special_tokens(&specials);
    Ok(tokenizer)
}
