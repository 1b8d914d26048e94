//! CogView4 against transformers 5.23 and diffusers 0.42 on the fixtures of
//! `scripts/fixtures/make_diffusion_tiny_cogview4.py`: the tiny random-weight `GlmModel`'s
//! `hidden_states[k]` for every k (grouped-query attention with biases, head_dim ≠ hidden / heads,
//! the partial interleaved rotary embedding) on the left-padded ids CogView4's pipeline builds,
//! without a mask (as the pipeline calls it) and with the tokenizer's mask, and on an unpadded
//! row; and one `CogView4Transformer2DModel` call against diffusers' (non-square latents, size
//! conditions that differ from each other); on flex (CPU) and wgpu. Then the pipeline: the
//! tokenizer's ids, truncation count and `_get_glm_embeds`' left padding against transformers',
//! and every case of `tiny-cogview4.json` (guidance on and off, a negative prompt, a seed, two
//! images, given latents, a non-square Chinese prompt, a prompt truncated to 8 tokens,
//! DiffusionLens GLM layer 1 with and without guidance) run from the folder against diffusers'
//! `output_type="np"` images; bad folders are refused naming the file and key.

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_diffusion::pipeline::images_hwc;
use culturelens_diffusion::pipelines::GenerateRequest;
use culturelens_diffusion_models::transformer_cogview4::{
    CogView4Transformer2DModel, CogView4TransformerConfig, rotary_embedding,
};
use culturelens_models::glm::{GlmConfig, GlmModel};
use culturelens_models::weights::Checkpoint;
use culturelens_models_io::diffusion::PipelineFolder;
use culturelens_models_io::diffusion::cogview4::GlmTokenizer;
use culturelens_rng::TorchNormalPath;
use safetensors::SafeTensors;
use serde::Deserialize;

/// `tests/fixtures/diffusion/`.
fn fixtures() -> PathBuf {
    culturelens_testkit::fixture("diffusion")
}

/// The reference tensors of `tiny-cogview4-glm.safetensors`.
struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    fn open() -> Self {
        Self { bytes: std::fs::read(fixtures().join("tiny-cogview4-glm.safetensors")).unwrap() }
    }

    fn values<T: Copy>(&self, name: &str, from: fn(&[u8]) -> T, width: usize) -> (Vec<usize>, Vec<T>) {
        let tensors = SafeTensors::deserialize(&self.bytes).unwrap();
        let view = tensors.tensor(name).unwrap();
        (view.shape().to_vec(), view.data().chunks_exact(width).map(from).collect())
    }

    fn f32s(&self, name: &str) -> Vec<f32> {
        self.values(name, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]), 4).1
    }

    fn rows(&self, name: &str) -> Vec<Vec<i64>> {
        let (shape, v) = self.values(name, |b| i64::from_le_bytes(b.try_into().unwrap()), 8);
        v.chunks(shape[1]).map(<[i64]>::to_vec).collect()
    }

    fn ids(&self, name: &str) -> Vec<Vec<u32>> {
        self.rows(name).into_iter().map(|r| r.into_iter().map(|i| i as u32).collect()).collect()
    }
}

fn text_encoder(device: &Device) -> GlmModel {
    let dir = fixtures().join("tiny-cogview4").join("text_encoder");
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    GlmConfig::load(&json, checkpoint.vars()).unwrap()
}

/// The hidden states' bound on flex and wgpu alike: about twice the worst case measured on
/// either (printed with `--nocapture`).
const GLM_BOUND: f32 = 4e-6;

fn check_glm(device: &Device) {
    let reference = Reference::open();
    let model = text_encoder(device);
    assert_eq!(model.num_layers(), 3);
    let padded = reference.ids("ids.padded");
    let mask: Vec<Vec<bool>> =
        reference.rows("mask.padded").into_iter().map(|r| r.into_iter().map(|m| m == 1).collect()).collect();
    assert!(mask.iter().flatten().any(|m| !m), "the fixture's batch is padded");
    let single = reference.ids("ids.single");
    let mut worst = (0.0f32, String::new());
    for (name, ids, mask) in
        [("nomask", &padded, None), ("masked", &padded, Some(mask.as_slice())), ("single", &single, None)]
    {
        for k in 0..=3 {
            let got = model
                .hidden_state(ids, mask, k, device)
                .into_data()
                .convert::<f32>()
                .try_into_vec::<f32>()
                .unwrap();
            let want = reference.f32s(&format!("{name}.{k}"));
            assert_eq!(got.len(), want.len(), "{name}.{k}");
            let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
            println!("glm {name} hidden_states[{k}]: max abs {err:.2e}");
            if err > worst.0 || err.is_nan() {
                worst = (err, format!("{name} hidden_states[{k}]"));
            }
        }
    }
    assert!(worst.0 <= GLM_BOUND, "glm {}: max abs {:.2e}", worst.1, worst.0);
}

