//! `culturelens generate`: images from prompts with a Stable Diffusion 1.x/2.x, AltDiffusion,
//! Stable Diffusion 3 / 3.5, FLUX.1, CogView4, Lumina 2, Kandinsky 3, Kandinsky 2.1 or DeepFloyd
//! IF (stage I) pipeline in the diffusers folder layout (`model_index.json`'s `_class_name` picks it), run by
//! `culturelens-diffusion` on the chosen device (issues 13, 30 and 31;
//! SoS §3 "Image Generation", §5.1 DiffusionLens).
//!
//! Output: one PNG per image in `--out` and `--out/manifest.csv` (the prompt table's columns,
//! then `image,model,seed,layer,steps,guidance,scheduler`), which `culturelens embed --images
//! OUT/manifest.csv` reads as it is. With `--out-npy`, the decoded images also go to a float32
//! `(N, H, W, 3)` array in `[0, 1]` (diffusers' `output_type="np"`).
//!
//! Seeds: every prompt starts from `torch.Generator().manual_seed(S)` drawing one
//! `(K, c, h, w)` tensor for its K images (diffusers with a CPU generator; FLUX packs it into
//! `(K, tokens, 4c)`); `--seed-per-image` gives image k its own generator seeded `S + k`.
//! `--latents FILE.npy` replaces the draw with the array the pipeline's `latents=` takes.
//! A scheduler whose steps draw noise (DDPM: Kandinsky 3's and DeepFloyd IF's) goes on drawing
//! from the prompt's generator after the initial latents (from a fresh `manual_seed(S)` with
//! `--latents`, as IF's and Kandinsky 3's `__call__` draw nothing else before their loops), so
//! such runs go one prompt per call and refuse `--seed-per-image`; so do Kandinsky 3's, whose text
//! conditioning depends on the other prompts of a batch. Kandinsky 3's images are
//! `⌈H / 64⌉ · 8 · 2^(MoVQ levels − 1)` pixels high (diffusers' `downscale_height_and_width`):
//! a size it would change is refused, naming the size it makes.
//! Kandinsky 2.1 (`KandinskyCombinedPipeline`) runs one generator per prompt through its prior
//! and decoder (`Kandinsky21::generate`): the prior's latents (or `--prior-latents`), the prior's
//! noise, the decoder's latents (or `--latents`), DDPM's noise.
//!
//! Work: `--shard K/N` takes a contiguous range of prompts; each image is written atomically and
//! then logged to `OUT/manifest.csv.resume` (`crate::work`), so a rerun skips finished images
//! and never takes a half-written PNG as done. Everything that can be checked up front (the
//! pipeline folder, sizes, layers, latents, the prompt table) is, before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burn::tensor::Device;
use culturelens_diffusion_models::unet::AttentionSlice;
use culturelens_diffusion_schedulers::SchedulerKind;
use culturelens_files::sha256_hex;
use culturelens_models_io::diffusion::{PipelineFolder, Placement};
use culturelens_models_io::generate::{
    Checked, GivenLatents, Item, Job, PriorSettings, Request, Upscaler, batches, check_request, checked_size,
    image_bytes,
};
use culturelens_prompts::cultext2i::DEFAULT_GIBBERISH_LENGTH;
use culturelens_prompts::{LoadOptions, PromptSet};
use culturelens_table::{Metadata, read_npy_nd, write_atomic, write_metadata_csv, write_npy_nd};

use crate::device::{DeviceChoice, ModelPrecision, select_device_with};
use crate::input::read_prompts;
use crate::prompt_sets::{PromptFilter, load_set, parse_set};
use crate::provenance::{Provenance, as_text_opt, value_name};
use crate::timing::Stages;
use crate::work::part::{DIR_PART, Input, Part};
use crate::work::progress::Progress;
use crate::work::resume::{ResumeLog, RunKey, canonical};
use crate::work::shard::Shard;

/// The columns `generate` adds to the prompt table, in this order.
pub const MANIFEST_COLUMNS: [&str; 7] = ["image", "model", "seed", "layer", "steps", "guidance", "scheduler"];

