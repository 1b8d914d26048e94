//! The output of `culturelens validate` (SoS §4.2, Table 2): per labelling method and subset of
//! images, the accuracy against the human labels and the precisions P_sur, P_sem; an undefined
//! value (no image labelled or predicted so) is an empty cell. The rules are
//! `culturelens_metrics::validation`.

use crate::csv_file::{Cells, CsvSchema, expect_header, optional, strings};
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
}

/// The validation table (`validate --out`).
pub struct Validation;

impl CsvSchema for Validation {
    type Columns = ();
    type Row = ValidationRow;
    const SOURCE: &'static str = "culturelens validate --out";

    fn header(_: &()) -> Vec<String> {
        strings(&HEADER)
    }

    fn columns(file: &str, header: &[String]) -> Result<(), SchemaError> {
        expect_header(file, header, &Self::header(&()), Self::SOURCE)
    }

    fn record(_: &(), r: &ValidationRow) -> Vec<String> {
        vec![
            r.method.clone(),
            r.subset.clone(),
            r.n.to_string(),
            optional(r.acc),
            optional(r.p_sur),
            optional(r.p_sem),
        ]
    }

    fn parse(_: &(), c: &Cells<'_>) -> Result<ValidationRow, SchemaError> {
        Ok(ValidationRow {
            method: c.key(0)?,
            subset: c.key(1)?,
            n: c.count(2)?,
            acc: c.optional_finite(3)?,
            p_sur: c.optional_finite(4)?,
            p_sem: c.optional_finite(5)?,
        })
    }
}
