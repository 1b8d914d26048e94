//! Atomic outputs: a file or a folder is built beside its target and renamed into place only when
//! complete, so a failed or killed run never leaves a partial or half-replaced output behind.
//!
//! The temporary file or folder is made with the mode `std::fs::write` and `create_dir_all` would
//! give (`0666` and `0777`, less the user's umask, which the kernel applies at creation), so the
//! renamed output is as readable as any other file the user makes, not owner-only like a
//! temporary file.

use std::io::{BufWriter, Write};
use std::path::Path;

use tempfile::{Builder, TempDir};

use crate::error::Error;
use crate::paths::parent_dir;

/// A temporary file or folder beside an output, created with mode `mode` less the umask.
fn staging(prefix: &str, #[cfg_attr(not(unix), allow(unused))] mode: u32) -> Builder<'_, 'static> {
    let mut builder = Builder::new();
    builder.prefix(prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    builder
}

/// Creates the folder `dir` and its missing parents, the one rule of every output folder: a
/// command creates the folders its outputs go into (as `mkdir -p` would), so `--out runs/a/x.csv`
/// works in an empty directory. The error names `dir`.
pub fn create_dir_all(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::new("create the folder", dir, e))
}

/// Writes `path` atomically: `write` fills a temporary file in the same folder (created with its
/// missing parents, [`create_dir_all`]), which is flushed, synced and renamed onto `path` only
/// when `write` succeeds. The file gets the user's umask (`0666 & !umask`). Errors are those of
/// the file system, never naming the temporary file; the caller names `path`.
pub fn write_atomic<F>(path: &Path, write: F) -> std::io::Result<()>
where
    F: FnOnce(&mut (dyn Write + Send)) -> std::io::Result<()>,
{
    let parent = parent_dir(path);
    create_dir_all(parent).map_err(|e| std::io::Error::new(e.source.kind(), format!("{e}: {}", e.source)))?;
    let mut tmp =
        staging(".culturelens-", 0o666).suffix(".tmp").tempfile_in(parent).map_err(without_temporary_path)?;
    {
        let mut out = BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        write(&mut out)?;
        out.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| without_temporary_path(e.error))?;
    Ok(())
}

/// `tempfile`'s I/O error without the ` at path "…/.culturelens-XXXX.tmp"` it appends: the user
/// named the output, not the temporary file beside it, and the caller names the output.
fn without_temporary_path(e: std::io::Error) -> std::io::Error {
    let text = e.to_string();
    match text.rfind(" at path ") {
        Some(at) if e.get_ref().is_some() => std::io::Error::new(e.kind(), &text[..at]),
        _ => e,
    }
}

/// Builds the folder `out` atomically: `fill` writes its content into an empty staging folder
/// beside `out` (the parent is created if needed), which then replaces `out` (an existing file or
/// folder there is moved aside and removed only once the new one is in place). If `fill` fails,
/// the staging folder is removed and `out` is left as it was. The folder gets the user's umask
/// (`0777 & !umask`). Returns what `fill` returns.
pub fn write_dir_atomic<T, E>(out: &Path, fill: impl FnOnce(&Path) -> Result<T, E>) -> Result<T, E>
where
    E: From<Error>,
{
    let parent = parent_dir(out);
    create_dir_all(parent)?;
    let staged = staging(".culturelens-", 0o777)
        .tempdir_in(parent)
        .map_err(|e| Error::new("create a folder in", parent, e))?;
    let value = fill(staged.path())?;
    swap(staged, out, parent)?;
    Ok(value)
}

