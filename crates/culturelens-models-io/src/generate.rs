//! The generation loop of a loaded [`PipelineFolder`], shared by `culturelens generate` (which
//! adds the prompt table, the output folder, the resume log and shards around it) and the Python
//! package's `Pipeline.generate`: the size checks made before any weights load, the batches of
//! prompts that share a text layer, and each batch's images from its prompts' seeds (initial
//! latents drawn by torch's CPU generator as diffusers draws them, the noise generators of a
//! scheduler that draws at every step, DeepFloyd IF's stage II) as `K × H × W × 3` floats in
//! `[0, 1]`, and their 8-bit pixels as diffusers' `numpy_to_pil` rounds them.
//!
//! Cancellation: a batch starts at a `culturelens_metrics::cancel` checkpoint, and every
//! denoising step of the pipelines calls one (`culturelens_diffusion_schedulers::set_step_hook`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use burn::tensor::{Device, Tensor, TensorData};
use culturelens_diffusion::pipeline::images_hwc;
use culturelens_diffusion::pipeline_if_superresolution::{DeepFloydIfSuperResolution, UpscaleRequest};
use culturelens_diffusion::pipeline_kandinsky21_combined::{PRIOR_GUIDANCE, PRIOR_STEPS, PriorRun};
use culturelens_diffusion::pipelines::{GenerateRequest, Pipeline};
use culturelens_diffusion_schedulers::{Scheduler, SchedulerKind, set_step_hook};
use culturelens_metrics::cancel::checkpoint;
use culturelens_rng::{TorchGenerator, TorchNormalPath};

use crate::diffusion::{PipelineFolder, Placement, PromptTokenizer, load_super_resolution};

/// torch's normal-sampling path on this CPU: AVX2 kernels where the CPU has AVX2 but not
/// AVX-512 (torch's dispatch), the scalar ones elsewhere. The two differ in the last bits only.
pub fn torch_path() -> TorchNormalPath {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && !std::arch::is_x86_feature_detected!("avx512f") {
            return TorchNormalPath::Avx2;
        }
    }
    TorchNormalPath::Scalar
}

/// One unit of work: a prompt row at a text layer (`None`: the pipeline's own), giving K images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item {
    pub row: usize,
    pub layer: Option<usize>,
}

/// `items` in batches of up to `batch` consecutive items that share a text layer (`--batch`).
pub fn batches(items: &[Item], batch: usize) -> Vec<Vec<Item>> {
    let mut batches: Vec<Vec<Item>> = Vec::new();
    for item in items {
        match batches.last_mut() {
            Some(b) if b.len() < batch && b[0].layer == item.layer => b.push(*item),
            _ => batches.push(vec![*item]),
        }
    }
    batches
}

/// The image size of a request (`--height`, `--width`; the pipeline's default where `None`),
/// checked against the size rules of the pipeline folder `dir` from its configs alone, before any
/// weights load (or download).
pub fn checked_size(dir: &Path, height: Option<usize>, width: Option<usize>) -> Result<[usize; 2]> {
    let sizes = PipelineFolder::size_rule(dir)?;
    let (height, width) = (height.unwrap_or(sizes.default), width.unwrap_or(sizes.default));
    sizes.check(height, width)?;
    let image = sizes.image_size(height, width);
    if image != [height, width] {
        bail!(
            "--height {height} --width {width}: this pipeline makes {}×{} images for that request (diffusers' \
             downscale_height_and_width, or get_new_h_w for Kandinsky 2.1); ask for that size",
            image[0],
            image[1]
        );
    }
    Ok([height, width])
}

/// The class name of the scheduler `kind` (the folder's where `None`) makes, after refusing
/// `seed_per_image` (`--seed-per-image`) with a scheduler that draws each step's noise from the
/// prompt's one generator.
pub fn scheduler_name(
    pipeline: &PipelineFolder,
    kind: Option<SchedulerKind>,
    seed_per_image: bool,
) -> Result<&'static str> {
    let scheduler = pipeline.scheduler(kind)?.kind();
    let name = scheduler.class_name();
    if seed_per_image && scheduler.draws_noise() {
        bail!("--seed-per-image: {name} draws each step's noise from the prompt's one generator");
    }
    Ok(name)
}

