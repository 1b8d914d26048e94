//! Device selection at the edge: the only place that names concrete Burn backends.

use anyhow::{Result, bail};
use burn::tensor::Device;
use culturelens_compute::device::Processor;
use culturelens_compute::vendi::ProductPrecision;
use culturelens_models_io::device::{Precision, with_precision};

/// Which Burn backend runs the tensor work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceChoice {
    /// Burn's `flex` CPU backend (multi-threaded, always available).
    Cpu,
    /// Burn's wgpu backend (Vulkan/Metal/DX12; lavapipe without a GPU; build with
    /// `--features wgpu`, which the release binaries have).
    Wgpu,
    /// Burn's CUDA backend (build with `--features cuda`).
    Cuda,
    /// Burn's wgpu runtime pinned to Vulkan, its kernels compiled to SPIR-V, which lets them
    /// use cooperative matrices (tensor cores) where the driver offers them (build with
    /// `--features vulkan`).
    Vulkan,
}

/// Creates the Burn device for `choice`, failing with a clear message when it is unavailable.
pub fn select_device(choice: DeviceChoice) -> Result<Device> {
    match choice {
        DeviceChoice::Cpu => Ok(Device::flex()),
        DeviceChoice::Wgpu => wgpu_device(),
        DeviceChoice::Cuda => cuda_device(),
        DeviceChoice::Vulkan => vulkan_device(),
    }
}

/// The float type a model computes in (`--precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelPrecision {
    /// 32-bit floats everywhere (the parity-tested default).
    F32,
    /// Half precision on a GPU: weights and activations in f16, as PyTorch's `model.half()`;
    /// the embeddings are read back as f32.
    F16,
    /// bfloat16 on a GPU whose backend has it (CUDA; wgpu where the adapter offers it): weights
    /// and activations in bf16, as PyTorch's `model.to(torch.bfloat16)`.
    Bf16,
}

/// The float type a result was computed in, as its provenance manifest records it: a model's
/// [`ModelPrecision`], Vendi's [`ProductPrecision`], or f32 for the commands that compute in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatType {
    F16,
    Bf16,
    F32,
    F64,
}

impl FloatType {
    /// The manifest's name: `f16`, `bf16`, `f32`, `f64`.
    pub fn name(self) -> &'static str {
        match self {
            FloatType::F16 => "f16",
            FloatType::Bf16 => "bf16",
            FloatType::F32 => "f32",
            FloatType::F64 => "f64",
        }
    }
}

impl From<ModelPrecision> for FloatType {
    fn from(precision: ModelPrecision) -> Self {
        match precision {
            ModelPrecision::F32 => FloatType::F32,
            ModelPrecision::F16 => FloatType::F16,
            ModelPrecision::Bf16 => FloatType::Bf16,
        }
    }
}

impl From<ProductPrecision> for FloatType {
    fn from(precision: ProductPrecision) -> Self {
        match precision {
            ProductPrecision::F64 => FloatType::F64,
            ProductPrecision::F32 => FloatType::F32,
        }
    }
}

/// [`select_device`], then makes `precision` the device's float type
/// ([`culturelens_models_io::device::with_precision`], shared with the Python wheel).
pub fn select_device_with(choice: DeviceChoice, precision: ModelPrecision) -> Result<Device> {
    let device = select_device(choice)?;
    let gpu = choice.processor() == Processor::Gpu;
    with_precision(device, &format!("{choice:?}"), gpu, precision.into())
}

impl From<ModelPrecision> for Precision {
    fn from(precision: ModelPrecision) -> Self {
        match precision {
            ModelPrecision::F32 => Precision::F32,
            ModelPrecision::F16 => Precision::F16,
            ModelPrecision::Bf16 => Precision::Bf16,
        }
    }
}

impl DeviceChoice {
    /// The kind of processor behind the backend, for the core's device rules (SoS row blocking).
    pub fn processor(self) -> Processor {
        match self {
            DeviceChoice::Cpu => Processor::Cpu,
            DeviceChoice::Wgpu | DeviceChoice::Cuda | DeviceChoice::Vulkan => Processor::Gpu,
        }
    }
}

#[cfg(feature = "wgpu")]
use culturelens_models_io::device::wgpu_device;

/// The adapter of the wgpu device, when one was made.
pub use culturelens_models_io::device::adapter;

#[cfg(not(feature = "wgpu"))]
fn wgpu_device() -> Result<Device> {
    bail!(
        "this culturelens binary was built without the `wgpu` feature: rebuild with `--features wgpu` \
         (cargo install --locked --path native --features wgpu), or use a release binary, which has it"
    )
}

#[cfg(feature = "vulkan")]
fn vulkan_device() -> Result<Device> {
    use anyhow::Context;
    let device = Device::wgpu_options().graphics_api(burn::tensor::wgpu::WgpuBackend::Vulkan).init().context(
        "no Vulkan adapter could be initialised (install a Vulkan driver, e.g. Debian mesa-vulkan-drivers)",
    )?;
    culturelens_models_io::device::announce_adapter(true);
    Ok(device)
}

#[cfg(not(feature = "vulkan"))]
fn vulkan_device() -> Result<Device> {
    bail!(
        "this culturelens binary was built without the `vulkan` feature (cargo build --release --features vulkan)"
    )
}

#[cfg(feature = "cuda")]
fn cuda_device() -> Result<Device> {
    cuda_driver_present()?;
    Ok(Device::cuda(0))
}

/// The CUDA backend opens the NVIDIA driver library only at its first kernel, and panics with a
/// backtrace when it is missing; this checks for it first, so `--device cuda` on a machine
/// without the driver is a one-line error instead.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn cuda_driver_present() -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::{CStr, c_char};
        const DRIVER: &CStr = c"libcuda.so.1";
        // SAFETY: dlopen with a NUL-terminated name; the handle is closed at once, and dlerror's
        // string is copied before any other dl* call.
        unsafe {
            let handle = libc::dlopen(DRIVER.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if handle.is_null() {
                let why = libc::dlerror();
                let why = if why.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(why as *const c_char).to_string_lossy().into_owned()
                };
                bail!(
                    "--device cuda: the NVIDIA driver library {} could not be loaded ({why}); install the \
                     NVIDIA driver, or use --device wgpu or --device cpu",
                    DRIVER.to_string_lossy()
                );
            }
            libc::dlclose(handle);
        }
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn cuda_device() -> Result<Device> {
    bail!(
        "this culturelens binary was built without the `cuda` feature (cargo build --release --features cuda)"
    )
}

#[cfg(test)]
mod tests {
    /// Where the driver is missing (every CI machine), the check fails with a message that names
    /// the library and the way out; where it is installed, it passes.
    #[test]
    fn a_missing_cuda_driver_is_a_plain_error() {
        let present = std::path::Path::new("/proc/driver/nvidia/version").exists();
        match super::cuda_driver_present() {
            Ok(()) => {
                assert!(present || !cfg!(target_os = "linux"), "no NVIDIA driver here, yet the check passed")
            }
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("libcuda.so.1") && e.contains("--device wgpu"), "{e}");
            }
        }
    }
}
