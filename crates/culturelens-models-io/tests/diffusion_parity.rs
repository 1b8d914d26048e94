//! Parity with diffusers on the committed tiny random-weight UNet pipelines
//! (`scripts/fixtures/make_diffusion_tiny_sd.py`, `make_diffusion_tiny_alt.py` with diffusers
//! 0.31; `make_diffusion_tiny_sdxl.py` with 0.42): an SD-1-like pipeline (quick-GELU CLIP, conv
//! projections, PNDM), an SD-2-like one (GELU tower, linear projections, per-block heads,
//! v-prediction), an AltDiffusion-like one (XLM-R with `has_pre_transformation`, SentencePiece
//! BPE tokenizer, DPM-Solver++), an SDXL-like one (two CLIP towers, `text_time`,
//! `transformer_layers_per_block` lists, Euler) and a Playground-v2.5-like one (EDM DPM-Solver++
//! and EDM Euler, the VAE's latent statistics). Every case (each scheduler with and without
//! guidance, negative prompts — SDXL's zeros for none, `""` given, `force_zeros_for_empty_prompt`
//! off —, two images per seed, a non-square size, DiffusionLens text layers, given latents,
//! Chinese and Japanese prompts) runs the whole pipeline from the folder (tokenizers, text
//! encoders, UNet, scheduler, VAE) and compares the images with diffusers' `output_type="np"`
//! output, on flex (CPU) and wgpu. XLM-R's tokenizer
//! is checked id for id against transformers' slow `XLMRobertaTokenizer`
//! (`make_diffusion_tiny_alt_tokens.py`), and attention slicing against the unsliced pipeline.

use burn::tensor::Device;
use culturelens_diffusion::pipeline::images_hwc;
use culturelens_diffusion::pipelines::{GenerateRequest, Pipeline};
use culturelens_diffusion_models::unet::AttentionSlice;
use culturelens_diffusion_schedulers::SchedulerKind;
use culturelens_models_io::diffusion::PipelineFolder;
use culturelens_models_io::xlm_roberta_tokenizer::XlmRobertaTokenizer;
use culturelens_rng::TorchNormalPath;
use culturelens_testkit::{fixture, wgpu};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    /// torch's CPU kernels the references drew their normals with (the 0.31 fixtures: AVX2).
    #[serde(default = "avx2")]
    cpu_capability: String,
    cases: Vec<Case>,
}

fn avx2() -> String {
    "AVX2".into()
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
    scheduler: String,
    text_layer: Option<usize>,
    latents: Option<Vec<f32>>,
    /// SDXL's `force_zeros_for_empty_prompt` for the case (the folder's is true).
    force_zeros: Option<bool>,
    image_shape: Vec<usize>,
    images: Vec<f32>,
}

/// The images' bound, every case but one: about 2× the worst case measured on flex and wgpu
/// (4.6e-6, SD-2 PNDM with guidance on wgpu; on flex every case is at most 3.0e-6, AltDiffusion
/// Euler with guidance; SDXL 1.3e-6, Playground 2.4e-6; every case is printed with `--nocapture`),
/// well inside issue 13's 1e-3, and issue 30's 1e-5.
const BOUND: f32 = 1e-5;
/// AltDiffusion's DDIM with guidance 7.5, the one case held to its own bound: about 2× its
/// measured 5.3e-5. DDIM's first step divides the noise prediction by √ᾱ ≈ 0.07 and guidance
/// scales its difference by 7.5, so float rounding in the XLM-R text encoder is amplified most
/// there. (The diffusers 0.31 references were made by torch's DEFAULT-capability kernels, whose
/// `linspace` rounds the product and the sum of each point apart; culturelens builds the beta
/// schedule as torch's AVX2 and AVX-512 kernels do, with one fused multiply-add, which moves
/// some betas by an ulp: 2.8e-5 before, 5.3e-5 since.)
const ALT_DDIM_GUIDED_BOUND: f32 = 1e-4;

/// The bound of one case (module doc of the two constants).
fn bound(variant: &str, case: &str) -> f32 {
    if variant == "alt" && case == "ddim-g7.5" { ALT_DDIM_GUIDED_BOUND } else { BOUND }
}