/// Warns (on stderr, as diffusers warns) once per prompt of `prompts` that a tokenizer cuts
/// (CogView4's GLM and Lumina 2's Gemma tokenizers count the cut; Lumina 2's count includes its
/// system prompt).
pub fn warn_cut_prompts(pipeline: &PipelineFolder, prompts: &[String]) -> Result<()> {
    let mut warned = std::collections::BTreeSet::new();
    for (row, text) in prompts.iter().enumerate() {
        let cut = pipeline.cut(text)?;
        if cut > 0 && warned.insert(text.as_str()) {
            eprintln!(
                "warning: {cut} token(s) of the prompt {text:?} (row {row}) were cut by the tokenizer (--max-sequence-length)"
            );
        }
    }
    Ok(())
}

/// The 8-bit pixels of `image` (floats in [0, 1]): scaled by 255 and rounded half to even, as
/// diffusers' `numpy_to_pil` (`(images * 255).round().astype("uint8")`).
pub fn image_bytes(image: &[f32]) -> Vec<u8> {
    image.iter().map(|v| (v * 255.0).round_ties_even().clamp(0.0, 255.0) as u8).collect()
}

/// DeepFloyd IF stage II (`--upscale`): its pipeline, tokenizer, scheduler config and settings.
pub struct Upscaler {
    model: DeepFloydIfSuperResolution,
    tokenizer: PromptTokenizer,
    scheduler_json: String,
    /// The images' side (the stage II UNet's `sample_size`).
    pub size: usize,
    /// `--upscale-steps`, `--upscale-guidance`, `--noise-level`.
    pub steps: usize,
    pub guidance: f64,
    pub noise_level: usize,
}

impl Upscaler {
    /// Loads the stage II folder `dir` (placed as stage I), after checking the run is IF stage I.
    pub fn load(
        dir: &Path,
        model: &Pipeline,
        place: &Placement,
        seed_per_image: bool,
        [steps, noise_level]: [usize; 2],
        guidance: f64,
    ) -> Result<Self> {
        if !matches!(model, Pipeline::DeepFloydIf(_)) {
            bail!(
                "--upscale runs DeepFloyd IF stage II after stage I: --pipeline/--model must be an IFPipeline"
            );
        }
        if seed_per_image {
            bail!(
                "--upscale: stage II draws from one generator per prompt; --seed-per-image is not supported"
            );
        }
        let (model, tokenizer, scheduler_json) = load_super_resolution(dir, place.clone())?;
        let Some(size) = model.unet.config.sample_size else {
            bail!(
                "{}: `sample_size` is not set; stage II makes images of that size",
                dir.join("unet").join("config.json").display()
            );
        };
        Ok(Self { model, tokenizer, scheduler_json, size, steps, guidance, noise_level })
    }

    /// The stage II T5's layers (the deepest `--text-layer` it takes).
    pub fn text_layers(&self) -> usize {
        self.model.text_encoder.num_layers()
    }

    /// Stage II on the `[K, 3, h, w]` stage I images (`output_type="pt"`) of one prompt: each
    /// image its own row with the prompt, as `IFSuperResolutionPipeline(image=…, prompt=[p] * K,
    /// generator=torch.Generator().manual_seed(seed))`: the initial noise, the augmentation noise
    /// and the variance noise drawn in that order.
    fn upscale(
        &self,
        seed: u64,
        [prompt, negative]: [&str; 2],
        layer: Option<usize>,
        images: Tensor<4>,
        device: &Device,
    ) -> Result<Tensor<4>> {
        let k = images.dims()[0];
        let prompt_ids = vec![vec![self.tokenizer.ids(prompt)?]; k];
        let negative_ids = vec![vec![self.tokenizer.negative_ids(negative)?]; k];
        let shape = [k, 3, self.size, self.size];
        let mut generator = TorchGenerator::manual_seed(seed);
        let latents = generator.randn(shape.iter().product(), torch_path());
        let request = UpscaleRequest {
            prompt_ids: &prompt_ids,
            negative_ids: &negative_ids,
            images,
            images_per_prompt: 1,
            height: self.size,
            width: self.size,
            steps: self.steps,
            guidance: self.guidance,
            noise_level: self.noise_level,
            layer,
            latents: Tensor::from_data(TensorData::new(latents, shape), device),
        };
        let mut scheduler = Scheduler::from_config(&self.scheduler_json, None)
            .context("--upscale: the stage II scheduler config")?;
        Ok(self.model.upscale(&request, &mut scheduler, generator, torch_path(), device)?)
    }
}

