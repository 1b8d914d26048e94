//! Parity with diffusers 0.42 on the committed tiny random-weight Kandinsky 3 pipeline
//! (`scripts/fixtures/make_diffusion_tiny_kandinsky3.py`): the MoVQ decoder
//! (`movq.decode(latents, force_not_quantize=True)`, spatial norms, an attention up block) and
//! the `Kandinsky3UNet` (with a text mask whose second row is all zeros) component by component,
//! then the whole pipeline from the folder (tokenizer, masked T5, UNet, the folder's DDPM
//! scheduler with its variance noise from the seed's generator, or DDIM in its place, MoVQ) in
//! every case — guidance on and off, negative prompts (one longer than the prompt), two images
//! per seed, two prompts in one call, a non-square size, given latents, DiffusionLens T5
//! layers — against diffusers'
//! `output_type="np"` images, on flex (CPU) and wgpu. Bad folders are refused naming the file
//! and key.

use std::path::PathBuf;

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_diffusion::pipeline::images_hwc;
use culturelens_diffusion::pipelines::GenerateRequest;
use culturelens_diffusion_models::unet_kandinsky3::Kandinsky3UNetConfig;
use culturelens_diffusion_models::vq_model::VqModelConfig;
use culturelens_diffusion_schedulers::SchedulerKind;
use culturelens_models::weights::Checkpoint;
use culturelens_models_io::diffusion::PipelineFolder;
use culturelens_rng::{TorchGenerator, TorchNormalPath};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    cpu_capability: String,
    movq: Movq,
    unet: Unet,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    prompt: String,
    /// Several prompts in one call (`prompt` ignored).
    prompts: Option<Vec<String>>,
    negative_prompt: Option<String>,
    seed: Option<u64>,
    images_per_prompt: usize,
    steps: usize,
    guidance: f64,
    height: usize,
    width: usize,
    text_layer: Option<usize>,
    /// The scheduler class replacing the folder's DDPM (`None`: the folder's).
    scheduler: Option<String>,
    latents: Option<Vec<f32>>,
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

#[derive(Deserialize)]
struct Movq {
    latents: Vec<f32>,
    latents_shape: Vec<usize>,
    sample: Vec<f32>,
    sample_shape: Vec<usize>,
}

#[derive(Deserialize)]
struct Unet {
    sample: Vec<f32>,
    sample_shape: Vec<usize>,
    timestep: f32,
    states: Vec<f32>,
    states_shape: Vec<usize>,
    mask: Vec<f32>,
    output: Vec<f32>,
    output_shape: Vec<usize>,
}

fn fixtures() -> PathBuf {
    culturelens_testkit::fixture("diffusion")
}

fn fixture() -> Fixture {
    let json = std::fs::read_to_string(fixtures().join("tiny-kandinsky3.json")).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// `(config.json, safetensors bytes)` of a component of the tiny pipeline.
fn component(name: &str) -> (String, Vec<u8>) {
    let dir = fixtures().join("tiny-kandinsky3").join(name);
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    (json, std::fs::read(dir.join("diffusion_pytorch_model.safetensors")).unwrap())
}

fn max_abs(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max)
}

fn tensor<const D: usize>(values: &[f32], shape: &[usize], device: &Device) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape.to_vec()), device)
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_into_vec::<f32>().unwrap()
}

/// The MoVQ decoder's max abs error against diffusers on `device`.
fn movq_error(device: &Device) -> f32 {
    let f = fixture().movq;
    let (json, bytes) = component("movq");
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    let movq = VqModelConfig::load(&json, checkpoint.vars()).unwrap();
    let out = movq.decode(tensor(&f.latents, &f.latents_shape, device));
    assert_eq!(out.dims().to_vec(), f.sample_shape);
    max_abs(&values(out), &f.sample)
}

/// The UNet's max abs error against diffusers on `device`.
fn unet_error(device: &Device) -> f32 {
    let f = fixture().unet;
    let (json, bytes) = component("unet");
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    let unet = Kandinsky3UNetConfig::load(&json, checkpoint.vars()).unwrap();
    let [b, l] = [f.states_shape[0], f.states_shape[1]];
    let out = unet.forward(
        tensor(&f.sample, &f.sample_shape, device),
        f.timestep,
        tensor(&f.states, &f.states_shape, device),
        tensor(&f.mask, &[b, l], device),
    );
    assert_eq!(out.dims().to_vec(), f.output_shape);
    max_abs(&values(out), &f.output)
}

