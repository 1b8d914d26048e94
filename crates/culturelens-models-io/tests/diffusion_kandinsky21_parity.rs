//! Parity with diffusers 0.42 on the committed tiny random-weight Kandinsky 2.1 components
//! (`scripts/fixtures/make_diffusion_tiny_kandinsky21.py`): the `PriorTransformer` (a batch of
//! two, the second row's text padded, at timesteps 999 and 3, and `post_process_latents`) and
//! the decoder's `MultilingualCLIP` (two padded rows: the pooled projection and the last hidden
//! state, and both at DiffusionLens' layer 1) and the decoder UNet (IF's UNet with Kandinsky
//! 2.1's `text_image_proj` context and `text_image` time conditioning) on flex (CPU) and wgpu.
//!
//! Then the prior pipeline (`KandinskyPriorPipeline`: CLIP text with projection, the prior,
//! `UnCLIPScheduler` with its variance noise from the seed's generator, the zero image's
//! embedding from `CLIPVisionModelWithProjection`) against diffusers' image embeddings —
//! guidance on and off, negative prompts with and without guidance, two images per prompt, two
//! prompts (one truncated), given latents — and the decoder pipeline (`KandinskyPipeline`:
//! M-CLIP, the UNet with image embeddings, the folder's DDIM or DDPM with its variance noise
//! from the seed's generator, the MoVQ) against diffusers' `output_type="np"` images in every
//! case — guidance on and off, a negative prompt, two images per prompt, two prompts, a
//! non-square size, given latents, M-CLIP layer 1.
//!
//! Then the combined pipeline (`KandinskyCombinedPipeline`, `Kandinsky21::generate`) on the
//! folder as `PipelineFolder` loads it, with its real CLIP and XLM-R tokenizers and one generator
//! through prior and decoder, against diffusers' images: two prompts of two images in one call
//! (diffusers' pairing of tiled prompts with the prior's rows), and four of `generate`'s cases.
//!
//! Bad configs are refused naming the key. (`UnCLIPScheduler`'s step-by-step parity is
//! culturelens-diffusion-schedulers' `unclip` test.)

use std::path::PathBuf;

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_diffusion::pipeline::images_hwc;
use culturelens_diffusion::pipeline_kandinsky21::{ImageEmbeds, Kandinsky21Decoder};
use culturelens_diffusion::pipeline_kandinsky21_combined::PriorRun;
use culturelens_diffusion::pipeline_kandinsky21_prior::{Kandinsky21Prior, zero_image};
use culturelens_diffusion::pipelines::{GenerateRequest, Pipeline};
use culturelens_diffusion_models::prior_transformer::PriorTransformerConfig;
use culturelens_diffusion_models::unet_if::{IfUNetConfig, TextImage};
use culturelens_diffusion_models::vq_model::VqModelConfig;
use culturelens_diffusion_schedulers::{Scheduler, SchedulerKind, UnClip};
use culturelens_models::clip::{ClipTextWithProjectionConfig, ClipVisionWithProjectionConfig};
use culturelens_models::multilingual_clip::MultilingualClipConfig;
use culturelens_models::weights::Checkpoint;
use culturelens_models_io::diffusion::PipelineFolder;
use culturelens_rng::{TorchGenerator, TorchNormalPath};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    cpu_capability: String,
    /// `KandinskyCombinedPipeline.__call__` on the saved folder (`generate`'s cases).
    cases: Vec<CombinedCase>,
    prior: Prior,
    mclip: Mclip,
    unet: Unet,
    prior_pipeline: Vec<PriorCase>,
    decoder: Vec<DecoderCase>,
}

#[derive(Deserialize)]
struct PriorCase {
    name: String,
    prompt_ids: Vec<Vec<u32>>,
    negative_ids: Vec<u32>,
    negative_prompt: Option<String>,
    seed: u64,
    images_per_prompt: usize,
    steps: usize,
    guidance: f64,
    latents: Option<Vec<f32>>,
    rows: usize,
    image_embeds: Vec<f32>,
    negative_image_embeds: Vec<f32>,
}

