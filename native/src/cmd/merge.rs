//! `culturelens merge`: joins the outputs of the N runs of a `--shard K/N` job into exactly what
//! one run writes (same rows, same order, byte-identical files), after checking through their
//! part files (`crate::work::part`) that they are one whole run.
//!
//! Two forms, told apart by the parts:
//! - tables (`embed`): `merge --out OUT.npy|OUT.parquet PART…`, each PART an `.npy` (its
//!   metadata CSV comes along) or `.parquet` with its `PART.part.json`;
//! - image folders (`generate`): `merge --out DIR PART_DIR…`, each PART_DIR a `manifest.csv`
//!   with an `image` column (paths relative to the folder), the images it lists and `part.json`.
//!   DIR must not exist; it gets the manifests' rows in shard order and the images (hard-linked
//!   where the file system allows, else copied) under the same relative paths.
//!
//! Every part is read and checked before anything is written, and the output is written
//! atomically (temp file or folder + rename), so a refused merge leaves no output. Like every
//! command that writes results, merge then writes its provenance manifest beside them
//! (`OUT.provenance.json`, or `DIR/provenance.json`, as the single run it stands for does),
//! holding each part's digest and the part's own manifest.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_files::write_dir_atomic;
use culturelens_table::{EmbeddingTable, Matrix, Metadata, load_table, read_metadata_csv, save_table};

use crate::output::meta_out_path;
use crate::provenance::{self, Provenance};
use crate::work::part::{DIR_PART, Part, order_parts};

/// The manifest of an image folder.
const MANIFEST: &str = "manifest.csv";

const ABOUT: &str = "Joins the outputs of a `--shard K/N` job into exactly what one run writes: \
the same rows in the same order, byte-identical files.

Tables (embed): culturelens merge --out OUT.npy|OUT.parquet PART... where each PART is an .npy \
(its metadata CSV comes along) or .parquet table written with --shard, beside its PART.part.json.

Image folders (generate): culturelens merge --out DIR PART_DIR... where each PART_DIR holds a \
manifest.csv (column `image`: paths relative to the folder), the images and part.json. DIR must \
not exist yet.

The parts may be given in any order. The merge is refused, with no output, when a shard is \
missing or given twice, when the parts come from another model, precision, input (prompt set or \
image list) or shard count, or when a part's files changed after its shard finished.";

/// Arguments of `culturelens merge`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Join the outputs of `--shard K/N` runs into what one run writes", long_about = ABOUT)]
pub struct MergeArgs {
    /// Output: `.npy` (metadata CSV in --meta-out, default OUT with `.csv`) or `.parquet` for
    /// table parts; a folder that does not exist yet for image-folder parts.
    #[arg(long, value_name = "FILE|DIR")]
    pub out: PathBuf,
    /// Metadata CSV of an `.npy` output (default: the output path with extension `.csv`).
    #[arg(long, value_name = "FILE")]
    pub meta_out: Option<PathBuf>,
    /// The shards' outputs, in any order: tables with their `.part.json`, or image folders.
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<PathBuf>,
}

pub fn run(args: &MergeArgs) -> Result<()> {
    let folders = args.parts.iter().filter(|p| p.is_dir()).count();
    match folders {
        0 => merge_tables(args),
        n if n == args.parts.len() => {
            if args.meta_out.is_some() {
                bail!("--meta-out is for table outputs; an image folder's manifest is DIR/{MANIFEST}");
            }
            merge_folders(args)
        }
        _ => bail!("give either tables or image folders to merge, not both"),
    }
}

fn merge_tables(args: &MergeArgs) -> Result<()> {
    // Read and check every part: its part file, its files' checksums, its table.
    let mut parts = Vec::new();
    for path in &args.parts {
        let part_path = Part::path_for(path);
        let (part, shard) = Part::read(&part_path)?;
        let table_path = part.checked_file(&part_path, "table")?;
        if table_path.canonicalize().ok() != path.canonicalize().ok() {
            bail!("{}: describes {}, not {}", part_path.display(), table_path.display(), path.display());
        }
        let meta =
            part.files.contains_key("meta").then(|| part.checked_file(&part_path, "meta")).transpose()?;
        let table = load_table(path, meta.as_deref())?;
        if table.len() != part.rows {
            bail!(
                "{}: {} rows, but {} records {}",
                path.display(),
                table.len(),
                part_path.display(),
                part.rows
            );
        }
        parts.push((path.clone(), part, shard, table));
    }
    let ordered = order_parts(parts)?;

    // Join: rows in shard order; every part has the same width and metadata columns.
    let (first_path, _, first) = &ordered[0];
    let mut data = Vec::new();
    let mut columns: Vec<(String, Vec<String>)> =
        first.meta.names().iter().map(|n| (n.clone(), Vec::new())).collect();
    for (path, _, table) in &ordered {
        if table.dim() != first.dim() || table.meta.names() != first.meta.names() {
            bail!(
                "mismatched shards: {} has {} dimensions and columns [{}] but {} has {} and [{}]",
                first_path.display(),
                first.dim(),
                first.meta.names().join(", "),
                path.display(),
                table.dim(),
                table.meta.names().join(", ")
            );
        }
        data.extend_from_slice(table.embeddings.data());
        for ((_, values), (_, part_values)) in columns.iter_mut().zip(table.meta.iter()) {
            values.extend_from_slice(part_values);
        }
    }
    let rows = data.len() / first.dim();
    let meta =
        if columns.is_empty() { Metadata::empty(rows) } else { Metadata::from_columns(None, columns)? };
    let table = EmbeddingTable::new(Matrix::new(rows, first.dim(), data), meta);

    // Write, atomically.
    save_table(&table, &args.out, meta_out_path(&args.out, args.meta_out.as_deref()).as_deref())?;
    let mut manifest = Provenance::new("merge", args);
    for (path, part, _) in &ordered {
        // The table's sha256 was computed and checked against its part file above.
        manifest.input_hashed(path, &part.files["table"].sha256).part(&provenance::beside(path))?;
    }
    manifest.write_beside(&args.out)?;
    eprintln!("merged {} shards ({rows} rows) into {}", ordered.len(), args.out.display());
    Ok(())
}

