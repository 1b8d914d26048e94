//! open_clip's text cleaning, for OpenCLIP folders.
//!
//! open_clip's `SimpleTokenizer` cleans every text before its BPE: `ftfy.fix_text`, then
//! `html.unescape` twice, whitespace collapsed and stripped, lower-case. An OpenCLIP hub folder
//! ships transformers' CLIP `tokenizer.json`, whose normaliser does NFC, the whitespace and the
//! lower-case but none of ftfy's character fixes. [`clean`] applies those fixes first, so the
//! ids equal `open_clip.tokenize`:
//! - control characters removed (U+00–08, U+0B, U+0E–1F, U+7F, U+206A–206F, U+FEFF,
//!   U+FFF9–FFFC; `remove_control_chars`);
//! - Latin ligatures taken apart (`ﬁ` → `fi`, `ĳ` → `ij`, …; `fix_latin_ligatures`);
//! - halfwidth and fullwidth forms to their standard width (U+FF01–FFEF by NFKC, U+3000 to a
//!   space; `fix_character_width`);
//! - curly quotes straightened (U+02BC, U+2018–201B → `'`; U+201C–201F → `"`; `uncurl_quotes`).
//!
//! Not reproduced: ftfy's repair of mojibake (text decoded with the wrong codec) and of C1
//! controls, and HTML entity unescaping. On the 24,981 distinct MAGBIG and SoS prompts the ids
//! with these fixes equal open_clip's; without them one prompt differs (a curly apostrophe).

use unicode_normalization::UnicodeNormalization;

/// `text` with ftfy's character-level fixes applied (see the module docs).
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{00}'..='\u{08}'
            | '\u{0B}'
            | '\u{0E}'..='\u{1F}'
            | '\u{7F}'
            | '\u{206A}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFC}' => {}
            '\u{02BC}' | '\u{2018}'..='\u{201B}' => out.push('\''),
            '\u{201C}'..='\u{201F}' => out.push('"'),
            '\u{3000}' => out.push(' '),
            '\u{FF01}'..='\u{FFEF}' => out.extend(std::iter::once(c).nfkc()),
            _ => match ligature(c) {
                Some(parts) => out.push_str(parts),
                None => out.push(c),
            },
        }
    }
    out
}

/// ftfy's `LIGATURES`: Dutch, Serbo-Croatian digraphs, ŉ and the Latin typographic ligatures.
fn ligature(c: char) -> Option<&'static str> {
    Some(match c {
        'Ĳ' => "IJ",
        'ĳ' => "ij",
        'ŉ' => "ʼn",
        'Ǳ' => "DZ",
        'ǲ' => "Dz",
        'ǳ' => "dz",
        'Ǆ' => "DŽ",
        'ǅ' => "Dž",
        'ǆ' => "dž",
        'Ǉ' => "LJ",
        'ǈ' => "Lj",
        'ǉ' => "lj",
        'Ǌ' => "NJ",
        'ǋ' => "Nj",
        'ǌ' => "nj",
        'ﬀ' => "ff",
        'ﬁ' => "fi",
        'ﬂ' => "fl",
        'ﬃ' => "ffi",
        'ﬄ' => "ffl",
        'ﬅ' => "ſt",
        'ﬆ' => "st",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn hand_values() {
        assert_eq!(clean("un\u{2019}ancella"), "un'ancella");
        assert_eq!(clean("\u{201C}ﬂuﬃeﬆ\u{201D}"), "\"fluffiest\"");
        assert_eq!(clean("ＬＯＵＤ\u{3000}ＮＯＩＳＥＳ"), "LOUD NOISES");
        assert_eq!(clean("a\u{FEFF}b\u{7}c\td"), "abc\td");
        assert_eq!(clean("Ｕﾀｰﾝ"), "Uターン");
        assert_eq!(clean("Фото 人 ’"), "Фото 人 '");
    }
}
