//! The fused SoS kernels, written once in CubeCL for every CubeCL runtime (CUDA, ROCm, Vulkan
//! and wgpu natively, WebGPU in the browser, Metal, CubeCL's CPU runtime).
//!
//! They plug into Burn's runtime dispatch through `#[backend_extension(Cube)]`: [`SosKernels`] is
//! implemented for Burn's CubeCL backend, and the macro routes a dispatch tensor that lives on a
//! CubeCL device to it (`fused.rs` calls them only for such tensors). This module is the one
//! place in the core that names a backend, and it names the CubeCL family, never a runtime.
//!
//! Three kernels, each cube (workgroup) owning one segment or group and its full rows, so every
//! row is read in one coalesced sweep and no atomics or scatters are involved (the result does
//! not depend on scheduling):
//! 1. [`segment_sums`]: for each segment (≤ [`super::plan::SEGMENT_ROWS`] outputs of one
//!    reference pair, within one block), the sum of its rows' unit vectors `Σ x_o/‖x_o‖`;
//! 2. [`references`]: for each surface and semantic group, the sum of its segments' sums (in
//!    levels of partial sums past [`super::plan::GROUP_MEMBERS`] segments), its norm (written
//!    into the packed result) and its unit vector;
//! 3. [`scores`]: for each segment, the pair's direction `sem/‖sem‖ − sur/‖sur‖` held in
//!    registers, and for each of its outputs `x_o · direction / ‖x_o‖`, written at its position.
//!
//! Passes 1 and 3 each read the table once; pass 2 reads only the segment sums.

use burn::backend::{Backend, backend_extension, tensor::FloatTensor};
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeBackend, ops::numeric::empty_device_contiguous_dtype};

use super::plan::{BlockPlan, GroupPlan};

/// Rows one cube loads and reduces per step: their loads are in flight together and they share
/// one tree reduction (one barrier sequence per [`ROWS_PER_STEP`] rows).
const ROWS_PER_STEP: usize = 4;

/// Most units per cube (WebGPU's default `maxComputeInvocationsPerWorkgroup`).
const MAX_UNITS: usize = 256;

/// Most cubes along one grid axis (WebGPU's `maxComputeWorkgroupsPerDimension`).
const MAX_GRID_X: usize = 65_535;

/// The three fused passes of SoS (module doc). Index arrays are host vectors, uploaded by the
/// implementation next to the tensor they index.
#[backend_extension(Cube)]
pub trait SosKernels: Backend {
    /// Pass 1 over one block `x` (`[rows, d]` f32): `[segments, d]` sums of unit rows.
    fn sos_segment_sums(x: FloatTensor<Self>, plan: &BlockPlan) -> FloatTensor<Self>;

    /// Pass 2: unit references `[n_sur + n_sem, d]` from the segment sums (in the levels of
    /// `groups`), and the packed result
    /// `[len]` with every group's norm written at `norm_base + group` (the scores follow).
    fn sos_references(
        sums: FloatTensor<Self>,
        groups: &GroupPlan,
        len: usize,
        norm_base: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// Pass 3 over one block: writes its outputs' scores into `packed` and returns it.
    fn sos_scores(
        x: FloatTensor<Self>,
        references: FloatTensor<Self>,
        packed: FloatTensor<Self>,
        plan: &BlockPlan,
        n_sur: usize,
    ) -> FloatTensor<Self>;
}

impl SosKernels for CubeBackend {
    fn sos_segment_sums(x: FloatTensor<Self>, plan: &BlockPlan) -> FloatTensor<Self> {
        let d = x.meta.shape()[1];
        let segments = plan.segments();
        let out =
            empty_device_contiguous_dtype(x.client.clone(), x.device.clone(), [segments, d].into(), x.dtype);
        let shape = Shape::new(&x, segments);
        segment_sums::launch(
            &x.client,
            shape.cube_count(),
            shape.cube_dim(),
            x.clone().into_tensor_arg(),
            upload(&x, &plan.seg_start),
            upload(&x, &plan.src),
            out.clone().into_tensor_arg(),
            segments,
            shape.units,
            shape.per_unit,
            ROWS_PER_STEP,
        );
        out
    }

