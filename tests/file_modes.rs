//! Outputs get the user's umask, as `std::fs::write` and `create_dir_all` would: under umask 022
//! every file a command writes is 0644 and every folder 0755, under 077 0600 and 0700. (Before
//! the output kit, every atomically written file kept its temporary file's 0600.) Covered: `demo
//! --write`, `sos` (table, report, manifests), `embed` with `--shard` (table, metadata, part file),
//! `generate` (PNGs, manifest, provenance), `bundle` (a folder swapped into place) and `figures`
//! (PNG and SVG).

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use culturelens_testkit::fixture;

use crate::common::Cli;

/// Every file and folder under `root` (not `root` itself) with its permission bits.
fn modes(root: &Path) -> Vec<(PathBuf, bool, u32)> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            found.push((path, meta.is_dir(), meta.permissions().mode() & 0o777));
        }
    }
    found.sort();
    found
}

/// Every command's outputs, under `mask`, in `root/out` (which the test makes itself).
fn write_outputs(root: &Path, mask: u32) -> PathBuf {
    let out = root.join("out");
    std::fs::create_dir(&out).unwrap();
    let cli = |command: &str| Cli::new(command).umask(mask);
    let demo = out.join("demo");
    cli("demo").opt("--write", &demo).run_ok();
    let (embeddings, meta) = (demo.join("embeddings.npy"), demo.join("meta.csv"));
    cli("sos")
        .opt("--embeddings", &embeddings)
        .opt("--meta", &meta)
        .opt("--out", out.join("sos.csv"))
        .opt("--report", out.join("sos_report.json"))
        .run_ok();
    cli("bundle")
        .opt("--embeddings", &embeddings)
        .opt("--meta", &meta)
        .opt("--out", out.join("bundle"))
        .run_ok();
    cli("figures")
        .opt("--sos", out.join("sos.csv"))
        .opt("--out", out.join("figures"))
        .opt("--scale", "1")
        .run_ok();
    cli("embed")
        .opt("--images", fixture("encoders/images"))
        .opt("--weights", fixture("encoders/clip"))
        .opt("--out", out.join("embedded.npy"))
        .opt("--shard", "1/1")
        .run_ok();
    let pipeline = fixture("diffusion/tiny-sd1");
    cli("generate")
        .opt("--pipeline", pipeline)
        .opt("--prompt", "a photo of the food in china")
        .opt("--out", out.join("images"))
        .opt("--steps", "1")
        .opt("--height", "16")
        .opt("--width", "16")
        .run_ok();
    out
}

#[test]
fn outputs_take_the_users_umask() {
    for (mask, file, folder) in [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)] {
        let tmp = tempfile::tempdir().unwrap();
        let out = write_outputs(tmp.path(), mask);
        let found = modes(&out);
        let names: Vec<String> =
            found.iter().map(|(p, _, _)| p.strip_prefix(&out).unwrap().display().to_string()).collect();
        for wanted in [
            "demo/embeddings.npy",
            "demo/provenance.json",
            "sos.csv",
            "sos.csv.provenance.json",
            "sos_report.json",
            "bundle",
            "bundle/manifest.json",
            "bundle/provenance.json",
            "figures/provenance.json",
            "embedded.npy",
            "embedded.csv",
            "embedded.npy.part.json",
            "embedded.npy.provenance.json",
            "images",
            "images/000000_00.png",
            "images/manifest.csv",
            "images/provenance.json",
        ] {
            assert!(names.iter().any(|n| n == wanted), "{wanted} missing from {names:?}");
        }
        assert!(names.iter().any(|n| n.starts_with("figures/") && n.ends_with(".png")), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("figures/") && n.ends_with(".svg")), "{names:?}");
        for (path, is_dir, mode) in &found {
            let want = if *is_dir { folder } else { file };
            assert_eq!(*mode, want, "{} under umask {mask:03o}: {mode:03o}, want {want:03o}", path.display());
        }
    }
}
