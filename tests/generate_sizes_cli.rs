//! `generate` refuses an image size from the pipeline folder's configs alone, before any weights
//! load (issue 33, point 9): every family's size rule (`SizeRule`, built by each pipeline's
//! `size_rule` in `culturelens-diffusion`) on a copy of its tiny fixture whose weight files are
//! garbage. A refusal after loading would report the broken weights instead; the control run
//! (a size the rule takes) shows that it does.

use std::path::Path;

use crate::common::{Cli, copy_pipeline, walk};

/// Replaces every `*.safetensors` of the folder by bytes no safetensors reader takes.
fn break_weights(dir: &Path) {
    let files: Vec<_> =
        walk(dir).into_iter().filter(|f| f.extension().is_some_and(|e| e == "safetensors")).collect();
    assert!(!files.is_empty(), "{}: no weights to break", dir.display());
    for f in files {
        std::fs::write(f, b"\xff\xff\xff\xff not a safetensors file").unwrap();
    }
}

fn generate(pipeline: &Path, out: &Path, extra: &[&str]) -> String {
    let cli = Cli::new("generate")
        .opt("--pipeline", pipeline)
        .opt("--prompt", "a street")
        .opt("--out", out)
        .opt("--steps", "2");
    extra.iter().fold(cli, |cli, a| cli.arg(a)).run_fails().stderr
}

#[test]
fn every_family_refuses_a_size_before_its_weights_load() {
    // (fixture, flags, the refusal's words): the width left out takes the default the configs
    // give (FLUX's 128 × vae_scale_factor, Kandinsky 3's 1024, …).
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("tiny-sd1", &["--height", "20"], &["multiples of 8 (diffusers' rule); got 20×16"]),
        ("tiny-alt", &["--height", "20"], &["multiples of 8 (diffusers' rule); got 20×16"]),
        ("tiny-sdxl", &["--height", "20"], &["multiples of 8 (diffusers' rule); got 20×16"]),
        ("tiny-sd3", &["--height", "18"], &["multiples of 4 for this pipeline; got 18×16"]),
        // 28 / vae_scale_factor 2 = 14 latent rows: 7 patches of 2, past pos_embed_max_size 6.
        (
            "tiny-sd3",
            &["--height", "28"],
            &["latents of 14×8 need more than the pos_embed_max_size 6 patches a side"],
        ),
        ("tiny-flux-dev", &["--height", "18"], &["multiples of 4 for this pipeline; got 18×256"]),
        ("tiny-if", &["--height", "15"], &["multiples of 2 for this pipeline; got 15×16"]),
        (
            "tiny-kandinsky3",
            &["--height", "32"],
            &["--height 32 --width 1024: this pipeline makes 16×256 images"],
        ),
        ("tiny-kandinsky3", &["--height", "0"], &["multiples of 8 (diffusers' rule); got 0×1024"]),
        // Kandinsky 2.1: ⌈18 / 2²⌉ · 2² with the tiny MoVQ's scale factor 2.
        (
            "tiny-kandinsky21",
            &["--height", "18"],
            &["--height 18 --width 512: this pipeline makes 20×512 images"],
        ),
        ("tiny-lumina2", &["--height", "24"], &["multiples of 16 for this pipeline; got 24×32"]),
        ("tiny-cogview4", &["--height", "24"], &["multiples of 16 for this pipeline; got 24×16"]),
    ];
    // Every case is run and every miss reported, so that each family's failure shows.
    let mut misses = Vec::new();
    for (name, extra, wanted) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let pipeline = copy_pipeline(tmp.path(), name, break_weights);
        let out = tmp.path().join("out");
        let err = generate(&pipeline, &out, extra);
        eprintln!("{name} {extra:?}: {}", err.trim());
        if wanted.iter().any(|w| !err.contains(w)) || err.contains("safetensors") {
            misses.push(format!("{name} {extra:?}: wanted {wanted:?} before any weights, got: {err}"));
        }
        assert!(!out.exists(), "{name}: nothing may be written: {err}");
        // Control: a size the rule takes gets as far as the broken weights.
        let err = generate(&pipeline, &out, &["--height", "16", "--width", "16"]);
        assert!(err.contains(".safetensors"), "{name}: the broken weights were not read: {err}");
        assert!(!out.exists(), "{name}: nothing may be written: {err}");
    }
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}
