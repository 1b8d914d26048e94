//! End-to-end tests of `culturelens generate` on the committed tiny SD-1-like and
//! AltDiffusion-like pipelines (`scripts/fixtures/make_diffusion_tiny_sd.py`,
//! `make_diffusion_tiny_alt.py`): images equal to diffusers' on the CPU, the manifest contract,
//! DiffusionLens on XLM-R, f16 on wgpu, resume after an interruption, bad pipeline folders, and
//! the chain prompts export → generate → embed → sos.

use std::path::{Path, PathBuf};

use culturelens_testkit::{fixture, max_abs, read_fixture, upstream_mirror};

use crate::common::{Cli, copy_pipeline, read_csv, replace_in, sos_chain};

/// The bound of `culturelens-models-io`'s `diffusion_parity` (every case but AltDiffusion's DDIM
/// with guidance, which no CLI test runs): the CLI-only paths (`--scheduler` given on the command
/// line, batching, the torch RNG path, `--latents` files) are held to the library's bound.
const BOUND: f32 = 1e-5;

/// `images` against diffusers' case `name` of `tiny-{pipeline}.json`: the difference is printed
/// (`--nocapture`) and held to [`BOUND`].
#[track_caller]
fn assert_matches(images: &[f32], pipeline: &str, name: &str) {
    let err = max_abs(images, &reference_in(pipeline, name));
    println!("generate {pipeline} {name}: max abs {err:.2e} from diffusers");
    assert!(err <= BOUND, "{pipeline} {name}: max abs {err:.2e} from diffusers");
}

