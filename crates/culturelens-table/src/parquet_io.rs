//! Parquet embedding tables: one `embedding` column (fixed-size list or list of float32, float16
//! or float64) plus any metadata columns (strings, integers, floats, booleans; stored as text).

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch, RecordBatchReader, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::EmbeddingTable;
use crate::error::{Location, TableError};
use crate::matrix::Matrix;
use crate::meta::Metadata;

/// Name of the column holding the embedding vectors.
pub const EMBEDDING_COLUMN: &str = "embedding";

/// Reads a Parquet embedding table.
pub fn read_parquet(path: &Path) -> Result<EmbeddingTable, TableError> {
    let at = Location::file(path);
    let file = std::fs::File::open(path).map_err(|e| TableError::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.with_batch_size(8192).build())
        .map_err(|e| TableError::format(at.clone(), format!("not a readable Parquet file: {e}")))?;
    let schema = reader.schema();
    let emb_index = schema.index_of(EMBEDDING_COLUMN).map_err(|_| {
        TableError::invalid(
            at.clone().column(EMBEDDING_COLUMN),
            "required column is missing (store vectors in a list column named `embedding`)",
        )
    })?;
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
        append_embeddings(batch.column(emb_index), row0, &mut dim, &mut data, &at)?;
        for (i, col) in batch.columns().iter().enumerate() {
            if i != emb_index {
                append_strings(col, &names[i], &mut columns[i], &at)?;
            }
        }
        row0 += batch.num_rows();
    }
    let d = dim.unwrap_or(0);
    let meta_columns: Vec<(String, Vec<String>)> =
        names.into_iter().zip(columns).enumerate().filter(|(i, _)| *i != emb_index).map(|(_, c)| c).collect();
    let meta = if meta_columns.is_empty() {
        let mut m = Metadata::empty(row0);
        m.set_source(path.to_path_buf());
        m
    } else {
        Metadata::from_columns(Some(path.to_path_buf()), meta_columns)?
    };
    Ok(EmbeddingTable::new(Matrix::new(row0, d, data), meta))
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
        DataType::List(_) => {
            let list = col.as_list::<i32>();
            let o = list.offsets();
            let base = o[0] as usize;
            let values = list.values().slice(base, o[list.len()] as usize - base);
            (values, o.iter().map(|v| *v as usize - base).collect())
        }
        DataType::LargeList(_) => {
            let list = col.as_list::<i64>();
            let o = list.offsets();
            let base = o[0] as usize;
            let values = list.values().slice(base, o[list.len()] as usize - base);
            (values, o.iter().map(|v| *v as usize - base).collect())
        }
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

fn append_strings(
    col: &ArrayRef,
    name: &str,
    out: &mut Vec<String>,
    at: &Location,
) -> Result<(), TableError> {
    macro_rules! prim {
        ($t:ty) => {{
            let a = col.as_primitive::<$t>();
            out.extend(
                (0..a.len()).map(|i| if a.is_null(i) { String::new() } else { a.value(i).to_string() }),
            );
        }};
    }
    match col.data_type() {
        DataType::Utf8 => {
            let a = col.as_string::<i32>();
            out.extend(
                (0..a.len()).map(|i| if a.is_null(i) { String::new() } else { a.value(i).to_string() }),
            );
        }
        DataType::LargeUtf8 => {
            let a = col.as_string::<i64>();
            out.extend(
                (0..a.len()).map(|i| if a.is_null(i) { String::new() } else { a.value(i).to_string() }),
            );
        }
        DataType::Utf8View => {
            let a = col.as_string_view();
            out.extend(
                (0..a.len()).map(|i| if a.is_null(i) { String::new() } else { a.value(i).to_string() }),
            );
        }
        DataType::Boolean => {
            let a = col.as_boolean();
            out.extend(
                (0..a.len()).map(|i| if a.is_null(i) { String::new() } else { a.value(i).to_string() }),
            );
        }
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
    let mut fields =
        vec![Field::new(EMBEDDING_COLUMN, DataType::FixedSizeList(item.clone(), m.cols() as i32), false)];
    let mut arrays: Vec<ArrayRef> = vec![Arc::new(
        FixedSizeListArray::try_new(
            item,
            m.cols() as i32,
            Arc::new(Float32Array::from(m.data().to_vec())),
            None,
        )
        .map_err(std::io::Error::other)?,
    )];
    for (name, values) in table.meta.iter() {
        fields.push(Field::new(name, DataType::Utf8, false));
        arrays.push(Arc::new(StringArray::from_iter_values(values.iter())));
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(std::io::Error::other)?;
    let mut writer = ArrowWriter::try_new(w, batch.schema(), None).map_err(std::io::Error::other)?;
    writer.write(&batch).map_err(std::io::Error::other)?;
    writer.close().map_err(std::io::Error::other)?;
    Ok(())
}
