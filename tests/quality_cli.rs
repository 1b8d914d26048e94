//! End-to-end tests of `culturelens quality` (HPS v2 scores, the quality of CUBE's qVS) and of
//! `import-weights --arch hps-*`, on the tiny random-weight OpenCLIP model of ViT-H-14's family
//! that `scripts/fixtures/make_quality_hps.py` saved as HPS ships its checkpoints and scored with
//! the `hpsv2` package's own `score` (tests/fixtures/quality/scores.json).

use std::path::{Path, PathBuf};

use culturelens_testkit::{fixture, read_fixture};

use crate::common::{Cli, read_csv};

/// Largest difference from hpsv2's scores allowed: 4.5e-7 measured (x86-64, flex, the CPU
/// backend); about 2.2× that (printed with `--nocapture`).
const PARITY: f64 = 1e-6;

fn quality_fixture(name: &str) -> PathBuf {
    fixture(&format!("quality/{name}"))
}

/// `import-weights` of the fixture's HPS checkpoint into `tmp/hps`.
fn import(tmp: &Path, arch: &str) -> PathBuf {
    let out = tmp.join("hps");
    Cli::new("import-weights")
        .opt("--pickle", quality_fixture("hps_tiny.pt"))
        .opt("--arch", arch)
        .opt("--tokenizer", quality_fixture("tokenizer.json"))
        .opt("--model-cfg", quality_fixture("model_cfg.json"))
        .opt("--out", &out)
        .run_ok();
    out
}

fn quality(weights: &Path, manifest: &Path, out: &Path) -> Cli {
    Cli::new("quality").opt("--images", manifest).opt("--weights", weights).opt("--out", out)
}

fn expected() -> Vec<f64> {
    let v: serde_json::Value = serde_json::from_str(&read_fixture("quality/scores.json")).unwrap();
    v["hps"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

#[test]
fn quality_matches_the_hpsv2_package() {
    let tmp = tempfile::tempdir().unwrap();
    let weights = import(tmp.path(), "hps-v2.1");
    for file in ["open_clip_config.json", "open_clip_model.safetensors", "tokenizer.json", "provenance.json"]
    {
        assert!(weights.join(file).is_file(), "{file}");
    }
    let out = tmp.path().join("q.csv");
    let run = quality(&weights, &quality_fixture("manifest.csv"), &out).run_ok();
    assert!(run.stderr.contains("1 prompt(s) cut to the 77-token context"), "{}", run.stderr);
    let (header, rows) = read_csv(&out);
    assert_eq!(header, ["image", "prompt", "model", "hps", "hps_version"]);
    let (_, manifest_rows) = read_csv(&quality_fixture("manifest.csv"));
    let want = expected();
    assert_eq!(rows.len(), want.len());
    let mut worst: f64 = 0.0;
    for ((row, given), w) in rows.iter().zip(&manifest_rows).zip(&want) {
        assert_eq!(row[..3], given[..], "the manifest's columns are kept");
        assert_eq!(row[4], "v2.1");
        let got: f64 = row[3].parse().unwrap();
        worst = worst.max((got - w).abs());
    }
    println!("quality vs hpsv2: max |Δ| = {worst:.2e} (bound {PARITY:.0e})");
    assert!(worst <= PARITY, "{worst}");
    assert!(tmp.path().join("q.csv.provenance.json").is_file());

    // vendi reads the scores as CUBE's quality: qVS = mean(hps) · VS (Eq. 2); the categorical
    // kernel on `model` (two classes of three) has VS = 2.
    let v_out = tmp.path().join("v.json");
    Cli::new("vendi")
        .opt("--meta", &out)
        .opt("--kernel", "categorical")
        .opt("--columns", "model")
        .opt("--weights", "1")
        .opt("--quality-col", "hps")
        .opt("--out", &v_out)
        .run_ok();
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&v_out).unwrap()).unwrap();
    let vs = v["vs"].as_f64().unwrap();
    assert!((vs - 2.0).abs() < 1e-9, "{v}");
    let mean = rows.iter().map(|r| r[3].parse::<f64>().unwrap()).sum::<f64>() / rows.len() as f64;
    assert!((v["qvs"].as_f64().unwrap() - mean * vs).abs() < 1e-9, "{v}");
}

/// Largest difference from hpsv2's scores allowed on wgpu: 4.6e-7 measured (lavapipe, no GPU);
/// about 2.2× that (printed with `--nocapture`).
#[cfg(feature = "wgpu")]
const PARITY_WGPU: f64 = 1e-6;

