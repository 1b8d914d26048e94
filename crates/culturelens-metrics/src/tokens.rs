//! The tokenizer lens (MAGBIG §5.1): how an encoder's tokenizer splits a prompt, token by token,
//! in a form a person can read, side by side across tokenizers. Pure functions over the pieces a
//! tokenizer returns, so the CLI (`culturelens tokens`) and the browser share them.
//!
//! Conventions:
//! - [`Scheme::ByteLevel`] (CLIP's BPE): a piece's characters are GPT-2's printable stand-ins for
//!   bytes (`bytes_to_unicode`), mapped back to the bytes; the suffix `</w>` marks a word end.
//! - [`Scheme::SentencePiece`] (SigLIP/T5 Unigram, XLM-R): `▁` marks a word start (shown as a
//!   space); a byte-fallback piece `<0xNN>` is the byte `NN`.
//! - A piece whose bytes are not UTF-8 on their own (a byte-fallback byte, or a byte-level BPE
//!   fragment of a character the vocabulary lacks) is shown as its bytes in hex together with the
//!   text of the run of such pieces it completes: `<E1 88> of "ሀ"`; the unknown token shows the
//!   text it stands for: `<unk> of "ሀ"`.
//! - [`lens`] is the one reading of a `tokenizers` encoding that the CLI and the browser share:
//!   ids, pieces and the special-token mask as the encoding gives them; a token whose vocabulary
//!   piece differs from the piece it covers is the unknown token; the scheme comes from the
//!   tokenizer's decoder and pre-tokenizer ([`Scheme::of_tokenizer`]).

use serde::Serialize;
use serde_json::Value;

/// How a tokenizer's pieces encode text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    ByteLevel,
    SentencePiece,
}

impl Scheme {
    /// The scheme of a tokenizer, from its `decoder` and `pre_tokenizer` as `tokenizer.json`
    /// writes them (`Value::Null` for none): byte-level BPE when either is `ByteLevel`, alone or
    /// inside a `Sequence` (CLIP, GPT-2, RoBERTa); every other tokenizer (`Metaspace`, T5, XLM-R,
    /// SigLIP) is read as SentencePiece pieces.
    pub fn of_tokenizer(decoder: &Value, pre_tokenizer: &Value) -> Scheme {
        fn byte_level(v: &Value) -> bool {
            match v.get("type").and_then(Value::as_str) {
                Some("ByteLevel") => true,
                Some("Sequence") => ["decoders", "pretokenizers"]
                    .iter()
                    .filter_map(|k| v.get(*k).and_then(Value::as_array))
                    .flatten()
                    .any(byte_level),
                _ => false,
            }
        }
        if byte_level(decoder) || byte_level(pre_tokenizer) {
            Scheme::ByteLevel
        } else {
            Scheme::SentencePiece
        }
    }
}

/// One `tokenizers` encoding, as its getters return it.
#[derive(Debug, Clone, Copy)]
pub struct Encoded<'a> {
    /// `Encoding::get_ids`.
    pub ids: &'a [u32],
    /// `Encoding::get_tokens`: the piece each token covers (for the unknown token, the text).
    pub pieces: &'a [String],
    /// `Encoding::get_special_tokens_mask`: 1 for a special token.
    pub special_mask: &'a [u32],
}

/// The tokenizer lens of one encoding (module conventions): `vocab_piece` is the tokenizer's
/// `id_to_token`; a token whose vocabulary piece differs from the piece it covers is the unknown
/// token. `decoder` and `pre_tokenizer` (the tokenizer's `get_decoder()` and
/// `get_pre_tokenizer()`, serialised as in `tokenizer.json`; `None` for none) give the [`Scheme`]
/// ([`Scheme::of_tokenizer`]). The CLI (`culturelens tokens`) and the browser's Tokens view both
/// call this.
pub fn lens(
    encoded: Encoded<'_>,
    vocab_piece: impl Fn(u32) -> Option<String>,
    decoder: impl Serialize,
    pre_tokenizer: impl Serialize,
) -> Vec<TokenView> {
    let scheme = Scheme::of_tokenizer(
        &serde_json::to_value(decoder).unwrap_or(Value::Null),
        &serde_json::to_value(pre_tokenizer).unwrap_or(Value::Null),
    );
    let raw: Vec<RawToken> = encoded
        .ids
        .iter()
        .zip(encoded.pieces)
        .zip(encoded.special_mask)
        .map(|((&id, piece), &special)| RawToken {
            id,
            piece: piece.clone(),
            special: special == 1,
            unknown: vocab_piece(id).is_some_and(|vocab| vocab != *piece),
        })
        .collect();
    token_views(&raw, scheme)
}