/// Why Kandinsky 2.1 refuses `--seed-per-image`.
pub const SEED_PER_IMAGE_KANDINSKY21: &str =
    "--seed-per-image: Kandinsky 2.1 runs one generator through the prior and the decoder";

/// Kandinsky 2.1's prior settings (`--prior-steps`, `--prior-guidance`, `--prior-latents`);
/// the default is diffusers' `KandinskyCombinedPipeline`'s.
#[derive(Debug, Clone)]
pub struct PriorSettings {
    /// `prior_num_inference_steps`.
    pub steps: usize,
    /// `prior_guidance_scale`.
    pub guidance: f64,
    /// The prior's initial latents for each prompt; `None`: drawn from the prompt's generator.
    pub latents: Option<Vec<f32>>,
}

impl Default for PriorSettings {
    fn default() -> Self {
        Self { steps: PRIOR_STEPS, guidance: PRIOR_GUIDANCE, latents: None }
    }
}

/// An array given for a pipeline's `latents=` or the prior's (`--latents FILE.npy`, or a numpy
/// array in Python): what it is called in errors (the file, or the argument), its shape, its
/// values.
pub struct GivenLatents {
    pub source: String,
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

/// The values of `given` (`--latents`) once its shape is the `latents=` shape of `model` for `k`
/// images of `height × width`, else the error naming both shapes.
pub fn checked_latents(
    model: &Pipeline,
    given: GivenLatents,
    k: usize,
    [height, width]: [usize; 2],
) -> Result<Vec<f32>> {
    let shape = model.latent_shape(k, height, width)?;
    if given.shape != shape {
        bail!(
            "{}: latents of shape {:?}, but {k} image(s) of {height}×{width} need {shape:?}",
            given.source,
            given.shape
        );
    }
    Ok(given.values)
}

/// Kandinsky 2.1's prior settings for the pipeline `model` from `--prior-steps`,
/// `--prior-guidance` and `--prior-latents` (`None` for any other pipeline, which refuses them),
/// the latents checked against the prior's shape for `k` images (rows doubled by a negative
/// prompt); refuses `--seed-per-image` for Kandinsky 2.1.
pub fn prior_settings(
    model: &Pipeline,
    steps: Option<usize>,
    guidance: Option<f64>,
    latents: Option<GivenLatents>,
    k: usize,
    seed_per_image: bool,
    negative_given: bool,
) -> Result<Option<PriorSettings>> {
    let Pipeline::Kandinsky21(p) = model else {
        if steps.is_some() || guidance.is_some() || latents.is_some() {
            bail!(
                "--prior-steps, --prior-guidance and --prior-latents apply to Kandinsky 2.1 (KandinskyCombinedPipeline)"
            );
        }
        return Ok(None);
    };
    if seed_per_image {
        bail!("{SEED_PER_IMAGE_KANDINSKY21}");
    }
    let latents = match latents {
        Some(given) => {
            let shape = p.prior_latent_shape(1, k, negative_given).to_vec();
            if given.shape != shape {
                bail!(
                    "{}: prior latents of shape {:?}, but {k} image(s){} need {shape:?}",
                    given.source,
                    given.shape,
                    if negative_given { " with a negative prompt" } else { "" }
                );
            }
            Some(given.values)
        }
        None => None,
    };
    let default = PriorSettings::default();
    Ok(Some(PriorSettings {
        steps: steps.unwrap_or(default.steps),
        guidance: guidance.unwrap_or(default.guidance),
        latents,
    }))
}

/// A request's settings that are checked against a loaded pipeline before any image is drawn.
pub struct Request<'a> {
    /// `--scheduler`, parsed.
    pub kind: Option<SchedulerKind>,
    /// `--height`, `--width` as [`checked_size`] returned them.
    pub size: [usize; 2],
    pub images_per_prompt: usize,
    /// Every text layer the run uses (`None`: the pipeline's own).
    pub layers: &'a [Option<usize>],
    /// `--latents`.
    pub latents: Option<GivenLatents>,
    pub prior_steps: Option<usize>,
    pub prior_guidance: Option<f64>,
    /// `--prior-latents`.
    pub prior_latents: Option<GivenLatents>,
    pub seed_per_image: bool,
    /// Whether a negative prompt was given (Kandinsky 2.1's prior latents double their rows).
    pub negative_given: bool,
}

