//! `culturelens vendi` on the CPU (`flex`) and on wgpu (lavapipe without a GPU) must give the same
//! scores. Both accumulate the products in f64 (`ProductPrecision::for_device`: lavapipe has
//! `SHADER_F64`; the f32 path of adapters without it is checked by the browser tests on WebGPU): every kernel and
//! route that runs a product on the device (cosine and categorical features, kernel and dual
//! routes, the CUBE batch protocol), on the synthetic demo table. The test fails, never skips,
//! when no wgpu adapter exists.

use std::path::Path;

use crate::common::Cli;
use serde_json::Value;

/// Largest relative difference wgpu may show against the CPU: about 3× the largest measured on
/// lavapipe (1.0e-15, the dual route of the cosine kernel at q = 1; 1.8e-7 when wgpu still ran
/// the product in f32); printed with `--nocapture`.
const BOUND: f64 = 3e-15;

/// `culturelens vendi ARGS --device DEVICE`, the JSON it writes.
fn vendi(args: &[&str], device: &str, out: &Path) -> Value {
    Cli::from_args(&[&["vendi"], args, &["--device", device, "--out", out.to_str().unwrap()]].concat())
        .run_ok();
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// The score objects of a result: the result itself, or one per group with `--group-by`.
fn scores(v: &Value) -> Vec<(String, &serde_json::Map<String, Value>)> {
    let object = v.as_object().unwrap();
    if object.contains_key("vs") {
        vec![(String::new(), object)]
    } else {
        object.iter().map(|(group, s)| (group.clone(), s.as_object().unwrap())).collect()
    }
}

/// The largest relative difference between two results over every score (`vs`, `qvs`,
/// `qvs_norm`, `intdiv` and, for the protocol, their standard deviations, taken relative to
/// their means), after checking that both hold the same groups and keys.
fn max_relative_difference(cpu: &Value, gpu: &Value) -> f64 {
    let (cpu, gpu) = (scores(cpu), scores(gpu));
    assert_eq!(cpu.len(), gpu.len(), "same groups");
    let mut worst = 0.0f64;
    for ((group, a), (group_b, b)) in cpu.iter().zip(&gpu) {
        assert_eq!(group, group_b);
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{group}: same keys");
        for (key, x) in a.iter() {
            let (Some(x), Some(y)) = (x.as_f64(), b[key].as_f64()) else {
                assert_eq!(x, &b[key], "{group} {key}");
                continue;
            };
            let scale = match key.strip_suffix("_sd") {
                Some(mean) => a[mean].as_f64().unwrap().abs(),
                None => x.abs(),
            };
            assert!(scale > 0.0, "{group} {key}: a zero score would hide a difference");
            worst = worst.max((x - y).abs() / scale);
        }
    }
    worst
}

#[test]
fn cpu_and_wgpu_agree_on_every_device_route() {
    cpu_and_device_agree("wgpu");
}

/// The same runs on wgpu pinned to Vulkan with SPIR-V kernels (`--features vulkan`).
#[cfg(feature = "vulkan")]
#[test]
fn cpu_and_vulkan_agree_on_every_device_route() {
    cpu_and_device_agree("vulkan");
}

/// Every kernel and route on `--device cpu` and on `device`, within [`BOUND`].
fn cpu_and_device_agree(device: &str) {
    let dir = tempfile::tempdir().unwrap();
    Cli::new("demo").opt("--write", dir.path()).run_ok();
    let (npy, meta) = (dir.path().join("embeddings.npy"), dir.path().join("meta.csv"));
    let (npy, meta) = (npy.to_str().unwrap(), meta.to_str().unwrap());
    let cosine = ["--embeddings", npy, "--meta", meta, "--kernel", "cosine"];
    let categorical = [
        "--meta",
        meta,
        "--kernel",
        "categorical",
        "--columns",
        "culture,person,template",
        "--kernel-weights",
        "0.5,0.3,0.2",
    ];
    // 8 groups of 270 rows: the kernel route multiplies 270 × 270, the dual route 64 × 64
    // (cosine) or 16 × 16 (categorical: 10 cultures + 3 person terms + 3 templates).
    let kernel_route = ["--group-by", "language", "--route", "kernel"];
    let dual_route = ["--group-by", "language", "--route", "dual"];
    let protocol = ["--group-by", "model", "--protocol-batch", "8", "--repeats", "50", "--seed", "5"];
    // The order q only changes the host's formula on the spectrum the device product gives, so
    // each route runs once, at orders that weigh the spectrum differently.
    let runs =
        [(&kernel_route[..], "1"), (&dual_route[..], "1"), (&dual_route[..], "inf"), (&protocol[..], "2")];
    let mut worst = 0.0f64;
    for (name, kernel) in [("cosine", &cosine[..]), ("categorical", &categorical[..])] {
        for (how, q) in runs {
            let args = [kernel, how, &["--q", q, "--intdiv"]].concat();
            let cpu = vendi(&args, "cpu", &dir.path().join("cpu.json"));
            let gpu = vendi(&args, device, &dir.path().join("gpu.json"));
            let diff = max_relative_difference(&cpu, &gpu);
            println!("{name} {} q={q}: max relative |cpu - {device}| = {diff:.3e}", how.join(" "));
            worst = worst.max(diff);
        }
    }
    println!("worst: {worst:.3e} (bound {BOUND:.0e})");
    assert!(worst <= BOUND, "cpu and {device} differ by {worst:.3e} (relative)");
}
