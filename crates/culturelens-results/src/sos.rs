//! The outputs of `culturelens sos` (SoS paper Eq. 1):
//!
//! | file | schema | columns / keys |
//! |------|--------|----------------|
//! | `--out` CSV | [`Joint`] | `model,[layer,]language,culture,n,sos[,sos_lo,sos_hi]`: one row per joint-score cell |
//! | `--per-image` CSV | [`PerImage`] | `row,[image,]model,[layer,]language,culture,[person,]sos`: one row per output |
//! | `--report` JSON | [`SosReport`] | `joint`, `per_model`, `language_medians`, `strong_surface_threshold`, `language_correlation`, `person_means` |
//!
//! `layer` is there when the input had a `layer` column (SoS §5.1), `person` when it had a
//! `person` column, `image` when it had an `image` column (a table of `generate` → `embed`);
//! `sos_lo`, `sos_hi` (and the report's `sos_ci`) with `--ci` ([`crate::ci`]).
//! `--compare-models`/`--compare-languages` write [`Comparison`] tables. Joint scores and the
//! report are f64 in full precision; per-output scores are the device's f32 values, written in
//! full (the shortest f64 text of the f32's exact value, which pandas and R read back as that
//! value). In the report a `layer` is a JSON number when it is an integer. `culturelens demo --write DIR` writes the joint scores as
//! `DIR/`[`DEMO_JOINT`]. The aggregation itself is `culturelens_compute::sos::sos_report`.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use culturelens_metrics::stats::Summary;
use serde::{Deserialize, Serialize};

use crate::ci::{Interval, bound_cells, with_bounds};
use crate::csv_file::{Cells, CsvSchema, header_error};
use crate::error::SchemaError;

/// The optional column of per-layer scores (SoS §5.1).
pub const LAYER: &str = "layer";
/// The optional column of the person term (SoS App. C.4).
pub const PERSON: &str = "person";
/// The optional column of the image file an output is (the input table's `image`).
pub const IMAGE: &str = "image";
/// Every column of the joint-score table, `layer` included.
pub const JOINT_COLUMNS: [&str; 6] = ["model", LAYER, "language", "culture", "n", "sos"];
/// Every column of the per-output table, `image`, `layer` and `person` included.
pub const PER_IMAGE_COLUMNS: [&str; 8] = ["row", IMAGE, "model", LAYER, "language", "culture", PERSON, "sos"];
/// The output [`SosReport`] is.
pub const REPORT_SOURCE: &str = "culturelens sos --report";
/// The joint-score file in the folder of `culturelens demo --write`.
pub const DEMO_JOINT: &str = "sos.csv";

/// `names` without the optional columns a table lacks.
fn present(names: &[&str], has: impl Fn(&str) -> bool) -> Vec<String> {
    names.iter().filter(|n| has(n)).map(|n| n.to_string()).collect()
}

/// The one of `all` (every combination of a table's optional columns) whose header is `header`;
/// the error shows the header as `want`.
fn one_of<S: CsvSchema>(
    file: &str,
    header: &[String],
    all: impl IntoIterator<Item = S::Columns>,
    want: &str,
) -> Result<S::Columns, SchemaError> {
    all.into_iter()
        .find(|c| S::header(c) == header)
        .ok_or_else(|| header_error(file, header, want, S::SOURCE))
}

/// `names` as shown in an error, optional columns in brackets: `model,[layer,]language,…`.
fn shown(names: &[&str], optional: &[&str]) -> String {
    let text: String = names
        .iter()
        .map(|n| if optional.contains(n) { format!("[{n},]") } else { format!("{n},") })
        .collect();
    text.trim_end_matches(',').to_string()
}

/// Joint SoS of one (model, [layer,] language, culture) cell: the mean of its outputs' scores over
/// templates × person terms (× seeds) — SoS paper §4.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JointScore {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "layer_json")]
    pub layer: Option<String>,
    pub language: String,
    pub culture: String,
    pub n: usize,
    pub sos: f64,
    /// With `--ci`: the bootstrap interval of `sos` (`None` where undefined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sos_ci: Option<Interval>,
}