/// What [`check_request`] made of a [`Request`].
pub struct Checked {
    /// The `--latents` values, of the shape the request needs.
    pub given: Option<Vec<f32>>,
    /// diffusers' class name of the scheduler that runs.
    pub scheduler: &'static str,
    /// Kandinsky 2.1's prior settings (`None` for any other pipeline).
    pub prior: Option<PriorSettings>,
}

/// Checks `request` against `pipeline` for `prompts`, in one order for the CLI's `generate` and
/// the Python `Pipeline.generate`, so both refuse a request with the same first message: the
/// latent shape of the size, each text layer, the given latents, the scheduler (and
/// `--seed-per-image` with it), Kandinsky 2.1's prior settings; then warns of prompts the
/// tokenizer cuts.
pub fn check_request(pipeline: &PipelineFolder, prompts: &[String], request: Request) -> Result<Checked> {
    let model = &pipeline.model;
    let k = request.images_per_prompt;
    let [height, width] = request.size;
    model.latent_shape(k, height, width)?;
    for &layer in request.layers {
        model.check_layer(layer)?;
    }
    let given = request.latents.map(|given| checked_latents(model, given, k, request.size)).transpose()?;
    let scheduler = scheduler_name(pipeline, request.kind, request.seed_per_image)?;
    let prior = prior_settings(
        model,
        request.prior_steps,
        request.prior_guidance,
        request.prior_latents,
        k,
        request.seed_per_image,
        request.negative_given,
    )?;
    warn_cut_prompts(pipeline, prompts)?;
    Ok(Checked { given, scheduler, prior })
}

/// What every batch of a run shares.
pub struct Job<'a> {
    pub pipeline: &'a PipelineFolder,
    /// `--scheduler`, parsed.
    pub kind: Option<SchedulerKind>,
    /// The prompts and negative prompts of every row.
    pub prompts: &'a [String],
    pub negatives: &'a [String],
    /// Whether a negative prompt was given at all.
    pub negative_given: bool,
    pub steps: usize,
    pub guidance: f64,
    /// `--true-cfg`.
    pub true_cfg: f64,
    pub seed: u64,
    pub seed_per_image: bool,
    pub images_per_prompt: usize,
    /// `--latents`, for each prompt.
    pub given: Option<&'a [f32]>,
    /// `[height, width]` asked of the pipeline (stage I's with an upscaler).
    pub size: [usize; 2],
    pub device: &'a Device,
    pub upscaler: Option<&'a Upscaler>,
    /// Kandinsky 2.1's prior (`None`: the defaults); other pipelines ignore it.
    pub prior: Option<&'a PriorSettings>,
}