/// Arguments of `culturelens generate`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(
    about = "Generate images from prompts with a Stable Diffusion 1.x/2.x, AltDiffusion, SDXL (Playground v2.5), Stable Diffusion 3 / 3.5, FLUX.1, CogView4, Lumina 2, Kandinsky 3, Kandinsky 2.1 or DeepFloyd IF (stages I and II) pipeline (diffusers folder layout)"
)]
pub struct GenerateArgs {
    /// Pipeline folder as diffusers' `save_pretrained` writes it (model_index.json, one folder
    /// per component — unet/ or transformer/, vae/, text_encoder*/, tokenizer*/, scheduler/;
    /// safetensors weights). `_class_name` picks the pipeline: StableDiffusionPipeline,
    /// AltDiffusionPipeline, StableDiffusionXLPipeline, StableDiffusion3Pipeline, FluxPipeline or
    /// CogView4Pipeline, Lumina2Pipeline, Kandinsky3Pipeline, KandinskyCombinedPipeline
    /// (Kandinsky 2.1: prior_* components and the decoder's) or IFPipeline (DeepFloyd IF stage I:
    /// 64² pixels; stages II and III are not run).
    #[arg(long, value_name = "DIR", required_unless_present = "model", conflicts_with = "model")]
    pub pipeline: Option<PathBuf>,
    /// Hugging Face hub pipeline ORG/NAME[@REVISION], downloaded (safetensors only) into the
    /// hub's cache instead of --pipeline.
    #[arg(long, value_name = "HF_ID")]
    pub model: Option<String>,
    /// The manifest's `model` column (default: the --model id, else the hub id `save_pretrained`
    /// wrote as `_name_or_path` into the folder's model_index.json, else the --pipeline folder's
    /// name), e.g. `sdxl-base-1.0` for a folder called `pipeline`.
    #[arg(long, value_name = "NAME", value_parser = crate::model_name::parse_name)]
    pub model_name: Option<String>,
    /// One prompt.
    #[arg(
        long,
        value_name = "TEXT",
        conflicts_with_all = ["prompts", "prompt_set"]
    )]
    pub prompt: Option<String>,
    /// A prompt table (CSV with a `prompt` column, e.g. from `culturelens prompts export`; every
    /// column is carried into the manifest) or a `.txt` file with one prompt per line.
    #[arg(long, value_name = "CSV|TXT", conflicts_with = "prompt_set")]
    pub prompts: Option<PathBuf>,
    /// One of the papers' prompt sets (sos, magbig, cube, cultext2i), as `prompts export` gives
    /// it (upstream files from the cache, downloading or $CULTURELENS_DATA_MIRROR).
    #[arg(long, value_name = "NAME", value_parser = parse_set)]
    #[serde(serialize_with = "as_text_opt")]
    pub prompt_set: Option<PromptSet>,
    /// Filters of --prompt-set or --prompts FILE (by its columns).
    #[command(flatten)]
    pub filter: PromptFilter,
    /// With --prompt-set: read its upstream files from this folder instead of the cache or the
    /// network (as `prompts export --mirror`; also $CULTURELENS_DATA_MIRROR).
    #[arg(long, value_name = "DIR", requires = "prompt_set")]
    pub mirror: Option<PathBuf>,
    /// Output folder: the PNGs and manifest.csv.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Negative prompt for classifier-free guidance (default: the table's `negative_prompt`
    /// column where it has one, else the empty prompt, as diffusers).
    #[arg(long, value_name = "TEXT")]
    pub negative_prompt: Option<String>,
    /// Seed of torch's CPU generator for each prompt's initial latents.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Images per prompt (K): one (K, c, h, w) draw per prompt.
    #[arg(long, default_value_t = 1)]
    pub images_per_prompt: usize,
    /// Seed image k of each prompt with S + k (CUBE's consecutive seeds) instead of one draw.
    #[arg(long)]
    pub seed_per_image: bool,
    /// Denoising steps (default: diffusers' for the pipeline, 50 for SD 1.x/2.x, 28 for SD 3 and
    /// FLUX, 100 for IF).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Guidance scale: classifier-free guidance for SD and SD 3 (1.0 or less: none), FLUX-dev's
    /// distilled guidance embedding (schnell ignores it). Default: diffusers' for the pipeline
    /// (7.5 SD, 7.0 SD 3 and IF, 3.5 FLUX).
    #[arg(long)]
    pub guidance: Option<f64>,
    /// FLUX: `true_cfg_scale`, a second transformer call on the negative prompt per step
    /// (with a negative prompt and a scale above 1 only, as diffusers).
    #[arg(long, default_value_t = 1.0)]
    pub true_cfg: f64,
    /// SD 3 and FLUX: T5 tokens (diffusers' `max_sequence_length`, at most 512; default 256 for
    /// SD 3, 512 for FLUX). CogView4: GLM tokens (default 1024); Lumina 2: Gemma tokens, system
    /// prompt included (default 256); a prompt cut to it is warned of.
    #[arg(long, value_name = "N")]
    pub max_sequence_length: Option<usize>,
    /// Image height in pixels, a multiple of 8 (16 for SD 3 and FLUX) (default: diffusers', e.g.
    /// the UNet's sample_size × 8).
    #[arg(long)]
    pub height: Option<usize>,
    /// Image width in pixels, as --height.
    #[arg(long)]
    pub width: Option<usize>,
    /// Scheduler instead of the pipeline's: ddim, pndm, euler, dpm for the UNet pipelines,
    /// flow-euler for SD 3 and FLUX (or a diffusers class name).
    #[arg(long, value_name = "NAME")]
    pub scheduler: Option<String>,
    /// Initial latents instead of the seed, for every prompt: the float32 .npy the pipeline's
    /// `latents=` takes, (K, c, h, w), or FLUX's packed (K, (h/2)(w/2), 4c). IF: the initial
    /// noise (K, 3, H, W); --seed still seeds the DDPM scheduler's variance noise. Kandinsky 2.1:
    /// the decoder's (K, 4, h, w); --seed still drives the prior (see --prior-latents).
    #[arg(long, value_name = "FILE.npy")]
    pub latents: Option<PathBuf>,
    /// Kandinsky 2.1: the prior's initial latents instead of the seed's draw, for every prompt:
    /// the float32 .npy of the combined pipeline's `latents=`, (K, d), or (2K, d) with a negative
    /// prompt (d: the prior's embedding width). --latents is then the decoder's (K, 4, h, w).
    #[arg(long, value_name = "FILE.npy")]
    pub prior_latents: Option<PathBuf>,
    /// Kandinsky 2.1: the prior's denoising steps (diffusers' `prior_num_inference_steps`,
    /// default 25).
    #[arg(long, value_name = "N")]
    pub prior_steps: Option<usize>,
    /// Kandinsky 2.1: the prior's classifier-free guidance scale (`prior_guidance_scale`, default
    /// 4.0; 1.0 or less: none). --guidance is the decoder's.
    #[arg(long, value_name = "SCALE")]
    pub prior_guidance: Option<f64>,
    /// Also write the decoded images as float32 (N, H, W, 3) in [0, 1], in manifest order.
    #[arg(long, value_name = "FILE.npy")]
    pub out_npy: Option<PathBuf>,
    /// DiffusionLens: condition on text-encoder layer K through the final layer norm (SD 3 and
    /// FLUX: T5's layer K, CLIP held at the pipeline's own outputs; CogView4 and Lumina 2: GLM's or
    /// Gemma 2's `hidden_states[K]` without the final norm, K = 1..=L−1, L−1 being the pipeline's
    /// own `[-2]`).
    #[arg(long, value_name = "K", conflicts_with = "text_layers")]
    pub text_layer: Option<usize>,
    /// DiffusionLens sweep: `every:N` (layers N, 2N, …, and the last) or a list `K,K,…`.
    #[arg(long, value_name = "every:N|K,…")]
    pub text_layers: Option<String>,
    /// Backend that runs the pipeline.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
    /// Float type the models store and compute in (f16: GPU only).
    #[arg(long, value_enum, default_value_t = ModelPrecision::F32)]
    pub precision: ModelPrecision,
    /// Prompts per denoising batch.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Attention slicing, diffusers' `enable_attention_slicing(N)`: each UNet attention layer
    /// computes `auto` (half its heads), `max` (one) or N of its batch × heads score matrices at
    /// a time, and the VAE's attention goes image by image. Same images, less memory where the
    /// backend materialises the scores (wgpu, CUDA); the CPU backend never does.
    #[arg(long, value_name = "auto|max|N", value_parser = AttentionSlice::parse)]
    #[serde(serialize_with = "as_text_opt")]
    pub attention_slice: Option<AttentionSlice>,
    /// Keep the pipeline's components in the machine's memory and move each to the device only
    /// while it runs (the text encoders one by one, then the UNet or transformer for a batch's
    /// whole loop, then the VAE): at most one component's weights on the device at a time. The
    /// same images; slower (every batch moves each component once). Changes nothing on the CPU.
    #[arg(long)]
    pub offload: bool,
    /// DeepFloyd IF stage II: after stage I (an `IFPipeline` folder), upscale each image with
    /// this `IFSuperResolutionPipeline` folder to its UNet's `sample_size` (256² for IF-II), the
    /// noise augmentation and generator as diffusers' pipeline (below); the PNGs are stage II's.
    #[arg(long, value_name = "DIR")]
    pub upscale: Option<PathBuf>,
    /// Stage II's denoising steps (diffusers' default 50).
    #[arg(long, default_value_t = 50, requires = "upscale")]
    pub upscale_steps: usize,
    /// Stage II's classifier-free guidance scale (diffusers' default 4.0).
    #[arg(long, default_value_t = 4.0, requires = "upscale")]
    pub upscale_guidance: f64,
    /// Stage II's noise augmentation: the timestep at which the upscaled stage I image is
    /// noised (diffusers' `noise_level`, default 250).
    #[arg(long, default_value_t = 250, requires = "upscale")]
    pub noise_level: usize,
    /// Print `timing <stage> <seconds>` lines to stderr (stages: load, generate, write).
    #[arg(long)]
    pub timings: bool,
    /// Generate only shard K of N of the prompts (1-based, contiguous ranges).
    #[arg(long, value_name = "K/N", value_parser = Shard::parse)]
    #[serde(serialize_with = "as_text_opt")]
    pub shard: Option<Shard>,
}

