//! End-to-end tests of `culturelens generate` on the committed tiny SD-3-like, SD-3.5-like,
//! FLUX-dev-like and FLUX-schnell-like pipelines (`scripts/fixtures/make_diffusion_tiny_sd3.py`,
//! `make_diffusion_tiny_flux.py`): images equal to diffusers' within the library's bound (1e-5)
//! from `--seed` alone and from `--latents` (packed for FLUX), guidance, negative prompts and
//! FLUX's true CFG, a DiffusionLens T5 layer, the manifest, requests the pipelines refuse, shards
//! that merge into the unsharded run, and the chain prompts export → generate → embed → sos.

use std::path::{Path, PathBuf};

use crate::common::{Cli, generate_case, read_csv};
use culturelens_testkit::fixture;

/// The bound of `culturelens-models-io`'s `diffusion_flow_parity`: the CLI is held to it.
const BOUND: f32 = 1e-5;

/// `generate` on `tiny-{variant}` with the arguments of its fixture case `name`.
fn run_case(tmp: &Path, variant: &str, name: &str) -> (f32, PathBuf) {
    generate_case(tmp, variant, name, &fixture("diffusion").join(format!("tiny-{variant}")))
}

#[test]
fn sd3_images_match_diffusers_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    for (variant, name) in [
        ("sd3", "negative"),
        ("sd3", "latents"),
        ("sd3", "two-images"),
        ("sd3", "text-layer-1"),
        ("sd35", "cfg"),
    ] {
        let (err, out) = run_case(tmp.path(), variant, name);
        assert!(err <= BOUND, "{variant} {name}: max abs {err:.2e} from diffusers");
        let (header, rows) = read_csv(&out.join("manifest.csv"));
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        // The layer column holds T5's layer: the pipeline's own (2 of the tiny T5's 2) or --text-layer.
        let layer = if name == "text-layer-1" { "1" } else { "2" };
        assert_eq!(
            (rows[0][col("layer")].as_str(), rows[0][col("scheduler")].as_str()),
            (layer, "FlowMatchEulerDiscreteScheduler"),
            "{variant} {name}"
        );
    }
}

#[test]
fn flux_images_match_diffusers_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    for (variant, name) in [
        ("flux-dev", "true-cfg"),
        ("flux-dev", "latents"),
        ("flux-dev", "non-square"),
        ("flux-dev", "text-layer-1"),
        ("flux-schnell", "base"),
        ("flux-schnell", "text-layer-1-true-cfg"),
    ] {
        let (err, _) = run_case(tmp.path(), variant, name);
        assert!(err <= BOUND, "{variant} {name}: max abs {err:.2e} from diffusers");
    }
}

/// Without --steps and --guidance a run takes diffusers' defaults for the pipeline (28 steps;
/// guidance 3.5 for FLUX, 7.0 for SD 3), and the manifest records them.
#[test]
fn defaults_are_the_pipelines_own() {
    let tmp = tempfile::tempdir().unwrap();
    for (variant, guidance) in [("flux-schnell", "3.5"), ("sd3", "7")] {
        let out = tmp.path().join(variant);
        Cli::new("generate")
            .opt("--pipeline", fixture("diffusion").join(format!("tiny-{variant}")))
            .opt("--out", &out)
            .opt("--prompt", "a street")
            .opt("--height", "16")
            .opt("--width", "16")
            .opt("--max-sequence-length", "8")
            .run_ok();
        let (header, rows) = read_csv(&out.join("manifest.csv"));
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        assert_eq!(
            (rows[0][col("steps")].as_str(), rows[0][col("guidance")].as_str()),
            ("28", guidance),
            "{variant}"
        );
    }
}

#[test]
fn requests_the_flow_pipelines_refuse_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "sd3",
            &["--scheduler", "ddim"],
            &["scheduler_config.json", "DDIMScheduler does not fit StableDiffusion3Pipeline"],
        ),
        ("flux-dev", &["--attention-slice", "max"], &["--attention-slice", "UNet pipelines"]),
        ("flux-dev", &["--max-sequence-length", "600"], &["--max-sequence-length 600", "between 1 and 512"]),
        ("flux-dev", &["--height", "18"], &["multiples of 4", "18×16"]),
        ("sd3", &["--text-layer", "3"], &["--text-layer 3", "1..=2"]),
        (
            "flux-schnell",
            &["--latents", "LATENTS"],
            &["latents of shape [1, 16, 16, 16]", "need [1, 16, 64]"],
        ),
    ];
    let latents = tmp.path().join("unpacked.npy");
    let mut bytes = Vec::new();
    culturelens_table::write_npy_nd(&mut bytes, &[1, 16, 16, 16], &vec![0.0; 16 * 16 * 16]).unwrap();
    std::fs::write(&latents, bytes).unwrap();
    let latents = latents.to_str().unwrap();
    for (variant, extra, wanted) in cases {
        let extra: Vec<&str> = extra.iter().map(|a| if *a == "LATENTS" { latents } else { a }).collect();
        let pipeline = fixture("diffusion").join(format!("tiny-{variant}"));
        crate::common::generate_refusals(tmp.path(), &pipeline, &[(&extra, wanted)]);
    }
}

/// Two shards of a FLUX run merge into the unsharded run's folder, byte for byte.
#[test]
fn flux_shards_merge_into_the_unsharded_run() {
    shards_merge_into_the_unsharded_run("flux-dev", &["--max-sequence-length", "8"]);
}

/// Two shards of a run of `tiny-{variant}` (with `extra` arguments) merge into the unsharded
/// run's folder, byte for byte.
pub fn shards_merge_into_the_unsharded_run(variant: &str, extra: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.csv");
    std::fs::write(
        &prompts,
        "id,prompt\np1,a photo of the food in china\np2,a street in japan\np3,a wedding\n",
    )
    .unwrap();
    let run = |out: &str, shard: Option<&str>| {
        let mut cli = Cli::new("generate")
            .opt("--pipeline", fixture("diffusion").join(format!("tiny-{variant}")))
            .opt("--out", tmp.path().join(out))
            .opt("--prompts", &prompts)
            .opt("--steps", "2")
            .opt("--height", "16")
            .opt("--width", "16");
        for a in extra {
            cli = cli.arg(a);
        }
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

/// prompts export → generate → embed → sos through each flow-matching and SDXL family (SD 3,
/// FLUX, SDXL), in value ([`crate::common::sos_chain`]).
#[test]
fn prompts_export_generate_embed_sos_for_each_family() {
    for (variant, extra) in [
        ("sd3", &["--max-sequence-length", "16"][..]),
        ("flux-dev", &["--max-sequence-length", "16"][..]),
        ("sdxl", &[][..]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = vec!["--steps", "2", "--height", "16", "--width", "16"];
        args.extend(extra);
        crate::common::sos_chain(tmp.path(), &fixture("diffusion").join(format!("tiny-{variant}")), &args);
    }
}