#[derive(Deserialize)]
struct DecoderCase {
    name: String,
    prompt_ids: Vec<Vec<u32>>,
    negative_ids: Vec<u32>,
    negative_prompt: Option<String>,
    image_embeds: Vec<f32>,
    negative_image_embeds: Vec<f32>,
    seed: u64,
    images_per_prompt: usize,
    steps: usize,
    guidance: f64,
    height: usize,
    width: usize,
    text_layer: Option<usize>,
    /// `DDPMScheduler` in place of the folder's DDIM (`None`: the folder's).
    scheduler: Option<String>,
    /// Given latents (the seed then draws nothing).
    latents: Option<Vec<f32>>,
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

#[derive(Deserialize)]
struct CombinedCase {
    name: String,
    prompt: String,
    prompts: Option<Vec<String>>,
    negative_prompt: Option<String>,
    seed: u64,
    images_per_prompt: usize,
    steps: usize,
    guidance: f64,
    prior_steps: usize,
    prior_guidance: f64,
    height: usize,
    width: usize,
    scheduler: Option<String>,
    text_layer: Option<usize>,
    latents: Option<Vec<f32>>,
    prior_latents: Option<Vec<f32>>,
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

#[derive(Deserialize)]
struct Unet {
    sample: Vec<f32>,
    states: Vec<f32>,
    states_shape: Vec<usize>,
    text_embeds: Vec<f32>,
    image_embeds: Vec<f32>,
    timestep: f32,
    output: Vec<f32>,
    output_shape: Vec<usize>,
}

#[derive(Deserialize)]
struct Mclip {
    ids: Vec<Vec<u32>>,
    pooled: Vec<f32>,
    states: Vec<f32>,
    layer1_states: Vec<f32>,
    layer1_pooled: Vec<f32>,
}

#[derive(Deserialize)]
struct Prior {
    hidden: Vec<f32>,
    proj: Vec<f32>,
    states: Vec<f32>,
    states_shape: Vec<usize>,
    /// The tokenizer's 0/1 attention mask, row-major `[batch, tokens]`.
    mask: Vec<u8>,
    calls: Vec<PriorCall>,
    post_processed: Vec<f32>,
}

#[derive(Deserialize)]
struct PriorCall {
    timestep: f32,
    output: Vec<f32>,
}

fn fixtures() -> PathBuf {
    culturelens_testkit::fixture("diffusion")
}

fn fixture() -> Fixture {
    let json = std::fs::read_to_string(fixtures().join("tiny-kandinsky21.json")).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// `(config.json, weights)` of the component `name` of the tiny pipeline `folder`.
fn component(folder: &str, name: &str, weights: &str) -> (String, Vec<u8>) {
    let dir = fixtures().join(folder).join(name);
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    (json, std::fs::read(dir.join(weights)).unwrap())
}

fn prior_component() -> (String, Vec<u8>) {
    component("tiny-kandinsky21", "prior_prior", "diffusion_pytorch_model.safetensors")
}

fn mclip_component() -> (String, Vec<u8>) {
    component("tiny-kandinsky21", "text_encoder", "model.safetensors")
}

fn unet_component() -> (String, Vec<u8>) {
    component("tiny-kandinsky21", "unet", "diffusion_pytorch_model.safetensors")
}

/// Asserts that each `(from, to, key)` edit of `json` makes `parse` fail naming `key`.
fn refused<T, E: ToString>(json: &str, parse: impl Fn(&str) -> Result<T, E>, edits: &[(&str, &str, &str)]) {
    for (from, to, key) in edits {
        assert!(json.contains(from), "{from}");
        let e = parse(&json.replace(from, to)).err().expect("refused").to_string();
        assert!(e.contains(key), "{to}: {e}");
    }
}

fn max_abs(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max)
}

fn tensor<const D: usize>(values: &[f32], shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), device)
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_into_vec::<f32>().unwrap()
}