/// An image path of a manifest: relative, inside the folder (no `..`, no root).
fn checked_image_path(value: &str, meta: &Metadata, row: usize) -> Result<PathBuf> {
    let path = Path::new(value);
    let inside = path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside || value.is_empty() {
        bail!("{}: `{value}` is not a path inside the folder", meta.cell(row, "image"));
    }
    Ok(path.to_path_buf())
}

fn merge_folders(args: &MergeArgs) -> Result<()> {
    let (out, dirs) = (args.out.as_path(), args.parts.as_slice());
    if out.exists() {
        bail!("{} already exists; merge into a new folder", out.display());
    }
    // Read and check every part: part file, manifest checksum, image paths and files.
    let mut parts = Vec::new();
    for dir in dirs {
        let part_path = dir.join(DIR_PART);
        let (part, shard) = Part::read(&part_path)?;
        let manifest = part.checked_file(&part_path, "manifest")?;
        if manifest != dir.join(MANIFEST) {
            bail!("{}: the manifest must be {MANIFEST} in the folder", part_path.display());
        }
        let meta = read_metadata_csv(&manifest)?;
        if meta.n_rows() != part.rows {
            bail!(
                "{}: {} rows, but {} records {}",
                manifest.display(),
                meta.n_rows(),
                part_path.display(),
                part.rows
            );
        }
        let mut images = Vec::new();
        for (row, value) in meta.require_nonempty_column("image")?.iter().enumerate() {
            let rel = checked_image_path(value, &meta, row)?;
            if !dir.join(&rel).is_file() {
                bail!("{}: image {} is missing", meta.cell(row, "image"), dir.join(&rel).display());
            }
            images.push(rel);
        }
        parts.push((dir.clone(), part, shard, (meta, images)));
    }
    let ordered = order_parts(parts)?;

    // Join the manifests; an image path given twice would make two rows one file.
    let (first_dir, _, (first, _)) = &ordered[0];
    let mut seen: BTreeMap<&Path, &Path> = BTreeMap::new();
    let mut columns: Vec<(String, Vec<String>)> =
        first.names().iter().map(|n| (n.clone(), Vec::new())).collect();
    for (dir, _, (meta, images)) in &ordered {
        if meta.names() != first.names() {
            bail!(
                "mismatched shards: {} has columns [{}] but {} has [{}]",
                first_dir.join(MANIFEST).display(),
                first.names().join(", "),
                dir.join(MANIFEST).display(),
                meta.names().join(", ")
            );
        }
        for image in images {
            if let Some(other) = seen.insert(image, dir) {
                bail!("duplicated image {}: in {} and {}", image.display(), other.display(), dir.display());
            }
        }
        for ((_, values), (_, part_values)) in columns.iter_mut().zip(meta.iter()) {
            values.extend_from_slice(part_values);
        }
    }
    let meta = Metadata::from_columns(None, columns)?;

    // Write into a folder that becomes OUT when complete.
    write_dir_atomic(out, |tmp| -> Result<()> {
        for (dir, _, (_, images)) in &ordered {
            for image in images {
                let to = tmp.join(image);
                if let Some(sub) = to.parent() {
                    std::fs::create_dir_all(sub)
                        .with_context(|| format!("cannot create {}", sub.display()))?;
                }
                let from = dir.join(image);
                if std::fs::hard_link(&from, &to).is_err() {
                    std::fs::copy(&from, &to)
                        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
                }
            }
        }
        culturelens_table::write_atomic(&tmp.join(MANIFEST), |w| {
            culturelens_table::write_metadata_csv(w, &meta)
        })?;
        Ok(())
    })?;
    // The merge's own manifest: the parts (their files' digests and their own manifests).
    let mut manifest = Provenance::new("merge", args);
    for (dir, _, _) in &ordered {
        manifest.input(dir)?.part(&dir.join(provenance::DIR_MANIFEST))?;
    }
    manifest.write_for_dir(out)?;
    eprintln!("merged {} shards ({} images) into {}", ordered.len(), meta.n_rows(), out.display());
    Ok(())
}
