//! `culturelens cultext2i`: the automatic metrics of the CulText2I paper (§6.1, Table 2) from image
//! and text embedding tables: NA, DP, CD per image group, and in the report the NA confusion
//! matrix, the CCS language × language matrices and XNA/XDP from imported VQA answers. The
//! command's core is `culturelens_compute::cultext2i` (also the Python `culturelens.cultext2i`),
//! its per-image formulas `culturelens_metrics::cultext2i`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use culturelens_compute::cultext2i::{Cultext2i, Options, cultext2i};
use culturelens_results::cultext2i::{self as schema, Groups};
use culturelens_table::{load_table, read_metadata_csv, write_atomic};

use crate::device::{DeviceChoice, FloatType, select_device};
use crate::embeddings::reject_zero_rows;
use crate::provenance::Provenance;
use crate::uncertainty::CiArgs;

const CONVENTIONS: &str = "\
CulText2I automatic metrics (Sec. 6.1, Table 2). Embeddings are L2-normalised first (cosine).
Per image I with nationality n, over the k `nationality` texts X_1..X_k:
  NA(I)  = softmax_k(T * cos(I, X_k))[n]   (T = --temperature: 1 = the paper's literal
           definition, 100 = CLIP's logit scale); the argmax (first on ties, in text-table
           order) is the predicted nationality: na_acc and the report's confusion matrix
  DP_d(I) = cos(I, X_d) for every `dimension` text d (column dp_<label>)
  CD(I)  = 1 - cos(I, X_c), X_c the English (language `en`) `concept` text of I's concept
OUT.csv: model,language,concept,template,n,na,na_acc,cd,dp_<label>... one row per group, sorted,
means over the group's images.
Report (--report): per model the NA confusion matrix (rows = true, columns = predicted, in the
nationality texts' order) and accuracy; CCS(l1, l2) per (model, template) = the mean over concepts
of the mean cosine over all image pairs (one image in l1, one in l2; for l1 = l2 two different
images) of one (model, concept, template); null where no concept has such a pair.
VQA answers (--vqa): CSV with model,language,concept,template,question,answer (+ nationality
for XNA rows); question `nationality` (XNA) or `d0|d1` (XDP, e.g. modern|ancient). Answers are
compared trimmed and lower-cased. Per image set (model, language, concept, template, question)
the majority answer is the one of strictly more than half of its rows, else \"can't tell\".
XNA per (model, language, template) = share of sets whose majority is the set's nationality;
XDP = (#sets d0 - #sets d1) / #sets.
Unit resampled by --ci: the images of each (model, language, concept, template) group (every
column of OUT.csv is a mean over them), drawn with replacement, one draw shared by all the
group's metrics; each estimate gets <metric>_lo,<metric>_hi right after it. The group's stream is
seeded with --seed XOR FNV-1a(\"cultext2i\", model, language, concept, template).";

/// Arguments of `culturelens cultext2i`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "CulText2I metrics: NA, DP, CD, CCS, XNA/XDP (CulText2I Sec. 6.1, Table 2)", long_about = CONVENTIONS)]
pub struct Cultext2iArgs {
    /// Image embeddings (.npy, .parquet).
    #[arg(long, value_name = "FILE")]
    pub image_embeddings: PathBuf,
    /// Image metadata CSV: model,language,concept,template,nationality.
    #[arg(long, value_name = "FILE")]
    pub image_meta: PathBuf,
    /// Text embeddings (.npy, .parquet).
    #[arg(long, value_name = "FILE")]
    pub text_embeddings: PathBuf,
    /// Text metadata CSV: kind (nationality|dimension|concept), label, language (concept rows).
    #[arg(long, value_name = "FILE")]
    pub text_meta: PathBuf,
    /// Output CSV (one row per model, language, concept, template).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Softmax temperature T of NA (1 = the paper; 100 = CLIP's logit scale).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    /// JSON report: NA confusion matrices, CCS matrices, XNA/XDP.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// VQA answers CSV for XNA/XDP (needs --report).
    #[arg(long, value_name = "FILE", requires = "report")]
    pub vqa: Option<PathBuf>,
    /// Backend of the cosine matrices.
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceChoice,
    #[command(flatten)]
    pub ci: CiArgs,
}

pub fn run(args: &Cultext2iArgs) -> Result<()> {
    if !(args.temperature.is_finite() && args.temperature > 0.0) {
        bail!("--temperature must be a positive number (got {})", args.temperature);
    }
    let images = load_table(&args.image_embeddings, Some(&args.image_meta))?;
    let texts = load_table(&args.text_embeddings, Some(&args.text_meta))?;
    if images.dim() != texts.dim() {
        bail!(
            "{} has {}-dimensional embeddings but {} has {}: image and text embeddings must come from one model",
            args.image_embeddings.display(),
            images.dim(),
            args.text_embeddings.display(),
            texts.dim()
        );
    }
    reject_zero_rows(&images)?;
    reject_zero_rows(&texts)?;
    let vqa = args.vqa.as_deref().map(read_metadata_csv).transpose()?;
    let device = select_device(args.device)?;
    let options = Options {
        temperature: args.temperature,
        ci: args.ci.spec(),
        report: args.report.as_ref().map(|_| vqa.as_ref()),
    };
    let Cultext2i { columns, rows, report } = cultext2i(&images, &texts, &options, &device)?;
    if let (Some(path), Some(report)) = (&args.report, report) {
        write_atomic(path, |w| schema::write_report(w, &report))?;
    }
    write_atomic(&args.out, |w| culturelens_results::write::<Groups>(w, &columns, &rows))?;
    let mut provenance = Provenance::new("cultext2i", args);
    for path in [&args.image_embeddings, &args.image_meta, &args.text_embeddings, &args.text_meta]
        .into_iter()
        .chain(&args.vqa)
    {
        provenance.input(path)?;
    }
    args.ci.record_in(&mut provenance, "images within each (model, language, concept, template)");
    provenance.device(args.device, FloatType::F32).write_beside(&args.out)?;
    eprintln!("wrote {} (model, language, concept, template) rows to {}", rows.len(), args.out.display());
    Ok(())
}
