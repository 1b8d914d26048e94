//! Errors of the prompt registry: download and checksum failures name the file, the expected and
//! the actual hash; parse failures name the file, line (or record) and column, so a user can act.

use std::path::PathBuf;

use culturelens_table::{Location, TableError};

/// Every way fetching, parsing or exporting a prompt set can fail.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    /// The bytes of an upstream file do not hash to the pinned sha256.
    #[error(
        "checksum mismatch for {file} (from {origin}): expected sha256 {expected}, got {actual}; \
         the file was not used{hint}"
    )]
    Checksum { file: String, origin: String, expected: String, actual: String, hint: &'static str },

    /// `--mirror` / `CULTURELENS_DATA_MIRROR` points at a folder without this file.
    #[error(
        "the data mirror {} has no {file} (expected at {}); a mirror holds the upstream files at \
         the same relative paths as the download cache",
        mirror.display(),
        path.display()
    )]
    MissingMirrorFile { mirror: PathBuf, file: String, path: PathBuf },

    /// The HTTP request failed, returned an error status or ended early.
    #[error(
        "download of {file} from {url} failed: {message} (offline: read the upstream files from a local \
         folder with --mirror DIR or $CULTURELENS_DATA_MIRROR, laid out as `culturelens prompts show NAME` lists)"
    )]
    Download { file: String, url: String, message: String },

    /// A row, record or cell of an input file is not what the set's format requires.
    #[error("{at}: {message}")]
    Malformed { at: Location, message: String },

    /// A request that cannot be served (unknown set or language, option for another set).
    #[error("{0}")]
    Invalid(String),

    #[error(transparent)]
    Table(#[from] TableError),
}

impl PromptError {
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }

    pub(crate) fn malformed(at: Location, message: impl Into<String>) -> Self {
        Self::Malformed { at, message: message.into() }
    }
}