#[test]
fn glm_hidden_states_match_transformers_on_flex() {
    check_glm(&Device::flex());
}

#[test]
fn glm_hidden_states_match_transformers_on_wgpu() {
    check_glm(&culturelens_testkit::wgpu());
}

#[test]
fn a_glm_checkpoint_of_other_shapes_is_refused_with_the_key() {
    let device = Device::flex();
    let dir = fixtures().join("tiny-cogview4").join("text_encoder");
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, &device).unwrap();
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let e = GlmConfig::load(
        &json.replace("\"intermediate_size\": 40", "\"intermediate_size\": 20"),
        checkpoint.vars(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("layers.0.mlp.gate_up_proj.weight") && e.contains("[40, 32]"), "{e}");
    let e = GlmConfig::load(
        &json.replace("\"attention_bias\": true", "\"attention_bias\": false"),
        checkpoint.vars(),
    )
    .map(|_| ())
    .err();
    assert!(e.is_none(), "a bias-free config reads the weights it needs and ignores the biases");
    let e = GlmConfig::load(&json.replace("\"head_dim\": 12", "\"head_dim\": 8"), checkpoint.vars())
        .unwrap_err()
        .to_string();
    assert!(e.contains("layers.0.self_attn.q_proj.weight"), "{e}");
}

fn transformer(device: &Device) -> CogView4Transformer2DModel {
    let dir = fixtures().join("tiny-cogview4").join("transformer");
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("diffusion_pytorch_model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    CogView4TransformerConfig::load(&json, checkpoint.vars()).unwrap()
}

/// The transformer output's bound on flex and wgpu alike: about twice the worst case measured.
const TRANSFORMER_BOUND: f32 = 1e-6;

/// One call of `CogView4Transformer2DModel` on non-square latents (8 × 4 patches) with size
/// conditions that differ from each other (original 48 × 24, crop (4, 8), target 32 × 16).
fn check_transformer(device: &Device) {
    let bytes = std::fs::read(fixtures().join("tiny-cogview4-transformer.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let get = |name: &str| {
        let view = tensors.tensor(name).unwrap();
        let values: Vec<f32> =
            view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        (view.shape().to_vec(), values)
    };
    let model = transformer(device);
    let (shape, latents) = get("latents");
    let latents =
        Tensor::<4>::from_data(TensorData::new(latents, [shape[0], shape[1], shape[2], shape[3]]), device);
    let (shape, context) = get("context");
    let context = Tensor::<3>::from_data(TensorData::new(context, [shape[0], shape[1], shape[2]]), device);
    let t = get("timestep").1[0];
    let sizes: [f32; 6] = get("sizes").1.try_into().unwrap();
    let c = &model.config;
    let rope = rotary_embedding(
        c.attention_head_dim,
        [c.rope_axes_dim[0], c.rope_axes_dim[1]],
        16 / c.patch_size,
        8 / c.patch_size,
        device,
    );
    let got = model.forward(latents, context, t, &sizes, &rope).into_data().try_into_vec::<f32>().unwrap();
    let want = get("out").1;
    assert_eq!(got.len(), want.len());
    let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
    println!("cogview4 transformer: max abs {err:.2e}");
    assert!(err <= TRANSFORMER_BOUND, "cogview4 transformer: max abs {err:.2e}");
}

#[test]
fn transformer_matches_diffusers_on_flex() {
    check_transformer(&Device::flex());
}

#[test]
fn transformer_matches_diffusers_on_wgpu() {
    check_transformer(&culturelens_testkit::wgpu());
}

#[derive(Deserialize)]
struct Fixture {
    cpu_capability: String,
    cases: Vec<Case>,
    tokens: Vec<TokenCase>,
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
    height: usize,
    width: usize,
    max_sequence_length: usize,
    text_layer: Option<usize>,
    latents: Option<Vec<f32>>,
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

#[derive(Deserialize)]
struct TokenCase {
    text: String,
    max_sequence_length: usize,
    /// transformers' ids (specials added, truncated, unpadded).
    ids: Vec<u32>,
    /// Tokens truncation cut.
    cut: usize,
    /// `_get_glm_embeds`' ids: left-padded to a multiple of 16.
    padded: Vec<u32>,
}

fn fixture() -> Fixture {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("tiny-cogview4.json")).unwrap()).unwrap()
}

fn pipeline_dir() -> PathBuf {
    fixtures().join("tiny-cogview4")
}

#[test]
fn tokenizer_ids_and_padding_equal_the_pipelines() {
    let fixture = fixture();
    let mut tokenizer = GlmTokenizer::load(&pipeline_dir().join("tokenizer"), 1024).unwrap();
    for case in &fixture.tokens {
        tokenizer.set_max_len(case.max_sequence_length).unwrap();
        let what = format!("{:?} to {}", case.text, case.max_sequence_length);
        assert_eq!(tokenizer.ids(&case.text).unwrap(), case.padded, "{what}");
        assert!(case.padded.ends_with(&case.ids), "{what}");
        assert_eq!(tokenizer.cut(&case.text).unwrap(), case.cut, "{what}");
    }
    assert!(fixture.tokens.iter().any(|c| c.cut > 0), "a truncated case");
}

/// The images' bound on flex and wgpu alike: twice the worst case measured on either (1.5e-6,
/// printed with `--nocapture`), inside issue 31's 1e-5.
const IMAGE_BOUND: f32 = 3e-6;

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
        true_cfg: 1.0,
        layer: case.text_layer,
        latents: &latents,
    };
    let mut scheduler = pipeline.scheduler(None).unwrap();
    images_hwc(model.generate(&request, &mut scheduler, device).unwrap())
}

