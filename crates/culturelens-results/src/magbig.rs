//! The MAGBIG tables (MAGBIG §4, App. B): `culturelens magbig --out` ([`Magbig`]: one row per
//! (model, language, set), [`HEADER`], a contract that tests outside the project read) and the
//! per-image attribute table it reads ([`ATTRIBUTE_COLUMNS`]: what `classify` writes and a bundle
//! may carry beside the result). The metrics are `culturelens_metrics::magbig`.

use std::io::Read;

use crate::csv_file::{Cells, CsvSchema, expect_header, malformed, open, strings};
use crate::error::SchemaError;

/// Header of `culturelens magbig --out`.
pub const HEADER: [&str; 8] =
    ["model", "language", "set", "n_prompts", "n_images", "mad", "mad_random", "male_share"];

/// The attribute table's perceived gender: `male`, `female` or empty (unclassified).
pub const GENDER: &str = "gender";

/// Columns the attribute table (`magbig --attributes`) must have: the image's group, its prompt and
/// its perceived [`GENDER`].
pub const ATTRIBUTE_COLUMNS: [&str; 5] = ["model", "language", "set", "prompt_id", GENDER];

/// One row of the MAGBIG table.
#[derive(Debug, Clone, PartialEq)]
pub struct MagbigRow {
    pub model: String,
    pub language: String,
    pub set: String,
    /// Prompts with at least one classified image.
    pub n_prompts: usize,
    /// Classified images over those prompts.
    pub n_images: usize,
    pub mad: f64,
    pub mad_random: f64,
    pub male_share: f64,
}

/// The MAGBIG table (`magbig --out`).
pub struct Magbig;

impl CsvSchema for Magbig {
    type Columns = ();
    type Row = MagbigRow;
    const SOURCE: &'static str = "culturelens magbig --out";

    fn header(_: &()) -> Vec<String> {
        strings(&HEADER)
    }

    fn columns(file: &str, header: &[String]) -> Result<(), SchemaError> {
        expect_header(file, header, &Self::header(&()), Self::SOURCE)
    }

    fn record(_: &(), r: &MagbigRow) -> Vec<String> {
        vec![
            r.model.clone(),
            r.language.clone(),
            r.set.clone(),
            r.n_prompts.to_string(),
            r.n_images.to_string(),
            r.mad.to_string(),
            r.mad_random.to_string(),
            r.male_share.to_string(),
        ]
    }

    fn parse(_: &(), c: &Cells<'_>) -> Result<MagbigRow, SchemaError> {
        Ok(MagbigRow {
            model: c.key(0)?,
            language: c.key(1)?,
            set: c.key(2)?,
            n_prompts: c.count(3)?,
            n_images: c.count(4)?,
            mad: c.finite(5)?,
            mad_random: c.finite(6)?,
            male_share: c.finite(7)?,
        })
    }
}

/// The attribute table as named columns, every [`ATTRIBUTE_COLUMNS`] present (the gender values
/// are checked by the reader with `culturelens_metrics::magbig::Gender`).
pub fn read_attributes(file: &str, reader: impl Read) -> Result<Vec<(String, Vec<String>)>, SchemaError> {
    let (header, records) = open(file, reader)?;
    for required in ATTRIBUTE_COLUMNS {
        if !header.iter().any(|h| h == required) {
            return Err(SchemaError::new(
                file,
                format!("missing required column (columns present: {})", header.join(", ")),
            )
            .column(required));
        }
    }
    let mut columns: Vec<(String, Vec<String>)> = header.into_iter().map(|h| (h, Vec::new())).collect();
    for (row, record) in records.enumerate() {
        let record = record.map_err(|e| malformed(file, row, e))?;
        for ((_, column), cell) in columns.iter_mut().zip(record.iter()) {
            column.push(cell.to_string());
        }
    }
    Ok(columns)
}