impl Job<'_> {
    /// Whether a batch runs one prompt per call: a scheduler drawing noise needs each prompt's
    /// own generator, and Kandinsky 3's text depends on the batch.
    pub fn one_prompt_per_call(&self) -> Result<bool> {
        Ok(!self.pipeline.model.batch_independent()
            || self.pipeline.scheduler(self.kind)?.kind().draws_noise())
    }

    /// The images of `batch` (prompts sharing a text layer): each item's K images as
    /// `K × H × W × 3` floats.
    pub fn run(&self, batch: &[Item]) -> Result<Vec<(Item, Vec<f32>)>> {
        checkpoint();
        // Every denoising step of this thread is a cancellation point.
        set_step_hook(Some(checkpoint));
        let pipeline = self.pipeline;
        if batch.len() > 1 && self.one_prompt_per_call()? {
            let mut all = Vec::new();
            for item in batch {
                all.extend(self.run(std::slice::from_ref(item))?);
            }
            return Ok(all);
        }
        let prompt_ids =
            batch.iter().map(|it| pipeline.ids(&self.prompts[it.row])).collect::<Result<Vec<_>, _>>()?;
        let negative_ids = batch
            .iter()
            .map(|it| pipeline.negative_ids(&self.negatives[it.row]))
            .collect::<Result<Vec<_>, _>>()?;
        let k = self.images_per_prompt;
        let [height, width] = self.size;
        let model = &pipeline.model;
        let mut values = Vec::new();
        // Each draw's generator, for a scheduler that goes on drawing from it (IF's DDPM).
        let mut generators = Vec::new();
        let mut scheduler = pipeline.scheduler(self.kind)?;
        let noisy = scheduler.kind().draws_noise();
        let seed = self.seed;
        // Kandinsky 2.1 draws its decoder's latents itself, after the prior's, from the prompt's
        // one generator (`Kandinsky21::generate`).
        let chained = matches!(model, Pipeline::Kandinsky21(_));
        if chained && self.seed_per_image {
            bail!("{SEED_PER_IMAGE_KANDINSKY21}");
        }
        for _ in batch {
            match &self.given {
                None if chained => {}
                Some(v) => {
                    values.extend_from_slice(v);
                    if noisy && !chained {
                        generators.push(model.noise_generator(seed, k, height, width, true, torch_path())?);
                    }
                }
                // `--seed-per-image`: image i from its own generator seeded `seed + i`.
                None => {
                    let draws: Vec<(u64, usize)> = match self.seed_per_image {
                        true => (0..k).map(|i| (seed + i as u64, 1)).collect(),
                        false => vec![(seed, k)],
                    };
                    for (seed, n) in draws {
                        values.extend(model.initial_latents(seed, n, height, width, torch_path())?);
                        if noisy {
                            generators.push(model.noise_generator(
                                seed,
                                n,
                                height,
                                width,
                                false,
                                torch_path(),
                            )?);
                        }
                    }
                }
            }
        }
        scheduler.set_noise_generators(generators, torch_path());
        let request = GenerateRequest {
            prompt_ids: &prompt_ids,
            negative_ids: &negative_ids,
            negative_given: self.negative_given,
            images_per_prompt: k,
            height,
            width,
            steps: self.steps,
            guidance: self.guidance,
            true_cfg: self.true_cfg,
            layer: batch[0].layer,
            latents: &values,
        };
        let images = match (self.upscaler, model) {
            (_, Pipeline::Kandinsky21(p)) => {
                let default = PriorSettings::default();
                let prior = self.prior.unwrap_or(&default);
                let run = PriorRun {
                    steps: prior.steps,
                    guidance: prior.guidance,
                    latents: prior.latents.as_deref(),
                };
                let generator = TorchGenerator::manual_seed(seed);
                p.generate(&request, &run, &mut scheduler, generator, torch_path(), self.device)?
            }
            (Some(up), Pipeline::DeepFloydIf(stage_one)) => {
                let raw = stage_one.generate_raw(&request, &mut scheduler, self.device)?;
                let row = batch[0].row;
                let texts = [self.prompts[row].as_str(), self.negatives[row].as_str()];
                up.upscale(seed, texts, batch[0].layer, raw, self.device)?
            }
            _ => model.generate(&request, &mut scheduler, self.device)?,
        };
        let (images, [_, height, width, _]) = images_hwc(images);
        let per_item = k * height * width * 3;
        Ok(batch.iter().zip(images.chunks(per_item)).map(|(it, chunk)| (*it, chunk.to_vec())).collect())
    }
}
