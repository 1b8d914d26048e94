//! Embedding tables, the data contract every culturelens command shares: N × d embeddings plus one
//! metadata row per embedding.
//!
//! Two on-disk forms are read and written:
//! - `.npy` (float32/float16/float64, C order, N × d) with a CSV metadata file (header row);
//! - Parquet with a list column `embedding` and metadata columns.
//!
//! Loading validates what every metric relies on — row counts agree, values are finite, no row has
//! zero norm — and errors name the file, row and column. Outputs are written atomically
//! ([`write_atomic`]). This crate does file I/O and must stay out of the shared Burn crates.

#[cfg(not(target_arch = "wasm32"))]
mod atomic;
mod error;
mod interned;
mod matrix;
mod meta;
mod npy;
#[cfg(feature = "parquet")]
mod parquet_io;
#[cfg(feature = "parquet")]
mod parquet_pages;

use std::path::Path;

// Files are written natively only, as in culturelens-files (the browser app parses, never writes).
#[cfg(not(target_arch = "wasm32"))]
pub use atomic::write_atomic;
pub use error::{Location, TableError};
pub use interned::Interned;
pub use matrix::Matrix;
pub use meta::{
    ColumnCells, KNOWN_COLUMNS, Metadata, read_metadata_csv, read_metadata_csv_from, write_metadata_csv,
};
pub use npy::{parse_npy, read_npy, read_npy_nd, write_npy, write_npy_nd};
#[cfg(feature = "parquet")]
pub use parquet_io::{
    EMBEDDING_COLUMN, parse_parquet, read_metadata_parquet, read_parquet, write_metadata_parquet,
    write_parquet,
};

/// N × d embeddings with one metadata row per embedding.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingTable {
    pub embeddings: Matrix,
    pub meta: Metadata,
}

impl EmbeddingTable {
    /// Pairs embeddings and metadata; panics if their row counts differ (use [`load_table`] for
    /// validated input).
    pub fn new(embeddings: Matrix, meta: Metadata) -> Self {
        assert_eq!(embeddings.rows(), meta.n_rows(), "embeddings and metadata must have the same rows");
        Self { embeddings, meta }
    }