/// diffusers' images of the case `name` of `tiny-{pipeline}.json`.
fn reference_in(pipeline: &str, name: &str) -> Vec<f32> {
    let json: serde_json::Value =
        serde_json::from_str(&read_fixture(&format!("diffusion/tiny-{pipeline}.json"))).unwrap();
    let case = json["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap();
    case["images"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()
}

/// `generate` on the tiny SD-1 pipeline with the fixture's base case (seed 0, 4 steps,
/// guidance 7.5, 16×16).
fn generate(out: &Path) -> Cli {
    Cli::new("generate")
        .opt("--pipeline", fixture("diffusion/tiny-sd1"))
        .opt("--out", out)
        .opt("--steps", "4")
        .opt("--height", "16")
        .opt("--width", "16")
}

fn read_npy(path: &Path) -> (Vec<usize>, Vec<f32>) {
    culturelens_table::read_npy_nd(path).unwrap()
}

/// A PNG's bytes as diffusers' `numpy_to_pil` makes them from float images.
fn png_bytes(path: &Path) -> Vec<u8> {
    image::open(path).unwrap().to_rgb8().into_raw()
}

#[test]
fn images_match_diffusers_and_the_manifest_has_the_contract_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("imgs");
    let npy = tmp.path().join("images.npy");
    generate(&out)
        .opt("--prompt", "a photo of the food in china")
        .opt("--negative-prompt", "a street")
        .opt("--out-npy", &npy)
        .run_ok();
    let (shape, images) = read_npy(&npy);
    assert_eq!(shape, [1, 16, 16, 3]);
    assert_matches(&images, "sd1", "negative");
    let (header, rows) = read_csv(&out.join("manifest.csv"));
    assert_eq!(header, ["prompt", "image", "model", "seed", "layer", "steps", "guidance", "scheduler"]);
    assert_eq!(
        rows,
        [[
            "a photo of the food in china",
            "000000_00.png",
            "tiny-sd1",
            "0",
            "3",
            "4",
            "7.5",
            "PNDMScheduler"
        ]]
    );
    // The PNG is the float image × 255 rounded, as diffusers saves it.
    let want: Vec<u8> = images.iter().map(|v| (v * 255.0).round_ties_even() as u8).collect();
    assert_eq!(png_bytes(&out.join("000000_00.png")), want);
    assert!(!out.join("manifest.csv.resume").exists());
}

#[test]
fn two_images_per_seed_a_text_layer_and_given_latents_match_diffusers() {
    let tmp = tempfile::tempdir().unwrap();
    let npy = tmp.path().join("a.npy");
    let prompt = "a photo of the food in china";
    generate(&tmp.path().join("a"))
        .opt("--prompt", prompt)
        .opt("--seed", "42")
        .opt("--images-per-prompt", "2")
        .opt("--out-npy", &npy)
        .run_ok();
    let (shape, images) = read_npy(&npy);
    assert_eq!(shape, [2, 16, 16, 3]);
    assert_matches(&images, "sd1", "two-images");

    let npy = tmp.path().join("b.npy");
    generate(&tmp.path().join("b"))
        .opt("--prompt", prompt)
        .opt("--text-layer", "1")
        .opt("--guidance", "1")
        .opt("--out-npy", &npy)
        .run_ok();
    assert_matches(&read_npy(&npy).1, "sd1", "text-layer-1-no-cfg");
    let (_, rows) = read_csv(&tmp.path().join("b/manifest.csv"));
    assert_eq!(rows[0][4], "1", "the layer column holds --text-layer");

    // The fixture's latents, written as the (1, 4, 8, 8) float32 .npy a user would give.
    let json: serde_json::Value = serde_json::from_str(&read_fixture("diffusion/tiny-sd1.json")).unwrap();
    let case = json["cases"].as_array().unwrap().iter().find(|c| c["name"] == "latents-euler").unwrap();
    let latents: Vec<f32> =
        case["latents"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    let latents_path = tmp.path().join("latents.npy");
    let mut bytes = Vec::new();
    culturelens_table::write_npy_nd(&mut bytes, &[1, 4, 8, 8], &latents).unwrap();
    std::fs::write(&latents_path, bytes).unwrap();
    let npy = tmp.path().join("c.npy");
    generate(&tmp.path().join("c"))
        .opt("--prompt", prompt)
        .opt("--scheduler", "euler")
        .opt("--latents", &latents_path)
        .opt("--out-npy", &npy)
        .run_ok();
    assert_matches(&read_npy(&npy).1, "sd1", "latents-euler");
    let (_, rows) = read_csv(&tmp.path().join("c/manifest.csv"));
    assert_eq!((rows[0][3].as_str(), rows[0][7].as_str()), ("", "EulerDiscreteScheduler"));
}

/// `--scheduler` replaces the folder's PNDM with each of the four families, with and without
/// classifier-free guidance, and each run equals diffusers' images of that scheduler.
#[test]
fn every_scheduler_given_on_the_command_line_matches_diffusers() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, class) in [
        ("pndm", "PNDMScheduler"),
        ("ddim", "DDIMScheduler"),
        ("euler", "EulerDiscreteScheduler"),
        ("dpm", "DPMSolverMultistepScheduler"),
    ] {
        for guidance in ["7.5", "1.0"] {
            let out = tmp.path().join(format!("{name}-{guidance}"));
            let npy = tmp.path().join(format!("{name}-{guidance}.npy"));
            generate(&out)
                .opt("--prompt", "a photo of the food in china")
                .opt("--scheduler", name)
                .opt("--guidance", guidance)
                .opt("--out-npy", &npy)
                .run_ok();
            assert_matches(&read_npy(&npy).1, "sd1", &format!("{name}-g{guidance}"));
            let (_, rows) = read_csv(&out.join("manifest.csv"));
            assert_eq!(rows[0][7], class, "the manifest names the scheduler that ran");
        }
    }
}

/// A prompt table of three prompts (`id,prompt`) in `dir`.
fn three_prompts(dir: &Path) -> PathBuf {
    let prompts = dir.join("prompts.csv");
    let table = "id,prompt\np1,a photo of the food in china\np2,a street in japan\np3,a wedding\n";
    std::fs::write(&prompts, table).unwrap();
    prompts
}