/// The cases of `tiny-{references}.json` and the pipeline folder they ran on (`tiny-alt-lens`:
/// DiffusionLens references on `tiny-alt`), with the normal-sampling path of their torch.
fn load(references: &str, device: &Device) -> (PipelineFolder, Vec<Case>, TorchNormalPath) {
    let folder = references.strip_suffix("-lens").unwrap_or(references);
    let pipeline = PipelineFolder::load(&fixture(&format!("diffusion/tiny-{folder}")), device, None).unwrap();
    let json = std::fs::read_to_string(fixture(&format!("diffusion/tiny-{references}.json"))).unwrap();
    let fixture: Fixture = serde_json::from_str(&json).unwrap();
    let expected = match references {
        "alt" => 11,
        "alt-lens" => 2,
        "sdxl" => 19,
        "playground" => 13,
        _ => 15,
    };
    assert_eq!(fixture.cases.len(), expected, "{references}");
    (pipeline, fixture.cases, TorchNormalPath::from_capability(&fixture.cpu_capability))
}

/// diffusers' images of `case` run by culturelens on `pipeline`'s device.
fn generate(
    pipeline: &mut PipelineFolder,
    case: &Case,
    path: TorchNormalPath,
    device: &Device,
) -> (Vec<f32>, [usize; 4]) {
    if let Pipeline::StableDiffusionXl(p) = &mut pipeline.model {
        p.force_zeros_for_empty_prompt = case.force_zeros.unwrap_or(true);
    }
    let prompt_ids = vec![pipeline.ids(&case.prompt).unwrap()];
    let negative_ids = vec![pipeline.ids(case.negative_prompt.as_deref().unwrap_or("")).unwrap()];
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
    let mut scheduler = pipeline.scheduler(Some(SchedulerKind::parse(&case.scheduler).unwrap())).unwrap();
    images_hwc(model.generate(&request, &mut scheduler, device).unwrap())
}

/// Runs the cases of `tiny-{variant}.json` named in `only` (all when empty) on `device`.
fn check(variant: &str, device: &Device, only: &[&str]) {
    let (mut pipeline, cases, path) = load(variant, device);
    let mut over = Vec::new();
    let mut ran = 0;
    for case in cases.iter().filter(|c| only.is_empty() || only.contains(&c.name.as_str())) {
        let (got, got_shape) = generate(&mut pipeline, case, path, device);
        assert_eq!(got_shape.to_vec(), case.image_shape, "{variant} {}", case.name);
        let err = got.iter().zip(&case.images).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
        println!("{variant} {}: max abs {err:.2e} (bound {:.0e})", case.name, bound(variant, &case.name));
        ran += 1;
        if err > bound(variant, &case.name) {
            over.push(format!("{} by {err:.2e}", case.name));
        }
    }
    assert_eq!(ran, if only.is_empty() { cases.len() } else { only.len() }, "{variant}: cases run");
    assert!(over.is_empty(), "{variant}: cases over their bound: {over:?}");
}

#[test]
fn sd1_matches_diffusers_on_flex() {
    check("sd1", &Device::flex(), &[]);
}

#[test]
fn sd2_matches_diffusers_on_flex() {
    check("sd2", &Device::flex(), &[]);
}

// On lavapipe every case costs about 15 s (kernel compilation, a software GPU), so wgpu runs the
// cases that cover each path once: guidance with a negative prompt (PNDM), a text layer
// without guidance, given latents with Euler; SD-2's v-prediction, linear projections and per-block
// heads with DDIM and DPM-Solver.

#[test]
fn sd1_matches_diffusers_on_wgpu() {
    // Every scheduler (Euler from given latents), with and without guidance, plus the negative
    // prompt and a text layer (lavapipe takes about 15 s a case; every case runs on flex).
    check(
        "sd1",
        &wgpu(),
        &["pndm-g1.0", "ddim-g7.5", "dpm-g7.5", "negative", "text-layer-1-no-cfg", "latents-euler"],
    );
}

#[test]
fn sd2_matches_diffusers_on_wgpu() {
    // v-prediction under every scheduler.
    check("sd2", &wgpu(), &["pndm-g7.5", "ddim-g7.5", "euler-g1.0", "dpm-g1.0"]);
}

#[test]
fn sdxl_matches_diffusers_on_flex() {
    check("sdxl", &Device::flex(), &[]);
}

#[test]
fn playground_matches_diffusers_on_flex() {
    check("playground", &Device::flex(), &[]);
}