/// Runs the cases named in `only` (all when empty) on `device`.
fn check_pipeline(device: &Device, only: &[&str]) {
    let fixture = fixture();
    let mut pipeline = PipelineFolder::load(&pipeline_dir(), device, None).unwrap();
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let mut worst = (0.0f32, String::new());
    let mut ran = 0;
    for case in fixture.cases.iter().filter(|c| only.is_empty() || only.contains(&c.name.as_str())) {
        let (got, shape) = generate(&mut pipeline, case, path, device);
        assert_eq!(shape.to_vec(), case.image_shape, "{}", case.name);
        let err = got.iter().zip(&case.images).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
        println!("cogview4 {}: max abs {err:.2e}", case.name);
        ran += 1;
        if err > worst.0 || err.is_nan() {
            worst = (err, case.name.clone());
        }
    }
    assert_eq!(ran, if only.is_empty() { fixture.cases.len() } else { only.len() }, "cases run");
    assert!(worst.0 <= IMAGE_BOUND, "cogview4: worst case {} differs by {:.2e}", worst.1, worst.0);
}

#[test]
fn pipeline_matches_diffusers_on_flex() {
    check_pipeline(&Device::flex(), &[]);
}

// On lavapipe each case costs seconds of kernel compilation: the cases that cover each path once.
#[test]
fn pipeline_matches_diffusers_on_wgpu() {
    check_pipeline(
        &culturelens_testkit::wgpu(),
        &["negative", "latents", "non-square", "text-layer-1-no-cfg"],
    );
}

/// A copy of the tiny CogView4 folder with `edit` applied, and the error loading it gives.
fn broken(edit: impl FnOnce(&Path)) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    copy_dir(&pipeline_dir(), &dir);
    edit(&dir);
    match PipelineFolder::load(&dir, &Device::flex(), None) {
        Ok(_) => panic!("the broken folder loaded"),
        Err(e) => e.to_string(),
    }
}

