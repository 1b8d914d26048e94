//! The folder a path sits in: where an output's temporary file or folder is made (beside it, so
//! the final rename stays on one file system), and what names inside a manifest are relative to.

use std::path::{Path, PathBuf};

/// The folder `path` sits in: its parent, or `.` for a bare name (`out.csv`) or a path without
/// a parent (`/`).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// `name` relative to the folder of the file `file` (the image paths of a manifest are relative to
/// the manifest): joined to `file`'s parent as it is written, so a bare file's siblings stay bare
/// names (`m.csv`, `a.png` → `a.png`; `runs/m.csv`, `a.png` → `runs/a.png`).
pub fn sibling(file: &Path, name: impl AsRef<Path>) -> PathBuf {
    file.parent().unwrap_or_else(|| parent_dir(file)).join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_of_paths() {
        assert_eq!(parent_dir(Path::new("runs/sos.csv")), Path::new("runs"));
        assert_eq!(parent_dir(Path::new("sos.csv")), Path::new("."));
        assert_eq!(parent_dir(Path::new("/")), Path::new("."));
        assert_eq!(parent_dir(Path::new("/sos.csv")), Path::new("/"));
        assert_eq!(sibling(Path::new("runs/m.csv"), "a/b.png"), PathBuf::from("runs/a/b.png"));
        assert_eq!(sibling(Path::new("m.csv"), "b.png"), PathBuf::from("b.png"));
        assert_eq!(sibling(Path::new("runs/m.csv"), "/abs.png"), PathBuf::from("/abs.png"));
        assert_eq!(sibling(Path::new(""), "b.png"), PathBuf::from("./b.png"));
    }
}
