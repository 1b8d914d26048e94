//! culturelens core: the metric and model code of culturelens, written once against
//! Burn's runtime [`Device`](burn::tensor::Device) so the same code runs on the CPU (`flex`),
//! wgpu/WebGPU and CUDA backends, natively and in the browser (wasm32).
//!
//! Invariants: no file or network I/O here (callers hand in slices and strings); no concrete
//! backend is named outside tests; every device read-back is explicit, so the browser can do it
//! asynchronously.

pub mod agreement;
pub mod colour;
pub mod cultext2i;
pub mod demo;
pub mod diffusion;
pub mod magbig;
pub mod models;
pub mod rng;
mod simd;
pub mod sos;
pub mod stats;
pub mod tokens;
pub mod validation;
pub mod vendi;
pub mod words;
pub mod zero_shot;
