//! Bundle errors: every one names the bundle file and, where it applies, the row and column.

use std::fmt;

/// A bundle that cannot be read: which file, where in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleError {
    /// Path of the file inside the bundle (e.g. `meta.csv`).
    pub file: String,
    /// 0-based data row, when the problem is in one row.
    pub row: Option<usize>,
    /// Column name (or `dim k` for embeddings), when the problem is in one column.
    pub column: Option<String>,
    pub message: String,
}

impl BundleError {
    pub fn new(file: impl Into<String>, message: impl Into<String>) -> Self {
        Self { file: file.into(), row: None, column: None, message: message.into() }
    }

    pub fn row(mut self, row: usize) -> Self {
        self.row = Some(row);
        self
    }

    pub fn column(mut self, column: impl Into<String>) -> Self {
        self.column = Some(column.into());
        self
    }
}

impl fmt::Display for BundleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bundle file {}", self.file)?;
        if let Some(row) = self.row {
            write!(f, ", row {row}")?;
        }
        if let Some(column) = &self.column {
            write!(f, ", column {column}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for BundleError {}

/// A result table of the bundle that does not read as its schema says (the line is dropped: rows
/// are what the app shows).
impl From<culturelens_results::SchemaError> for BundleError {
    fn from(e: culturelens_results::SchemaError) -> Self {
        BundleError { file: e.file, row: e.row, column: e.column, message: e.message }
    }
}
