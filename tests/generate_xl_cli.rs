//! End-to-end tests of `culturelens generate` on the committed tiny SDXL-like and
//! Playground-v2.5-like pipelines (`scripts/fixtures/make_diffusion_tiny_sdxl.py`): images
//! equal to diffusers' within the library's bound (1e-5) from `--seed` alone and from
//! `--latents`, with guidance on and off, zero, empty and given negative prompts,
//! `force_zeros_for_empty_prompt` read from `model_index.json`, the EDM schedulers, a
//! DiffusionLens layer of `text_encoder_2`; the pipeline's defaults; bad folders and requests
//! refused naming the file and key, with nothing written. Shards, `kill -9` resume and the chain
//! export → generate → embed → sos run with the other families in `generate_flow_cli.rs` and
//! `generate_kill.rs`.

use std::path::Path;

use crate::common::{Cli, copy_pipeline, generate_case, read_csv, replace_in};
use crate::generate_flow_cli::shards_merge_into_the_unsharded_run;
use culturelens_testkit::fixture;

/// The bound of `culturelens-models-io`'s `diffusion_parity` for these pipelines: the CLI is held
/// to it.
const BOUND: f32 = 1e-5;

#[test]
fn sdxl_and_playground_images_match_diffusers_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    for (variant, name) in [
        ("sdxl", "euler-g5.0"),
        ("sdxl", "ddim-g1.0"),
        ("sdxl", "negative"),
        ("sdxl", "empty-negative"),
        ("sdxl", "two-images"),
        ("sdxl", "latents"),
        ("sdxl", "non-square"),
        ("sdxl", "text-layer-1"),
        ("playground", "edm-dpm-g3.0"),
        ("playground", "edm-euler-g1.0"),
        ("playground", "latents"),
        ("playground", "text-layer-1-zero-negative"),
    ] {
        let pipeline = fixture("diffusion").join(format!("tiny-{variant}"));
        let (err, out) = generate_case(tmp.path(), variant, name, &pipeline);
        assert!(err <= BOUND, "{variant} {name}: max abs {err:.2e} from diffusers");
        let (header, rows) = read_csv(&out.join("manifest.csv"));
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        // The layer column holds text_encoder_2's layer: the pipeline's own (the penultimate of
        // the tiny bigG's 3) or --text-layer.
        let layer = if name.starts_with("text-layer-1") { "1" } else { "2" };
        let scheduler = match name {
            "ddim-g1.0" => "DDIMScheduler",
            "edm-euler-g1.0" => "EDMEulerScheduler",
            _ if variant == "sdxl" => "EulerDiscreteScheduler",
            _ => "EDMDPMSolverMultistepScheduler",
        };
        assert_eq!(
            (rows[0][col("layer")].as_str(), rows[0][col("scheduler")].as_str()),
            (layer, scheduler),
            "{variant} {name}"
        );
    }
}

/// `force_zeros_for_empty_prompt: false` in `model_index.json` guides with the encoded `""`
/// (diffusers' images of that setting); the committed folder's `true` guides with zeros, whose
/// images differ from them by far more than the bound.
#[test]
fn force_zeros_for_empty_prompt_is_read_from_the_model_index() {
    let tmp = tempfile::tempdir().unwrap();
    let off = copy_pipeline(tmp.path(), "tiny-sdxl", |d| {
        replace_in(
            &d.join("model_index.json"),
            "\"force_zeros_for_empty_prompt\": true",
            "\"force_zeros_for_empty_prompt\": false",
        )
    });
    let (err, _) = generate_case(tmp.path(), "sdxl", "no-force-zeros", &off);
    assert!(err <= BOUND, "max abs {err:.2e} from diffusers");
    let zeros = tmp.path().join("zeros");
    std::fs::create_dir(&zeros).unwrap();
    let (err, _) = generate_case(&zeros, "sdxl", "no-force-zeros", &fixture("diffusion").join("tiny-sdxl"));
    assert!(err > 1e-3, "zero negatives gave the \"\" negative's images ({err:.2e})");
}