/// Shards of a run with two images per prompt merge into the unsharded folder; a shard run with
/// another seed is refused (its settings differ), leaving no output.
#[test]
fn shards_of_several_images_per_prompt_merge_and_other_settings_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = three_prompts(tmp.path());
    let run = |out: &str, shard: Option<&str>, seed: &str| {
        let mut cli = generate(&tmp.path().join(out))
            .opt("--prompts", &prompts)
            .opt("--images-per-prompt", "2")
            .opt("--seed", seed);
        if let Some(shard) = shard {
            cli = cli.opt("--shard", shard);
        }
        cli.run_ok();
        tmp.path().join(out)
    };
    let one = run("one", None, "3");
    let (first, second) = (run("s1", Some("1/2"), "3"), run("s2", Some("2/2"), "3"));
    let merged = tmp.path().join("merged");
    Cli::new("merge").opt("--out", &merged).arg(&second).arg(&first).run_ok();
    assert_eq!(
        std::fs::read(merged.join("manifest.csv")).unwrap(),
        std::fs::read(one.join("manifest.csv")).unwrap()
    );
    let (_, rows) = read_csv(&one.join("manifest.csv"));
    assert_eq!(rows.len(), 6, "3 prompts × 2 images");
    for row in &rows {
        let name = &row[2];
        assert_eq!(
            std::fs::read(merged.join(name)).unwrap(),
            std::fs::read(one.join(name)).unwrap(),
            "{name}"
        );
    }
    let other = run("s2-seed4", Some("2/2"), "4");
    let out = tmp.path().join("refused");
    let err = Cli::new("merge").opt("--out", &out).arg(&first).arg(&other).run_fails().stderr;
    assert!(err.contains("mismatched shards") && err.contains("seed=3") && err.contains("seed=4"), "{err}");
    assert!(!out.exists());
}

