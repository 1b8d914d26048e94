//! Parity with diffusers 0.42 on the committed tiny random-weight DeepFloyd IF stage I pipeline
//! (`scripts/fixtures/make_diffusion_tiny_if.py`): single calls of IF's UNet (the component
//! check: `ResnetDownsampleBlock2D` / `SimpleCrossAttn*` blocks with added-KV attention, the
//! `text` addition embedding, `encoder_hid_proj`, `scale_shift` GELU resnets, 6 output
//! channels), then the whole `IFPipeline` from the folder (T5 with its attention mask, the
//! UNet, DDPMScheduler with learned variance, dynamic thresholding and its variance noise drawn
//! from the seed's generator) against diffusers' `output_type="np"` images: guidance on and off,
//! negative prompts, two images per seed, a non-square size, given initial noise, DiffusionLens
//! T5 layers; and stage II (`IFSuperResolutionPipeline`, [`load_super_resolution`]) on its own tiny
//! folder; on flex (CPU) and wgpu. Bad folders are refused naming the file and key.
//!
//! [`load_super_resolution`]: culturelens_models_io::diffusion::load_super_resolution

use std::path::PathBuf;

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_diffusion::pipeline::images_hwc;
use culturelens_diffusion::pipelines::{GenerateRequest, Pipeline};
use culturelens_models_io::diffusion::PipelineFolder;
use culturelens_rng::TorchNormalPath;
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    cpu_capability: String,
    cases: Vec<Case>,
    unet_cases: Vec<UNetCase>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    prompt: String,
    negative_prompt: Option<String>,
    seed: u64,
    images_per_prompt: usize,
    steps: usize,
    guidance: f64,
    height: usize,
    width: usize,
    text_layer: Option<usize>,
    latents: Option<Vec<f32>>,
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

#[derive(Deserialize)]
struct UNetCase {
    t: f32,
    sample_shape: [usize; 4],
    sample: Vec<f32>,
    text_shape: [usize; 3],
    text: Vec<f32>,
    out_shape: [usize; 4],
    out: Vec<f32>,
}

/// The images' bound on flex (issue 31's cap; measured worst 7.9e-6 stage I, 8.6e-6 stage II,
/// printed with `--nocapture`): IF's sampler amplifies float32 rounding — diffusers' own images
/// move by ~1e-5 when its UNet outputs get 2e-6 of noise at guidance 3, which is why the
/// fixture guides at 2.
const BOUND: f32 = 1e-5;
/// The single UNet calls' bound (outputs of magnitude up to ~3; measured 1.7e-6).
const UNET_BOUND: f32 = 4e-6;
/// wgpu's bound (lavapipe; measured worst 9.3e-6, stage II's text layer).
const WGPU_BOUND: f32 = 2e-5;

fn fixtures() -> PathBuf {
    culturelens_testkit::fixture("diffusion")
}

fn load(device: &Device) -> (PipelineFolder, Fixture) {
    let pipeline = PipelineFolder::load(&fixtures().join("tiny-if"), device, None).unwrap();
    let json = std::fs::read_to_string(fixtures().join("tiny-if.json")).unwrap();
    (pipeline, serde_json::from_str(&json).unwrap())
}

fn max_abs(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max)
}

fn unet_check(device: &Device) {
    let (pipeline, fixture) = load(device);
    let Pipeline::DeepFloydIf(p) = &pipeline.model else { panic!("not an IF pipeline") };
    assert_eq!(fixture.unet_cases.len(), 3);
    let mut worst = 0.0f32;
    for case in &fixture.unet_cases {
        let sample = Tensor::<4>::from_data(TensorData::new(case.sample.clone(), case.sample_shape), device);
        let text = Tensor::<3>::from_data(TensorData::new(case.text.clone(), case.text_shape), device);
        let out = p.unet.forward(sample, case.t, &text, None);
        assert_eq!(out.dims(), case.out_shape);
        let err = max_abs(&out.into_data().convert::<f32>().try_into_vec::<f32>().unwrap(), &case.out);
        println!("if unet t={}: max abs {err:.2e}", case.t);
        worst = worst.max(err);
    }
    assert!(worst <= UNET_BOUND, "UNet differs by {worst:.2e}");
}

