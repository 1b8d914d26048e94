//! Running an encoder of `culturelens-models-io` over inputs, shared by the subcommands that
//! embed (`embed`, `embed-text`, `classify`, `clipscore`): the model arguments, and the image and
//! prompt loops of `culturelens_models_io::embed` (shared with the Python package) with a
//! progress display.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Result, bail};
use culturelens_models::Towers;
use culturelens_models_io::{Encoder, embed};

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

    /// The device (in `--precision`), then the encoder of the weights folder on it, with the
    /// towers `towers` of a two-tower model (a command that embeds only images or only texts
    /// leaves the other unread), and the folder.
    pub fn load(&self, towers: Towers) -> Result<(Encoder, PathBuf)> {
        let device = select_device_with(self.device, self.precision)?;
        let started = Instant::now();
        let weights = self.weights_dir()?;
        let encoder = Encoder::from_dir_towers(&weights, &device, towers)?;
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

/// Embeds the images `paths[row]` of every row of `todo`, `size` per forward pass, with the
/// shared loop of [`culturelens_models_io::embed::embed_image_files`] (decoding on all cores
/// ahead of the model; on the CPU, batches side by side). Each finished batch's `(row, embedding)` pairs go to `sink`, and
/// count on `progress`. Returns the images that could not be read or decoded, with the reason.
pub fn embed_images(
    encoder: &Encoder,
    paths: &[PathBuf],
    todo: &[usize],
    size: usize,
    progress: &Progress,
    sink: impl FnMut(Vec<(usize, Vec<f32>)>) -> Result<()>,
) -> Result<Vec<(PathBuf, String)>> {
    embed::embed_image_files(encoder, paths, todo, size, |n| progress.inc(n), sink)
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

/// The text embeddings of token ids, `batch` rows per forward pass, in order
/// ([`culturelens_models_io::embed::embed_token_ids`]). `progress`, when given, counts the rows.
pub fn embed_token_ids(
    encoder: &Encoder,
    ids: &[Vec<u32>],
    batch: usize,
    progress: Option<&Progress>,
) -> Result<Vec<Vec<f32>>> {
    Ok(embed::embed_token_ids(encoder, ids, batch, |n| {
        if let Some(progress) = progress {
            progress.inc(n);
        }
    })?)
}

/// `--batch` must be at least 1.
pub fn check_batch(batch: usize) -> Result<()> {
    if batch == 0 {
        bail!("--batch must be at least 1");
    }
    Ok(())
}
