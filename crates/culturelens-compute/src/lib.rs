//! The metrics that run on a Burn device, written once against Burn's runtime
//! [`Device`](burn::tensor::Device) so the same code runs on the CPU (`flex`), wgpu/WebGPU and
//! CUDA, natively and in the browser (wasm32):
//!
//! - [`sos`]: the SoS score (SoS paper §4.1, Eq. 1) and its report;
//! - [`cultext2i`] (feature `table`): the CulText2I metrics of an image and a text table
//!   (CulText2I §6.1, Table 2), as the CLI command and the Python package compute them;
//! - [`vendi`]: the Vendi family of the CUBE paper (Def. 5.1, Eq. 2–4);
//! - [`zero_shot`]: zero-shot attribute classification (MAGBIG §4, step 2);
//! - [`tensor`]: cosines, unit rows and id tensors every device computation shares;
//! - [`device`]: the processor kind, its upload rule and the GPU buffer size both front ends use.
//!
//! Invariants: no file or network I/O here (callers hand in slices and strings); no concrete
//! backend is named outside tests (the fused SoS kernels name the CubeCL family, behind the
//! `cube` feature); every device read-back is explicit, so the browser can do it asynchronously.
//! Host-only metric math lives in `culturelens-metrics`; this crate never depends on a model.

#[cfg(feature = "table")]
pub mod cultext2i;
pub mod device;
pub mod sos;
pub mod tensor;
pub mod vendi;
pub mod zero_shot;
