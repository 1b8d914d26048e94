//! `manifest.json`: what a bundle holds (shape, dtype, models, languages, cultures, embedding
//! model, provenance) and the size and SHA-256 of every other file in it.

use std::ops::Range;

use culturelens_files::sha256_hex;
use serde::{Deserialize, Serialize};

use crate::error::BundleError;

/// Value of the manifest's `format` field.
pub const FORMAT: &str = "culturelens-bundle";
/// The bundle format version this code reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// File name of the manifest at the bundle root.
pub const MANIFEST: &str = "manifest.json";
/// Metadata columns every bundle carries (SoS needs them).
pub const REQUIRED_COLUMNS: [&str; 3] = ["model", "language", "culture"];
/// Optional metadata column with each row's thumbnail path inside the bundle.
pub const THUMBNAIL_COLUMN: &str = "thumbnail";

/// Element type of the raw little-endian embeddings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
        }
    }
}

/// Size of the pieces the writer hashes one by one in files larger than one piece
/// (`culturelens bundle --piece-bytes` sets another).
pub const PIECE_BYTES: u64 = 16 * 1024 * 1024;
/// Smallest piece size a manifest may list (bounds the number of digests per byte).
pub const MIN_PIECE_BYTES: u64 = 64 * 1024;

/// One file of the bundle: path relative to the bundle root, size in bytes, SHA-256 (hex), and for
/// a file larger than one piece the SHA-256 of each piece.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub bytes: u64,
    /// SHA-256 of the whole file (what `sha256sum` prints).
    pub sha256: String,
    /// The file's pieces and their SHA-256s, which readers check instead of the whole file's: a
    /// browser hashes each piece as soon as it has arrived, while the rest downloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pieces: Option<Pieces>,
}

/// The SHA-256s of a file cut into consecutive pieces of `bytes` bytes (the last one shorter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pieces {
    /// Size of every piece but the last (at least [`MIN_PIECE_BYTES`]).
    pub bytes: u64,
    /// Lower-case hex SHA-256 of each piece, in file order: `ceil(file bytes / bytes)` of them.
    pub sha256: Vec<String>,
}

impl FileEntry {
    /// The entry of file `path` holding `data`: its size and SHA-256, and the SHA-256 of each
    /// `piece_bytes` piece when the file is larger than one piece.
    pub fn new(path: &str, data: &[u8], piece_bytes: u64) -> FileEntry {
        let pieces = (data.len() as u64 > piece_bytes).then(|| Pieces {
            bytes: piece_bytes,
            sha256: data.chunks(piece_bytes as usize).map(sha256_hex).collect(),
        });
        FileEntry { path: path.to_string(), bytes: data.len() as u64, sha256: sha256_hex(data), pieces }
    }

    /// What a reader hashes and compares, in file order: each listed piece's byte range and
    /// SHA-256, or the whole file as one piece when no pieces are listed. Every byte of the
    /// file lies in exactly one range.
    pub fn digests(&self) -> Vec<(Range<u64>, &str)> {
        (0..self.digest_count()).filter_map(|i| self.digest(i)).collect()
    }

    /// How many digests [`FileEntry::digests`] lists.
    pub fn digest_count(&self) -> usize {
        self.pieces.as_ref().map_or(1, |p| p.sha256.len())
    }

    /// Entry `i` of [`FileEntry::digests`], without listing the others.
    pub fn digest(&self, i: usize) -> Option<(Range<u64>, &str)> {
        match &self.pieces {
            Some(p) => {
                let start = i as u64 * p.bytes;
                p.sha256.get(i).map(|h| (start..(start + p.bytes).min(self.bytes), h.as_str()))
            }
            None => (i == 0).then_some((0..self.bytes, self.sha256.as_str())),
        }
    }
}

/// The manifest, field by field as in `manifest.json` (see `web/BUNDLE.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`FORMAT_VERSION`] for bundles this code writes.
    pub format_version: u32,
    /// Human-readable title shown by the app.
    pub title: String,
    /// `true` for synthetic data (the built-in demo); the app labels it "synthetic demo data".
    pub synthetic: bool,
    /// The image/text encoder that produced the embeddings.
    pub embedding_model: String,
    /// Where the data comes from (free text: generator, source table, command line).
    pub provenance: String,
    /// Number of embeddings (rows of the metadata CSV).
    pub rows: usize,
    /// Embedding dimension.
    pub dim: usize,
    pub dtype: DType,
    /// Path of the raw embeddings file (`rows × dim` values of `dtype`, row-major, little-endian).
    pub embeddings: String,
    /// Path of the metadata CSV (header row, one data row per embedding).
    pub metadata: String,
    /// Distinct values of the metadata columns `model`, `language`, `culture`, sorted.
    pub models: Vec<String>,
    pub languages: Vec<String>,
    pub cultures: Vec<String>,
    /// Every file of the bundle except the manifest itself.
    pub files: Vec<FileEntry>,
    /// Result tables the bundle carries (`results/…`, listed in `files`); absent when none.
    #[serde(default, skip_serializing_if = "Results::is_empty")]
    pub results: Results,
}