/// One token as the tokenizer returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawToken {
    pub id: u32,
    pub piece: String,
    /// A special token (`<|startoftext|>`, `</s>`): shown as its piece.
    pub special: bool,
    /// The unknown token (`<unk>`) standing for `piece`, the text it covers.
    pub unknown: bool,
}

/// What a token holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenKind {
    /// Whole characters.
    Text,
    /// Part of a character: bytes (byte fallback or a byte-level fragment).
    Bytes,
    Special,
    /// The unknown token: the vocabulary has no piece for this text.
    Unknown,
}

/// A token made readable (serialised as `culturelens tokens --json` writes it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenView {
    pub id: u32,
    pub piece: String,
    /// The text it stands for (module conventions), word start shown as a leading space.
    pub text: String,
    pub kind: TokenKind,
    /// The piece ends a word (`</w>`).
    pub word_end: bool,
}

/// GPT-2's `bytes_to_unicode`, inverted: the byte a stand-in character encodes.
fn byte_of(c: char) -> Option<u8> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let cp = c as u32;
    if cp < 256 && printable(cp) {
        return Some(cp as u8);
    }
    // The other bytes, in order, map to 256, 257, ...
    let mut n = 256;
    for b in 0..=255u32 {
        if !printable(b) {
            if n == cp {
                return Some(b as u8);
            }
            n += 1;
        }
    }
    None
}

