//! The compute edge of the app: picks the Burn device (WebGPU through Burn's wgpu backend, or the
//! CPU `flex` backend when WebGPU is missing or fails) and runs the core's SoS and Vendi code on
//! it with asynchronous read-backs only (synchronous reads are not possible on WebGPU). The
//! device rules (SoS row blocking, Vendi product precision) are the core's, as in the CLI; the
//! table lives on the device in parts within the adapter's buffer limits (`table.rs`).

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_compute::device::Processor;
use culturelens_compute::sos::{Blocking, SosLayout, SosReport, sos_host, sos_packed, sos_report, unpack};
use culturelens_compute::vendi::{
    Features, Order, ProductPrecision, Route, VendiScore, categorical_features, cosine_features,
    product_tensor, spectrum_from_product,
};

use crate::dom;
use crate::table::DeviceTable;

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

    /// The kind of processor, for the core's device rules.
    pub fn processor(self) -> Processor {
        match self {
            Backend::WebGpu => Processor::Gpu,
            Backend::Cpu => Processor::Cpu,
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
    /// Largest buffer the device takes: the smaller of the WebGPU device's
    /// `maxStorageBufferBindingSize` and `maxBufferSize`; unbounded on the CPU.
    pub max_buffer_bytes: u64,
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
                let limits = gpu.device.limits();
                return Compute {
                    device,
                    backend: Backend::WebGpu,
                    adapter,
                    gpu: Some(gpu),
                    fallback_reason: None,
                    max_buffer_bytes: limits.max_buffer_size.min(limits.max_storage_buffer_binding_size),
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
        max_buffer_bytes: u64::MAX,
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

/// Reads a tensor back asynchronously (the only read the browser can do on WebGPU).
pub async fn read_back<const D: usize>(tensor: Tensor<D>) -> Result<TensorData, String> {
    tensor.into_data_async().await.map_err(|e| format!("read-back failed: {e:?}"))
}

/// Reads an f32 tensor back asynchronously as a flat vector (row-major).
pub async fn read_f32<const D: usize>(tensor: Tensor<D>) -> Result<Vec<f32>, String> {
    read_back(tensor).await?.try_to_vec::<f32>().map_err(|e| format!("read-back failed: {e:?}"))
}

/// Per-output SoS of the rows `rows` of `table` (all rows for `None`) with references from
/// `layout` (built from the same rows), then the report — SoS paper Eq. (1) as the CLI computes
/// it: on the CPU the core's fused passes over the table's host rows (`sos_host`, what `culturelens
/// sos` runs on a CPU), elsewhere the core's device entry point, `sos_packed`, on the table's
/// parts, with the core's row blocking for this backend.
pub async fn sos(
    table: &DeviceTable,
    rows: Option<&[u32]>,
    layout: &SosLayout,
    backend: Backend,
) -> Result<(Vec<f32>, SosReport), String> {
    let data = match (backend, table.host_rows()) {
        (Backend::Cpu, Some(host)) => {
            let packed = sos_host(host, table.dim(), rows, layout);
            let len = packed.len();
            TensorData::new(packed, [len])
        }
        _ => {
            let chunk_rows = Blocking::Default(backend.processor()).chunk_rows(table.dim());
            read_back(sos_packed(table.parts(), rows, layout, chunk_rows)).await?
        }
    };
    let values = unpack(data, layout).map_err(|e| e.to_string())?;
    let report = sos_report(layout, &values.per_image);
    Ok((values.per_image, report))
}

/// Largest subset scored with the cosine kernel (its features are copied to the host in f64).
pub const MAX_COSINE_ROWS: usize = 5000;
/// Largest subset scored with a categorical kernel.
pub const MAX_CATEGORICAL_ROWS: usize = 20000;

/// The similarity of a Vendi computation (CUBE Eq. 4 or the cosine kernel).
pub enum VendiKernel {
    /// Cosine on the embeddings of the rows.
    Cosine,
    /// Categorical: each metadata column's values of the rows, with its weight.
    Categorical(Vec<(String, Vec<String>, f64)>),
}

/// A subset's Vendi scores with what its bootstrap intervals resample: the feature map of its
/// rows (f64, on the host) and the precision its spectrum was clipped with.
pub struct VendiResult {
    pub score: VendiScore,
    pub features: Features,
    pub precision: ProductPrecision,
}

/// `VS_q`, `qVS_q` and `qVS_q / N` (CUBE Eqs. (2)–(3)) of the rows `rows` of `table` through the
/// core's `vendi` code on the table's device, with the core's precision rule for that device
/// (f32 products on WebGPU, which has no f64) — the numbers of `culturelens vendi`.
pub async fn vendi(
    table: &DeviceTable,
    rows: &[u32],
    kernel: &VendiKernel,
    q: Order,
    quality: Option<&[f64]>,
) -> Result<VendiResult, String> {
    let n = rows.len();
    if n == 0 {
        return Err("the subset is empty".into());
    }
    let device = table.device().clone();
    let features = match kernel {
        VendiKernel::Categorical(columns) => {
            if n > MAX_CATEGORICAL_ROWS {
                return Err(format!(
                    "{n} rows; the categorical kernel is limited to {MAX_CATEGORICAL_ROWS} here"
                ));
            }
            let cols: Vec<(&str, &[String])> =
                columns.iter().map(|(name, v, _)| (name.as_str(), v.as_slice())).collect();
            let weights: Vec<f64> = columns.iter().map(|(_, _, w)| *w).collect();
            categorical_features(&cols, &weights).map_err(|e| e.to_string())?
        }
        VendiKernel::Cosine => {
            if n > MAX_COSINE_ROWS {
                return Err(format!(
                    "{n} rows; the cosine kernel is limited to {MAX_COSINE_ROWS} rows here (narrow the subset)"
                ));
            }
            let x = read_f32(table.gather(rows)).await?;
            cosine_features(&x, n, table.dim()).map_err(|e| e.to_string())?
        }
    };
    let precision = ProductPrecision::for_device(&device);
    let product = read_back(product_tensor(&features, Route::Auto, precision, &device)).await?;
    let spectrum = spectrum_from_product(product, &features, precision);
    Ok(VendiResult { score: VendiScore::from_spectrum(&spectrum, n, q, quality), features, precision })
}
