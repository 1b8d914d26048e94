//! `culturelens embed` and `culturelens embed-text`: image and prompt embedding tables from a
//! weights folder (transformers `save_pretrained` layout, OpenCLIP hub layout, or one written by
//! `import-weights`), with the models of `culturelens-models` on the chosen device. Images are
//! decoded on all cores ahead of the model; on the CPU, batches run side by side, one per thread.
//!
//! Rows follow the sorted file names of `--images DIR` (png/jpg/jpeg/webp) or the row order of a
//! manifest CSV (column `image`, paths relative to the manifest; every column is carried into
//! the output). Finished rows are appended to `OUT.resume` as they are computed
//! (`crate::work`: shards, resume log and progress), so an interrupted run picks up where it
//! stopped; the table itself is written atomically at the end. A file that cannot be read or
//! decoded is reported at the end while the others go on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Result, bail};
use culturelens_files::sha256_hex;
use culturelens_models::Towers;
use culturelens_table::Metadata;

use crate::encode::{ModelArgs, check_batch, embed_images, embed_token_ids};
use crate::input::{ImageList, read_prompts};
use crate::output::{meta_out_path, refuse_column, with_constant_column, write_table};
use crate::provenance::{ENCODER_COLUMN, as_text_opt, value_name};
use crate::work::part::{Input, Part};
use crate::work::progress::Progress;
use crate::work::resume::{ResumeLog, RunKey, canonical, split_finished};
use crate::work::shard::Shard;

/// The output table: shared by `embed` and `embed-text`.
#[derive(clap::Args, Debug, serde::Serialize)]
pub struct OutputArgs {
    /// Output table: `.npy` (with metadata in `--meta-out`, default OUT with `.csv`) or `.parquet`.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Metadata CSV for a `.npy` output (default: the output path with extension `.csv`).
    #[arg(long, value_name = "FILE")]
    pub meta_out: Option<PathBuf>,
    /// The table's `encoder` column, naming the encoder that made the embeddings (default: the
    /// --model id, else the hub id `_name_or_path` in the folder's config.json, else the
    /// --weights folder's name).
    #[arg(long, value_name = "NAME", value_parser = crate::model_name::parse_name)]
    pub encoder_name: Option<String>,
}

impl OutputArgs {
    /// `meta` with the `encoder` column: `--encoder-name`, else the default name of the encoder
    /// in `weights` (`crate::model_name`).
    fn with_encoder(&self, meta: &Metadata, model: &ModelArgs, weights: &Path) -> Result<Metadata> {
        let name = match &self.encoder_name {
            Some(name) => name.clone(),
            None => crate::model_name::default_name(model.model.as_deref(), weights, "config.json"),
        };
        with_constant_column(meta, ENCODER_COLUMN, &name)
    }
}

/// Arguments of `culturelens embed`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(
    about = "Embed images with CLIP, OpenCLIP, SigLIP, DINOv2 or EfficientNet-Lite into an embedding table"
)]
pub struct EmbedArgs {
    /// A folder of images (png/jpg/jpeg/webp, rows in sorted file-name order) or a manifest CSV
    /// with an `image` column (paths relative to the CSV); manifest columns are carried over.
    #[arg(long, value_name = "DIR|CSV")]
    pub images: PathBuf,
    #[command(flatten)]
    #[serde(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,
    /// Images per forward pass.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Embed only shard K of N (1-based; contiguous row ranges, so the shards' tables
    /// concatenated in order give the whole table).
    #[arg(long, value_name = "K/N", value_parser = Shard::parse)]
    #[serde(serialize_with = "as_text_opt")]
    pub shard: Option<Shard>,
    /// Write the table without the images that failed (they are still listed) instead of
    /// failing the run.
    #[arg(long)]
    pub skip_bad: bool,
}

/// Arguments of `culturelens embed-text`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Embed prompts with the text tower of CLIP or SigLIP into an embedding table")]
pub struct EmbedTextArgs {
    /// A CSV with the prompts in `--column` (every column is carried over), or a `.txt` file with
    /// one prompt per line.
    #[arg(long, value_name = "CSV|TXT")]
    pub prompts: PathBuf,
    /// Column of the CSV that holds the prompts.
    #[arg(long, default_value = "prompt")]
    pub column: String,
    #[command(flatten)]
    #[serde(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,
    /// Prompts per forward pass.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
}

