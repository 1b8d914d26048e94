//! Tokenisation of image descriptions into terms, for every language of the prompt sets.
//!
//! Conventions:
//! - Lower-casing: Unicode's default full lower-case mapping (`str::to_lowercase`, as Python's
//!   `str.lower`), except Turkish and Azerbaijani (`tr`, `az`), where `I` + U+0307 (combining dot
//!   above) → `i`, then `I` → `ı` and `İ` → `i` first (their locale rule; ICU's `toLower` in the
//!   `tr`/`az` locale gives the same, which `tests/words_reference_cli.rs` checks; ICU also drops
//!   a dot above separated from its `I` by other combining marks, which this does not).
//! - Words: ICU4X `WordSegmenter::new_auto` (Unicode UAX #29 word boundaries, with dictionaries
//!   for Chinese and Japanese, which write no spaces, and LSTM models for Thai, Lao, Khmer and
//!   Burmese). A term is a segment ICU calls word-like (letters, ideographs or numbers);
//!   punctuation and spaces are dropped. Korean, Amharic, Arabic, Hebrew, Hindi and Greek are
//!   split at spaces and punctuation by UAX #29 (Korean particles stay on their word; the
//!   Ethiopic word space `፡` separates words); hyphenated words split at the hyphen.
//!   A word ending in a combining mark (a Hindi vowel sign, an NFD accent) is word-like although
//!   icu_segmenter 2.x types it `None` when text follows (unicode-org/icu4x#8321): such a segment
//!   is typed again on its own, where ICU4X types it right.
//! - Stop words: the language's spaCy 3.8.7 list ([`stop_words`], `stopwords/PROVENANCE.md`),
//!   compared after lower-casing. A language without a list is an error.
//! - [`unique_terms`] keeps each term once per text (the SoS paper's "unique terms per image").
//!
//! Checked on every prompt of the four prompt sets (`tests/words_reference_cli.rs`, reference by
//! `scripts/fixtures/make_words_reference.py`, hashes only): [`lowercase`] equals ICU's `toLower`
//! in the language's locale everywhere; outside Chinese, Japanese and Korean [`words`] equals
//! ICU4C 72.1's word BreakIterator (root locale, rule status ≥ 100) and [`terms`] ICU's words of
//! ICU's lower-cased text less spaCy 3.8.18's stop words (the same lists as 3.8.7), prompt by
//! prompt. In zh, ja and ko the words cover the same characters as ICU4C's but are cut as ICU4X
//! cuts them, which is what this matches: ICU4X's dictionaries differ from ICU4C 72's (zh: 98 % of
//! the prompts cut alike, e.g. 百/慕/大男/人的 against ICU4C's 百/慕/大/男人/的 for "Bermudan man"),
//! ICU4C splits long katakana runs (ja: 60 % of SoS, 84 % of MAGBIG alike; ICU4C's
//! フォト/リアリスティック is one word here) and breaks between Latin letters and Hangul where
//! UAX #29 does not (ko: `CEO의` is one word here, two in ICU4C). spaCy's tokenizer is not what
//! this matches: it keeps hyphenated words (de, fi, fr) and the gender star (`eine*r`) whole,
//! splits elisions (`d'`, `dell'`) and English `'s`, gives Chinese one character per token and
//! Japanese SudachiPy's short units; its `lower_` is Python's `str.lower`, without the Turkish
//! rule.

use std::collections::{BTreeSet, HashSet};
use std::sync::OnceLock;

use icu_segmenter::WordSegmenter;
use icu_segmenter::options::WordBreakInvariantOptions;

/// The spaCy stop-word lists, by ISO 639-1 code (one word per line, lower-cased).
const STOP_WORD_LISTS: [(&str, &str); 16] = [
    ("am", include_str!("stopwords/am.txt")),
    ("ar", include_str!("stopwords/ar.txt")),
    ("de", include_str!("stopwords/de.txt")),
    ("el", include_str!("stopwords/el.txt")),
    ("en", include_str!("stopwords/en.txt")),
    ("es", include_str!("stopwords/es.txt")),
    ("fi", include_str!("stopwords/fi.txt")),
    ("fr", include_str!("stopwords/fr.txt")),
    ("he", include_str!("stopwords/he.txt")),
    ("hi", include_str!("stopwords/hi.txt")),
    ("it", include_str!("stopwords/it.txt")),
    ("ja", include_str!("stopwords/ja.txt")),
    ("ko", include_str!("stopwords/ko.txt")),
    ("ru", include_str!("stopwords/ru.txt")),
    ("tr", include_str!("stopwords/tr.txt")),
    ("zh", include_str!("stopwords/zh.txt")),
];

/// A language this module has no stop-word list for.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("no stop-word list for language {language:?} (known: {known})")]
pub struct UnknownLanguage {
    pub language: String,
    pub known: String,
}

/// The stop words of `language` (an ISO 639-1 code).
pub fn stop_words(language: &str) -> Result<&'static HashSet<&'static str>, UnknownLanguage> {
    static SETS: OnceLock<Vec<HashSet<&'static str>>> = OnceLock::new();
    let sets = SETS.get_or_init(|| STOP_WORD_LISTS.iter().map(|(_, list)| list.lines().collect()).collect());
    match STOP_WORD_LISTS.iter().position(|(code, _)| *code == language) {
        Some(i) => Ok(&sets[i]),
        None => Err(UnknownLanguage {
            language: language.to_string(),
            known: STOP_WORD_LISTS.map(|(code, _)| code).join(", "),
        }),
    }
}