/// Components' bounds on the CPU and on wgpu, each 1.5–3× the error measured there (flex:
/// MoVQ 1.6e-6, UNet 2.5e-6; wgpu on lavapipe: 1.7e-6 and 2.2e-6).
const MOVQ_CPU: f32 = 4e-6;
const UNET_CPU: f32 = 5e-6;
const MOVQ_WGPU: f32 = 4e-6;
const UNET_WGPU: f32 = 5e-6;

#[test]
fn movq_decoder_matches_diffusers_on_flex() {
    let err = movq_error(&Device::flex());
    println!("movq decode on flex: max abs {err:.2e}");
    assert!(err <= MOVQ_CPU, "{err:.2e}");
}

#[test]
fn unet_matches_diffusers_on_flex() {
    let err = unet_error(&Device::flex());
    println!("Kandinsky3UNet on flex: max abs {err:.2e}");
    assert!(err <= UNET_CPU, "{err:.2e}");
}

#[test]
fn components_match_diffusers_on_wgpu() {
    let device = culturelens_testkit::wgpu();
    let (movq, unet) = (movq_error(&device), unet_error(&device));
    println!("on wgpu: movq decode max abs {movq:.2e}, Kandinsky3UNet max abs {unet:.2e}");
    assert!(movq <= MOVQ_WGPU, "movq {movq:.2e}");
    assert!(unet <= UNET_WGPU, "unet {unet:.2e}");
}

