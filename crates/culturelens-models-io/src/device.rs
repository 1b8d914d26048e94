//! Device selection shared by the native edges (the CLI's `--device`/`--precision`, the Python
//! wheel's `device=`/`precision=`): Burn's wgpu device with its adapter named, and a model's
//! float type made the device's. The edges map their own choices onto these and word what a
//! build leaves out.

use anyhow::{Result, bail};
use burn::tensor::{Device, FloatDType};

/// The float type a model is stored and computed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    F32,
    F16,
    Bf16,
}

/// Makes `precision` the float type of `device` (of the backend `backend`, as errors name it;
/// `gpu`: whether it is a GPU backend): every tensor created on it afterwards (weights, inputs)
/// is stored and computed in that type. f16 and bf16 need a GPU backend whose device supports
/// them (wgpu with the adapter's `SHADER_F16` for f16, or CUDA).
pub fn with_precision(mut device: Device, backend: &str, gpu: bool, precision: Precision) -> Result<Device> {
    let (dtype, name) = match precision {
        Precision::F32 => return Ok(device),
        Precision::F16 => (FloatDType::F16, "f16"),
        Precision::Bf16 => (FloatDType::BF16, "bf16"),
    };
    if !gpu {
        bail!("--precision {name} runs on a GPU (--device wgpu or cuda); the CPU backend computes in f32");
    }
    if !device.supports_dtype(dtype) {
        bail!(
            "--precision {name}: this {backend} device does not support {name} arithmetic \
             (for wgpu the adapter lacks it, e.g. SHADER_F16 for f16); use --precision f32"
        );
    }
    device.configure(dtype).map_err(|e| {
        anyhow::anyhow!("--precision {name}: could not make {name} the device's float type: {e:?}")
    })?;
    Ok(device)
}

/// Burn's default wgpu device (its rule: the high-performance adapter of the platform's primary
/// API), its adapter named on stderr ([`announce_adapter`]). Made once per process (Burn refuses
/// a second initialisation, "Service already initialized"); later calls get the same device, whose
/// float type the first model's precision fixed.
#[cfg(feature = "wgpu")]
pub fn wgpu_device() -> Result<Device> {
    use anyhow::Context;
    static WGPU: std::sync::Mutex<Option<Device>> = std::sync::Mutex::new(None);
    let mut made = WGPU.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(device) = made.as_ref() {
        return Ok(device.clone());
    }
    let device = Device::wgpu_options().init().context(
        "no wgpu adapter could be initialised (install a Vulkan driver, e.g. Debian mesa-vulkan-drivers)",
    )?;
    announce_adapter(false);
    *made = Some(device.clone());
    Ok(device)
}

/// The adapter a wgpu device of this process runs on, once known (`name (backend, type)`): the
/// provenance records it.
static ADAPTER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The adapter of the wgpu device, when one was made.
pub fn adapter() -> Option<&'static str> {
    ADAPTER.get().map(String::as_str)
}

/// Names on stderr the adapter Burn's wgpu device takes (of the primary API, or Vulkan's where
/// `vulkan`) and warns when it is a software one (lavapipe, SwiftShader, WARP), which runs far
/// slower than the CPU backend.
#[cfg(feature = "wgpu")]
pub fn announce_adapter(vulkan: bool) {
    let backends = if vulkan { wgpu::Backends::VULKAN } else { wgpu::Backends::PRIMARY };
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let options = wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..wgpu::RequestAdapterOptions::default()
    };
    let Ok(adapter) = futures_lite::future::block_on(instance.request_adapter(&options)) else { return };
    let info = adapter.get_info();
    let text = format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type);
    eprintln!("wgpu adapter: {text}");
    if info.device_type == wgpu::DeviceType::Cpu {
        eprintln!(
            "warning: {} is a software adapter (the GPU API emulated on the CPU): expect it to be far \
             slower than --device cpu; install the GPU's Vulkan driver, or use --device cpu",
            info.name
        );
    }
    let _ = ADAPTER.set(text);
}