/// The same scores on wgpu (the model and the cosines on the device).
#[cfg(feature = "wgpu")]
#[test]
fn quality_on_wgpu_matches_the_hpsv2_package() {
    let tmp = tempfile::tempdir().unwrap();
    let weights = import(tmp.path(), "hps-v2.1");
    let out = tmp.path().join("q.csv");
    quality(&weights, &quality_fixture("manifest.csv"), &out).opt("--device", "wgpu").run_ok();
    let (_, rows) = read_csv(&out);
    let worst = rows
        .iter()
        .zip(expected())
        .map(|(r, w)| (r[3].parse::<f64>().unwrap() - w).abs())
        .fold(0.0, f64::max);
    println!("quality on wgpu vs hpsv2: max |Δ| = {worst:.2e} (bound {PARITY_WGPU:.0e})");
    assert!(worst <= PARITY_WGPU, "{worst}");
}

#[test]
fn hps_version_is_recorded_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let weights = import(tmp.path(), "hps-v2.0");
    let out = tmp.path().join("q.csv");
    let run = quality(&weights, &quality_fixture("manifest.csv"), &out).run_ok();
    assert!(run.stderr.contains("HPS v2.0 scores of 6 images"), "{}", run.stderr);
    let (_, rows) = read_csv(&out);
    assert!(rows.iter().all(|r| r[4] == "v2.0"));
}

#[test]
fn refusals_name_the_file_key_row_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    // A folder that is not an HPS import.
    let out = tmp.path().join("q.csv");
    let run = quality(&fixture("encoders/open_clip"), &quality_fixture("manifest.csv"), &out).run_fails();
    assert!(
        run.stderr.contains("not an HPS folder") && run.stderr.contains("encoders/open_clip"),
        "{}",
        run.stderr
    );
    // HPS without a tokenizer.
    let run = Cli::new("import-weights")
        .opt("--pickle", quality_fixture("hps_tiny.pt"))
        .opt("--arch", "hps-v2.1")
        .opt("--out", tmp.path().join("x"))
        .run_fails();
    assert!(run.stderr.contains("needs --tokenizer"), "{}", run.stderr);
    let run = Cli::new("import-weights")
        .opt("--pickle", quality_fixture("hps_tiny.pt"))
        .opt("--arch", "hps-v2.1")
        .opt("--tokenizer", quality_fixture("tokenizer.json"))
        .opt("--out", tmp.path().join("vit-h"))
        .run_fails();
    // Without --model-cfg the checkpoint is read as ViT-H-14: the tiny tensors do not fit.
    assert!(run.stderr.contains("hps_tiny.pt"), "{}", run.stderr);
    assert!(!tmp.path().join("vit-h").exists(), "no folder is left behind");

    // The manifest: a missing prompt column, then an empty prompt, by file, row and column.
    let weights = import(tmp.path(), "hps-v2.1");
    let manifest = tmp.path().join("images.csv");
    let images = fixture("encoders/images");
    std::fs::write(
        &manifest,
        format!("image,text\n{0}/a_rgb.png,a photo\n{0}/b_grey.png,\n", images.display()),
    )
    .unwrap();
    let run = quality(&weights, &manifest, &out).run_fails();
    assert!(run.stderr.contains("images.csv") && run.stderr.contains("prompt"), "{}", run.stderr);
    let run = quality(&weights, &manifest, &out).opt("--prompt-col", "text").run_fails();
    assert!(run.stderr.contains("images.csv") && run.stderr.contains("text"), "{}", run.stderr);
    assert!(!out.exists(), "a failed run writes nothing");
}

#[test]
fn an_interrupted_run_resumes_from_its_log() {
    // The second image is missing at first: the run fails, keeping the first image's features
    // in OUT.resume; once the file is there, the rerun scores only it and matches hpsv2.
    let tmp = tempfile::tempdir().unwrap();
    let weights = import(tmp.path(), "hps-v2.1");
    let encoder_images = fixture("encoders/images");
    std::fs::copy(encoder_images.join("a_rgb.png"), tmp.path().join("a.png")).unwrap();
    let manifest = tmp.path().join("m.csv");
    std::fs::write(&manifest, "image,prompt\na.png,A photo of a German person\nb.png,sushi\n").unwrap();
    let out = tmp.path().join("q.csv");
    let run = quality(&weights, &manifest, &out).opt("--batch", "1").run_fails();
    assert!(run.stderr.contains("b.png") && run.stderr.contains("q.csv.resume"), "{}", run.stderr);
    assert!(!out.exists());
    std::fs::copy(encoder_images.join("e_lossless.webp"), tmp.path().join("b.png")).unwrap();
    let run = quality(&weights, &manifest, &out).opt("--batch", "1").run_ok();
    assert!(run.stderr.contains("resuming: 1 of 2 images already scored"), "{}", run.stderr);
    assert!(!tmp.path().join("q.csv.resume").exists(), "the log goes once the output is written");
    let (_, rows) = read_csv(&out);
    // Rows 0 and 3 of the fixture: the same image and prompt pairs.
    let want = expected();
    for (row, w) in rows.iter().zip([want[0], want[3]]) {
        let got: f64 = row[2].parse().unwrap();
        assert!((got - w).abs() <= PARITY, "{got} vs {w}");
    }
}
