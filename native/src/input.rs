//! Reading the inputs subcommands share: image lists (a folder or a manifest CSV), prompt files,
//! and bundle directories as embedding tables. Embedding tables themselves are read by
//! `culturelens_table::load_table`; every error names the file (and row and column).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_bundle::{BundleError, MANIFEST, read_bundle};
use culturelens_files::sibling;
use culturelens_table::{EmbeddingTable, Matrix, Metadata, read_metadata_csv};

/// File extensions an image folder is read for (case-insensitive).
pub const IMAGE_EXTENSIONS: [&str; 4] = ["png", "jpg", "jpeg", "webp"];

/// Image files, one per row, and the rows' metadata.
pub struct ImageList {
    pub paths: Vec<PathBuf>,
    pub meta: Metadata,
}

impl ImageList {
    /// The images of `source`: a folder (its [`IMAGE_EXTENSIONS`] files in sorted name order,
    /// metadata column `image` = the file names) or a manifest CSV (its `image` column, paths
    /// relative to the CSV's folder; every column is kept).
    pub fn read(source: &Path) -> Result<Self> {
        if source.is_dir() { Self::folder(source) } else { Self::manifest(source) }
    }

    fn folder(dir: &Path) -> Result<Self> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| {
                Path::new(name)
                    .extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| IMAGE_EXTENSIONS.contains(&x.to_ascii_lowercase().as_str()))
            })
            .collect();
        names.sort();
        if names.is_empty() {
            bail!("{}: no png/jpg/jpeg/webp files", dir.display());
        }
        let paths = names.iter().map(|n| dir.join(n)).collect();
        let meta = Metadata::from_columns(None, vec![("image".to_string(), names)])?;
        Ok(Self { paths, meta })
    }

    fn manifest(csv: &Path) -> Result<Self> {
        let meta = read_metadata_csv(csv)?;
        let column = meta.require_nonempty_column("image")?;
        let paths = column.iter().map(|p| sibling(csv, p)).collect();
        Ok(Self { paths, meta })
    }
}

/// The prompts of `path` and their metadata: a `.txt` file (one prompt per non-blank line,
/// metadata column `prompt`) or a CSV (the prompts in `column`; every column is kept).
pub fn read_prompts(path: &Path, column: &str) -> Result<(Vec<String>, Metadata)> {
    let is_txt = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("txt"));
    if is_txt {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let prompts: Vec<String> = text.lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect();
        let meta =
            Metadata::from_columns(Some(path.to_owned()), vec![("prompt".to_string(), prompts.clone())])?;
        Ok((prompts, meta))
    } else {
        let meta = read_metadata_csv(path)?;
        let prompts = meta.require_nonempty_column(column)?.to_vec();
        Ok((prompts, meta))
    }
}

/// Reads and validates a bundle directory (checksums included) as an embedding table.
pub fn load_bundle_table(dir: &Path) -> Result<EmbeddingTable> {
    if !dir.join(MANIFEST).is_file() {
        bail!("{} is not a bundle directory (no {MANIFEST})", dir.display());
    }
    let bundle = read_bundle(|path| {
        std::fs::read(dir.join(path)).map_err(|e| BundleError::new(path, format!("cannot read: {e}")))
    })
    .with_context(|| format!("invalid bundle {}", dir.display()))?;
    let (rows, dim) = (bundle.manifest.rows, bundle.manifest.dim);
    let meta = Metadata::from_columns(Some(dir.join(&bundle.manifest.metadata)), bundle.columns)?;
    Ok(EmbeddingTable::new(Matrix::new(rows, dim, bundle.embeddings), meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_folder_lists_its_images_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.PNG", "a.jpg", "c.webp", "notes.txt", "d.jpeg"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join("e.png")).unwrap();
        let list = ImageList::read(dir.path()).unwrap();
        let names = ["a.jpg", "b.PNG", "c.webp", "d.jpeg"];
        assert_eq!(list.paths, names.map(|n| dir.path().join(n)));
        assert_eq!(list.meta.column("image").unwrap(), names);
        let empty = tempfile::tempdir().unwrap();
        let err = ImageList::read(empty.path()).err().unwrap().to_string();
        assert!(err.ends_with(": no png/jpg/jpeg/webp files"), "{err}");
    }

    #[test]
    fn a_manifest_keeps_its_rows_and_resolves_paths_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("m.csv");
        std::fs::write(&csv, "image,language\nsub/z.png,de\na.png,fr\n").unwrap();
        let list = ImageList::read(&csv).unwrap();
        assert_eq!(list.paths, [dir.path().join("sub/z.png"), dir.path().join("a.png")]);
        assert_eq!(list.meta.column("language").unwrap(), ["de", "fr"]);
    }

    #[test]
    fn prompts_come_from_txt_lines_or_a_csv_column() {
        let dir = tempfile::tempdir().unwrap();
        let txt = dir.path().join("p.txt");
        std::fs::write(&txt, "a cat\n\n  \na dog\n").unwrap();
        let (prompts, meta) = read_prompts(&txt, "ignored").unwrap();
        assert_eq!(prompts, ["a cat", "a dog"]);
        assert_eq!(meta.column("prompt").unwrap(), ["a cat", "a dog"]);
        let csv = dir.path().join("p.csv");
        std::fs::write(&csv, "id,text\n1,ein Hund\n2,un chat\n").unwrap();
        let (prompts, meta) = read_prompts(&csv, "text").unwrap();
        assert_eq!(prompts, ["ein Hund", "un chat"]);
        assert_eq!(meta.column("id").unwrap(), ["1", "2"]);
    }
}
