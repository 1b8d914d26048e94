//! The kit's one error: what it could not do, to which path, and the I/O error underneath.

use std::path::{Path, PathBuf};

/// An I/O failure of the kit: "cannot `action` `path`", with the I/O error as its source (so
/// `anyhow`'s `{:#}` prints "cannot create out/x: Permission denied (os error 13)").
#[derive(Debug)]
pub struct Error {
    /// What failed, as a verb phrase: `read`, `create`, `replace`.
    pub action: &'static str,
    /// The path it failed on.
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl Error {
    pub fn new(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self { action, path: path.to_owned(), source }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot {} {}", self.action, self.path.display())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}
