//! A table stored on the GPU in parts: how many rows a part may hold under the adapter's buffer
//! limits, and how a list of rows splits into runs that each read one part (the browser uploads
//! a large embedding table as several buffers, since WebGPU caps the size of one).

/// Rows per part: the most `dim`-wide f32 rows that fit in `max_bytes` (at least one row).
pub fn rows_per_part(dim: usize, max_bytes: u64) -> usize {
    let row = (dim.max(1) * 4) as u64;
    ((max_bytes / row) as usize).max(1)
}

/// A run of consecutive requested rows that lie in one part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The part the rows are in.
    pub part: usize,
    /// Their row numbers inside the part; `None` means the whole part, in order.
    pub local: Option<Vec<u32>>,
}

/// Splits `rows` (table row numbers in the order wanted; `None` = every row in order) of a table
/// of `total` rows stored in parts of `per_part` rows into runs, keeping the order: reading the
/// runs one after the other gives the rows in the order asked.
pub fn runs(total: usize, per_part: usize, rows: Option<&[u32]>) -> Vec<Run> {
    let per_part = per_part.max(1);
    let Some(rows) = rows else {
        return (0..total.div_ceil(per_part)).map(|part| Run { part, local: None }).collect();
    };
    let mut out: Vec<Run> = Vec::new();
    for &r in rows {
        let (part, local) = (r as usize / per_part, (r as usize % per_part) as u32);
        match out.last_mut() {
            Some(Run { part: p, local: Some(l) }) if *p == part => l.push(local),
            _ => out.push(Run { part, local: Some(vec![local]) }),
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
        // The paper's table: 150,822 × 1280 f32 = 772 MB in 6 parts of at most 128 MiB.
        assert_eq!(150_822usize.div_ceil(rows_per_part(1280, 128 << 20)), 6);
    }

    #[test]
    fn runs_keep_the_order_and_split_at_part_borders() {
        assert_eq!(runs(7, 3, None).len(), 3);
        assert_eq!(runs(7, 3, None)[2], Run { part: 2, local: None });
        let r = runs(7, 3, Some(&[0, 2, 3, 6, 1]));
        assert_eq!(
            r,
            [
                Run { part: 0, local: Some(vec![0, 2]) },
                Run { part: 1, local: Some(vec![0]) },
                Run { part: 2, local: Some(vec![0]) },
                Run { part: 0, local: Some(vec![1]) },
            ]
        );
        assert!(runs(7, 3, Some(&[])).is_empty());
    }
}