#[test]
fn an_interrupted_run_resumes_without_redoing_finished_images() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.csv");
    std::fs::write(&prompts, "id,prompt\np1,a photo of the food in china\np2,a street in japan\n").unwrap();
    let clean = tmp.path().join("clean");
    let clean_npy = tmp.path().join("clean.npy");
    generate(&clean).opt("--prompts", &prompts).opt("--out-npy", &clean_npy).run_ok();
    let (_, clean_rows) = read_csv(&clean.join("manifest.csv"));
    assert_eq!(clean_rows.len(), 2);

    // A run that dies after generating (here: its --out-npy cannot be written) keeps its log.
    let out = tmp.path().join("run");
    let blocked = tmp.path().join("blocked");
    std::fs::create_dir_all(blocked.join("x.npy")).unwrap();
    generate(&out).opt("--prompts", &prompts).opt("--out-npy", blocked.join("x.npy")).run_fails();
    let log = out.join("manifest.csv.resume");
    assert!(log.is_file());
    // Tear the last record (the second image's): it is not finished, and its PNG is redone.
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() - 5]).unwrap();
    std::fs::write(out.join("000001_00.png"), b"half a png").unwrap();
    let npy = tmp.path().join("resumed.npy");
    let run = generate(&out).opt("--prompts", &prompts).opt("--out-npy", &npy).run_ok();
    assert!(run.stderr.contains("resuming: 1 of 2 prompts already generated"), "{}", run.stderr);
    assert_eq!(read_npy(&npy), read_npy(&clean_npy));
    assert_eq!(read_csv(&out.join("manifest.csv")).1, clean_rows);
    for name in ["000000_00.png", "000001_00.png"] {
        assert_eq!(png_bytes(&out.join(name)), png_bytes(&clean.join(name)), "{name}");
    }
    assert!(!log.exists());

    // Both prompts in one denoising batch give the same images.
    let batched = tmp.path().join("batched.npy");
    generate(&tmp.path().join("batched"))
        .opt("--prompts", &prompts)
        .opt("--batch", "2")
        .opt("--out-npy", &batched)
        .run_ok();
    let (shape, values) = read_npy(&batched);
    assert_eq!(shape, [2, 16, 16, 3]);
    let err = max_abs(&values, &read_npy(&clean_npy).1);
    println!("generate --batch 2: max abs {err:.2e} from one prompt at a time");
    assert!(err <= BOUND, "batched: {err:.2e}");

    // --shard 2/2 takes the second prompt only.
    let shard = tmp.path().join("shard");
    generate(&shard).opt("--prompts", &prompts).opt("--shard", "2/2").run_ok();
    let (_, rows) = read_csv(&shard.join("manifest.csv"));
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0][0].as_str(), rows[0][2].as_str()), ("p2", "000001_00.png"));

    // With shard 1/2 beside it, `merge` joins the shards into the unsharded run's manifest and images.
    let first = tmp.path().join("shard1");
    generate(&first).opt("--prompts", &prompts).opt("--shard", "1/2").run_ok();
    let merged = tmp.path().join("merged");
    Cli::new("merge").opt("--out", &merged).arg(&shard).arg(&first).run_ok();
    assert_eq!(
        std::fs::read(merged.join("manifest.csv")).unwrap(),
        std::fs::read(clean.join("manifest.csv")).unwrap()
    );
    for name in ["000000_00.png", "000001_00.png"] {
        assert_eq!(
            std::fs::read(merged.join(name)).unwrap(),
            std::fs::read(clean.join(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn bad_pipelines_and_requests_fail_clearly_and_write_nothing() {
    type Edit = Box<dyn FnOnce(&Path)>;
    let cases: Vec<(Edit, Vec<&str>, Vec<&str>)> = vec![
        (
            Box::new(|d: &Path| {
                replace_in(&d.join("model_index.json"), "StableDiffusionPipeline", "KandinskyPipeline")
            }) as Edit,
            vec![],
            vec!["model_index.json", "_class_name", "KandinskyPipeline"],
        ),
        (
            Box::new(|d: &Path| {
                std::fs::remove_file(d.join("unet/diffusion_pytorch_model.safetensors")).unwrap()
            }) as Edit,
            vec![],
            vec!["unet", "diffusion_pytorch_model.safetensors"],
        ),
        (
            Box::new(|d: &Path| {
                replace_in(
                    &d.join("text_encoder/config.json"),
                    "\"intermediate_size\": 24",
                    "\"intermediate_size\": 32",
                )
            }) as Edit,
            vec![],
            vec!["text_encoder/model.safetensors", "text_model.encoder.layers.0.mlp.fc1.weight", "[32, 16]"],
        ),
        (
            Box::new(|d: &Path| {
                replace_in(
                    &d.join("unet/config.json"),
                    "\"class_embed_type\": null",
                    "\"class_embed_type\": \"timestep\"",
                )
            }) as Edit,
            vec![],
            vec!["unet/config.json", "class_embed_type"],
        ),
        (
            Box::new(|d: &Path| {
                replace_in(&d.join("model_index.json"), "\"UNet2DConditionModel\"", "\"UNet2DModel\"")
            }) as Edit,
            vec![],
            vec!["model_index.json", "`unet`: `UNet2DModel` is not supported"],
        ),
        (
            // A pickled checkpoint in place of the safetensors file: refused, never unpickled.
            Box::new(|d: &Path| {
                let unet = d.join("unet");
                std::fs::remove_file(unet.join("diffusion_pytorch_model.safetensors")).unwrap();
                std::fs::write(unet.join("diffusion_pytorch_model.bin"), b"PK\x03\x04 not unpickled")
                    .unwrap();
            }) as Edit,
            vec![],
            vec!["diffusion_pytorch_model.bin", "pickled checkpoint", "safe_serialization=True"],
        ),
        (
            Box::new(|d: &Path| {
                let mut bytes = Vec::new();
                culturelens_table::write_npy_nd(&mut bytes, &[1, 4, 4, 4], &[0.0; 64]).unwrap();
                std::fs::write(d.join("latents.npy"), bytes).unwrap();
            }) as Edit,
            vec!["--latents", "LATENTS"],
            vec!["latents.npy: latents of shape [1, 4, 4, 4]", "need [1, 4, 8, 8]"],
        ),
        (Box::new(|_: &Path| {}) as Edit, vec!["--scheduler", "heun"], vec!["unknown scheduler `heun`"]),
        (Box::new(|_: &Path| {}) as Edit, vec!["--height", "20"], vec!["multiples of 8", "20"]),
        (Box::new(|_: &Path| {}) as Edit, vec!["--text-layer", "4"], vec!["--text-layer 4", "1..=3"]),
        (
            Box::new(|_: &Path| {}) as Edit,
            vec!["--attention-slice", "3"],
            vec!["--attention-slice", "at most 2"],
        ),
    ];
    for (edit, extra, wanted) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let pipeline = copy_pipeline(tmp.path(), "tiny-sd1", edit);
        let out = tmp.path().join("out");
        let mut cli = Cli::new("generate")
            .opt("--pipeline", &pipeline)
            .opt("--prompt", "a street")
            .opt("--out", &out)
            .opt("--steps", "2");
        for a in extra {
            // `LATENTS` stands for the file the edit wrote into the pipeline folder.
            cli = if a == "LATENTS" { cli.arg(pipeline.join("latents.npy")) } else { cli.arg(a) };
        }
        let err = cli.run_fails().stderr;
        for w in wanted {
            assert!(err.contains(w), "{w:?} not in: {err}");
        }
        assert!(!out.exists(), "nothing may be written: {err}");
    }
}

/// prompts export → generate → embed → sos through the tiny SD 1, in value ([`sos_chain`]).
#[test]
fn prompts_export_generate_embed_sos_chain() {
    let tmp = tempfile::tempdir().unwrap();
    sos_chain(
        tmp.path(),
        &fixture("diffusion/tiny-sd1"),
        &["--steps", "4", "--height", "16", "--width", "16"],
    );
}

#[test]
fn a_prompt_set_shard_with_a_layer_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let mirror = upstream_mirror();
    let out = tmp.path().join("lens");
    // The SoS set in English has 1539 prompts: shard 1/1000 is the first one; the tiny text
    // encoder has 3 layers, so every:2 sweeps layers 2 and 3.
    generate(&out)
        .opt("--prompt-set", "sos")
        .opt("--languages", "en")
        .opt("--shard", "1/1000")
        .opt("--text-layers", "every:2")
        .env("CULTURELENS_DATA_MIRROR", &mirror)
        .env("CULTURELENS_CACHE", tmp.path().join("cache"))
        .run_ok();
    let (header, rows) = read_csv(&out.join("manifest.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(rows.len(), 2);
    let got: Vec<(&str, &str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r[col("set")].as_str(),
                r[col("language")].as_str(),
                r[col("image")].as_str(),
                r[col("layer")].as_str(),
            )
        })
        .collect();
    assert_eq!(got, [("sos", "en", "000000_l02_00.png", "2"), ("sos", "en", "000000_l03_00.png", "3")]);
    // Layer 3 of 3 is the pipeline's own conditioning: the same image as without --text-layers.
    let plain = tmp.path().join("plain");
    let prompt = &rows[0][col("prompt")];
    generate(&plain).opt("--prompt", prompt).run_ok();
    assert_eq!(png_bytes(&out.join("000000_l03_00.png")), png_bytes(&plain.join("000000_00.png")));
    assert_ne!(png_bytes(&out.join("000000_l02_00.png")), png_bytes(&plain.join("000000_00.png")));
}

#[test]
fn seed_per_image_draws_image_k_from_seed_s_plus_k() {
    let tmp = tempfile::tempdir().unwrap();
    let prompt = "a photo of the food in china";
    let run = |name: &str, extra: &[&str]| {
        let npy = tmp.path().join(format!("{name}.npy"));
        let mut cli = generate(&tmp.path().join(name)).opt("--prompt", prompt).opt("--out-npy", &npy);
        for a in extra {
            cli = cli.arg(a);
        }
        cli.run_ok();
        read_npy(&npy).1
    };
    let pair = run("pair", &["--seed", "42", "--images-per-prompt", "2", "--seed-per-image"]);
    let (first, second) = pair.split_at(pair.len() / 2);
    assert_eq!(first, run("s42", &["--seed", "42"]));
    assert_eq!(second, run("s43", &["--seed", "43"]));
    let (_, rows) = read_csv(&tmp.path().join("pair/manifest.csv"));
    assert_eq!((rows[0][3].as_str(), rows[1][3].as_str()), ("42", "43"));
}

#[test]
fn alt_diffusion_matches_diffusers_and_reads_xlm_r_layers() {
    let tmp = tempfile::tempdir().unwrap();
    let alt = |out: &str| {
        Cli::new("generate")
            .opt("--pipeline", fixture("diffusion/tiny-alt"))
            .opt("--out", tmp.path().join(out))
            .opt("--steps", "4")
            .opt("--height", "16")
            .opt("--width", "16")
            .opt("--prompt", "日本の結婚式の写真")
            .opt("--negative-prompt", "ein Haus")
    };
    let npy = tmp.path().join("plain.npy");
    alt("plain").opt("--out-npy", &npy).run_ok();
    assert_matches(&read_npy(&npy).1, "alt", "japanese-negative");
    // Attention sliced one score matrix at a time: the same images, bit for bit.
    let sliced = tmp.path().join("sliced.npy");
    alt("sliced").opt("--attention-slice", "max").opt("--out-npy", &sliced).run_ok();
    assert_eq!(read_npy(&sliced), read_npy(&npy));
    // XLM-R has 3 layers; the pipeline reads layer 2 (the second-to-last), the manifest says so.
    let (header, rows) = read_csv(&tmp.path().join("plain/manifest.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(
        (rows[0][col("layer")].as_str(), rows[0][col("scheduler")].as_str()),
        ("2", "DPMSolverMultistepScheduler")
    );

    // DiffusionLens: layer 1 as diffusers computes it from hidden_states[1]; layer 2 of the sweep
    // is the plain image; layer 3 feeds no projection the UNet was trained behind: refused.
    let npy = tmp.path().join("lens.npy");
    alt("lens").opt("--text-layers", "every:1").opt("--out-npy", &npy).run_ok();
    let (shape, values) = read_npy(&npy);
    assert_eq!(shape, [2, 16, 16, 3]);
    let first = &values[..16 * 16 * 3];
    assert_matches(first, "alt-lens", "text-layer-1");
    assert_eq!(
        png_bytes(&tmp.path().join("lens/000000_l02_00.png")),
        png_bytes(&tmp.path().join("plain/000000_00.png"))
    );
    let err = alt("bad").opt("--text-layer", "3").run_fails().stderr;
    assert!(err.contains("--text-layer 3") && err.contains("1..=2"), "{err}");
    assert!(!tmp.path().join("bad").exists());
}

/// `--precision f16` on wgpu (lavapipe), on the SD-1 pipeline and on SD-2's (whose UNet has
/// `upcast_attention`, so its attention runs in f32): the images stay within a measured bound of
/// diffusers' f32 images (which the f32 runs match to 3e-6, `diffusion_parity`), and are not
/// f32 images (the run did compute in half precision).
#[cfg(feature = "wgpu")]
#[test]
fn f16_on_wgpu_is_close_to_f32_and_not_f32() {
    let tmp = tempfile::tempdir().unwrap();
    for variant in ["sd1", "sd2"] {
        let npy = tmp.path().join(format!("{variant}.npy"));
        Cli::new("generate")
            .opt("--pipeline", fixture(&format!("diffusion/tiny-{variant}")))
            .opt("--out", tmp.path().join(variant))
            .opt("--steps", "4")
            .opt("--height", "16")
            .opt("--width", "16")
            .opt("--prompt", "a photo of the food in china")
            .opt("--negative-prompt", "a street")
            .opt("--device", "wgpu")
            .opt("--precision", "f16")
            .opt("--out-npy", &npy)
            .run_ok();
        let err = max_abs(&read_npy(&npy).1, &reference_in(variant, "negative"));
        println!("{variant} f16 on wgpu: max abs {err:.2e} from diffusers' f32 images");
        assert!(err <= F16_BOUND, "{variant} f16 on wgpu: {err:.2e}");
        assert!(err > 1e-4, "{variant}: f16 equals f32 to {err:.2e}: did the run compute in f16?");
    }
}

/// Bound on the f16 images' max abs difference from f32 on the tiny pipelines (pixel values in
/// [0, 1]; 4 steps with guidance 7.5): about twice the largest measured difference.
#[cfg(feature = "wgpu")]
const F16_BOUND: f32 = 1.6e-2;

/// `--languages` and `--cultures` filter a `--prompts` file by its `language` and `culture`
/// columns (a language by code or name, a culture case-insensitively), as they filter a prompt
/// set; a filter the file cannot apply, one that keeps nothing, or one beside a single
/// `--prompt` is refused before anything is written.
#[test]
fn language_and_culture_filters_apply_to_a_prompts_file() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.csv");
    std::fs::write(
        &prompts,
        "language,culture,prompt\nen,Japan,a street in japan\nde,Japan,eine Straße in Japan\n\
         en,China,a photo of the food in china\nja,China,中国の食べ物\n",
    )
    .unwrap();
    let out = tmp.path().join("en");
    generate(&out).opt("--prompts", &prompts).opt("--languages", "English").run_ok();
    let (header, rows) = read_csv(&out.join("manifest.csv"));
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let kept: Vec<&str> = rows.iter().map(|r| r[column("prompt")].as_str()).collect();
    assert_eq!(kept, ["a street in japan", "a photo of the food in china"]);
    let out = tmp.path().join("en-japan");
    generate(&out).opt("--prompts", &prompts).opt("--languages", "en,de").opt("--cultures", "japan").run_ok();
    let (_, rows) = read_csv(&out.join("manifest.csv"));
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r[column("culture")] == "Japan"), "{rows:?}");

    let refused = tmp.path().join("refused");
    let err = generate(&refused).opt("--prompts", &prompts).opt("--languages", "fr").run_fails().stderr;
    assert!(err.contains("prompts.csv: no prompt left after --languages fr"), "{err}");
    let err = generate(&refused).opt("--prompts", &prompts).opt("--languages", "xx").run_fails().stderr;
    assert!(
        err.contains("unknown language \"xx\" (known: am, ar, ")
            && err.contains("zh, or their English names)"),
        "{err}"
    );
    let bare = tmp.path().join("bare.csv");
    std::fs::write(&bare, "prompt\na street\n").unwrap();
    let err = generate(&refused).opt("--prompts", &bare).opt("--cultures", "Japan").run_fails().stderr;
    assert!(
        err.contains("bare.csv: --cultures filters on a `culture` column, which it does not have"),
        "{err}"
    );
    let err = generate(&refused).opt("--prompt", "a street").opt("--languages", "en").run_fails().stderr;
    assert!(err.contains("a single --prompt has nothing to filter"), "{err}");
    assert!(!refused.exists(), "nothing written");
}

