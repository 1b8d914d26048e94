//! End-to-end tests of `culturelens generate` on the committed tiny CogView4-like pipeline
//! (`scripts/fixtures/make_diffusion_tiny_cogview4.py`): images equal to diffusers' within the
//! library's bound from `--seed` and from `--latents`, guidance with a negative prompt, two
//! images per prompt, a prompt cut by `--max-sequence-length` (warned of, naming how many tokens
//! were cut), a DiffusionLens GLM layer, on the CPU and on wgpu; the manifest's layer column
//! (GLM's `hidden_states[L − 1]` is the pipeline's own); diffusers' defaults; requests the
//! pipeline refuses; shards that merge into the unsharded run; and the chain prompts export →
//! generate → embed → sos.

use std::path::{Path, PathBuf};

use crate::common::{Cli, floats, read_csv};

/// The bound of `culturelens-models-io`'s `cogview4` tests: the CLI is held to it.
const BOUND: f32 = 3e-6;

/// `tests/fixtures/diffusion/`.
fn fixtures() -> PathBuf {
    culturelens_testkit::fixture("diffusion")
}

fn pipeline() -> PathBuf {
    fixtures().join("tiny-cogview4")
}

fn case(name: &str) -> serde_json::Value {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("tiny-cogview4.json")).unwrap())
            .unwrap();
    json["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone()
}

/// `generate` with the arguments of the fixture case `name` on `device`: the max abs difference
/// from diffusers' images, the output folder and stderr.
fn run_case(tmp: &Path, name: &str, device: &str) -> (f32, PathBuf, String) {
    let c = case(name);
    let out = tmp.join(format!("{name}-{device}"));
    let npy = tmp.join(format!("{name}-{device}.npy"));
    let number = |key: &str| c[key].to_string();
    let mut cli = Cli::new("generate")
        .opt("--pipeline", pipeline())
        .opt("--out", &out)
        .opt("--out-npy", &npy)
        .opt("--device", device)
        .opt("--prompt", c["prompt"].as_str().unwrap())
        .opt("--steps", number("steps"))
        .opt("--guidance", number("guidance"))
        .opt("--height", number("height"))
        .opt("--width", number("width"))
        .opt("--images-per-prompt", number("images_per_prompt"))
        .opt("--max-sequence-length", number("max_sequence_length"));
    if let Some(negative) = c["negative_prompt"].as_str() {
        cli = cli.opt("--negative-prompt", negative);
    }
    if let Some(layer) = c["text_layer"].as_u64() {
        cli = cli.opt("--text-layer", layer.to_string());
    }
    if c["latents"].is_null() {
        cli = cli.opt("--seed", number("seed"));
    } else {
        let shape: Vec<usize> =
            c["latents_shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
        let path = tmp.join(format!("{name}-latents.npy"));
        let mut bytes = Vec::new();
        culturelens_table::write_npy_nd(&mut bytes, &shape, &floats(&c["latents"])).unwrap();
        std::fs::write(&path, bytes).unwrap();
        cli = cli.opt("--latents", &path);
    }
    let run = cli.run_ok();
    let (shape, images) = culturelens_table::read_npy_nd(&npy).unwrap();
    let want: Vec<usize> =
        c["image_shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    assert_eq!(shape, want, "{name}");
    let err = culturelens_testkit::max_abs(&images, &floats(&c["images"]));
    println!("cogview4 {name} through the CLI on {device}: max abs {err:.2e}");
    (err, out, run.stderr)
}

#[test]
fn cogview4_images_match_diffusers_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["negative", "latents", "two-images", "truncated", "text-layer-1", "no-cfg"] {
        let (err, out, stderr) = run_case(tmp.path(), name, "cpu");
        assert!(err <= BOUND, "{name}: max abs {err:.2e} from diffusers");
        let (header, rows) = read_csv(&out.join("manifest.csv"));
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        // GLM's hidden_states[2] of the tiny 3-layer GLM is the pipeline's own; --text-layer 1.
        let layer = if name == "text-layer-1" { "1" } else { "2" };
        assert_eq!(
            (rows[0][col("layer")].as_str(), rows[0][col("scheduler")].as_str()),
            (layer, "FlowMatchEulerDiscreteScheduler"),
            "{name}"
        );
        let warned = stderr.contains("warning: 31 token(s) of the prompt");
        assert_eq!(warned, name == "truncated", "{name}: {stderr}");
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn cogview4_images_match_diffusers_through_the_cli_on_wgpu() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["negative", "text-layer-1-no-cfg"] {
        let (err, _, _) = run_case(tmp.path(), name, "wgpu");
        assert!(err <= BOUND, "{name} on wgpu: max abs {err:.2e} from diffusers");
    }
}

/// Without --steps and --guidance a run takes diffusers' defaults for CogView4 (50 steps,
/// guidance 5), and the manifest records them.
#[test]
fn cogview4_defaults_are_the_pipelines_own() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    Cli::new("generate")
        .opt("--pipeline", pipeline())
        .opt("--out", &out)
        .opt("--prompt", "a street")
        .opt("--height", "16")
        .opt("--width", "16")
        .run_ok();
    let (header, rows) = read_csv(&out.join("manifest.csv"));
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    assert_eq!((rows[0][col("steps")].as_str(), rows[0][col("guidance")].as_str()), ("50", "5"));
}

#[test]
fn requests_cogview4_refuses_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["--scheduler", "ddim"], &["scheduler_config.json", "DDIMScheduler does not fit CogView4Pipeline"]),
        (&["--attention-slice", "max"], &["--attention-slice", "UNet pipelines"]),
        (&["--max-sequence-length", "2"], &["--max-sequence-length 2", "special tokens"]),
        (&["--height", "24"], &["multiples of 16", "24×16"]),
        (&["--text-layer", "3"], &["--text-layer 3", "1..=2"]),
        (&["--latents", "LATENTS"], &["latents of shape [1, 16, 4, 4]", "need [1, 16, 8, 8]"]),
    ];
    let latents = tmp.path().join("small.npy");
    let mut bytes = Vec::new();
    culturelens_table::write_npy_nd(&mut bytes, &[1, 16, 4, 4], &[0.0; 16 * 16]).unwrap();
    std::fs::write(&latents, bytes).unwrap();
    for (extra, wanted) in cases {
        let out = tmp.path().join("out");
        let mut cli = Cli::new("generate")
            .opt("--pipeline", pipeline())
            .opt("--prompt", "a street")
            .opt("--out", &out)
            .opt("--steps", "2")
            .opt("--width", "16");
        if !extra.contains(&"--height") {
            cli = cli.opt("--height", "16");
        }
        for a in *extra {
            cli = if *a == "LATENTS" { cli.arg(&latents) } else { cli.arg(a) };
        }
        let err = cli.run_fails().stderr;
        for w in *wanted {
            assert!(err.contains(w), "{extra:?}: {w:?} not in: {err}");
        }
        assert!(!out.exists(), "nothing may be written: {err}");
    }
}

