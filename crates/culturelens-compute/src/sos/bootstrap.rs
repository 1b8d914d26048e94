//! Confidence intervals of the joint SoS scores by the seeded bootstrap of
//! [`culturelens_metrics::bootstrap`] (percentile or BCa, `culturelens sos --ci`).
//!
//! # What is resampled
//! The joint score of a (model, [layer,] language, culture) cell is the mean of its outputs'
//! scores (SoS paper §4.1, Eq. 1), so the unit is an **output within its cell**: each resample
//! draws, in every cell, as many outputs as the cell has, with replacement (a stratified
//! bootstrap: cells keep their sizes). Outputs that share a prompt are not independent (the
//! seeds of one prompt, e.g. the four seeds per layer of §5.1): with a cluster key
//! ([`CellUnits::clusters`], `--cluster template,person`) the unit is a **cluster** of outputs
//! with the same key values within a cell, and the statistic the ratio mean
//! `Σ cluster sums / Σ cluster sizes` (equal to the cell mean on the full data).
//!
//! # Modes
//! - **Fast** ([`sos_fast_intervals`]): the surface and semantic references are held at their
//!   full-table values and the per-output scores are resampled, which is
//!   [`Replicates::of_ratio`] per cell on the host: `B` resamples cost `B·N` index draws and
//!   additions, against the `N × d` products of the point estimate.
//! - **Exact** ([`sos_exact_intervals`]): each resample is a table of its own (the drawn outputs of
//!   every cell) and SoS is recomputed on it, references included: [`sos_packed`] on the same
//!   device over the resample's rows and [`SosLayout::select`], one read-back per resample. Each
//!   resample costs about one point estimate. Its BCa acceleration comes from the fixed-reference
//!   jackknife of the fast mode: leaving one output out moves the cell mean by `O(1/n)` but a
//!   reference pooled over `|O_l|` outputs only by `O(1/|O_l|)`.
//!
//! Both modes draw the same indices: one [`UnitSampler`] stream per cell, seeded with
//! [`stream_seed`]`(seed, `[`cell_key`]`)`, resample after resample, so an interval does not depend
//! on the backend, the thread count or the other cells of the table.

use culturelens_metrics::bootstrap::{
    CiSpec, Interval, Replicates, UnitSampler, ratio_jackknife, stream_seed,
};

use burn::tensor::Tensor;

use super::SosError;
use super::compute::{sos_packed, unpack};
use super::layout::{Cell, SosLayout};

/// How the references are treated per resample (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SosCiMode {
    /// References held at the full-table estimate; per-output scores resampled.
    Fast,
    /// References recomputed from every resample.
    Exact,
}

impl SosCiMode {
    /// The name the CLI and the provenance use.
    pub fn name(self) -> &'static str {
        match self {
            SosCiMode::Fast => "fast",
            SosCiMode::Exact => "exact",
        }
    }
}

/// The resampling units of every cell: for each cell (in [`SosLayout::cells`] order) its units,
/// each a list of output rows.
#[derive(Debug, Clone, PartialEq)]
pub struct CellUnits {
    cells: Vec<Vec<Vec<u32>>>,
}

impl CellUnits {
    /// Every output is its own unit.
    pub fn outputs(layout: &SosLayout) -> CellUnits {
        let cells =
            layout.cell_rows().into_iter().map(|rows| rows.into_iter().map(|r| vec![r]).collect()).collect();
        CellUnits { cells }
    }

    /// Outputs of one cell with equal values in every `key` column (one value per output) form one
    /// unit; units in order of their first output.
    pub fn clusters(layout: &SosLayout, key: &[&[String]]) -> CellUnits {
        let cells = layout
            .cell_rows()
            .into_iter()
            .map(|rows| {
                let mut units: Vec<Vec<u32>> = Vec::new();
                let mut index: std::collections::HashMap<Vec<&str>, usize> = std::collections::HashMap::new();
                for r in rows {
                    let k: Vec<&str> = key.iter().map(|col| col[r as usize].as_str()).collect();
                    let next = units.len();
                    let u = *index.entry(k).or_insert(next);
                    if u == next {
                        units.push(Vec::new());
                    }
                    units[u].push(r);
                }
                units
            })
            .collect();
        CellUnits { cells }
    }

