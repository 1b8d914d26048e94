//! The outputs of `culturelens cultext2i` (CulText2I §6.1, Table 2):
//!
//! | file | schema | columns / keys |
//! |------|--------|----------------|
//! | `--out` CSV | [`Groups`] | [`HEADER`] then `dp_<label>` per dimension text: one row per (model, language, concept, template) |
//! | `--report` JSON | [`Cultext2iReport`] | `ccs`, `confusion`, `dimensions`, `nationalities`, `vqa` (with `--vqa`) |
//!
//! The report is pretty JSON with keys sorted and a final newline. The metrics are
//! `culturelens_metrics::cultext2i`. With `--ci`, every estimate of the CSV (`na`, `na_acc`, `cd`,
//! each `dp_<label>`) is followed by its `_lo`, `_hi` bounds ([`crate::ci`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};

pub use culturelens_metrics::cultext2i::Confusion;
use serde::{Deserialize, Serialize};

use crate::ci::{Interval, bound_cells, bound_columns};
use crate::csv_file::{Cells, CsvSchema, header_error, strings};
use crate::error::SchemaError;

/// The fixed leading columns of `cultext2i --out` (a contract; `dp_<label>` columns follow).
pub const HEADER: [&str; 8] = ["model", "language", "concept", "template", "n", "na", "na_acc", "cd"];

/// The output [`Cultext2iReport`] is.
pub const REPORT_SOURCE: &str = "culturelens cultext2i --report";

/// The prefix of a dimension's DP column: `dp_<label>`.
pub const DP_PREFIX: &str = "dp_";

/// The DP column of the dimension text `label`.
pub fn dp_column(label: &str) -> String {
    format!("{DP_PREFIX}{label}")
}

/// One row of the CulText2I table: means over the images of one group; `dp` holds the
/// `dp_<label>` columns as (label, value).
#[derive(Debug, Clone, PartialEq)]
pub struct Cultext2iRow {
    pub model: String,
    pub language: String,
    pub concept: String,
    pub template: String,
    pub n: usize,
    pub na: f64,
    pub na_acc: f64,
    pub cd: f64,
    pub dp: Vec<(String, f64)>,
    /// With `--ci`: the intervals of `na`, `na_acc`, `cd` and each `dp` value, in that order
    /// (images resampled within the group); empty without `--ci`.
    pub ci: Vec<Option<Interval>>,
}

/// The CulText2I table (`cultext2i --out`).
pub struct Groups;

/// What varies between CulText2I tables: the dimension labels (one `dp_<label>` column each) and
/// whether the interval columns are there (`--ci`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cultext2iColumns {
    pub dimensions: Vec<String>,
    pub ci: bool,
}

impl CsvSchema for Groups {
    type Columns = Cultext2iColumns;
    type Row = Cultext2iRow;
    const SOURCE: &'static str = "culturelens cultext2i --out";

    fn header(c: &Cultext2iColumns) -> Vec<String> {
        let mut header = strings(&HEADER[..5]);
        let estimates =
            HEADER[5..].iter().map(|h| h.to_string()).chain(c.dimensions.iter().map(|d| dp_column(d)));
        for name in estimates {
            let bounds = if c.ci { bound_columns(&name).to_vec() } else { Vec::new() };
            header.push(name);
            header.extend(bounds);
        }
        header
    }

