//! Peak memory of loading weights from disk (issue 36): a checkpoint is read a tensor at a time,
//! so loading one holds its weights once (plus one tensor on its way in), not the whole file and
//! the model side by side.
//!
//! The measurement runs in a child process (this test binary, re-run on one ignored test) so the
//! parent's own allocations do not count: the child reads its peak resident size (`VmHWM` of
//! `/proc/self/status`, Linux) before and after loading. `encoder_load_peak` measures a real
//! encoder folder the same way (BENCHMARKS.md, "Encoders, CPU"):
//! `CULTURELENS_LOAD_MEMORY_DIR=/tmp/clip-b32 cargo test -p culturelens-models-io --test models_io
//! load_memory::encoder_load_peak -- --exact --ignored --nocapture`.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use burn::tensor::{Device, Tensor};
use culturelens_models_io::Encoder;
use culturelens_models_io::folder::{Dir, load_model};

/// Set in the child to the folder holding the generated checkpoint.
const CHILD_DIR: &str = "CULTURELENS_LOAD_MEMORY_CHILD";

/// The generated checkpoint: `(rows, cols)` of each tensor, f32 (160 MiB in all: sixteen
/// Linear-sized weights and one embedding-sized table).
fn shapes() -> Vec<(usize, usize)> {
    let mut shapes = vec![(1024, 2048); 16];
    shapes.push((8192, 1024));
    shapes
}

/// The peak resident size of this process so far, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/self/status");
    let kb: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmHWM in kB");
    kb * 1024
}

/// Writes the checkpoint of [`shapes`] (values `i * 1e-6` of each tensor's index `i`) to
/// `dir/model.safetensors`, streamed; returns its size in bytes.
fn write_checkpoint(dir: &Path) -> u64 {
    let mut header = serde_json::Map::new();
    let mut offset = 0;
    for (i, &(rows, cols)) in shapes().iter().enumerate() {
        let end = offset + rows * cols * 4;
        header.insert(
            format!("t{i}"),
            serde_json::json!({"dtype": "F32", "shape": [rows, cols], "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let header = serde_json::to_vec(&header).unwrap();
    let path = dir.join("model.safetensors");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    out.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    out.write_all(&header).unwrap();
    for &(rows, cols) in &shapes() {
        for i in 0..rows * cols {
            out.write_all(&(i as f32 * 1e-6).to_le_bytes()).unwrap();
        }
    }
    out.into_inner().unwrap().sync_all().unwrap();
    std::fs::metadata(&path).unwrap().len()
}

/// Loading a 160 MiB checkpoint from disk raises the peak resident size by at most 1.3 times its
/// size (reading the whole file before building the tensors made it 2 times).
#[test]
fn loading_holds_the_weights_once() {
    if !Path::new("/proc/self/status").exists() {
        eprintln!("skipped: no /proc/self/status to read the peak resident size from");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size = write_checkpoint(dir.path());
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["load_memory::load_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let growth: u64 = stdout
        .lines()
        .find_map(|l| l.split("peak growth bytes: ").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no measurement in the child's output:\n{stdout}"));
    let ratio = growth as f64 / size as f64;
    println!(
        "checkpoint {:.1} MB, peak resident size grew {:.1} MB while loading it: {ratio:.3}x (bound 1.3x)",
        size as f64 / 1e6,
        growth as f64 / 1e6
    );
    assert!(ratio <= 1.3, "loading held {ratio:.3}x the checkpoint's size");
}

/// The child of [`loading_holds_the_weights_once`]: loads the checkpoint in its folder through
/// the loader the encoders use (half the tensors as Linear weights, transposed) and prints how
/// much its peak resident size grew.
#[test]
#[ignore = "run by loading_holds_the_weights_once in a child process"]
fn load_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else { return };
    let dir = Path::new(&dir);
    let device = Device::flex();
    let before = peak_rss();
    let tensors = load_model(
        &Dir(dir),
        &["model.safetensors".into()],
        &dir.join("config.json"),
        &device,
        device.settings().float_dtype,
        |ck| {
            let vars = ck.vars();
            let mut tensors: Vec<Tensor<2>> = Vec::new();
            for (i, (rows, cols)) in shapes().into_iter().enumerate() {
                let name = format!("t{i}");
                tensors.push(if i % 2 == 0 {
                    vars.tensor(&name, [rows, cols])?
                } else {
                    vars.transposed(&name, [rows, cols], 0..rows)?
                });
            }
            Ok(tensors)
        },
    )
    .unwrap();
    let after = peak_rss();
    // The values arrived (the last element of the last tensor, index rows * cols - 1).
    let (rows, cols) = *shapes().last().unwrap();
    let last: Vec<f32> = tensors
        .last()
        .unwrap()
        .clone()
        .slice([rows - 1..rows, cols - 1..cols])
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    assert_eq!(last, [(rows * cols - 1) as f32 * 1e-6]);
    println!("peak growth bytes: {}", after - before);
}

/// The peak resident size of loading the encoder folder `CULTURELENS_LOAD_MEMORY_DIR` (unset:
/// nothing to measure), printed with the size of its weights.
#[test]
#[ignore = "a measurement of a given folder (CULTURELENS_LOAD_MEMORY_DIR)"]
fn encoder_load_peak() {
    let Some(dir) = std::env::var_os("CULTURELENS_LOAD_MEMORY_DIR") else { return };
    let dir = Path::new(&dir);
    let weights: u64 = culturelens_models_io::safetensors_files(dir)
        .unwrap()
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let device = Device::flex();
    let before = peak_rss();
    let encoder = Encoder::from_dir(dir, &device).unwrap();
    let after = peak_rss();
    println!(
        "{}: weights {:.0} MB; peak resident size {:.0} MB before loading, {:.0} MB after (grew {:.0} MB, {:.2}x the weights)",
        dir.display(),
        weights as f64 / 1e6,
        before as f64 / 1e6,
        after as f64 / 1e6,
        (after - before) as f64 / 1e6,
        (after - before) as f64 / weights as f64
    );
    drop(encoder);
}