/// Without a prompt source, the error names all three (not only `--prompt`), before the
/// pipeline is loaded and with nothing written.
#[test]
fn a_missing_prompt_source_names_every_source() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("none");
    let run = generate(&out).run_fails();
    assert!(
        run.stderr.contains("give --prompt TEXT, --prompts FILE.csv or --prompt-set NAME"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("loaded the pipeline"), "{}", run.stderr);
    assert!(!out.exists());
}

/// The manifest's `model` column is `--model-name`, else the hub id in the folder's
/// model_index.json, else the pipeline folder's name; an empty name is refused.
#[test]
fn model_name_sets_the_model_column() {
    let tmp = tempfile::tempdir().unwrap();
    let model_column = |out: &Path| {
        let (header, rows) = read_csv(&out.join("manifest.csv"));
        let k = header.iter().position(|h| h == "model").unwrap();
        rows.iter().map(|r| r[k].clone()).collect::<Vec<_>>()
    };
    let folder = tmp.path().join("folder");
    generate(&folder).opt("--prompt", "a street in japan").run_ok();
    assert_eq!(model_column(&folder), ["tiny-sd1"]);
    let named = tmp.path().join("named");
    generate(&named).opt("--prompt", "a street in japan").opt("--model-name", "sd-1.5 (tiny)").run_ok();
    assert_eq!(model_column(&named), ["sd-1.5 (tiny)"]);
    // A folder saved by diffusers' `save_pretrained` after `from_pretrained("ORG/NAME")` holds the
    // hub id in model_index.json's `_name_or_path`: that names the model, not the folder. A local
    // path there (a pipeline loaded from a folder) does not.
    for (saved, want) in [("org/sd-tiny", "org/sd-tiny"), ("/home/me/sd", "pipe")] {
        let pipe = copy_pipeline(&tmp.path().join(want.replace('/', "_")), "tiny-sd1", |dir| {
            let path = dir.join("model_index.json");
            let mut index: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            index["_name_or_path"] = saved.into();
            std::fs::write(&path, index.to_string()).unwrap();
        });
        let out = tmp.path().join(format!("saved-{}", want.replace('/', "_")));
        Cli::new("generate")
            .opt("--pipeline", &pipe)
            .opt("--out", &out)
            .opt("--steps", "1")
            .opt("--height", "16")
            .opt("--width", "16")
            .opt("--prompt", "a")
            .run_ok();
        assert_eq!(model_column(&out), [want], "_name_or_path {saved}");
    }
    let refused = tmp.path().join("refused");
    let err = generate(&refused).opt("--prompt", "a").opt("--model-name", " ").run_fails().stderr;
    assert!(err.contains("a model name is a non-empty single line"), "{err}");
    assert!(!refused.exists());
}