/// The prior's max abs error against diffusers on `device`, over both timesteps and the
/// post-processed output.
fn prior_error(device: &Device) -> f32 {
    let f = fixture().prior;
    let (json, bytes) = prior_component();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    let prior = PriorTransformerConfig::load(&json, checkpoint.vars()).unwrap();
    let [b, n, d] = [f.states_shape[0], f.states_shape[1], f.states_shape[2]];
    let padding: Vec<bool> = f.mask.iter().map(|&m| m == 0).collect();
    assert!(padding.contains(&true), "the fixture pads a row");
    let mut worst = 0.0f32;
    let mut last = None;
    for call in &f.calls {
        let out = prior.forward(
            tensor(&f.hidden, [b, d], device),
            call.timestep,
            tensor(&f.proj, [b, d], device),
            tensor(&f.states, [b, n, d], device),
            Some(&padding),
        );
        worst = worst.max(max_abs(&values(out.clone()), &call.output));
        last = Some(out);
    }
    let post = prior.post_process_latents(last.unwrap());
    worst.max(max_abs(&values(post), &f.post_processed))
}

/// Bounds 1.5–3× the error measured (flex: 8.9e-7; wgpu on lavapipe: 1.1e-6).
const PRIOR_CPU: f32 = 2e-6;
const PRIOR_WGPU: f32 = 2.5e-6;

#[test]
fn prior_configs_are_refused_by_key() {
    let (json, _) = prior_component();
    refused(
        &json,
        PriorTransformerConfig::from_json,
        &[
            ("\"added_emb_type\": \"prd\"", "\"added_emb_type\": null", "`added_emb_type`"),
            (
                "\"encoder_hid_proj_type\": \"linear\"",
                "\"encoder_hid_proj_type\": null",
                "`encoder_hid_proj_type`",
            ),
            ("\"norm_in_type\": null", "\"norm_in_type\": \"batch\"", "`norm_in_type`"),
            ("\"additional_embeddings\": 4", "\"additional_embeddings\": 3", "`additional_embeddings`"),
            ("\"time_embed_act_fn\": \"silu\"", "\"time_embed_act_fn\": \"gelu\"", "`time_embed_act_fn`"),
            ("\"dropout\": 0.0", "\"dropout\": 0.0, \"use_flash\": true", "`use_flash`"),
            ("\"num_layers\": 2", "\"num_layers\": 5000", "`num_layers`"),
        ],
    );
}

/// M-CLIP's max abs error against transformers on `device`, over the pooled embedding and the
/// states, at the last layer and at layer 1.
fn mclip_error(device: &Device) -> f32 {
    let f = fixture().mclip;
    let (json, bytes) = mclip_component();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    let mclip = MultilingualClipConfig::load(&json, checkpoint.vars()).unwrap();
    let (pooled, states) = mclip.encode(&f.ids, 2, device);
    let (pooled1, states1) = mclip.encode(&f.ids, 1, device);
    [
        max_abs(&values(pooled), &f.pooled),
        max_abs(&values(states), &f.states),
        max_abs(&values(pooled1), &f.layer1_pooled),
        max_abs(&values(states1), &f.layer1_states),
    ]
    .into_iter()
    .fold(0.0, f32::max)
}

/// Bounds 1.5–3× the error measured (flex: 4.8e-7; wgpu on lavapipe: 4.8e-7).
const MCLIP_CPU: f32 = 1.2e-6;
const MCLIP_WGPU: f32 = 1.2e-6;

#[test]
fn mclip_configs_are_refused_by_key() {
    let (json, _) = mclip_component();
    refused(
        &json,
        MultilingualClipConfig::from_json,
        &[
            ("\"transformerDimensions\": 16", "\"transformerDimensions\": 12", "`transformerDimensions`"),
            ("\"num_attention_heads\": 2", "\"num_attention_heads\": 3", "`num_attention_heads`"),
            ("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 0", "`num_hidden_layers`"),
            ("\"numDims\": 8", "\"numDims\": 0", "`numDims`"),
        ],
    );
    let c = MultilingualClipConfig::from_json(&json).unwrap();
    assert_eq!((c.encoder.hidden_size, c.transformer_dimensions, c.num_dims), (16, 16, 8));
}