#[test]
fn sdxl_matches_diffusers_on_wgpu() {
    // Guidance with zero and given negatives, a text layer, given latents, a non-square size.
    check(
        "sdxl",
        &culturelens_testkit::wgpu(),
        &["euler-g5.0", "negative", "text-layer-1-no-cfg", "latents-dpm", "non-square"],
    );
    // EDM DPM-Solver++ and EDM Euler, the VAE's latent statistics.
    check("playground", &culturelens_testkit::wgpu(), &["edm-dpm-g3.0", "edm-euler-g1.0", "text-layer-1"]);
}

/// Every AltDiffusion case, the two PNDM ones included: AltDiffusion's scheduler config
/// (DPM-Solver++) has no `skip_prk_steps`, so PNDM built from it takes the class default `false`
/// and runs the Runge–Kutta warm-up.
#[test]
fn alt_matches_diffusers_on_flex() {
    check("alt", &Device::flex(), &[]);
    check("alt-lens", &Device::flex(), &[]);
}

#[test]
fn alt_matches_diffusers_on_wgpu() {
    check("alt", &wgpu(), &["japanese-negative"]);
    check("alt-lens", &wgpu(), &["text-layer-1-no-cfg"]);
}

/// Attention slicing (`auto`, `max`, a size) gives the unsliced images: each (image, head)
/// score matrix is computed alone either way. SD-2's heads are 2 and 4 per block with guidance
/// (a batch of 2), so every setting runs several slices; the alt case slices XLM-R's UNet with
/// two images per prompt.
fn check_slicing(variant: &str, name: &str, device: &Device, slices: &[AttentionSlice]) {
    let (mut pipeline, cases, path) = load(variant, device);
    let case = cases.iter().find(|c| c.name == name).unwrap();
    let (whole, _) = generate(&mut pipeline, case, path, device);
    for &slice in slices {
        pipeline.model.set_attention_slice(Some(slice)).unwrap();
        let (sliced, _) = generate(&mut pipeline, case, path, device);
        let err = sliced.iter().zip(&whole).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        println!("{variant} {name} sliced {slice:?}: max abs {err:.2e} from unsliced");
        assert!(err <= 1e-6, "{variant} {name} {slice:?}: {err:.2e}");
    }
    let err = pipeline.model.set_attention_slice(Some(AttentionSlice::Size(3))).unwrap_err().to_string();
    assert!(err.contains("attention slice 3: has to be at most 2"), "{err}");
}

#[test]
fn sliced_attention_equals_unsliced_on_flex() {
    let all = [AttentionSlice::Auto, AttentionSlice::Max, AttentionSlice::Size(2)];
    check_slicing("sd2", "ddim-g7.5", &Device::flex(), &all);
    check_slicing("alt", "two-images", &Device::flex(), &all);
}

#[test]
fn sliced_attention_equals_unsliced_on_wgpu() {
    // One slice per score matrix: the most slices (about 15 s a run on lavapipe).
    check_slicing("sd2", "ddim-g7.5", &wgpu(), &[AttentionSlice::Max]);
}

#[derive(Deserialize)]
struct TokenCase {
    text: String,
    ids: Vec<u32>,
}

/// XLM-R's tokenizer rebuilt from `sentencepiece.bpe.model` (the tiny-alt pipeline's BPE model
/// with NFKC normalisation, and a Unigram model as XLM-R's own) gives transformers' slow
/// `XLMRobertaTokenizer` ids: fairseq offsets, runs of spaces and unknown characters,
/// compatibility forms, the empty prompt, truncation to 77 with `</s>` kept.
#[test]
fn xlm_roberta_tokenizer_matches_transformers() {
    #[derive(Deserialize)]
    struct Tokens {
        bpe: Vec<TokenCase>,
        unigram: Vec<TokenCase>,
    }
    let json = std::fs::read_to_string(fixture("diffusion/tiny-alt-tokens.json")).unwrap();
    let tokens: Tokens = serde_json::from_str(&json).unwrap();
    for (dir, cases) in [("tiny-alt/tokenizer", tokens.bpe), ("tiny-xlmr-unigram", tokens.unigram)] {
        let tok = XlmRobertaTokenizer::load(&fixture("diffusion").join(dir), 77).unwrap();
        assert_eq!(cases.len(), 11);
        for case in cases {
            assert_eq!(tok.ids(&case.text).unwrap(), case.ids, "{dir}: {:?}", case.text);
        }
    }
}