/// Lower-cases `text` by the rule of `language` (module conventions).
pub fn lowercase(text: &str, language: &str) -> String {
    if matches!(language, "tr" | "az") {
        text.replace("I\u{307}", "i").replace('I', "ı").replace('İ', "i").to_lowercase()
    } else {
        text.to_lowercase()
    }
}

/// The word-like segments of `text`, in order (no lower-casing, no stop-word removal).
pub fn words(text: &str) -> Vec<&str> {
    let segmenter = WordSegmenter::new_auto(WordBreakInvariantOptions::default());
    let mut breaks = segmenter.segment_str(text);
    let mut out = Vec::new();
    let mut start = match breaks.next() {
        Some(b) => b,
        None => return out,
    };
    while let Some(end) = breaks.next() {
        let segment = &text[start..end];
        // icu_segmenter 2.x types a word that ends in a combining mark as `None` when text follows
        // (unicode-org/icu4x#8321: every Hindi word ending in a vowel sign, e.g. "महिला की");
        // alone, at the end of its input, the same segment gets its true type.
        let like = breaks.is_word_like()
            || (end < text.len()
                && segment.chars().any(char::is_alphanumeric)
                && word_like_alone(&segmenter, segment));
        if like {
            out.push(segment);
        }
        start = end;
    }
    out
}

/// Whether ICU4X types `segment`, segmented on its own, as word-like at its end.
fn word_like_alone(segmenter: &icu_segmenter::WordSegmenterBorrowed<'static>, segment: &str) -> bool {
    let mut breaks = segmenter.segment_str(segment);
    let mut like = false;
    while breaks.next().is_some() {
        like = breaks.is_word_like();
    }
    like
}

/// The terms of `text` in order: words, lower-cased, stop words of `language` removed.
pub fn terms(text: &str, language: &str) -> Result<Vec<String>, UnknownLanguage> {
    let stop = stop_words(language)?;
    let lower = lowercase(text, language);
    Ok(words(&lower).into_iter().filter(|w| !stop.contains(w)).map(str::to_owned).collect())
}

/// The distinct terms of `text`, sorted.
pub fn unique_terms(text: &str, language: &str) -> Result<BTreeSet<String>, UnknownLanguage> {
    Ok(terms(text, language)?.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_terms_drop_punctuation_and_stop_words() {
        let t = terms("A woman wears a red Saree, standing in the 19th-century street.", "en").unwrap();
        assert_eq!(t, ["woman", "wears", "red", "saree", "standing", "19th", "century", "street"]);
        let u = unique_terms("Trees, trees and snowy trees.", "en").unwrap();
        assert_eq!(u.into_iter().collect::<Vec<_>>(), ["snowy", "trees"]);
    }

    #[test]
    fn chinese_and_japanese_are_split_into_words_by_dictionary() {
        // No spaces: UAX #29 alone would give one segment per ideograph run.
        assert_eq!(words("我喜欢北京"), ["我", "喜欢", "北京"]);
        assert_eq!(words("こんにちは世界"), ["こんにちは", "世界"]);
        // Thai-like scripts by LSTM (ICU4X's own example).
        assert_eq!(words("ทุกสองสัปดาห์").len(), 3);
    }

    #[test]
    fn other_scripts_split_at_spaces_and_punctuation() {
        assert_eq!(words("한국 음식을 먹었다."), ["한국", "음식을", "먹었다"]);
        // Hangul is ALetter in UAX #29: no break after Latin letters (ICU4C 72 breaks there).
        assert_eq!(words("CEO의 얼굴"), ["CEO의", "얼굴"]);
        assert_eq!(words("ቡና፡ጠጣ"), ["ቡና", "ጠጣ"]);
        assert_eq!(words("एक लाल साड़ी"), ["एक", "लाल", "साड़ी"]);
        // Words ending in a vowel sign before more text (unicode-org/icu4x#8321), and in NFD.
        assert_eq!(words("एक अंडोरानी महिला की तस्वीर"), ["एक", "अंडोरानी", "महिला", "की", "तस्वीर"]);
        assert_eq!(words("cafe\u{301} menu"), ["cafe\u{301}", "menu"]);
        assert_eq!(terms("رجل يرتدي عمامة", "ar").unwrap(), ["رجل", "يرتدي", "عمامة"]);
    }

    #[test]
    fn turkish_lowercases_dotted_and_dotless_i() {
        assert_eq!(lowercase("IŞIK İstanbul", "tr"), "ışık istanbul");
        assert_eq!(lowercase("IŞIK", "en"), "işik");
        assert_eq!(lowercase("I\u{307}stanbul", "tr"), "istanbul");
        assert_eq!(lowercase("I\u{307}stanbul", "en"), "i\u{307}stanbul");
        let err = terms("x", "xx").unwrap_err();
        assert_eq!(err.language, "xx");
        assert!(err.to_string().contains("known: am, ar, de"), "{err}");
    }
}
