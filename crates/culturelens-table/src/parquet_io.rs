//! Parquet embedding tables: one `embedding` column (fixed-size list or list of float32, float16
//! or float64) plus any metadata columns (strings, integers, floats, booleans; stored as text).
//! Metadata-only files (the prompt tables) go through the same reader and writer.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, GenericListArray, OffsetSizeTrait, RecordBatch,
    RecordBatchReader, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::reader::ChunkReader;

use crate::EmbeddingTable;
use crate::error::{Location, TableError};
use crate::matrix::Matrix;
use crate::meta::Metadata;
use crate::parquet_pages::check_pages;

/// Name of the column holding the embedding vectors.
pub const EMBEDDING_COLUMN: &str = "embedding";

/// Reads a Parquet embedding table.
pub fn read_parquet(path: &Path) -> Result<EmbeddingTable, TableError> {
    let file = std::fs::File::open(path).map_err(|e| TableError::io(path, e))?;
    let (embeddings, meta) = read_columns(file, &Location::file(path), Some(EMBEDDING_COLUMN))?;
    Ok(EmbeddingTable::new(embeddings.expect("the embedding column was read"), meta))
}

/// Parses a Parquet embedding table held in memory (`at` names it in errors): the reader of
/// [`read_parquet`] without the file.
pub fn parse_parquet(bytes: Vec<u8>, at: &Location) -> Result<EmbeddingTable, TableError> {
    let (embeddings, meta) = read_columns(bytes::Bytes::from(bytes), at, Some(EMBEDDING_COLUMN))?;
    Ok(EmbeddingTable::new(embeddings.expect("the embedding column was read"), meta))
}

/// Reads a Parquet file of metadata only (every column strings, numbers or booleans, stored as
/// text), such as an exported prompt table.
pub fn read_metadata_parquet(path: &Path) -> Result<Metadata, TableError> {
    let file = std::fs::File::open(path).map_err(|e| TableError::io(path, e))?;
    Ok(read_columns(file, &Location::file(path), None)?.1)
}

/// Reads every column: `embedding` (when named) into a matrix, the others as text metadata.
/// Every page header is checked first ([`check_pages`]): the `parquet` crate allocates what a
/// file declares. The `parquet` crate panics on some corrupt files (a negative column chunk
/// length, found by the fuzz harness); such a panic is reported as a corrupt file, like its
/// errors.
fn read_columns<R: ChunkReader + 'static>(
    source: R,
    at: &Location,
    embedding: Option<&str>,
) -> Result<(Option<Matrix>, Metadata), TableError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_columns_of(source, at, embedding)))
        .unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(TableError::format(at.clone(), format!("corrupt Parquet file ({message})")))
        })
}

fn read_columns_of<R: ChunkReader + 'static>(
    source: R,
    at: &Location,
    embedding: Option<&str>,
) -> Result<(Option<Matrix>, Metadata), TableError> {
    let at = at.clone();
    let unreadable = |e: parquet::errors::ParquetError| {
        TableError::format(at.clone(), format!("not a readable Parquet file: {e}"))
    };
    let metadata = ParquetMetaDataReader::new().parse_and_finish(&source).map_err(unreadable)?;
    check_pages(&source, &metadata)
        .map_err(|e| TableError::format(at.clone(), format!("corrupt Parquet file: {e}")))?;
    let metadata = ArrowReaderMetadata::try_new(Arc::new(metadata), ArrowReaderOptions::default())
        .map_err(unreadable)?;
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(source, metadata)
        .with_batch_size(8192)
        .build()
        .map_err(unreadable)?;
    let schema = reader.schema();
    let emb_index = embedding
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                TableError::invalid(
                    at.clone().column(name),
                    "required column is missing (store vectors in a list column named `embedding`)",
                )
            })
        })
        .transpose()?;
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(TableError::format(at.clone().column(name.as_str()), "duplicated column name"));
        }
    }
    let mut data: Vec<f32> = Vec::new();
    let mut dim: Option<usize> = None;
    let mut columns: Vec<Vec<String>> = vec![Vec::new(); names.len()];
    let mut row0 = 0usize;
    for batch in reader {
        let batch =
            batch.map_err(|e| TableError::format(at.clone(), format!("corrupt Parquet data: {e}")))?;
        for (i, col) in batch.columns().iter().enumerate() {
            if Some(i) == emb_index {
                append_embeddings(col, row0, &mut dim, &mut data, &at)?;
            } else {
                append_strings(col, &names[i], &mut columns[i], &at)?;
            }
        }
        row0 += batch.num_rows();
    }
    assert_eq!(names.len(), columns.len());
    let meta_columns: Vec<(String, Vec<String>)> = names
        .into_iter()
        .zip(columns)
        .enumerate()
        .filter(|(i, _)| Some(*i) != emb_index)
        .map(|(_, c)| c)
        .collect();
    let meta = if meta_columns.is_empty() {
        let mut m = Metadata::empty(row0);
        if let Some(path) = &at.file {
            m.set_source(path.clone());
        }
        m
    } else {
        Metadata::from_columns(at.file.clone(), meta_columns)?
    };
    let embeddings = emb_index.map(|_| Matrix::new(row0, dim.unwrap_or(0), data));
    Ok((embeddings, meta))
}

