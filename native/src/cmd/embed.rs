//! `culturelens embed` and `culturelens embed-text`: image and prompt embedding tables from a
//! weights folder (transformers `save_pretrained` layout, OpenCLIP hub layout, or one written by
//! `import-weights`), with the models of `culturelens-core` on the chosen device. Images are
//! decoded on all cores, one batch ahead of the model.
//!
//! Rows follow the sorted file names of `--images DIR` (png/jpg/jpeg/webp) or the row order of a
//! manifest CSV (column `image`, paths relative to the manifest; every column is carried into
//! the output). Finished rows are appended to `OUT.resume` as they are computed, so an
//! interrupted run picks up where it stopped; the table itself is written atomically at the end.
//! A file that cannot be read or decoded is reported at the end while the others go on.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use culturelens_core::models::preprocess::PixelValues;
use culturelens_models_io::{Encoder, read_pixel_values};
use culturelens_table::{EmbeddingTable, Matrix, Metadata, read_metadata_csv, save_table};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use crate::device::{DeviceChoice, Precision, select_device_with};

/// File extensions `--images DIR` picks up (case-insensitive).
pub const IMAGE_EXTENSIONS: [&str; 4] = ["png", "jpg", "jpeg", "webp"];

/// The model and where it runs: shared by `embed` and `embed-text`.
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// Weights folder: transformers' `save_pretrained` layout (config.json, model.safetensors or
    /// a sharded index, preprocessor_config.json for images, tokenizer.json or SigLIP's
    /// spiece.model for text), an OpenCLIP hub folder (open_clip_config.json,
    /// open_clip_model.safetensors), or one made by `import-weights`.
    #[arg(long, value_name = "DIR", required_unless_present = "model", conflicts_with = "model")]
    pub weights: Option<PathBuf>,
    /// Hugging Face hub model ORG/NAME[@REVISION], downloaded (safetensors only) into the hub's
    /// standard cache ($HF_HOME, $HF_ENDPOINT honoured) instead of --weights.
    #[arg(long, value_name = "HF_ID")]
    pub model: Option<String>,
    /// Backend that runs the model.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
    /// Float type the model stores and computes in: f16 (GPU only) halves its memory; the
    /// embeddings then differ from f32 by about 1e-3 relative (README).
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
}

/// The output table: shared by `embed` and `embed-text`.
#[derive(clap::Args, Debug)]
pub struct OutputArgs {
    /// Output table: `.npy` (with metadata in `--meta-out`, default OUT with `.csv`) or `.parquet`.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Metadata CSV for a `.npy` output (default: the output path with extension `.csv`).
    #[arg(long, value_name = "FILE")]
    pub meta_out: Option<PathBuf>,
}

/// Arguments of `culturelens embed`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Embed images with CLIP, OpenCLIP, SigLIP, DINOv2 or EfficientNet-Lite into an embedding table"
)]
pub struct EmbedArgs {
    /// A folder of images (png/jpg/jpeg/webp, rows in sorted file-name order) or a manifest CSV
    /// with an `image` column (paths relative to the CSV); manifest columns are carried over.
    #[arg(long, value_name = "DIR|CSV")]
    pub images: PathBuf,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Images per forward pass.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Embed only shard K of N (1-based; contiguous row ranges, so the shards' tables
    /// concatenated in order give the whole table).
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    pub shard: Option<(usize, usize)>,
    /// Write the table without the images that failed (they are still listed) instead of
    /// failing the run.
    #[arg(long)]
    pub skip_bad: bool,
}

/// Arguments of `culturelens embed-text`.
#[derive(clap::Args, Debug)]
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
    pub model: ModelArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Prompts per forward pass.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (k, n) = s.split_once('/').ok_or("expected K/N, e.g. 2/8")?;
    let k: usize = k.trim().parse().map_err(|_| format!("K in `{s}` is not a number"))?;
    let n: usize = n.trim().parse().map_err(|_| format!("N in `{s}` is not a number"))?;
    if n == 0 || k == 0 || k > n {
        return Err(format!("shard `{s}` needs 1 <= K <= N"));
    }
    Ok((k, n))
}

/// Rows `[start, end)` of shard `k` of `n` over `len` rows.
pub fn shard_range(len: usize, (k, n): (usize, usize)) -> std::ops::Range<usize> {
    (k - 1) * len / n..k * len / n
}

