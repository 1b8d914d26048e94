//! Errors that name the file, row and column a problem was found at, so a user can fix the input.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in an input a problem sits. Rows are 0-based data rows (the CSV header is not a row; CSV
/// errors also give the 1-based line number), columns are names for metadata and indices for
/// embedding dimensions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    pub file: Option<PathBuf>,
    pub row: Option<usize>,
    pub line: Option<u64>,
    pub column: Option<String>,
}

impl Location {
    pub fn file(path: &Path) -> Self {
        Self { file: Some(path.to_path_buf()), ..Self::default() }
    }

    pub fn row(mut self, row: usize) -> Self {
        self.row = Some(row);
        self
    }

    pub fn line(mut self, line: u64) -> Self {
        self.line = Some(line);
        self
    }

    pub fn column(mut self, column: impl Into<String>) -> Self {
        self.column = Some(column.into());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(file) = &self.file {
            parts.push(file.display().to_string());
        }
        match (self.line, self.row) {
            (Some(line), Some(row)) => parts.push(format!("line {line} (data row {row})")),
            (Some(line), None) => parts.push(format!("line {line}")),
            (None, Some(row)) => parts.push(format!("row {row}")),
            (None, None) => {}
        }
        if let Some(column) = &self.column {
            parts.push(format!("column {column}"));
        }
        if parts.is_empty() { write!(f, "<input>") } else { write!(f, "{}", parts.join(", ")) }
    }
}

/// Every way reading, validating or writing a table can fail.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{at}: {source}")]
    Io { at: Location, source: std::io::Error },
    #[error("{at}: {message}")]
    Format { at: Location, message: String },
    #[error("{at}: {message}")]
    Invalid { at: Location, message: String },
}

impl TableError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io { at: Location::file(path), source }
    }

    pub fn format(at: Location, message: impl Into<String>) -> Self {
        Self::Format { at, message: message.into() }
    }

    pub fn invalid(at: Location, message: impl Into<String>) -> Self {
        Self::Invalid { at, message: message.into() }
    }

    /// The location the error points at.
    pub fn location(&self) -> &Location {
        match self {
            Self::Io { at, .. } | Self::Format { at, .. } | Self::Invalid { at, .. } => at,
        }
    }
}
