//! The prompt sets of the four papers culturelens implements, by name:
//!
//! | set | paper | source |
//! |---|---|---|
//! | `sos` | SoS (Sec. 3, Table 1) | `TAI-HAMBURG/Surface-Over-Semantics` `data/full_dataset.csv` |
//! | `magbig` | MAGBIG (Sec. 3, App. K) | `felifri/MAGBIG` `prompts/` (31 CSVs) |
//! | `cube` | CUBE (Sec. 3.2, Table 13; App. J, Fig. 8) | `google-deepmind/cube` `dataset/cube_1k.json` |
//! | `cultext2i` | CulText2I (Tables 1, 8, 9) | typed in from the paper; user translations |
//!
//! **Registry and download** ([`registry`], [`fetch`]). Every upstream file is pinned to a
//! commit and a sha256. On first use it is downloaded into the cache
//! (`$CULTURELENS_CACHE`, default `<user cache dir>/culturelens`) through a temporary file that is
//! renamed into place only once complete and verified; a wrong checksum is an error naming the
//! file and both hashes, and leaves nothing in the cache. `CULTURELENS_DATA_MIRROR=DIR` (or
//! `--mirror DIR`) reads the same relative paths from a local folder instead (verified too), and
//! `CULTURELENS_DATA_BASE_URL` replaces `https://raw.githubusercontent.com`. Each set's licence
//! is shown on its first use ([`Fetcher::first_use`]).
//!
//! **Normalised tables** ([`table`]). Each set becomes one [`PromptTable`] with the
//! [`COMMON_COLUMNS`] (`id, set, language, prompt, english, culture, concept, occupation,
//! adjective, template, template_text, person, gender_form, source`; ISO 639-1 language codes)
//! followed by the set's own columns, exported to CSV or Parquet. What each set's columns hold,
//! and every normalisation applied, is documented in the set modules' `NOTES` ([`sos::NOTES`],
//! [`magbig::NOTES`], [`cube::NOTES`], [`cultext2i::NOTES`]), which `culturelens prompts show`
//! prints. Common to all: every text cell is trimmed and whitespace runs are collapsed.
//!
//! This crate does network and file I/O and must stay out of the shared Burn crates.

mod csv_file;
pub mod cube;
pub mod cultext2i;
mod error;
#[cfg(feature = "io")]
pub mod fetch;
pub mod magbig;
pub mod registry;
pub mod sos;
pub mod table;
pub mod text;

#[cfg(feature = "io")]
use std::path::PathBuf;

pub use error::PromptError;
#[cfg(feature = "io")]
pub use fetch::{Fetcher, Origin};
pub use registry::{PromptSet, SetInfo, UpstreamFile};
pub use table::{COMMON_COLUMNS, Column, OutputFormat, Prompt, PromptTable};

/// Set-specific inputs of [`load`].
#[cfg(feature = "io")]
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// MAGBIG: the optional feminine-occupation file ([`magbig::NOTES`]).
    pub magbig_feminine: Option<PathBuf>,
    /// CulText2I: the user translation CSV ([`cultext2i::read_translations`]).
    pub cultext2i_translations: Option<PathBuf>,
    /// CulText2I: gibberish length and seed.
    pub cultext2i: cultext2i::Options,
}

