//! `culturelens bundle` and `culturelens demo-bundle`: pack an embedding table (and, optionally,
//! thumbnails of its images) into a bundle for the browser app (`web/BUNDLE.md`); `sos
//! --bundle` reads them back through `crate::input`. The format itself lives in
//! `culturelens-bundle`, shared with the browser app.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_bundle::{
    BundleSpec, DType, MANIFEST, MIN_PIECE_BYTES, PIECE_BYTES, ResultFiles, THUMBNAIL_COLUMN, attach_results,
    build_bundle, demo_spec,
};
use culturelens_files::write_dir_atomic;
use culturelens_metrics::demo::demo_table;
use culturelens_table::{Metadata, load_table};

use crate::provenance::Provenance;

/// Longest side of a thumbnail, in pixels.
pub const THUMBNAIL_SIZE: u32 = 160;
/// JPEG quality of thumbnails.
const THUMBNAIL_QUALITY: u8 = 80;

/// Arguments of `culturelens bundle`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(
    about = "Pack an embedding table (and thumbnails of its images) into a bundle for the browser app",
    long_about = "Writes a culturelens bundle (format: web/BUNDLE.md): manifest.json with shape, dtype, models, \
languages, cultures, embedding model, provenance and the size and SHA-256 of every file; raw little-endian \
embeddings; meta.csv; with --images, JPEG thumbnails referenced by a `thumbnail` column; and, with --magbig / \
--cultext2i, those commands' result tables under results/ (checked to parse first). The directory \
is built next to --out and renamed into place, so a failed run leaves nothing behind; an existing bundle at \
--out is replaced."
)]
pub struct BundleArgs {
    /// Embeddings: N x d `.npy` (float32/float16) with --meta, or a `.parquet` table.
    #[arg(long, value_name = "FILE")]
    pub embeddings: PathBuf,
    /// Metadata CSV (columns model, language, culture required; `image` for --images).
    #[arg(long, value_name = "FILE")]
    pub meta: Option<PathBuf>,
    /// Folder the metadata's `image` column is relative to; thumbnails are made from these images.
    #[arg(long, value_name = "DIR")]
    pub images: Option<PathBuf>,
    /// Output bundle directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Element type of the stored embeddings (f16 halves the download; scores then use the f16 values).
    #[arg(long, value_enum, default_value_t = DTypeArg::F32)]
    pub dtype: DTypeArg,
    /// Files larger than this many bytes are also listed piece by piece, with a SHA-256 per piece,
    /// which the browser app checks while the rest of the file downloads (web/BUNDLE.md).
    #[arg(long, value_name = "BYTES", default_value_t = PIECE_BYTES,
          value_parser = clap::value_parser!(u64).range(MIN_PIECE_BYTES..))]
    pub piece_bytes: u64,
    /// Title shown by the app.
    #[arg(long, default_value = "culturelens bundle")]
    pub title: String,
    /// The encoder that produced the embeddings, recorded in the manifest (default: the table's
    /// `encoder` column, which `embed` writes, its names joined by ", "; else `unknown`).
    #[arg(long, value_name = "NAME")]
    pub embedding_model: Option<String>,
    /// Provenance note recorded in the manifest (default: the input paths).
    #[arg(long)]
    pub provenance: Option<String>,
    /// Mark the bundle as synthetic data (the app labels it "synthetic demo data").
    #[arg(long)]
    pub synthetic: bool,
    /// `culturelens magbig --out` table to carry (the app's Results tab: MAD bars per language and set).
    #[arg(long, value_name = "FILE")]
    pub magbig: Option<PathBuf>,
    /// The attribute table (A.csv) behind --magbig (the educator panel: one occupation's male share).
    #[arg(long, value_name = "FILE", requires = "magbig")]
    pub magbig_attributes: Option<PathBuf>,
    /// `culturelens cultext2i --out` table to carry (the Results tab's NA table).
    #[arg(long, value_name = "FILE")]
    pub cultext2i: Option<PathBuf>,
    /// `culturelens cultext2i --report` JSON behind --cultext2i (the NA confusion matrix).
    #[arg(long, value_name = "FILE", requires = "cultext2i")]
    pub cultext2i_report: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DTypeArg {
    F32,
    F16,
}

crate::provenance::value_enum!(DTypeArg);

