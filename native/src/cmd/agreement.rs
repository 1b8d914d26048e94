//! `culturelens agreement`: inter-rater agreement of human labels, as the SoS paper validates its
//! annotations (App. B.2, Tables 8–9). The statistics are `culturelens_metrics::agreement`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use culturelens_metrics::agreement::{Level, category_kappa, cohen_kappa, fleiss_kappa, krippendorff_alpha};
use culturelens_table::{Metadata, TableError, read_metadata_csv, write_atomic};

use crate::provenance::Provenance;

const CONVENTIONS: &str = "\
Inter-rater agreement (SoS paper App. B.2, Tables 8-9). --labels is a CSV with one row per item
and one column per rater (--raters names them); an empty cell is a missing rating.
  n_items             items rated by every rater
  fleiss_kappa        Fleiss' kappa over those items (statsmodels fleiss_kappa, method fleiss)
  cohen_kappa         Cohen's kappa of every rater pair over those items, keyed \"A|B\" in the order
                      --raters gives (scikit-learn cohen_kappa_score, unweighted)
  krippendorff_alpha  Krippendorff's alpha over all items, missing ratings allowed (the
                      krippendorff package): nominal by default, ordinal with --level ordinal,
                      which needs numeric labels and orders them by value
  per_label           category-specific agreement (Table 9): per label (in label order), per
                      rater pair, Cohen's kappa of the indicators \"gave this label\"
A statistic whose denominator is zero (e.g. every rater always gives one label) is null, where
the reference implementations return NaN. Output (--out) is written atomically.";

/// Krippendorff's level of measurement.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum LevelArg {
    #[default]
    Nominal,
    Ordinal,
}

crate::provenance::value_enum!(LevelArg);

/// Arguments of `culturelens agreement`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Inter-rater agreement: Fleiss' and Cohen's kappa, Krippendorff's alpha (SoS App. B.2)", long_about = CONVENTIONS)]
pub struct AgreementArgs {
    /// Labels CSV: one row per item, one column per rater; empty = missing.
    #[arg(long, value_name = "FILE")]
    pub labels: PathBuf,
    /// Rater columns, comma-separated (at least two).
    #[arg(long, value_delimiter = ',', required = true, value_name = "COL1,COL2,...")]
    pub raters: Vec<String>,
    /// Output JSON.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Krippendorff's level of measurement.
    #[arg(long, value_enum, default_value_t)]
    pub level: LevelArg,
}

/// A statistic of two raters' codes over the same items.
type PairStatistic<'a> = &'a dyn Fn(&[usize], &[usize]) -> Option<f64>;

/// Ratings as codes into `labels` (sorted: by value for the ordinal level, as text otherwise).
struct Coded {
    labels: Vec<String>,
    /// items × raters.
    codes: Vec<Vec<Option<usize>>>,
}

pub fn run(args: &AgreementArgs) -> Result<()> {
    if args.raters.len() < 2 {
        bail!("--raters needs at least two rater columns (got {})", args.raters.len());
    }
    let meta = read_metadata_csv(&args.labels)?;
    let level = match args.level {
        LevelArg::Nominal => Level::Nominal,
        LevelArg::Ordinal => Level::Ordinal,
    };
    let coded = code_ratings(&meta, &args.raters, level)?;
    let json = report(&coded, &args.raters, level);
    write_atomic(&args.out, |w| w.write_all(json.as_bytes()))?;
    Provenance::new("agreement", args).input(&args.labels)?.write_beside(&args.out)?;
    eprintln!("wrote agreement of {} raters to {}", args.raters.len(), args.out.display());
    Ok(())
}

/// Reads the rater columns and maps each non-empty label onto its code.
fn code_ratings(meta: &Metadata, raters: &[String], level: Level) -> Result<Coded, TableError> {
    let columns = raters.iter().map(|r| meta.require_column(r)).collect::<Result<Vec<_>, _>>()?;
    let mut labels: Vec<String> = Vec::new();
    for (rater, column) in raters.iter().zip(&columns) {
        for (row, value) in column.iter().enumerate() {
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            if level == Level::Ordinal && value.parse::<f64>().map_or(true, |v| !v.is_finite()) {
                return Err(TableError::invalid(
                    meta.cell(row, rater),
                    format!("ordinal labels must be numbers, got {value:?}"),
                ));
            }
            labels.push(value.to_string());
        }
    }
    match level {
        Level::Nominal => labels.sort(),
        Level::Ordinal => {
            labels.sort_by(|a, b| a.parse::<f64>().unwrap().total_cmp(&b.parse::<f64>().unwrap()))
        }
    }
    labels.dedup();
    let code = |v: &str| labels.iter().position(|l| l == v);
    let codes = (0..meta.n_rows()).map(|row| columns.iter().map(|c| code(c[row].trim())).collect()).collect();
    Ok(Coded { labels, codes })
}

/// The JSON report, keys in a fixed order (pairs in the order the raters were given).
fn report(coded: &Coded, raters: &[String], level: Level) -> String {
    let k = coded.labels.len();
    let complete: Vec<Vec<usize>> =
        coded.codes.iter().filter_map(|item| item.iter().copied().collect::<Option<Vec<_>>>()).collect();
    let columns: Vec<Vec<usize>> =
        (0..raters.len()).map(|r| complete.iter().map(|item| item[r]).collect()).collect();
    let pairs: Vec<(usize, usize)> =
        (0..raters.len()).flat_map(|a| (a + 1..raters.len()).map(move |b| (a, b))).collect();
    let pair_object = |f: PairStatistic| {
        object(
            pairs
                .iter()
                .map(|&(a, b)| (format!("{}|{}", raters[a], raters[b]), number(f(&columns[a], &columns[b])))),
        )
    };
    let per_label = object(
        coded
            .labels
            .iter()
            .enumerate()
            .map(|(label, name)| (name.clone(), pair_object(&|a, b| category_kappa(a, b, label)))),
    );
    let level_name = match level {
        Level::Nominal => "nominal",
        Level::Ordinal => "ordinal",
    };
    let entries = [
        ("n_items".to_string(), complete.len().to_string()),
        ("fleiss_kappa".to_string(), number(fleiss_kappa(&complete, k))),
        ("cohen_kappa".to_string(), pair_object(&|a, b| cohen_kappa(a, b, k))),
        ("krippendorff_alpha".to_string(), number(krippendorff_alpha(&coded.codes, k, level))),
        ("level".to_string(), serde_json::to_string(level_name).unwrap()),
        ("per_label".to_string(), per_label),
    ];
    object(entries.into_iter()) + "\n"
}

/// A JSON number in full f64 precision, or `null`.
fn number(value: Option<f64>) -> String {
    serde_json::to_string(&value).unwrap()
}

/// A JSON object from (key, already-serialised value) pairs, in the order given.
fn object(entries: impl Iterator<Item = (String, String)>) -> String {
    let body: Vec<String> =
        entries.map(|(key, value)| format!("{}: {value}", serde_json::to_string(&key).unwrap())).collect();
    format!("{{{}}}", body.join(", "))
}
