//! CLIP's byte-level BPE tokenizer as transformers' fast `CLIPTokenizer` builds it (NFC,
//! whitespace runs to one space, lower case, CLIP's pre-split, byte-level BPE with `</w>` word
//! ends, start and end tokens): from a vocabulary and merges ([`tokenizer_json`], the diffusion
//! pipelines' `vocab.json` + `merges.txt`) or from open_clip's own BPE file,
//! `bpe_simple_vocab_16e6.txt` ([`from_open_clip_bpe`], the vocabulary the browser app ships so
//! its tokenizer lens starts with CLIP's real tokenizer).

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::LoadError;

/// The merges of CLIP's vocabulary: open_clip's and OpenAI's `merges[1 : 49152 - 256 - 2 + 1]`.
pub const MERGES: usize = 49152 - 256 - 2;
/// The size of CLIP's vocabulary: 256 byte symbols, the same with `</w>`, one token per merge,
/// `<|startoftext|>` (49406) and `<|endoftext|>` (49407).
pub const VOCAB: usize = 49408;

/// GPT-2's byte-to-symbol table, in its order: the printable bytes map to themselves, the rest
/// to U+0100 on.
fn byte_symbols() -> Vec<char> {
    let printable =
        |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
    let mut symbols: Vec<char> = (0..256).filter(|&b| printable(b)).filter_map(char::from_u32).collect();
    symbols.extend((0..256).filter(|&b| !printable(b)).zip(256..).filter_map(|(_, c)| char::from_u32(c)));
    symbols
}

/// The vocabulary (`token → id`) and merges (`"a b"`) of open_clip's BPE file, as open_clip's
/// `SimpleTokenizer` builds them: the first line is a version header, then [`MERGES`] merges.
pub fn open_clip_vocab(bpe: &str) -> Result<(Map<String, Value>, Vec<&str>), String> {
    let merges: Vec<&str> = bpe.split('\n').skip(1).take(MERGES).collect();
    if merges.len() != MERGES || merges.iter().any(|m| m.split(' ').count() != 2) {
        return Err(format!(
            "not open_clip's bpe_simple_vocab_16e6: expected {MERGES} merges `a b` after the first line"
        ));
    }
    let symbols = byte_symbols();
    let mut tokens: Vec<String> = symbols.iter().map(char::to_string).collect();
    tokens.extend(symbols.iter().map(|c| format!("{c}</w>")));
    tokens.extend(merges.iter().map(|m| m.replace(' ', "")));
    tokens.extend(["<|startoftext|>".to_string(), "<|endoftext|>".to_string()]);
    let vocab: Map<String, Value> = tokens.into_iter().enumerate().map(|(i, t)| (t, i.into())).collect();
    if vocab.len() != VOCAB {
        return Err(format!("{} distinct tokens, CLIP has {VOCAB}", vocab.len()));
    }
    Ok((vocab, merges))
}

/// The `tokenizer.json` of transformers' fast CLIP tokenizer over `vocab` and `merges`
/// (`"a b"` lines), with `bos` and `eos` (token, id) as its start and end tokens and `eos` as
/// its unknown token.
pub fn tokenizer_json(vocab: Value, merges: &[&str], bos: (&str, u64), eos: (&str, u64)) -> Value {
    let merges: Vec<Value> = merges
        .iter()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap_or((l, ""));
            json!([a, b])
        })
        .collect();
    let special = |(content, id): (&str, u64)| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
               "normalized": false, "special": true})
    };
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [special(bos), special(eos)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFC"},
            {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
            {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex":
                "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+"},
             "behavior": "Removed", "invert": true},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]},
        "post_processor": {"type": "RobertaProcessing", "sep": [eos.0, eos.1], "cls": [bos.0, bos.1],
                           "trim_offsets": false, "add_prefix_space": false},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": eos.0, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "</w>", "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab, "merges": merges},
    })
}

/// CLIP's tokenizer from open_clip's BPE file (`bpe`, its unpacked text; `path` names it in
/// errors): transformers' `CLIPTokenizer` over the vocabulary open_clip builds.
pub fn from_open_clip_bpe(bpe: &str, path: &Path) -> Result<tokenizers::Tokenizer, LoadError> {
    let (vocab, merges) =
        open_clip_vocab(bpe).map_err(|message| LoadError::Tokenizer { path: path.to_owned(), message })?;
    let spec = tokenizer_json(
        Value::Object(vocab),
        &merges,
        ("<|startoftext|>", VOCAB as u64 - 2),
        ("<|endoftext|>", VOCAB as u64 - 1),
    );
    crate::tokenizer_from_bytes(spec.to_string().as_bytes(), path)
}
