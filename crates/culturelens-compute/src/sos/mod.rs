//! Surface-over-Semantics (SoS) score — SoS paper §4.1, Eq. (1):
//!
//! `SoS_{c,l}(o) = cos(sem_c, e_o) − cos(sur_l, e_o)`
//!
//! with `sur_l` the mean embedding of all outputs prompted in language `l` and `sem_c` the mean of
//! all outputs targeting culture `c`. Conventions (also in `culturelens sos --help`):
//! - embeddings are L2-normalised before anything else;
//! - references include the output itself and are pooled over all models by default
//!   ([`Pooling::All`]), or per model ([`Pooling::PerModel`]); with a `layer` column they are
//!   computed per (model, layer) (§5.1);
//! - the joint score of a (model, language, culture) cell is the mean of its outputs' scores;
//! - statistics follow [`culturelens_metrics::stats`] (type-7 quantiles, pairwise-complete Pearson).
//!
//! The SoS authors' repository (TAI-HAMBURG/Surface-Over-Semantics, commit 24fb4c3) holds no code
//! of this score or its aggregation (the notebook its README names is not in it), so these
//! conventions are this project's reading of Eq. (1), checked against numpy written here
//! (scripts/fixtures/make_demo_sos_reference.py). Its CLIP language-vs-culture check is the
//! authors' own: see `culturelens_metrics::validation`.
//!
//! The flow is: [`SosLayout`] (host, group ids) → [`sos_packed`] (Burn, any backend: the fused
//! CubeCL kernels on a GPU, see [`fused_kernels_on`]; elsewhere the tensor graph, rows blocked by
//! the device's [`Blocking`] rule) → one read-back by the caller (sync or async) → [`unpack`] →
//! [`sos_report`] (host, f64). The CLI and the browser both go through [`sos_packed`], on the
//! table's row blocks as [`crate::device::upload_rows`] put it on the device.
//!
//! Confidence intervals of the joint scores (`sos --ci`): `bootstrap.rs`, outputs (or clusters of
//! outputs) resampled within cells, references held fixed ([`sos_fast_intervals`], on the host) or
//! recomputed per resample ([`sos_exact_intervals`], [`sos_packed`] per resample); paired
//! differences between two models or languages with a sign-flip test: `compare.rs`
//! ([`paired_differences`]).

mod bootstrap;
mod compare;
mod compute;
mod fused;
mod host;
#[cfg(feature = "cube")]
mod kernels;
mod layout;
mod plan;
mod report;

pub use bootstrap::{
    CellUnits, ExactResamples, SosCiMode, cell_key, sos_exact_intervals, sos_exact_replicates,
    sos_fast_intervals, sos_fast_replicates,
};
pub use compare::{CompareError, Comparison, Factor, PairedDifference, comparison_key, paired_differences};
pub use compute::{DegenerateReference, MIN_REFERENCE_NORM, SosValues, sos_packed, sos_tensor, unpack};
pub use fused::fused_kernels_on;
pub use host::sos_host;
pub use layout::{Cell, LayoutError, Pooling, SosColumns, SosInterned, SosLayout};
pub use plan::{GROUP_MEMBERS, SEGMENT_ROWS};
pub use report::{JointScore, LanguageCorrelation, LanguageMedian, PersonMean, SosReport, sos_report};

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_metrics::bootstrap::CiSpec;

use crate::device::{Processor, rows_for_bytes};

/// Any reason a SoS computation cannot produce scores.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SosError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Degenerate(#[from] DegenerateReference),
}

/// Per-output SoS scores on `device`, read back synchronously (native callers; the browser calls
/// [`sos_packed`], awaits `into_data_async` and calls [`unpack`]). See [`sos_tensor`] for
/// `chunk_rows`. The embeddings (row-major N × `dim`) move to the device without a copy.
pub fn per_image_sos(
    embeddings: Vec<f32>,
    dim: usize,
    layout: &SosLayout,
    device: &Device,
    chunk_rows: Option<usize>,
) -> Result<SosValues, SosError> {
    let n = layout.len();
    assert_eq!(embeddings.len(), n * dim, "embeddings must be N × d with N = number of outputs");
    let table = Tensor::<2>::from_data(TensorData::new(embeddings, [n, dim]), device);
    let data = sos_packed(&[table], None, layout, chunk_rows).into_data();
    Ok(unpack(data, layout)?)
}

