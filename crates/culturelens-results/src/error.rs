//! The error of every result reader: which file, and where in it (0-based data row, its 1-based
//! line with the header on line 1, the column or JSON key), as `culturelens-table`'s `Location`
//! prints it, so a user can fix the file.

use std::fmt;

/// A result file that does not read as its schema says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// The file as the caller named it (a path, or a bundle's `results/…` entry).
    pub file: String,
    /// 0-based data row, when the problem is in one row.
    pub row: Option<usize>,
    /// 1-based line of that row in a CSV file.
    pub line: Option<u64>,
    /// Column name (or JSON key), when the problem is in one column.
    pub column: Option<String>,
    pub message: String,
}

impl SchemaError {
    pub fn new(file: impl Into<String>, message: impl Into<String>) -> Self {
        Self { file: file.into(), row: None, line: None, column: None, message: message.into() }
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

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        match (self.line, self.row) {
            (Some(line), Some(row)) => write!(f, ", line {line} (data row {row})")?,
            (Some(line), None) => write!(f, ", line {line}")?,
            (None, Some(row)) => write!(f, ", row {row}")?,
            (None, None) => {}
        }
        if let Some(column) = &self.column {
            write!(f, ", column {column}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for SchemaError {}
