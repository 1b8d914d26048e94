//! The compute edge of the app: picks the Burn device (WebGPU through Burn's wgpu backend, or the
//! CPU `flex` backend when WebGPU is missing or fails) and runs the core's SoS code on it with
//! asynchronous read-backs only (synchronous reads are not possible on WebGPU).

use burn::tensor::{Device, Int, Tensor, TensorData};
use culturelens_core::sos::{SosLayout, SosReport, rows_for_bytes, sos_tensor, unpack};

use crate::dom;

/// The backend that runs the tensor work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    WebGpu,
    Cpu,
}

impl Backend {
    /// Value of `<body data-backend>`.
    pub fn attr(self) -> &'static str {
        match self {
            Backend::WebGpu => "webgpu",
            Backend::Cpu => "cpu",
        }
    }
}

/// Which backend the page asked for (`?backend=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preference {
    Auto,
    WebGpu,
    Cpu,
}

impl Preference {
    pub fn parse(text: Option<&str>) -> Preference {
        match text {
            Some("cpu") => Preference::Cpu,
            Some("webgpu") => Preference::WebGpu,
            _ => Preference::Auto,
        }
    }
}

/// The wgpu handles behind Burn's WebGPU device, shared with the scatter's point renderer so the
/// page holds a single GPU device.
#[derive(Clone)]
pub struct GpuHandles {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
}

/// The initialised device and what it is.
#[derive(Clone)]
pub struct Compute {
    pub device: Device,
    pub backend: Backend,
    /// Burn's wgpu handles (WebGPU only).
    pub gpu: Option<GpuHandles>,
    /// Adapter description (WebGPU) or "flex" (CPU).
    pub adapter: String,
    /// Why WebGPU is not used, when it is not.
    pub fallback_reason: Option<String>,
}

/// WebGPU first (unless `?backend=cpu`); any failure — no `navigator.gpu`, no adapter, a failing
/// smoke test — falls back to the CPU backend and records why.
pub async fn init(preference: Preference) -> Compute {
    let reason = if preference == Preference::Cpu {
        "CPU backend requested (?backend=cpu)".to_string()
    } else if !has_webgpu() {
        "this browser has no WebGPU (navigator.gpu is missing)".to_string()
    } else {
        match init_webgpu().await {
            Ok((device, adapter, gpu)) => {
                return Compute {
                    device,
                    backend: Backend::WebGpu,
                    adapter,
                    gpu: Some(gpu),
                    fallback_reason: None,
                };
            }
            Err(e) => e,
        }
    };
    Compute {
        device: Device::flex(),
        backend: Backend::Cpu,
        adapter: "flex (wasm32, single thread)".into(),
        gpu: None,
        fallback_reason: Some(reason),
    }
}

fn has_webgpu() -> bool {
    let navigator = dom::window().navigator();
    js_sys::Reflect::get(&navigator, &"gpu".into())
        .map(|g| !g.is_undefined() && !g.is_null())
        .unwrap_or(false)
}

async fn init_webgpu() -> Result<(Device, String, GpuHandles), String> {
    let (device, setup) = Device::wgpu_options()
        .init_with_setup_async()
        .await
        .map_err(|e| format!("WebGPU initialisation failed: {e}"))?;
    let info = setup.adapter.get_info();
    let adapter = [info.name.as_str(), info.driver.as_str(), info.driver_info.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" / ");
    let adapter = if adapter.is_empty() { format!("{:?} adapter", info.backend) } else { adapter };
    // Smoke test: a reduction and an asynchronous read-back must give the right number.
    let probe = Tensor::<1>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [4]), &device);
    let data = probe.sum().into_data_async().await.map_err(|e| format!("WebGPU read-back failed: {e:?}"))?;
    let sum: Vec<f32> = data.try_to_vec::<f32>().map_err(|e| format!("WebGPU read-back failed: {e:?}"))?;
    if sum != [10.0] {
        return Err(format!("WebGPU smoke test returned {sum:?} instead of [10.0]"));
    }
    let gpu = GpuHandles { device: setup.device, queue: setup.queue };
    Ok((device, adapter, gpu))
}

/// Uploads the table once; filters later select rows on the device.
pub fn upload(embeddings: Vec<f32>, rows: usize, dim: usize, device: &Device) -> Tensor<2> {
    Tensor::<2>::from_data(TensorData::new(embeddings, [rows, dim]), device)
}

fn ids(values: impl Iterator<Item = u32>, device: &Device) -> Tensor<1, Int> {
    let v: Vec<i32> = values.map(|x| x as i32).collect();
    let len = v.len();
    Tensor::<1, Int>::from_data(TensorData::new(v, [len]), device)
}

/// Per-output SoS of the rows `rows` of `table` (all rows for `None`) with references from
/// `layout` (built from the same rows), then the report — SoS paper Eq. (1) through the core.
pub async fn sos(
    table: &Tensor<2>,
    rows: Option<&[u32]>,
    layout: &SosLayout,
    backend: Backend,
) -> Result<(Vec<f32>, SosReport), String> {
    let device = table.device();
    let [_, dim] = table.dims();
    let x = match rows {
        Some(r) => table.clone().select(0, ids(r.iter().copied(), &device)),
        None => table.clone(),
    };
    // Same blocking as the CLI's CPU path (culturelens sos --device cpu): 1 MiB row blocks.
    let chunk_rows = match backend {
        Backend::Cpu => Some(rows_for_bytes(dim, 1 << 20)),
        Backend::WebGpu => None,
    };
    let packed = sos_tensor(
        x,
        ids(layout.pair.iter().copied(), &device),
        ids(layout.pair_sur.iter().copied(), &device),
        layout.sur_names.len(),
        ids(layout.pair_sem.iter().copied(), &device),
        layout.sem_names.len(),
        chunk_rows,
    );
    let data = packed.into_data_async().await.map_err(|e| format!("read-back failed: {e:?}"))?;
    let values = unpack(data, layout).map_err(|e| e.to_string())?;
    let report = SosReport::new(layout, &values.per_image);
    Ok((values.per_image, report))
}