/// Without --steps and --guidance a run takes diffusers' defaults for the SDXL pipeline (50
/// steps, guidance 5) and the size of the UNet's sample_size, and the manifest records them.
#[test]
fn defaults_are_the_sdxl_pipelines_own() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    Cli::new("generate")
        .opt("--pipeline", fixture("diffusion").join("tiny-sdxl"))
        .opt("--out", &out)
        .opt("--prompt", "a street")
        .opt("--out-npy", tmp.path().join("images.npy"))
        .run_ok();
    let (header, rows) = read_csv(&out.join("manifest.csv"));
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    assert_eq!((rows[0][col("steps")].as_str(), rows[0][col("guidance")].as_str()), ("50", "5"));
    let (shape, _) = culturelens_table::read_npy_nd(&tmp.path().join("images.npy")).unwrap();
    assert_eq!(shape, [1, 16, 16, 3], "sample_size 8 × the VAE's scale factor 2");
}

#[test]
fn sdxl_shards_merge_into_the_unsharded_run() {
    shards_merge_into_the_unsharded_run("sdxl", &[]);
}

/// A bad SDXL folder or request: the error names the file and the key, and nothing is written.
#[test]
fn bad_sdxl_folders_and_requests_fail_clearly_and_write_nothing() {
    type Edit = Box<dyn FnOnce(&Path)>;
    let none = || Box::new(|_: &Path| {}) as Edit;
    let cases: Vec<(Edit, Vec<&str>, Vec<&str>)> = vec![
        (
            Box::new(|d: &Path| std::fs::remove_dir_all(d.join("text_encoder_2")).unwrap()),
            vec![],
            vec!["text_encoder_2/config.json"],
        ),
        (
            Box::new(|d: &Path| {
                replace_in(&d.join("model_index.json"), "\"text_encoder_2\"", "\"text_encoder_x\"")
            }),
            vec![],
            vec!["model_index.json", "`text_encoder_2`", "CLIPTextModelWithProjection"],
        ),
        (
            // A bigG tower wider than its weights.
            Box::new(|d: &Path| {
                replace_in(
                    &d.join("text_encoder_2/config.json"),
                    "\"hidden_size\": 12",
                    "\"hidden_size\": 16",
                )
            }),
            vec![],
            vec!["text_encoder_2/model.safetensors", "shape"],
        ),
        (
            // Time-id embeddings that no longer add up to add_embedding's input.
            Box::new(|d: &Path| {
                replace_in(
                    &d.join("unet/config.json"),
                    "\"addition_time_embed_dim\": 4",
                    "\"addition_time_embed_dim\": 2",
                )
            }),
            vec![],
            vec![
                "unet/config.json",
                "`projection_class_embeddings_input_dim`: 32",
                "projection_dim 8 + 6 × addition_time_embed_dim 2",
            ],
        ),
        (
            Box::new(|d: &Path| {
                replace_in(
                    &d.join("unet/config.json"),
                    "\"addition_embed_type\": \"text_time\"",
                    "\"addition_embed_type\": \"text\"",
                )
            }),
            vec![],
            vec!["unet/config.json", "`addition_embed_type`: `text` is not supported"],
        ),
        (
            Box::new(|d: &Path| {
                replace_in(
                    &d.join("model_index.json"),
                    "\"force_zeros_for_empty_prompt\": true",
                    "\"force_zeros_for_empty_prompt\": \"yes\"",
                )
            }),
            vec![],
            vec!["model_index.json", "`force_zeros_for_empty_prompt`"],
        ),
        (
            none(),
            vec!["--scheduler", "flow-euler"],
            vec!["FlowMatchEulerDiscreteScheduler does not fit StableDiffusionXLPipeline"],
        ),
        (none(), vec!["--text-layer", "3"], vec!["--text-layer 3", "1..=2"]),
        (none(), vec!["--height", "20"], vec!["multiples of 8", "20×16"]),
        (none(), vec!["--max-sequence-length", "8"], vec!["no T5 tokenizer"]),
    ];
    for (edit, extra, wanted) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let pipeline = copy_pipeline(tmp.path(), "tiny-sdxl", edit);
        crate::common::generate_refusals(tmp.path(), &pipeline, &[(&extra, &wanted)]);
    }
}

