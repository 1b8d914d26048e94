//! `culturelens generate --offload`: the components wait in the machine's memory and visit the
//! device one at a time; the images must be the very same bytes as without the flag. On wgpu
//! (lavapipe without a GPU) each component really moves between Burn's CPU device and the GPU
//! device, for the UNet families (SD, SDXL), the flow-matching transformers (FLUX, and CogView4,
//! whose loop runs prompt by prompt) and issue 31's (Kandinsky 3 with its MoVQ, IF); on the CPU
//! the flag changes nothing, checked for every family. Two batches of prompts (so each component
//! moves twice), two images per prompt, guidance on, and a `--shard` of the offloaded run against
//! the same rows of the resident one (every family on the CPU; on wgpu SD 1.x's only, as each
//! wgpu process compiles its kernels again on lavapipe: 10 s a run).

use std::path::{Path, PathBuf};

use crate::common::Cli;
use culturelens_testkit::fixture;

/// Runs `generate` on the tiny `variant` pipeline at its first parity case's size (and T5
/// length), three prompts in batches of two, and returns the `--out-npy` bytes and each PNG's.
fn run(tmp: &Path, variant: &str, device: &str, extra: &[&str]) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let path = fixture("diffusion").join(format!("tiny-{variant}.json"));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let case = &json["cases"][0];
    let tag = format!("{variant}-{device}-{}", extra.join("").replace(['-', '/'], ""));
    let prompts = tmp.join(format!("{tag}.csv"));
    std::fs::write(&prompts, "prompt\na photo of a wedding\na bowl of soup\na street at night\n").unwrap();
    let (out, npy) = (tmp.join(&tag), tmp.join(format!("{tag}.npy")));
    let mut cli = Cli::new("generate")
        .opt("--pipeline", fixture("diffusion").join(format!("tiny-{variant}")))
        .opt("--prompts", &prompts)
        .opt("--out", &out)
        .opt("--out-npy", &npy)
        .opt("--device", device)
        .opt("--seed", "5")
        .opt("--steps", "2")
        .opt("--guidance", "2")
        .opt("--images-per-prompt", "2")
        .opt("--batch", "2")
        .opt("--height", case["height"].to_string())
        .opt("--width", case["width"].to_string());
    if let Some(n) = case.get("max_sequence_length") {
        cli = cli.opt("--max-sequence-length", n.to_string());
    }
    for arg in extra {
        cli = cli.arg(arg);
    }
    cli.run_ok();
    let mut pngs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    pngs.sort();
    let pngs = pngs
        .iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(p).unwrap()))
        .collect();
    (std::fs::read(&npy).unwrap(), pngs)
}

/// The offloaded run's images against the resident run's, bit for bit, and (with `shard`) its
/// second shard against the resident run's PNGs of the same names.
fn offload_is_bit_identical(variant: &str, device: &str, shard: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let (npy, pngs) = run(tmp.path(), variant, device, &[]);
    let (npy_off, pngs_off) = run(tmp.path(), variant, device, &["--offload"]);
    assert_eq!(pngs.len(), 6, "{variant} on {device}");
    assert!(npy == npy_off, "{variant} on {device}: --offload changed the float images");
    assert_eq!(pngs, pngs_off, "{variant} on {device}: --offload changed the PNGs");
    if shard {
        let (_, part) = run(tmp.path(), variant, device, &["--offload", "--shard", "2/2"]);
        assert!(!part.is_empty() && part.len() < pngs.len(), "{variant}: shard 2/2 made {}", part.len());
        for (name, bytes) in &part {
            let full = pngs.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{variant}: {name}"));
            assert!(&full.1 == bytes, "{variant} on {device}: the offloaded shard's {name} differs");
        }
    }
    println!("{variant} on {device}: --offload gives the same {} images, bit for bit", pngs.len());
}

#[cfg(feature = "wgpu")]
#[test]
fn offload_gives_the_same_images_on_wgpu() {
    for variant in ["sd1", "sdxl", "flux-dev", "cogview4", "kandinsky3", "if", "kandinsky21"] {
        offload_is_bit_identical(variant, "wgpu", variant == "sd1");
    }
}

#[test]
fn offload_changes_nothing_on_the_cpu() {
    for variant in
        ["sd1", "alt", "sdxl", "sd3", "flux-dev", "cogview4", "lumina2", "kandinsky3", "if", "kandinsky21"]
    {
        offload_is_bit_identical(variant, "cpu", true);
    }
}