    pub fn len(&self) -> usize {
        self.embeddings.rows()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dim(&self) -> usize {
        self.embeddings.cols()
    }

    /// Checks that every value is finite and no row has zero norm; the error names the file, the
    /// row and the first offending dimension.
    pub fn validate(&self, embeddings_path: Option<&Path>) -> Result<(), TableError> {
        validate_rows(self.embeddings.data(), self.len(), self.dim(), embeddings_path)
    }
}

/// [`EmbeddingTable::validate`] of row-major embeddings (`rows × dim`) held elsewhere than a
/// [`Matrix`] (the Python package reads a numpy array in place).
pub fn validate_rows(
    data: &[f32],
    rows: usize,
    dim: usize,
    embeddings_path: Option<&Path>,
) -> Result<(), TableError> {
    assert_eq!(data.len(), rows * dim, "embeddings must be rows × dim");
    let at = embeddings_path.map(Location::file).unwrap_or_default();
    if rows == 0 {
        return Err(TableError::invalid(at, "the table has no rows"));
    }
    if dim == 0 {
        return Err(TableError::invalid(at, "embeddings have zero dimensions"));
    }
    for (row, v) in data.chunks_exact(dim).enumerate() {
        if row_is_valid(v) {
            continue;
        }
        if let Some(col) = v.iter().position(|x| !x.is_finite()) {
            return Err(TableError::invalid(
                at.clone().row(row).column(format!("dim {col}")),
                format!("non-finite value {}", v[col]),
            ));
        }
        if v.iter().all(|x| *x == 0.0) {
            return Err(TableError::invalid(
                at.clone().row(row),
                "zero-norm embedding (all values are 0): it has no direction, so cosine similarities are undefined",
            ));
        }
    }
    Ok(())
}

/// Whether an embedding row is fit to score: every value finite and at least one non-zero. One
/// branch-free (vectorised) pass; [`validate_rows`] finds the positions only on failure.
#[inline]
pub(crate) fn row_is_valid(v: &[f32]) -> bool {
    let (finite, nonzero) = v.iter().fold((true, false), |(f, z), x| (f & x.is_finite(), z | (*x != 0.0)));
    finite && nonzero
}

#[cfg(feature = "parquet")]
/// Reads and validates an embedding table: `embeddings` is `.npy` (then `meta` is a CSV file, or
/// `None` for embeddings without metadata) or `.parquet` (then `meta` must be `None`).
pub fn load_table(embeddings: &Path, meta: Option<&Path>) -> Result<EmbeddingTable, TableError> {
    let ext = embeddings.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let table = match ext.as_deref() {
        Some("parquet") | Some("pq") => {
            if let Some(m) = meta {
                return Err(TableError::invalid(
                    Location::file(m),
                    "a Parquet table carries its own metadata columns; do not pass a separate metadata file",
                ));
            }
            read_parquet(embeddings)?
        }
        Some("npy") => {
            // The rows are screened as they are read; `validate` then runs only to name a bad one.
            // The CSV is parsed on a thread of its own while the rows are read; errors come in
            // the order of a serial load (the embeddings' first).
            let (read, metadata) = std::thread::scope(|scope| {
                let csv = meta.map(|m| scope.spawn(move || read_metadata_csv(m)));
                (npy::read_npy_screened(embeddings), csv.map(|t| t.join().expect("the CSV thread panicked")))
            });
            let (matrix, clean) = read?;
            let metadata = match metadata {
                Some(m) => m?,
                None => Metadata::empty(matrix.rows()),
            };
            if metadata.n_rows() != matrix.rows() {
                return Err(TableError::invalid(
                    metadata.location(),
                    format!(
                        "row-count mismatch: the metadata has {} data rows but {} has {} embeddings",
                        metadata.n_rows(),
                        embeddings.display(),
                        matrix.rows()
                    ),
                ));
            }
            let table = EmbeddingTable::new(matrix, metadata);
            if !clean {
                table.validate(Some(embeddings))?;
            }
            return Ok(table);
        }
        _ => {
            return Err(TableError::format(
                Location::file(embeddings),
                "unknown embeddings format: expected a .npy or .parquet file",
            ));
        }
    };
    table.validate(Some(embeddings))?;
    Ok(table)
}

#[cfg(all(feature = "parquet", not(target_arch = "wasm32")))]
/// Writes `table` atomically: `out` ending in `.parquet` gets one Parquet file; `out` ending in
/// `.npy` gets the matrix plus `meta_out` (CSV) when given.
pub fn save_table(table: &EmbeddingTable, out: &Path, meta_out: Option<&Path>) -> Result<(), TableError> {
    let ext = out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("parquet") | Some("pq") => write_atomic(out, |w| write_parquet(w, table)),
        Some("npy") => {
            write_atomic(out, |w| write_npy(w, &table.embeddings))?;
            match meta_out {
                Some(m) => write_atomic(m, |w| write_metadata_csv(w, &table.meta)),
                None => Ok(()),
            }
        }
        _ => Err(TableError::format(Location::file(out), "output must end in .npy or .parquet")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> EmbeddingTable {
        let meta = Metadata::from_columns(
            None,
            vec![
                ("model".into(), vec!["A".into(), "B".into()]),
                ("language".into(), vec!["en".into(), "de".into()]),
            ],
        )
        .unwrap();
        EmbeddingTable::new(Matrix::new(2, 3, vec![1.0, 0.0, 0.5, -1.0, 2.0, 0.0]), meta)
    }

    #[test]
    fn npy_csv_and_parquet_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        let t = table();
        let (npy, csv, pq) =
            (dir.path().join("e.npy"), dir.path().join("m.csv"), dir.path().join("t.parquet"));
        save_table(&t, &npy, Some(&csv)).unwrap();
        save_table(&t, &pq, None).unwrap();
        let a = load_table(&npy, Some(&csv)).unwrap();
        let b = load_table(&pq, None).unwrap();
        for back in [a, b] {
            assert_eq!(back.embeddings, t.embeddings);
            assert_eq!(back.meta.column("language").unwrap(), ["en", "de"]);
            assert_eq!(back.meta.names(), ["model", "language"]);
        }
    }

    #[test]
    fn validation_names_row_and_column() {
        let mut t = table();
        t.embeddings = Matrix::new(2, 3, vec![1.0, 0.0, 0.5, 0.0, f32::NAN, 0.0]);
        let err = t.validate(Some(Path::new("e.npy"))).unwrap_err().to_string();
        assert_eq!(err, "e.npy, row 1, column dim 1: non-finite value NaN");
        t.embeddings = Matrix::new(2, 3, vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        let err = t.validate(Some(Path::new("e.npy"))).unwrap_err().to_string();
        assert!(err.starts_with("e.npy, row 0: zero-norm embedding"), "{err}");
    }

    #[test]
    fn row_count_mismatch_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let t = table();
        let (npy, csv) = (dir.path().join("e.npy"), dir.path().join("m.csv"));
        save_table(&t, &npy, None).unwrap();
        std::fs::write(&csv, "model,language\nA,en\n").unwrap();
        let err = load_table(&npy, Some(&csv)).unwrap_err().to_string();
        assert!(err.contains("row-count mismatch: the metadata has 1 data rows"), "{err}");
    }
}
