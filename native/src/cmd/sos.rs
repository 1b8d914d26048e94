//! `culturelens sos`: Surface-over-Semantics scores (SoS paper Eq. 1) of an embedding table,
//! and `culturelens demo`: the same on the built-in synthetic demo table.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_compute::device::Processor;
use culturelens_compute::sos::{
    Blocking, Comparison, Factor, Pooling, ScoreError, Scored, SosCiMode, SosColumns, SosLayout, SosReport,
    SosValues, paired_differences, per_image_scores, score_rows,
};
use culturelens_metrics::bootstrap::CiSpec;
use culturelens_metrics::demo::demo_table;
use culturelens_metrics::permutation::DEFAULT_PERMUTATIONS;
use culturelens_results::sos::{
    self as schema, ComparisonColumns, DEMO_JOINT, JointColumns, PerImageColumns,
};
use culturelens_table::{EmbeddingTable, Matrix, Metadata, load_table, save_table, write_atomic};
use serde_json::json;

use crate::device::{DeviceChoice, FloatType, select_device};
use crate::input::load_bundle_table;
use crate::provenance::{InputHashes, Provenance, value_enum};
use crate::timing::Stages;
use crate::uncertainty::CiArgs;

const CONVENTIONS: &str = concat!(
    "\
Computes the Surface-over-Semantics score of the SoS paper, Eq. (1):

    SoS(o) = cos(sem_c, e_o) - cos(sur_l, e_o)        in [-1, 1]

Negative: the output looks like other outputs prompted in the same language (surface);
positive: like other outputs that target the same culture (semantics).

Conventions:
  * Embeddings are L2-normalised first (any positive scaling of a row changes nothing).
  * sur_l = mean of all outputs prompted in language l; sem_c = mean of all outputs that
    target culture c. The mean includes the output itself.
  * --pool all (default, paper 4.1): references pooled across all models.
    --pool per-model: references computed per model.
  * With a `layer` column, references are computed per (model, layer) (paper 5.1) and the
    output gets a `layer` column after `model`.
  * Joint SoS of a (model, language, culture) cell = mean over its outputs (templates x person
    terms x seeds). OUT.csv: model,language,culture,n,sos (full f64 precision).
  * Per-model summary (Fig. 2): mean, median, quartiles, min, max of the per-output scores.
  * Strong surface tendency (5.2): a model-language pair whose median per-output SoS is at or
    below the 25th percentile of the medians of all model-language pairs.
  * Language x language Pearson correlation of joint SoS over (model, culture) cells present
    for both languages (Fig. 5); undefined (null) for < 2 shared cells or zero variance.
  * Per-person-term means (App. C.4) when a `person` column exists.
  * Quantiles interpolate linearly between order statistics (numpy's default).

Input: --embeddings E.npy --meta M.csv (float32/float16 N x d, C order; CSV with a header) or
--embeddings T.parquet (list column `embedding` plus metadata columns) or --bundle DIR (a
bundle written by `culturelens bundle`/`demo-bundle`; checksums are verified). Required metadata
columns: model, language, culture; optional: layer, person. Values must be non-empty; rows
must be finite with non-zero norm. Outputs are written atomically.

Unit resampled by --ci: the outputs of each (model, [layer,] language, culture) cell, with
replacement, every cell keeping its size (the joint score is the mean over them); with
--cluster COLS, the groups of outputs of a cell with equal COLS values (e.g. template,person when
several seeds share a prompt) instead, the statistic then being the ratio mean. --ci-mode fast
(default) holds the references at the full-table estimate and resamples the per-output scores
(B resamples cost B x N additions); exact recomputes sur_l and sem_c from every resample (each
resample costs about one point estimate). OUT.csv gets sos_lo,sos_hi; the report's joint entries
sos_ci; the mode is printed and recorded in the provenance.

Comparisons (--compare-models A,B or --compare-languages A,B, with --ci, --pair-by COLS and
--compare-out FILE): per cell A and B share (same language and culture for models, same model and
culture for languages; same layer), the outputs are paired by their --pair-by values and
diff = mean(SoS_A - SoS_B) over the pairs (references of the full table), its bootstrap interval
over the pairs, the two-sided sign-flip permutation p-value of mean(d) = 0 (all 2^n sign patterns
when 2^n <= --permutations, else that many seeded random ones; as scipy.stats.permutation_test)
and p_holm, Holm's step-down adjustment over all compared cells.

",
    crate::uncertainty::ci_help!()
);

/// Arguments of `culturelens sos`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Surface-over-Semantics scores of an embedding table (SoS paper Eq. 1)", long_about = CONVENTIONS)]
pub struct SosArgs {
    /// Embeddings: N x d `.npy` (float32/float16) with --meta, or a `.parquet` table.
    #[arg(long, value_name = "FILE", required_unless_present = "bundle")]
    pub embeddings: Option<PathBuf>,
    /// A bundle directory (`culturelens bundle`, web/BUNDLE.md) instead of --embeddings/--meta.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["embeddings", "meta"])]
    pub bundle: Option<PathBuf>,
    /// Metadata CSV, one row per embedding (header row; columns model, language, culture, ...).
    #[arg(long, value_name = "FILE")]
    pub meta: Option<PathBuf>,
    /// Output CSV of joint scores: model,language,culture,n,sos.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// How reference vectors are pooled across models.
    #[arg(long, value_enum, default_value_t = PoolArg::All)]
    pub pool: PoolArg,
    /// Also write every output's score (row order of the input) to this CSV.
    #[arg(long, value_name = "FILE")]
    pub per_image: Option<PathBuf>,
    /// Also write the full report (summaries, medians and flags, correlations, person means) as JSON.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Backend that runs the tensor work.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
    /// Rows per block of the tensor graph, which a CPU then runs instead of its fused passes
    /// (scores do not depend on it beyond f32 rounding; the fused GPU kernels ignore it).
    #[arg(long, value_name = "ROWS", value_parser = clap::value_parser!(u64).range(1..))]
    pub block_rows: Option<u64>,
    /// Print the wall time of each stage (load, device init, score, write) to stderr.
    #[arg(long)]
    pub timings: bool,
    #[command(flatten)]
    #[serde(flatten)]
    pub ci: CiArgs,
    /// With --ci: hold the references at the full-table estimate (fast) or recompute them from
    /// every resample (exact).
    #[arg(long, value_enum, default_value_t = CiModeArg::Fast)]
    pub ci_mode: CiModeArg,
    /// With --ci: resample clusters of outputs with equal values in these metadata columns (e.g.
    /// template,person when seeds share a prompt) instead of single outputs.
    #[arg(long, value_delimiter = ',', value_name = "COLS", requires = "ci")]
    pub cluster: Vec<String>,
    /// Paired differences of two models per (language, culture) cell, A - B.
    #[arg(long, value_delimiter = ',', value_name = "A,B", conflicts_with = "compare_languages",
          requires_all = ["ci", "pair_by", "compare_out"])]
    pub compare_models: Vec<String>,
    /// Paired differences of two languages per (model, culture) cell, A - B.
    #[arg(long, value_delimiter = ',', value_name = "A,B", requires_all = ["ci", "pair_by", "compare_out"])]
    pub compare_languages: Vec<String>,
    /// Metadata columns that pair the outputs of two compared cells (e.g. template,person,seed).
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub pair_by: Vec<String>,
    /// Output CSV of the comparison: one row per compared cell.
    #[arg(long, value_name = "FILE")]
    pub compare_out: Option<PathBuf>,
    /// Sign patterns of the comparison's permutation test (all 2^n when 2^n is not larger).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PERMUTATIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub permutations: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CiModeArg {
    Fast,
    Exact,
}

