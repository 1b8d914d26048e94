//! `culturelens.Pipeline`: a text-to-image pipeline of a diffusers folder (`culturelens generate
//! --pipeline DIR`), generating with the CLI's own loop (`culturelens_models_io::generate`: the
//! size checks, the batches, each prompt's seeded latents and the pipeline's denoising loop), so
//! an image's pixels equal the PNG `generate` writes for the same prompt and settings, with the CLI's options through the same
//! `Job` and checks, on the CLI's devices (`crate::device`). Errors carry the CLI's messages
//! (flags named as the CLI names them).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use burn::tensor::Device;
use culturelens_diffusion_models::unet::AttentionSlice;
use culturelens_diffusion_schedulers::SchedulerKind;
use culturelens_models_io::diffusion::{PipelineFolder, Placement};
use culturelens_models_io::generate::{
    Checked, GivenLatents, Item, Job, Request, batches, check_request, checked_size, image_bytes,
};
use numpy::{PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::encoder::{cli_error, folder_or_hub};
use crate::interruptible;

/// A loaded pipeline; shared with the computation threads, which run without the GIL.
#[pyclass(module = "culturelens._native", frozen)]
pub struct Pipeline {
    folder: Arc<PipelineFolder>,
    /// The device it runs on (`device=`, `precision=`); behind an `Arc`, as Burn's `Device` is
    /// aligned beyond what a Python object's memory guarantees.
    device: Arc<Device>,
}

/// One generated image: its height, width and `height × width × 3` RGB bytes.
type Image = (usize, usize, Vec<u8>);

#[pymethods]
impl Pipeline {
    /// Loads the diffusers pipeline folder `folder` (`culturelens generate --pipeline`), or the
    /// hub snapshot of the id `folder` (`--model`), onto `device` in `precision`, as the CLI
    /// loads it: `offload` (`--offload`), `max_sequence_length` (`--max-sequence-length`) and
    /// `attention_slice` (`--attention-slice`) applied by the same calls.
    #[staticmethod]
    #[pyo3(signature = (folder, device = "cpu", precision = "f32", offload = false, max_sequence_length = None,
                        attention_slice = None))]
    fn from_pretrained(
        py: Python<'_>,
        folder: PathBuf,
        device: &str,
        precision: &str,
        offload: bool,
        max_sequence_length: Option<usize>,
        attention_slice: Option<String>,
    ) -> PyResult<Self> {
        let device = crate::device::select(device, precision, "generate").map_err(cli_error)?;
        let run_on = Arc::new(device.clone());
        let slice = attention_slice
            .as_deref()
            .map(AttentionSlice::parse)
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("attention_slice: {e}")))?;
        let folder = interruptible(py, move || {
            let folder = folder_or_hub(folder, |id| culturelens_models_io::hub::snapshot_pipeline(id, true))?;
            let place = match offload {
                true => Placement::offloaded(&device, &Device::flex()),
                false => Placement::resident(&device),
            };
            let mut pipeline = PipelineFolder::load_to(&folder, &place, None).map_err(cli_error)?;
            pipeline.model.set_attention_slice(slice).context("--attention-slice").map_err(cli_error)?;
            if let Some(n) = max_sequence_length {
                pipeline.set_max_sequence_length(n).map_err(cli_error)?;
            }
            Ok(pipeline)
        })?;
        Ok(Self { folder: Arc::new(folder), device: run_on })
    }

    /// The images of `prompts` as `culturelens generate` makes them: each prompt's
    /// `images_per_prompt` images from `torch.Generator().manual_seed(seed)` (image k from
    /// `seed + k` with `seed_per_image`), `batch` prompts per call; `(height, width, rgb bytes)`
    /// for every image, prompt by prompt. `latents` (`--latents`), `text_layer` (`--text-layer`)
    /// and Kandinsky 2.1's `prior_steps`, `prior_guidance`, `prior_latents` (`--prior-*`) are
    /// checked and run as the CLI's.
    #[pyo3(signature = (prompts, seed = 0, steps = None, guidance = None, negative_prompt = None,
                        height = None, width = None, scheduler = None, images_per_prompt = 1,
                        seed_per_image = false, true_cfg = 1.0, batch = 1, latents = None,
                        text_layer = None, prior_steps = None, prior_guidance = None,
                        prior_latents = None))]
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
        latents: Option<PyReadonlyArrayDyn<'py, f32>>,
        text_layer: Option<usize>,
        prior_steps: Option<usize>,
        prior_guidance: Option<f64>,
        prior_latents: Option<PyReadonlyArrayDyn<'py, f32>>,
    ) -> PyResult<Vec<(usize, usize, Bound<'py, PyBytes>)>> {
        if batch == 0 || images_per_prompt == 0 {
            return Err(PyValueError::new_err("--batch and --images-per-prompt must be at least 1"));
        }
        if prompts.is_empty() {
            return Err(PyValueError::new_err("prompts: nothing to generate"));
        }
        let latents = latents.map(|a| given(a, "latents"));
        let prior_latents = prior_latents.map(|a| given(a, "prior_latents"));
        let folder = Arc::clone(&self.folder);
        let device = Device::clone(&self.device);
        let images: Vec<Image> = interruptible(py, move || {
            let pipeline = folder.as_ref();
            let kind = scheduler.as_deref().map(SchedulerKind::parse).transpose().map_err(cli_error)?;
            let size = checked_size(&pipeline.dir, height, width).map_err(cli_error)?;
            pipeline.check_scheduler(kind).map_err(cli_error)?;
            let model = &pipeline.model;
            let negative_given = negative_prompt.is_some();
            let Checked { given, prior, .. } = check_request(
                pipeline,
                &prompts,
                Request {
                    kind,
                    size,
                    images_per_prompt,
                    layers: &[text_layer],
                    latents,
                    prior_steps,
                    prior_guidance,
                    prior_latents,
                    seed_per_image,
                    negative_given,
                },
            )
            .map_err(cli_error)?;
            let negatives = vec![negative_prompt.clone().unwrap_or_default(); prompts.len()];
            let job = Job {
                pipeline,
                kind,
                prompts: &prompts,
                negatives: &negatives,
                negative_given,
                steps: steps.unwrap_or(model.default_steps()),
                guidance: guidance.unwrap_or(model.default_guidance()),
                true_cfg,
                seed,
                seed_per_image,
                images_per_prompt,
                given: given.as_deref(),
                size,
                device: &device,
                upscaler: None,
                prior: prior.as_ref(),
            };
            let items: Vec<Item> = (0..prompts.len()).map(|row| Item { row, layer: text_layer }).collect();
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

/// A float32 numpy array handed in for `name` (`latents`, `prior_latents`), copied in C order.
fn given(array: PyReadonlyArrayDyn<'_, f32>, name: &str) -> GivenLatents {
    let shape = array.shape().to_vec();
    let values = array.as_array().iter().copied().collect();
    GivenLatents { source: name.to_string(), shape, values }
}