/// The decoder UNet's max abs error against diffusers on `device`.
fn unet_error(device: &Device) -> f32 {
    let f = fixture().unet;
    let (json, bytes) = unet_component();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    let unet = IfUNetConfig::load(&json, checkpoint.vars()).unwrap();
    assert!(unet.takes_image_embeds());
    let [b, n, d] = [f.states_shape[0], f.states_shape[1], f.states_shape[2]];
    let width = f.image_embeds.len() / b;
    let image = TextImage {
        text_embeds: tensor(&f.text_embeds, [b, width], device),
        image_embeds: tensor(&f.image_embeds, [b, width], device),
    };
    // The latents have the UNet's 4 input channels; the output adds the variance channels.
    let (h, w) = (f.output_shape[2], f.output_shape[3]);
    let out = unet.forward_with(
        tensor(&f.sample, [b, 4, h, w], device),
        f.timestep,
        &tensor(&f.states, [b, n, d], device),
        None,
        Some(&image),
    );
    assert_eq!(out.dims().to_vec(), f.output_shape);
    max_abs(&values(out), &f.output)
}

/// Bounds 1.5–3× the error measured (flex: 2.0e-6; wgpu on lavapipe: 1.8e-6).
const UNET_CPU: f32 = 5e-6;
const UNET_WGPU: f32 = 4.5e-6;

#[test]
fn unet_configs_are_refused_by_key() {
    let (json, _) = unet_component();
    refused(
        &json,
        IfUNetConfig::from_json,
        &[
            (
                "\"encoder_hid_dim_type\": \"text_image_proj\"",
                "\"encoder_hid_dim_type\": \"image_proj\"",
                "`encoder_hid_dim_type`",
            ),
            (
                "\"addition_embed_type\": \"text_image\"",
                "\"addition_embed_type\": \"image\"",
                "`addition_embed_type`",
            ),
            ("\"encoder_hid_dim\": 16", "\"encoder_hid_dim\": null", "`encoder_hid_dim`"),
        ],
    );
}

fn check(what: &str, device: &str, err: f32, bound: f32) {
    println!("{what} on {device}: max abs {err:.2e}");
    assert!(err <= bound, "{what} on {device}: {err:.2e}");
}

#[test]
fn components_match_diffusers_on_flex() {
    let device = Device::flex();
    check("PriorTransformer", "flex", prior_error(&device), PRIOR_CPU);
    check("MultilingualCLIP", "flex", mclip_error(&device), MCLIP_CPU);
    check("Kandinsky 2.1 UNet", "flex", unet_error(&device), UNET_CPU);
}

#[test]
fn components_match_diffusers_on_wgpu() {
    let device = culturelens_testkit::wgpu();
    check("PriorTransformer", "wgpu", prior_error(&device), PRIOR_WGPU);
    check("MultilingualCLIP", "wgpu", mclip_error(&device), MCLIP_WGPU);
    check("Kandinsky 2.1 UNet", "wgpu", unet_error(&device), UNET_WGPU);
}

/// The decoder pipeline of the tiny folder on `device`.
fn decoder(device: &Device) -> Kandinsky21Decoder {
    let (json, bytes) = mclip_component();
    let text_encoder =
        MultilingualClipConfig::load(&json, Checkpoint::from_bytes(&bytes, device).unwrap().vars()).unwrap();
    let (json, bytes) = unet_component();
    let unet = IfUNetConfig::load(&json, Checkpoint::from_bytes(&bytes, device).unwrap().vars()).unwrap();
    let (json, bytes) = component("tiny-kandinsky21", "movq", "diffusion_pytorch_model.safetensors");
    let movq = VqModelConfig::load(&json, Checkpoint::from_bytes(&bytes, device).unwrap().vars()).unwrap();
    Kandinsky21Decoder::new(text_encoder, unet, movq).unwrap()
}

