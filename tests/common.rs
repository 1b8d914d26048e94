//! Helpers shared by the end-to-end tests: run the built `culturelens` binary and inspect results.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `culturelens` with `args`; returns the process output.
pub fn culturelens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_culturelens")).args(args).output().expect("culturelens binary runs")
}

/// Runs `culturelens` and asserts success, returning stdout.
pub fn ok(args: &[&str]) -> String {
    let out = culturelens(args);
    assert!(
        out.status.success(),
        "culturelens {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `culturelens`, asserts a non-zero exit and returns stderr.
pub fn fails(args: &[&str]) -> String {
    let out = culturelens(args);
    assert!(!out.status.success(), "culturelens {args:?} should fail but succeeded");
    String::from_utf8(out.stderr).unwrap()
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Parses a CSV file into header + rows.
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r.records().map(|rec| rec.unwrap().iter().map(String::from).collect()).collect();
    (header, rows)
}

/// The committed encoder fixtures (tiny random-weight models made by
/// scripts/fixtures/make_encoder_fixtures.py, and their reference outputs).
pub fn encoder_fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/culturelens-models-io/tests/fixtures/encoders")
}

/// The JSON header and the bytes of `model`'s reference.safetensors.
fn reference_file(model: &str) -> (serde_json::Value, Vec<u8>) {
    let bytes = std::fs::read(encoder_fixtures().join(model).join("reference.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (header, bytes[8 + n..].to_vec())
}

/// Tensor `key` of `model`'s reference.safetensors as f32, row-major (read through the JSON
/// header's offsets).
pub fn reference(model: &str, key: &str) -> Vec<f32> {
    let (header, data) = reference_file(model);
    let offsets = header[key]["data_offsets"].as_array().unwrap();
    let (a, b) = (offsets[0].as_u64().unwrap() as usize, offsets[1].as_u64().unwrap() as usize);
    data[a..b].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// The texts the fixture script embedded (the reference's metadata).
pub fn reference_texts(model: &str) -> Vec<String> {
    let (header, _) = reference_file(model);
    serde_json::from_str(header["__metadata__"]["texts"].as_str().unwrap()).unwrap()
}

pub fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}