    fn columns(file: &str, header: &[String]) -> Result<Cultext2iColumns, SchemaError> {
        let ci = header.get(6).is_some_and(|h| h == "na_lo");
        let fixed = Self::header(&Cultext2iColumns { dimensions: Vec::new(), ci });
        if header.len() < fixed.len() || header[..fixed.len()] != fixed[..] {
            let want = format!(
                "{},{DP_PREFIX}<label>… (with --ci: `_lo`, `_hi` after every estimate)",
                HEADER.join(",")
            );
            return Err(header_error(file, header, &want, Self::SOURCE));
        }
        let stride = if ci { 3 } else { 1 };
        let rest = &header[fixed.len()..];
        let dimensions = rest
            .chunks(stride)
            .map(|group| {
                let label = group[0].strip_prefix(DP_PREFIX).ok_or_else(|| {
                    SchemaError::new(file, format!("columns after `cd` must be `{DP_PREFIX}<label>`"))
                        .column(group[0].as_str())
                })?;
                if ci && group[1..] != bound_columns(&group[0])[..] {
                    return Err(SchemaError::new(
                        file,
                        format!("`{}` must be followed by its bounds", group[0]),
                    )
                    .column(group[0].as_str()));
                }
                Ok(label.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cultext2iColumns { dimensions, ci })
    }

    fn record(c: &Cultext2iColumns, r: &Cultext2iRow) -> Vec<String> {
        assert!(
            r.dp.iter().map(|(l, _)| l).eq(c.dimensions.iter()),
            "a row's DP labels are the table's dimensions"
        );
        let mut row =
            vec![r.model.clone(), r.language.clone(), r.concept.clone(), r.template.clone(), r.n.to_string()];
        let estimates = [r.na, r.na_acc, r.cd].into_iter().chain(r.dp.iter().map(|(_, v)| *v));
        for (k, value) in estimates.enumerate() {
            row.push(value.to_string());
            if c.ci {
                row.extend(bound_cells(r.ci.get(k).copied().flatten()));
            }
        }
        row
    }

    fn parse(c: &Cultext2iColumns, cells: &Cells<'_>) -> Result<Cultext2iRow, SchemaError> {
        let stride = if c.ci { 3 } else { 1 };
        let count = 3 + c.dimensions.len();
        let value = |k: usize| cells.finite(5 + k * stride);
        let ci = if c.ci {
            (0..count).map(|k| cells.interval(5 + k * stride + 1)).collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        let dp = c
            .dimensions
            .iter()
            .enumerate()
            .map(|(k, label)| Ok((label.clone(), value(3 + k)?)))
            .collect::<Result<_, SchemaError>>()?;
        Ok(Cultext2iRow {
            model: cells.key(0)?,
            language: cells.key(1)?,
            concept: cells.key(2)?,
            template: cells.key(3)?,
            n: cells.count(4)?,
            na: value(0)?,
            na_acc: value(1)?,
            cd: value(2)?,
            dp,
            ci,
        })
    }
}

/// CCS of one (model, template): `ccs[i][j]` = CCS(languages[i], languages[j]), `None` where no
/// concept has an image pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CcsMatrix {
    pub ccs: Vec<Vec<Option<f64>>>,
    pub languages: Vec<String>,
    pub model: String,
    pub template: String,
}

/// XNA or XDP of one (model, language, template, question) from the VQA answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VqaScore {
    pub language: String,
    /// Per image set (concept), its majority answer (`None`: no strict majority).
    pub majority: BTreeMap<String, Option<String>>,
    /// `xna` or `xdp`.
    pub metric: String,
    pub model: String,
    pub n_sets: usize,
    /// `nationality`, or `d0|d1` for XDP.
    pub question: String,
    /// `None` for no image set.
    pub score: Option<f64>,
    pub template: String,
}

/// `culturelens cultext2i --report` (keys in the file's sorted order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cultext2iReport {
    #[serde(default)]
    pub ccs: Vec<CcsMatrix>,
    /// Per model, in model order: the NA confusion matrix in [`Cultext2iReport::nationalities`]
    /// order (rows = true, columns = predicted).
    pub confusion: BTreeMap<String, Confusion>,
    #[serde(default)]
    pub dimensions: Vec<String>,
    pub nationalities: Vec<String>,
    /// With `--vqa`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vqa: Option<Vec<VqaScore>>,
}

/// Writes the report as `cultext2i --report` does (keys sorted, pretty, final newline).
pub fn write_report(mut w: impl Write, report: &Cultext2iReport) -> std::io::Result<()> {
    let value = serde_json::to_value(report).map_err(std::io::Error::from)?;
    w.write_all((serde_json::to_string_pretty(&value)? + "\n").as_bytes())
}

/// Reads `cultext2i --report`: the nationality labels and a k × k confusion matrix per model.
pub fn read_report(file: &str, reader: impl Read) -> Result<Cultext2iReport, SchemaError> {
    let report: Cultext2iReport = serde_json::from_reader(reader).map_err(|e| {
        SchemaError::new(file, format!("not a `{REPORT_SOURCE}` JSON (invalid JSON or missing field): {e}"))
    })?;
    let k = report.nationalities.len();
    for (model, c) in &report.confusion {
        if c.counts.len() != k || c.counts.iter().any(|r| r.len() != k) {
            return Err(SchemaError::new(
                file,
                format!(
                    "confusion matrix of model `{model}` is not {k} × {k} (one row and column per nationality)"
                ),
            ));
        }
    }
    Ok(report)
}