#[test]
fn if_unet_matches_diffusers_on_flex() {
    unet_check(&Device::flex());
}

/// diffusers' images of `case` made by culturelens, as the CLI makes them: the seed's latents
/// (or the given ones) and the seed's generator handed to the scheduler after that draw.
fn generate(
    pipeline: &PipelineFolder,
    case: &Case,
    path: TorchNormalPath,
    device: &Device,
) -> (Vec<f32>, [usize; 4]) {
    let negative = case.negative_prompt.as_deref().unwrap_or("");
    let prompt_ids = vec![pipeline.ids(&case.prompt).unwrap()];
    let negative_ids = vec![pipeline.ids(negative).unwrap()];
    let model = &pipeline.model;
    let k = case.images_per_prompt;
    let (h, w) = (case.height, case.width);
    let latents = match &case.latents {
        Some(latents) => latents.clone(),
        None => model.initial_latents(case.seed, k, h, w, path).unwrap(),
    };
    let generator = model.noise_generator(case.seed, k, h, w, case.latents.is_some(), path).unwrap();
    let request = GenerateRequest {
        prompt_ids: &prompt_ids,
        negative_ids: &negative_ids,
        negative_given: case.negative_prompt.is_some(),
        images_per_prompt: k,
        height: h,
        width: w,
        steps: case.steps,
        guidance: case.guidance,
        true_cfg: 1.0,
        layer: case.text_layer,
        latents: &latents,
    };
    let mut scheduler = pipeline.scheduler(None).unwrap();
    scheduler.set_noise_generator(generator, path);
    images_hwc(model.generate(&request, &mut scheduler, device).unwrap())
}

fn check(device: &Device, only: &[&str], bound: f32) {
    let (pipeline, fixture) = load(device);
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let mut worst = (0.0f32, String::new());
    let mut ran = 0;
    for case in fixture.cases.iter().filter(|c| only.is_empty() || only.contains(&c.name.as_str())) {
        let (got, shape) = generate(&pipeline, case, path, device);
        assert_eq!(shape.to_vec(), case.image_shape, "{}", case.name);
        let err = max_abs(&got, &case.images);
        println!("if {}: max abs {err:.2e}", case.name);
        ran += 1;
        if err > worst.0 {
            worst = (err, case.name.clone());
        }
    }
    assert_eq!(ran, if only.is_empty() { fixture.cases.len() } else { only.len() }, "cases run");
    assert!(worst.0 <= bound, "worst case {} differs by {:.2e}", worst.1, worst.0);
}

#[test]
fn if_matches_diffusers_on_flex() {
    check(&Device::flex(), &[], BOUND);
}

// On lavapipe each case costs seconds of kernel compilation: the UNet calls, guidance with a
// negative prompt, given noise and a text layer without guidance.
#[test]
fn if_matches_diffusers_on_wgpu() {
    let device = culturelens_testkit::wgpu();
    unet_check(&device);
    check(&device, &["negative", "latents", "text-layer-1-no-cfg"], WGPU_BOUND);
}

/// The scheduler needs the run's generator: without it the pipeline refuses to run.
#[test]
fn if_refuses_to_run_without_the_generator() {
    let device = Device::flex();
    let (pipeline, fixture) = load(&device);
    let case = &fixture.cases[0];
    let ids = vec![pipeline.ids(&case.prompt).unwrap()];
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let latents = pipeline.model.initial_latents(0, 1, 16, 16, path).unwrap();
    let request = GenerateRequest {
        prompt_ids: &ids,
        negative_ids: &ids,
        negative_given: false,
        images_per_prompt: 1,
        height: 16,
        width: 16,
        steps: 2,
        guidance: 7.0,
        true_cfg: 1.0,
        layer: None,
        latents: &latents,
    };
    let mut scheduler = pipeline.scheduler(None).unwrap();
    let e = pipeline.model.generate(&request, &mut scheduler, &device).unwrap_err().to_string();
    assert!(e.contains("needs the run's torch generator"), "{e}");
    // Sizes the UNet's two resampling levels cannot halve are refused.
    let e = pipeline.model.latent_shape(1, 16, 15).unwrap_err().to_string();
    assert!(e.contains("multiples of 2"), "{e}");
}

