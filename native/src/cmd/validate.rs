//! `culturelens validate`: the SoS paper's validation against human labels (§4.2, Table 2):
//! accuracy, P_sur and P_sem of the SoS sign rule and of the CLIPScore rule, with and without
//! English prompts. The rules and scores are `culturelens_metrics::validation`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use culturelens_metrics::validation::intervals;
use culturelens_results::validate::{Validation, ValidationColumns, validation_rows};
use culturelens_table::{read_metadata_csv, write_atomic};

use crate::provenance::Provenance;
use crate::uncertainty::CiArgs;

const CONVENTIONS: &str = "\
SoS validation (SoS paper Sec. 4.2, Table 2). --labels has one row per image with a `language`
column, the rater columns (--raters; each label `surface`, `semantic`, another option such as a
distractor culture, or empty = missing) and the predictor columns:
  --sos-col COL             per-image SoS (cos(semantic) - cos(surface)): > 0 semantic, < 0
                            surface, 0 no label
  --clipscore-cols SUR,SEM  the image's cosine with \"A photo of a {c} person\" for the surface and the
                            semantic culture; CLIPScore = 2.5 * max(cos, 0) (Hessel et al.), the
                            higher wins, a tie gives no label
Human label = the label of strictly more than half of the non-empty rater labels (none: the image
is left out). accuracy = share of the labelled images whose predicted label equals the human one
(another option and a missing prediction count as wrong); p_sur / p_sem = share of the images
predicted surface / semantic whose human label agrees (empty when none was predicted so).
Output (--out, atomic): method,subset,n,acc,p_sur,p_sem with subset `all` and `no_en` (language
`en` left out), one row per method given.
Unit resampled by --ci: the images with a human label in the subset (the items accuracy and the
precisions are shares of), drawn with replacement; acc, p_sur and p_sem are recomputed from each
resample by the same rule and get <score>_lo,<score>_hi right after them (empty where undefined:
no image predicted so in some resample). The stream is seeded with --seed XOR
FNV-1a(\"validate\", method, subset).";

/// Arguments of `culturelens validate`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "SoS validation vs human labels: accuracy, P_sur, P_sem (SoS Table 2)", long_about = CONVENTIONS)]
pub struct ValidateArgs {
    /// Labels CSV: language, rater columns, predictor columns.
    #[arg(long, value_name = "FILE")]
    pub labels: PathBuf,
    /// Rater columns, comma-separated.
    #[arg(long, value_delimiter = ',', required = true, value_name = "COL1,COL2,...")]
    pub raters: Vec<String>,
    /// Column of the per-image SoS.
    #[arg(long, value_name = "COL")]
    pub sos_col: Option<String>,
    /// Columns of the cosines with the surface and the semantic caption.
    #[arg(long, value_delimiter = ',', value_name = "SUR,SEM")]
    pub clipscore_cols: Vec<String>,
    /// Output CSV.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    #[command(flatten)]
    pub ci: CiArgs,
}

pub fn run(args: &ValidateArgs) -> Result<()> {
    if !args.clipscore_cols.is_empty() && args.clipscore_cols.len() != 2 {
        bail!("--clipscore-cols takes two columns, SUR,SEM (got {})", args.clipscore_cols.join(","));
    }
    if args.sos_col.is_none() && args.clipscore_cols.is_empty() {
        bail!("give --sos-col COL and/or --clipscore-cols SUR,SEM: there is nothing to validate");
    }
    let meta = read_metadata_csv(&args.labels)?;
    let language = meta.require_column("language")?;
    let raters = args.raters.iter().map(|r| meta.require_column(r)).collect::<Result<Vec<_>, _>>()?;
    let sos = args.sos_col.as_deref().map(|col| meta.numbers(col)).transpose()?;
    let cosines = match args.clipscore_cols.as_slice() {
        [sur, sem] => Some((meta.numbers(sur)?, meta.numbers(sem)?)),
        _ => None,
    };
    let spec = args.ci.spec();
    let rows = validation_rows(
        language,
        &raters,
        sos.as_deref(),
        cosines.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice())),
        |name, subset, predicted, human| match &spec {
            Some(spec) => intervals(spec, name, subset, predicted, human),
            None => [None; 3],
        },
    );
    let columns = ValidationColumns { ci: args.ci.ci.is_some() };
    write_atomic(&args.out, |w| culturelens_results::write::<Validation>(w, &columns, &rows))?;
    let mut provenance = Provenance::new("validate", args);
    provenance.input(&args.labels)?;
    args.ci.record_in(&mut provenance, "images with a human label, within each (method, subset)");
    provenance.write_beside(&args.out)?;
    eprintln!("wrote {} validation rows to {}", rows.len(), args.out.display());
    Ok(())
}
