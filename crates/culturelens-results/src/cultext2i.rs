//! The outputs of `culturelens cultext2i` (CulText2I §6.1, Table 2):
//!
//! | file | schema | columns / keys |
//! |------|--------|----------------|
//! | `--out` CSV | [`Groups`] | [`HEADER`] then `dp_<label>` per dimension text: one row per (model, language, concept, template) |
//! | `--report` JSON | [`Cultext2iReport`] | `ccs`, `confusion`, `dimensions`, `nationalities`, `vqa` (with `--vqa`) |
//!
//! The report is pretty JSON with keys sorted and a final newline. The metrics are
//! `culturelens_metrics::cultext2i`.

use std::collections::BTreeMap;
use std::io::{Read, Write};

pub use culturelens_metrics::cultext2i::Confusion;
use serde::{Deserialize, Serialize};

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
}

/// The CulText2I table (`cultext2i --out`); its columns are the dimension labels.
pub struct Groups;

impl CsvSchema for Groups {
    type Columns = Vec<String>;
    type Row = Cultext2iRow;
    const SOURCE: &'static str = "culturelens cultext2i --out";

    fn header(dimensions: &Vec<String>) -> Vec<String> {
        let mut header = strings(&HEADER);
        header.extend(dimensions.iter().map(|d| dp_column(d)));
        header
    }

    fn columns(file: &str, header: &[String]) -> Result<Vec<String>, SchemaError> {
        if header.len() < HEADER.len() || header[..HEADER.len()].iter().zip(HEADER).any(|(h, w)| h != w) {
            let want = format!("{},{DP_PREFIX}<label>…", HEADER.join(","));
            return Err(header_error(file, header, &want, Self::SOURCE));
        }
        header[HEADER.len()..]
            .iter()
            .map(|h| {
                h.strip_prefix(DP_PREFIX).map(str::to_string).ok_or_else(|| {
                    SchemaError::new(file, format!("columns after `cd` must be `{DP_PREFIX}<label>`"))
                        .column(h.as_str())
                })
            })
            .collect()
    }

    fn record(dimensions: &Vec<String>, r: &Cultext2iRow) -> Vec<String> {
        assert!(
            r.dp.iter().map(|(l, _)| l).eq(dimensions.iter()),
            "a row's DP labels are the table's dimensions"
        );
        let mut row =
            vec![r.model.clone(), r.language.clone(), r.concept.clone(), r.template.clone(), r.n.to_string()];
        row.extend([r.na, r.na_acc, r.cd].iter().chain(r.dp.iter().map(|(_, v)| v)).map(f64::to_string));
        row
    }

    fn parse(dimensions: &Vec<String>, c: &Cells<'_>) -> Result<Cultext2iRow, SchemaError> {
        let dp = dimensions
            .iter()
            .enumerate()
            .map(|(k, label)| Ok((label.clone(), c.finite(HEADER.len() + k)?)))
            .collect::<Result<_, SchemaError>>()?;
        Ok(Cultext2iRow {
            model: c.key(0)?,
            language: c.key(1)?,
            concept: c.key(2)?,
            template: c.key(3)?,
            n: c.count(4)?,
            na: c.finite(5)?,
            na_acc: c.finite(6)?,
            cd: c.finite(7)?,
            dp,
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
