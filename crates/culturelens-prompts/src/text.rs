//! Text normalisation shared by every set, and the ISO 639-1 language table.

/// Trims a cell and collapses every run of whitespace (spaces, tabs, newlines) to one space.
/// Applied to every prompt, name and label taken from upstream files.
pub fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An id fragment: lower-case ASCII letters and digits, every other run of characters becomes `-`
/// (`"Equatorial Guinean"` → `equatorial-guinean`, `"US-american"` → `us-american`).
pub fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// Every language of the four sets: ISO 639-1 code and English name (the name MAGBIG uses in its
/// file names, lower-cased).
pub const LANGUAGES: [(&str, &str); 16] = [
    ("am", "Amharic"),
    ("ar", "Arabic"),
    ("de", "German"),
    ("el", "Greek"),
    ("en", "English"),
    ("es", "Spanish"),
    ("fi", "Finnish"),
    ("fr", "French"),
    ("he", "Hebrew"),
    ("hi", "Hindi"),
    ("it", "Italian"),
    ("ja", "Japanese"),
    ("ko", "Korean"),
    ("ru", "Russian"),
    ("tr", "Turkish"),
    ("zh", "Chinese"),
];

/// The ISO 639-1 codes of `languages` (codes or English names, as [`language_code`] reads them);
/// an unknown one is refused, listing the known codes (`--languages` of `prompts export` and
/// `generate`, and the Python package's `prompts.load`).
pub fn language_codes(languages: &[String]) -> Result<Vec<String>, crate::PromptError> {
    languages
        .iter()
        .map(|l| {
            language_code(l).map(str::to_string).ok_or_else(|| {
                let known: Vec<&str> = LANGUAGES.iter().map(|(code, _)| *code).collect();
                crate::PromptError::Invalid(format!(
                    "unknown language {l:?} (known: {}, or their English names)",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// The ISO 639-1 code of a code or English language name (case-insensitive); the obsolete code
/// `iw` (used by the CulText2I paper) maps to `he`.
pub fn language_code(name_or_code: &str) -> Option<&'static str> {
    let key = name_or_code.trim().to_lowercase();
    if key == "iw" {
        return Some("he");
    }
    LANGUAGES.iter().find(|(code, name)| *code == key || name.to_lowercase() == key).map(|(code, _)| *code)
}

/// The English name of an ISO 639-1 code of [`LANGUAGES`].
pub fn language_name(code: &str) -> Option<&'static str> {
    LANGUAGES.iter().find(|(c, _)| *c == code).map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_is_trimmed_and_collapsed() {
        assert_eq!(normalize_ws("  Pelourinho  in Brazil\t"), "Pelourinho in Brazil");
        assert_eq!(normalize_ws(" \n "), "");
    }

    #[test]
    fn slugs_are_ascii_and_dash_separated() {
        assert_eq!(slug("Equatorial Guinean"), "equatorial-guinean");
        assert_eq!(slug("US-american"), "us-american");
        assert_eq!(slug("  Rani ki Vav, Gujarat "), "rani-ki-vav-gujarat");
        assert_eq!(slug("AIDS"), "aids");
    }

    #[test]
    fn language_names_and_codes_resolve() {
        assert_eq!(language_code("german"), Some("de"));
        assert_eq!(language_code("ZH"), Some("zh"));
        assert_eq!(language_code("IW"), Some("he"));
        assert_eq!(language_code("klingon"), None);
        assert_eq!(language_name("am"), Some("Amharic"));
        for (i, (code, _)) in LANGUAGES.iter().enumerate() {
            assert_eq!(code.len(), 2);
            assert!(LANGUAGES[..i].iter().all(|(c, _)| c < code), "sorted and unique");
        }
    }
}
