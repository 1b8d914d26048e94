//! Running an encoder of `culturelens-models-io` over inputs, shared by the subcommands that
//! embed (`embed`, `embed-text`, `classify`, `clipscore`): the model arguments, the image loop
//! (decoding on all cores one batch ahead of the model) and prompt batches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Result, bail};
use culturelens_models::preprocess::{ImageProcessor, PixelValues};
use culturelens_models_io::{Encoder, read_pixel_values};
use rayon::prelude::*;

use crate::device::{DeviceChoice, ModelPrecision, select_device_with};
use crate::provenance::Provenance;
use crate::work::progress::Progress;

/// The model and where it runs: shared by `embed`, `embed-text`, `classify` and `clipscore`.
#[derive(clap::Args, Debug, serde::Serialize)]
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
    #[arg(long, value_enum, default_value_t = ModelPrecision::F32)]
    pub precision: ModelPrecision,
}

impl ModelArgs {
    /// The weights folder of `--weights DIR` or `--model HF_ID` (downloaded into the hub cache).
    pub fn weights_dir(&self) -> Result<PathBuf> {
        match (&self.weights, &self.model) {
            (Some(dir), _) => Ok(dir.clone()),
            (None, Some(model)) => crate::hub::snapshot(model),
            (None, None) => bail!("give --weights DIR or --model HF_ID"),
        }
    }

    /// The device (in `--precision`), then the encoder of the weights folder on it, and the
    /// folder.
    pub fn load(&self) -> Result<(Encoder, PathBuf)> {
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

    /// The manifest of `command` run with `args` on this model (its id and weight files, the
    /// device and precision).
    pub fn provenance(
        &self,
        command: &str,
        args: &impl serde::Serialize,
        weights: &Path,
    ) -> Result<Provenance> {
        let mut provenance = Provenance::new(command, args);
        let id = self.model.clone().unwrap_or_else(|| weights.display().to_string());
        provenance.model(&id, weights)?;
        provenance.device(self.device, self.precision);
        Ok(provenance)
    }
}

/// Embeds the images `paths[row]` of every row of `todo`, `size` per forward pass (a batch is
/// cut early where the pixel size changes): a producer thread decodes and preprocesses the next
/// batches (each on all cores, through rayon) while this thread embeds the current one. Each
/// finished batch's `(row, embedding)` pairs go to `sink`, and count on `progress`. Returns the
/// images that could not be read or decoded, with the reason.
pub fn embed_images(
    encoder: &Encoder,
    paths: &[PathBuf],
    todo: &[usize],
    size: usize,
    progress: &Progress,
    sink: impl FnMut(Vec<(usize, Vec<f32>)>) -> Result<()>,
) -> Result<Vec<(PathBuf, String)>> {
    let processor = encoder.processor()?;
    let mut batches = Batches { encoder, size, pending: Vec::new(), progress, sink };
    let failures = decode_rows(processor, paths, todo, &mut batches)?;
    batches.flush()?;
    Ok(failures)
}

/// The output options of the per-image commands (`classify`, `clipscore`).
#[derive(clap::Args, Debug, serde::Serialize)]
pub struct PerImageArgs {
    /// Output CSV.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Images per forward pass.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Keep unreadable images as rows with empty values instead of failing the run.
    #[arg(long)]
    pub skip_bad: bool,
}

/// Embeds every image of `paths` (the per-image commands `classify` and `clipscore`), `batch`
/// per forward pass, with a progress bar; reports the rate and the images that could not be read.
/// Those stop the run unless `skip_bad`, which leaves their rows out of the result (the caller
/// writes them with empty values); no image read at all is an error.
pub fn embed_image_list(
    encoder: &Encoder,
    paths: &[PathBuf],
    batch: usize,
    skip_bad: bool,
) -> Result<BTreeMap<usize, Vec<f32>>> {
    let progress = Progress::new(paths.len(), 0, "images");
    let mut done: BTreeMap<usize, Vec<f32>> = BTreeMap::new();
    let all: Vec<usize> = (0..paths.len()).collect();
    let failures = embed_images(encoder, paths, &all, batch, &progress, |rows| {
        done.extend(rows);
        Ok(())
    })?;
    let seconds = progress.finish().as_secs_f64();
    eprintln!(
        "embedded {} images in {seconds:.1} s ({:.1} images/s)",
        done.len(),
        done.len() as f64 / seconds
    );
    if !failures.is_empty() {
        eprintln!("{} image(s) could not be read:", failures.len());
        for (_, err) in &failures {
            // The error names its file.
            eprintln!("  {err}");
        }
        if !skip_bad {
            bail!(
                "{} image(s) failed; nothing written (fix or remove them, or pass --skip-bad)",
                failures.len()
            );
        }
    }
    if done.is_empty() {
        bail!("no image could be read");
    }
    Ok(done)
}

/// Decoded images on their way through the model: batches of up to `size` images of one pixel
/// size; each finished batch goes to `sink`.
struct Batches<'a, S> {
    encoder: &'a Encoder,
    size: usize,
    pending: Vec<(usize, PixelValues)>,
    progress: &'a Progress,
    sink: S,
}