/// The text layers of a run: `None` is the pipeline's own conditioning.
fn parse_layers(args: &GenerateArgs, layers: usize) -> Result<Vec<Option<usize>>> {
    let Some(spec) = &args.text_layers else { return Ok(vec![args.text_layer]) };
    let list: Vec<usize> = if let Some(every) = spec.strip_prefix("every:") {
        let n: usize = every
            .trim()
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .with_context(|| format!("--text-layers {spec}: `every:N` needs a positive integer N"))?;
        let mut list: Vec<usize> = (1..=layers / n).map(|i| i * n).collect();
        if list.last() != Some(&layers) {
            list.push(layers);
        }
        list
    } else {
        spec.split(',')
            .map(|k| {
                k.trim()
                    .parse::<usize>()
                    .with_context(|| format!("--text-layers {spec}: `{k}` is not a layer"))
            })
            .collect::<Result<_>>()?
    };
    Ok(list.into_iter().map(Some).collect())
}

/// The file name of image `k` of `item` (`layers`: whether the run sweeps layers).
fn image_name(item: Item, k: usize, layers: bool) -> String {
    match (layers, item.layer) {
        (true, Some(l)) => format!("{:06}_l{l:02}_{k:02}.png", item.row),
        _ => format!("{:06}_{k:02}.png", item.row),
    }
}

