//! Loading one of the papers' prompt sets by name, as `prompts export` and `generate
//! --prompt-set` share it: fetch (or read the mirror), print the licence on first use, parse,
//! keep the requested languages.

use std::path::PathBuf;

use anyhow::{Context, Result};
use culturelens_prompts::text::{LANGUAGES, language_code};
use culturelens_prompts::{Fetcher, LoadOptions, PromptSet, PromptTable, load};

/// Parses a set name (the clap value parser of `prompts export SET` and `--prompt-set`).
pub fn parse_set(name: &str) -> Result<PromptSet, String> {
    PromptSet::parse(name).ok_or_else(|| {
        let names: Vec<&str> = PromptSet::ALL.iter().map(|s| s.name()).collect();
        format!("unknown prompt set {name:?} (expected one of {})", names.join(", "))
    })
}

/// The normalised table of `set` with only `languages` (ISO 639-1 codes or names; all when
/// empty), its upstream files read from `mirror` or the cache.
pub fn load_set(
    set: PromptSet,
    languages: &[String],
    mirror: Option<PathBuf>,
    options: &LoadOptions,
) -> Result<PromptTable> {
    let fetcher = Fetcher::from_env(mirror)?;
    if fetcher.first_use(set) {
        eprintln!("Licence of the {set} prompt set (shown once): {}", set.info().licence);
    }
    let mut table = load(set, &fetcher, options).with_context(|| format!("loading the {set} prompt set"))?;
    if !languages.is_empty() {
        table.retain_languages(&language_codes(languages)?)?;
    }
    Ok(table)
}

/// The ISO 639-1 codes of `languages` (codes or names); an unknown one is an error.
pub fn language_codes(languages: &[String]) -> Result<Vec<String>> {
    languages
        .iter()
        .map(|l| {
            language_code(l).map(str::to_string).with_context(|| {
                let known: Vec<&str> = LANGUAGES.iter().map(|(code, _)| *code).collect();
                format!("unknown language {l:?} (known: {}, or their English names)", known.join(", "))
            })
        })
        .collect()
}
