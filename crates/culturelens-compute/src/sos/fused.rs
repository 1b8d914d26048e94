//! The fused SoS route: when it runs, and the device calls over the host plan of `plan.rs`.
//!
//! The tensor graph of `sos_tensor_blocks` (`compute.rs`) scatters rows into pair sums with
//! `select_assign`, which on a GPU runs one thread per column, each looping over all N rows. The
//! fused route instead sorts the outputs by reference pair on the host, once, and cuts each
//! pair's outputs into *segments* of at most [`super::SEGMENT_ROWS`] rows within one block of the table.
//! A GPU cube (workgroup) then owns one segment: it reads the segment's rows whole, so every pass
//! over the table is one coalesced read with no scatter, no atomics and an order of summation
//! that does not depend on scheduling. The values equal the graph's up to f32 rounding (the parity
//! tests hold them to 1e-5).
//!
//! It runs where Burn's device is a CubeCL device (CUDA, Vulkan, wgpu, WebGPU, Metal, ROCm) and
//! the table is f32, when the crate's `cube` feature is on; [`fused_kernels_on`] says whether it
//! does. Every other device (the CPU's `flex`, with its own blocked path) takes the graph.

use burn::tensor::{Device, Tensor};

use super::layout::SosLayout;
#[cfg(feature = "cube")]
use super::plan::{Plan, RowBlocks};

/// Whether [`super::sos_packed`] runs the fused kernels on `device` (for an f32 table).
pub fn fused_kernels_on(device: &Device) -> bool {
    #[cfg(feature = "cube")]
    {
        matches!(device.as_dispatch(), burn::backend::DispatchDevice::Cube(_))
    }
    #[cfg(not(feature = "cube"))]
    {
        let _ = device;
        false
    }
}

/// The packed result of [`super::sos_packed`] through the fused kernels, or `None` where
/// they do not run (see [`fused_kernels_on`]): the caller then runs the tensor graph.
#[cfg(feature = "cube")]
pub(crate) fn sos_fused(blocks: &[Tensor<2>], rows: Option<&[u32]>, layout: &SosLayout) -> Option<Tensor<1>> {
    use super::kernels::SosKernels;
    use burn::backend::Dispatch;
    use burn::tensor::DType;

    let first = blocks.first()?;
    if !fused_kernels_on(&first.device()) || blocks.iter().any(|b| b.dtype() != DType::F32) {
        return None;
    }
    let plan = Plan::new(&RowBlocks::new(blocks), rows, layout);
    let mut sums: Vec<Tensor<2>> = plan
        .blocks
        .iter()
        .map(|(b, block)| {
            Tensor::from_dispatch(Dispatch::sos_segment_sums(blocks[*b].clone().into_dispatch(), block))
        })
        .collect();
    let sums = if sums.len() == 1 { sums.remove(0) } else { Tensor::cat(sums, 0) };
    let n = layout.len();
    let n_sur = layout.sur_names.len();
    let (references, mut packed) =
        Dispatch::sos_references(sums.into_dispatch(), &plan.groups, n + plan.groups.groups(), n);
    for (b, block) in &plan.blocks {
        packed = Dispatch::sos_scores(
            blocks[*b].clone().into_dispatch(),
            references.clone(),
            packed,
            block,
            n_sur,
        );
    }
    Some(Tensor::from_dispatch(packed))
}

/// Without the `cube` feature no device runs the fused kernels.
#[cfg(not(feature = "cube"))]
pub(crate) fn sos_fused(
    _blocks: &[Tensor<2>],
    _rows: Option<&[u32]>,
    _layout: &SosLayout,
) -> Option<Tensor<1>> {
    None
}
