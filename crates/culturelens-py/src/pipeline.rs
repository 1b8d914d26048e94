//! `culturelens.Pipeline`: a text-to-image pipeline of a diffusers folder (`culturelens generate
//! --pipeline DIR`), generating with the CLI's own loop (`culturelens_models_io::generate`: the
//! size checks, the batches, each prompt's seeded latents and the pipeline's denoising loop), so
//! an image's pixels equal the PNG `generate` writes for the same prompt and settings. Errors
//! carry the CLI's messages (flags named as the CLI names them). The CPU backend only.

use std::path::PathBuf;
use std::sync::Arc;

use burn::tensor::Device;
use culturelens_diffusion::scheduler::SchedulerKind;
use culturelens_models_io::diffusion::PipelineFolder;
use culturelens_models_io::generate::{
    Item, Job, batches, checked_size, image_bytes, scheduler_name, warn_cut_prompts,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::encoder::{check_cpu, cli_error, folder_or_hub};
use crate::interruptible;

/// A loaded pipeline; shared with the computation threads, which run without the GIL.
#[pyclass(module = "culturelens._native", frozen)]
pub struct Pipeline {
    folder: Arc<PipelineFolder>,
}

/// One generated image: its height, width and `height × width × 3` RGB bytes.
type Image = (usize, usize, Vec<u8>);

#[pymethods]
impl Pipeline {
    /// Loads the diffusers pipeline folder `folder` (`culturelens generate --pipeline`), or the
    /// hub snapshot of the id `folder` (`--model`), onto `device` in `precision`.
    #[staticmethod]
    #[pyo3(signature = (folder, device = "cpu", precision = "f32"))]
    fn from_pretrained(py: Python<'_>, folder: PathBuf, device: &str, precision: &str) -> PyResult<Self> {
        check_cpu(device, precision, "generate")?;
        let folder = interruptible(py, move || {
            let folder = folder_or_hub(folder, |id| culturelens_models_io::hub::snapshot_pipeline(id, true))?;
            PipelineFolder::load(&folder, &Device::flex(), None).map_err(cli_error)
        })?;
        Ok(Self { folder: Arc::new(folder) })
    }

    /// The images of `prompts` as `culturelens generate` makes them: each prompt's
    /// `images_per_prompt` images from `torch.Generator().manual_seed(seed)` (image k from
    /// `seed + k` with `seed_per_image`), `batch` prompts per call; `(height, width, rgb bytes)`
    /// for every image, prompt by prompt.
    #[pyo3(signature = (prompts, seed = 0, steps = None, guidance = None, negative_prompt = None,
                        height = None, width = None, scheduler = None, images_per_prompt = 1,
                        seed_per_image = false, true_cfg = 1.0, batch = 1))]
    #[allow(clippy::too_many_arguments)]
    fn generate<'py>(
        &self,
        py: Python<'py>,
        prompts: Vec<String>,
        seed: u64,
        steps: Option<usize>,
        guidance: Option<f64>,
        negative_prompt: Option<String>,
        height: Option<usize>,
        width: Option<usize>,
        scheduler: Option<String>,
        images_per_prompt: usize,
        seed_per_image: bool,
        true_cfg: f64,
        batch: usize,
    ) -> PyResult<Vec<(usize, usize, Bound<'py, PyBytes>)>> {
        if batch == 0 || images_per_prompt == 0 {
            return Err(PyValueError::new_err("--batch and --images-per-prompt must be at least 1"));
        }
        if prompts.is_empty() {
            return Err(PyValueError::new_err("prompts: nothing to generate"));
        }
        let folder = Arc::clone(&self.folder);
        let images: Vec<Image> = interruptible(py, move || {
            let pipeline = folder.as_ref();
            let kind = scheduler.as_deref().map(SchedulerKind::parse).transpose().map_err(cli_error)?;
            let size = checked_size(&pipeline.dir, height, width).map_err(cli_error)?;
            pipeline.check_scheduler(kind).map_err(cli_error)?;
            let model = &pipeline.model;
            model.latent_shape(images_per_prompt, size[0], size[1]).map_err(cli_error)?;
            scheduler_name(pipeline, kind, seed_per_image).map_err(cli_error)?;
            warn_cut_prompts(pipeline, &prompts).map_err(cli_error)?;
            let negatives = vec![negative_prompt.clone().unwrap_or_default(); prompts.len()];
            let device = Device::flex();
            let job = Job {
                pipeline,
                kind,
                prompts: &prompts,
                negatives: &negatives,
                negative_given: negative_prompt.is_some(),
                steps: steps.unwrap_or(model.default_steps()),
                guidance: guidance.unwrap_or(model.default_guidance()),
                true_cfg,
                seed,
                seed_per_image,
                images_per_prompt,
                given: None,
                size,
                device: &device,
                upscaler: None,
                prior: None,
            };
            let items: Vec<Item> = (0..prompts.len()).map(|row| Item { row, layer: None }).collect();
            let mut images = Vec::new();
            for batch in batches(&items, batch) {
                for (_, pixels) in job.run(&batch).map_err(cli_error)? {
                    let per_image = pixels.len() / images_per_prompt;
                    let [height, width] = size;
                    images.extend(pixels.chunks(per_image).map(|image| (height, width, image_bytes(image))));
                }
            }
            Ok(images)
        })?;
        Ok(images.into_iter().map(|(h, w, bytes)| (h, w, PyBytes::new(py, &bytes))).collect())
    }
}
