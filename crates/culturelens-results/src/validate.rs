//! The output of `culturelens validate` (SoS §4.2, Table 2): per labelling method and subset of
//! images, the accuracy against the human labels and the precisions P_sur, P_sem; an undefined
//! value (no image labelled or predicted so) is an empty cell. The rules are
//! `culturelens_metrics::validation`. With `--ci`, `acc`, `p_sur` and `p_sem` are each followed by
//! their `_lo`, `_hi` bounds ([`crate::ci`]).

use crate::ci::{Interval, bound_cells, with_bounds};
use crate::csv_file::{Cells, CsvSchema, header_error, optional, strings};
use crate::error::SchemaError;

/// Header of `culturelens validate --out`.
pub const HEADER: [&str; 6] = ["method", "subset", "n", "acc", "p_sur", "p_sem"];

/// The scores of one method on one subset.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationRow {
    /// `sos` or `clipscore`.
    pub method: String,
    /// `all`, or `no_en` (English prompts left out).
    pub subset: String,
    /// Images with a human label.
    pub n: usize,
    pub acc: Option<f64>,
    pub p_sur: Option<f64>,
    pub p_sem: Option<f64>,
    /// With `--ci`: the intervals of `acc`, `p_sur` and `p_sem` (labelled images resampled within
    /// the subset); all `None` without it.
    pub ci: [Option<Interval>; 3],
}

/// The validation table (`validate --out`).
pub struct Validation;

/// Whether the table has the interval columns (`--ci`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValidationColumns {
    pub ci: bool,
}

/// The scores that have intervals with `--ci`.
const WITH_CI: [&str; 3] = ["acc", "p_sur", "p_sem"];

impl CsvSchema for Validation {
    type Columns = ValidationColumns;
    type Row = ValidationRow;
    const SOURCE: &'static str = "culturelens validate --out";

    fn header(c: &ValidationColumns) -> Vec<String> {
        with_bounds(&strings(&HEADER), &WITH_CI, c.ci)
    }

    fn columns(file: &str, header: &[String]) -> Result<ValidationColumns, SchemaError> {
        [ValidationColumns { ci: false }, ValidationColumns { ci: true }]
            .into_iter()
            .find(|c| Self::header(c) == header)
            .ok_or_else(|| {
                let want = "method,subset,n,acc,p_sur,p_sem (with --ci: `_lo`, `_hi` after each score)";
                header_error(file, header, want, Self::SOURCE)
            })
    }

    fn record(c: &ValidationColumns, r: &ValidationRow) -> Vec<String> {
        let mut cells = vec![r.method.clone(), r.subset.clone(), r.n.to_string()];
        for (value, interval) in [r.acc, r.p_sur, r.p_sem].into_iter().zip(r.ci) {
            cells.push(optional(value));
            if c.ci {
                cells.extend(bound_cells(interval));
            }
        }
        cells
    }

    fn parse(c: &ValidationColumns, cells: &Cells<'_>) -> Result<ValidationRow, SchemaError> {
        let stride = if c.ci { 3 } else { 1 };
        let score = |k: usize| cells.optional_finite(3 + k * stride);
        let interval = |k: usize| if c.ci { cells.interval(3 + k * stride + 1) } else { Ok(None) };
        Ok(ValidationRow {
            method: cells.key(0)?,
            subset: cells.key(1)?,
            n: cells.count(2)?,
            acc: score(0)?,
            p_sur: score(1)?,
            p_sem: score(2)?,
            ci: [interval(0)?, interval(1)?, interval(2)?],
        })
    }
}
