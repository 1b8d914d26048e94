//! Confidence-interval columns, one convention for every result table (`--ci LEVEL`): a CSV table
//! written with `--ci` has two more columns right after each estimate that has an interval,
//! `<metric>_lo` and `<metric>_hi` (an empty pair where the interval is undefined); without
//! `--ci` the table is written exactly as before. A JSON result stores the interval of `<metric>`
//! as `<metric>_ci: {"lo": …, "hi": …}`, absent without `--ci`. The intervals themselves are
//! `culturelens_metrics::bootstrap`'s.

pub use culturelens_metrics::bootstrap::Interval;

use crate::csv_file::Cells;
use crate::error::SchemaError;

/// The suffix of an interval's lower bound column.
pub const LO: &str = "_lo";
/// The suffix of an interval's upper bound column.
pub const HI: &str = "_hi";

/// The lower and upper bound columns of `metric`.
pub fn bound_columns(metric: &str) -> [String; 2] {
    [format!("{metric}{LO}"), format!("{metric}{HI}")]
}

/// `names` with the bound columns after each of `metrics` when `ci`.
pub(crate) fn with_bounds(names: &[String], metrics: &[&str], ci: bool) -> Vec<String> {
    let mut out = Vec::with_capacity(names.len() + 2 * metrics.len());
    for name in names {
        out.push(name.clone());
        if ci && metrics.contains(&name.as_str()) {
            out.extend(bound_columns(name));
        }
    }
    out
}

/// The two cells of an interval: its bounds, or two empty cells where it is undefined.
pub fn bound_cells(interval: Option<Interval>) -> [String; 2] {
    match interval {
        Some(i) => [i.lo.to_string(), i.hi.to_string()],
        None => [String::new(), String::new()],
    }
}

impl Cells<'_> {
    /// The interval in columns `k` (lower) and `k + 1` (upper): `None` for two empty cells, an
    /// error for one empty cell, a bound that is no finite number, or `lo > hi`.
    pub fn interval(&self, k: usize) -> Result<Option<Interval>, SchemaError> {
        match (self.text(k).is_empty(), self.text(k + 1).is_empty()) {
            (true, true) => return Ok(None),
            (true, false) => return Err(self.error(k, "empty lower bound beside an upper bound")),
            (false, true) => return Err(self.error(k + 1, "empty upper bound beside a lower bound")),
            (false, false) => {}
        }
        let (lo, hi) = (self.finite(k)?, self.finite(k + 1)?);
        if lo > hi {
            return Err(self.error(k, format!("lower bound {lo} above the upper bound {hi}")));
        }
        Ok(Some(Interval { lo, hi }))
    }
}