/// diffusers' images of `case` made by culturelens: the seed draws the initial latents (unless
/// given) and then DDPM's variance noise, from one generator, as `generator=` in diffusers.
fn decode(
    model: &Kandinsky21Decoder,
    case: &DecoderCase,
    path: TorchNormalPath,
    device: &Device,
) -> Vec<f32> {
    let prompts = case.prompt_ids.len();
    let prompt_ids: Vec<Vec<Vec<u32>>> = case.prompt_ids.iter().map(|ids| vec![ids.clone()]).collect();
    let negative_ids = vec![vec![case.negative_ids.clone()]; prompts];
    let k = case.images_per_prompt;
    let mut generator = TorchGenerator::manual_seed(case.seed);
    let latents = case.latents.clone().unwrap_or_else(|| {
        let n: usize = model.latent_shape(prompts * k, case.height, case.width).unwrap().iter().product();
        generator.randn(n, path)
    });
    let dir = fixtures().join("tiny-kandinsky21").join("scheduler");
    let config = std::fs::read_to_string(dir.join("scheduler_config.json")).unwrap();
    let kind = case.scheduler.as_deref().map(|name| SchedulerKind::parse(name).unwrap());
    let mut scheduler = Scheduler::from_config(&config, kind).unwrap();
    scheduler.set_noise_generator(generator, path);
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
    let width = case.image_embeds.len() / prompts;
    let embeds = ImageEmbeds {
        positive: tensor(&case.image_embeds, [prompts, width], device),
        negative: tensor(&case.negative_image_embeds, [prompts, width], device),
    };
    let (images, shape) = images_hwc(model.generate(&request, &embeds, &mut scheduler, device).unwrap());
    assert_eq!(shape.to_vec(), case.image_shape, "{}", case.name);
    images
}

/// The worst max abs error of the decoder over the cases named in `only` (all when empty).
fn decoder_error(device: &Device, only: &[&str]) -> f32 {
    let fixture = fixture();
    let model = decoder(device);
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let (mut worst, mut ran) = (0.0f32, 0);
    for case in fixture.decoder.iter().filter(|c| only.is_empty() || only.contains(&c.name.as_str())) {
        let err = max_abs(&decode(&model, case, path, device), &case.images);
        println!("kandinsky 2.1 decoder {}: max abs {err:.2e}", case.name);
        worst = worst.max(err);
        ran += 1;
    }
    assert_eq!(ran, if only.is_empty() { fixture.decoder.len() } else { only.len() }, "cases run");
    worst
}

/// The images' bounds, 1.5–3× the worst case measured (flex: 6.1e-6, two-prompts; wgpu on
/// lavapipe: 5.2e-6, latents).
const DECODER_CPU: f32 = 1e-5;
const DECODER_WGPU: f32 = 1e-5;

#[test]
fn decoder_pipeline_matches_diffusers_on_flex() {
    let err = decoder_error(&Device::flex(), &[]);
    println!("kandinsky 2.1 decoder on flex: worst max abs {err:.2e}");
    assert!(err <= DECODER_CPU, "{err:.2e}");
}

// On lavapipe each case costs seconds of kernel compilation: wgpu runs one case per path.
#[test]
fn decoder_pipeline_matches_diffusers_on_wgpu() {
    let cases = ["cfg", "no-cfg", "negative", "ddpm", "latents", "text-layer-1"];
    let err = decoder_error(&culturelens_testkit::wgpu(), &cases);
    println!("kandinsky 2.1 decoder on wgpu: worst max abs {err:.2e}");
    assert!(err <= DECODER_WGPU, "{err:.2e}");
}

