//! AltDiffusion's tokenizer as its pipeline calls it: transformers' `XLMRobertaTokenizer` with
//! `padding="max_length", max_length=model_max_length, truncation=True` (diffusers'
//! `encode_prompt`).
//!
//! From `tokenizer.json` when the folder has one (the fast tokenizer; its post-processor adds
//! `<s> … </s>`). Otherwise from XLM-R's `sentencepiece.bpe.model`, as the slow tokenizer reads
//! it, without C++ SentencePiece:
//! 1. SentencePiece's normaliser: the model's precompiled character map (NFKC for
//!    `nmt_nfkc`), then (each switch of the model's `normalizer_spec`, all on by default)
//!    leading, trailing and repeated spaces removed, a `▁` prefix added, spaces written `▁`;
//! 2. segmentation by the model's type: BPE as SentencePiece's `bpe_model.cc` merges (the
//!    adjacent pair whose merged piece has the highest score first, the leftmost on ties) or
//!    Unigram (Viterbi over the piece scores); a run of unknown pieces is one unknown piece, as
//!    SentencePiece returns it;
//! 3. fairseq's ids (`_convert_token_to_id`): `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, any other
//!    piece its SentencePiece id + 1, an unknown piece (SentencePiece id 0) 3;
//! 4. at most `model_max_length − 2` pieces, then `<s>` and `</s>` around them and `<pad>` up to
//!    `model_max_length`.
//!
//! One difference from transformers: a prompt that spells a special token (`<s>`, `<mask>`, …)
//! has it tokenized as text, where transformers would split it out as that token.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use prost::Message;
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::Precompiled;
use tokenizers::{Model, NormalizedString, Normalizer};

use crate::LoadError;
use crate::spiece::{BYTE, CONTROL, ModelProto, NORMAL, UNKNOWN, USER_DEFINED};

/// fairseq's ids of XLM-R's special tokens.
const BOS: u32 = 0;
const PAD: u32 = 1;
const EOS: u32 = 2;
const UNK: u32 = 3;

/// The tokenizer of an AltDiffusion pipeline folder.
pub struct XlmRobertaTokenizer {
    kind: Kind,
    max_len: usize,
    path: PathBuf,
}

enum Kind {
    Json(Box<tokenizers::Tokenizer>),
    Spm(Box<SpmModel>),
}

/// A SentencePiece model, normaliser and segmenter.
struct SpmModel {
    charsmap: Option<Precompiled>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    segmenter: Segmenter,
}

enum Segmenter {
    /// Normal and user-defined pieces: id and score; user-defined pieces are matched whole first
    /// and never merged.
    Bpe {
        pieces: HashMap<String, (u32, f32)>,
        user_defined: Vec<String>,
    },
    Unigram(Box<Unigram>),
}

impl XlmRobertaTokenizer {
    /// Reads `dir/tokenizer.json`, else `dir/sentencepiece.bpe.model`; `max_len` is
    /// `model_max_length`.
    pub fn load(dir: &Path, max_len: usize) -> Result<Self, LoadError> {
        if max_len < 2 {
            return Err(LoadError::Tokenizer {
                path: dir.join("tokenizer_config.json"),
                message: format!("`model_max_length` {max_len} leaves no room for <s> and </s>"),
            });
        }
        let json = dir.join("tokenizer.json");
        if json.is_file() {
            let mut tok = crate::tokenizer_from_bytes(&crate::read(&json)?, &json)?;
            tok.with_padding(None);
            tok.with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_len,
                ..Default::default()
            }))
            .map_err(|e| LoadError::Tokenizer { path: json.clone(), message: e.to_string() })?;
            return Ok(Self { kind: Kind::Json(Box::new(tok)), max_len, path: json });
        }
        let path = dir.join("sentencepiece.bpe.model");
        if !path.is_file() {
            return Err(LoadError::Missing {
                dir: dir.to_owned(),
                what: "tokenizer",
                hint: "expected tokenizer.json, or sentencepiece.bpe.model as XLMRobertaTokenizer saves it"
                    .into(),
            });
        }
        Self::from_spm_bytes(&crate::read(&path)?, &path, max_len)
    }

    /// The slow `XLMRobertaTokenizer` of a `sentencepiece.bpe.model` file's `bytes` (`path`
    /// names it in errors); `max_len` is `model_max_length` (at least 2, as [`Self::load`]
    /// checks).
    pub fn from_spm_bytes(bytes: &[u8], path: &Path, max_len: usize) -> Result<Self, LoadError> {
        assert!(max_len >= 2, "model_max_length {max_len} leaves no room for <s> and </s>");
        let model = SpmModel::from_bytes(bytes)
            .map_err(|message| LoadError::Tokenizer { path: path.to_owned(), message })?;
        Ok(Self { kind: Kind::Spm(Box::new(model)), max_len, path: path.to_owned() })
    }

    /// The `model_max_length` ids of `text`: `<s>`, its pieces (truncated), `</s>`, padding.
    pub fn ids(&self, text: &str) -> Result<Vec<u32>, LoadError> {
        let mut ids = match &self.kind {
            Kind::Json(tok) => tok
                .encode(text, true)
                .map_err(|e| LoadError::Tokenizer { path: self.path.clone(), message: e.to_string() })?
                .get_ids()
                .to_vec(),
            Kind::Spm(model) => {
                let pieces = model
                    .fairseq_ids(text)
                    .map_err(|message| LoadError::Tokenizer { path: self.path.clone(), message })?;
                let mut ids = Vec::with_capacity(self.max_len);
                ids.push(BOS);
                ids.extend(pieces.into_iter().take(self.max_len - 2));
                ids.push(EOS);
                ids
            }
        };
        ids.resize(self.max_len, PAD);
        Ok(ids)
    }
}