    /// The units of cell `c`.
    pub fn cell(&self, c: usize) -> &[Vec<u32>] {
        &self.cells[c]
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The unit sums and sizes of cell `c` over `scores` (one per output row).
    fn sums(&self, c: usize, scores: &[f32]) -> (Vec<f64>, Vec<f64>) {
        self.cells[c]
            .iter()
            .map(|rows| (rows.iter().map(|&r| f64::from(scores[r as usize])).sum::<f64>(), rows.len() as f64))
            .unzip()
    }
}

/// The stream key of a cell: its model, layer, language and culture, separated by U+001F.
pub fn cell_key(cell: &Cell) -> String {
    let layer = cell.layer.as_deref().unwrap_or("");
    format!("{}\u{1f}{layer}\u{1f}{}\u{1f}{}", cell.model, cell.language, cell.culture)
}

/// The fast-mode replicates of every cell: references fixed, the per-output `scores` of the point
/// estimate resampled by `units` (module doc).
pub fn sos_fast_replicates(
    layout: &SosLayout,
    units: &CellUnits,
    scores: &[f32],
    spec: CiSpec,
) -> Vec<Replicates> {
    assert_eq!(scores.len(), layout.len(), "one score per output");
    assert_eq!(units.len(), layout.cells.len(), "units for every cell");
    layout
        .cells
        .iter()
        .enumerate()
        .map(|(c, cell)| {
            let (sums, sizes) = units.sums(c, scores);
            Replicates::of_ratio(&sums, &sizes, &spec.draws(sums.len(), &cell_key(cell)))
        })
        .collect()
}

/// The fast-mode interval of every cell (`None` where undefined, see
/// [`Replicates::interval`]).
pub fn sos_fast_intervals(
    layout: &SosLayout,
    units: &CellUnits,
    scores: &[f32],
    spec: CiSpec,
) -> Vec<Option<Interval>> {
    sos_fast_replicates(layout, units, scores, spec)
        .iter()
        .map(|r| r.interval(spec.level, spec.method))
        .collect()
}

/// The resamples of the exact mode, drawn on the host in a fixed order: every cell's stream
/// advanced by one resample per call.
pub struct ExactResamples<'a> {
    units: &'a CellUnits,
    samplers: Vec<UnitSampler>,
    left: usize,
    drawn: Vec<u32>,
}

impl<'a> ExactResamples<'a> {
    pub fn new(layout: &SosLayout, units: &'a CellUnits, spec: CiSpec) -> ExactResamples<'a> {
        assert_eq!(units.len(), layout.cells.len(), "units for every cell");
        let samplers = layout
            .cells
            .iter()
            .enumerate()
            .map(|(c, cell)| UnitSampler::new(units.cell(c).len(), stream_seed(spec.seed, &cell_key(cell))))
            .collect();
        ExactResamples { units, samplers, left: spec.resamples, drawn: Vec::new() }
    }

    /// The output rows of the next resample, cell after cell (each cell's drawn units, their rows
    /// in order), or `None` once every resample was drawn.
    pub fn next_rows(&mut self) -> Option<Vec<u32>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut rows = Vec::new();
        for (c, sampler) in self.samplers.iter_mut().enumerate() {
            let units = self.units.cell(c);
            self.drawn.resize(units.len(), 0);
            sampler.draw(&mut self.drawn);
            for &u in &self.drawn {
                rows.extend_from_slice(&units[u as usize]);
            }
        }
        Some(rows)
    }
}

/// The exact-mode replicates of every cell: SoS recomputed, references included, on every
/// resample of the table stored in `blocks` (as [`sos_packed`] takes it), one synchronous
/// read-back per resample (native callers); `scores` are the point estimate's per-output scores
/// (the estimate and the jackknife). `after_each` is called with the number of resamples done.
pub fn sos_exact_replicates(
    blocks: &[Tensor<2>],
    layout: &SosLayout,
    units: &CellUnits,
    scores: &[f32],
    spec: CiSpec,
    chunk_rows: Option<usize>,
    mut after_each: impl FnMut(usize),
) -> Result<Vec<Replicates>, SosError> {
    assert_eq!(scores.len(), layout.len(), "one score per output");
    let mut out: Vec<Replicates> = (0..layout.cells.len())
        .map(|c| {
            let (sums, sizes) = units.sums(c, scores);
            let (estimate, jackknife) = ratio_jackknife(&sums, &sizes);
            Replicates { estimate, values: Vec::with_capacity(spec.resamples), jackknife }
        })
        .collect();
    let mut resamples = ExactResamples::new(layout, units, spec);
    let mut done = 0;
    while let Some(rows) = resamples.next_rows() {
        culturelens_metrics::cancel::checkpoint();
        let resampled = layout.select(&rows);
        let values = unpack(sos_packed(blocks, Some(&rows), &resampled, chunk_rows).into_data(), &resampled)?;
        let mut sums = vec![(0.0f64, 0usize); layout.cells.len()];
        for (&c, &v) in resampled.cell.iter().zip(&values.per_image) {
            let s = &mut sums[c as usize];
            s.0 += f64::from(v);
            s.1 += 1;
        }
        for (r, (sum, n)) in out.iter_mut().zip(sums) {
            r.values.push(sum / n as f64);
        }
        done += 1;
        after_each(done);
    }
    Ok(out)
}

/// The exact-mode interval of every cell ([`sos_exact_replicates`]).
pub fn sos_exact_intervals(
    blocks: &[Tensor<2>],
    layout: &SosLayout,
    units: &CellUnits,
    scores: &[f32],
    spec: CiSpec,
    chunk_rows: Option<usize>,
) -> Result<Vec<Option<Interval>>, SosError> {
    let replicates = sos_exact_replicates(blocks, layout, units, scores, spec, chunk_rows, |_| {})?;
    Ok(replicates.iter().map(|r| r.interval(spec.level, spec.method)).collect())
}
