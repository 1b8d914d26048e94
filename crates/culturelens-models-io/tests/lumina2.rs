//! Lumina 2 against diffusers 0.42.1 / transformers 5.23 on the fixtures of
//! `scripts/fixtures/make_diffusion_tiny_lumina2.py`: the tiny `Gemma2Model`'s
//! `hidden_states[k]` for every k (a padded batch with a row longer than the sliding window, a
//! right- and a left-padded row, and an unpadded batch), and the tiny
//! `Lumina2Transformer2DModel` of the `tiny-lumina2` pipeline on two batches, and the whole
//! pipeline from its folder (Gemma tokenizer with the system prompt, Gemma 2, transformer,
//! flow-matching scheduler, VAE) against diffusers' `output_type="np"` images: guidance on and
//! off, a negative prompt, given latents, two images per seed, `cfg_trunc_ratio` and
//! `cfg_normalization` off, a prompt truncated to 30 tokens (the count of cut tokens checked),
//! a dynamically shifting scheduler (μ from the latents' channel count, as diffusers) and a
//! DiffusionLens text layer, on flex and wgpu. Bad folders are refused naming the file and key.

use burn::tensor::Device;
use culturelens_diffusion::pipeline::images_hwc;
use culturelens_diffusion::pipeline_lumina2::SYSTEM_PROMPT;
use culturelens_diffusion::pipelines::{GenerateRequest, Pipeline};
use culturelens_diffusion_models::transformer_lumina2::{
    Lumina2Transformer2DModel, Lumina2TransformerConfig,
};
use culturelens_diffusion_schedulers::Scheduler;
use culturelens_models::gemma2::{Gemma2Config, Gemma2Model};
use culturelens_models::weights::Checkpoint;
use culturelens_models_io::diffusion::{PipelineFolder, PromptTokenizer};
use culturelens_models_io::gemma_tokenizer::GemmaTokenizer;
use culturelens_rng::TorchNormalPath;
use safetensors::SafeTensors;

fn fixture(rel: &str) -> std::path::PathBuf {
    culturelens_testkit::fixture(&format!("diffusion/{rel}"))
}

/// The reference tensors of a safetensors file.
struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    fn open(name: &str) -> Self {
        Self { bytes: std::fs::read(fixture(name)).unwrap() }
    }

    fn values<T: Copy>(&self, name: &str, from: fn(&[u8]) -> T, width: usize) -> (Vec<usize>, Vec<T>) {
        let tensors = SafeTensors::deserialize(&self.bytes).unwrap();
        let view = tensors.tensor(name).unwrap();
        (view.shape().to_vec(), view.data().chunks_exact(width).map(from).collect())
    }

    fn f32s(&self, name: &str) -> Vec<f32> {
        self.values(name, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]), 4).1
    }

    /// An int64 matrix as rows of u32.
    fn rows(&self, name: &str) -> Vec<Vec<u32>> {
        let (shape, v) = self.values(name, |b| i64::from_le_bytes(b.try_into().unwrap()), 8);
        v.chunks(shape[1]).map(|r| r.iter().map(|&i| i as u32).collect()).collect()
    }
}

fn gemma2(device: &Device) -> Gemma2Model {
    let dir = fixture("tiny-lumina2-gemma2");
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    Gemma2Config::load(&json, checkpoint.vars()).unwrap()
}

/// The hidden states' bounds: about twice the worst cases measured (4.8e-6 on flex, 8.6e-6 on
/// wgpu, whose tanh, exp and reductions differ in the last bits; values up to 11).
const FLEX_BOUND: f32 = 1e-5;
const WGPU_BOUND: f32 = 2e-5;

fn check_gemma2(device: &Device, bound: f32) {
    let reference = Reference::open("tiny-lumina2-gemma2-reference.safetensors");
    let model = gemma2(device);
    assert_eq!(model.num_layers(), 4);
    let mut worst = (0.0f32, String::new());
    for batch in ["padded", "unpadded"] {
        let ids = reference.rows(&format!("{batch}.ids"));
        let mask = reference.rows(&format!("{batch}.mask"));
        for k in 0..=4 {
            let got = model
                .hidden_state(&ids, &mask, k, device)
                .into_data()
                .convert::<f32>()
                .try_into_vec::<f32>()
                .unwrap();
            let want = reference.f32s(&format!("{batch}.hidden.{k}"));
            assert_eq!(got.len(), want.len());
            let err = culturelens_testkit::max_abs(&got, &want);
            println!("gemma2 {batch} hidden_states[{k}]: max abs {err:.2e}");
            if err > worst.0 {
                worst = (err, format!("{batch} hidden_states[{k}]"));
            }
        }
    }
    assert!(worst.0 <= bound, "gemma2 {}: max abs {:.2e}", worst.1, worst.0);
}