/// The joint-score table (`sos --out`).
pub struct Joint;

/// The optional columns of a joint-score table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JointColumns {
    pub layer: bool,
    /// `sos_lo`, `sos_hi` after `sos` (`--ci`).
    pub ci: bool,
}

impl CsvSchema for Joint {
    type Columns = JointColumns;
    type Row = JointScore;
    const SOURCE: &'static str = "culturelens sos --out";

    fn header(c: &JointColumns) -> Vec<String> {
        with_bounds(&present(&JOINT_COLUMNS, |n| n != LAYER || c.layer), &["sos"], c.ci)
    }

    fn columns(file: &str, header: &[String]) -> Result<JointColumns, SchemaError> {
        let all = [(false, false), (true, false), (false, true), (true, true)]
            .map(|(layer, ci)| JointColumns { layer, ci });
        one_of::<Self>(file, header, all, &(shown(&JOINT_COLUMNS, &[LAYER]) + "[,sos_lo,sos_hi]"))
    }

    fn record(c: &JointColumns, j: &JointScore) -> Vec<String> {
        let mut row = vec![j.model.clone()];
        if c.layer {
            row.push(j.layer.clone().expect("every row of a table with a layer column has a layer"));
        }
        row.extend([j.language.clone(), j.culture.clone(), j.n.to_string(), j.sos.to_string()]);
        if c.ci {
            row.extend(bound_cells(j.sos_ci));
        }
        row
    }

    fn parse(c: &JointColumns, cells: &Cells<'_>) -> Result<JointScore, SchemaError> {
        let k = usize::from(c.layer);
        Ok(JointScore {
            model: cells.key(0)?,
            layer: if c.layer { Some(cells.key(1)?) } else { None },
            language: cells.key(1 + k)?,
            culture: cells.key(2 + k)?,
            n: cells.count(3 + k)?,
            sos: cells.finite(4 + k)?,
            sos_ci: if c.ci { cells.interval(5 + k)? } else { None },
        })
    }
}

/// The score of one output (`sos --per-image`), in the input's row order.
#[derive(Debug, Clone, PartialEq)]
pub struct PerImageScore {
    /// 0-based row of the input table.
    pub row: usize,
    /// The input table's `image` cell.
    pub image: Option<String>,
    pub model: String,
    pub layer: Option<String>,
    pub language: String,
    pub culture: String,
    pub person: Option<String>,
    /// The device's f32 score, written in full (`f64::from(sos)`'s shortest text).
    pub sos: f32,
}

/// The per-output table (`sos --per-image`).
pub struct PerImage;

/// The optional columns of a per-output table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerImageColumns {
    pub image: bool,
    pub layer: bool,
    pub person: bool,
}

impl CsvSchema for PerImage {
    type Columns = PerImageColumns;
    type Row = PerImageScore;
    const SOURCE: &'static str = "culturelens sos --per-image";

    fn header(c: &PerImageColumns) -> Vec<String> {
        present(&PER_IMAGE_COLUMNS, |n| {
            (n != IMAGE || c.image) && (n != LAYER || c.layer) && (n != PERSON || c.person)
        })
    }

    fn columns(file: &str, header: &[String]) -> Result<PerImageColumns, SchemaError> {
        (0..8)
            .map(|bits| PerImageColumns { image: bits & 4 != 0, layer: bits & 2 != 0, person: bits & 1 != 0 })
            .find(|c| Self::header(c) == header)
            .ok_or_else(|| {
                header_error(file, header, &shown(&PER_IMAGE_COLUMNS, &[IMAGE, LAYER, PERSON]), Self::SOURCE)
            })
    }

    fn record(c: &PerImageColumns, s: &PerImageScore) -> Vec<String> {
        let mut row = vec![s.row.to_string()];
        if c.image {
            row.push(s.image.clone().expect("every row of a table with an image column has an image"));
        }
        row.push(s.model.clone());
        if c.layer {
            row.push(s.layer.clone().expect("every row of a table with a layer column has a layer"));
        }
        row.extend([s.language.clone(), s.culture.clone()]);
        if c.person {
            row.push(s.person.clone().expect("every row of a table with a person column has a person"));
        }
        row.push(f64::from(s.sos).to_string());
        row
    }

