//! `kill -9` at random points of `culturelens embed`, then resume, over and over: every finished
//! item is kept exactly once, a half-written file is never taken as finished, and the table
//! equals an uninterrupted run's, byte for byte.
//!
//! The kill points are drawn from a seeded SplitMix64 (the seed is printed), uniformly over the
//! whole run, model loading and the final write included. After every kill the test reads the
//! resume log in its documented format (`native/src/work/resume.rs`) and checks that its whole
//! records are distinct items (nothing redone), include every item finished before (nothing
//! lost) and hold exactly the uninterrupted run's values; and that an output table, if present,
//! is the finished one (written atomically).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use culturelens_rng::SplitMix64;

use crate::common::{Cli, encoder_fixtures as fixtures};

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

fn embed(images: &Path, out: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_culturelens"));
    cmd.arg("embed")
        .arg("--images")
        .arg(images)
        .arg("--weights")
        .arg(fixtures().join("clip"))
        .arg("--out")
        .arg(out)
        .args(["--batch", "1"]);
    cmd
}

/// The whole records of a resume log (header line, then `u32` LE key length, key, `dim` f32 LE),
/// in file order; a torn last record is left out, as `embed` leaves it out.
fn log_records(bytes: &[u8], dim: usize) -> Vec<(String, Vec<f32>)> {
    let Some(header) = bytes.iter().position(|&b| b == b'\n') else { return Vec::new() };
    let mut rest = &bytes[header + 1..];
    let mut records = Vec::new();
    while rest.len() >= 4 {
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        let Some(record) = rest.get(4..4 + len + 4 * dim) else { break };
        let key = String::from_utf8(record[..len].to_vec()).unwrap();
        let values =
            record[len..].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        records.push((key, values));
        rest = &rest[4 + len + 4 * dim..];
    }
    records
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
        .opt("--weights", fixtures().join("clip"))
        .opt("--out", &reference)
        .opt("--batch", "1")
        .run_ok();
    let whole = started.elapsed();
    let table = culturelens_table::load_table(&reference, Some(&reference.with_extension("csv"))).unwrap();
    let dim = table.dim();
    let rows: BTreeMap<String, Vec<f32>> = table
        .meta
        .column("image")
        .unwrap()
        .iter()
        .enumerate()
        .map(|(r, name)| (images.join(name).to_string_lossy().into_owned(), table.embeddings.row(r).to_vec()))
        .collect();
    println!("seed {SEED}; an uninterrupted run takes {whole:.2?}");

    let mut rng = SplitMix64::new(SEED);
    let (mut kills, mut runs) = (0, 0);
    while kills < MIN_KILLS {
        // A fresh run, killed at random points until one finishes.
        runs += 1;
        let dir = tmp.path().join(format!("run{runs}"));
        std::fs::create_dir(&dir).unwrap();
        let out = dir.join("e.npy");
        let log = dir.join("e.npy.resume");
        let mut finished: BTreeSet<String> = BTreeSet::new();
        let mut kills_this_run = 0;
        loop {
            // Each attempt is killed at a uniform point of an uninterrupted run's time (model
            // loading, embedding or the final write), unless it finishes first.
            let delay = whole.mul_f64(rng.next_f64());
            let stderr_path = dir.join("stderr.txt");
            let mut child = embed(&images, &out)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&stderr_path).unwrap())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + delay;
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break Some(status);
                }
                if Instant::now() >= deadline {
                    break None;
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            let stderr = std::fs::read_to_string(&stderr_path).unwrap();
            // A resumed run reuses exactly the items finished before it (nothing redone).
            if !finished.is_empty() {
                let resumed = format!("resuming: {} of {IMAGES} rows already embedded", finished.len());
                if status.is_some() || stderr.contains("resuming") {
                    assert!(stderr.contains(&resumed), "expected `{resumed}`:\n{stderr}");
                }
            }
            if let Some(status) = status {
                assert!(status.success(), "run {runs} failed:\n{stderr}");
                break;
            }
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            kills += 1;
            kills_this_run += 1;
            assert!(kills_this_run < 500, "run {runs} makes no progress under kills");

            // Killed after the log's removal, the last step of a finished run: the (atomic) table
            // is complete, and the run counts as finished.
            if out.exists() && !log.exists() {
                break;
            }
            // The log's whole records: distinct, a superset of before, the reference values.
            let records = match std::fs::read(&log) {
                Ok(bytes) => log_records(&bytes, dim),
                Err(_) => Vec::new(),
            };
            let keys: BTreeSet<String> = records.iter().map(|(k, _)| k.clone()).collect();
            assert_eq!(keys.len(), records.len(), "kill {kills}: an item was logged twice (redone)");
            assert!(keys.is_superset(&finished), "kill {kills}: a finished item was lost");
            for (key, values) in &records {
                assert_eq!(
                    values, &rows[key],
                    "kill {kills}: {key} holds other values than the uninterrupted run"
                );
            }
            finished = keys;
            // The table is written atomically: present means finished.
            if out.exists() {
                assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap(), "kill {kills}");
            }
        }
        // The finished run equals the uninterrupted one, and left no log.
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap(), "run {runs}");
        assert_eq!(
            std::fs::read(dir.join("e.csv")).unwrap(),
            std::fs::read(reference.with_extension("csv")).unwrap(),
            "run {runs}"
        );
        assert!(!log.exists(), "run {runs}: the log is removed after success");
        println!("run {runs}: finished after {kills_this_run} kills");
    }
    println!("{kills} kills over {runs} runs; every run resumed to the uninterrupted table");
}
