//! The output of `culturelens validate` (SoS §4.2, Table 2): per labelling method and subset of
//! images, the accuracy against the human labels and the precisions P_sur, P_sem; an undefined
//! value (no image labelled or predicted so) is an empty cell. The rules are
//! `culturelens_metrics::validation`. With `--ci`, `acc`, `p_sur` and `p_sem` are each followed by
//! their `_lo`, `_hi` bounds ([`crate::ci`]).

use crate::ci::{Interval, bound_cells, with_bounds};
use crate::csv_file::{Cells, CsvSchema, header_error, optional, strings};
use crate::error::SchemaError;
use culturelens_metrics::cultext2i::majority;
use culturelens_metrics::validation::{
    CLIPSCORE_W, LabelScores, Tendency, clipscore, label_by_clipscore, label_by_sos, score_labels,
};

/// Header of `culturelens validate --out`.
pub const HEADER: [&str; 6] = ["method", "subset", "n", "acc", "p_sur", "p_sem"];

/// Predicted labels of one method, per image.
pub type Predicted = Vec<Option<Tendency>>;
/// Human labels per image: `None` unlabelled, `Some(None)` a label that is neither tendency.
pub type Human = Vec<Option<Option<Tendency>>>;

/// The rows of `culturelens validate --out` (and the Python package's `validate`): the human
/// label of each image is the strict majority of the non-empty `raters` cells; each method
/// (`sos` from per-image SoS scores, `clipscore` from the (surface, semantic) cosines) is scored
/// against it on all images and without English prompts (`language` = `en`), with the
/// intervals `intervals` gives for (method, subset, predicted, human) (`[None; 3]` without `--ci`).
pub fn validation_rows(
    language: &[String],
    raters: &[&[String]],
    sos: Option<&[f64]>,
    clipscore_cosines: Option<(&[f64], &[f64])>,
    mut intervals: impl FnMut(&str, &str, &Predicted, &Human) -> [Option<Interval>; 3],
) -> Vec<ValidationRow> {
    let human: Human = (0..language.len())
        .map(|row| {
            let given: Vec<&str> = raters.iter().map(|c| c[row].trim()).filter(|v| !v.is_empty()).collect();
            majority(&given).map(Tendency::parse)
        })
        .collect();
    let mut methods: Vec<(&str, Predicted)> = Vec::new();
    if let Some(scores) = sos {
        methods.push(("sos", scores.iter().copied().map(label_by_sos).collect()));
    }
    if let Some((sur, sem)) = clipscore_cosines {
        let labels = sur
            .iter()
            .zip(sem)
            .map(|(&a, &b)| label_by_clipscore(clipscore(a, CLIPSCORE_W), clipscore(b, CLIPSCORE_W)))
            .collect();
        methods.push(("clipscore", labels));
    }
    let no_en: Human =
        human.iter().zip(language).map(|(h, l)| if l.trim() == "en" { None } else { *h }).collect();
    let mut rows = Vec::new();
    for (name, predicted) in &methods {
        for (subset, h) in [("all", &human), ("no_en", &no_en)] {
            let s: LabelScores = score_labels(predicted, h);
            rows.push(ValidationRow {
                method: name.to_string(),
                subset: subset.to_string(),
                n: s.n,
                acc: s.accuracy,
                p_sur: s.p_sur,
                p_sem: s.p_sem,
                ci: intervals(name, subset, predicted, h),
            });
        }
    }
    rows
}

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
