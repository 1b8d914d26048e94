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
//! - statistics follow [`crate::stats`] (type-7 quantiles, pairwise-complete Pearson).
//!
//! The flow is: [`SosLayout`] (host, group ids) → [`sos_on_device`] (Burn, any backend) → one
//! read-back → [`unpack`] → [`SosReport`] (host, f64).

mod compute;
mod layout;
mod report;

pub use compute::{DegenerateReference, MIN_REFERENCE_NORM, SosValues, sos_on_device, sos_tensor, unpack};
pub use layout::{Cell, LayoutError, Pooling, SosColumns, SosLayout};
pub use report::{JointScore, LanguageCorrelation, LanguageMedian, PersonMean, SosReport};

use burn::tensor::Device;

/// Any reason a SoS computation cannot produce scores.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SosError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Degenerate(#[from] DegenerateReference),
}

/// Per-output SoS scores on `device`, read back synchronously (native callers; the browser uses
/// [`sos_on_device`] + `into_data_async` + [`unpack`]). See [`sos_tensor`] for `chunk_rows`.
pub fn per_image_sos(
    embeddings: Vec<f32>,
    dim: usize,
    layout: &SosLayout,
    device: &Device,
    chunk_rows: Option<usize>,
) -> Result<SosValues, SosError> {
    let data = sos_on_device(embeddings, dim, layout, device, chunk_rows).into_data();
    Ok(unpack(data, layout)?)
}

/// Rows per block that keep a block of `dim`-dimensional f32 rows near `bytes` (a CPU cache-sized
/// default for `chunk_rows`).
pub fn rows_for_bytes(dim: usize, bytes: usize) -> usize {
    (bytes / (4 * dim.max(1))).max(1)
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
    let report = SosReport::new(&layout, &values.per_image);
    Ok((layout, values, report))
}

#[cfg(test)]
mod tests;
