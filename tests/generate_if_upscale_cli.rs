//! `culturelens generate --upscale`: DeepFloyd IF stage I, then stage II
//! (`IFSuperResolutionPipeline`) on its images, against diffusers' chained pipelines on the
//! committed tiny folders (`scripts/fixtures/make_diffusion_tiny_if.py`, `tiny-if-chain.json`:
//! stage I's `output_type="pt"` images as stage II's `image=`, stage II seeded afresh with the
//! run's seed), held to the library's stage II bound; `--offload` gives the same bytes; a request
//! that does not fit is refused with nothing written.

use std::path::Path;

use crate::common::{Cli, floats};
use culturelens_testkit::fixture;

/// The bounds of `culturelens-models-io`'s `diffusion_if_parity` for stage II.
const BOUND: f32 = 1e-5;
#[cfg(feature = "wgpu")]
const WGPU_BOUND: f32 = 2e-5;

fn chain_case(name: &str) -> serde_json::Value {
    let path = fixture("diffusion").join("tiny-if-chain.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone()
}

/// `generate --upscale` with case `name`'s settings; returns the max abs difference from
/// diffusers' images and the `--out-npy` bytes.
fn run_chain(tmp: &Path, name: &str, device: &str, extra: &[&str]) -> (f32, Vec<u8>) {
    let c = chain_case(name);
    let tag = format!("{name}-{device}{}", extra.join(""));
    let (out, npy) = (tmp.join(&tag), tmp.join(format!("{tag}.npy")));
    let number = |key: &str| c[key].to_string();
    let mut cli = Cli::new("generate")
        .opt("--pipeline", fixture("diffusion").join("tiny-if"))
        .opt("--upscale", fixture("diffusion").join("tiny-if-ii"))
        .opt("--out", &out)
        .opt("--out-npy", &npy)
        .opt("--device", device)
        .opt("--prompt", c["prompt"].as_str().unwrap())
        .opt("--seed", number("seed"))
        .opt("--images-per-prompt", number("images_per_prompt"))
        .opt("--steps", number("steps"))
        .opt("--guidance", number("guidance"))
        .opt("--height", number("height"))
        .opt("--width", number("width"))
        .opt("--upscale-steps", number("upscale_steps"))
        .opt("--upscale-guidance", number("upscale_guidance"))
        .opt("--noise-level", number("noise_level"));
    if let Some(negative) = c["negative_prompt"].as_str() {
        cli = cli.opt("--negative-prompt", negative);
    }
    for arg in extra {
        cli = cli.arg(arg);
    }
    cli.run_ok();
    let (shape, images) = culturelens_table::read_npy_nd(&npy).unwrap();
    let want: Vec<usize> =
        c["image_shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    assert_eq!(shape, want, "{name}");
    let err = culturelens_testkit::max_abs(&images, &floats(&c["images"]));
    println!("if stage I → II {name} on {device} through the CLI: max abs {err:.2e}");
    (err, std::fs::read(&npy).unwrap())
}

#[test]
fn stage_ii_after_stage_i_matches_diffusers_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["chain", "chain-negative-no-cfg"] {
        let (err, _) = run_chain(tmp.path(), name, "cpu", &[]);
        assert!(err <= BOUND, "{name}: max abs {err:.2e} from diffusers");
    }
    let (header, rows) = crate::common::read_csv(&tmp.path().join("chain-cpu").join("manifest.csv"));
    assert_eq!(rows.len(), 2);
    let image = header.iter().position(|h| h == "image").unwrap();
    let png = image::open(tmp.path().join("chain-cpu").join(&rows[1][image])).unwrap();
    assert_eq!((png.width(), png.height()), (16, 16), "stage II's size, the UNet's sample_size");
}

#[cfg(feature = "wgpu")]
#[test]
fn stage_ii_after_stage_i_on_wgpu_and_offloaded() {
    let tmp = tempfile::tempdir().unwrap();
    let (err, resident) = run_chain(tmp.path(), "chain", "wgpu", &[]);
    assert!(err <= WGPU_BOUND, "chain on wgpu: max abs {err:.2e} from diffusers");
    let (_, offloaded) = run_chain(tmp.path(), "chain", "wgpu", &["--offload"]);
    assert!(resident == offloaded, "--offload changed stage II's images");
}

#[test]
fn upscale_requests_that_do_not_fit_are_refused_with_nothing_written() {
    let tmp = tempfile::tempdir().unwrap();
    let base = |out: &str| {
        Cli::new("generate")
            .opt("--prompt", "a photo")
            .opt("--out", tmp.path().join(out))
            .opt("--steps", "1")
            .opt("--height", "8")
            .opt("--width", "8")
    };
    let sd = base("sd")
        .opt("--pipeline", fixture("diffusion").join("tiny-sd1"))
        .opt("--upscale", fixture("diffusion").join("tiny-if-ii"))
        .run_fails();
    assert!(sd.stderr.contains("--upscale") && sd.stderr.contains("IFPipeline"), "{}", sd.stderr);
    let stage_one = base("swapped")
        .opt("--pipeline", fixture("diffusion").join("tiny-if"))
        .opt("--upscale", fixture("diffusion").join("tiny-if"))
        .run_fails();
    assert!(stage_one.stderr.contains("IFSuperResolutionPipeline"), "{}", stage_one.stderr);
    let per_image = base("per-image")
        .opt("--pipeline", fixture("diffusion").join("tiny-if"))
        .opt("--upscale", fixture("diffusion").join("tiny-if-ii"))
        .flag("--seed-per-image")
        .run_fails();
    assert!(per_image.stderr.contains("--seed-per-image"), "{}", per_image.stderr);
    for out in ["sd", "swapped", "per-image"] {
        assert!(!tmp.path().join(out).exists(), "{out}: something was written");
    }
}