fn append_embeddings(
    col: &ArrayRef,
    row0: usize,
    dim: &mut Option<usize>,
    out: &mut Vec<f32>,
    at: &Location,
) -> Result<(), TableError> {
    let at = at.clone().column(EMBEDDING_COLUMN);
    let (values, offsets): (ArrayRef, Vec<usize>) = match col.data_type() {
        DataType::FixedSizeList(_, size) => {
            let list = col.as_fixed_size_list();
            let size = *size as usize;
            let start = list.offset() * size;
            let values = list.values().slice(start, list.len() * size);
            (values, (0..=list.len()).map(|i| i * size).collect())
        }
        DataType::List(_) => list_parts(col.as_list::<i32>()),
        DataType::LargeList(_) => list_parts(col.as_list::<i64>()),
        other => {
            return Err(TableError::format(at, format!("must be a list of floats, found {other}")));
        }
    };
    for i in 0..col.len() {
        if col.is_null(i) {
            return Err(TableError::invalid(at.clone().row(row0 + i), "null embedding"));
        }
        let len = offsets[i + 1] - offsets[i];
        match dim {
            None => *dim = Some(len),
            Some(d) if *d != len => {
                return Err(TableError::invalid(
                    at.clone().row(row0 + i),
                    format!("embedding has {len} dimensions but earlier rows have {d}"),
                ));
            }
            _ => {}
        }
    }
    if values.null_count() > 0 {
        return Err(TableError::invalid(at, "embedding lists contain null values"));
    }
    match values.data_type() {
        DataType::Float32 => out.extend_from_slice(values.as_primitive::<Float32Type>().values()),
        DataType::Float16 => {
            out.extend(values.as_primitive::<Float16Type>().values().iter().map(|v| v.to_f32()))
        }
        DataType::Float64 => {
            out.extend(values.as_primitive::<Float64Type>().values().iter().map(|v| *v as f32))
        }
        other => {
            return Err(TableError::format(at, format!("list items must be float16/32/64, found {other}")));
        }
    }
    Ok(())
}

/// The values of a variable-length list column and each row's offset into them (from 0).
fn list_parts<O: OffsetSizeTrait>(list: &GenericListArray<O>) -> (ArrayRef, Vec<usize>) {
    let o = list.offsets();
    let base = o[0].as_usize();
    let values = list.values().slice(base, o[list.len()].as_usize() - base);
    (values, o.iter().map(|v| v.as_usize() - base).collect())
}