/// A copy of the tiny IF folder with `edit` applied, and the error loading it gives.
fn broken(edit: impl FnOnce(&std::path::Path)) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    copy_dir(&fixtures().join("tiny-if"), &dir);
    edit(&dir);
    match PipelineFolder::load(&dir, &Device::flex(), None) {
        Ok(_) => panic!("the broken folder loaded"),
        Err(e) => e.to_string(),
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn replace_in(dir: &std::path::Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let json = std::fs::read_to_string(&path).unwrap();
    assert!(json.contains(from), "{file} lacks {from}");
    std::fs::write(path, json.replace(from, to)).unwrap();
}

#[test]
fn bad_if_folders_are_refused_naming_the_file_and_key() {
    let e = broken(|d| std::fs::remove_dir_all(d.join("text_encoder")).unwrap());
    assert!(e.contains("text_encoder/config.json"), "{e}");
    // A scheduler other than DDPM.
    let e = broken(|d| {
        std::fs::write(d.join("scheduler/scheduler_config.json"), r#"{"_class_name": "DDIMScheduler"}"#)
            .unwrap();
    });
    assert!(
        e.contains("scheduler_config.json") && e.contains("DDIMScheduler does not fit IFPipeline"),
        "{e}"
    );
    // A DDPM variance type culturelens does not implement.
    let e = broken(|d| replace_in(d, "scheduler/scheduler_config.json", "\"learned_range\"", "\"learned\""));
    assert!(e.contains("scheduler_config.json") && e.contains("`variance_type`"), "{e}");
    // UNet options outside IF's configuration.
    let e = broken(|d| replace_in(d, "unet/config.json", "\"text_proj\"", "\"image_proj\""));
    assert!(e.contains("unet/config.json") && e.contains("`encoder_hid_dim_type`"), "{e}");
    let e = broken(|d| {
        replace_in(d, "unet/config.json", "\"UNetMidBlock2DSimpleCrossAttn\"", "\"UNetMidBlock2DCrossAttn\"")
    });
    assert!(e.contains("unet/config.json") && e.contains("`mid_block_type`"), "{e}");
    let e = broken(|d| {
        replace_in(d, "unet/config.json", "\"class_embed_type\": null", "\"class_embed_type\": \"timestep\"")
    });
    assert!(
        e.contains("diffusion_pytorch_model.safetensors") && e.contains("class_embedding.linear_1.weight"),
        "{e}"
    );
    // A UNet whose shapes are not the checkpoint's.
    let e = broken(|d| {
        replace_in(d, "unet/config.json", "\"cross_attention_dim\": 32", "\"cross_attention_dim\": 64")
    });
    assert!(e.contains("diffusion_pytorch_model.safetensors") && e.contains("encoder_hid_proj"), "{e}");
    // A text width the UNet does not take.
    let e =
        broken(|d| replace_in(d, "unet/config.json", "\"encoder_hid_dim\": 32", "\"encoder_hid_dim\": 16"));
    assert!(e.contains("unet/config.json") || e.contains("encoder_hid_proj"), "{e}");
}

/// A DDPM scheduler is refused for a pipeline whose loop hands it no generator (SD).
#[test]
fn ddpm_is_refused_for_stable_diffusion() {
    let dir = fixtures().join("tiny-sd1");
    let kind = culturelens_diffusion_schedulers::SchedulerKind::Ddpm;
    match PipelineFolder::load(&dir, &Device::flex(), Some(kind)) {
        Ok(_) => panic!("SD loaded with DDPM"),
        Err(e) => {
            let e = e.to_string();
            assert!(
                e.contains("--scheduler DDPMScheduler does not fit") && e.contains("no generator"),
                "{e}"
            );
        }
    }
}

#[derive(Deserialize)]
struct StageIiFixture {
    cpu_capability: String,
    cases: Vec<StageIiCase>,
}

#[derive(Deserialize)]
struct StageIiCase {
    name: String,
    prompt: String,
    negative_prompt: Option<String>,
    seed: u64,
    images_per_prompt: usize,
    steps: usize,
    guidance: f64,
    height: usize,
    width: usize,
    noise_level: usize,
    text_layer: Option<usize>,
    image: Vec<f32>,
    image_in_shape: [usize; 4],
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

/// Stage II (`IFSuperResolutionPipeline`) on the tiny `tiny-if-ii` folder: the stage I image
/// upscaled (bilinear, corners aligned), noise-augmented at `noise_level` by the
/// `image_noising_scheduler`, concatenated to the UNet's input with the noise level as class
/// label; the initial noise, the augmentation noise and DDPM's variance noise from one
/// generator in diffusers' order.
fn stage_ii_check(device: &Device, only: &[&str], bound: f32) {
    use culturelens_diffusion::pipeline_if_superresolution::UpscaleRequest;
    use culturelens_diffusion_schedulers::Scheduler;
    use culturelens_rng::TorchGenerator;
    let dir = fixtures().join("tiny-if-ii");
    let (model, tokenizer, scheduler_json) =
        culturelens_models_io::diffusion::load_super_resolution(&dir, device).unwrap();
    let json = std::fs::read_to_string(fixtures().join("tiny-if-ii.json")).unwrap();
    let fixture: StageIiFixture = serde_json::from_str(&json).unwrap();
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let mut worst = (0.0f32, String::new());
    let mut ran = 0;
    for case in fixture.cases.iter().filter(|c| only.is_empty() || only.contains(&c.name.as_str())) {
        let ids = |text: &str| vec![tokenizer.ids(text).unwrap()];
        let prompt_ids = vec![ids(&case.prompt)];
        let negative_ids = vec![ids(case.negative_prompt.as_deref().unwrap_or(""))];
        let k = case.images_per_prompt;
        let shape = [k, 3, case.height, case.width];
        let mut generator = TorchGenerator::manual_seed(case.seed);
        let latents = generator.randn(shape.iter().product(), path);
        let request = UpscaleRequest {
            prompt_ids: &prompt_ids,
            negative_ids: &negative_ids,
            images: Tensor::from_data(TensorData::new(case.image.clone(), case.image_in_shape), device),
            images_per_prompt: k,
            height: case.height,
            width: case.width,
            steps: case.steps,
            guidance: case.guidance,
            noise_level: case.noise_level,
            layer: case.text_layer,
            latents: Tensor::from_data(TensorData::new(latents, shape), device),
        };
        let mut scheduler = Scheduler::from_config(&scheduler_json, None).unwrap();
        let out = model.upscale(&request, &mut scheduler, generator, path, device).unwrap();
        let (got, got_shape) = images_hwc(out);
        assert_eq!(got_shape.to_vec(), case.image_shape, "{}", case.name);
        let err = max_abs(&got, &case.images);
        println!("if-ii {}: max abs {err:.2e}", case.name);
        ran += 1;
        if err > worst.0 {
            worst = (err, case.name.clone());
        }
    }
    assert_eq!(ran, if only.is_empty() { fixture.cases.len() } else { only.len() }, "cases run");
    assert!(worst.0 <= bound, "stage II: worst case {} differs by {:.2e}", worst.1, worst.0);
}

#[test]
fn if_stage_ii_matches_diffusers_on_flex() {
    stage_ii_check(&Device::flex(), &[], BOUND);
}

#[test]
fn if_stage_ii_matches_diffusers_on_wgpu() {
    stage_ii_check(&culturelens_testkit::wgpu(), &["negative", "text-layer-1"], WGPU_BOUND);
}
