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
