//! Writing the outputs subcommands share: embedding tables (`.npy` with a metadata CSV beside
//! it, or `.parquet`), always atomically (`culturelens_table::write_atomic`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use culturelens_table::{EmbeddingTable, Matrix, Metadata, save_table};

/// The metadata CSV of an `.npy` output: `meta_out`, else `out` with extension `.csv`; `None`
/// for a `.parquet` output, which holds its metadata.
pub fn meta_out_path(out: &Path, meta_out: Option<&Path>) -> Option<PathBuf> {
    let is_npy = out.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    is_npy.then(|| meta_out.map_or_else(|| out.with_extension("csv"), Path::to_path_buf))
}

/// Refuses input metadata that already has the column `name`, one the command writes (its rows
/// would then say two things).
pub fn refuse_column(meta: &Metadata, name: &str) -> Result<()> {
    if meta.column(name).is_some() {
        anyhow::bail!(
            "{}: the input has a column `{name}`, which this command writes; rename or drop it",
            meta.source().map_or_else(|| "input".into(), |p| p.display().to_string())
        );
    }
    Ok(())
}

/// `meta` with the column `name` holding `value` in every row, after the others
/// ([`refuse_column`] first).
pub fn with_constant_column(meta: &Metadata, name: &str, value: &str) -> Result<Metadata> {
    refuse_column(meta, name)?;
    let mut columns: Vec<(String, Vec<String>)> =
        meta.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect();
    columns.push((name.to_string(), vec![value.to_string(); meta.n_rows()]));
    Ok(Metadata::from_columns(meta.source().map(Path::to_path_buf), columns)?)
}

/// Writes the rows `kept` (indices into `meta` and keys of `rows`, in output order) with their
/// embeddings to `out` (and the metadata CSV of [`meta_out_path`]).
pub fn write_table(
    out: &Path,
    meta_out: Option<&Path>,
    meta: &Metadata,
    kept: &[usize],
    rows: &BTreeMap<usize, Vec<f32>>,
) -> Result<()> {
    let dim = rows.values().next().map_or(0, Vec::len);
    let data: Vec<f32> = kept.iter().flat_map(|r| rows[r].iter().copied()).collect();
    let table = EmbeddingTable::new(Matrix::new(kept.len(), dim, data), meta.select_rows(kept));
    save_table(&table, out, meta_out_path(out, meta_out).as_deref())?;
    Ok(())
}

/// A CSV of `header` and `rows`, written atomically by the result tables' one CSV writer.
pub fn write_csv_rows<R: AsRef<[String]>>(
    path: &Path,
    header: &[impl AsRef<[u8]>],
    rows: &[R],
) -> Result<()> {
    culturelens_table::write_atomic(path, |w| culturelens_results::write_records(w, header, rows))?;
    Ok(())
}

/// `meta`'s columns and rows followed by the `added` columns (one value per row), as a CSV
/// written atomically (the per-image outputs of `classify` and `clipscore`). An added column
/// whose name `meta` already has is an error naming it, so no input column is overwritten.
pub fn write_meta_with_columns(path: &Path, meta: &Metadata, added: &[(String, Vec<String>)]) -> Result<()> {
    let mut header: Vec<String> = meta.names().to_vec();
    for (name, values) in added {
        if header.contains(name) {
            anyhow::bail!("{}: already has a column `{name}`, which the output would add", meta.location());
        }
        assert_eq!(values.len(), meta.n_rows(), "one value per row");
        header.push(name.clone());
    }
    let columns: Vec<&[String]> =
        meta.iter().map(|(_, c)| c).chain(added.iter().map(|(_, c)| c.as_slice())).collect();
    let rows: Vec<Vec<String>> =
        (0..meta.n_rows()).map(|r| columns.iter().map(|c| c[r].clone()).collect()).collect();
    write_csv_rows(path, &header, &rows)
}

/// `value` as pretty JSON with a final newline, written atomically (the analysis reports).
pub fn write_json_pretty(path: &Path, value: &serde_json::Value) -> Result<()> {
    culturelens_table::write_atomic(path, |w| {
        w.write_all((serde_json::to_string_pretty(value)? + "\n").as_bytes())
    })?;
    Ok(())
}

/// One CSV file of a result folder: its name, header and rows.
pub struct CsvFile {
    pub name: &'static str,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Writes every file into `dir` (created if needed), each atomically. Callers compute all files
/// before calling, so a bad input never leaves a partial result folder.
pub fn write_csv_files(dir: &Path, files: &[CsvFile]) -> Result<()> {
    culturelens_files::create_dir_all(dir)?;
    for file in files {
        write_csv_rows(&dir.join(file.name), &file.header, &file.rows)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_outputs_get_a_metadata_csv_and_parquet_outputs_none() {
        let out = Path::new("runs/e.npy");
        assert_eq!(meta_out_path(out, None), Some(PathBuf::from("runs/e.csv")));
        assert_eq!(meta_out_path(Path::new("e.NPY"), None), Some(PathBuf::from("e.csv")));
        assert_eq!(meta_out_path(out, Some(Path::new("m.csv"))), Some(PathBuf::from("m.csv")));
        assert_eq!(meta_out_path(Path::new("e.parquet"), Some(Path::new("m.csv"))), None);
    }
}