    fn parse(c: &PerImageColumns, cells: &Cells<'_>) -> Result<PerImageScore, SchemaError> {
        let i = usize::from(c.image);
        let k = i + usize::from(c.layer);
        let p = k + usize::from(c.person);
        Ok(PerImageScore {
            row: cells.count(0)?,
            image: if c.image { Some(cells.string(1)) } else { None },
            model: cells.key(1 + i)?,
            layer: if c.layer { Some(cells.key(2 + i)?) } else { None },
            language: cells.key(2 + k)?,
            culture: cells.key(3 + k)?,
            person: if c.person { Some(cells.string(4 + k)) } else { None },
            sos: cells.finite_f32(4 + p)?,
        })
    }
}

/// Median SoS of one model–language pair and whether it shows a *strong surface tendency*: its
/// median is at or below the 25th percentile of the medians of all model–language pairs (§5.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanguageMedian {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "layer_json")]
    pub layer: Option<String>,
    pub language: String,
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub strong_surface: bool,
}

/// Language × language Pearson correlation of joint SoS over (model, [layer,] culture) cells
/// present for both languages (Fig. 5). `r[i][j]` is `None` when undefined (fewer than two shared
/// cells or zero variance); `pairs[i][j]` is the number of shared cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanguageCorrelation {
    pub languages: Vec<String>,
    pub r: Vec<Vec<Option<f64>>>,
    pub pairs: Vec<Vec<usize>>,
}

/// Mean SoS per person term (App. C.4), per model and over all models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonMean {
    /// `None` for the mean over all models.
    pub model: Option<String>,
    pub person: String,
    pub n: usize,
    pub mean: f64,
}

/// Everything the `sos` command reports (`--report`, keys in this order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SosReport {
    pub joint: Vec<JointScore>,
    /// Distribution of per-output SoS per model (Fig. 2).
    pub per_model: BTreeMap<String, Summary>,
    pub language_medians: Vec<LanguageMedian>,
    /// The 25th percentile of the model–language medians: the strong-surface threshold.
    pub strong_surface_threshold: f64,
    pub language_correlation: LanguageCorrelation,
    pub person_means: Vec<PersonMean>,
}

/// The report as `sos --report` writes it: pretty JSON in field order, no final newline.
pub fn write_report(w: impl Write, report: &SosReport) -> std::io::Result<()> {
    serde_json::to_writer_pretty(w, report).map_err(std::io::Error::from)
}

/// Reads `sos --report`; a correlation matrix that is not one row and column per language is an
/// error.
pub fn read_report(file: &str, reader: impl Read) -> Result<SosReport, SchemaError> {
    let report: SosReport = serde_json::from_reader(reader)
        .map_err(|e| SchemaError::new(file, format!("not a `{REPORT_SOURCE}` JSON: {e}")))?;
    let c = &report.language_correlation;
    let k = c.languages.len();
    if c.r.len() != k || c.r.iter().any(|row| row.len() != k) {
        return Err(SchemaError::new(
            file,
            format!("language_correlation.r is not {k} × {k} (one row and column per language)"),
        )
        .column("language_correlation.r"));
    }
    Ok(report)
}

/// What `sos --compare-models A,B` or `--compare-languages A,B` compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Factor {
    /// Two models, per (language, culture) cell.
    Models,
    /// Two languages, per (model, culture) cell.
    Languages,
}

impl Factor {
    /// The compared column (`model`, `language`) and the column the compared cells share
    /// (`language`, `model`).
    pub fn columns(self) -> (&'static str, &'static str) {
        match self {
            Factor::Models => ("model", "language"),
            Factor::Languages => ("language", "model"),
        }
    }
}

/// The columns of a comparison table after the compared pair (`model_a,model_b` or
/// `language_a,language_b`), the shared column and the optional layer:
pub const COMPARISON_TAIL: [&str; 8] =
    ["culture", "n_pairs", "diff", "diff_lo", "diff_hi", "p_value", "p_holm", "exact"];