/// Arguments of `culturelens demo-bundle`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(
    about = "Write the built-in synthetic demo table as a bundle (the browser app's ?bundle=demo)",
    long_about = "Writes the deterministic synthetic demo table (see `culturelens demo`) as a bundle, f32, \
marked synthetic. The browser app builds byte-identical files in the page for ?bundle=demo."
)]
pub struct DemoBundleArgs {
    /// Output bundle directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(args: &BundleArgs) -> Result<()> {
    let table = load_table(&args.embeddings, args.meta.as_deref())?;
    let mut columns: Vec<(String, Vec<String>)> =
        table.meta.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect();
    let thumbnails = match &args.images {
        Some(dir) => make_thumbnails(dir, &table.meta, args.meta.as_deref(), &mut columns)?,
        None => Vec::new(),
    };
    let provenance = args.provenance.clone().unwrap_or_else(|| match &args.meta {
        Some(m) => {
            format!("culturelens bundle --embeddings {} --meta {}", args.embeddings.display(), m.display())
        }
        None => format!("culturelens bundle --embeddings {}", args.embeddings.display()),
    });
    let spec = BundleSpec {
        title: args.title.clone(),
        synthetic: args.synthetic,
        embedding_model: args.embedding_model.clone().unwrap_or_else(|| {
            let encoders = crate::provenance::encoders(&table.meta);
            if encoders.is_empty() { "unknown".to_string() } else { encoders.join(", ") }
        }),
        provenance,
        dtype: match args.dtype {
            DTypeArg::F32 => DType::F32,
            DTypeArg::F16 => DType::F16,
        },
        piece_bytes: args.piece_bytes,
    };
    let mut files = build_bundle(&spec, table.embeddings.data(), table.dim(), &columns, thumbnails)?;
    let read = |p: &Option<PathBuf>| -> Result<Option<Vec<u8>>> {
        p.as_ref()
            .map(|p| std::fs::read(p).with_context(|| format!("cannot read {}", p.display())))
            .transpose()
    };
    let results = ResultFiles {
        magbig: read(&args.magbig)?,
        magbig_attributes: read(&args.magbig_attributes)?,
        cultext2i: read(&args.cultext2i)?,
        cultext2i_report: read(&args.cultext2i_report)?,
    };
    // Name the user's file, not only its place in the bundle, when a table is refused.
    attach_results(&mut files, results, args.piece_bytes).map_err(|e| {
        let given = [
            ("results/magbig.csv", &args.magbig),
            ("results/magbig-attributes.csv", &args.magbig_attributes),
            ("results/cultext2i.csv", &args.cultext2i),
            ("results/cultext2i-report.json", &args.cultext2i_report),
        ]
        .into_iter()
        .find_map(|(inside, p)| (e.file == inside).then_some(p.as_ref()).flatten());
        match given {
            Some(p) => anyhow::anyhow!("{}: {e}", p.display()),
            None => e.into(),
        }
    })?;
    write_bundle_dir(&args.out, &files)?;
    let mut provenance = Provenance::new("bundle", args);
    for path in [Some(&args.embeddings), args.meta.as_ref(), args.images.as_ref()].into_iter().flatten() {
        provenance.input(path)?;
    }
    provenance.write_for_dir(&args.out)?;
    println!(
        "wrote bundle {} ({} rows x {}, {} files)",
        args.out.display(),
        table.len(),
        table.dim(),
        files.len()
    );
    Ok(())
}

pub fn run_demo(args: &DemoBundleArgs) -> Result<()> {
    let demo = demo_table();
    let files = build_bundle(&demo_spec(), &demo.embeddings, demo.dim, &demo.columns, Vec::new())?;
    write_bundle_dir(&args.out, &files)?;
    Provenance::new("demo-bundle", args).write_for_dir(&args.out)?;
    println!(
        "wrote the SYNTHETIC demo bundle to {} ({} rows x {})",
        args.out.display(),
        demo.len(),
        demo.dim
    );
    Ok(())
}

/// Writes `files` into a folder that replaces `out` only when complete (replacing an existing
/// bundle there, [`write_dir_atomic`]), so readers never see a half-written bundle.
pub fn write_bundle_dir(out: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    if out.exists() {
        let is_empty_dir = out.is_dir() && std::fs::read_dir(out)?.next().is_none();
        if !out.join(MANIFEST).is_file() && !is_empty_dir {
            bail!("{} exists and is not a bundle; refusing to replace it", out.display());
        }
    }
    write_dir_atomic(out, |dir| -> Result<()> {
        for (path, bytes) in files {
            let target = dir.join(path);
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&target, bytes).with_context(|| format!("cannot write {}", target.display()))?;
        }
        Ok(())
    })
}

/// One JPEG thumbnail per distinct `image` (longest side [`THUMBNAIL_SIZE`]), stored as
/// `thumbs/NNNNNN.jpg` and referenced by a new `thumbnail` column.
fn make_thumbnails(
    dir: &Path,
    meta: &Metadata,
    meta_path: Option<&Path>,
    columns: &mut Vec<(String, Vec<String>)>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let at = meta_path.map_or_else(|| "the metadata".to_string(), |p| p.display().to_string());
    let images = meta.column("image").with_context(|| format!("--images needs an `image` column in {at}"))?;
    if meta.column(THUMBNAIL_COLUMN).is_some() {
        bail!("{at} already has a `{THUMBNAIL_COLUMN}` column; --images would overwrite it");
    }
    let mut by_image: BTreeMap<&str, String> = BTreeMap::new();
    let mut files = Vec::new();
    let mut column = Vec::with_capacity(images.len());
    for (row, image) in images.iter().enumerate() {
        if image.is_empty() {
            column.push(String::new());
            continue;
        }
        if !by_image.contains_key(image.as_str()) {
            let source = dir.join(image);
            let img = image::open(&source).with_context(|| {
                format!("{at}, row {row}, column image: cannot read image {}", source.display())
            })?;
            let mut jpeg = Vec::new();
            img.thumbnail(THUMBNAIL_SIZE, THUMBNAIL_SIZE)
                .into_rgb8()
                .write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
                    &mut jpeg,
                    THUMBNAIL_QUALITY,
                ))
                .with_context(|| format!("cannot encode the thumbnail of {}", source.display()))?;
            let path = format!("thumbs/{:06}.jpg", files.len());
            files.push((path.clone(), jpeg));
            by_image.insert(image, path);
        }
        column.push(by_image[image.as_str()].clone());
    }
    columns.push((THUMBNAIL_COLUMN.to_string(), column));
    Ok(files)
}