value_enum!(CiModeArg);

impl From<CiModeArg> for SosCiMode {
    fn from(m: CiModeArg) -> Self {
        match m {
            CiModeArg::Fast => SosCiMode::Fast,
            CiModeArg::Exact => SosCiMode::Exact,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PoolArg {
    All,
    PerModel,
}

value_enum!(PoolArg);

impl From<PoolArg> for Pooling {
    fn from(p: PoolArg) -> Self {
        match p {
            PoolArg::All => Pooling::All,
            PoolArg::PerModel => Pooling::PerModel,
        }
    }
}

pub fn run(args: &SosArgs) -> Result<()> {
    let mut clock = Stages::new(args.timings);
    let compare = comparison(args)?;
    // The inputs' sha256 (the provenance's) on threads of their own, beside the load and the
    // scoring: 772 MB take about 0.4 s to hash, as long as the rest of the command.
    let inputs = InputHashes::start(
        [&args.bundle, &args.embeddings, &args.meta].into_iter().flatten().map(PathBuf::as_path),
    );
    let table = match (&args.bundle, &args.embeddings) {
        (Some(dir), _) => load_bundle_table(dir)?,
        (None, Some(embeddings)) => {
            let table = load_table(embeddings, args.meta.as_deref())?;
            if table.meta.names().is_empty() {
                anyhow::bail!(
                    "{}: the table has no metadata columns; give --meta M.csv with the columns {}",
                    embeddings.display(),
                    "model, language, culture (one row per embedding)"
                );
            }
            table
        }
        (None, None) => anyhow::bail!("give --embeddings or --bundle"),
    };
    let encoders = crate::provenance::encoders(&table.meta);
    let cluster = key_columns(&table.meta, &args.cluster)?;
    let pair_key = if compare.is_some() { key_columns(&table.meta, &args.pair_by)? } else { None };
    let images = table.meta.column(schema::IMAGE).map(<[String]>::to_vec);
    clock.lap("load");
    let device = select_device(args.device)?;
    clock.lap("device init");
    let blocking = match args.block_rows {
        Some(rows) => Blocking::Rows(rows as usize),
        None => Blocking::Default(args.device.processor()),
    };
    let processor = args.device.processor();
    let dim = table.dim();
    let mut scored = score_table(table, args.pool.into(), &device, processor, blocking, &mut clock)?;
    let spec = args.ci.spec();
    if let Some(spec) = spec {
        let keys: Option<Vec<&[String]>> = cluster.as_ref().map(|k| k.iter().map(Vec::as_slice).collect());
        scored
            .add_intervals(keys.as_deref(), args.ci_mode.into(), spec, blocking.chunk_rows(dim))
            .context("SoS cannot be computed on a bootstrap resample")?;
        clock.lap("bootstrap");
    }
    let Scored { layout, values, report, blocks } = scored;
    drop(blocks);
    // Every result is computed before the first file is written: a refused comparison leaves none.
    let differences = match (compare, &pair_key, spec) {
        (Some((factor, a, b)), Some(keys), Some(spec)) => {
            let pair_key = joined(keys, layout.len());
            let comparison =
                Comparison { factor, a, b, pair_key: &pair_key, permutations: args.permutations as usize };
            let rows = paired_differences(&layout, &values.per_image, comparison, spec)?;
            clock.lap("compare");
            Some((ComparisonColumns { factor, layer: layout.has_layer }, rows))
        }
        _ => None,
    };
    write_joint_csv(&args.out, &report, spec.is_some())?;
    if let Some(path) = &args.per_image {
        write_per_image_csv(path, &layout, &values, images.as_deref())?;
    }
    if let Some(path) = &args.report {
        write_atomic(path, |w| schema::write_report(w, &report))?;
    }
    if let (Some((columns, rows)), Some(path)) = (&differences, &args.compare_out) {
        write_atomic(path, |w| culturelens_results::write::<schema::Comparison>(w, columns, rows))?;
    }
    let mut provenance = Provenance::new("sos", args);
    inputs.record(&mut provenance)?;
    provenance.uncertainty(uncertainty_record(args)).encoders(&encoders);
    provenance.device(args.device, FloatType::F32).write_beside(&args.out)?;
    if let Some(path) = args.compare_out.as_ref().filter(|_| differences.is_some()) {
        provenance.write_beside(path)?;
    }
    clock.lap("write");
    let out = &mut std::io::stdout().lock();
    print_summary(&layout, &report, out)?;
    if let Some(spec) = spec {
        print_intervals(args, spec, &report, out)?;
    }
    if let Some((_, rows)) = &differences {
        let significant = rows.iter().filter(|r| r.p_holm < 0.05).count();
        writeln!(
            out,
            "\nPaired differences {} - {}: {} cells, {significant} with Holm-adjusted p < 0.05 ({})",
            rows[0].a,
            rows[0].b,
            rows.len(),
            args.compare_out.as_ref().expect("written").display()
        )?;
    }
    Ok(())
}

/// The comparison asked for: the factor and the two values (`A,B`), or `None`.
fn comparison(args: &SosArgs) -> Result<Option<(Factor, &str, &str)>> {
    let (factor, flag, values) = match (&args.compare_models[..], &args.compare_languages[..]) {
        ([], []) => return Ok(None),
        (v, []) => (Factor::Models, "--compare-models", v),
        (_, v) => (Factor::Languages, "--compare-languages", v),
    };
    match values {
        [a, b] if !a.trim().is_empty() && !b.trim().is_empty() => Ok(Some((factor, a.as_str(), b.as_str()))),
        _ => bail!("{flag} takes two values, A,B (got {})", values.join(",")),
    }
}

/// The values of the metadata columns `names` (non-empty values), `None` for no names.
fn key_columns(meta: &Metadata, names: &[String]) -> Result<Option<Vec<Vec<String>>>> {
    if names.is_empty() {
        return Ok(None);
    }
    let columns = names.iter().map(|n| meta.require_nonempty_column(n).map(<[String]>::to_vec));
    Ok(Some(columns.collect::<Result<_, _>>()?))
}

/// One key per row: the values of `columns` joined by U+001F.
fn joined(columns: &[Vec<String>], rows: usize) -> Vec<String> {
    (0..rows).map(|r| columns.iter().map(|c| c[r].as_str()).collect::<Vec<_>>().join("\u{1f}")).collect()
}

/// What `--ci` resampled and how, for the provenance.
fn uncertainty_record(args: &SosArgs) -> Option<serde_json::Value> {
    let unit = if args.cluster.is_empty() {
        "outputs within (model, [layer,] language, culture) cells".to_string()
    } else {
        format!(
            "clusters of outputs with equal {} within (model, [layer,] language, culture) cells",
            args.cluster.join(",")
        )
    };
    let mode = SosCiMode::from(args.ci_mode);
    let references = match mode {
        SosCiMode::Fast => "held at the full-table estimate",
        SosCiMode::Exact => "recomputed from every resample",
    };
    let mut extra = json!({"mode": mode.name(), "references": references});
    if !args.compare_models.is_empty() || !args.compare_languages.is_empty() {
        extra["comparison"] = json!({
            "unit": format!("pairs of outputs with equal {}", args.pair_by.join(",")),
            "references": "held at the full-table estimate",
            "test": "two-sided sign-flip permutation test of the mean difference, Holm-adjusted over cells",
            "permutations": args.permutations,
        });
    }
    args.ci.record(&unit, extra)
}

/// States the interval settings and the widest intervals.
fn print_intervals(
    args: &SosArgs,
    spec: CiSpec,
    report: &SosReport,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mode = SosCiMode::from(args.ci_mode);
    let unit = if args.cluster.is_empty() {
        "outputs".to_string()
    } else {
        format!("clusters ({})", args.cluster.join(","))
    };
    let references = match mode {
        SosCiMode::Fast => "references fixed at the full-table estimate",
        SosCiMode::Exact => "references recomputed per resample",
    };
    writeln!(
        out,
        "\nConfidence intervals: {}% {} bootstrap, {} resamples of {unit} within cells, seed {}, {} mode ({references})",
        spec.level * 100.0,
        spec.method.name(),
        spec.resamples,
        spec.seed,
        mode.name(),
    )?;
    let undefined = report.joint.iter().filter(|j| j.sos_ci.is_none()).count();
    let covers_zero = report.joint.iter().filter(|j| j.sos_ci.is_some_and(|c| c.covers(0.0))).count();
    writeln!(
        out,
        "  {} cells: {covers_zero} intervals cover 0, {undefined} undefined (written empty)",
        report.joint.len()
    )
}

/// Arguments of `culturelens demo`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(
    about = "Run SoS on the built-in synthetic demo table (planted tendencies; not real data)",
    long_about = "Builds the deterministic synthetic demo table (3 models x 8 languages x 10 cultures x 3 \
templates x 3 person terms = 2,160 outputs, 64-d embeddings with planted surface/semantic tendencies; see \
culturelens_metrics::demo), scores it with SoS and prints the summary. It is synthetic demo data, not results \
from any model."
)]
pub struct DemoArgs {
    /// Also write the demo table (embeddings.npy + meta.csv) and its joint scores (sos.csv) here.
    #[arg(long, value_name = "DIR")]
    pub write: Option<PathBuf>,
    /// Backend that runs the tensor work.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
}

/// The demo table as an [`EmbeddingTable`].
pub fn demo_embedding_table() -> EmbeddingTable {
    let demo = demo_table();
    let rows = demo.len();
    let meta = Metadata::from_columns(None, demo.columns).expect("demo columns are well-formed");
    EmbeddingTable::new(Matrix::new(rows, demo.dim, demo.embeddings), meta)
}

pub fn run_demo(args: &DemoArgs) -> Result<()> {
    let table = demo_embedding_table();
    let device = select_device(args.device)?;
    let processor = args.device.processor();
    let blocking = Blocking::Default(processor);
    let Scored { layout, report, .. } =
        score_table(table.clone(), Pooling::All, &device, processor, blocking, &mut Stages::new(false))?;
    println!("culturelens demo: SYNTHETIC demo data (planted tendencies), not results from any model\n");
    print_summary(&layout, &report, &mut std::io::stdout().lock())?;
    if let Some(dir) = &args.write {
        culturelens_files::create_dir_all(dir)?;
        save_table(&table, &dir.join("embeddings.npy"), Some(&dir.join("meta.csv")))?;
        write_joint_csv(&dir.join(DEMO_JOINT), &report, false)?;
        Provenance::new("demo", args).device(args.device, FloatType::F32).write_for_dir(dir)?;
        println!("\nwrote {}/{{embeddings.npy, meta.csv, {DEMO_JOINT}}}", dir.display());
    }
    Ok(())
}

/// Validates the metadata columns SoS needs and scores the table on `device` (a `processor`) in
/// row blocks of `blocking`; the embeddings move to a CPU device without a copy and to a GPU in
/// blocks its buffers take ([`Processor::upload_rows`]). `clock` laps the stages
/// `layout` (group ids on the host), `upload` (the table onto the device, waited for), `device`
/// (the device work and the read-back of its result) and `report` (the f64 aggregates).
pub fn score_table(
    table: EmbeddingTable,
    pooling: Pooling,
    device: &burn::tensor::Device,
    processor: Processor,
    blocking: Blocking,
    clock: &mut Stages,
) -> Result<Scored> {
    let EmbeddingTable { embeddings, meta } = table;
    let (dim, meta) = (embeddings.cols(), &meta);
    let cols = SosColumns {
        model: meta.require_nonempty_column("model")?,
        language: meta.require_nonempty_column("language")?,
        culture: meta.require_nonempty_column("culture")?,
        layer: meta.column("layer").map(|_| meta.require_nonempty_column("layer")).transpose()?,
        person: meta.column("person").map(|_| meta.require_nonempty_column("person")).transpose()?,
    };
    let mut lap = |stage: &'static str| clock.lap(stage);
    score_rows(embeddings.into_data(), dim, cols, pooling, device, processor, blocking, &mut lap).map_err(
        |e| match e {
            ScoreError::Sos(e) => anyhow::Error::from(e).context("SoS cannot be computed for this table"),
            e @ ScoreError::Upload(_) => anyhow::Error::from(e),
        },
    )
}

/// Writes the joint scores (`culturelens_results::sos::Joint`), with `sos_lo`, `sos_hi` when `ci`.
pub fn write_joint_csv(path: &Path, report: &SosReport, ci: bool) -> Result<()> {
    let columns = JointColumns { layer: report.joint.first().is_some_and(|j| j.layer.is_some()), ci };
    write_atomic(path, |w| culturelens_results::write::<schema::Joint>(w, &columns, &report.joint))?;
    Ok(())
}

/// Writes every output's score in row order (`culturelens_results::sos::PerImage`), with the
/// input's `image` cells when it has that column.
fn write_per_image_csv(
    path: &Path,
    layout: &SosLayout,
    values: &SosValues,
    images: Option<&[String]>,
) -> Result<()> {
    let columns =
        PerImageColumns { image: images.is_some(), layer: layout.has_layer, person: layout.person.is_some() };
    let rows = per_image_scores(layout, values, images);
    write_atomic(path, |w| culturelens_results::write::<schema::PerImage>(w, &columns, &rows))?;
    Ok(())
}

/// Prints the per-model distribution table and the strong-surface-tendency flags.
pub fn print_summary(layout: &SosLayout, report: &SosReport, out: &mut dyn Write) -> std::io::Result<()> {
    let pooling = match (layout.has_layer, layout.pooling) {
        (true, _) => "per (model, layer)",
        (false, Pooling::All) => "pooled over all models",
        (false, Pooling::PerModel) => "per model",
    };
    writeln!(
        out,
        "SoS per model ({} outputs, {} cells; references {pooling})",
        layout.len(),
        report.joint.len()
    )?;
    let width = report.per_model.keys().map(String::len).max().unwrap_or(5).max(5);
    writeln!(
        out,
        "{:<width$} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "model", "n", "mean", "median", "q1", "q3", "min", "max"
    )?;
    for (model, s) in &report.per_model {
        writeln!(
            out,
            "{model:<width$} {:>7} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>9.4}",
            s.n, s.mean, s.median, s.q1, s.q3, s.min, s.max
        )?;
    }
    writeln!(
        out,
        "\nStrong surface tendency (median <= P25 of model-language medians = {:.4}):",
        report.strong_surface_threshold
    )?;
    for model in report.per_model.keys() {
        let flagged: Vec<String> = report
            .language_medians
            .iter()
            .filter(|m| &m.model == model && m.strong_surface)
            .map(|m| match &m.layer {
                Some(layer) => format!("{} (layer {layer})", m.language),
                None => m.language.clone(),
            })
            .collect();
        let list = if flagged.is_empty() { "-".to_string() } else { flagged.join(", ") };
        writeln!(out, "  {model:<width$} {list}")?;
    }
    Ok(())
}