/// The prompt table: `--prompt` as a one-row table, or `--prompts`.
fn prompt_table(args: &GenerateArgs) -> Result<(Vec<String>, Metadata)> {
    if let Some(set) = args.prompt_set {
        let options = LoadOptions {
            cultext2i: culturelens_prompts::cultext2i::Options {
                gibberish_length: DEFAULT_GIBBERISH_LENGTH,
                seed: 0,
            },
            ..LoadOptions::default()
        };
        let meta = load_set(set, &args.filter.languages, args.mirror.clone(), &options)?.to_metadata();
        let prompts = meta.require_nonempty_column("prompt")?.to_vec();
        return filter_prompts(args, &format!("the {set} prompt set"), prompts, meta);
    }
    match (&args.prompt, &args.prompts) {
        (Some(_), _) if args.filter.is_active() => {
            bail!(
                "--languages, --cultures, --persons, --templates and --limit filter --prompts FILE or \
                 --prompt-set NAME; a single --prompt has nothing to filter"
            )
        }
        (Some(p), _) => {
            Ok((vec![p.clone()], Metadata::from_columns(None, vec![("prompt".into(), vec![p.clone()])])?))
        }
        (None, Some(path)) => {
            let (prompts, meta) = read_prompts(path, "prompt")?;
            if prompts.is_empty() {
                bail!("{}: no prompts", path.display());
            }
            filter_prompts(args, &path.display().to_string(), prompts, meta)
        }
        (None, None) => bail!("give --prompt TEXT, --prompts FILE.csv or --prompt-set NAME"),
    }
}

/// The rows of a prompt table that `--languages`, `--cultures`, `--persons`, `--templates` and
/// `--limit` keep ([`PromptFilter::keep`]).
fn filter_prompts(
    args: &GenerateArgs,
    source: &str,
    prompts: Vec<String>,
    meta: Metadata,
) -> Result<(Vec<String>, Metadata)> {
    let keep = args.filter.keep(source, &meta)?;
    if keep.len() == prompts.len() {
        return Ok((prompts, meta));
    }
    Ok((keep.iter().map(|&i| prompts[i].clone()).collect(), meta.select_rows(&keep)))
}

pub fn run(args: &GenerateArgs) -> Result<()> {
    run_with(args, |job, batch| job.run(batch))
}

/// [`run`] with `make` as the step that turns a batch into images (the tests substitute one that
/// fails chosen prompts): read → plan → generate → write.
fn run_with(
    args: &GenerateArgs,
    make: impl FnMut(&Job, &[Item]) -> Result<Vec<(Item, Vec<f32>)>>,
) -> Result<()> {
    let mut read = read(args)?;
    let mut plan = plan(args, &read)?;
    let failures = generate(args, &mut read, &mut plan, make)?;
    write(args, read, plan, &failures)
}

/// What a run reads and checks before it writes anything: the prompts, the pipeline and every
/// setting that depends on it.
struct Read {
    prompts: Vec<String>,
    meta: Metadata,
    /// `--scheduler`, parsed.
    kind: Option<SchedulerKind>,
    device: Device,
    /// The pipeline folder (`--pipeline`, or the hub snapshot of `--model`).
    dir: PathBuf,
    pipeline: PipelineFolder,
    stages: Stages,
    height: usize,
    width: usize,
    /// `--steps` and `--guidance`, or the pipeline's defaults.
    steps: usize,
    guidance: f64,
    layers: Vec<Option<usize>>,
    /// `--latents`, for each prompt.
    given: Option<Vec<f32>>,
    scheduler_name: &'static str,
    negatives: Vec<String>,
    /// Whether a negative prompt was given (`--negative-prompt` or the table's column).
    negative_given: bool,
    /// The manifest's `model` column.
    model_name: String,
    /// `[height, width]` asked of the pipeline (stage I's with `--upscale`; `height`, `width`
    /// above are the images written).
    request_size: [usize; 2],
    /// `--upscale`: IF stage II.
    upscaler: Option<Upscaler>,
    /// Kandinsky 2.1's prior settings.
    prior: Option<PriorSettings>,
}

/// `--latents` or `--prior-latents` FILE.npy, read, for [`checked_latents`] or
/// [`prior_settings`].
fn read_given(path: &Option<PathBuf>) -> Result<Option<GivenLatents>> {
    let Some(path) = path else { return Ok(None) };
    let (shape, values) = read_npy_nd(path)?;
    Ok(Some(GivenLatents { source: path.display().to_string(), shape, values }))
}

/// Kandinsky 2.1's prior settings as the resume log and a shard's part file record them.
fn describe_prior(prior: &PriorSettings, args: &GenerateArgs) -> String {
    format!("steps={}:guidance={}:latents={:?}", prior.steps, prior.guidance, args.prior_latents)
}

