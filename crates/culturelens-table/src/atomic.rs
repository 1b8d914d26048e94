//! Atomic output of tables: `culturelens-files`' [`culturelens_files::write_atomic`] (a temporary
//! file beside the target, renamed over it only when complete, with the user's umask), its errors
//! as [`TableError`]s naming the file.

use std::io::Write;
use std::path::Path;

use crate::error::TableError;

/// Writes `path` atomically ([`culturelens_files::write_atomic`]); a failure is a
/// [`TableError::Io`] at `path`.
pub fn write_atomic<F>(path: &Path, write: F) -> Result<(), TableError>
where
    F: FnOnce(&mut (dyn Write + Send)) -> std::io::Result<()>,
{
    culturelens_files::write_atomic(path, write).map_err(|e| TableError::io(path, e))
}