/// The image files and metadata the rows come from.
struct Inputs {
    paths: Vec<PathBuf>,
    meta: Metadata,
}

fn list_images(images: &Path) -> Result<Inputs> {
    if images.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(images)
            .with_context(|| format!("cannot list {}", images.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| {
                Path::new(name)
                    .extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| IMAGE_EXTENSIONS.contains(&x.to_ascii_lowercase().as_str()))
            })
            .collect();
        names.sort();
        if names.is_empty() {
            bail!("{}: no png/jpg/jpeg/webp files", images.display());
        }
        let paths = names.iter().map(|n| images.join(n)).collect();
        let meta = Metadata::from_columns(None, vec![("image".to_string(), names)])?;
        Ok(Inputs { paths, meta })
    } else {
        let meta = read_metadata_csv(images)?;
        let column = meta.require_nonempty_column("image")?;
        let base = images.parent().unwrap_or(Path::new("."));
        let paths = column.iter().map(|p| base.join(p)).collect();
        Ok(Inputs { paths, meta })
    }
}

/// Where finished rows are kept until the table is written: a header line naming the run
/// (weights, width and precision), then one record per embedded image: the image path (`u32` LE
/// length + UTF-8) and `dim` × `f32` LE. Records are keyed by path, so a rerun after adding,
/// removing or reordering files reuses every finished image. A torn last record is dropped.
struct ResumeLog {
    path: PathBuf,
    writer: BufWriter<File>,
}

impl ResumeLog {
    /// The header of a run of `weights` with `dim`-wide rows in `precision`: f16 runs are tagged,
    /// so they never reuse f32 rows nor the reverse; f32 logs keep the header they always had.
    fn header(weights: &Path, dim: usize, precision: Precision) -> String {
        let tag = match precision {
            Precision::F32 => "",
            Precision::F16 => "\tf16",
        };
        let weights = weights.canonicalize().unwrap_or_else(|_| weights.to_owned());
        format!("culturelens-embed-v1\t{}\t{dim}{tag}", weights.display())
    }

    fn path_for(out: &Path) -> PathBuf {
        let mut name = out.as_os_str().to_owned();
        name.push(".resume");
        PathBuf::from(name)
    }

    /// Opens (or starts) the log of the run identified by `header`, whose rows are `dim` wide;
    /// returns the rows already done.
    fn open(out: &Path, header: &str, dim: usize) -> Result<(Self, BTreeMap<String, Vec<f32>>)> {
        let path = Self::path_for(out);
        let mut done: BTreeMap<String, Vec<f32>> = BTreeMap::new();
        if path.is_file() {
            let mut bytes = Vec::new();
            BufReader::new(File::open(&path)?).read_to_end(&mut bytes)?;
            let line_end = bytes.iter().position(|&b| b == b'\n').unwrap_or(bytes.len());
            if &bytes[..line_end] == header.as_bytes() {
                let mut rest = &bytes[line_end + 1..];
                while rest.len() >= 4 {
                    let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
                    let Some(record) = rest.get(4..4 + len + 4 * dim) else { break };
                    let Ok(key) = std::str::from_utf8(&record[..len]) else { break };
                    let values = record[len..]
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")));
                    done.insert(key.to_owned(), values.collect());
                    rest = &rest[4 + len + 4 * dim..];
                }
            } else {
                eprintln!("note: {} belongs to another run; starting afresh", path.display());
            }
        }
        // Rewrite the log with only whole records, so appends never follow a torn one.
        let file = File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
        let mut writer = BufWriter::new(file);
        writeln!(writer, "{header}")?;
        for (key, values) in &done {
            write_record(&mut writer, key, values)?;
        }
        writer.flush()?;
        Ok((Self { path, writer }, done))
    }

    fn append(&mut self, key: &str, values: &[f32]) -> Result<()> {
        write_record(&mut self.writer, key, values)?;
        Ok(())
    }

    /// Makes the appended rows durable (called after every batch).
    fn sync(&mut self) -> Result<()> {
        self.writer.flush()?;
        Ok(())
    }

    fn remove(self) -> Result<()> {
        drop(self.writer);
        std::fs::remove_file(&self.path).with_context(|| format!("cannot remove {}", self.path.display()))
    }
}

fn write_record(w: &mut impl Write, key: &str, values: &[f32]) -> std::io::Result<()> {
    w.write_all(&(key.len() as u32).to_le_bytes())?;
    w.write_all(key.as_bytes())?;
    for v in values {
        w.write_all(&v.to_le_bytes())?;
    }
    Ok(())
}