impl<S: FnMut(Vec<(usize, Vec<f32>)>) -> Result<()>> Batches<'_, S> {
    /// Adds the decoded image of `row`; embeds the batch when it is full (or before an image of
    /// another pixel size joins it).
    fn push(&mut self, row: usize, pixels: PixelValues) -> Result<()> {
        let same_size =
            self.pending.first().is_none_or(|(_, q)| (q.height, q.width) == (pixels.height, pixels.width));
        if !same_size {
            self.flush()?;
        }
        self.pending.push((row, pixels));
        if self.pending.len() == self.size {
            self.flush()?;
        }
        Ok(())
    }

    /// Embeds the pending images and hands their rows to the sink.
    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pixels: Vec<PixelValues> = self.pending.iter().map(|(_, p)| p.clone()).collect();
        let embeddings = self.encoder.embed_pixels(&pixels);
        assert_eq!(embeddings.len(), self.pending.len(), "one embedding per image");
        let n = self.pending.len();
        let rows = self.pending.drain(..).map(|(row, _)| row).zip(embeddings).collect();
        (self.sink)(rows)?;
        self.progress.inc(n);
        Ok(())
    }
}

/// Decodes the images of `todo` on a producer thread and feeds them to `batches`; returns the
/// images that could not be read or decoded.
fn decode_rows<S: FnMut(Vec<(usize, Vec<f32>)>) -> Result<()>>(
    processor: &ImageProcessor,
    paths: &[PathBuf],
    todo: &[usize],
    batches: &mut Batches<'_, S>,
) -> Result<Vec<(PathBuf, String)>> {
    let mut failures = Vec::new();
    let size = batches.size;
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(usize, Result<PixelValues, String>)>>(2);
        scope.spawn(move || {
            for batch in todo.chunks(size) {
                let decoded: Vec<_> = batch
                    .par_iter()
                    .map(|&row| (row, read_pixel_values(processor, &paths[row]).map_err(|e| e.to_string())))
                    .collect();
                if tx.send(decoded).is_err() {
                    break; // the consumer stopped on an error
                }
            }
        });
        for decoded in rx {
            for (row, result) in decoded {
                match result {
                    Ok(pixels) => batches.push(row, pixels)?,
                    Err(e) => {
                        batches.progress.inc(1);
                        failures.push((paths[row].clone(), e));
                    }
                }
            }
        }
        Ok(())
    })?;
    Ok(failures)
}

/// The text embeddings of token ids, `batch` rows per forward pass, in order.
/// `progress`, when given, counts the rows.
pub fn embed_token_ids(
    encoder: &Encoder,
    ids: &[Vec<u32>],
    batch: usize,
    progress: Option<&Progress>,
) -> Result<Vec<Vec<f32>>> {
    let mut rows = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(batch) {
        rows.extend(encoder.embed_ids(chunk)?);
        if let Some(progress) = progress {
            progress.inc(chunk.len());
        }
    }
    Ok(rows)
}

/// `--batch` must be at least 1.
pub fn check_batch(batch: usize) -> Result<()> {
    if batch == 0 {
        bail!("--batch must be at least 1");
    }
    Ok(())
}