fn copy_dir(from: &Path, to: &Path) {
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

fn replace_in(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", path.display());
    std::fs::write(path, text.replace(from, to)).unwrap();
}

#[test]
fn bad_cogview4_folders_are_refused_naming_the_file_and_key() {
    let e = broken(|d| std::fs::remove_dir_all(d.join("text_encoder")).unwrap());
    assert!(e.contains("text_encoder/config.json"), "{e}");
    let e = broken(|d| replace_in(&d.join("model_index.json"), "\"GlmModel\"", "\"ChatGLMModel\""));
    assert!(
        e.contains("model_index.json") && e.contains("`text_encoder`: `ChatGLMModel` is not supported"),
        "{e}"
    );
    let e = broken(|d| {
        replace_in(&d.join("transformer/config.json"), "\"text_embed_dim\": 32", "\"text_embed_dim\": 24")
    });
    assert!(
        e.contains("diffusion_pytorch_model.safetensors") && e.contains("patch_embed.text_proj.weight"),
        "{e}"
    );
    let e = broken(|d| {
        std::fs::write(d.join("scheduler/scheduler_config.json"), r#"{"_class_name": "DDIMScheduler"}"#)
            .unwrap();
    });
    assert!(
        e.contains("scheduler_config.json") && e.contains("DDIMScheduler does not fit CogView4Pipeline"),
        "{e}"
    );
    let e = broken(|d| replace_in(&d.join("tokenizer/tokenizer_config.json"), "\"pad_token\"", "\"unused\""));
    assert!(e.contains("tokenizer_config.json") && e.contains("`pad_token` is missing"), "{e}");
    let e = broken(|d| {
        replace_in(
            &d.join("text_encoder/config.json"),
            "\"rope_type\": \"default\"",
            "\"rope_type\": \"yarn\"",
        )
    });
    assert!(e.contains("text_encoder/config.json") && e.contains("`rope_parameters.rope_type`"), "{e}");
}

#[test]
fn the_folder_counts_truncated_tokens() {
    let mut pipeline = PipelineFolder::load(&pipeline_dir(), &Device::flex(), None).unwrap();
    let long = "a photo of the food in china, ".repeat(3);
    assert_eq!(pipeline.cut(&long).unwrap(), 0);
    pipeline.set_max_sequence_length(8).unwrap();
    assert_eq!(pipeline.cut(&long).unwrap(), 31);
    let e = pipeline.set_max_sequence_length(2).unwrap_err().to_string();
    assert!(e.contains("tokenizer.json") && e.contains("--max-sequence-length 2"), "{e}");
}

#[derive(Deserialize)]
struct PromptSetTokens {
    per_pair: usize,
    text_sha256: Vec<String>,
    ids_sha256: Vec<String>,
    full: Vec<FullTokens>,
}

#[derive(Deserialize)]
struct FullTokens {
    text: String,
    max_sequence_length: usize,
    padded: Vec<u32>,
}

/// The pipeline's ids (tokenizer, truncation, left padding) equal transformers' on 1,400 prompts
/// of the four prompt sets in all 35 (set, language) pairs, read with culturelens-prompts from
/// the data mirror, and on edge texts (empty, whitespace runs, compatibility characters, spelled
/// special tokens, emoji) at 1024 and 8 tokens.
#[test]
fn tokenizer_ids_equal_transformers_on_the_four_prompt_sets() {
    let tokens: PromptSetTokens =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("tiny-cogview4-tokens.json")).unwrap())
            .unwrap();
    let prompts = crate::t5::sampled_prompts(tokens.per_pair);
    assert_eq!(prompts.len(), tokens.text_sha256.len());
    assert!(prompts.len() >= 1000, "{} prompts", prompts.len());
    for (i, (text, sha)) in prompts.iter().zip(&tokens.text_sha256).enumerate() {
        assert_eq!(
            &crate::t5::short_sha(text),
            sha,
            "prompt {i} ({text:?}) is not the one the fixture was made from"
        );
    }
    let mut tokenizer = GlmTokenizer::load(&pipeline_dir().join("tokenizer"), 1024).unwrap();
    let wrong: Vec<&String> = prompts
        .iter()
        .zip(&tokens.ids_sha256)
        .filter(|(text, want)| {
            let ids: Vec<String> = tokenizer.ids(text).unwrap().iter().map(u32::to_string).collect();
            &crate::t5::short_sha(&ids.join(",")) != *want
        })
        .map(|(text, _)| text)
        .collect();
    println!("cogview4: {} of {} prompts with transformers' ids", prompts.len() - wrong.len(), prompts.len());
    assert!(wrong.is_empty(), "{} prompts differ, e.g. {:?}", wrong.len(), &wrong[..wrong.len().min(5)]);
    for case in &tokens.full {
        tokenizer.set_max_len(case.max_sequence_length).unwrap();
        assert_eq!(
            tokenizer.ids(&case.text).unwrap(),
            case.padded,
            "{:?} to {}",
            case.text,
            case.max_sequence_length
        );
    }
}