impl SpmModel {
    fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let proto = ModelProto::decode(bytes).map_err(|e| format!("not a SentencePiece model: {e}"))?;
        let kind = |p: &crate::spiece::SentencePiece| p.r#type.unwrap_or(NORMAL);
        if proto.pieces.iter().any(|p| kind(p) == BYTE) {
            return Err("byte-fallback SentencePiece models are not supported".into());
        }
        if proto.pieces.iter().position(|p| kind(p) == UNKNOWN) != Some(0) {
            return Err("the unknown piece must be piece 0 (fairseq maps SentencePiece id 0 to <unk>)".into());
        }
        let trainer = proto.trainer_spec.unwrap_or_default();
        if trainer.treat_whitespace_as_suffix == Some(true) {
            return Err("treat_whitespace_as_suffix is not supported".into());
        }
        let spec = proto.normalizer_spec.unwrap_or_default();
        let charsmap = match spec.precompiled_charsmap.as_deref() {
            Some(map) if !map.is_empty() => {
                Some(Precompiled::from(map).map_err(|e| format!("precompiled_charsmap: {e}"))?)
            }
            _ if spec.name.as_deref().is_none_or(|n| n == "identity") => None,
            _ => return Err(format!("normalizer {:?} without a precompiled_charsmap", spec.name)),
        };
        let segmenter = match trainer.model_type.unwrap_or(1) {
            1 => {
                let vocab = proto
                    .pieces
                    .iter()
                    .map(|p| (p.piece.clone().unwrap_or_default(), f64::from(p.score.unwrap_or(0.0))))
                    .collect();
                Segmenter::Unigram(Box::new(Unigram::from(vocab, Some(0), false).map_err(|e| e.to_string())?))
            }
            2 => {
                if proto.pieces.iter().any(|p| !matches!(kind(p), NORMAL | UNKNOWN | CONTROL | USER_DEFINED))
                {
                    return Err("BPE models with unused pieces are not supported".into());
                }
                let mut pieces = HashMap::new();
                let mut user_defined = Vec::new();
                for (id, p) in proto.pieces.iter().enumerate() {
                    let piece = p.piece.clone().unwrap_or_default();
                    if kind(p) == USER_DEFINED {
                        user_defined.push(piece.clone());
                    }
                    if matches!(kind(p), NORMAL | USER_DEFINED) {
                        pieces.insert(piece, (id as u32, p.score.unwrap_or(0.0)));
                    }
                }
                // Longest first, as SentencePiece's prefix matcher takes the longest match.
                user_defined.sort_by_key(|p| std::cmp::Reverse(p.len()));
                Segmenter::Bpe { pieces, user_defined }
            }
            other => {
                return Err(format!("SentencePiece model type {other} is not supported (unigram or BPE)"));
            }
        };
        Ok(Self {
            charsmap,
            add_dummy_prefix: spec.add_dummy_prefix.unwrap_or(true),
            remove_extra_whitespaces: spec.remove_extra_whitespaces.unwrap_or(true),
            escape_whitespaces: spec.escape_whitespaces.unwrap_or(true),
            segmenter,
        })
    }

    /// SentencePiece's normalised text (step 1 of the module doc).
    fn normalize(&self, text: &str) -> Result<String, String> {
        let mut n = NormalizedString::from(text);
        if let Some(map) = &self.charsmap {
            // The map's offsets are the file's bytes, and the tokenizers crate indexes its string
            // blob with them unchecked: one past the end panics (fuzz harness,
            // `sentencepiece.bpe.model`, seed 1, input 190,373). It is an error here.
            let normalized = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| map.normalize(&mut n)));
            match normalized {
                Ok(result) => result.map_err(|e| e.to_string())?,
                Err(_) => {
                    return Err("precompiled_charsmap: an entry points outside its normalised strings (a corrupt model)"
                        .to_string());
                }
            }
        }
        let mapped = n.get();
        let mut out = if self.remove_extra_whitespaces {
            mapped.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
        } else {
            mapped.to_owned()
        };
        if out.is_empty() {
            return Ok(out);
        }
        if self.add_dummy_prefix {
            out.insert(0, ' ');
        }
        if self.escape_whitespaces {
            out = out.replace(' ', "▁");
        }
        Ok(out)
    }

    /// The fairseq ids of `text`'s pieces (steps 1–3), before `<s>`/`</s>` and truncation.
    fn fairseq_ids(&self, text: &str) -> Result<Vec<u32>, String> {
        let normalized = self.normalize(text)?;
        let spm_ids: Vec<Option<u32>> = match &self.segmenter {
            Segmenter::Unigram(model) => model
                .tokenize(&normalized)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|t| (t.id != 0).then_some(t.id))
                .collect(),
            Segmenter::Bpe { pieces, user_defined } => bpe(&normalized, pieces, user_defined)
                .into_iter()
                .map(|piece| pieces.get(piece).map(|&(id, _)| id))
                .collect(),
        };
        // A run of unknown pieces is one piece (SentencePiece merges them), the fairseq <unk>.
        let mut ids = Vec::with_capacity(spm_ids.len());
        for (i, id) in spm_ids.iter().enumerate() {
            match id {
                Some(id) => ids.push(id + 1),
                None if i > 0 && spm_ids[i - 1].is_none() => {}
                None => ids.push(UNK),
            }
        }
        Ok(ids)
    }
}

