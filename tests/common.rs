//! Helpers shared by the end-to-end tests: run the built `culturelens` binary and inspect results.

#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::{Command, ExitStatus, Output};

/// A `culturelens` command line, written as it reads in a shell:
/// `Cli::new("embed").opt("--images", &dir).opt("--out", &out).flag("--skip-bad").run_ok()`.
pub struct Cli {
    command: Command,
    line: Vec<OsString>,
}

/// What a finished `culturelens` run printed.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Cli {
    /// `culturelens SUBCOMMAND`.
    pub fn new(subcommand: &str) -> Self {
        Self { command: Command::new(env!("CARGO_BIN_EXE_culturelens")), line: Vec::new() }.arg(subcommand)
    }

    /// `culturelens ARGS…` as one list (the first being the subcommand).
    pub fn from_args<S: AsRef<OsStr>>(args: &[S]) -> Self {
        let mut cli = Self { command: Command::new(env!("CARGO_BIN_EXE_culturelens")), line: Vec::new() };
        for a in args {
            cli = cli.arg(a);
        }
        cli
    }

    /// One argument as it is (a positional value, or a flag without a value).
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.line.push(arg.as_ref().to_owned());
        self.command.arg(arg);
        self
    }

    /// A flag without a value (`--skip-bad`).
    pub fn flag(self, name: &str) -> Self {
        self.arg(name)
    }

    /// An option and its value (`--out FILE`).
    pub fn opt(self, name: &str, value: impl AsRef<OsStr>) -> Self {
        self.arg(name).arg(value)
    }

    /// Sets an environment variable of the run.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Removes an environment variable from the run.
    pub fn env_remove(mut self, key: &str) -> Self {
        self.command.env_remove(key);
        self
    }

    /// The command line, for messages.
    fn shown(&self) -> String {
        self.line.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    }

    /// Runs the command, whatever its exit status.
    pub fn run(self) -> Run {
        let Output { status, stdout, stderr } = self.output();
        Run { status, stdout: String::from_utf8(stdout).unwrap(), stderr: String::from_utf8(stderr).unwrap() }
    }

    /// Runs the command; returns the raw process output.
    pub fn output(mut self) -> Output {
        self.command.output().expect("culturelens binary runs")
    }

    /// Runs the command and asserts that it succeeds.
    pub fn run_ok(self) -> Run {
        let shown = self.shown();
        let run = self.run();
        assert!(
            run.status.success(),
            "culturelens {shown} failed:\nstdout: {}\nstderr: {}",
            run.stdout,
            run.stderr
        );
        run
    }

    /// Runs the command and asserts that it fails (exit status not 0).
    pub fn run_fails(self) -> Run {
        let shown = self.shown();
        let run = self.run();
        assert!(
            !run.status.success(),
            "culturelens {shown} should fail but succeeded:\nstderr: {}",
            run.stderr
        );
        run
    }
}

/// Runs `culturelens` with `args`; returns the process output.
pub fn culturelens(args: &[&str]) -> Output {
    Cli::from_args(args).output()
}

/// Runs `culturelens` and asserts success, returning stdout.
pub fn ok(args: &[&str]) -> String {
    Cli::from_args(args).run_ok().stdout
}

/// Runs `culturelens`, asserts a non-zero exit and returns stderr.
pub fn fails(args: &[&str]) -> String {
    Cli::from_args(args).run_fails().stderr
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

/// The wgpu device of this test process (lavapipe on a machine without a GPU), initialised once:
/// every test file is a module of one test binary, and Burn refuses a second initialisation of
/// the same device ("Service already initialized").
pub fn wgpu() -> burn::tensor::Device {
    static WGPU: std::sync::OnceLock<burn::tensor::Device> = std::sync::OnceLock::new();
    WGPU.get_or_init(|| {
        burn::tensor::Device::wgpu_options().init().unwrap_or_else(|e| {
            panic!("no wgpu adapter ({e}); install a Vulkan driver, e.g. mesa-vulkan-drivers")
        })
    })
    .clone()
}
