//! End-to-end tests of `culturelens generate` on the committed tiny Kandinsky-3-like pipeline
//! (`scripts/fixtures/make_diffusion_tiny_kandinsky3.py`): images equal to diffusers' within the
//! library's bound (1e-5) with the folder's DDPM scheduler (its steps' noise drawn from the
//! seed's generator, after the initial latents or fresh with `--latents`) and with `--scheduler
//! ddim`, guidance, negative prompts, two images per seed, a DiffusionLens T5 layer; the
//! manifest and the pipeline's defaults; requests the pipeline refuses, with nothing written; a
//! several-prompt run equal to its prompts run one by one; shards that merge into the unsharded
//! run; and the chain prompts export → generate → embed → sos.

use std::path::{Path, PathBuf};

use crate::common::{Cli, generate_case, read_csv};
use culturelens_testkit::fixture;

/// The bound of `culturelens-models-io`'s `diffusion_kandinsky3_parity`: the CLI is held to it.
const BOUND: f32 = 1e-5;

fn pipeline() -> PathBuf {
    fixture("diffusion").join("tiny-kandinsky3")
}

fn run_case(tmp: &Path, name: &str) -> (f32, PathBuf) {
    generate_case(tmp, "kandinsky3", name, &pipeline())
}

#[test]
fn kandinsky3_images_match_diffusers_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, layer, scheduler) in [
        ("negative", "2", "DDPMScheduler"),
        ("latents", "2", "DDPMScheduler"),
        ("two-images", "2", "DDPMScheduler"),
        ("text-layer-1", "1", "DDPMScheduler"),
        ("cfg-ddim", "2", "DDIMScheduler"),
    ] {
        let (err, out) = run_case(tmp.path(), name);
        assert!(err <= BOUND, "{name}: max abs {err:.2e} from diffusers");
        let (header, rows) = read_csv(&out.join("manifest.csv"));
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        // The layer column holds T5's layer: the pipeline's own (2 of the tiny T5's 2) or --text-layer.
        assert_eq!(
            (rows[0][col("layer")].as_str(), rows[0][col("scheduler")].as_str()),
            (layer, scheduler),
            "{name}"
        );
    }
}

/// Without --steps and --guidance a run takes diffusers' defaults (25 steps, guidance 3).
#[test]
fn defaults_are_the_pipelines_own() {
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
    assert_eq!((rows[0][col("steps")].as_str(), rows[0][col("guidance")].as_str()), ("25", "3"),);
}

#[test]
fn requests_kandinsky3_refuses_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["--max-sequence-length", "64"], &["--max-sequence-length", "fixes 128 tokens"]),
        // ⌈32 / 64⌉ · 8 latents, doubled by the tiny MoVQ: 16 pixels, not 32.
        (&["--height", "32"], &["--height 32 --width 16", "makes 16×16 images"]),
        (&["--seed-per-image"], &["--seed-per-image", "DDPMScheduler"]),
        (&["--text-layer", "3"], &["--text-layer 3", "1..=2"]),
        (&["--attention-slice", "max"], &["--attention-slice"]),
        (&["--scheduler", "flow-euler"], &["does not fit Kandinsky3Pipeline"]),
    ];
    crate::common::generate_refusals(tmp.path(), &pipeline(), cases);
}

/// A batch of prompts gives each prompt the images it gets alone, with DDPM (whose noise comes
/// from each prompt's own generator) and with DDIM (Kandinsky 3's text is cut to the batch's
/// longest prompt): the run goes prompt by prompt.
#[test]
fn a_batch_of_prompts_equals_its_prompts_alone() {
    for scheduler in ["ddpm", "ddim"] {
        batch_equals_alone(scheduler);
    }
}

fn batch_equals_alone(scheduler: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.csv");
    std::fs::write(&prompts, "id,prompt\np1,a photo of the food in china\np2,a street in japan\n").unwrap();
    let run = |out: &str, source: (&str, &Path)| {
        Cli::new("generate")
            .opt("--pipeline", pipeline())
            .opt("--out", tmp.path().join(out))
            .opt(source.0, source.1)
            .opt("--steps", "2")
            .opt("--height", "16")
            .opt("--width", "16")
            .opt("--batch", "2")
            .opt("--images-per-prompt", "2")
            .opt("--scheduler", scheduler)
            .run_ok();
        tmp.path().join(out)
    };
    let both = run("both", ("--prompts", &prompts));
    let alone = tmp.path().join("alone.csv");
    std::fs::write(&alone, "id,prompt\np2,a street in japan\n").unwrap();
    let second = run("second", ("--prompts", &alone));
    for k in ["00", "01"] {
        assert_eq!(
            std::fs::read(both.join(format!("000001_{k}.png"))).unwrap(),
            std::fs::read(second.join(format!("000000_{k}.png"))).unwrap(),
            "{scheduler} image {k}"
        );
    }
    assert_ne!(
        std::fs::read(both.join("000000_00.png")).unwrap(),
        std::fs::read(both.join("000001_00.png")).unwrap()
    );
}

/// Two shards of a Kandinsky 3 run merge into the unsharded run's folder, byte for byte.
#[test]
fn kandinsky3_shards_merge_into_the_unsharded_run() {
    crate::generate_flow_cli::shards_merge_into_the_unsharded_run("kandinsky3", &[]);
}

/// prompts export → generate → embed → sos through Kandinsky 3, in value
/// ([`crate::common::sos_chain`]).
#[test]
fn prompts_export_generate_embed_sos_through_kandinsky3() {
    let tmp = tempfile::tempdir().unwrap();
    crate::common::sos_chain(tmp.path(), &pipeline(), &["--steps", "2", "--height", "16", "--width", "16"]);
}
