//! Embeds the git commit the binary is built from as `CULTURELENS_GIT_COMMIT` (the provenance
//! manifests' `git_commit`): `$CULTURELENS_GIT_COMMIT` when set (a source tarball's packager sets
//! it), else `git rev-parse HEAD` of the checkout, else `unknown` (no `.git`, or no git). Reruns
//! when HEAD or the branch it points to moves.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=CULTURELENS_GIT_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let commit = match std::env::var("CULTURELENS_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
                let git_dir = Path::new(&git_dir);
                println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
                if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    let common = git(&["rev-parse", "--git-common-dir"])
                        .map(|c| Path::new(env!("CARGO_MANIFEST_DIR")).join(c))
                        .unwrap_or_else(|| git_dir.to_path_buf());
                    for dir in [git_dir, common.as_path()] {
                        if dir.join(&reference).exists() {
                            println!("cargo:rerun-if-changed={}", dir.join(&reference).display());
                        }
                    }
                    if common.join("packed-refs").exists() {
                        println!("cargo:rerun-if-changed={}", common.join("packed-refs").display());
                    }
                }
            }
            git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_string())
        }
    };
    println!("cargo:rustc-env=CULTURELENS_GIT_COMMIT={commit}");
}
