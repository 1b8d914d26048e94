//! `culturelens agreement`: inter-rater agreement of human labels, as the SoS paper validates its
//! annotations (App. B.2, Tables 8–9). The statistics are `culturelens_metrics::agreement`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use culturelens_metrics::agreement::{self, Coded, Level, report};
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

/// The ratings of the `raters` columns of `meta`, coded ([`agreement::code_ratings`]); an
/// unreadable ordinal label is refused by file, line and column.
fn code_ratings(meta: &Metadata, raters: &[String], level: Level) -> Result<Coded, TableError> {
    let columns = raters.iter().map(|r| meta.require_column(r)).collect::<Result<Vec<_>, _>>()?;
    agreement::code_ratings(&columns, level)
        .map_err(|e| TableError::invalid(meta.cell(e.row, &raters[e.rater]), e.message))
}