/// Two shards of a CogView4 run merge into the unsharded run's folder, byte for byte.
#[test]
fn cogview4_shards_merge_into_the_unsharded_run() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.csv");
    std::fs::write(
        &prompts,
        "id,prompt\np1,a photo of the food in china\np2,一个中国人的照片\np3,a wedding\n",
    )
    .unwrap();
    let run = |out: &str, shard: Option<&str>| {
        let mut cli = Cli::new("generate")
            .opt("--pipeline", pipeline())
            .opt("--out", tmp.path().join(out))
            .opt("--prompts", &prompts)
            .opt("--batch", "2")
            .opt("--steps", "2")
            .opt("--height", "16")
            .opt("--width", "16");
        if let Some(shard) = shard {
            cli = cli.opt("--shard", shard);
        }
        cli.run_ok();
        tmp.path().join(out)
    };
    let one = run("one", None);
    let (first, second) = (run("s1", Some("1/2")), run("s2", Some("2/2")));
    let merged = tmp.path().join("merged");
    Cli::new("merge").opt("--out", &merged).arg(&first).arg(&second).run_ok();
    assert_eq!(
        std::fs::read(merged.join("manifest.csv")).unwrap(),
        std::fs::read(one.join("manifest.csv")).unwrap()
    );
    for name in ["000000_00.png", "000001_00.png", "000002_00.png"] {
        assert_eq!(
            std::fs::read(merged.join(name)).unwrap(),
            std::fs::read(one.join(name)).unwrap(),
            "{name}"
        );
    }
}

/// prompts export → generate → embed → sos through CogView4, in value
/// ([`crate::common::sos_chain`]).
#[test]
fn prompts_export_generate_embed_sos_through_cogview4() {
    let tmp = tempfile::tempdir().unwrap();
    crate::common::sos_chain(tmp.path(), &pipeline(), &["--steps", "2", "--height", "16", "--width", "16"]);
}
