//! Parity with diffusers 0.42 on the committed tiny random-weight flow-matching pipelines
//! (`scripts/fixtures/make_diffusion_tiny_sd3.py`, `make_diffusion_tiny_flux.py`): an SD-3-like
//! and an SD-3.5-like pipeline (qk RMS norms, a dual-attention block), a FLUX.1-dev-like one
//! (guidance embedding, dynamic shifting) and a FLUX.1-schnell-like one. Every case (guidance on
//! and off, negative prompts, FLUX's true CFG, two images per seed, non-square sizes, the
//! default T5 length, a dynamically shifting SD 3 scheduler, given latents — packed for FLUX —,
//! DiffusionLens T5 layers, a Chinese prompt) runs the whole pipeline from the folder (three or
//! two tokenizers and text encoders, transformer, scheduler, VAE) and compares the images with
//! diffusers' `output_type="np"` output, on flex (CPU) and wgpu. Bad folders are refused naming
//! the file and key.

use std::path::PathBuf;

use burn::tensor::Device;
use culturelens_diffusion::pipeline::images_hwc;
use culturelens_diffusion::pipelines::GenerateRequest;
use culturelens_diffusion_schedulers::Scheduler;
use culturelens_models_io::diffusion::PipelineFolder;
use culturelens_rng::TorchNormalPath;
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    cpu_capability: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    prompt: String,
    negative_prompt: Option<String>,
    seed: Option<u64>,
    images_per_prompt: usize,
    steps: usize,
    guidance: f64,
    #[serde(default = "no_true_cfg")]
    true_cfg: f64,
    height: usize,
    width: usize,
    max_sequence_length: usize,
    text_layer: Option<usize>,
    scheduler_config: Option<String>,
    latents: Option<Vec<f32>>,
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

fn no_true_cfg() -> f64 {
    1.0
}

/// The images' bound, issue 30's for the CPU and wgpu alike: measured worst cases are printed
/// with `--nocapture` (BENCHMARKS.md has them).
const BOUND: f32 = 1e-5;

fn fixtures() -> PathBuf {
    culturelens_testkit::fixture("diffusion")
}

fn load(variant: &str, device: &Device) -> (PipelineFolder, Fixture) {
    let pipeline = PipelineFolder::load(&fixtures().join(format!("tiny-{variant}")), device, None).unwrap();
    let json = std::fs::read_to_string(fixtures().join(format!("tiny-{variant}.json"))).unwrap();
    (pipeline, serde_json::from_str(&json).unwrap())
}

/// diffusers' images of `case` made by culturelens.
fn generate(
    pipeline: &mut PipelineFolder,
    case: &Case,
    path: TorchNormalPath,
    device: &Device,
) -> (Vec<f32>, [usize; 4]) {
    pipeline.set_max_sequence_length(case.max_sequence_length).unwrap();
    let negative = case.negative_prompt.as_deref().unwrap_or("");
    let prompt_ids = vec![pipeline.ids(&case.prompt).unwrap()];
    let negative_ids = vec![pipeline.ids(negative).unwrap()];
    let model = &pipeline.model;
    let k = case.images_per_prompt;
    let latents = match (&case.latents, case.seed) {
        (Some(latents), _) => latents.clone(),
        (None, Some(seed)) => model.initial_latents(seed, k, case.height, case.width, path).unwrap(),
        (None, None) => panic!("{}: neither seed nor latents", case.name),
    };
    let request = GenerateRequest {
        prompt_ids: &prompt_ids,
        negative_ids: &negative_ids,
        negative_given: case.negative_prompt.is_some(),
        images_per_prompt: k,
        height: case.height,
        width: case.width,
        steps: case.steps,
        guidance: case.guidance,
        true_cfg: case.true_cfg,
        layer: case.text_layer,
        latents: &latents,
    };
    let mut scheduler = match &case.scheduler_config {
        Some(config) => Scheduler::from_config(
            config,
            Some(culturelens_diffusion_schedulers::SchedulerKind::FlowMatchEulerDiscrete),
        )
        .unwrap(),
        None => pipeline.scheduler(None).unwrap(),
    };
    images_hwc(model.generate(&request, &mut scheduler, device).unwrap())
}

