//! Device selection at the edge: the only place that names concrete Burn backends.

use anyhow::{Context, Result, bail};
use burn::tensor::Device;

/// Which Burn backend runs the tensor work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceChoice {
    /// Burn's `flex` CPU backend (multi-threaded, always available).
    Cpu,
    /// Burn's wgpu backend (Vulkan/Metal/DX12; lavapipe without a GPU).
    Wgpu,
    /// Burn's CUDA backend (build with `--features cuda`).
    Cuda,
}

/// Creates the Burn device for `choice`, failing with a clear message when it is unavailable.
pub fn select_device(choice: DeviceChoice) -> Result<Device> {
    match choice {
        DeviceChoice::Cpu => Ok(Device::flex()),
        DeviceChoice::Wgpu => wgpu_device(),
        DeviceChoice::Cuda => cuda_device(),
    }
}

/// Rows per block for row-blocked metrics (`culturelens_core::sos::sos_tensor`): CPU blocks of
/// about 1 MiB stay in cache and reuse their temporaries; GPUs take the whole table at once.
pub fn block_rows(choice: DeviceChoice, dim: usize) -> Option<usize> {
    match choice {
        DeviceChoice::Cpu => Some(culturelens_core::sos::rows_for_bytes(dim, 1 << 20)),
        DeviceChoice::Wgpu | DeviceChoice::Cuda => None,
    }
}

#[cfg(feature = "wgpu")]
fn wgpu_device() -> Result<Device> {
    Device::wgpu_options().init().context(
        "no wgpu adapter could be initialised (install a Vulkan driver, e.g. Debian mesa-vulkan-drivers)",
    )
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_device() -> Result<Device> {
    bail!("this culturelens binary was built without the `wgpu` feature")
}

#[cfg(feature = "cuda")]
fn cuda_device() -> Result<Device> {
    Ok(Device::cuda(0))
}

#[cfg(not(feature = "cuda"))]
fn cuda_device() -> Result<Device> {
    bail!(
        "this culturelens binary was built without the `cuda` feature (cargo build --release --features cuda)"
    )
}