#[test]
fn gemma2_hidden_states_match_transformers_on_flex() {
    check_gemma2(&Device::flex(), FLEX_BOUND);
}

#[test]
fn gemma2_hidden_states_match_transformers_on_wgpu() {
    check_gemma2(&culturelens_testkit::wgpu(), WGPU_BOUND);
}

#[test]
fn a_gemma2_checkpoint_of_other_shapes_is_refused_with_the_key() {
    let device = Device::flex();
    let dir = fixture("tiny-lumina2-gemma2");
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, &device).unwrap();
    let json = std::fs::read_to_string(dir.join("config.json"))
        .unwrap()
        .replace("\"intermediate_size\": 48", "\"intermediate_size\": 40");
    let e = Gemma2Config::load(&json, checkpoint.vars()).unwrap_err().to_string();
    assert!(e.contains("layers.0.mlp.gate_proj.weight") && e.contains("[40, 32]"), "{e}");
}

fn transformer(device: &Device) -> Lumina2Transformer2DModel {
    let dir = fixture("tiny-lumina2/transformer");
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("diffusion_pytorch_model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    Lumina2TransformerConfig::load(&json, checkpoint.vars()).unwrap()
}

/// The transformer's bound, flex and wgpu alike: about 2.5 times the worst case measured (7.8e-7
/// on both; outputs up to 1.9).
const TRANSFORMER_BOUND: f32 = 2e-6;

/// `Lumina2Transformer2DModel(x, t, caption, mask)` for captions of different lengths (the
/// joint attention masked) and of equal lengths (unmasked, a non-square latent).
fn check_transformer(device: &Device) {
    let reference = Reference::open("tiny-lumina2-reference.safetensors");
    let model = transformer(device);
    let mut worst = 0.0f32;
    for batch in ["mixed", "equal"] {
        let (x_shape, _) = reference.values(&format!("{batch}.x"), |b| b[0], 4);
        let (cap_shape, _) = reference.values(&format!("{batch}.caption"), |b| b[0], 4);
        let tensor = |name: &str, shape: &[usize]| {
            burn::tensor::TensorData::new(reference.f32s(&format!("{batch}.{name}")), shape.to_vec())
        };
        let x = burn::tensor::Tensor::<4>::from_data(tensor("x", &x_shape), device);
        let caption = burn::tensor::Tensor::<3>::from_data(tensor("caption", &cap_shape), device);
        let t = reference.f32s(&format!("{batch}.t"));
        let lengths: Vec<usize> =
            reference.rows(&format!("{batch}.mask")).iter().map(|r| r.iter().sum::<u32>() as usize).collect();
        let got = model
            .forward(x, &t, caption, &lengths)
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap();
        let want = reference.f32s(&format!("{batch}.out"));
        let err = culturelens_testkit::max_abs(&got, &want);
        println!("lumina2 transformer {batch} (caption lengths {lengths:?}): max abs {err:.2e}");
        worst = worst.max(err);
    }
    assert!(worst <= TRANSFORMER_BOUND, "lumina2 transformer: max abs {worst:.2e}");
}

#[test]
fn transformer_matches_diffusers_on_flex() {
    check_transformer(&Device::flex());
}

#[test]
fn transformer_matches_diffusers_on_wgpu() {
    check_transformer(&culturelens_testkit::wgpu());
}

#[derive(serde::Deserialize)]
struct PipelineFixture {
    cpu_capability: String,
    system_prompt: String,
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    prompt: String,
    negative_prompt: Option<String>,
    seed: Option<u64>,
    images_per_prompt: usize,
    steps: usize,
    guidance: f64,
    cfg_trunc_ratio: f64,
    cfg_normalization: bool,
    height: usize,
    width: usize,
    max_sequence_length: usize,
    text_layer: Option<usize>,
    scheduler_config: String,
    latents: Option<Vec<f32>>,
    cut_tokens: usize,
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

/// The images' bound, flex and wgpu alike: about twice the worst case measured (1.8e-6 on flex,
/// 9.5e-7 on wgpu).
const IMAGE_BOUND: f32 = 4e-6;

/// diffusers' images of `case` made by culturelens from the pipeline folder.
fn generate(
    pipeline: &mut PipelineFolder,
    case: &Case,
    path: TorchNormalPath,
    device: &Device,
) -> (Vec<f32>, [usize; 4]) {
    pipeline.set_max_sequence_length(case.max_sequence_length).unwrap();
    assert_eq!(pipeline.cut(&case.prompt).unwrap(), case.cut_tokens, "{}: tokens cut", case.name);
    let negative = case.negative_prompt.as_deref().unwrap_or("");
    let prompt_ids = vec![pipeline.ids(&case.prompt).unwrap()];
    let negative_ids = vec![pipeline.negative_ids(negative).unwrap()];
    let Pipeline::Lumina2(model) = &mut pipeline.model else { panic!("not a Lumina 2 pipeline") };
    model.cfg_trunc_ratio = case.cfg_trunc_ratio;
    model.cfg_normalization = case.cfg_normalization;
    let k = case.images_per_prompt;
    let latents = match (&case.latents, case.seed) {
        (Some(latents), _) => latents.clone(),
        (None, Some(seed)) => pipeline.model.initial_latents(seed, k, case.height, case.width, path).unwrap(),
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
    let mut scheduler = Scheduler::from_config(&case.scheduler_config, None).unwrap();
    images_hwc(pipeline.model.generate(&request, &mut scheduler, device).unwrap())
}

/// Runs the cases of `tiny-lumina2.json` named in `only` (all when empty) on `device`.
fn check_pipeline(device: &Device, only: &[&str]) {
    let mut pipeline = PipelineFolder::load(&fixture("tiny-lumina2"), device, None).unwrap();
    let fixture: PipelineFixture =
        serde_json::from_str(&std::fs::read_to_string(fixture("tiny-lumina2.json")).unwrap()).unwrap();
    assert_eq!(fixture.system_prompt, SYSTEM_PROMPT);
    let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
    let mut worst = (0.0f32, String::new());
    let mut ran = 0;
    for case in fixture.cases.iter().filter(|c| only.is_empty() || only.contains(&c.name.as_str())) {
        let (got, shape) = generate(&mut pipeline, case, path, device);
        assert_eq!(shape.to_vec(), case.image_shape, "{}", case.name);
        let err = culturelens_testkit::max_abs(&got, &case.images);
        println!("lumina2 {}: max abs {err:.2e}", case.name);
        ran += 1;
        if err > worst.0 {
            worst = (err, case.name.clone());
        }
    }
    assert_eq!(ran, if only.is_empty() { fixture.cases.len() } else { only.len() }, "cases run");
    assert!(worst.0 <= IMAGE_BOUND, "lumina2: worst case {} differs by {:.2e}", worst.1, worst.0);
}

#[test]
fn pipeline_matches_diffusers_on_flex() {
    check_pipeline(&Device::flex(), &[]);
}

// On lavapipe each case costs seconds of kernel compilation: the cases covering each path once.
#[test]
fn pipeline_matches_diffusers_on_wgpu() {
    check_pipeline(
        &culturelens_testkit::wgpu(),
        &["negative", "latents", "cfg-trunc-no-norm", "text-layer-1"],
    );
}

/// A copy of the tiny Lumina 2 folder with `edit` applied, and the error loading it gives.
fn broken(edit: impl FnOnce(&std::path::Path)) -> String {
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
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    copy_dir(&fixture("tiny-lumina2"), &dir);
    edit(&dir);
    match PipelineFolder::load(&dir, &Device::flex(), None) {
        Ok(_) => panic!("the broken folder loaded"),
        Err(e) => e.to_string(),
    }
}

fn replace_in(path: std::path::PathBuf, from: &str, to: &str) {
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{} lacks {from}", path.display());
    std::fs::write(path, text.replace(from, to)).unwrap();
}

#[test]
fn bad_lumina2_folders_are_refused_naming_the_file_and_key() {
    let e = broken(|d| std::fs::remove_dir_all(d.join("text_encoder")).unwrap());
    assert!(e.contains("text_encoder/config.json"), "{e}");
    let e = broken(|d| std::fs::remove_file(d.join("tokenizer/tokenizer.json")).unwrap());
    assert!(e.contains("no Gemma tokenizer (expected tokenizer.json"), "{e}");
    let e = broken(|d| replace_in(d.join("model_index.json"), "\"Gemma2Model\"", "\"GemmaModel\""));
    assert!(
        e.contains("model_index.json") && e.contains("`text_encoder`: `GemmaModel` is not supported"),
        "{e}"
    );
    let e = broken(|d| {
        replace_in(
            d.join("text_encoder/config.json"),
            "\"intermediate_size\": 24",
            "\"intermediate_size\": 20",
        )
    });
    assert!(
        e.contains("text_encoder/model.safetensors") && e.contains("layers.0.mlp.gate_proj.weight"),
        "{e}"
    );
    let e = broken(|d| {
        replace_in(
            d.join("transformer/config.json"),
            "\"axes_dim_rope\": [\n    4,\n    2,",
            "\"axes_dim_rope\": [\n    4,\n    4,",
        )
    });
    assert!(e.contains("transformer/config.json") && e.contains("`axes_dim_rope`"), "{e}");
    let e = broken(|d| {
        std::fs::write(d.join("scheduler/scheduler_config.json"), r#"{"_class_name": "DDIMScheduler"}"#)
            .unwrap()
    });
    assert!(
        e.contains("scheduler_config.json") && e.contains("DDIMScheduler does not fit Lumina2Pipeline"),
        "{e}"
    );
}

#[derive(serde::Deserialize)]
struct Tokens {
    per_pair: usize,
    text_sha256: Vec<String>,
    prompt_ids_sha256: Vec<String>,
    negative_ids_sha256: Vec<String>,
    full: Vec<FullIds>,
}

#[derive(serde::Deserialize)]
struct FullIds {
    text: String,
    max_length: usize,
    ids: Vec<u32>,
}

/// The tiny pipeline's Gemma tokenizer gives transformers' ids for 1,400 prompts of the four
/// prompt sets in all 35 (set, language) pairs (read with culturelens-prompts from the data
/// mirror), with the system prompt (as a prompt) and without (as a negative prompt), and for
/// edge texts (spelled special tokens, whitespace runs, emoji, truncation to 16).
#[test]
fn gemma_tokenizer_ids_equal_transformers_on_the_four_prompt_sets() {
    use crate::t5::{sampled_prompts, short_sha};
    let tokens: Tokens =
        serde_json::from_str(&std::fs::read_to_string(fixture("tiny-lumina2-tokens.json")).unwrap()).unwrap();
    let prompts = sampled_prompts(tokens.per_pair);
    assert!(prompts.len() >= 1000, "{} prompts", prompts.len());
    assert_eq!(prompts.len(), tokens.text_sha256.len());
    for (i, (text, sha)) in prompts.iter().zip(&tokens.text_sha256).enumerate() {
        assert_eq!(&short_sha(text), sha, "prompt {i} ({text:?}) is not the one the fixture was made from");
    }
    let dir = fixture("tiny-lumina2/tokenizer");
    let tokenizer = PromptTokenizer::Gemma(Box::new(GemmaTokenizer::load(&dir, 256).unwrap()));
    let joined = |ids: Vec<u32>| short_sha(&ids.iter().map(u32::to_string).collect::<Vec<_>>().join(","));
    let mut wrong = Vec::new();
    for ((text, prompt_sha), negative_sha) in
        prompts.iter().zip(&tokens.prompt_ids_sha256).zip(&tokens.negative_ids_sha256)
    {
        if &joined(tokenizer.ids(text).unwrap()) != prompt_sha
            || &joined(tokenizer.negative_ids(text).unwrap()) != negative_sha
        {
            wrong.push(text.clone());
        }
    }
    println!(
        "gemma tokenizer: {} of {} prompts with transformers' ids",
        prompts.len() - wrong.len(),
        prompts.len()
    );
    assert!(wrong.is_empty(), "{} prompts differ, e.g. {:?}", wrong.len(), &wrong[..wrong.len().min(5)]);
    for case in &tokens.full {
        let t = GemmaTokenizer::load(&dir, case.max_length).unwrap();
        assert_eq!(t.ids(&case.text).unwrap(), case.ids, "{:?} to {}", case.text, case.max_length);
    }
}

/// A caption longer than the transformer's rotary table (`axes_lens[0]` = 300 positions), which
/// diffusers' gather fails on, is refused.
#[test]
fn a_caption_beyond_the_rotary_table_is_refused() {
    let device = Device::flex();
    let mut pipeline = PipelineFolder::load(&fixture("tiny-lumina2"), &device, None).unwrap();
    pipeline.set_max_sequence_length(512).unwrap();
    let prompt = "a photo of the food in china ".repeat(60);
    let prompt_ids = vec![pipeline.ids(&prompt).unwrap()];
    assert!(prompt_ids[0][0].len() > 300, "{} tokens", prompt_ids[0][0].len());
    let negative_ids = vec![pipeline.negative_ids("").unwrap()];
    let latents =
        pipeline.model.initial_latents(0, 1, 16, 16, TorchNormalPath::from_capability("AVX2")).unwrap();
    let request = GenerateRequest {
        prompt_ids: &prompt_ids,
        negative_ids: &negative_ids,
        negative_given: false,
        images_per_prompt: 1,
        height: 16,
        width: 16,
        steps: 1,
        guidance: 4.0,
        true_cfg: 1.0,
        layer: None,
        latents: &latents,
    };
    let mut scheduler = pipeline.scheduler(None).unwrap();
    let e = pipeline.model.generate(&request, &mut scheduler, &device).unwrap_err().to_string();
    assert!(e.contains("caption tokens") && e.contains("`axes_lens` [300, 512, 512]"), "{e}");
}