/// Runs the cases of `tiny-{variant}.json` named in `only` (all when empty) on `device`.
fn check(variant: &str, device: &Device, only: &[&str]) {
    let (mut pipeline, fixture) = load(variant, device);
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let mut worst = (0.0f32, String::new());
    let mut ran = 0;
    for case in fixture.cases.iter().filter(|c| only.is_empty() || only.contains(&c.name.as_str())) {
        let (got, shape) = generate(&mut pipeline, case, path, device);
        assert_eq!(shape.to_vec(), case.image_shape, "{variant} {}", case.name);
        let err = got.iter().zip(&case.images).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
        println!("{variant} {}: max abs {err:.2e}", case.name);
        ran += 1;
        if err > worst.0 {
            worst = (err, case.name.clone());
        }
    }
    assert_eq!(ran, if only.is_empty() { fixture.cases.len() } else { only.len() }, "{variant}: cases run");
    assert!(worst.0 <= BOUND, "{variant}: worst case {} differs by {:.2e}", worst.1, worst.0);
}

#[test]
fn sd3_matches_diffusers_on_flex() {
    check("sd3", &Device::flex(), &[]);
}

#[test]
fn sd35_matches_diffusers_on_flex() {
    check("sd35", &Device::flex(), &[]);
}

#[test]
fn flux_dev_matches_diffusers_on_flex() {
    check("flux-dev", &Device::flex(), &[]);
}

#[test]
fn flux_schnell_matches_diffusers_on_flex() {
    check("flux-schnell", &Device::flex(), &[]);
}

// On lavapipe each case costs seconds of kernel compilation, so wgpu runs the cases that cover
// each path once: guidance with a negative prompt, a text layer without guidance, given latents.

#[test]
fn sd3_matches_diffusers_on_wgpu() {
    check("sd3", &culturelens_testkit::wgpu(), &["negative", "text-layer-1-no-cfg", "latents", "non-square"]);
    check("sd35", &culturelens_testkit::wgpu(), &["cfg", "text-layer-1"]);
}

#[test]
fn flux_matches_diffusers_on_wgpu() {
    check("flux-dev", &culturelens_testkit::wgpu(), &["true-cfg", "latents", "non-square", "text-layer-1"]);
    check("flux-schnell", &culturelens_testkit::wgpu(), &["base", "text-layer-1-true-cfg"]);
}

/// A copy of the tiny FLUX-dev folder with `edit` applied, and the error loading it gives.
fn broken(edit: impl FnOnce(&std::path::Path)) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    copy_dir(&fixtures().join("tiny-flux-dev"), &dir);
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

#[test]
fn bad_folders_are_refused_naming_the_file_and_key() {
    // A missing text encoder folder.
    let e = broken(|d| std::fs::remove_dir_all(d.join("text_encoder_2")).unwrap());
    assert!(e.contains("text_encoder_2/config.json"), "{e}");
    // model_index.json without the component.
    let e = broken(|d| {
        let path = d.join("model_index.json");
        let json =
            std::fs::read_to_string(&path).unwrap().replace("\"text_encoder_2\"", "\"text_encoder_x\"");
        std::fs::write(path, json).unwrap();
    });
    assert!(e.contains("model_index.json") && e.contains("`text_encoder_2`: `` is not supported"), "{e}");
    // A transformer config whose shapes are not the checkpoint's.
    let e = broken(|d| {
        let path = d.join("transformer/config.json");
        let json = std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"joint_attention_dim\": 32", "\"joint_attention_dim\": 24");
        std::fs::write(path, json).unwrap();
    });
    assert!(
        e.contains("diffusion_pytorch_model.safetensors") && e.contains("context_embedder.weight"),
        "{e}"
    );
    // A UNet scheduler for a flow-matching pipeline.
    let e = broken(|d| {
        std::fs::write(d.join("scheduler/scheduler_config.json"), r#"{"_class_name": "DDIMScheduler"}"#)
            .unwrap();
    });
    assert!(
        e.contains("scheduler_config.json") && e.contains("DDIMScheduler does not fit FluxPipeline"),
        "{e}"
    );
    // An option the transformer does not implement.
    let e = broken(|d| {
        let path = d.join("transformer/config.json");
        let json = std::fs::read_to_string(&path).unwrap().replace("\"patch_size\": 1", "\"patch_size\": 2");
        std::fs::write(path, json).unwrap();
    });
    assert!(e.contains("transformer/config.json") && e.contains("`patch_size`"), "{e}");
    // An unknown pipeline class.
    let e = broken(|d| {
        let path = d.join("model_index.json");
        let json = std::fs::read_to_string(&path).unwrap().replace("FluxPipeline", "FluxKontextPipeline");
        std::fs::write(path, json).unwrap();
    });
    assert!(e.contains("`_class_name`: `FluxKontextPipeline` is not a supported pipeline"), "{e}");
}
