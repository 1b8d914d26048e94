//! Writing a bundle: encodes embeddings and metadata, lists every file with size and SHA-256 and
//! returns the files (manifest last) for the caller to store — the CLI writes them to a temporary
//! directory and renames it; the browser app keeps the built-in demo in memory.

use std::collections::BTreeSet;

use half::f16;

use crate::error::BundleError;
use crate::manifest::{DType, FORMAT, FORMAT_VERSION, FileEntry, MANIFEST, Manifest, PIECE_BYTES};
use crate::read::{decode_embeddings, parse_metadata};

/// The descriptive fields of a new bundle's manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleSpec {
    pub title: String,
    pub synthetic: bool,
    pub embedding_model: String,
    pub provenance: String,
    pub dtype: DType,
    /// Files larger than this are also listed piece by piece ([`FileEntry::new`]); normally
    /// [`PIECE_BYTES`].
    pub piece_bytes: u64,
}

/// Manifest fields of the built-in synthetic demo bundle (`culturelens demo-bundle` and the browser
/// app's `?bundle=demo`, which build the same files from `culturelens_metrics::demo::demo_table`).
pub fn demo_spec() -> BundleSpec {
    BundleSpec {
        title: "culturelens synthetic demo data".to_string(),
        synthetic: true,
        embedding_model: "none (synthetic 64-d vectors with planted tendencies)".to_string(),
        provenance: "culturelens_metrics::demo::demo_table(): deterministic synthetic table, seed 42; \
                     not data from any model or paper"
            .to_string(),
        dtype: DType::F32,
        piece_bytes: PIECE_BYTES,
    }
}

/// Sorted distinct values of a column.
pub fn distinct_sorted(values: &[String]) -> Vec<String> {
    values.iter().collect::<BTreeSet<_>>().into_iter().cloned().collect()
}

/// Builds the files of a bundle from row-major `embeddings` (`rows × dim`), metadata `columns`
/// and `thumbnails` (path inside the bundle, bytes; rows refer to them through the `thumbnail`
/// column). The result is checked with the reader before it is returned, so a bundle this writes
/// always reads back.
pub fn build_bundle(
    spec: &BundleSpec,
    embeddings: &[f32],
    dim: usize,
    columns: &[(String, Vec<String>)],
    thumbnails: Vec<(String, Vec<u8>)>,
) -> Result<Vec<(String, Vec<u8>)>, BundleError> {
    let rows = embeddings.len().checked_div(dim).unwrap_or(0);
    let (emb_path, meta_path) = match spec.dtype {
        DType::F32 => ("embeddings.f32", "meta.csv"),
        DType::F16 => ("embeddings.f16", "meta.csv"),
    };
    let emb_bytes: Vec<u8> = match spec.dtype {
        DType::F32 => embeddings.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F16 => embeddings.iter().flat_map(|v| f16::from_f32(*v).to_le_bytes()).collect(),
    };
    if embeddings.len() != rows * dim {
        return Err(BundleError::new(
            emb_path,
            format!("{} values are not a multiple of dim {dim}", embeddings.len()),
        ));
    }
    if let Some((name, v)) = columns.iter().find(|(_, v)| v.len() != rows) {
        return Err(BundleError::new(meta_path, format!("{} values for {rows} embeddings", v.len()))
            .column(name.as_str()));
    }
    let meta_bytes =
        metadata_csv(columns).map_err(|e| BundleError::new(meta_path, format!("cannot encode: {e}")))?;
    let column = |name: &str| {
        columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| distinct_sorted(v))
            .ok_or_else(|| BundleError::new(meta_path, "missing required column").column(name))
    };
    let mut files = vec![(emb_path.to_string(), emb_bytes), (meta_path.to_string(), meta_bytes)];
    files.extend(thumbnails);
    let manifest = Manifest {
        format: FORMAT.to_string(),
        format_version: FORMAT_VERSION,
        title: spec.title.clone(),
        synthetic: spec.synthetic,
        embedding_model: spec.embedding_model.clone(),
        provenance: spec.provenance.clone(),
        rows,
        dim,
        dtype: spec.dtype,
        embeddings: emb_path.to_string(),
        metadata: meta_path.to_string(),
        models: column("model")?,
        languages: column("language")?,
        cultures: column("culture")?,
        files: files.iter().map(|(path, bytes)| FileEntry::new(path, bytes, spec.piece_bytes)).collect(),
        results: Default::default(),
    };
    manifest.validate()?;
    parse_metadata(&manifest, &files[1].1)?;
    decode_embeddings(&manifest, &files[0].1)?;
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest always serialises");
    files.push((MANIFEST.to_string(), json));
    Ok(files)
}

fn metadata_csv(columns: &[(String, Vec<String>)]) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(columns.iter().map(|(n, _)| n.as_str()))?;
    let rows = columns.first().map_or(0, |(_, v)| v.len());
    for row in 0..rows {
        w.write_record(columns.iter().map(|(_, v)| v[row].as_str()))?;
    }
    w.into_inner().map_err(|e| csv::Error::from(e.into_error()))
}