/// `--precision f16` (and bf16 where the adapter has it) on wgpu (lavapipe): the text encoders
/// and the UNet run in half precision, the VAE, whose config has `force_upcast`, in f32 as
/// diffusers runs it. The images stay within a measured bound of diffusers' f32 images and are
/// not f32 images; with `force_upcast: false` the VAE decodes in half precision and the images
/// change.
#[cfg(feature = "wgpu")]
#[test]
fn half_precision_on_wgpu_decodes_in_f32_under_force_upcast() {
    let tmp = tempfile::tempdir().unwrap();
    let want = crate::common::floats(&crate::common::diffusion_case("sdxl", "negative")["images"]);
    let no_upcast = copy_pipeline(tmp.path(), "tiny-sdxl", |d| {
        replace_in(&d.join("vae/config.json"), "\"force_upcast\": true", "\"force_upcast\": false")
    });
    let run = |pipeline: &Path, precision: &str| {
        let out = tmp.path().join(format!("{precision}-{}", pipeline.file_name().unwrap().to_string_lossy()));
        let npy = out.with_extension("npy");
        let run = Cli::new("generate")
            .opt("--pipeline", pipeline)
            .opt("--out", &out)
            .opt("--steps", "4")
            .opt("--height", "16")
            .opt("--width", "16")
            .opt("--prompt", "a photo of the food in china")
            .opt("--negative-prompt", "a street")
            .opt("--device", "wgpu")
            .opt("--precision", precision)
            .opt("--out-npy", &npy)
            .run();
        (run, out, npy)
    };
    let sdxl = fixture("diffusion").join("tiny-sdxl");
    for (precision, bound) in [("f16", F16_BOUND), ("bf16", BF16_BOUND)] {
        let (result, out, npy) = run(&sdxl, precision);
        if precision == "bf16" && !result.status.success() {
            // An adapter without bf16: refused before any work.
            assert!(result.stderr.contains("does not support bf16"), "{}", result.stderr);
            assert!(!out.exists());
            println!("bf16 on wgpu: refused by this adapter");
            continue;
        }
        assert!(result.status.success(), "{precision}: {}", result.stderr);
        let images = culturelens_table::read_npy_nd(&npy).unwrap().1;
        let err = culturelens_testkit::max_abs(&images, &want);
        println!("sdxl {precision} on wgpu: max abs {err:.2e} from diffusers' f32 images");
        assert!(err <= bound && err > 1e-4, "{precision}: {err:.2e}");
        let (result, _, half_vae) = run(&no_upcast, precision);
        assert!(result.status.success(), "{precision}: {}", result.stderr);
        let change =
            culturelens_testkit::max_abs(&culturelens_table::read_npy_nd(&half_vae).unwrap().1, &images);
        println!("sdxl {precision} on wgpu, VAE in {precision} instead of f32: images move by {change:.2e}");
        assert!(change > 0.0, "{precision}: force_upcast changed nothing");
    }
}

/// Bounds on the half-precision images' max abs difference from f32 on the tiny SDXL pipeline
/// (pixel values in [0, 1]; 4 steps with guidance 5): f16 about three times the measured 5.4e-3
/// (lavapipe); bf16 (8 mantissa bits to f16's 11) eight times that, unmeasured: lavapipe has no
/// bf16, so there the run is refused instead.
#[cfg(feature = "wgpu")]
const F16_BOUND: f32 = 1.6e-2;
#[cfg(feature = "wgpu")]
const BF16_BOUND: f32 = 1.3e-1;
