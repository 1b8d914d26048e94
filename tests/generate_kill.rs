//! `kill -9` at random points of `culturelens generate`, then resume, over and over (issue 17):
//! every finished image is kept exactly once, a half-written PNG is never taken as finished, and
//! the images, the manifest and the `--out-npy` array equal an uninterrupted run's, byte for byte.
//!
//! The loop is `common::kill_loop` (shared with `embed_kill.rs`): kill points drawn from a seeded
//! SplitMix64, uniformly over an uninterrupted run's time (pipeline loading, the denoising loops,
//! the final writes). After every kill the test reads the resume log
//! (`OUT/manifest.csv.resume`, `native/src/work/resume.rs`; each record holds the image's floats
//! because of `--out-npy`) and checks that its whole records are distinct images (nothing redone)
//! including every image logged before (nothing lost), hold the uninterrupted run's values, and
//! name PNGs that are complete; that every PNG in the folder is complete (written atomically); and
//! that a manifest or array, if present, is the finished one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Instant;

use crate::common::{Cli, Killable, checked_resume_records, kill_loop};

/// Prompts of the run (one image each): enough that a run takes several kills to finish.
const PROMPTS: usize = 10;
/// Kills the test makes at least (over as many fresh runs as that takes).
const MIN_KILLS: usize = 20;
/// Seed of the kill points.
const SEED: u64 = 13;
/// Floats of one 16 × 16 image, the width of a resume record with `--out-npy`.
const PIXELS: usize = 16 * 16 * 3;

fn pipeline(name: &str) -> PathBuf {
    culturelens_testkit::fixture(&format!("diffusion/{name}"))
}

/// The arguments of every run on the tiny pipeline `name` but `--out` and `--out-npy`.
fn arguments(name: &str, prompts: &Path, extra: &[&str]) -> Vec<String> {
    let p = |path: &Path| path.to_string_lossy().into_owned();
    ["generate", "--pipeline", &p(&pipeline(name)), "--prompts", &p(prompts), "--steps", "3"]
        .into_iter()
        .chain(["--height", "16", "--width", "16", "--batch", "2"])
        .chain(extra.iter().copied())
        .map(String::from)
        .collect()
}

/// The PNGs of a folder by name.
fn pngs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "png"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect()
}

/// `generate` under the kill loop, checked against the uninterrupted run in `reference`.
struct Generate {
    args: Vec<String>,
    reference: PathBuf,
    /// The uninterrupted run's PNG bytes and decoded floats, by image name.
    images: BTreeMap<String, Vec<u8>>,
    values: BTreeMap<String, Vec<f32>>,
    /// The images the current run's log held after its last attempt.
    finished: BTreeSet<String>,
}

impl Killable for Generate {
    fn command(&self, dir: &Path) -> Command {
        Cli::from_args(&self.args)
            .opt("--out", dir.join("out"))
            .opt("--out-npy", dir.join("images.npy"))
            .into_command()
    }

    fn start(&mut self, _dir: &Path) {
        self.finished.clear();
    }

    fn attempt_ended(&mut self, dir: &Path, status: Option<ExitStatus>, stderr: &str, kill: usize) -> bool {
        let out = dir.join("out");
        let (manifest, log) = (out.join("manifest.csv"), out.join("manifest.csv.resume"));
        // A resumed run redoes none of the images logged before it.
        if !self.finished.is_empty() && (status.is_some() || stderr.contains("resuming")) {
            let resumed = format!("resuming: {} of {PROMPTS} prompts already generated", self.finished.len());
            assert!(stderr.contains(&resumed), "expected `{resumed}`:\n{stderr}");
        }
        if status.is_some() || (manifest.exists() && !log.exists()) {
            return true;
        }
        // Every PNG in the folder is complete (atomic writes): the uninterrupted run's bytes.
        let written = if out.exists() { pngs(&out) } else { BTreeMap::new() };
        for (name, bytes) in &written {
            assert_eq!(Some(bytes), self.images.get(name), "kill {kill}: {name} is not the finished image");
        }
        // The log: distinct, a superset of before, each a finished PNG with the reference floats.
        for (name, values) in checked_resume_records(&log, PIXELS, &mut self.finished, kill) {
            assert_eq!(values, self.values[&name], "kill {kill}: {name} logged with other values");
            assert!(written.contains_key(&name), "kill {kill}: {name} is logged but its PNG is missing");
        }
        // The manifest and the array are written atomically: present means finished.
        for (file, reference) in [
            (&manifest, self.reference.join("manifest.csv")),
            (&dir.join("images.npy"), self.reference.join("images.npy")),
        ] {
            if file.exists() {
                assert_eq!(std::fs::read(file).unwrap(), std::fs::read(reference).unwrap(), "kill {kill}");
            }
        }
        false
    }

    fn finished(&mut self, dir: &Path) {
        let out = dir.join("out");
        assert_eq!(pngs(&out), self.images, "the finished run's PNGs");
        for (file, reference) in [
            (out.join("manifest.csv"), self.reference.join("manifest.csv")),
            (dir.join("images.npy"), self.reference.join("images.npy")),
        ] {
            assert_eq!(
                std::fs::read(&file).unwrap(),
                std::fs::read(reference).unwrap(),
                "{}",
                file.display()
            );
        }
        assert!(!out.join("manifest.csv.resume").exists(), "the log is removed after success");
    }
}

#[test]
fn generate_killed_at_random_points_resumes_to_the_uninterrupted_images() {
    killed_and_resumed("tiny-sd1", &[]);
}

/// The same on a flow-matching pipeline (FLUX-schnell-like: packed latents, two text encoders).
#[test]
fn flux_killed_at_random_points_resumes_to_the_uninterrupted_images() {
    killed_and_resumed("tiny-flux-schnell", &["--max-sequence-length", "8"]);
}

/// The same on the SDXL pipeline class (Playground-v2.5-like: two CLIP towers, text_time, the
/// EDM DPM-Solver++ scheduler).
#[test]
fn sdxl_killed_at_random_points_resumes_to_the_uninterrupted_images() {
    killed_and_resumed("tiny-playground", &[]);
}

fn killed_and_resumed(name: &str, extra: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.csv");
    let rows: Vec<String> =
        (0..PROMPTS).map(|i| format!("p{i},a photo of the food in china number {i}")).collect();
    std::fs::write(&prompts, format!("id,prompt\n{}\n", rows.join("\n"))).unwrap();
    let args = arguments(name, &prompts, extra);

    // The uninterrupted run.
    let reference = tmp.path().join("reference");
    let started = Instant::now();
    Cli::from_args(&args).opt("--out", &reference).opt("--out-npy", reference.join("images.npy")).run_ok();
    let whole = started.elapsed();
    let images = pngs(&reference);
    assert_eq!(images.len(), PROMPTS);
    let (shape, floats) = culturelens_table::read_npy_nd(&reference.join("images.npy")).unwrap();
    assert_eq!(shape, [PROMPTS, 16, 16, 3]);
    let values = images.keys().cloned().zip(floats.chunks(PIXELS).map(<[f32]>::to_vec)).collect();
    println!("{name}: seed {SEED}; an uninterrupted run takes {whole:.2?}");

    let mut generate = Generate { args, reference, images, values, finished: BTreeSet::new() };
    let (kills, _) = kill_loop(tmp.path(), SEED, MIN_KILLS, whole, &mut generate);
    assert!(kills >= MIN_KILLS);
}
