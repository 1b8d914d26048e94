//! `device=` and `precision=` of `Encoder.from_pretrained` and `Pipeline.from_pretrained`: the
//! CLI's `--device` and `--precision` through the selection both share
//! (`culturelens_models_io::device`). `"wgpu"` needs a wheel built with this crate's `gpu`
//! feature ([`GPU_WHEEL`]); the default wheel (CI's) has the CPU backend only.

use anyhow::{Result, bail};
use burn::tensor::Device;
use culturelens_models_io::device::{Precision, with_precision};

/// The command that builds a wheel with the wgpu backend.
pub const GPU_WHEEL: &str = "maturin build --release -m crates/culturelens-py/Cargo.toml --features gpu";

/// The Burn device for `device` (`"cpu"`, or `"wgpu"` in a `gpu` wheel) in `precision`
/// (`"f32"`, `"f16"`, `"bf16"`; the last two on a GPU), as the CLI's `--device` and
/// `--precision` make it; `command` is the CLI command an error points to.
pub fn select(device: &str, precision: &str, command: &str) -> Result<Device> {
    let precision = match precision {
        "f32" => Precision::F32,
        "f16" => Precision::F16,
        "bf16" => Precision::Bf16,
        _ => bail!("precision='{precision}': expected \"f32\", \"f16\" or \"bf16\""),
    };
    match device {
        "cpu" => with_precision(Device::flex(), "Cpu", false, precision),
        "wgpu" => with_precision(wgpu_device(command)?, "Wgpu", true, precision),
        _ => bail!("device='{device}': expected \"cpu\" or \"wgpu\" (culturelens {command} --device)"),
    }
}

#[cfg(feature = "gpu")]
fn wgpu_device(_command: &str) -> Result<Device> {
    culturelens_models_io::device::wgpu_device()
}

#[cfg(not(feature = "gpu"))]
fn wgpu_device(command: &str) -> Result<Device> {
    bail!(
        "device='wgpu': this wheel was built without the GPU backend (the CPU backend only); build a GPU \
         wheel with `{GPU_WHEEL}` (docs/python.md), or use the CLI (culturelens {command} --device wgpu)"
    )
}
