//! `culturelens sos`: Surface-over-Semantics scores (SoS paper Eq. 1) of an embedding table,
//! and `culturelens demo`: the same on the built-in synthetic demo table.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use culturelens_compute::device::{Processor, upload_rows};
use culturelens_compute::sos::{
    Blocking, Pooling, SosColumns, SosLayout, SosReport, SosValues, sos_packed, sos_report, unpack,
};
use culturelens_metrics::demo::demo_table;
use culturelens_results::sos::{self as schema, DEMO_JOINT, JointColumns, PerImageColumns, PerImageScore};
use culturelens_table::{EmbeddingTable, Matrix, Metadata, load_table, save_table, write_atomic};

use crate::device::{DeviceChoice, FloatType, select_device};
use crate::input::load_bundle_table;
use crate::provenance::Provenance;
use crate::timing::Stages;

const CONVENTIONS: &str = "\
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
must be finite with non-zero norm. Outputs are written atomically.";

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
    /// Rows per block of the tensor graph (scores do not depend on it beyond f32 rounding; the
    /// fused GPU kernels ignore it) [default: about 1 MiB of f32 rows on cpu].
    #[arg(long, value_name = "ROWS", value_parser = clap::value_parser!(u64).range(1..))]
    pub block_rows: Option<u64>,
    /// Print the wall time of each stage (load, device init, score, write) to stderr.
    #[arg(long)]
    pub timings: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PoolArg {
    All,
    PerModel,
}

crate::provenance::value_enum!(PoolArg);

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
    let table = match (&args.bundle, &args.embeddings) {
        (Some(dir), _) => load_bundle_table(dir)?,
        (None, Some(embeddings)) => load_table(embeddings, args.meta.as_deref())?,
        (None, None) => anyhow::bail!("give --embeddings or --bundle"),
    };
    let images = table.meta.column(schema::IMAGE).map(<[String]>::to_vec);
    clock.lap("load");
    let device = select_device(args.device)?;
    clock.lap("device init");
    let blocking = match args.block_rows {
        Some(rows) => Blocking::Rows(rows as usize),
        None => Blocking::Default(args.device.processor()),
    };
    let processor = args.device.processor();
    let (layout, values, report) =
        score_table(table, args.pool.into(), &device, processor, blocking, &mut clock)?;
    write_joint_csv(&args.out, &report)?;
    if let Some(path) = &args.per_image {
        write_per_image_csv(path, &layout, &values, images.as_deref())?;
    }
    if let Some(path) = &args.report {
        write_atomic(path, |w| schema::write_report(w, &report))?;
    }
    let mut provenance = Provenance::new("sos", args);
    for path in [&args.bundle, &args.embeddings, &args.meta].into_iter().flatten() {
        provenance.input(path)?;
    }
    provenance.device(args.device, FloatType::F32).write_beside(&args.out)?;
    clock.lap("write");
    print_summary(&layout, &report, &mut std::io::stdout().lock())?;
    Ok(())
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
    let (layout, _, report) =
        score_table(table.clone(), Pooling::All, &device, processor, blocking, &mut Stages::new(false))?;
    println!("culturelens demo: SYNTHETIC demo data (planted tendencies), not results from any model\n");
    print_summary(&layout, &report, &mut std::io::stdout().lock())?;
    if let Some(dir) = &args.write {
        std::fs::create_dir_all(dir)?;
        save_table(&table, &dir.join("embeddings.npy"), Some(&dir.join("meta.csv")))?;
        write_joint_csv(&dir.join(DEMO_JOINT), &report)?;
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
) -> Result<(SosLayout, SosValues, SosReport)> {
    let EmbeddingTable { embeddings, meta } = table;
    let (dim, meta) = (embeddings.cols(), &meta);
    let cols = SosColumns {
        model: meta.require_nonempty_column("model")?,
        language: meta.require_nonempty_column("language")?,
        culture: meta.require_nonempty_column("culture")?,
        layer: meta.column("layer").map(|_| meta.require_nonempty_column("layer")).transpose()?,
        person: meta.column("person").map(|_| meta.require_nonempty_column("person")).transpose()?,
    };
    let layout = SosLayout::new(cols, pooling).context("SoS cannot be computed for this table")?;
    clock.lap("layout");
    let blocks = upload_rows(embeddings.into_data(), dim, processor.upload_rows(dim), device);
    device.sync().map_err(|e| anyhow::anyhow!("the table could not be uploaded: {e:?}"))?;
    clock.lap("upload");
    let packed = sos_packed(&blocks, None, &layout, blocking.chunk_rows(dim)).into_data();
    let values = unpack(packed, &layout).context("SoS cannot be computed for this table")?;
    clock.lap("device");
    let report = sos_report(&layout, &values.per_image);
    clock.lap("report");
    Ok((layout, values, report))
}

/// Writes the joint scores (`culturelens_results::sos::Joint`).
pub fn write_joint_csv(path: &Path, report: &SosReport) -> Result<()> {
    let columns = JointColumns { layer: report.joint.first().is_some_and(|j| j.layer.is_some()) };
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
    assert_eq!(layout.cell.len(), values.per_image.len(), "one score per row");
    let columns =
        PerImageColumns { image: images.is_some(), layer: layout.has_layer, person: layout.person.is_some() };
    let rows = layout.cell.iter().zip(&values.per_image).enumerate().map(|(row, (cell, score))| {
        let c = &layout.cells[*cell as usize];
        PerImageScore {
            row,
            image: images.map(|i| i[row].clone()),
            model: c.model.clone(),
            layer: c.layer.clone(),
            language: c.language.clone(),
            culture: c.culture.clone(),
            person: layout.person.as_ref().map(|p| p[row].clone()),
            sos: *score,
        }
    });
    write_atomic(path, |w| culturelens_results::write::<schema::PerImage>(w, &columns, rows))?;
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
