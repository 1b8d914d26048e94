//! SigLIP's tokenizer from `spiece.model` (what `SiglipTokenizer.save_pretrained` and the
//! google/siglip-* repositories ship; they have no `tokenizer.json`), rebuilt on the
//! `tokenizers` crate so no C++ SentencePiece is needed.
//!
//! transformers' `SiglipTokenizer` (a SentencePiece Unigram model) encodes a text as:
//! 1. prepend `▁` (it encodes `"▁" + text`, with SentencePiece's own dummy prefix turned off);
//! 2. `canonicalize_text`: lower-case, delete ASCII punctuation (`string.punctuation`), collapse
//!    runs of whitespace to one space, strip;
//! 3. SentencePiece's normaliser: the model's precompiled character map (NFKC for `nmt_nfkc`),
//!    extra spaces removed, spaces escaped as `▁`;
//! 4. Viterbi segmentation with the Unigram pieces and scores; then `</s>` is appended.
//!
//! The same steps here: `Prepend`, `Lowercase`, `Replace`, `Strip`, `Precompiled`, `Replace`
//! normalisers, the Unigram model built from the pieces, and a template adding `</s>`. Parity with
//! the Python tokenizer is tested on a committed SentencePiece model (texts with punctuation, case,
//! runs of spaces, NFKC compatibility characters and unknown characters).

use std::path::Path;

use prost::Message;
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::{Lowercase, Precompiled, Prepend, Replace, Sequence, Strip};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{NormalizerWrapper, Tokenizer};

use crate::LoadError;

/// The parts of SentencePiece's `ModelProto` used here (other fields are skipped).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ModelProto {
    #[prost(message, repeated, tag = "1")]
    pub pieces: Vec<SentencePiece>,
    #[prost(message, optional, tag = "2")]
    pub trainer_spec: Option<TrainerSpec>,
    #[prost(message, optional, tag = "3")]
    pub normalizer_spec: Option<NormalizerSpec>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct SentencePiece {
    #[prost(string, optional, tag = "1")]
    pub piece: Option<String>,
    #[prost(float, optional, tag = "2")]
    pub score: Option<f32>,
    /// 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte.
    #[prost(int32, optional, tag = "3")]
    pub r#type: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TrainerSpec {
    /// 1 unigram (the default), 2 BPE, 3 word, 4 char.
    #[prost(int32, optional, tag = "3")]
    pub model_type: Option<i32>,
    #[prost(bool, optional, tag = "24")]
    pub treat_whitespace_as_suffix: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NormalizerSpec {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub precompiled_charsmap: Option<Vec<u8>>,
    /// Each defaults to true.
    #[prost(bool, optional, tag = "3")]
    pub add_dummy_prefix: Option<bool>,
    #[prost(bool, optional, tag = "4")]
    pub remove_extra_whitespaces: Option<bool>,
    #[prost(bool, optional, tag = "5")]
    pub escape_whitespaces: Option<bool>,
}

/// Used by the XLM-R tokenizer (native only).
#[cfg(feature = "diffusion")]
pub(crate) const NORMAL: i32 = 1;
pub(crate) const UNKNOWN: i32 = 2;
/// Used by the XLM-R tokenizer (native only).
#[cfg(feature = "diffusion")]
pub(crate) const CONTROL: i32 = 3;
/// Used by the XLM-R tokenizer (native only).
#[cfg(feature = "diffusion")]
pub(crate) const USER_DEFINED: i32 = 4;
pub(crate) const BYTE: i32 = 6;
/// SigLIP's end-of-sequence token, appended to every text.
const EOS: &str = "</s>";
/// `string.punctuation`, as a regex character class.
const ASCII_PUNCTUATION: &str = r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]"##;

/// The SigLIP tokenizer of the SentencePiece model at `path`.
pub fn siglip_tokenizer(path: &Path) -> Result<Tokenizer, LoadError> {
    let bytes = std::fs::read(path).map_err(|source| LoadError::Io { path: path.to_owned(), source })?;
    siglip_tokenizer_from_bytes(&bytes, path)
}

/// The SigLIP tokenizer of the SentencePiece model `bytes` (`path` names it in errors).
pub fn siglip_tokenizer_from_bytes(bytes: &[u8], path: &Path) -> Result<Tokenizer, LoadError> {
    let bad = |message: String| LoadError::Tokenizer { path: path.to_owned(), message };
    let proto = ModelProto::decode(bytes).map_err(|e| bad(format!("not a SentencePiece model: {e}")))?;
    if proto.pieces.iter().any(|p| p.r#type == Some(BYTE)) {
        return Err(bad("byte-fallback SentencePiece models are not supported".into()));
    }
    let vocab: Vec<(String, f64)> = proto
        .pieces
        .iter()
        .map(|p| (p.piece.clone().unwrap_or_default(), f64::from(p.score.unwrap_or(0.0))))
        .collect();
    let unk = proto.pieces.iter().position(|p| p.r#type == Some(UNKNOWN));
    let eos =
        vocab.iter().position(|(piece, _)| piece == EOS).ok_or_else(|| bad(format!("no {EOS} piece")))?;
    let model = Unigram::from(vocab, unk, false).map_err(|e| bad(e.to_string()))?;

    let replace = |pattern: &str, with: &str, regex: bool| -> Result<NormalizerWrapper, LoadError> {
        let pattern = if regex {
            tokenizers::normalizers::replace::ReplacePattern::Regex(pattern.into())
        } else {
            tokenizers::normalizers::replace::ReplacePattern::String(pattern.into())
        };
        Ok(Replace::new(pattern, with).map_err(|e| bad(e.to_string()))?.into())
    };
    let mut steps: Vec<NormalizerWrapper> = vec![
        Prepend::new("▁".into()).into(),
        Lowercase.into(),
        replace(ASCII_PUNCTUATION, "", true)?,
        replace(r"\s+", " ", true)?,
        Strip::new(true, true).into(),
    ];
    let spec = proto.normalizer_spec.unwrap_or_default();
    match spec.precompiled_charsmap.as_deref() {
        Some(map) if !map.is_empty() => {
            steps.push(Precompiled::from(map).map_err(|e| bad(format!("precompiled_charsmap: {e}")))?.into())
        }
        // `identity` models have no map; any other rule would need it.
        _ if spec.name.as_deref().is_none_or(|n| n == "identity") => {}
        _ => return Err(bad(format!("normalizer {:?} without a precompiled_charsmap", spec.name))),
    }
    steps.push(replace(" {2,}", " ", true)?);
    steps.push(replace(" ", "▁", false)?);

    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(Sequence::new(steps)));
    let template = TemplateProcessing::builder()
        .try_single(format!("$A {EOS}"))
        .map_err(|e| bad(e.to_string()))?
        .special_tokens(vec![(EOS, eos as u32)])
        .build()
        .map_err(|e| bad(e.to_string()))?;
    tokenizer.with_post_processor(Some(template));
    Ok(tokenizer)
}
