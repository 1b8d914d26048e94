//! End-to-end tests of `culturelens generate` on the committed tiny Lumina 2 pipeline
//! (`scripts/fixtures/make_diffusion_tiny_lumina2.py`): images equal to diffusers' within the
//! library's bound from `--seed` and from `--latents`, guidance with a negative prompt, two
//! images per prompt, a DiffusionLens Gemma 2 layer, the warning for a prompt the tokenizer
//! truncates (with the number of tokens cut), diffusers' defaults in the manifest, refused
//! requests, shards that merge into the unsharded run, and the chain prompts export → generate
//! → embed → sos.

use std::path::{Path, PathBuf};

use crate::common::{Cli, generate_case, read_csv};
use culturelens_testkit::fixture;

/// The bound of `culturelens-models-io`'s `lumina2` pipeline test: the CLI is held to it.
const BOUND: f32 = 4e-6;

fn pipeline() -> PathBuf {
    fixture("diffusion").join("tiny-lumina2")
}

fn run_case(tmp: &Path, name: &str) -> (f32, PathBuf) {
    generate_case(tmp, "lumina2", name, &pipeline())
}

#[test]
fn lumina2_images_match_diffusers_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["negative", "latents", "two-images", "no-guidance", "text-layer-1", "truncated"] {
        let (err, out) = run_case(tmp.path(), name);
        assert!(err <= BOUND, "lumina2 {name}: max abs {err:.2e} from diffusers");
        let (header, rows) = read_csv(&out.join("manifest.csv"));
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        // The layer column holds Gemma 2's hidden_states index: the pipeline's own [-2] (2 of
        // the tiny model's 3 layers) or --text-layer.
        let layer = if name == "text-layer-1" { "1" } else { "2" };
        assert_eq!(
            (rows[0][col("layer")].as_str(), rows[0][col("scheduler")].as_str()),
            (layer, "FlowMatchEulerDiscreteScheduler"),
            "{name}"
        );
    }
}

/// A prompt longer than `--max-sequence-length` (with the system prompt) is truncated as
/// diffusers truncates it, with a warning naming the tokens cut (the fixture's count).
#[test]
fn a_truncated_prompt_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let case = crate::common::diffusion_case("lumina2", "truncated");
    let cut = case["cut_tokens"].as_u64().unwrap();
    assert!(cut > 0);
    let run = Cli::new("generate")
        .opt("--pipeline", pipeline())
        .opt("--out", tmp.path().join("out"))
        .opt("--prompt", case["prompt"].as_str().unwrap())
        .opt("--steps", "1")
        .opt("--height", "16")
        .opt("--width", "16")
        .opt("--max-sequence-length", "30")
        .run_ok();
    assert!(run.stderr.contains(&format!("warning: {cut} token(s) of the prompt")), "{}", run.stderr);
    let quiet = Cli::new("generate")
        .opt("--pipeline", pipeline())
        .opt("--out", tmp.path().join("quiet"))
        .opt("--prompt", case["prompt"].as_str().unwrap())
        .opt("--steps", "1")
        .opt("--height", "16")
        .opt("--width", "16")
        .run_ok();
    assert!(!quiet.stderr.contains("were cut"), "{}", quiet.stderr);
}

/// Without --steps and --guidance a run takes Lumina 2's defaults (30 steps, guidance 4), and
/// without --height/--width its size (`sample_size × 8` = 32).
#[test]
fn lumina2_defaults_are_the_pipelines_own() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let npy = tmp.path().join("out.npy");
    Cli::new("generate")
        .opt("--pipeline", pipeline())
        .opt("--out", &out)
        .opt("--out-npy", &npy)
        .opt("--prompt", "a street")
        .run_ok();
    let (header, rows) = read_csv(&out.join("manifest.csv"));
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    assert_eq!((rows[0][col("steps")].as_str(), rows[0][col("guidance")].as_str()), ("30", "4"));
    assert_eq!(culturelens_table::read_npy_nd(&npy).unwrap().0, [1, 32, 32, 3]);
}

#[test]
fn requests_lumina2_refuses_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["--text-layer", "3"], &["--text-layer 3", "1..=2"]),
        (&["--height", "24"], &["multiples of 16", "24×16"]),
        (&["--scheduler", "ddim"], &["DDIMScheduler does not fit Lumina2Pipeline"]),
        (&["--max-sequence-length", "600"], &["--max-sequence-length 600", "between 1 and 512"]),
        (&["--attention-slice", "max"], &["--attention-slice", "UNet pipelines"]),
    ];
    crate::common::generate_refusals(tmp.path(), &pipeline(), cases);
}

/// Two shards of a Lumina 2 run merge into the unsharded run's folder, byte for byte.
#[test]
fn lumina2_shards_merge_into_the_unsharded_run() {
    crate::generate_flow_cli::shards_merge_into_the_unsharded_run("lumina2", &[]);
}

/// prompts export → generate → embed → sos through Lumina 2, in value
/// ([`crate::common::sos_chain`]).
#[test]
fn prompts_export_generate_embed_sos_for_lumina2() {
    let tmp = tempfile::tempdir().unwrap();
    crate::common::sos_chain(tmp.path(), &pipeline(), &["--steps", "2", "--height", "16", "--width", "16"]);
}