fn append_strings(
    col: &ArrayRef,
    name: &str,
    out: &mut Vec<String>,
    at: &Location,
) -> Result<(), TableError> {
    // Every supported array type has `is_null` and a `value` with `Display`; nulls become "".
    macro_rules! text {
        ($a:expr) => {{
            let a = $a;
            out.extend(
                (0..a.len()).map(|i| if a.is_null(i) { String::new() } else { a.value(i).to_string() }),
            );
        }};
    }
    macro_rules! prim {
        ($t:ty) => {
            text!(col.as_primitive::<$t>())
        };
    }
    match col.data_type() {
        DataType::Utf8 => text!(col.as_string::<i32>()),
        DataType::LargeUtf8 => text!(col.as_string::<i64>()),
        DataType::Utf8View => text!(col.as_string_view()),
        DataType::Boolean => text!(col.as_boolean()),
        DataType::Int8 => prim!(Int8Type),
        DataType::Int16 => prim!(Int16Type),
        DataType::Int32 => prim!(Int32Type),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::Float32 => prim!(Float32Type),
        DataType::Float64 => prim!(Float64Type),
        other => {
            return Err(TableError::format(
                at.clone().column(name),
                format!("unsupported metadata column type {other} (use strings or numbers)"),
            ));
        }
    }
    Ok(())
}

/// Writes `table` as Parquet: `embedding` as a fixed-size list of float32, metadata as strings.
pub fn write_parquet(w: &mut (dyn std::io::Write + Send), table: &EmbeddingTable) -> std::io::Result<()> {
    let m = &table.embeddings;
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let embedding = FixedSizeListArray::try_new(
        item.clone(),
        m.cols() as i32,
        Arc::new(Float32Array::from(m.data().to_vec())),
        None,
    )
    .map_err(std::io::Error::other)?;
    let column = (
        Field::new(EMBEDDING_COLUMN, DataType::FixedSizeList(item, m.cols() as i32), false),
        Arc::new(embedding) as ArrayRef,
    );
    write_batch(w, Some(column), &table.meta)
}

/// Writes metadata alone as Parquet: every column UTF-8, non-null (the prompt tables' export).
pub fn write_metadata_parquet(w: &mut (dyn std::io::Write + Send), meta: &Metadata) -> std::io::Result<()> {
    write_batch(w, None, meta)
}

/// One record batch: the optional leading column, then `meta`'s columns as strings.
fn write_batch(
    w: &mut (dyn std::io::Write + Send),
    first: Option<(Field, ArrayRef)>,
    meta: &Metadata,
) -> std::io::Result<()> {
    let strings = meta.iter().map(|(name, values)| {
        (
            Field::new(name, DataType::Utf8, false),
            Arc::new(StringArray::from_iter_values(values.iter())) as ArrayRef,
        )
    });
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = first.into_iter().chain(strings).unzip();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(std::io::Error::other)?;
    let mut writer = ArrowWriter::try_new(w, batch.schema(), None).map_err(std::io::Error::other)?;
    writer.write(&batch).map_err(std::io::Error::other)?;
    writer.close().map_err(std::io::Error::other)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzz harness (`culturelens-fuzz --target parquet --seed 1`, input 8863): a
    /// file whose column chunk has a negative length made the `parquet` crate panic.
    #[test]
    fn a_negative_column_length_is_a_corrupt_file_not_a_panic() {
        let path = culturelens_testkit::fixture("table/fuzz_negative_column_length.parquet");
        let err =
            parse_parquet(std::fs::read(&path).unwrap(), &Location::file(&path)).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: corrupt Parquet file", path.display())), "{err}");
        let err = read_parquet(&path).unwrap_err().to_string();
        assert!(err.contains("corrupt Parquet file"), "{err}");
    }

    /// Found by the fuzz harness (`culturelens-fuzz --target parquet --seed 1`, input 387,423,
    /// release build): a 2.6 KB file whose dictionary page declares 890 million values made the
    /// `parquet` crate reserve 3.5 GB; the page checks refuse it before any decoding.
    #[test]
    fn a_dictionary_larger_than_its_page_is_refused_before_decoding() {
        let path = culturelens_testkit::fixture("table/fuzz_dictionary_3_5_gb.parquet");
        let err =
            parse_parquet(std::fs::read(&path).unwrap(), &Location::file(&path)).unwrap_err().to_string();
        assert!(err.contains("corrupt Parquet file: row group 0, column"), "{err}");
        assert!(err.contains("dictionary page declares"), "{err}");
    }
}