/// Fetches (verified) and parses one prompt set.
#[cfg(feature = "io")]
pub fn load(set: PromptSet, fetcher: &Fetcher, options: &LoadOptions) -> Result<PromptTable, PromptError> {
    let only_for = |given: bool, flag: &str, owner: PromptSet| {
        if given && set != owner {
            Err(PromptError::Invalid(format!("{flag} applies to the {owner} set, not {set}")))
        } else {
            Ok(())
        }
    };
    only_for(options.magbig_feminine.is_some(), "a feminine-occupation file", PromptSet::Magbig)?;
    only_for(options.cultext2i_translations.is_some(), "a translation file", PromptSet::Cultext2i)?;
    let read = |path: &PathBuf| std::fs::read(path).map_err(|e| PromptError::io(path, e));
    match set {
        PromptSet::Sos => sos::parse(&fetcher.fetch(&registry::SOS_FILES[0])?),
        PromptSet::Cube => cube::parse(&fetcher.fetch(&registry::CUBE_FILES[0])?),
        PromptSet::Magbig => {
            let feminine = options.magbig_feminine.as_ref().map(|p| read(p).map(|b| (p, b))).transpose()?;
            magbig::parse(|f| fetcher.fetch(f), feminine.as_ref().map(|(p, b)| (p.as_path(), b.as_slice())))
        }
        PromptSet::Cultext2i => {
            let translations = match &options.cultext2i_translations {
                Some(path) => Some(cultext2i::read_translations(path, &read(path)?)?),
                None => None,
            };
            cultext2i::build(translations.as_ref(), &options.cultext2i)
        }
    }
}

/// The documentation of a set's columns and normalisations (its module's `NOTES`).
pub fn notes(set: PromptSet) -> &'static str {
    match set {
        PromptSet::Sos => sos::NOTES,
        PromptSet::Magbig => magbig::NOTES,
        PromptSet::Cube => cube::NOTES,
        PromptSet::Cultext2i => cultext2i::NOTES,
    }
}

/// The columns a set adds to [`COMMON_COLUMNS`].
pub fn extra_columns(set: PromptSet) -> &'static [Column] {
    match set {
        PromptSet::Sos => &sos::EXTRA_COLUMNS,
        PromptSet::Magbig => &magbig::EXTRA_COLUMNS,
        PromptSet::Cube => &cube::EXTRA_COLUMNS,
        PromptSet::Cultext2i => &cultext2i::EXTRA_COLUMNS,
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    //! The tests' reading of the shared upstream mirror (`culturelens_testkit::upstream_mirror`:
    //! `../shared/data/upstream` beside the checkout; CI provides it, and a test fails rather
    //! than skips without it).

    use culturelens_testkit::upstream_mirror;

    use crate::UpstreamFile;

    /// The verified bytes of `file` from the mirror.
    pub fn mirror_bytes(file: &UpstreamFile) -> Vec<u8> {
        let fetcher = crate::Fetcher::new(std::env::temp_dir(), crate::Origin::Mirror(upstream_mirror()));
        fetcher.fetch(file).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_checks_set_specific_options() {
        let dir = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(dir.path().into(), Origin::Mirror(culturelens_testkit::upstream_mirror()));
        let options = LoadOptions { cultext2i_translations: Some("tr.csv".into()), ..LoadOptions::default() };
        let err = load(PromptSet::Sos, &fetcher, &options).unwrap_err().to_string();
        assert_eq!(err, "a translation file applies to the cultext2i set, not sos");
        let options =
            LoadOptions { magbig_feminine: Some(dir.path().join("absent.csv")), ..LoadOptions::default() };
        let err = load(PromptSet::Magbig, &fetcher, &options).unwrap_err().to_string();
        assert!(err.contains("absent.csv"), "{err}");
    }

    #[test]
    fn every_set_loads_from_the_mirror_with_documented_columns() {
        let dir = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(dir.path().into(), Origin::Mirror(culturelens_testkit::upstream_mirror()));
        for set in PromptSet::ALL {
            let t = load(set, &fetcher, &LoadOptions::default()).unwrap();
            assert_eq!(t.column_names()[..4], ["id", "set", "language", "prompt"]);
            for c in COMMON_COLUMNS.iter().chain(extra_columns(set)) {
                assert!(!c.doc.is_empty());
            }
            assert!(t.rows.iter().all(|r| text::language_name(&r.language).is_some()), "{set}");
            assert!(t.rows.iter().all(|r| r.prompt == text::normalize_ws(&r.prompt)), "{set}");
            assert!(!notes(set).is_empty());
        }
        assert!(!dir.path().join("upstream").exists(), "a mirror is read in place, not copied");
    }
}