/// Bytes of f32 rows per block on a CPU: blocks that fit the cache keep every temporary small and
/// reused (the block-size sweep in BENCHMARKS.md, `scripts/bench/sos_block_sweep.py`).
pub const CPU_BLOCK_BYTES: usize = 1 << 20;

/// How the tensor graph ([`sos_tensor`]) walks the rows; the scores do not depend on it beyond f32
/// rounding. The fused kernels of a GPU read every row once whatever the blocking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocking {
    /// The rule for the processor: blocks of about [`CPU_BLOCK_BYTES`] on a CPU (cache-sized,
    /// reused temporaries), the whole table as one block on a GPU (no launch overhead per block).
    Default(Processor),
    /// Blocks of this many rows (`culturelens sos --block-rows`, the block-size sweep).
    Rows(usize),
}

impl Blocking {
    /// The `chunk_rows` of [`sos_tensor`] for `dim`-dimensional rows (`None`: one block).
    pub fn chunk_rows(self, dim: usize) -> Option<usize> {
        match self {
            Blocking::Default(Processor::Cpu) => Some(rows_for_bytes(dim, CPU_BLOCK_BYTES)),
            Blocking::Default(Processor::Gpu) => None,
            Blocking::Rows(rows) => Some(rows.max(1)),
        }
    }
}

/// Layout, per-output scores and the full report in one call.
pub fn sos(
    embeddings: Vec<f32>,
    dim: usize,
    cols: SosColumns<'_>,
    pooling: Pooling,
    device: &Device,
    chunk_rows: Option<usize>,
) -> Result<(SosLayout, SosValues, SosReport), SosError> {
    let layout = SosLayout::new(cols, pooling)?;
    let values = per_image_sos(embeddings, dim, &layout, device, chunk_rows)?;
    let report = sos_report(&layout, &values.per_image);
    Ok((layout, values, report))
}

/// A table scored on a device by [`score_rows`]: its layout, per-output scores, report, and the
/// table's row blocks on the device (kept for the exact mode of the bootstrap).
pub struct Scored {
    pub layout: SosLayout,
    pub values: SosValues,
    pub report: SosReport,
    pub blocks: Vec<Tensor<2>>,
}

impl Scored {
    /// The table scored by [`score_device`], with its report ([`sos_report`], f64).
    pub fn report(layout: SosLayout, values: SosValues, blocks: Vec<Tensor<2>>) -> Scored {
        let report = sos_report(&layout, &values.per_image);
        Scored { layout, values, report, blocks }
    }

    /// `sos --ci`: the bootstrap interval of every joint score, into the report's `sos_ci`. The
    /// units of a cell are its outputs, or with `cluster` (key columns, one value per output) its
    /// groups of outputs with equal keys; `mode` holds the references at the full-table estimate
    /// ([`sos_fast_replicates`]) or recomputes them from every resample
    /// ([`sos_exact_replicates`], `chunk_rows` as [`Blocking::chunk_rows`]).
    pub fn add_intervals(
        &mut self,
        cluster: Option<&[&[String]]>,
        mode: SosCiMode,
        spec: CiSpec,
        chunk_rows: Option<usize>,
    ) -> Result<(), SosError> {
        let units = match cluster {
            Some(key) => CellUnits::clusters(&self.layout, key),
            None => CellUnits::outputs(&self.layout),
        };
        let scores = &self.values.per_image;
        let replicates = match mode {
            SosCiMode::Fast => sos_fast_replicates(&self.layout, &units, scores, spec),
            SosCiMode::Exact => {
                sos_exact_replicates(&self.blocks, &self.layout, &units, scores, spec, chunk_rows, |_| {})?
            }
        };
        for (joint, r) in self.report.joint.iter_mut().zip(&replicates) {
            joint.sos_ci = r.interval(spec.level, spec.method);
        }
        Ok(())
    }
}

/// Every output's score in row order as the rows of `sos --per-image`
/// (`culturelens_results::sos::PerImage`), with the input's `image` cells when it has that column.
pub fn per_image_scores(
    layout: &SosLayout,
    values: &SosValues,
    images: Option<&[String]>,
) -> Vec<culturelens_results::sos::PerImageScore> {
    assert_eq!(layout.cell.len(), values.per_image.len(), "one score per row");
    let rows = layout.cell.iter().zip(&values.per_image).enumerate();
    rows.map(|(row, (cell, score))| {
        let c = &layout.cells[*cell as usize];
        culturelens_results::sos::PerImageScore {
            row,
            image: images.map(|i| i[row].clone()),
            model: c.model.clone(),
            layer: c.layer.clone(),
            language: c.language.clone(),
            culture: c.culture.clone(),
            person: layout.person.as_ref().map(|p| p.get(row).to_owned()),
            sos: *score,
        }
    })
    .collect()
}

