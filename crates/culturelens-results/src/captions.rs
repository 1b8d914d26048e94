//! The folder `culturelens captions --out` writes (SoS §6.1, App. G): Fighting Words per (model,
//! language) document and the stereotype coverage.
//!
//! | file | schema | one row per |
//! |------|--------|-------------|
//! | [`TERMS`] | [`Terms`] | term of a document |
//! | [`TOP_TERMS`] | [`TopTerms`] | significant term among a document's `--top` of highest z (Fig. 7) |
//! | [`COVERAGE`] | [`Coverage`] | document and culture, with `--stereotypes` (Fig. 6) |
//!
//! The statistics are `culturelens_metrics::words::fighting_words`.

use crate::csv_file::{Cells, CsvSchema, expect_header, strings};
use crate::error::SchemaError;

/// Every term of every document.
pub const TERMS: &str = "terms.csv";
/// The top significant terms per document.
pub const TOP_TERMS: &str = "top_terms.csv";
/// The stereotype coverage per document and culture.
pub const COVERAGE: &str = "coverage.csv";

/// The columns of [`TERMS`].
pub const TERMS_HEADER: [&str; 12] = [
    "model",
    "language",
    "n_images",
    "term",
    "images",
    "share",
    "idf",
    "weighted",
    "weighted_other",
    "delta",
    "z",
    "significant",
];
/// The columns of [`TOP_TERMS`].
pub const TOP_TERMS_HEADER: [&str; 7] = ["model", "language", "rank", "term", "images", "share", "z"];
/// The columns of [`COVERAGE`].
pub const COVERAGE_HEADER: [&str; 7] =
    ["model", "language", "culture", "stereotypes", "found", "coverage", "found_terms"];
/// The separator of the found terms in one cell.
pub const TERM_SEPARATOR: char = ';';

/// One term of one (model, language) document.
#[derive(Debug, Clone, PartialEq)]
pub struct TermRow {
    pub model: String,
    pub language: String,
    /// Captioned images of the document.
    pub n_images: usize,
    pub term: String,
    /// Images whose caption has the term.
    pub images: usize,
    pub share: f64,
    pub idf: f64,
    pub weighted: f64,
    pub weighted_other: f64,
    pub delta: f64,
    pub z: f64,
    pub significant: bool,
}

/// [`TERMS`].
pub struct Terms;

impl CsvSchema for Terms {
    type Columns = ();
    type Row = TermRow;
    const SOURCE: &'static str = "culturelens captions --out: terms.csv";

    fn header(_: &()) -> Vec<String> {
        strings(&TERMS_HEADER)
    }

    fn columns(file: &str, header: &[String]) -> Result<(), SchemaError> {
        expect_header(file, header, &Self::header(&()), Self::SOURCE)
    }

    fn record(_: &(), t: &TermRow) -> Vec<String> {
        let mut row = vec![t.model.clone(), t.language.clone(), t.n_images.to_string(), t.term.clone()];
        row.push(t.images.to_string());
        row.extend([t.share, t.idf, t.weighted, t.weighted_other, t.delta, t.z].map(|x| x.to_string()));
        row.push(t.significant.to_string());
        row
    }

    fn parse(_: &(), c: &Cells<'_>) -> Result<TermRow, SchemaError> {
        Ok(TermRow {
            model: c.key(0)?,
            language: c.key(1)?,
            n_images: c.count(2)?,
            term: c.key(3)?,
            images: c.count(4)?,
            share: c.finite(5)?,
            idf: c.finite(6)?,
            weighted: c.finite(7)?,
            weighted_other: c.finite(8)?,
            delta: c.finite(9)?,
            z: c.finite(10)?,
            significant: c.boolean(11)?,
        })
    }
}

/// One of a document's top significant terms.
#[derive(Debug, Clone, PartialEq)]
pub struct TopTermRow {
    pub model: String,
    pub language: String,
    /// 1 = highest z.
    pub rank: usize,
    pub term: String,
    pub images: usize,
    pub share: f64,
    pub z: f64,
}

/// [`TOP_TERMS`].
pub struct TopTerms;

impl CsvSchema for TopTerms {
    type Columns = ();
    type Row = TopTermRow;
    const SOURCE: &'static str = "culturelens captions --out: top_terms.csv";

    fn header(_: &()) -> Vec<String> {
        strings(&TOP_TERMS_HEADER)
    }

    fn columns(file: &str, header: &[String]) -> Result<(), SchemaError> {
        expect_header(file, header, &Self::header(&()), Self::SOURCE)
    }

    fn record(_: &(), t: &TopTermRow) -> Vec<String> {
        vec![
            t.model.clone(),
            t.language.clone(),
            t.rank.to_string(),
            t.term.clone(),
            t.images.to_string(),
            t.share.to_string(),
            t.z.to_string(),
        ]
    }

    fn parse(_: &(), c: &Cells<'_>) -> Result<TopTermRow, SchemaError> {
        Ok(TopTermRow {
            model: c.key(0)?,
            language: c.key(1)?,
            rank: c.count(2)?,
            term: c.key(3)?,
            images: c.count(4)?,
            share: c.finite(5)?,
            z: c.finite(6)?,
        })
    }
}

/// The stereotype coverage of one document for one culture.
#[derive(Debug, Clone, PartialEq)]
pub struct CoverageRow {
    pub model: String,
    pub language: String,
    pub culture: String,
    /// The culture's distinct stereotype terms.
    pub stereotypes: usize,
    /// Those among the document's significant terms (written as their count and, joined by
    /// [`TERM_SEPARATOR`], `found_terms`).
    pub found: Vec<String>,
    pub coverage: f64,
}

/// [`COVERAGE`].
pub struct Coverage;

impl CsvSchema for Coverage {
    type Columns = ();
    type Row = CoverageRow;
    const SOURCE: &'static str = "culturelens captions --out: coverage.csv";

    fn header(_: &()) -> Vec<String> {
        strings(&COVERAGE_HEADER)
    }

    fn columns(file: &str, header: &[String]) -> Result<(), SchemaError> {
        expect_header(file, header, &Self::header(&()), Self::SOURCE)
    }

    fn record(_: &(), r: &CoverageRow) -> Vec<String> {
        vec![
            r.model.clone(),
            r.language.clone(),
            r.culture.clone(),
            r.stereotypes.to_string(),
            r.found.len().to_string(),
            r.coverage.to_string(),
            r.found.join(&TERM_SEPARATOR.to_string()),
        ]
    }

    fn parse(_: &(), c: &Cells<'_>) -> Result<CoverageRow, SchemaError> {
        let count = c.count(4)?;
        let found: Vec<String> = match c.text(6) {
            "" => Vec::new(),
            terms => terms.split(TERM_SEPARATOR).map(str::to_string).collect(),
        };
        if found.len() != count {
            return Err(c.error(6, format!("{} terms, but `found` says {count}", found.len())));
        }
        Ok(CoverageRow {
            model: c.key(0)?,
            language: c.key(1)?,
            culture: c.key(2)?,
            stereotypes: c.count(3)?,
            found,
            coverage: c.finite(5)?,
        })
    }
}