/// Read: the prompt table, the device, the pipeline, sizes, layers, latents, negative prompts;
/// everything that can be checked up front is, before anything is written.
fn read(args: &GenerateArgs) -> Result<Read> {
    if args.batch == 0 || args.images_per_prompt == 0 {
        bail!("--batch and --images-per-prompt must be at least 1");
    }
    let (prompts, meta) = prompt_table(args)?;
    if let Some(name) = MANIFEST_COLUMNS.iter().find(|c| meta.column(c).is_some()) {
        bail!("the prompt table has a column `{name}`, one that generate writes; rename or drop it");
    }
    let kind = args.scheduler.as_deref().map(SchedulerKind::parse).transpose()?;
    let device = select_device_with(args.device, args.precision)?;
    let dir = match (&args.pipeline, &args.model) {
        (Some(dir), _) => dir.clone(),
        // The configs first: the request is checked against them before the weights download.
        (None, Some(model)) => crate::hub::snapshot_pipeline(model, false)?,
        (None, None) => bail!("give --pipeline DIR or --model HF_ID"),
    };
    // Every image-size rule, from the folder's configs before any weights load (or download).
    let [height, width] = checked_size(&dir, args.height, args.width)?;
    if let (None, Some(model)) = (&args.pipeline, &args.model) {
        crate::hub::snapshot_pipeline(model, true)?;
    }
    let started = Instant::now();
    let mut stages = Stages::new(args.timings);
    let place = if args.offload {
        Placement::offloaded(&device, &Device::flex())
    } else {
        Placement::resident(&device)
    };
    let mut pipeline = PipelineFolder::load_to(&dir, &place, kind)?;
    let upscaler = match &args.upscale {
        Some(up) => Some(Upscaler::load(
            up,
            &pipeline.model,
            &place,
            args.seed_per_image,
            [args.upscale_steps, args.noise_level],
            args.upscale_guidance,
        )?),
        None => None,
    };
    pipeline.model.set_attention_slice(args.attention_slice).context("--attention-slice")?;
    if let Some(n) = args.max_sequence_length {
        pipeline.set_max_sequence_length(n)?;
    }
    let model = &pipeline.model;
    eprintln!("loaded the pipeline {} in {:.1?}", dir.display(), started.elapsed());
    stages.lap("load");
    let steps = args.steps.unwrap_or(model.default_steps());
    let guidance = args.guidance.unwrap_or(model.default_guidance());
    let layers = parse_layers(args, model.lens_layers())?;
    let negative_given = args.negative_prompt.is_some() || meta.column("negative_prompt").is_some();
    let Checked { given, scheduler: scheduler_name, prior } = check_request(
        &pipeline,
        &prompts,
        Request {
            kind,
            size: [height, width],
            images_per_prompt: args.images_per_prompt,
            layers: &layers,
            latents: read_given(&args.latents)?,
            prior_steps: args.prior_steps,
            prior_guidance: args.prior_guidance,
            prior_latents: read_given(&args.prior_latents)?,
            seed_per_image: args.seed_per_image,
            negative_given,
        },
    )?;
    if let Some(up) = &upscaler {
        let stage_two = up.text_layers();
        if let Some(k) = layers.iter().flatten().find(|&&k| k > stage_two) {
            bail!("--text-layer {k}: the stage II T5 of --upscale has {stage_two} layers");
        }
    }
    let negatives: Vec<String> = match (&args.negative_prompt, meta.column("negative_prompt")) {
        (Some(n), _) => vec![n.clone(); prompts.len()],
        (None, Some(column)) => column.to_vec(),
        (None, None) => vec![String::new(); prompts.len()],
    };
    let model_name = match &args.model_name {
        Some(name) => name.clone(),
        None => crate::model_name::default_name(args.model.as_deref(), &dir, "model_index.json"),
    };
    let [out_height, out_width] = upscaler.as_ref().map_or([height, width], |up| [up.size, up.size]);
    Ok(Read {
        prompts,
        meta,
        kind,
        device,
        dir,
        pipeline,
        stages,
        height: out_height,
        width: out_width,
        request_size: [height, width],
        upscaler,
        prior,
        steps,
        guidance,
        layers,
        given,
        scheduler_name,
        negatives,
        negative_given,
        model_name,
    })
}

/// What a run makes and what is left of it: every item of this shard, the ones a previous run
/// finished (from the resume log) and the ones still to do.
struct Plan {
    items: Vec<Item>,
    /// Whether the run sweeps text layers (the layer is then part of each file name).
    sweep: bool,
    /// The floats of an image kept in the log for `--out-npy` (0 without it).
    pixels: usize,
    manifest_path: PathBuf,
    log: ResumeLog,
    todo: Vec<Item>,
    /// The finished images by file name, with their floats where `--out-npy` keeps them.
    done: BTreeMap<String, Vec<f32>>,
}

/// Plan: this shard's items, the output folder, the resume log under the run's key (a rerun
/// with other settings starts afresh), and the items still to do.
fn plan(args: &GenerateArgs, read: &Read) -> Result<Plan> {
    let (height, width, k) = (read.height, read.width, args.images_per_prompt);
    let rows: Vec<usize> = Shard::items(args.shard, read.prompts.len()).collect();
    let sweep = args.text_layers.is_some();
    let items: Vec<Item> =
        rows.iter().flat_map(|&row| read.layers.iter().map(move |&layer| Item { row, layer })).collect();
    let pixels = if args.out_npy.is_some() { height * width * 3 } else { 0 };

    let manifest_path = args.out.join("manifest.csv");
    culturelens_files::create_dir_all(&args.out)?;
    let key = RunKey::Generate {
        pipeline: canonical(&read.dir),
        scheduler: read.scheduler_name,
        steps: read.steps,
        guidance: read.guidance,
        height,
        width,
        images_per_prompt: k,
        seed: args.seed,
        seed_per_image: args.seed_per_image,
        negative_prompt: args.negative_prompt.clone(),
        latents: args.latents.clone(),
        precision: args.precision,
        pixels,
        true_cfg: args.true_cfg,
        max_sequence_length: args.max_sequence_length,
        upscale: upscale_settings(args),
        prior: read.prior.as_ref().map(|p| describe_prior(p, args)),
    };
    let (log, finished) = ResumeLog::open(&manifest_path, &key)?;
    let is_done = |item: &Item| (0..k).all(|i| finished.contains_key(&image_name(*item, i, sweep)));
    let todo: Vec<Item> = items.iter().copied().filter(|it| !is_done(it)).collect();
    if todo.len() < items.len() {
        eprintln!("resuming: {} of {} prompts already generated", items.len() - todo.len(), items.len());
    }
    Ok(Plan { items, sweep, pixels, manifest_path, log, todo, done: finished })
}