/// The prior pipeline of the tiny folder on `device` and its scheduler.
fn prior_pipeline(device: &Device) -> (Kandinsky21Prior, UnClip) {
    let (json, bytes) = prior_component();
    let prior =
        PriorTransformerConfig::load(&json, Checkpoint::from_bytes(&bytes, device).unwrap().vars()).unwrap();
    let (json, bytes) = component("tiny-kandinsky21", "prior_text_encoder", "model.safetensors");
    let text_encoder =
        ClipTextWithProjectionConfig::load(&json, Checkpoint::from_bytes(&bytes, device).unwrap().vars())
            .unwrap();
    let (json, bytes) = component("tiny-kandinsky21", "prior_image_encoder", "model.safetensors");
    let size = ClipVisionWithProjectionConfig::from_json(&json).unwrap().vision.image_size;
    let image_encoder =
        ClipVisionWithProjectionConfig::load(&json, Checkpoint::from_bytes(&bytes, device).unwrap().vars())
            .unwrap();
    let zero_embed = image_encoder.image_embeds(zero_image(size, device));
    let dir = fixtures().join("tiny-kandinsky21").join("prior_scheduler");
    let scheduler = UnClip::from_config(&std::fs::read_to_string(dir.join("scheduler_config.json")).unwrap());
    (Kandinsky21Prior::new(prior, text_encoder, zero_embed).unwrap(), scheduler.unwrap())
}

/// The prior's worst max abs error over the image and negative image embeddings of every case
/// on `device`: the seed draws the latents (unless given), then the scheduler's variance noise.
fn prior_pipeline_error(device: &Device) -> f32 {
    let fixture = fixture();
    let (model, mut scheduler) = prior_pipeline(device);
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let mut worst = 0.0f32;
    for case in &fixture.prior_pipeline {
        let prompts = case.prompt_ids.len();
        let prompt_ids: Vec<Vec<Vec<u32>>> = case.prompt_ids.iter().map(|ids| vec![ids.clone()]).collect();
        let negative_ids = vec![vec![case.negative_ids.clone()]; prompts];
        let k = case.images_per_prompt;
        let given = case.negative_prompt.is_some();
        let mut generator = TorchGenerator::manual_seed(case.seed);
        let latents = case.latents.clone().unwrap_or_else(|| {
            let n: usize = model.latent_shape(prompts, k, given).iter().product();
            generator.randn(n, path)
        });
        let request = GenerateRequest {
            prompt_ids: &prompt_ids,
            negative_ids: &negative_ids,
            negative_given: given,
            images_per_prompt: k,
            height: 0,
            width: 0,
            steps: case.steps,
            guidance: case.guidance,
            true_cfg: 1.0,
            layer: None,
            latents: &latents,
        };
        let embeds = model.generate(&request, &mut scheduler, &mut generator, path, device).unwrap();
        assert_eq!(embeds.positive.dims()[0], case.rows, "{}", case.name);
        let err = max_abs(&values(embeds.positive), &case.image_embeds)
            .max(max_abs(&values(embeds.negative), &case.negative_image_embeds));
        println!("kandinsky 2.1 prior {}: max abs {err:.2e}", case.name);
        worst = worst.max(err);
    }
    worst
}

/// The image embeddings' bounds, 1.5–3× the worst case measured (flex: 2.2e-6, two-images; wgpu
/// on lavapipe: 4.3e-6, two-prompts-truncated).
const PRIOR_PIPELINE_CPU: f32 = 4e-6;
const PRIOR_PIPELINE_WGPU: f32 = 8e-6;

#[test]
fn prior_pipeline_matches_diffusers_on_flex() {
    let err = prior_pipeline_error(&Device::flex());
    println!("kandinsky 2.1 prior on flex: worst max abs {err:.2e}");
    assert!(err <= PRIOR_PIPELINE_CPU, "{err:.2e}");
}

#[test]
fn prior_pipeline_matches_diffusers_on_wgpu() {
    let err = prior_pipeline_error(&culturelens_testkit::wgpu());
    println!("kandinsky 2.1 prior on wgpu: worst max abs {err:.2e}");
    assert!(err <= PRIOR_PIPELINE_WGPU, "{err:.2e}");
}