/// A piece's bytes and whether it ends a word.
fn piece_bytes(piece: &str, scheme: Scheme) -> (Vec<u8>, bool) {
    match scheme {
        Scheme::ByteLevel => {
            let (body, end) = match piece.strip_suffix("</w>") {
                Some(b) => (b, true),
                None => (piece, false),
            };
            let bytes =
                body.chars().map(|c| byte_of(c).map_or_else(|| c.to_string().into_bytes(), |b| vec![b]));
            (bytes.flatten().collect(), end)
        }
        Scheme::SentencePiece => {
            let hex = piece.strip_prefix("<0x").and_then(|h| h.strip_suffix('>'));
            match hex.filter(|h| h.len() == 2).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => (vec![b], false),
                None => (piece.replace('▁', " ").into_bytes(), false),
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(" ")
}

/// The tokens of one tokenizer, made readable (module conventions).
pub fn token_views(tokens: &[RawToken], scheme: Scheme) -> Vec<TokenView> {
    let mut views: Vec<TokenView> = Vec::with_capacity(tokens.len());
    // Bytes of the pending run of fragments, and the index of its first token.
    let mut run: Vec<u8> = Vec::new();
    let mut run_start = 0;
    let mut run_bytes: Vec<Vec<u8>> = Vec::new();
    let close_run = |views: &mut Vec<TokenView>, run: &[u8], start: usize, parts: &[Vec<u8>]| {
        let whole = String::from_utf8_lossy(run).into_owned();
        for (view, part) in views[start..].iter_mut().zip(parts) {
            view.text = format!("<{}> of {whole:?}", hex(part));
        }
    };
    for t in tokens {
        if t.special {
            views.push(TokenView {
                id: t.id,
                piece: t.piece.clone(),
                text: t.piece.clone(),
                kind: TokenKind::Special,
                word_end: false,
            });
            continue;
        }
        if t.unknown {
            let text = format!("<unk> of {:?}", t.piece);
            views.push(TokenView {
                id: t.id,
                piece: t.piece.clone(),
                text,
                kind: TokenKind::Unknown,
                word_end: false,
            });
            continue;
        }
        let (bytes, word_end) = piece_bytes(&t.piece, scheme);
        let view = |text: String, kind| TokenView { id: t.id, piece: t.piece.clone(), text, kind, word_end };
        match (run.is_empty(), String::from_utf8(bytes.clone())) {
            (true, Ok(text)) => views.push(view(text, TokenKind::Text)),
            _ => {
                if run.is_empty() {
                    run_start = views.len();
                }
                run.extend(&bytes);
                run_bytes.push(bytes);
                views.push(view(String::new(), TokenKind::Bytes));
                if std::str::from_utf8(&run).is_ok() {
                    close_run(&mut views, &run, run_start, &run_bytes);
                    run.clear();
                    run_bytes.clear();
                }
            }
        }
    }
    if !run.is_empty() {
        close_run(&mut views, &run, run_start, &run_bytes);
    }
    views
}

/// A plain-text table of several tokenizers' tokens, one column per tokenizer (`name`, then the
/// token count), one row per token position; each cell is `text [id]`.
pub fn side_by_side(columns: &[(String, Vec<TokenView>)]) -> String {
    let cell = |v: &TokenView| {
        let mark = if v.word_end { "·" } else { "" };
        format!("{:?}{mark} [{}]", v.text, v.id)
    };
    let mut grid: Vec<Vec<String>> = vec![
        std::iter::once("#".to_string())
            .chain(columns.iter().map(|(n, v)| format!("{n} ({} tokens)", v.len())))
            .collect(),
    ];
    let rows = columns.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    for i in 0..rows {
        let mut row = vec![i.to_string()];
        row.extend(columns.iter().map(|(_, v)| v.get(i).map(cell).unwrap_or_default()));
        grid.push(row);
    }
    let widths: Vec<usize> =
        (0..grid[0].len()).map(|c| grid.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    grid.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(s, w)| format!("{s}{}", " ".repeat(w - s.chars().count())))
                .collect();
            cells.join("  ").trim_end().to_string() + "\n"
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pieces: &[&str]) -> Vec<RawToken> {
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| RawToken { id: i as u32, piece: p.to_string(), special: false, unknown: false })
            .collect()
    }

    #[test]
    fn byte_fallback_pieces_show_their_bytes_and_the_character() {
        // "ሀ" is U+1200 = E1 88 80 in UTF-8.
        let v = token_views(&raw(&["▁a", "<0xE1>", "<0x88>", "<0x80>", "▁b"]), Scheme::SentencePiece);
        let texts: Vec<&str> = v.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, [" a", "<E1> of \"ሀ\"", "<88> of \"ሀ\"", "<80> of \"ሀ\"", " b"]);
        assert_eq!(v[1].kind, TokenKind::Bytes);
        assert_eq!(v[4].kind, TokenKind::Text);
    }

    #[test]
    fn byte_level_pieces_map_back_to_utf8() {
        // GPT-2 stand-ins: "Ã¤" = C3 A4 = "ä"; "Ġ" = U+0120 = byte 0x20 (the 33rd byte outside
        // the printable ranges: 256 + 32); "Ń" = U+0143 = byte 0xAD (the 68th: 256 + 67).
        assert_eq!(byte_of('Ġ'), Some(b' '));
        assert_eq!(byte_of('Ã'), Some(0xC3));
        assert_eq!(byte_of('Ń'), Some(0xAD));
        let v = token_views(&raw(&["jur", "ist</w>", "*</w>", "in</w>", "Ã¤</w>"]), Scheme::ByteLevel);
        let texts: Vec<&str> = v.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["jur", "ist", "*", "in", "ä"]);
        assert_eq!(v.iter().map(|t| t.word_end).collect::<Vec<_>>(), [false, true, true, true, true]);
        // 中 = E4 B8 AD split into "ä¸" + "Ń</w>".
        let v = token_views(&raw(&["ä¸", "Ń</w>"]), Scheme::ByteLevel);
        assert_eq!(v[0].text, "<E4 B8> of \"中\"");
        assert_eq!(v[1].text, "<AD> of \"中\"");
    }

    #[test]
    fn the_scheme_comes_from_the_decoder_or_the_pre_tokenizer() {
        use serde_json::json;
        let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false});
        let metaspace = json!({"type": "Metaspace", "replacement": "▁"});
        // CLIP: a ByteLevel decoder, a Sequence [Split, ByteLevel] pre-tokenizer.
        let clip_pre = json!({"type": "Sequence", "pretokenizers": [{"type": "Split"}, byte_level.clone()]});
        assert_eq!(Scheme::of_tokenizer(&byte_level, &clip_pre), Scheme::ByteLevel);
        assert_eq!(Scheme::of_tokenizer(&Value::Null, &clip_pre), Scheme::ByteLevel);
        let decoders = json!({"type": "Sequence", "decoders": [{"type": "Fuse"}, byte_level]});
        assert_eq!(Scheme::of_tokenizer(&decoders, &Value::Null), Scheme::ByteLevel);
        // XLM-R: Metaspace both ways; no decoder at all reads as SentencePiece too.
        let xlmr_pre =
            json!({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace.clone()]});
        assert_eq!(Scheme::of_tokenizer(&metaspace, &xlmr_pre), Scheme::SentencePiece);
        assert_eq!(Scheme::of_tokenizer(&Value::Null, &Value::Null), Scheme::SentencePiece);
    }

    #[test]
    fn an_encoding_reads_special_and_unknown_tokens() {
        // XLM-R style: <s>, "▁", the unknown token standing for "J", "ur", </s>; the vocabulary
        // has "<unk>" at id 3.
        let vocab = ["<s>", "<pad>", "</s>", "<unk>", "▁", "ur"];
        let pieces: Vec<String> = ["<s>", "▁", "J", "ur", "</s>"].map(String::from).to_vec();
        let encoded = Encoded { ids: &[0, 4, 3, 5, 2], pieces: &pieces, special_mask: &[1, 0, 0, 0, 1] };
        let metaspace = serde_json::json!({"type": "Metaspace"});
        let v = lens(encoded, |id| vocab.get(id as usize).map(|p| p.to_string()), &metaspace, None::<()>);
        let got: Vec<(&str, TokenKind)> = v.iter().map(|t| (t.text.as_str(), t.kind)).collect();
        assert_eq!(
            got,
            [
                ("<s>", TokenKind::Special),
                (" ", TokenKind::Text),
                ("<unk> of \"J\"", TokenKind::Unknown),
                ("ur", TokenKind::Text),
                ("</s>", TokenKind::Special)
            ]
        );
        assert_eq!(v.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 4, 3, 5, 2]);
        // The same pieces under a ByteLevel decoder: "Ġ" is a space, "</w>" ends a word.
        let pieces: Vec<String> = ["Ġj", "ur</w>"].map(String::from).to_vec();
        let encoded = Encoded { ids: &[7, 8], pieces: &pieces, special_mask: &[0, 0] };
        let bl = serde_json::json!({"type": "ByteLevel"});
        let v = lens(encoded, |id| Some(pieces[id as usize - 7].clone()), Some(&bl), None::<()>);
        assert_eq!((v[0].text.as_str(), v[1].text.as_str(), v[1].word_end), (" j", "ur", true));
        let json = serde_json::to_value(&v[1]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id": 8, "piece": "ur</w>", "text": "ur", "kind": "text", "word_end": true})
        );
    }

    #[test]
    fn the_side_by_side_table_aligns_columns() {
        let a = token_views(&raw(&["▁Jurist", "*", "in"]), Scheme::SentencePiece);
        let b = token_views(&raw(&["jurist</w>"]), Scheme::ByteLevel);
        let table = side_by_side(&[("t5".into(), a), ("clip".into(), b)]);
        let expected = "\
#  t5 (3 tokens)  clip (1 tokens)
0  \" Jurist\" [0]  \"jurist\"· [0]
1  \"*\" [1]
2  \"in\" [2]
";
        assert_eq!(table, expected);
    }
}
