//! Helpers shared by the end-to-end tests: run the built `culturelens` binary (the `Cli` builder,
//! the `kill -9` loop) and inspect its results. What every test of the workspace needs (the
//! fixtures root, test weights, upstream mirror, `max_abs`, `sha256`, the wgpu device) is in
//! `culturelens_testkit`.

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

    /// Runs the command with the file-creation mask `mask`, as a shell's `umask` sets it.
    #[cfg(unix)]
    pub fn umask(mut self, mask: u32) -> Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: the hook runs in the child between fork and exec and only calls umask(2), which
        // is async-signal-safe and cannot fail.
        unsafe {
            self.command.pre_exec(move || {
                libc::umask(mask as libc::mode_t);
                Ok(())
            });
        }
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

    /// The command itself, for a caller that spawns it and waits on it (the kill loop).
    pub fn into_command(self) -> Command {
        self.command
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

/// The JSON header and the bytes of `model`'s reference.safetensors (of the committed encoder
/// fixtures, `tests/fixtures/encoders/`: tiny random-weight models made by
/// scripts/fixtures/make_encoders.py, and their reference outputs).
fn reference_file(model: &str) -> (serde_json::Value, Vec<u8>) {
    let bytes = culturelens_testkit::read_fixture_bytes(&format!("encoders/{model}/reference.safetensors"));
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

/// A copy of the tiny pipeline `tests/fixtures/diffusion/{name}` in `tmp/pipe`, with `edit`
/// applied.
pub fn copy_pipeline(tmp: &Path, name: &str, edit: impl FnOnce(&Path)) -> std::path::PathBuf {
    let dir = tmp.join("pipe");
    let src = culturelens_testkit::fixture("diffusion").join(name);
    for entry in walk(&src) {
        let to = dir.join(entry.strip_prefix(&src).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    edit(&dir);
    dir
}

/// Every file under `dir`.
pub fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() { files.extend(walk(&path)) } else { files.push(path) }
    }
    files
}

/// Replaces `from` (which must be there) by `to` in the text file `path`.
pub fn replace_in(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{}: no {from}", path.display());
    std::fs::write(path, text.replace(from, to)).unwrap();
}

/// The case `name` of `tiny-{variant}.json`.
pub fn diffusion_case(variant: &str, name: &str) -> serde_json::Value {
    let path = culturelens_testkit::fixture("diffusion").join(format!("tiny-{variant}.json"));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone()
}

pub fn floats(value: &serde_json::Value) -> Vec<f32> {
    value.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()
}

/// `generate` on `pipeline` with the arguments of the case `name` of `tiny-{variant}.json`
/// (prompt, seed or `--latents`, steps, guidance, size, and where the case has them the
/// scheduler, T5 length, negative prompt, true CFG and text layer), writing `--out-npy`; returns
/// the max abs difference from diffusers' images and the output folder.
pub fn generate_case(tmp: &Path, variant: &str, name: &str, pipeline: &Path) -> (f32, std::path::PathBuf) {
    generate_case_on(tmp, variant, name, pipeline, "cpu")
}

/// [`generate_case`] with `--device device`.
pub fn generate_case_on(
    tmp: &Path,
    variant: &str,
    name: &str,
    pipeline: &Path,
    device: &str,
) -> (f32, std::path::PathBuf) {
    let c = diffusion_case(variant, name);
    let out = tmp.join(format!("{variant}-{name}-{device}"));
    let npy = tmp.join(format!("{variant}-{name}-{device}.npy"));
    let number = |key: &str| c[key].to_string();
    let mut cli = Cli::new("generate")
        .opt("--pipeline", pipeline)
        .opt("--device", device)
        .opt("--out", &out)
        .opt("--out-npy", &npy)
        .opt("--prompt", c["prompt"].as_str().unwrap())
        .opt("--steps", number("steps"))
        .opt("--guidance", number("guidance"))
        .opt("--height", number("height"))
        .opt("--width", number("width"))
        .opt("--images-per-prompt", number("images_per_prompt"));
    if let Some(n) = c.get("max_sequence_length") {
        cli = cli.opt("--max-sequence-length", n.to_string());
    }
    if let Some(scheduler) = c.get("scheduler").and_then(|s| s.as_str()) {
        cli = cli.opt("--scheduler", scheduler);
    }
    if let Some(negative) = c["negative_prompt"].as_str() {
        cli = cli.opt("--negative-prompt", negative);
    }
    if let Some(scale) = c.get("true_cfg") {
        cli = cli.opt("--true-cfg", scale.to_string());
    }
    if let Some(layer) = c["text_layer"].as_u64() {
        cli = cli.opt("--text-layer", layer.to_string());
    }
    // Kandinsky 2.1's prior.
    for key in ["prior_steps", "prior_guidance"] {
        if let Some(v) = c.get(key) {
            cli = cli.opt(&format!("--{}", key.replace('_', "-")), v.to_string());
        }
    }
    if !c["prior_latents"].is_null() {
        let path = write_latents(tmp, &format!("{variant}-{name}-prior-latents.npy"), &c, "prior_latents");
        cli = cli.opt("--prior-latents", &path);
    }
    if c["latents"].is_null() {
        cli = cli.opt("--seed", number("seed"));
    } else {
        let path = write_latents(tmp, &format!("{variant}-{name}-latents.npy"), &c, "latents");
        cli = cli.opt("--latents", &path);
        // IF: the seed of the scheduler's variance noise.
        if !c["seed"].is_null() {
            cli = cli.opt("--seed", number("seed"));
        }
    }
    cli.run_ok();
    let (shape, images) = culturelens_table::read_npy_nd(&npy).unwrap();
    let want: Vec<usize> =
        c["image_shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    assert_eq!(shape, want, "{variant} {name}");
    let err = culturelens_testkit::max_abs(&images, &floats(&c["images"]));
    println!("{variant} {name} through the CLI on {device}: max abs {err:.2e}");
    (err, out)
}

/// `generate` on `pipeline` with "a street", 2 steps and 16 × 16 (`--height` left to a case that
/// sets it) plus each case's arguments must fail with every wanted text in its stderr and write
/// nothing.
pub fn generate_refusals(tmp: &Path, pipeline: &Path, cases: &[(&[&str], &[&str])]) {
    for (extra, wanted) in cases {
        let out = tmp.join("out");
        let mut cli = Cli::new("generate")
            .opt("--pipeline", pipeline)
            .opt("--prompt", "a street")
            .opt("--out", &out)
            .opt("--steps", "2");
        if !extra.contains(&"--height") {
            cli = cli.opt("--height", "16");
        }
        cli = cli.opt("--width", "16");
        for a in *extra {
            cli = cli.arg(a);
        }
        let err = cli.run_fails().stderr;
        for w in *wanted {
            assert!(err.contains(w), "{extra:?}: {w:?} not in: {err}");
        }
        assert!(!out.exists(), "nothing may be written: {err}");
    }
}

/// The case's `key` values (`latents`, `prior_latents`) as the .npy `tmp/name` of the shape
/// `{key}_shape`.
fn write_latents(tmp: &Path, name: &str, c: &serde_json::Value, key: &str) -> std::path::PathBuf {
    let shape: Vec<usize> =
        c[format!("{key}_shape")].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    let path = tmp.join(name);
    let mut bytes = Vec::new();
    culturelens_table::write_npy_nd(&mut bytes, &shape, &floats(&c[key])).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
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

/// One command under the kill loop of [`kill_loop`]: how to start an attempt, and what to check
/// after each attempt and each finished run.
pub trait Killable {
    /// The command of one attempt of the run in `dir` (the same for every attempt of a run).
    fn command(&self, dir: &Path) -> std::process::Command;
    /// A fresh run starts in `dir`.
    fn start(&mut self, dir: &Path);
    /// An attempt of the run in `dir` ended: `status` when it exited by itself, `None` when it
    /// was killed (then `kill` counts the kills so far); `stderr` is what it printed. Checks the
    /// state it left and returns whether the run is finished.
    fn attempt_ended(&mut self, dir: &Path, status: Option<ExitStatus>, stderr: &str, kill: usize) -> bool;
    /// The run in `dir` finished: checks its outputs against the uninterrupted run's.
    fn finished(&mut self, dir: &Path);
}

/// `kill -9` at random points, then resume, over and over (issue 17): fresh runs in folders of
/// `tmp`, each attempt SIGKILLed at a uniform point of `whole` (an uninterrupted run's time:
/// loading, work and the final writes alike) unless it finishes first, until at least
/// `min_kills` kills are made and the last run has finished. The points come from a SplitMix64
/// seeded `seed`. Returns (kills, runs).
pub fn kill_loop(
    tmp: &Path,
    seed: u64,
    min_kills: usize,
    whole: std::time::Duration,
    target: &mut impl Killable,
) -> (usize, usize) {
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let mut rng = culturelens_rng::SplitMix64::new(seed);
    let (mut kills, mut runs) = (0, 0);
    while kills < min_kills {
        runs += 1;
        let dir = tmp.join(format!("run{runs}"));
        std::fs::create_dir(&dir).unwrap();
        target.start(&dir);
        let mut kills_this_run = 0;
        loop {
            let delay = whole.mul_f64(rng.next_f64());
            let stderr_path = tmp.join(format!("run{runs}.stderr"));
            let mut child = target
                .command(&dir)
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
            if status.is_none() {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                kills_this_run += 1;
                assert!(kills_this_run < 500, "run {runs} makes no progress under kills");
            }
            let stderr = std::fs::read_to_string(&stderr_path).unwrap();
            if let Some(status) = status {
                assert!(status.success(), "run {runs} failed:\n{stderr}");
            }
            if target.attempt_ended(&dir, status, &stderr, kills) {
                break;
            }
        }
        target.finished(&dir);
        println!("run {runs}: finished after {kills_this_run} kills");
    }
    println!("{kills} kills over {runs} runs (seed {seed}); every run resumed to the uninterrupted output");
    (kills, runs)
}

/// The whole records of a resume log (`native/src/work/resume.rs`: header line, then `u32` LE
/// key length, key, `width` f32 LE), in file order; a torn last record is left out, as the
/// commands leave it out.
pub fn resume_records(bytes: &[u8], width: usize) -> Vec<(String, Vec<f32>)> {
    let Some(header) = bytes.iter().position(|&b| b == b'\n') else { return Vec::new() };
    let mut rest = &bytes[header + 1..];
    let mut records = Vec::new();
    while rest.len() >= 4 {
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        let Some(record) = rest.get(4..4 + len + 4 * width) else { break };
        let key = String::from_utf8(record[..len].to_vec()).unwrap();
        let values =
            record[len..].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        records.push((key, values));
        rest = &rest[4 + len + 4 * width..];
    }
    records
}

/// The whole records of the resume log at `path` (none when it does not exist), after checking
/// the kill loop's rules: keys are distinct (nothing redone) and include every key of
/// `finished` (nothing lost). Updates `finished` to the log's keys.
pub fn checked_resume_records(
    path: &Path,
    width: usize,
    finished: &mut std::collections::BTreeSet<String>,
    kill: usize,
) -> Vec<(String, Vec<f32>)> {
    let records = match std::fs::read(path) {
        Ok(bytes) => resume_records(&bytes, width),
        Err(_) => Vec::new(),
    };
    let keys: std::collections::BTreeSet<String> = records.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(keys.len(), records.len(), "kill {kill}: an item was logged twice (redone)");
    assert!(keys.is_superset(finished), "kill {kill}: a finished item was lost");
    *finished = keys;
    records
}

/// prompts export → generate → embed → sos through one pipeline, checked in value: the SoS
/// prompts of the first two cultures in English and German (template `a`, person `person`, by
/// `prompts export`'s own filters: 4 prompts), generated by `generate --pipeline PIPELINE` with
/// `generate_args` (its size and steps), embedded with the tiny CLIP and scored. Every cell
/// is held to an f64 recomputation from the chain's own embeddings and the *exported* table's
/// language and culture of each image's prompt, so a metadata mix-up anywhere fails:
/// SoS(o) = cos(sem_c, e_o) − cos(sur_l, e_o) over unit embeddings, sem_c and sur_l the means over
/// all images of culture c and language l (SoS §4.1, Eq. 1), a cell's score the mean over its
/// images. Returns the largest difference (f32 on the device against f64).
pub fn sos_chain(tmp: &Path, pipeline: &Path, generate_args: &[&str]) -> f64 {
    let exported = tmp.join("sos.csv");
    Cli::new("prompts")
        .arg("export")
        .arg("sos")
        .opt("--out", &exported)
        .opt("--languages", "en,de")
        .opt("--templates", "a")
        .opt("--persons", "person")
        .opt("--limit", "2")
        .opt("--mirror", culturelens_testkit::upstream_mirror())
        .env("CULTURELENS_CACHE", tmp.join("cache"))
        .run_ok();
    let (header, rows) = read_csv(&exported);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(rows.len(), 4, "2 cultures × 2 languages");
    let images = tmp.join("imgs");
    let mut generate =
        Cli::new("generate").opt("--pipeline", pipeline).opt("--out", &images).opt("--prompts", &exported);
    for a in generate_args {
        generate = generate.arg(a);
    }
    generate.run_ok();
    let embeddings = tmp.join("emb.npy");
    Cli::new("embed")
        .opt("--images", images.join("manifest.csv"))
        .opt("--weights", culturelens_testkit::fixture("encoders/clip"))
        .opt("--out", &embeddings)
        .run_ok();
    let scores = tmp.join("scores.csv");
    Cli::new("sos")
        .opt("--embeddings", &embeddings)
        .opt("--meta", tmp.join("emb.csv"))
        .opt("--out", &scores)
        .run_ok();

    let (shape, values) = culturelens_table::read_npy_nd(&embeddings).unwrap();
    let d = shape[1];
    let (manifest_header, manifest) = read_csv(&images.join("manifest.csv"));
    let (meta_header, meta) = read_csv(&tmp.join("emb.csv"));
    assert_eq!(meta.len(), shape[0]);
    let at = |h: &[String], name: &str| h.iter().position(|x| x == name).unwrap();
    let prompt_of = |image: &str| {
        let row = manifest.iter().find(|r| {
            // emb.csv carries the manifest's own (relative) image column, or an absolute path.
            let name = &r[at(&manifest_header, "image")];
            name == image || images.join(name) == Path::new(image)
        });
        row.map(|r| r[at(&manifest_header, "prompt")].clone()).unwrap_or_else(|| panic!("{image}"))
    };
    let cells: Vec<(String, String)> = meta
        .iter()
        .map(|r| {
            let prompt = prompt_of(&r[at(&meta_header, "image")]);
            let row = rows.iter().find(|p| p[col("prompt")] == prompt).expect("an exported prompt");
            (row[col("language")].clone(), row[col("culture")].clone())
        })
        .collect();
    let unit: Vec<Vec<f64>> = values
        .chunks_exact(d)
        .map(|e| {
            let norm = e.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt();
            e.iter().map(|v| f64::from(*v) / norm).collect()
        })
        .collect();
    let mean_of = |keep: &dyn Fn(usize) -> bool| {
        let members: Vec<usize> = (0..unit.len()).filter(|&i| keep(i)).collect();
        (0..d)
            .map(|k| members.iter().map(|&i| unit[i][k]).sum::<f64>() / members.len() as f64)
            .collect::<Vec<_>>()
    };
    let cos = |a: &[f64], b: &[f64]| {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        dot / a.iter().map(|x| x * x).sum::<f64>().sqrt() / b.iter().map(|x| x * x).sum::<f64>().sqrt()
    };
    let per_image: Vec<f64> = (0..unit.len())
        .map(|i| {
            let sem = mean_of(&|j| cells[j].1 == cells[i].1);
            let sur = mean_of(&|j| cells[j].0 == cells[i].0);
            cos(&sem, &unit[i]) - cos(&sur, &unit[i])
        })
        .collect();
    let (sos_header, sos_rows) = read_csv(&scores);
    // generate writes the text-encoder layer, and sos keeps it: one layer here.
    assert_eq!(sos_header, ["model", "layer", "language", "culture", "n", "sos"]);
    assert_eq!(sos_rows.len(), 4, "2 languages × 2 cultures");
    assert!(sos_rows.iter().all(|r| r[1] == sos_rows[0][1]), "one layer");
    let mut worst = 0f64;
    for row in &sos_rows {
        let cell = (row[2].clone(), row[3].clone());
        let members: Vec<usize> = (0..cells.len()).filter(|&i| cells[i] == cell).collect();
        assert_eq!(row[4], members.len().to_string(), "{row:?}");
        let want = members.iter().map(|&i| per_image[i]).sum::<f64>() / members.len() as f64;
        let got: f64 = row[5].parse().unwrap();
        worst = worst.max((got - want).abs());
    }
    println!("chain: max |sos − f64 recomputation| {worst:.2e}");
    // f32 on the device against f64: 1.4e-8 to 8.3e-8 measured over the seven pipelines; 2.4×
    // the largest.
    assert!(worst <= 2e-7, "the chain's SoS differs from its f64 recomputation by {worst:.2e}");
    worst
}
