//! The encoders on the wgpu backend (lavapipe on a machine without GPU) give the same
//! embeddings as transformers: `culturelens embed --device wgpu` on the committed fixtures.

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
    for model in ["clip", "siglip", "dinov2", "dinov2_reg"] {
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