/// Generate: the items still to do, batch by batch of prompts that share a layer, each image
/// written (atomically) and logged as it is made. A batch that fails is recorded with its
/// error and the others go on; returns the failed prompts' rows and errors.
fn generate(
    args: &GenerateArgs,
    read: &mut Read,
    plan: &mut Plan,
    mut make: impl FnMut(&Job, &[Item]) -> Result<Vec<(Item, Vec<f32>)>>,
) -> Result<Vec<(usize, String)>> {
    let (height, width, k) = (read.height, read.width, args.images_per_prompt);
    let progress = Progress::new(plan.items.len() * k, (plan.items.len() - plan.todo.len()) * k, "images");
    let mut failures: Vec<(usize, String)> = Vec::new();
    let batches = batches(&plan.todo, args.batch);
    let job = Job {
        pipeline: &read.pipeline,
        kind: read.kind,
        prompts: &read.prompts,
        negatives: &read.negatives,
        negative_given: read.negative_given,
        steps: read.steps,
        guidance: read.guidance,
        true_cfg: args.true_cfg,
        seed: args.seed,
        seed_per_image: args.seed_per_image,
        images_per_prompt: args.images_per_prompt,
        given: read.given.as_deref(),
        size: read.request_size,
        device: &read.device,
        upscaler: read.upscaler.as_ref(),
        prior: read.prior.as_ref(),
    };
    // The denoising steps of a batch, as the bar's message (or part of the plain lines): every
    // scheduler step is counted by the diffusion crate; a watcher thread shows the count.
    // A loop takes a step per timestep (PNDM's Runge–Kutta warm-up adds some; a schedule that
    // needs the image size to set its timesteps counts `--steps`).
    let mut scheduler = read.pipeline.scheduler(read.kind)?;
    let per_call = match scheduler.set_timesteps(read.steps) {
        Ok(()) => scheduler.timesteps().len().max(1) as u64,
        Err(_) => read.steps.max(1) as u64,
    };
    let alone = job.one_prompt_per_call()?;
    for batch in batches {
        let calls = if alone { batch.len() as u64 } else { 1 };
        let total = per_call * calls;
        let base = culturelens_diffusion_schedulers::steps_taken();
        // The watcher shows the count every 200 ms until the batch ends, which wakes it at once
        // (dropping `finished`): a plain sleep there held every batch up to 200 ms more.
        let (finished, wait) = std::sync::mpsc::channel::<()>();
        let result = std::thread::scope(|scope| {
            let progress = &progress;
            scope.spawn(move || {
                loop {
                    let taken = culturelens_diffusion_schedulers::steps_taken().saturating_sub(base);
                    progress.set_detail(format!("denoising step {}/{total}", taken.min(total)));
                    match wait.recv_timeout(std::time::Duration::from_millis(200)) {
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        _ => break,
                    }
                }
            });
            let result = make(&job, &batch);
            drop(finished);
            result
        });
        progress.clear_detail();
        match result {
            Ok(outputs) => {
                for (item, images) in outputs {
                    for (i, image) in images.chunks(height * width * 3).enumerate() {
                        let name = image_name(item, i, plan.sweep);
                        write_png(&args.out.join(&name), image, height, width)?;
                        let kept = if plan.pixels > 0 { image.to_vec() } else { Vec::new() };
                        plan.log.append(&name, &kept)?;
                        plan.done.insert(name, kept);
                    }
                }
                plan.log.sync()?;
            }
            Err(e) => {
                for it in &batch {
                    failures.push((it.row, format!("{e:#}")));
                }
            }
        }
        progress.inc(batch.len() * k);
    }
    let seconds = progress.finish().as_secs_f64();
    read.stages.lap("generate");
    let generated = (plan.todo.len() - failures.len()) * k;
    eprintln!("generated {generated} images in {seconds:.1} s ({:.2} images/s)", generated as f64 / seconds);
    Ok(failures)
}