    fn sos_references(
        sums: FloatTensor<Self>,
        groups: &GroupPlan,
        len: usize,
        norm_base: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (client, device, dtype) = (sums.client.clone(), sums.device.clone(), sums.dtype);
        let d = sums.meta.shape()[1];
        let packed = empty_device_contiguous_dtype(client.clone(), device.clone(), [len].into(), dtype);
        let mut rows = sums;
        for (level, sums_of) in groups.levels.iter().enumerate() {
            let last = level + 1 == groups.levels.len();
            let count = sums_of.rows();
            let out = empty_device_contiguous_dtype(client.clone(), device.clone(), [count, d].into(), dtype);
            let shape = Shape::new(&rows, count);
            references::launch(
                &client,
                shape.cube_count(),
                shape.cube_dim(),
                rows.into_tensor_arg(),
                upload(&out, &sums_of.start),
                upload(&out, &sums_of.members),
                out.clone().into_tensor_arg(),
                packed.clone().into_buffer_arg(),
                count,
                norm_base,
                shape.units,
                shape.per_unit,
                ROWS_PER_STEP,
                last,
            );
            rows = out;
        }
        (rows, packed)
    }

    fn sos_scores(
        x: FloatTensor<Self>,
        references: FloatTensor<Self>,
        packed: FloatTensor<Self>,
        plan: &BlockPlan,
        n_sur: usize,
    ) -> FloatTensor<Self> {
        let packed = if packed.can_mut() && packed.is_contiguous() { packed } else { packed.copy() };
        let segments = plan.segments();
        let shape = Shape::new(&x, segments);
        scores::launch(
            &x.client,
            shape.cube_count(),
            shape.cube_dim(),
            x.clone().into_tensor_arg(),
            references.into_tensor_arg(),
            upload(&x, &plan.seg_start),
            upload(&x, &plan.seg_sur),
            upload(&x, &plan.seg_sem),
            upload(&x, &plan.src),
            upload(&x, &plan.dst),
            packed.clone().into_buffer_arg(),
            segments,
            n_sur,
            shape.units,
            shape.per_unit,
            ROWS_PER_STEP,
        );
        packed
    }
}

/// A `u32` host vector as a kernel argument on `like`'s device.
fn upload(like: &CubeTensor, values: &[u32]) -> BufferArg {
    let handle = like.client.create_from_slice(u32::as_bytes(values));
    // SAFETY: the handle holds exactly `values.len()` u32 values.
    unsafe { BufferArg::from_raw_parts(handle, values.len()) }
}

/// The launch shape of a kernel whose cubes each own one row-length vector: `units` threads per
/// cube (a power of two, at most [`MAX_UNITS`] and the device's limit), each holding `per_unit`
/// columns of the row (`unit + k · units`), and `cubes` cubes laid out within the grid limits.
struct Shape {
    units: usize,
    per_unit: usize,
    cubes: usize,
}

impl Shape {
    fn new(x: &CubeTensor, cubes: usize) -> Shape {
        let d = x.meta.shape()[1].max(1);
        let device_max = x.client.properties().hardware.max_units_per_cube as usize;
        let cap = prev_power_of_two(MAX_UNITS.min(device_max).max(1));
        let units = d.next_power_of_two().min(cap);
        Shape { units, per_unit: d.div_ceil(units), cubes }
    }

    fn cube_dim(&self) -> CubeDim {
        CubeDim::new_1d(self.units as u32)
    }

    fn cube_count(&self) -> CubeCount {
        let x = self.cubes.clamp(1, MAX_GRID_X);
        CubeCount::Static(x as u32, self.cubes.div_ceil(x).max(1) as u32, 1)
    }
}

fn prev_power_of_two(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.leading_zeros())
}

