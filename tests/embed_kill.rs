//! `kill -9` at random points of `culturelens embed`, then resume, over and over: every finished
//! item is kept exactly once, a half-written file is never taken as finished, and the table
//! equals an uninterrupted run's, byte for byte.
//!
//! The loop is `common::kill_loop` (shared with `generate_kill.rs`): kill points drawn from a
//! seeded SplitMix64 (the seed is printed), uniformly over the whole run, model loading and the
//! final write included. After every kill the test reads the
//! resume log in its documented format (`native/src/work/resume.rs`) and checks that its whole
//! records are distinct items (nothing redone), include every item finished before (nothing
//! lost) and hold exactly the uninterrupted run's values; and that an output table, if present,
//! is the finished one (written atomically).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Instant;

use culturelens_rng::SplitMix64;
use culturelens_testkit::fixture;

use crate::common::{Cli, Killable, checked_resume_records, kill_loop};

/// Images in the test folder: enough that a run takes many kills to finish.
const IMAGES: usize = 48;
/// Kills the test makes at least (over as many fresh runs as that takes).
const MIN_KILLS: usize = 20;
/// Seed of the kill points.
const SEED: u64 = 17;

/// `IMAGES` distinct small PNGs (seeded colour gradients), named in row order.
fn write_images(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = SplitMix64::new(SEED);
    for i in 0..IMAGES {
        let (a, b, c) = (rng.below(256) as u32, rng.below(256) as u32, rng.below(256) as u32);
        let img = image::RgbImage::from_fn(24, 20, |x, y| {
            image::Rgb([((a + 9 * x) % 256) as u8, ((b + 11 * y) % 256) as u8, ((c + 5 * x * y) % 256) as u8])
        });
        img.save(dir.join(format!("img{i:03}.png"))).unwrap();
    }
}

/// `embed` of the test images under the kill loop, checked against the uninterrupted table.
struct Embed {
    images: PathBuf,
    reference: PathBuf,
    /// The uninterrupted run's rows by resume key (the image path).
    rows: BTreeMap<String, Vec<f32>>,
    dim: usize,
    /// The items the current run's log held after its last attempt.
    finished: BTreeSet<String>,
}

impl Killable for Embed {
    fn command(&self, dir: &Path) -> Command {
        Cli::new("embed")
            .opt("--images", &self.images)
            .opt("--weights", fixture("encoders/clip"))
            .opt("--out", dir.join("e.npy"))
            .opt("--batch", "1")
            .into_command()
    }

    fn start(&mut self, _dir: &Path) {
        self.finished.clear();
    }

    fn attempt_ended(&mut self, dir: &Path, status: Option<ExitStatus>, stderr: &str, kill: usize) -> bool {
        let (out, log) = (dir.join("e.npy"), dir.join("e.npy.resume"));
        // A resumed run reuses exactly the items finished before it (nothing redone).
        if !self.finished.is_empty() && (status.is_some() || stderr.contains("resuming")) {
            let resumed = format!("resuming: {} of {IMAGES} rows already embedded", self.finished.len());
            assert!(stderr.contains(&resumed), "expected `{resumed}`:\n{stderr}");
        }
        // Exited by itself, or killed after the log's removal (the last step of a finished run):
        // the (atomic) table is complete.
        if status.is_some() || (out.exists() && !log.exists()) {
            return true;
        }
        // The log's whole records: distinct, a superset of before, the reference values.
        for (key, values) in checked_resume_records(&log, self.dim, &mut self.finished, kill) {
            assert_eq!(
                values, self.rows[&key],
                "kill {kill}: {key} holds other values than the uninterrupted run"
            );
        }
        // The table is written atomically: present means finished.
        if out.exists() {
            assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&self.reference).unwrap(), "kill {kill}");
        }
        false
    }

    fn finished(&mut self, dir: &Path) {
        // The finished run equals the uninterrupted one, and left no log.
        assert_eq!(std::fs::read(dir.join("e.npy")).unwrap(), std::fs::read(&self.reference).unwrap());
        assert_eq!(
            std::fs::read(dir.join("e.csv")).unwrap(),
            std::fs::read(self.reference.with_extension("csv")).unwrap()
        );
        assert!(!dir.join("e.npy.resume").exists(), "the log is removed after success");
    }
}

#[test]
fn embed_killed_at_random_points_resumes_to_the_uninterrupted_table() {
    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("imgs");
    write_images(&images);

    // The uninterrupted run, and its rows by resume key (the image path).
    let reference = tmp.path().join("reference.npy");
    let started = Instant::now();
    Cli::new("embed")
        .opt("--images", &images)
        .opt("--weights", fixture("encoders/clip"))
        .opt("--out", &reference)
        .opt("--batch", "1")
        .run_ok();
    let whole = started.elapsed();
    let table = culturelens_table::load_table(&reference, Some(&reference.with_extension("csv"))).unwrap();
    let rows: BTreeMap<String, Vec<f32>> = table
        .meta
        .column("image")
        .unwrap()
        .iter()
        .enumerate()
        .map(|(r, name)| (images.join(name).to_string_lossy().into_owned(), table.embeddings.row(r).to_vec()))
        .collect();
    println!("seed {SEED}; an uninterrupted run takes {whole:.2?}");
    let mut embed = Embed { images, reference, rows, dim: table.dim(), finished: BTreeSet::new() };
    let (kills, _) = kill_loop(tmp.path(), SEED, MIN_KILLS, whole, &mut embed);
    assert!(kills >= MIN_KILLS);
}