pub fn run(args: &EmbedArgs) -> Result<()> {
    // Read: the image list, this shard's rows, the model, the rows a previous run finished.
    check_batch(args.batch)?;
    let images = ImageList::read(&args.images)?;
    refuse_column(&images.meta, ENCODER_COLUMN)?;
    let rows: Vec<usize> = Shard::items(args.shard, images.paths.len()).collect();
    let (encoder, weights) = args.model.load(Towers::Image)?;
    let dim = encoder.model.image_dim();
    let key = RunKey::Embed { weights: canonical(&weights), dim, precision: args.model.precision };
    let (mut log, finished) = ResumeLog::open(&args.output.out, &key)?;
    let keys: Vec<String> = images.paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let (mut done, todo) = split_finished(&rows, |row| keys[row].clone(), &finished);
    if todo.len() < rows.len() {
        eprintln!("resuming: {} of {} rows already embedded", rows.len() - todo.len(), rows.len());
    }

    // Build: embed the rest. The rate is of the embedding loop: decoding, preprocessing and
    // the model.
    let progress = Progress::new(rows.len(), rows.len() - todo.len(), "images");
    let failures = embed_images(&encoder, &images.paths, &todo, args.batch, &progress, |batch| {
        for (row, values) in batch {
            log.append(&keys[row], &values)?;
            done.insert(row, values);
        }
        log.sync()
    })?;
    let seconds = progress.finish().as_secs_f64();
    let embedded = todo.len() - failures.len();
    eprintln!("embedded {embedded} images in {seconds:.1} s ({:.1} images/s)", embedded as f64 / seconds);

    // Check: failed images stop the run unless --skip-bad.
    check_failures(&failures, args.skip_bad, &log)?;
    let kept: Vec<usize> = rows.iter().copied().filter(|r| done.contains_key(r)).collect();
    if kept.is_empty() {
        bail!("no image could be embedded");
    }

    // Write the table, then its part file (sharded runs), then drop the log.
    let meta = args.output.with_encoder(&images.meta, &args.model, &weights)?;
    write_table(&args.output.out, args.output.meta_out.as_deref(), &meta, &kept, &done)?;
    let mut provenance = args.model.provenance("embed", args, &weights)?;
    provenance.input(&args.images)?.write_beside(&args.output.out)?;
    if let Some(shard) = args.shard {
        write_part(args, &images, &weights, dim, shard, kept.len())?;
    }
    log.remove()?;
    eprintln!("wrote {} rows to {}", kept.len(), args.output.out.display());
    Ok(())
}

/// Writes `OUT.part.json` for shard `shard` of the run, which wrote `rows` rows (`work::part`).
fn write_part(
    args: &EmbedArgs,
    images: &ImageList,
    weights: &Path,
    dim: usize,
    shard: Shard,
    rows: usize,
) -> Result<()> {
    let out = &args.output.out;
    let mut list = Vec::new();
    culturelens_table::write_metadata_csv(&mut list, &images.meta)?;
    let input = Input { name: args.images.display().to_string(), sha256: sha256_hex(&list) };
    let source = match &args.model.model {
        Some(id) => id.clone(),
        None => canonical(weights).display().to_string(),
    };
    let model = format!("{source} ({dim}-d)");
    let precision = value_name(&args.model.precision);
    let mut part = Part::new("embed", shard, images.paths.len(), rows, model, &precision, input);
    let part_path = Part::path_for(out);
    part.add_file(&part_path, "table", out)?;
    if let Some(meta) = meta_out_path(out, args.output.meta_out.as_deref()) {
        part.add_file(&part_path, "meta", &meta)?;
    }
    part.write(&part_path)
}

/// Lists the images that failed; an error unless `skip_bad` (their rows are then left out).
fn check_failures(failures: &[(PathBuf, String)], skip_bad: bool, log: &ResumeLog) -> Result<()> {
    if failures.is_empty() {
        return Ok(());
    }
    eprintln!("{} image(s) could not be embedded:", failures.len());
    for (_, err) in failures {
        // The error names its file.
        eprintln!("  {err}");
    }
    if !skip_bad {
        bail!(
            "{} image(s) failed; no table written (finished rows are kept in {}; fix or remove the files and rerun, or pass --skip-bad)",
            failures.len(),
            log.path().display()
        );
    }
    Ok(())
}

pub fn run_text(args: &EmbedTextArgs) -> Result<()> {
    check_batch(args.batch)?;
    let (prompts, meta) = read_prompts(&args.prompts, &args.column)?;
    if prompts.is_empty() {
        bail!("{}: no prompts", args.prompts.display());
    }
    refuse_column(&meta, ENCODER_COLUMN)?;
    let started = Instant::now();
    let (encoder, weights) = args.model.load(Towers::Text)?;
    let ids = encoder.tokenize(&prompts)?;
    let progress = Progress::new(prompts.len(), 0, "prompts");
    let rows: BTreeMap<usize, Vec<f32>> =
        embed_token_ids(&encoder, &ids, args.batch, Some(&progress))?.into_iter().enumerate().collect();
    progress.finish();
    let kept: Vec<usize> = (0..prompts.len()).collect();
    let with_encoder = args.output.with_encoder(&meta, &args.model, &weights)?;
    write_table(&args.output.out, args.output.meta_out.as_deref(), &with_encoder, &kept, &rows)?;
    let mut provenance = args.model.provenance("embed-text", args, &weights)?;
    provenance.input(&args.prompts)?.prompt_sets(meta.column("set").unwrap_or_default());
    provenance.write_beside(&args.output.out)?;
    eprintln!("wrote {} rows to {} in {:.1?}", kept.len(), args.output.out.display(), started.elapsed());
    Ok(())
}