impl Manifest {
    /// Parses and validates `manifest.json`.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, BundleError> {
        let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| {
            BundleError::new(
                MANIFEST,
                format!("not a culturelens bundle manifest (invalid JSON or missing field): {e}"),
            )
        })?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Checks format, version, shape and that the embeddings and metadata files are listed with
    /// consistent sizes and safe relative paths.
    pub fn validate(&self) -> Result<(), BundleError> {
        let err = |m: String| Err(BundleError::new(MANIFEST, m));
        if self.format != FORMAT {
            return err(format!("format is `{}`, expected `{FORMAT}`", self.format));
        }
        if self.format_version != FORMAT_VERSION {
            return err(format!(
                "format_version {} is not supported (this culturelens reads version {FORMAT_VERSION})",
                self.format_version
            ));
        }
        if self.rows == 0 || self.dim == 0 {
            return err(format!("rows ({}) and dim ({}) must be positive", self.rows, self.dim));
        }
        for (i, f) in self.files.iter().enumerate() {
            if !is_safe_path(&f.path) {
                return err(format!("files[{i}]: path `{}` must be relative, without `..` or `\\`", f.path));
            }
            if !is_sha256_hex(&f.sha256) {
                return err(format!("files[{i}] ({}): sha256 must be 64 hex digits", f.path));
            }
            if let Some(p) = &f.pieces {
                if p.bytes < MIN_PIECE_BYTES {
                    return err(format!(
                        "files[{i}] ({}): pieces.bytes is {}, less than the {MIN_PIECE_BYTES}-byte minimum",
                        f.path, p.bytes
                    ));
                }
                let count = f.bytes.div_ceil(p.bytes);
                if p.sha256.len() as u64 != count {
                    return err(format!(
                        "files[{i}] ({}): pieces.sha256 lists {} digests, but {} bytes in {}-byte pieces make {count}",
                        f.path,
                        p.sha256.len(),
                        f.bytes,
                        p.bytes
                    ));
                }
                if let Some(k) = p.sha256.iter().position(|h| !is_sha256_hex(h)) {
                    return err(format!("files[{i}] ({}): pieces.sha256[{k}] must be 64 hex digits", f.path));
                }
            }
            if f.path == MANIFEST || self.files[..i].iter().any(|g| g.path == f.path) {
                return err(format!("files[{i}]: `{}` is listed twice", f.path));
            }
        }
        let expected = (self.rows as u64)
            .checked_mul(self.dim as u64)
            .and_then(|v| v.checked_mul(self.dtype.size() as u64))
            .ok_or_else(|| BundleError::new(MANIFEST, "rows × dim overflows"))?;
        let emb = self.entry(&self.embeddings)?;
        if emb.bytes != expected {
            return err(format!(
                "embeddings `{}` has {} bytes but rows × dim × {} = {expected}",
                emb.path,
                emb.bytes,
                self.dtype.size()
            ));
        }
        self.entry(&self.metadata)?;
        self.results.validate(self)
    }

    /// The file entry for `path`, or an error saying it is not listed.
    pub fn entry(&self, path: &str) -> Result<&FileEntry, BundleError> {
        self.files
            .iter()
            .find(|f| f.path == path)
            .ok_or_else(|| BundleError::new(MANIFEST, format!("`{path}` is not listed in `files`")))
    }

    /// Total size of all files (the download size, without the manifest).
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_safe_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains(':')
        && path.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Largest result file a reader accepts (each); a manifest listing a bigger one is rejected
/// before anything is downloaded.
pub const MAX_RESULT_BYTES: u64 = 64 * 1024 * 1024;

/// Paths (inside the bundle) of the result tables it carries; every one is listed in `files`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Results {
    /// `culturelens magbig --out` CSV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub magbig: Option<String>,
    /// The attribute table (`--attributes` A.csv) the MAGBIG table was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub magbig_attributes: Option<String>,
    /// `culturelens cultext2i --out` CSV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cultext2i: Option<String>,
    /// `culturelens cultext2i --report` JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cultext2i_report: Option<String>,
}

impl Results {
    pub fn is_empty(&self) -> bool {
        self.paths().next().is_none()
    }

    /// The listed result paths with their manifest field names.
    pub fn paths(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("magbig", &self.magbig),
            ("magbig_attributes", &self.magbig_attributes),
            ("cultext2i", &self.cultext2i),
            ("cultext2i_report", &self.cultext2i_report),
        ]
        .into_iter()
        .filter_map(|(name, p)| p.as_deref().map(|p| (name, p)))
    }

    /// Every result path is listed in `files` and within [`MAX_RESULT_BYTES`].
    pub fn validate(&self, manifest: &Manifest) -> Result<(), BundleError> {
        for (name, path) in self.paths() {
            let entry = manifest.entry(path)?;
            if entry.bytes > MAX_RESULT_BYTES {
                return Err(BundleError::new(
                    MANIFEST,
                    format!(
                        "results.{name} `{path}` is listed with {} bytes, more than the {MAX_RESULT_BYTES}-byte limit for a result table",
                        entry.bytes
                    ),
                ));
            }
        }
        Ok(())
    }
}
