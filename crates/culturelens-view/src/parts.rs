//! A table stored on the GPU in parts: how many rows a part may hold under the adapter's buffer
//! limits, and how a list of rows splits into runs that each read one part (the browser uploads
//! a large embedding table as several buffers, since WebGPU caps the size of one).

use std::ops::Range;

/// Rows per part: the most `dim`-wide f32 rows that fit in `max_bytes` (at least one row).
pub fn rows_per_part(dim: usize, max_bytes: u64) -> usize {
    let row = (dim.max(1) * 4) as u64;
    usize::try_from(max_bytes / row).unwrap_or(usize::MAX).max(1)
}

/// Which rows of its part a run reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Local {
    /// Consecutive rows (a slice of the part).
    Range(Range<usize>),
    /// These rows, in this order (a gather).
    Rows(Vec<u32>),
}

/// A run of consecutive requested rows that lie in one part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The part the rows are in.
    pub part: usize,
    /// Their row numbers inside the part.
    pub local: Local,
}

impl Run {
    /// Number of rows the run reads.
    pub fn len(&self) -> usize {
        match &self.local {
            Local::Range(r) => r.len(),
            Local::Rows(r) => r.len(),
        }
    }

    /// Whether the run reads no row (never true for a run of [`runs`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Splits `rows` (table row numbers in the order wanted; `None` = every row in order) of a table
/// of `total` rows stored in parts of `per_part` rows into runs, keeping the order: reading the
/// runs one after the other gives the rows in the order asked. With `max_rows`, no run holds
/// more rows than that (a CPU's cache-sized blocks, `culturelens_compute::sos::Blocking`).
pub fn runs(total: usize, per_part: usize, rows: Option<&[u32]>, max_rows: Option<usize>) -> Vec<Run> {
    let per_part = per_part.max(1);
    let cap = max_rows.unwrap_or(usize::MAX).max(1);
    let Some(rows) = rows else {
        let mut out = Vec::new();
        for part in 0..total.div_ceil(per_part) {
            let end = (total - part * per_part).min(per_part);
            let mut start = 0;
            while start < end {
                let stop = end.min(start.saturating_add(cap));
                out.push(Run { part, local: Local::Range(start..stop) });
                start = stop;
            }
        }
        return out;
    };
    let mut out: Vec<Run> = Vec::new();
    for &r in rows {
        let (part, local) = (r as usize / per_part, (r as usize % per_part) as u32);
        match out.last_mut() {
            Some(Run { part: p, local: Local::Rows(l) }) if *p == part && l.len() < cap => l.push(local),
            _ => out.push(Run { part, local: Local::Rows(vec![local]) }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_per_part_respects_the_limit() {
        assert_eq!(rows_per_part(1280, 128 * 1024 * 1024), 26214);
        assert_eq!(rows_per_part(64, 1000), 3, "3 rows of 256 bytes fit in 1000");
        assert_eq!(rows_per_part(64, 10), 1, "never zero rows");
        assert_eq!(rows_per_part(64, u64::MAX), (u64::MAX / 256) as usize, "no limit");
        // The paper's table: 150,822 × 1280 f32 = 772 MB in 6 parts of at most 128 MiB.
        assert_eq!(150_822usize.div_ceil(rows_per_part(1280, 128 << 20)), 6);
    }

    #[test]
    fn all_rows_run_part_by_part_and_in_blocks() {
        let r = runs(7, 3, None, None);
        assert_eq!(
            r,
            [
                Run { part: 0, local: Local::Range(0..3) },
                Run { part: 1, local: Local::Range(0..3) },
                Run { part: 2, local: Local::Range(0..1) },
            ]
        );
        // Blocks of at most 2 rows never cross a part.
        let r = runs(7, 3, None, Some(2));
        assert_eq!(
            r,
            [
                Run { part: 0, local: Local::Range(0..2) },
                Run { part: 0, local: Local::Range(2..3) },
                Run { part: 1, local: Local::Range(0..2) },
                Run { part: 1, local: Local::Range(2..3) },
                Run { part: 2, local: Local::Range(0..1) },
            ]
        );
        assert_eq!(r.iter().map(Run::len).sum::<usize>(), 7);
        assert_eq!(runs(5, usize::MAX, None, None), [Run { part: 0, local: Local::Range(0..5) }]);
        assert!(runs(0, 3, None, None).is_empty());
    }

    #[test]
    fn picked_rows_keep_the_order_and_split_at_part_borders_and_blocks() {
        let r = runs(7, 3, Some(&[0, 2, 3, 6, 1]), None);
        assert_eq!(
            r,
            [
                Run { part: 0, local: Local::Rows(vec![0, 2]) },
                Run { part: 1, local: Local::Rows(vec![0]) },
                Run { part: 2, local: Local::Rows(vec![0]) },
                Run { part: 0, local: Local::Rows(vec![1]) },
            ]
        );
        let r = runs(7, 3, Some(&[0, 1, 2, 4]), Some(2));
        assert_eq!(
            r,
            [
                Run { part: 0, local: Local::Rows(vec![0, 1]) },
                Run { part: 0, local: Local::Rows(vec![2]) },
                Run { part: 1, local: Local::Rows(vec![1]) },
            ]
        );
        assert!(runs(7, 3, Some(&[]), None).is_empty());
    }
}