/// The combined pipeline's worst max abs error over the cases named in `only` on `device`: the
/// folder loaded by `PipelineFolder` (its CLIP and XLM-R tokenizers), one generator of the seed
/// through prior and decoder (`Kandinsky21::generate`).
fn combined_error(device: &Device, only: &[&str]) -> f32 {
    let fixture = fixture();
    let folder = PipelineFolder::load(&fixtures().join("tiny-kandinsky21"), device, None).unwrap();
    let Pipeline::Kandinsky21(model) = &folder.model else { panic!("not Kandinsky 2.1") };
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let (mut worst, mut ran) = (0.0f32, 0);
    for case in fixture.cases.iter().filter(|c| only.contains(&c.name.as_str())) {
        let prompts = case.prompts.clone().unwrap_or_else(|| vec![case.prompt.clone()]);
        let prompt_ids: Vec<_> = prompts.iter().map(|p| folder.ids(p).unwrap()).collect();
        let negative = folder.negative_ids(case.negative_prompt.as_deref().unwrap_or("")).unwrap();
        let negative_ids = vec![negative; prompts.len()];
        let kind = case.scheduler.as_deref().map(|name| SchedulerKind::parse(name).unwrap());
        let mut scheduler = folder.scheduler(kind).unwrap();
        let request = GenerateRequest {
            prompt_ids: &prompt_ids,
            negative_ids: &negative_ids,
            negative_given: case.negative_prompt.is_some(),
            images_per_prompt: case.images_per_prompt,
            height: case.height,
            width: case.width,
            steps: case.steps,
            guidance: case.guidance,
            true_cfg: 1.0,
            layer: case.text_layer,
            latents: case.latents.as_deref().unwrap_or(&[]),
        };
        let prior = PriorRun {
            steps: case.prior_steps,
            guidance: case.prior_guidance,
            latents: case.prior_latents.as_deref(),
        };
        let generator = TorchGenerator::manual_seed(case.seed);
        let images = model.generate(&request, &prior, &mut scheduler, generator, path, device).unwrap();
        let (images, shape) = images_hwc(images);
        assert_eq!(shape.to_vec(), case.image_shape, "{}", case.name);
        let err = max_abs(&images, &case.images);
        println!("kandinsky 2.1 combined {}: max abs {err:.2e}", case.name);
        worst = worst.max(err);
        ran += 1;
    }
    assert_eq!(ran, only.len(), "cases run");
    worst
}

/// The combined pipeline's bounds, 1.5–3× the worst case measured, all two-prompts-two-images.
/// Flex: 6.5e-6 through Burn's graph (this crate's tests alone); through the CLI's fused CPU
/// kernels (`culturelens-models/flex-fused`, on in the workspace's test build) 8.2e-6, and
/// 1.69e-5 with the kernels before 2026-11-28 on an AVX2-only machine, where an AVX-512 machine
/// stayed under 1e-5 with the same code: our kernels give the same bits at every SIMD level
/// (`CULTURELENS_SIMD=scalar|avx2`: 8.2e-6 both), so the spread is `gemm`'s microkernel (AVX2 or
/// AVX-512, its own summation order), amplified by the prior's and decoder's steps. The bound
/// is 1.5× that worst (a pairing bug is 0.53 off). Wgpu on lavapipe: 6.1e-6.
const COMBINED_CPU: f32 = 2.5e-5;
const COMBINED_WGPU: f32 = 1e-5;

/// Two prompts of two images in one call pair the tiled prompts with the prior's rows as diffusers
/// does (pairing each image with its own prompt's text instead is 0.53 off); the other cases are
/// `generate`'s, here through the library.
#[test]
fn combined_pipeline_matches_diffusers_on_flex() {
    let cases = ["two-prompts-two-images", "cfg", "ddpm", "prior-latents-negative", "latents"];
    let err = combined_error(&Device::flex(), &cases);
    println!("kandinsky 2.1 combined on flex: worst max abs {err:.2e}");
    assert!(err <= COMBINED_CPU, "{err:.2e}");
}

#[test]
fn combined_pipeline_matches_diffusers_on_wgpu() {
    let err = combined_error(&culturelens_testkit::wgpu(), &["two-prompts-two-images"]);
    println!("kandinsky 2.1 combined on wgpu: worst max abs {err:.2e}");
    assert!(err <= COMBINED_WGPU, "{err:.2e}");
}