/// `generate --prompt-set --mirror DIR` reads the set's upstream files from DIR (here an empty
/// folder: refused by the file it lacks, before the pipeline loads).
#[test]
fn generate_reads_a_prompt_set_from_mirror() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty-mirror");
    std::fs::create_dir_all(&empty).unwrap();
    let out = tmp.path().join("out");
    let run = generate(&out)
        .opt("--prompt-set", "sos")
        .opt("--mirror", &empty)
        .env("CULTURELENS_CACHE", tmp.path().join("cache"))
        .run_fails();
    assert!(run.stderr.contains("empty-mirror"), "{}", run.stderr);
    assert!(!run.stderr.contains("loaded the pipeline"), "{}", run.stderr);
    assert!(!out.exists());
}

/// Off a terminal (Slurm, nohup: here a pipe) progress comes as plain lines while the run goes
/// (`CULTURELENS_PROGRESS_EVERY=0`: one per batch and per denoising-step update) and one at the
/// end, not a bar drawn only at exit.
#[test]
fn progress_off_a_terminal_is_plain_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.csv");
    std::fs::write(&prompts, "prompt\na street in japan\na street in china\n").unwrap();
    let out = tmp.path().join("out");
    let run = generate(&out)
        .opt("--prompts", &prompts)
        .opt("--batch", "1")
        .env("CULTURELENS_PROGRESS_EVERY", "0")
        .run_ok();
    let lines: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("progress: ")).collect();
    assert!(lines.len() >= 3, "{}", run.stderr);
    // While a batch denoises: its step (PNDM's 4 steps here take 5 scheduler calls, the first
    // timestep repeated as diffusers' PLMS does).
    assert!(
        lines.iter().any(|l| l.starts_with("progress: 0/2 images · denoising step ") && l.ends_with("/5")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("progress: 1/2 images · ") && l.contains("/s · ETA ")),
        "{lines:?}"
    );
    let last = lines.last().unwrap();
    assert!(last.starts_with("progress: 2/2 images · ") && !last.contains("denoising"), "{lines:?}");
    // The default interval (30 s) prints only the final line on a run this short.
    let quiet = generate(&tmp.path().join("quiet")).opt("--prompts", &prompts).opt("--batch", "1").run_ok();
    let lines: Vec<&str> = quiet.stderr.lines().filter(|l| l.starts_with("progress: ")).collect();
    assert_eq!(lines.len(), 1, "{}", quiet.stderr);
}