/// Write: the manifest (and the `--out-npy` array) of every finished image in item order; then,
/// when no prompt failed, the part file of a shard, the provenance and the removal of the log.
fn write(args: &GenerateArgs, mut read: Read, plan: Plan, failures: &[(usize, String)]) -> Result<()> {
    let (height, width, k) = (read.height, read.width, args.images_per_prompt);
    let lens_layers = read.pipeline.model.lens_layers();
    let mut manifest_rows = Vec::new();
    let mut extra: Vec<Vec<String>> = vec![Vec::new(); MANIFEST_COLUMNS.len()];
    let mut array = Vec::new();
    for item in &plan.items {
        for i in 0..k {
            let name = image_name(*item, i, plan.sweep);
            let Some(values) = plan.done.get(&name) else { continue };
            manifest_rows.push(item.row);
            let seed = match (&args.latents, args.seed_per_image) {
                // IF's DDPM noise and Kandinsky 2.1's prior still come from the seed's generator.
                (Some(_), _)
                    if read.scheduler_name == SchedulerKind::Ddpm.class_name() || read.prior.is_some() =>
                {
                    args.seed.to_string()
                }
                (Some(_), _) => String::new(),
                (None, true) => (args.seed + i as u64).to_string(),
                (None, false) => args.seed.to_string(),
            };
            let layer = item.layer.unwrap_or(lens_layers).to_string();
            let cells = [
                name,
                read.model_name.clone(),
                seed,
                layer,
                read.steps.to_string(),
                read.guidance.to_string(),
                read.scheduler_name.into(),
            ];
            for (column, cell) in extra.iter_mut().zip(cells) {
                column.push(cell);
            }
            array.extend_from_slice(values);
        }
    }
    let selected = read.meta.select_rows(&manifest_rows);
    let mut columns: Vec<(String, Vec<String>)> =
        selected.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect();
    columns.extend(MANIFEST_COLUMNS.iter().map(|c| c.to_string()).zip(extra));
    let manifest = Metadata::from_columns(Some(plan.manifest_path.clone()), columns)?;
    if let Some(path) = &args.out_npy {
        let n = manifest.n_rows();
        write_atomic(path, |w| write_npy_nd(w, &[n, height, width, 3], &array))?;
    }
    write_atomic(&plan.manifest_path, |w| write_metadata_csv(w, &manifest))?;
    if !failures.is_empty() {
        eprint!("{}", failure_report(failures, &read.prompts));
        bail!(
            "{} prompt(s) failed; the manifest lists the {} images made (rerun to retry the rest, finished images are kept)",
            failures.len(),
            manifest.n_rows()
        );
    }
    if let Some(shard) = args.shard {
        let settings = format!(
            "scheduler={} steps={} guidance={} size={height}x{width} images_per_prompt={k} seed={} seed_per_image={} negative_prompt={:?} latents={:?} text_layers={:?}{}{}",
            read.scheduler_name,
            read.steps,
            read.guidance,
            args.seed,
            args.seed_per_image,
            args.negative_prompt,
            args.latents,
            read.layers,
            flow_settings(args),
            read.prior.as_ref().map(|p| format!(" prior={}", describe_prior(p, args))).unwrap_or_default(),
        );
        let rows_per_item = k * read.layers.len();
        let rows = ShardRows { items: read.prompts.len(), rows: manifest.n_rows(), rows_per_item, settings };
        write_part(args, &read.meta, &read.model_name, shard, &plan.manifest_path, rows)?;
    }
    let dir = &read.dir;
    let mut provenance = Provenance::new("generate", args);
    provenance.model(args.model.as_deref().unwrap_or(&dir.display().to_string()), dir)?;
    if let Some(path) = &args.prompts {
        provenance.input(path)?;
    }
    if let Some(set) = &args.prompt_set {
        provenance.prompt_sets([set.to_string()]);
    }
    provenance.seed("seed", args.seed);
    provenance.device(args.device, args.precision);
    provenance.write_for_dir(&args.out)?;
    plan.log.remove()?;
    read.stages.lap("write");
    eprintln!("wrote {} images and {}", manifest.n_rows(), plan.manifest_path.display());
    Ok(())
}

/// The lines that list the failed prompts: how many, then each one's row, prompt and error.
fn failure_report(failures: &[(usize, String)], prompts: &[String]) -> String {
    let mut report = format!("{} prompt(s) failed:\n", failures.len());
    for (row, e) in failures {
        report += &format!("  row {row} ({:?}): {e}\n", prompts[*row]);
    }
    report
}

/// The settings only the SD 3 and FLUX pipelines read, as a shard's part file records them
/// (empty at their defaults, so SD runs keep their settings line).
fn flow_settings(args: &GenerateArgs) -> String {
    let mut s = String::new();
    if args.true_cfg != 1.0 {
        s.push_str(&format!(" true_cfg={}", args.true_cfg));
    }
    if let Some(n) = args.max_sequence_length {
        s.push_str(&format!(" max_sequence_length={n}"));
    }
    if let Some(u) = upscale_settings(args) {
        s.push_str(&format!(" upscale={u}"));
    }
    s
}

/// `--upscale`'s folder and settings, as the resume log and a shard's part file record them.
fn upscale_settings(args: &GenerateArgs) -> Option<String> {
    args.upscale.as_ref().map(|dir| {
        format!(
            "{}:steps={}:guidance={}:noise_level={}",
            canonical(dir).display(),
            args.upscale_steps,
            args.upscale_guidance,
            args.noise_level
        )
    })
}

/// What a shard of a `generate` run holds: `rows` images of its share of `items` prompts, each
/// prompt making `rows_per_item` images under `settings` (`work::part`).
struct ShardRows {
    items: usize,
    rows: usize,
    rows_per_item: usize,
    settings: String,
}

/// Writes `OUT/part.json` for shard `shard` of a run over `items` prompts that made `rows`
/// images, so `culturelens merge OUT PART_DIR…` can join the shards (`work::part`).
fn write_part(
    args: &GenerateArgs,
    prompts: &Metadata,
    model: &str,
    shard: Shard,
    manifest: &Path,
    ShardRows { items, rows, rows_per_item, settings }: ShardRows,
) -> Result<()> {
    let mut table = Vec::new();
    write_metadata_csv(&mut table, prompts)?;
    let name = match (&args.prompts, &args.prompt_set, &args.prompt) {
        (Some(path), _, _) => path.display().to_string(),
        (None, Some(set), _) => set.to_string(),
        _ => "--prompt".to_string(),
    };
    let input = Input { name, sha256: sha256_hex(&table) };
    let precision = value_name(&args.precision);
    let mut part = Part::new("generate", shard, items, rows, model.to_string(), &precision, input)
        .with_items_of(rows_per_item, settings);
    let part_path = args.out.join(DIR_PART);
    part.add_file(&part_path, "manifest", manifest)?;
    part.write(&part_path)
}

