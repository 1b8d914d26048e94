//! Atomic output: write into a temporary file beside the target, then rename over it, so a failed
//! run never leaves a partial or half-overwritten file behind.

use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::TableError;

/// Writes `path` atomically: `write` fills a temporary file in the same directory, which is
/// flushed, synced and renamed onto `path` only when `write` succeeds.
pub fn write_atomic<F>(path: &Path, write: F) -> Result<(), TableError>
where
    F: FnOnce(&mut (dyn Write + Send)) -> std::io::Result<()>,
{
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".culturelens-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| TableError::io(path, e))?;
    {
        let mut out = BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        write(&mut out).map_err(|e| TableError::io(path, e))?;
        out.flush().map_err(|e| TableError::io(path, e))?;
    }
    tmp.as_file().sync_all().map_err(|e| TableError::io(path, e))?;
    tmp.persist(path).map_err(|e| TableError::io(path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_leaves_existing_file_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        std::fs::write(&path, "old").unwrap();
        let err = write_atomic(&path, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("boom"))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "temporary file must be removed");
    }

    #[test]
    fn successful_write_replaces_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }
}