/// Sums `values[0..count]` of every unit over the cube, in place: afterwards every unit holds the
/// cube-wide totals. `shared` holds `count · units` floats; `units` is a power of two.
#[cube]
fn cube_sums(
    shared: &mut Shared<[f32]>,
    values: &mut Array<f32>,
    #[comptime] count: usize,
    #[comptime] units: usize,
) {
    let unit = UNIT_POS as usize;
    #[unroll]
    for k in 0..count {
        shared[k * units + unit] = values[k];
    }
    sync_cube();
    let mut half = comptime!(units / 2).runtime();
    while half > 0 {
        if unit < half {
            #[unroll]
            for k in 0..count {
                let other = shared[k * units + unit + half];
                shared[k * units + unit] += other;
            }
        }
        sync_cube();
        half /= 2;
    }
    #[unroll]
    for k in 0..count {
        values[k] = shared[k * units];
    }
    sync_cube();
}

/// Loads `x[row, unit + k · units]` for `k < per_unit` into `into[base + k]` (0 past the row's
/// end, or when `!valid`), and returns the sum of their squares.
#[cube]
fn load_row(
    x: &Tensor<f32>,
    row: usize,
    valid: bool,
    into: &mut Array<f32>,
    base: usize,
    #[comptime] units: usize,
    #[comptime] per_unit: usize,
) -> f32 {
    let unit = UNIT_POS as usize;
    let d = x.shape(1);
    let mut squares = 0.0f32;
    #[unroll]
    for k in 0..per_unit {
        let column = unit + k * units;
        let mut v = 0.0f32;
        if valid && column < d {
            v = x[row * x.stride(0) + column * x.stride(1)];
        }
        into[base + k] = v;
        squares += v * v;
    }
    squares
}

/// The cube's segment in a grid of `count` cubes, or `count` for a padding cube.
#[cube]
fn cube_index(count: usize) -> usize {
    let index = CUBE_POS;
    if index >= count { count } else { index }
}

/// Pass 1: `out[s] = Σ_{k ∈ segment s} x[src[k]] / ‖x[src[k]]‖`.
#[cube(launch)]
fn segment_sums(
    x: &Tensor<f32>,
    seg_start: &[u32],
    src: &[u32],
    out: &mut Tensor<f32>,
    segments: usize,
    #[comptime] units: usize,
    #[comptime] per_unit: usize,
    #[comptime] rows: usize,
) {
    let segment = cube_index(segments);
    if segment == segments {
        terminate!();
    }
    let mut shared = Shared::<[f32]>::new_slice(comptime!(rows * units));
    let mut sum = Array::<f32>::new(per_unit);
    #[unroll]
    for k in 0..per_unit {
        sum[k] = 0.0f32;
    }
    let mut values = Array::<f32>::new(comptime!(rows * per_unit));
    let mut squares = Array::<f32>::new(rows);
    let end = seg_start[segment + 1] as usize;
    let mut next = seg_start[segment] as usize;
    while next < end {
        #[unroll]
        for r in 0..rows {
            let valid = next + r < end;
            let mut row = 0usize;
            if valid {
                row = src[next + r] as usize;
            }
            squares[r] = load_row(x, row, valid, &mut values, r * per_unit, units, per_unit);
        }
        cube_sums(&mut shared, &mut squares, rows, units);
        #[unroll]
        for r in 0..rows {
            if next + r < end {
                let inv_norm = 1.0f32 / squares[r].sqrt();
                #[unroll]
                for k in 0..per_unit {
                    sum[k] += values[r * per_unit + k] * inv_norm;
                }
            }
        }
        next += rows;
    }
    let unit = UNIT_POS as usize;
    let d = x.shape(1);
    let (row_stride, column_stride) = (out.stride(0), out.stride(1));
    #[unroll]
    for k in 0..per_unit {
        let column = unit + k * units;
        if column < d {
            out[segment * row_stride + column * column_stride] = sum[k];
        }
    }
}

