//! Loading one of the papers' prompt sets by name, as `prompts export` and `generate
//! --prompt-set` share it: fetch (or read the mirror), print the licence on first use, parse,
//! keep the requested languages; and the row filters (`--languages`, `--cultures`, `--persons`,
//! `--templates`, `--limit`) both apply, to a prompt set or to a prompt table read from a file.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use culturelens_prompts::text::language_code;
use culturelens_prompts::{Fetcher, LoadOptions, PromptSet, PromptTable, load};
use culturelens_table::Metadata;

/// Parses a set name (the clap value parser of `prompts export SET` and `--prompt-set`).
pub fn parse_set(name: &str) -> Result<PromptSet, String> {
    PromptSet::from_name(name)
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
    Ok(culturelens_prompts::text::language_codes(languages)?)
}

/// The prompt-row filters `prompts export` and `generate` share. Every filter keeps the rows whose
/// column matches one of its values (`--languages` compared as ISO 639-1 codes, the others
/// case-insensitively, trimmed); `--limit N` then keeps the first N rows of each language in table
/// order (deterministic: the same prompts on every run, and, where a set lists its languages in
/// parallel, the same cultures and templates in every language).
#[derive(clap::Args, Debug, Clone, Default, serde::Serialize)]
pub struct PromptFilter {
    /// Keep only these languages (ISO 639-1 codes or English names, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CODES")]
    pub languages: Vec<String>,
    /// Keep only these cultures (the `culture` column, case-insensitive, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub cultures: Vec<String>,
    /// Keep only these person terms (the `person` column, e.g. person,woman,man).
    #[arg(long, value_delimiter = ',', value_name = "TERMS")]
    pub persons: Vec<String>,
    /// Keep only these templates (the `template` column, e.g. a,b for SoS).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub templates: Vec<String>,
    /// Keep at most N prompts per language: the first N in table order (after the other filters).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
}

impl PromptFilter {
    /// Whether any filter is given.
    pub fn is_active(&self) -> bool {
        let lists = [&self.languages, &self.cultures, &self.persons, &self.templates];
        lists.iter().any(|l| !l.is_empty()) || self.limit.is_some()
    }

    /// The rows of `meta` every filter keeps, in order. A filter on a column the table lacks, an
    /// unknown language, or filters that keep nothing are errors naming `source`.
    pub fn keep(&self, source: &str, meta: &Metadata) -> Result<Vec<usize>> {
        let languages = language_codes(&self.languages)?;
        let mut keep: Vec<usize> = (0..meta.n_rows()).collect();
        let filters = [
            ("--languages", "language", &languages),
            ("--cultures", "culture", &self.cultures),
            ("--persons", "person", &self.persons),
            ("--templates", "template", &self.templates),
        ];
        for (flag, column, wanted) in filters {
            if wanted.is_empty() {
                continue;
            }
            let cells = meta.column(column).with_context(|| {
                format!("{source}: {flag} filters on a `{column}` column, which it does not have")
            })?;
            let matches = |cell: &str| match column {
                "language" => language_code(cell).is_some_and(|c| wanted.iter().any(|w| w == c)),
                _ => wanted.iter().any(|w| w.trim().eq_ignore_ascii_case(cell.trim())),
            };
            keep.retain(|&i| matches(&cells[i]));
            if keep.is_empty() {
                bail!("{source}: no prompt left after {flag} {}", wanted.join(","));
            }
        }
        if let Some(limit) = self.limit {
            let language = meta.column("language");
            let mut seen: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
            keep.retain(|&i| {
                let key = language.map_or("", |l| l[i].trim());
                let n = seen.entry(key).or_default();
                *n += 1;
                *n <= limit
            });
        }
        Ok(keep)
    }
}