/// The paired difference of one cell between A and B (`sos --compare-out`): the mean over the
/// cell's output pairs (A's and B's outputs with equal `--pair-by` values) of `SoS_A − SoS_B`,
/// its bootstrap interval over the pairs, the two-sided sign-flip permutation p-value, and that
/// p-value Holm-adjusted over every cell of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedDifference {
    pub a: String,
    pub b: String,
    /// The language (comparing models) or the model (comparing languages) both cells share.
    pub shared: String,
    pub layer: Option<String>,
    pub culture: String,
    pub n_pairs: usize,
    pub diff: f64,
    /// `None` where the interval is undefined.
    pub diff_ci: Option<Interval>,
    pub p_value: f64,
    pub p_holm: f64,
    /// Whether the permutation distribution enumerated all `2^n` sign patterns.
    pub exact: bool,
}

/// A comparison table (`sos --compare-out`).
pub struct Comparison;

/// The header variants of a comparison table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComparisonColumns {
    pub factor: Factor,
    pub layer: bool,
}

impl CsvSchema for Comparison {
    type Columns = ComparisonColumns;
    type Row = PairedDifference;
    const SOURCE: &'static str = "culturelens sos --compare-out";

    fn header(c: &ComparisonColumns) -> Vec<String> {
        let (compared, shared) = c.factor.columns();
        let mut header = vec![format!("{compared}_a"), format!("{compared}_b"), shared.to_string()];
        if c.layer {
            header.push(LAYER.to_string());
        }
        header.extend(COMPARISON_TAIL.iter().map(|s| s.to_string()));
        header
    }

    fn columns(file: &str, header: &[String]) -> Result<ComparisonColumns, SchemaError> {
        let all = [Factor::Models, Factor::Languages]
            .into_iter()
            .flat_map(|factor| [false, true].map(|layer| ComparisonColumns { factor, layer }));
        let want = format!(
            "model_a,model_b,language|language_a,language_b,model,[layer,]{}",
            COMPARISON_TAIL.join(",")
        );
        one_of::<Self>(file, header, all, &want)
    }

    fn record(c: &ComparisonColumns, r: &PairedDifference) -> Vec<String> {
        let mut row = vec![r.a.clone(), r.b.clone(), r.shared.clone()];
        if c.layer {
            row.push(r.layer.clone().expect("every row of a table with a layer column has a layer"));
        }
        row.extend([r.culture.clone(), r.n_pairs.to_string(), r.diff.to_string()]);
        row.extend(bound_cells(r.diff_ci));
        row.extend([r.p_value.to_string(), r.p_holm.to_string(), r.exact.to_string()]);
        row
    }

    fn parse(c: &ComparisonColumns, cells: &Cells<'_>) -> Result<PairedDifference, SchemaError> {
        let k = usize::from(c.layer);
        Ok(PairedDifference {
            a: cells.key(0)?,
            b: cells.key(1)?,
            shared: cells.key(2)?,
            layer: if c.layer { Some(cells.key(3)?) } else { None },
            culture: cells.key(3 + k)?,
            n_pairs: cells.count(4 + k)?,
            diff: cells.finite(5 + k)?,
            diff_ci: cells.interval(6 + k)?,
            p_value: cells.finite(8 + k)?,
            p_holm: cells.finite(9 + k)?,
            exact: cells.boolean(10 + k)?,
        })
    }
}

/// A `layer` in the report's JSON: a number when it is an integer (a text-encoder layer, as
/// `generate` writes it), else the string; either reads back as the table's text.
mod layer_json {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(layer: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        match layer.as_deref().map(|l| (l, l.parse::<i64>())) {
            Some((l, Ok(n))) if n.to_string() == l => s.serialize_i64(n),
            Some((l, _)) => s.serialize_str(l),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(i64),
            Text(String),
        }
        Ok(Option::<Written>::deserialize(d)?.map(|w| match w {
            Written::Number(n) => n.to_string(),
            Written::Text(t) => t,
        }))
    }
}