/// Pass 2, one level: for row `g`, `s = Σ_{k ∈ row g} sums[members[k]]`, written as it is; on the
/// `last` level (the groups) `packed[norm_base + g] = ‖s‖` and
/// `references[g] = s / max(‖s‖, f32::MIN_POSITIVE)` instead.
#[cube(launch)]
fn references(
    sums: &Tensor<f32>,
    start: &[u32],
    members: &[u32],
    references: &mut Tensor<f32>,
    packed: &mut [f32],
    groups: usize,
    norm_base: usize,
    #[comptime] units: usize,
    #[comptime] per_unit: usize,
    #[comptime] rows: usize,
    #[comptime] last: bool,
) {
    let group = cube_index(groups);
    if group == groups {
        terminate!();
    }
    let mut shared = Shared::<[f32]>::new_slice(units);
    let mut sum = Array::<f32>::new(per_unit);
    #[unroll]
    for k in 0..per_unit {
        sum[k] = 0.0f32;
    }
    let mut values = Array::<f32>::new(comptime!(rows * per_unit));
    let end = start[group + 1] as usize;
    let mut next = start[group] as usize;
    while next < end {
        #[unroll]
        for r in 0..rows {
            let valid = next + r < end;
            let mut row = 0usize;
            if valid {
                row = members[next + r] as usize;
            }
            load_row(sums, row, valid, &mut values, r * per_unit, units, per_unit);
        }
        #[unroll]
        for r in 0..rows {
            #[unroll]
            for k in 0..per_unit {
                sum[k] += values[r * per_unit + k];
            }
        }
        next += rows;
    }
    let unit = UNIT_POS as usize;
    let d = sums.shape(1);
    let (row_stride, column_stride) = (references.stride(0), references.stride(1));
    let mut scale = 1.0f32;
    if last {
        let mut squares = Array::<f32>::new(1usize);
        squares[0] = 0.0f32;
        #[unroll]
        for k in 0..per_unit {
            squares[0] += sum[k] * sum[k];
        }
        cube_sums(&mut shared, &mut squares, 1usize, units);
        let norm = squares[0].sqrt();
        if unit == 0 {
            packed[norm_base + group] = norm;
        }
        scale = f32::max(norm, f32::MIN_POSITIVE);
    }
    #[unroll]
    for k in 0..per_unit {
        let column = unit + k * units;
        if column < d {
            references[group * row_stride + column * column_stride] = sum[k] / scale;
        }
    }
}

/// Pass 3: for each output `k` of segment `s`, `packed[dst[k]] = x[src[k]] · dir / ‖x[src[k]]‖`
/// with `dir = references[n_sur + seg_sem[s]] − references[seg_sur[s]]`.
#[cube(launch)]
fn scores(
    x: &Tensor<f32>,
    references: &Tensor<f32>,
    seg_start: &[u32],
    seg_sur: &[u32],
    seg_sem: &[u32],
    src: &[u32],
    dst: &[u32],
    packed: &mut [f32],
    segments: usize,
    n_sur: usize,
    #[comptime] units: usize,
    #[comptime] per_unit: usize,
    #[comptime] rows: usize,
) {
    let segment = cube_index(segments);
    if segment == segments {
        terminate!();
    }
    let mut shared = Shared::<[f32]>::new_slice(comptime!(2 * rows * units));
    let mut sur = Array::<f32>::new(per_unit);
    let mut direction = Array::<f32>::new(per_unit);
    load_row(references, seg_sur[segment] as usize, true, &mut sur, 0, units, per_unit);
    load_row(references, n_sur + seg_sem[segment] as usize, true, &mut direction, 0, units, per_unit);
    #[unroll]
    for k in 0..per_unit {
        direction[k] -= sur[k];
    }
    let mut values = Array::<f32>::new(per_unit);
    // Per row of the step: its dot product with the direction, then its squared norm.
    let mut partial = Array::<f32>::new(comptime!(2 * rows));
    let end = seg_start[segment + 1] as usize;
    let mut next = seg_start[segment] as usize;
    while next < end {
        #[unroll]
        for r in 0..rows {
            let valid = next + r < end;
            let mut row = 0usize;
            if valid {
                row = src[next + r] as usize;
            }
            partial[rows + r] = load_row(x, row, valid, &mut values, 0, units, per_unit);
            let mut dot = 0.0f32;
            #[unroll]
            for k in 0..per_unit {
                dot += values[k] * direction[k];
            }
            partial[r] = dot;
        }
        cube_sums(&mut shared, &mut partial, comptime!(2 * rows), units);
        if UNIT_POS == 0 {
            #[unroll]
            for r in 0..rows {
                if next + r < end {
                    packed[dst[next + r] as usize] = partial[r] * (1.0f32 / partial[rows + r].sqrt());
                }
            }
        }
        next += rows;
    }
}