fn progress(len: usize, done: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{bar:40}} {{pos}}/{{len}} {what} · {{per_sec}} · ETA {{eta}} {{msg}}"
        ))
        .expect("valid template"),
    );
    bar.set_position(done as u64);
    bar.reset_eta();
    bar
}

fn meta_out_path(out: &Path, meta_out: &Option<PathBuf>) -> Option<PathBuf> {
    let is_npy = out.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    is_npy.then(|| meta_out.clone().unwrap_or_else(|| out.with_extension("csv")))
}

/// Writes the rows `kept` (indices into `meta`) with their embeddings.
fn write_table(
    out: &Path,
    meta_out: &Option<PathBuf>,
    meta: &Metadata,
    kept: &[usize],
    rows: &BTreeMap<usize, Vec<f32>>,
) -> Result<()> {
    let dim = rows.values().next().map_or(0, Vec::len);
    let data: Vec<f32> = kept.iter().flat_map(|r| rows[r].iter().copied()).collect();
    let table = EmbeddingTable::new(Matrix::new(kept.len(), dim, data), meta.select_rows(kept));
    save_table(&table, out, meta_out_path(out, meta_out).as_deref())?;
    Ok(())
}

impl ModelArgs {
    /// The weights folder of `--weights DIR` or `--model HF_ID` (downloaded into the hub cache).
    fn weights_dir(&self) -> Result<PathBuf> {
        match (&self.weights, &self.model) {
            (Some(dir), _) => Ok(dir.clone()),
            (None, Some(model)) => super::hub::snapshot(model),
            (None, None) => bail!("give --weights DIR or --model HF_ID"),
        }
    }

    /// The device (in `--precision`), then the encoder of the weights folder on it, and the
    /// folder.
    fn load(&self) -> Result<(Encoder, PathBuf)> {
        let device = select_device_with(self.device, self.precision)?;
        let started = Instant::now();
        let weights = self.weights_dir()?;
        let encoder = Encoder::from_dir(&weights, &device)?;
        eprintln!(
            "loaded {} from {} in {:.1?}",
            encoder.model.family(),
            weights.display(),
            started.elapsed()
        );
        Ok((encoder, weights))
    }
}