#[test]
fn component_configs_are_refused_by_key() {
    let (movq, _) = component("movq");
    let e = VqModelConfig::from_json(
        &movq.replace("\"lookup_from_codebook\": false", "\"lookup_from_codebook\": true"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`lookup_from_codebook`"), "{e}");
    let e = VqModelConfig::from_json(&movq.replace("\"norm_type\": \"spatial\"", "\"norm_type\": \"batch\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`norm_type`"), "{e}");
    let e = VqModelConfig::from_json(&movq.replace("\"vq_embed_dim\": 4", "\"vq_embed_dim\": 3"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`vq_embed_dim`"), "{e}");
    let (unet, _) = component("unet");
    let e =
        Kandinsky3UNetConfig::from_json(&unet.replace("\"layers_per_block\": 2", "\"layers_per_block\": 1"))
            .unwrap_err()
            .to_string();
    assert!(e.contains("`layers_per_block`"), "{e}");
    let e = Kandinsky3UNetConfig::from_json(&unet.replace("\"groups\": 1", "\"groups\": 3"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`groups`"), "{e}");
    let e = Kandinsky3UNetConfig::from_json(
        &unet.replace("\"attention_head_dim\": 4", "\"attention_head_dim\": 3"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`attention_head_dim`"), "{e}");
    let e = Kandinsky3UNetConfig::from_json(
        &unet.replace("\"block_out_channels\": [\n    8,", "\"block_out_channels\": [\n    6,"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`block_out_channels`"), "{e}");
}

/// diffusers' images of `case` made by culturelens: the seed draws the initial latents (unless
/// given) and then DDPM's variance noise, from one generator, as `generator=` in diffusers.
fn generate(
    pipeline: &PipelineFolder,
    case: &Case,
    path: TorchNormalPath,
    device: &Device,
) -> (Vec<f32>, [usize; 4]) {
    let negative = case.negative_prompt.as_deref().unwrap_or("");
    let prompts = case.prompts.clone().unwrap_or_else(|| vec![case.prompt.clone()]);
    let prompt_ids: Vec<_> = prompts.iter().map(|p| pipeline.ids(p).unwrap()).collect();
    let negative_ids = vec![pipeline.ids(negative).unwrap(); prompts.len()];
    let model = &pipeline.model;
    let k = case.images_per_prompt;
    let mut generator = case.seed.map(TorchGenerator::manual_seed);
    let latents = match (&case.latents, &mut generator) {
        (Some(latents), _) => latents.clone(),
        (None, Some(generator)) => {
            let n: usize =
                model.latent_shape(prompts.len() * k, case.height, case.width).unwrap().iter().product();
            generator.randn(n, path)
        }
        (None, None) => panic!("{}: neither seed nor latents", case.name),
    };
    let kind = case.scheduler.as_deref().map(|name| SchedulerKind::parse(name).unwrap());
    let mut scheduler = pipeline.scheduler(kind).unwrap();
    if let Some(generator) = generator {
        scheduler.set_noise_generator(generator, path);
    }
    let request = GenerateRequest {
        prompt_ids: &prompt_ids,
        negative_ids: &negative_ids,
        negative_given: case.negative_prompt.is_some(),
        images_per_prompt: k,
        height: case.height,
        width: case.width,
        steps: case.steps,
        guidance: case.guidance,
        true_cfg: 1.0,
        layer: case.text_layer,
        latents: &latents,
    };
    images_hwc(model.generate(&request, &mut scheduler, device).unwrap())
}

/// The worst max abs error over the cases named in `only` (all when empty) on `device`.
fn pipeline_error(device: &Device, only: &[&str]) -> f32 {
    let fixture = fixture();
    let pipeline = PipelineFolder::load(&fixtures().join("tiny-kandinsky3"), device, None).unwrap();
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let (mut worst, mut ran) = (0.0f32, 0);
    for case in fixture.cases.iter().filter(|c| only.is_empty() || only.contains(&c.name.as_str())) {
        let (got, shape) = generate(&pipeline, case, path, device);
        assert_eq!(shape.to_vec(), case.image_shape, "{}", case.name);
        let err = max_abs(&got, &case.images);
        println!("kandinsky3 {}: max abs {err:.2e}", case.name);
        worst = worst.max(err);
        ran += 1;
    }
    assert_eq!(ran, if only.is_empty() { fixture.cases.len() } else { only.len() }, "cases run");
    worst
}

/// The images' bounds, 1.5–3× the worst case measured (flex: 3.7e-6, two-images; wgpu on
/// lavapipe: 2.9e-6, cfg).
const PIPELINE_CPU: f32 = 1e-5;
const PIPELINE_WGPU: f32 = 8e-6;

#[test]
fn pipeline_matches_diffusers_on_flex() {
    let err = pipeline_error(&Device::flex(), &[]);
    println!("kandinsky3 on flex: worst max abs {err:.2e}");
    assert!(err <= PIPELINE_CPU, "{err:.2e}");
}

// On lavapipe each case costs seconds of kernel compilation: wgpu runs one case per path.
#[test]
fn pipeline_matches_diffusers_on_wgpu() {
    let cases = ["cfg", "negative-longer", "latents", "text-layer-1-negative", "non-square", "no-cfg"];
    let err = pipeline_error(&culturelens_testkit::wgpu(), &cases);
    println!("kandinsky3 on wgpu: worst max abs {err:.2e}");
    assert!(err <= PIPELINE_WGPU, "{err:.2e}");
}

/// A copy of the tiny folder with `edit` applied, and the error loading it gives.
fn broken(edit: impl FnOnce(&std::path::Path)) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    copy_dir(&fixtures().join("tiny-kandinsky3"), &dir);
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

fn edit_json(path: &std::path::Path, from: &str, to: &str) {
    let json = std::fs::read_to_string(path).unwrap();
    assert!(json.contains(from), "{from}");
    std::fs::write(path, json.replace(from, to)).unwrap();
}

#[test]
fn bad_folders_are_refused_naming_the_file_and_key() {
    let e = broken(|d| std::fs::remove_dir_all(d.join("movq")).unwrap());
    assert!(e.contains("movq/config.json"), "{e}");
    let e =
        broken(|d| edit_json(&d.join("model_index.json"), "\"Kandinsky3UNet\"", "\"UNet2DConditionModel\""));
    assert!(
        e.contains("model_index.json") && e.contains("`unet`: `UNet2DConditionModel` is not supported"),
        "{e}"
    );
    // A UNet whose text width is not the encoder's (and not the checkpoint's).
    let e = broken(|d| {
        edit_json(&d.join("unet/config.json"), "\"encoder_hid_dim\": 16", "\"encoder_hid_dim\": 24")
    });
    assert!(
        e.contains("diffusion_pytorch_model.safetensors") && e.contains("projection_linear.weight"),
        "{e}"
    );
    let e = broken(|d| {
        edit_json(
            &d.join("movq/config.json"),
            "\"lookup_from_codebook\": false",
            "\"lookup_from_codebook\": true",
        )
    });
    assert!(e.contains("movq/config.json") && e.contains("`lookup_from_codebook`"), "{e}");
    let e = broken(|d| {
        std::fs::write(
            d.join("scheduler/scheduler_config.json"),
            r#"{"_class_name": "FlowMatchEulerDiscreteScheduler"}"#,
        )
        .unwrap();
    });
    assert!(e.contains("scheduler_config.json") && e.contains("does not fit Kandinsky3Pipeline"), "{e}");
    let e = broken(|d| std::fs::remove_file(d.join("unet/diffusion_pytorch_model.safetensors")).unwrap());
    assert!(e.contains("unet"), "{e}");
}