/// Why [`score_rows`] produced no scores.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// The metadata or the references make SoS undefined.
    #[error(transparent)]
    Sos(#[from] SosError),
    /// The device did not take the table (its error, debug-formatted).
    #[error("the table could not be uploaded: {0}")]
    Upload(String),
}

/// The one SoS scoring of a whole table, shared by `culturelens sos`/`demo` and the Python
/// package's `culturelens.sos`: the layout of `cols` (host), then [`score_layout`]. `lap` is
/// called after the stages `layout`, `upload` (waited for), `device` (device work and read-back)
/// and `report`.
#[allow(clippy::too_many_arguments)]
pub fn score_rows(
    embeddings: impl Into<crate::device::HostRows>,
    dim: usize,
    cols: SosColumns<'_>,
    pooling: Pooling,
    device: &Device,
    processor: Processor,
    blocking: Blocking,
    lap: &mut dyn FnMut(&'static str),
) -> Result<Scored, ScoreError> {
    let layout = SosLayout::new(cols, pooling).map_err(SosError::from)?;
    lap("layout");
    score_layout(layout, embeddings, dim, device, processor, blocking, lap)
}

/// [`score_rows`] after its layout (the Python package builds the layout while it checks the
/// rows): [`score_device`], then [`sos_report`] (f64). `lap` is called after the stages `upload`,
/// `device` and `report`.
pub fn score_layout(
    layout: SosLayout,
    embeddings: impl Into<crate::device::HostRows>,
    dim: usize,
    device: &Device,
    processor: Processor,
    blocking: Blocking,
    lap: &mut dyn FnMut(&'static str),
) -> Result<Scored, ScoreError> {
    let (values, blocks) = score_device(&layout, embeddings, dim, device, processor, blocking, lap)?;
    let scored = Scored::report(layout, values, blocks);
    lap("report");
    Ok(scored)
}

/// [`score_layout`]'s device half: every output's score ([`unpack`]ed) and the table's blocks on
/// `device`. On a CPU device (`processor`) with the default blocking, the fused passes of
/// `host.rs` over the row-major `embeddings` (N × `dim`) in place, and the rows as one block
/// without a copy; elsewhere the rows onto `device` in the blocks its buffers take
/// ([`Processor::upload_rows`]), [`sos_packed`] in row blocks of `blocking` and one read-back. It reads the rows as they are: a caller that checks them
/// meanwhile (the Python package) reports the check's error before this one's, and makes the
/// report ([`Scored::report`]) only of rows that passed.
pub fn score_device(
    layout: &SosLayout,
    embeddings: impl Into<crate::device::HostRows>,
    dim: usize,
    device: &Device,
    processor: Processor,
    blocking: Blocking,
    lap: &mut dyn FnMut(&'static str),
) -> Result<(SosValues, Vec<Tensor<2>>), ScoreError> {
    let embeddings: crate::device::HostRows = embeddings.into();
    if let (Processor::Cpu, Blocking::Default(_)) = (processor, blocking) {
        // A CPU device reads the host rows in place (no upload): the fused passes of `host.rs` on
        // them, and the rows as one block for the exact bootstrap, without a copy.
        lap("upload");
        let packed = host::sos_host(embeddings.as_slice(), dim, None, layout);
        let blocks = crate::device::upload_rows(embeddings, dim, None, device);
        let len = packed.len();
        let values = unpack(TensorData::new(packed, [len]), layout).map_err(SosError::from)?;
        lap("device");
        return Ok((values, blocks));
    }
    let blocks = crate::device::upload_rows(embeddings, dim, processor.upload_rows(dim), device);
    device.sync().map_err(|e| ScoreError::Upload(format!("{e:?}")))?;
    lap("upload");
    let packed = sos_packed(&blocks, None, layout, blocking.chunk_rows(dim)).into_data();
    let values = unpack(packed, layout).map_err(SosError::from)?;
    lap("device");
    Ok((values, blocks))
}

#[cfg(test)]
mod tests;