/// Writes `image` (`height × width × 3` floats in [0, 1]) as an 8-bit PNG, atomically, its pixels
/// as diffusers' `numpy_to_pil` rounds them ([`image_bytes`]).
fn write_png(path: &Path, image: &[f32], height: usize, width: usize) -> Result<()> {
    let bytes = image_bytes(image);
    let buffer = image::RgbImage::from_raw(width as u32, height as u32, bytes).expect("h × w × 3 bytes");
    write_atomic(path, |w| {
        let mut encoded = std::io::Cursor::new(Vec::new());
        buffer.write_to(&mut encoded, image::ImageFormat::Png).map_err(std::io::Error::other)?;
        w.write_all(encoded.get_ref())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GenerateArgs,
    }

    fn args(extra: &[&str]) -> GenerateArgs {
        let base = ["generate", "--pipeline", "p", "--prompt", "x", "--out", "o"];
        Cli::parse_from(base.iter().chain(extra)).args
    }

    #[test]
    fn text_layer_sweeps_by_hand() {
        assert_eq!(parse_layers(&args(&[]), 23).unwrap(), [None]);
        assert_eq!(parse_layers(&args(&["--text-layer", "5"]), 23).unwrap(), [Some(5)]);
        // every:4 of 23 layers: 4, 8, …, 20 and the last one.
        let every: Vec<Option<usize>> = [4, 8, 12, 16, 20, 23].into_iter().map(Some).collect();
        assert_eq!(parse_layers(&args(&["--text-layers", "every:4"]), 23).unwrap(), every);
        assert_eq!(
            parse_layers(&args(&["--text-layers", "every:4"]), 12).unwrap(),
            [Some(4), Some(8), Some(12)]
        );
        assert_eq!(parse_layers(&args(&["--text-layers", "1, 3"]), 3).unwrap(), [Some(1), Some(3)]);
        for bad in ["every:0", "every:x", "1,a"] {
            assert!(parse_layers(&args(&["--text-layers", bad]), 3).is_err(), "{bad}");
        }
    }

    /// A prompt that fails (here: the batch step fails the prompt of row 1, as a model error
    /// would) is reported with its row, the other prompts are generated and listed, the run
    /// fails, and a rerun makes only the failed prompt's image: the folder then equals an
    /// uninterrupted run's.
    #[test]
    fn a_failing_prompt_is_reported_and_the_others_go_on() {
        let tmp = tempfile::tempdir().unwrap();
        let prompts = tmp.path().join("prompts.csv");
        let table = "id,prompt\np1,a photo of the food in china\np2,a street in japan\np3,a wedding\n";
        std::fs::write(&prompts, table).unwrap();
        let pipeline = culturelens_testkit::fixture("diffusion/tiny-sd1");
        let args = |out: &Path| {
            let line = ["generate", "--steps", "2", "--height", "16", "--width", "16"];
            let paths =
                [("--pipeline", pipeline.as_path()), ("--prompts", prompts.as_path()), ("--out", out)];
            let paths = paths.iter().flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()]);
            Cli::parse_from(line.iter().map(|a| a.to_string()).chain(paths)).args
        };
        let clean = tmp.path().join("clean");
        run(&args(&clean)).unwrap();

        let out = tmp.path().join("run");
        let failed = run_with(&args(&out), |job, batch| match batch.iter().find(|it| it.row == 1) {
            Some(it) => bail!("a model error for row {}", it.row),
            None => job.run(batch),
        })
        .unwrap_err()
        .to_string();
        assert_eq!(
            failed,
            "1 prompt(s) failed; the manifest lists the 2 images made (rerun to retry the rest, finished \
             images are kept)"
        );
        let report =
            failure_report(&[(1, "a model error for row 1".into())], &["p".into(), "a street".into()]);
        assert_eq!(report, "1 prompt(s) failed:\n  row 1 (\"a street\"): a model error for row 1\n");
        let manifest = |dir: &Path| std::fs::read_to_string(dir.join("manifest.csv")).unwrap();
        let ids: Vec<String> =
            manifest(&out).lines().skip(1).map(|l| l.split(',').next().unwrap().into()).collect();
        assert_eq!(ids, ["p1", "p3"], "the manifest lists the images that were made");
        assert!(out.join("000000_00.png").is_file() && out.join("000002_00.png").is_file());
        assert!(!out.join("000001_00.png").exists());
        assert!(out.join("manifest.csv.resume").is_file(), "the log keeps the finished images");

        // The rerun makes the missing image only (the step fails any other prompt).
        run_with(&args(&out), |job, batch| match batch.iter().find(|it| it.row != 1) {
            Some(it) => bail!("row {} was finished before", it.row),
            None => job.run(batch),
        })
        .unwrap();
        assert_eq!(manifest(&out), manifest(&clean));
        for name in ["000000_00.png", "000001_00.png", "000002_00.png"] {
            assert_eq!(
                std::fs::read(out.join(name)).unwrap(),
                std::fs::read(clean.join(name)).unwrap(),
                "{name}"
            );
        }
        assert!(!out.join("manifest.csv.resume").exists());
    }

    #[test]
    fn image_names_sort_in_manifest_order() {
        let item = Item { row: 12, layer: Some(4) };
        assert_eq!(image_name(item, 3, true), "000012_l04_03.png");
        assert_eq!(image_name(item, 3, false), "000012_03.png");
    }
}
