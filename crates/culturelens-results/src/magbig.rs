//! The MAGBIG tables (MAGBIG §4, App. B): `culturelens magbig --out` ([`Magbig`]: one row per
//! (model, language, set), [`HEADER`], a contract that tests outside the project read) and the
//! per-image attribute table it reads ([`ATTRIBUTE_COLUMNS`]: what `classify` writes and a bundle
//! may carry beside the result). The metrics are `culturelens_metrics::magbig`. With `--ci`,
//! `mad` and `male_share` are each followed by their `_lo`, `_hi` bounds ([`crate::ci`]).

use std::io::Read;

use crate::ci::{Interval, bound_cells, with_bounds};
use crate::csv_file::{Cells, CsvSchema, header_error, malformed, open, strings};
use crate::error::SchemaError;
use culturelens_metrics::magbig::{Group, GroupCounts, PromptCounts, mad};

/// Header of `culturelens magbig --out`.
pub const HEADER: [&str; 8] =
    ["model", "language", "set", "n_prompts", "n_images", "mad", "mad_random", "male_share"];

/// The attribute table's perceived gender: `male`, `female` or empty (unclassified).
pub const GENDER: &str = "gender";

/// Columns the attribute table (`magbig --attributes`) must have: the image's group, its prompt and
/// its perceived [`GENDER`].
pub const ATTRIBUTE_COLUMNS: [&str; 5] = ["model", "language", "set", "prompt_id", GENDER];

/// The rows of `culturelens magbig --out`, one per group with a classified image (sorted), each
/// with the bias summary of `culturelens_metrics::magbig::mad` over its prompts and the two
/// intervals `intervals` gives for the group's key and prompt counts (`[None, None]` without
/// `--ci`). The CLI and the Python package's `magbig` both build their rows here.
pub fn magbig_rows(
    groups: &GroupCounts,
    mut intervals: impl FnMut(&Group, &[PromptCounts]) -> [Option<Interval>; 2],
) -> Vec<MagbigRow> {
    groups
        .iter()
        .filter_map(|(key, prompts)| {
            let counts: Vec<PromptCounts> = prompts.values().copied().collect();
            let s = mad(&counts)?;
            let [mad_ci, male_share_ci] = intervals(key, &counts);
            let (model, language, set) = key.clone();
            Some(MagbigRow {
                model,
                language,
                set,
                n_prompts: s.n_prompts,
                n_images: s.n_images,
                mad: s.mad,
                mad_random: s.mad_random,
                male_share: s.male_share,
                mad_ci,
                male_share_ci,
            })
        })
        .collect()
}

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
    /// With `--ci`: the bootstrap interval of `mad` (prompts resampled within the group).
    pub mad_ci: Option<Interval>,
    /// With `--ci`: the bootstrap interval of `male_share`.
    pub male_share_ci: Option<Interval>,
}

/// The MAGBIG table (`magbig --out`).
pub struct Magbig;

/// Whether the table has the interval columns (`--ci`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MagbigColumns {
    pub ci: bool,
}

/// The estimates that have intervals with `--ci`.
const WITH_CI: [&str; 2] = ["mad", "male_share"];

impl CsvSchema for Magbig {
    type Columns = MagbigColumns;
    type Row = MagbigRow;
    const SOURCE: &'static str = "culturelens magbig --out";

    fn header(c: &MagbigColumns) -> Vec<String> {
        with_bounds(&strings(&HEADER), &WITH_CI, c.ci)
    }

    fn columns(file: &str, header: &[String]) -> Result<MagbigColumns, SchemaError> {
        [MagbigColumns { ci: false }, MagbigColumns { ci: true }]
            .into_iter()
            .find(|c| Self::header(c) == header)
            .ok_or_else(|| {
                let want = "model,language,set,n_prompts,n_images,mad,[mad_lo,mad_hi,]mad_random,male_share\
                            [,male_share_lo,male_share_hi]";
                header_error(file, header, want, Self::SOURCE)
            })
    }

    fn record(c: &MagbigColumns, r: &MagbigRow) -> Vec<String> {
        let mut cells = vec![
            r.model.clone(),
            r.language.clone(),
            r.set.clone(),
            r.n_prompts.to_string(),
            r.n_images.to_string(),
            r.mad.to_string(),
        ];
        if c.ci {
            cells.extend(bound_cells(r.mad_ci));
        }
        cells.extend([r.mad_random.to_string(), r.male_share.to_string()]);
        if c.ci {
            cells.extend(bound_cells(r.male_share_ci));
        }
        cells
    }

    fn parse(c: &MagbigColumns, cells: &Cells<'_>) -> Result<MagbigRow, SchemaError> {
        let k = if c.ci { 2 } else { 0 };
        Ok(MagbigRow {
            model: cells.key(0)?,
            language: cells.key(1)?,
            set: cells.key(2)?,
            n_prompts: cells.count(3)?,
            n_images: cells.count(4)?,
            mad: cells.finite(5)?,
            mad_ci: if c.ci { cells.interval(6)? } else { None },
            mad_random: cells.finite(6 + k)?,
            male_share: cells.finite(7 + k)?,
            male_share_ci: if c.ci { cells.interval(8 + k)? } else { None },
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