/// SentencePiece's BPE segmentation of normalised `text` into pieces (unknown pieces included
/// as they are).
fn bpe<'t>(text: &'t str, pieces: &HashMap<String, (u32, f32)>, user_defined: &[String]) -> Vec<&'t str> {
    // Initial symbols: a user-defined piece where one starts (frozen), else one character.
    let mut symbols: Vec<(usize, usize, bool)> = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let (len, frozen) = match user_defined.iter().find(|p| rest.starts_with(p.as_str())) {
            Some(p) => (p.len(), true),
            None => (rest.chars().next().map_or(1, char::len_utf8), false),
        };
        symbols.push((at, at + len, frozen));
        at += len;
    }
    loop {
        // The adjacent pair whose merged piece scores highest; the leftmost on ties.
        let mut best: Option<(usize, f32)> = None;
        for i in 0..symbols.len().saturating_sub(1) {
            let ((start, _, fa), (_, end, fb)) = (symbols[i], symbols[i + 1]);
            if fa || fb {
                continue;
            }
            if let Some(&(_, score)) = pieces.get(&text[start..end])
                && best.is_none_or(|(_, s)| score > s)
            {
                best = Some((i, score));
            }
        }
        let Some((i, _)) = best else { break };
        symbols[i].1 = symbols[i + 1].1;
        symbols.remove(i + 1);
    }
    symbols.into_iter().map(|(start, end, _)| &text[start..end]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model whose character map points past its strings (found by the fuzz harness) is an
    /// error when a text reaches that entry, never a panic.
    #[test]
    fn a_charsmap_offset_past_its_strings_is_an_error() {
        let path = culturelens_testkit::fixture("fuzz/charsmap_offset_past_the_end.bpe.model");
        let bytes = std::fs::read(&path).unwrap();
        let tokenizer = XlmRobertaTokenizer::from_spm_bytes(&bytes, &path, 77).unwrap();
        let err = tokenizer.ids("A photo of a Zimbabwean person, 日本の猫").unwrap_err().to_string();
        assert!(err.contains("precompiled_charsmap: an entry points outside"), "{err}");
    }

    #[test]
    fn bpe_merges_the_highest_scoring_pair_first_and_the_leftmost_on_ties() {
        let pieces: HashMap<String, (u32, f32)> = [("ab", -2.0), ("bc", -1.0), ("abc", -3.0), ("cc", -1.0)]
            .into_iter()
            .enumerate()
            .map(|(i, (p, s))| (p.to_string(), (i as u32 + 1, s)))
            .collect();
        // "bc" (−1) beats "ab" (−2); then "a"+"bc" = "abc" is a piece.
        assert_eq!(bpe("abc", &pieces, &[]), ["abc"]);
        // "bc" and "cc" tie at −1: the leftmost, "bc", merges; "c" stays.
        assert_eq!(bpe("bcc", &pieces, &[]), ["bc", "c"]);
        // A frozen user-defined piece never merges.
        assert_eq!(bpe("abc", &pieces, &["b".to_string()]), ["a", "b", "c"]);
    }
}