/// Renames the finished staging folder to `out`, moving an existing `out` aside first and
/// putting it back if the rename fails.
fn swap(staged: TempDir, out: &Path, parent: &Path) -> Result<(), Error> {
    let aside = if std::fs::symlink_metadata(out).is_ok() {
        let old = staging(".culturelens-old-", 0o700)
            .tempdir_in(parent)
            .map_err(|e| Error::new("create a folder in", parent, e))?;
        let previous = old.path().join("previous");
        std::fs::rename(out, &previous).map_err(|e| Error::new("replace", out, e))?;
        Some((old, previous))
    } else {
        None
    };
    if let Err(e) = std::fs::rename(staged.path(), out) {
        if let Some((_, previous)) = &aside {
            let _ = std::fs::rename(previous, out);
        }
        return Err(Error::new("create", out, e));
    }
    // The staging folder is `out` now: nothing is left to remove.
    let _ = staged.keep();
    // Dropping the aside folder removes the old output.
    drop(aside);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn failed_write_leaves_existing_file_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        std::fs::write(&path, "old").unwrap();
        let err = write_atomic(&path, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("boom"))
        });
        assert_eq!(err.unwrap_err().to_string(), "boom");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(names(dir.path()), ["out.csv"], "the temporary file must be removed");
    }

    #[test]
    fn successful_write_replaces_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(names(dir.path()), ["out.csv"]);
    }

    #[test]
    fn a_folder_appears_whole_and_replaces_the_old_one_only_on_success() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("sub/site");
        let fill = |content: &'static str| {
            move |staging: &Path| -> Result<usize, Error> {
                std::fs::create_dir_all(staging.join("a")).unwrap();
                std::fs::write(staging.join("a/x.txt"), content).unwrap();
                Ok(content.len())
            }
        };
        // A new folder, its parent created.
        assert_eq!(write_dir_atomic(&out, fill("first")).unwrap(), 5);
        assert_eq!(std::fs::read_to_string(out.join("a/x.txt")).unwrap(), "first");
        // A failure leaves the old folder as it was and nothing beside it.
        let failed: Result<(), Box<dyn std::error::Error>> = write_dir_atomic(&out, |staging| {
            std::fs::write(staging.join("partial"), "p")?;
            Err("boom".into())
        });
        assert_eq!(failed.unwrap_err().to_string(), "boom");
        assert_eq!(names(&out), ["a"]);
        assert_eq!(std::fs::read_to_string(out.join("a/x.txt")).unwrap(), "first");
        assert_eq!(names(&dir.path().join("sub")), ["site"]);
        // Success replaces it (old files gone) and leaves nothing beside it.
        std::fs::write(out.join("stale.txt"), "s").unwrap();
        write_dir_atomic(&out, fill("second")).unwrap();
        assert_eq!(names(&out), ["a"]);
        assert_eq!(std::fs::read_to_string(out.join("a/x.txt")).unwrap(), "second");
        assert_eq!(names(&dir.path().join("sub")), ["site"]);
        // The kit's own errors name the path.
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "f").unwrap();
        let err = write_dir_atomic(&blocked.join("inside"), fill("x")).unwrap_err();
        assert_eq!(err.to_string(), format!("cannot create the folder {}", blocked.display()));
    }

    /// A file's missing folders are created; a failure names the folder or the file, never the
    /// temporary file beside it.
    #[test]
    fn a_file_gets_its_folders_and_errors_name_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs/a/out.csv");
        write_atomic(&path, |w| w.write_all(b"x")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x");
        assert_eq!(names(&dir.path().join("runs/a")), ["out.csv"]);
        // A file where a folder should be.
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "f").unwrap();
        let err = write_atomic(&blocked.join("out.csv"), |w| w.write_all(b"x")).unwrap_err().to_string();
        assert!(err.starts_with(&format!("cannot create the folder {}: ", blocked.display())), "{err}");
        // A folder where the file should be: the rename fails.
        let taken = dir.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        std::fs::write(taken.join("inside"), "i").unwrap();
        let err = write_atomic(&taken, |w| w.write_all(b"x")).unwrap_err().to_string();
        assert!(!err.contains(".culturelens-") && !err.contains(".tmp"), "{err}");
        assert_eq!(names(dir.path()), ["file", "runs", "taken"], "no temporary file is left");
    }

    #[test]
    fn temporary_paths_are_cut_from_tempfile_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = staging(".culturelens-", 0o666).tempfile_in(&missing).unwrap_err();
        assert!(err.to_string().contains(" at path "), "tempfile's own text: {err}");
        let cut = without_temporary_path(err);
        assert_eq!(cut.kind(), std::io::ErrorKind::NotFound);
        assert!(!cut.to_string().contains("at path"), "{cut}");
    }

    /// Outputs take the umask as `std::fs::write` would: 022 gives 0644 files and 0755 folders,
    /// 077 gives 0600 and 0700. (The only test of this crate that sets the process umask.)
    #[cfg(unix)]
    #[test]
    fn outputs_take_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        for (umask, file, folder) in [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700), (0o002, 0o664, 0o775)] {
            // SAFETY: umask only swaps the process's creation mask; the old one is put back below.
            let saved = unsafe { libc::umask(umask) };
            let path = dir.path().join(format!("f{umask:o}.csv"));
            write_atomic(&path, |w| w.write_all(b"x")).unwrap();
            let out = dir.path().join(format!("d{umask:o}"));
            write_dir_atomic(&out, |staging| {
                std::fs::write(staging.join("g.txt"), "g").map_err(|e| Error::new("write", staging, e))
            })
            .unwrap();
            // SAFETY: as above.
            unsafe { libc::umask(saved) };
            assert_eq!(mode(&path), file, "file under umask {umask:03o}");
            assert_eq!(mode(&out), folder, "folder under umask {umask:03o}");
            assert_eq!(mode(&out.join("g.txt")), file);
        }
    }
}