pub fn run(args: &EmbedArgs) -> Result<()> {
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let inputs = list_images(&args.images)?;
    let range = args.shard.map_or(0..inputs.paths.len(), |s| shard_range(inputs.paths.len(), s));
    let rows: Vec<usize> = range.collect();
    let (encoder, weights) = args.model.load()?;

    let dim = encoder.model.image_dim();
    let header = ResumeLog::header(&weights, dim, args.model.precision);
    let (mut log, done_by_path) = ResumeLog::open(&args.output.out, &header, dim)?;
    let key = |row: usize| inputs.paths[row].to_string_lossy().into_owned();
    let mut done: BTreeMap<usize, Vec<f32>> =
        rows.iter().filter_map(|&r| done_by_path.get(&key(r)).map(|v| (r, v.clone()))).collect();
    let todo: Vec<usize> = rows.iter().copied().filter(|r| !done.contains_key(r)).collect();
    if todo.len() < rows.len() {
        eprintln!("resuming: {} of {} rows already embedded", rows.len() - todo.len(), rows.len());
    }
    // The rate below is of the embedding loop: decoding, preprocessing and the model.
    let started = Instant::now();
    let bar = progress(rows.len(), rows.len() - todo.len(), "images");
    let mut failures: Vec<(PathBuf, String)> = Vec::new();
    let mut pending: Vec<(usize, PixelValues)> = Vec::new();
    let flush = |pending: &mut Vec<(usize, PixelValues)>,
                 log: &mut ResumeLog,
                 done: &mut BTreeMap<usize, Vec<f32>>|
     -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let pixels: Vec<PixelValues> = pending.iter().map(|(_, p)| p.clone()).collect();
        for ((row, _), values) in pending.drain(..).zip(encoder.embed_pixels(&pixels)) {
            log.append(&key(row), &values)?;
            done.insert(row, values);
            bar.inc(1);
        }
        log.sync()
    };
    // Decoding and preprocessing run ahead of the model: a producer thread decodes the next
    // batches (each on all cores, through rayon) while this thread embeds the current one.
    let processor = encoder.processor()?.clone();
    let batches: Vec<Vec<usize>> = todo.chunks(args.batch).map(<[usize]>::to_vec).collect();
    let paths = &inputs.paths;
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(usize, Result<PixelValues, String>)>>(2);
        scope.spawn(move || {
            for batch in batches {
                let decoded: Vec<_> = batch
                    .par_iter()
                    .map(|&row| (row, read_pixel_values(&processor, &paths[row]).map_err(|e| e.to_string())))
                    .collect();
                if tx.send(decoded).is_err() {
                    break; // the consumer stopped on an error
                }
            }
        });
        for decoded in rx {
            for (row, result) in decoded {
                match result {
                    Ok(p) => {
                        let same_size =
                            pending.first().is_none_or(|(_, q)| (q.height, q.width) == (p.height, p.width));
                        if !same_size {
                            flush(&mut pending, &mut log, &mut done)?;
                        }
                        pending.push((row, p));
                        if pending.len() == args.batch {
                            flush(&mut pending, &mut log, &mut done)?;
                        }
                    }
                    Err(e) => {
                        bar.inc(1);
                        failures.push((paths[row].clone(), e));
                    }
                }
            }
        }
        Ok(())
    })?;
    flush(&mut pending, &mut log, &mut done)?;
    bar.finish();
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "embedded {} images in {seconds:.1} s ({:.1} images/s)",
        todo.len() - failures.len(),
        (todo.len() - failures.len()) as f64 / seconds
    );

    if !failures.is_empty() {
        eprintln!("{} image(s) could not be embedded:", failures.len());
        for (path, err) in &failures {
            eprintln!("  {}: {err}", path.display());
        }
        if !args.skip_bad {
            bail!(
                "{} image(s) failed; no table written (finished rows are kept in {}; fix or remove the files and rerun, or pass --skip-bad)",
                failures.len(),
                log.path.display()
            );
        }
    }
    let kept: Vec<usize> = rows.iter().copied().filter(|r| done.contains_key(r)).collect();
    if kept.is_empty() {
        bail!("no image could be embedded");
    }
    write_table(&args.output.out, &args.output.meta_out, &inputs.meta, &kept, &done)?;
    log.remove()?;
    eprintln!("wrote {} rows to {}", kept.len(), args.output.out.display());
    Ok(())
}

fn read_prompts(path: &Path, column: &str) -> Result<(Vec<String>, Metadata)> {
    let is_txt = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("txt"));
    if is_txt {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let prompts: Vec<String> = text.lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect();
        let meta =
            Metadata::from_columns(Some(path.to_owned()), vec![("prompt".to_string(), prompts.clone())])?;
        Ok((prompts, meta))
    } else {
        let meta = read_metadata_csv(path)?;
        let prompts = meta.require_nonempty_column(column)?.to_vec();
        Ok((prompts, meta))
    }
}

pub fn run_text(args: &EmbedTextArgs) -> Result<()> {
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let (prompts, meta) = read_prompts(&args.prompts, &args.column)?;
    if prompts.is_empty() {
        bail!("{}: no prompts", args.prompts.display());
    }
    let started = Instant::now();
    let (encoder, _) = args.model.load()?;
    let ids = encoder.tokenize(&prompts)?;
    let bar = progress(prompts.len(), 0, "prompts");
    let mut rows = BTreeMap::new();
    for (chunk_index, chunk) in ids.chunks(args.batch).enumerate() {
        for (i, values) in encoder.embed_ids(chunk)?.into_iter().enumerate() {
            rows.insert(chunk_index * args.batch + i, values);
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish();
    let kept: Vec<usize> = (0..prompts.len()).collect();
    write_table(&args.output.out, &args.output.meta_out, &meta, &kept, &rows)?;
    eprintln!("wrote {} rows to {} in {:.1?}", kept.len(), args.output.out.display(), started.elapsed());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_row_once() {
        for len in [0, 1, 7, 10] {
            let mut all = Vec::new();
            for k in 1..=3 {
                all.extend(shard_range(len, (k, 3)));
            }
            assert_eq!(all, (0..len).collect::<Vec<_>>());
        }
        assert_eq!(parse_shard("2/8"), Ok((2, 8)));
        assert!(parse_shard("0/8").is_err());
        assert!(parse_shard("9/8").is_err());
        assert!(parse_shard("x").is_err());
    }
}
