//! The one CSV reader and writer of the result tables. A table's schema ([`CsvSchema`]) says its
//! header (fixed, or with optional and named columns: its [`CsvSchema::Columns`]), how a row is
//! written as cells and how cells are read back; [`write`] and [`read`] do the rest, so a writer's
//! header and its reader's expected header are one function. Cells are written as the `csv`
//! crate's default writer quotes them, numbers in Rust's shortest round-trip form (`f64`/`f32`
//! `Display`).

use std::borrow::Borrow;
use std::io::{Read, Write};

use crate::error::SchemaError;

/// The header and rows of one kind of result CSV.
pub trait CsvSchema {
    /// What varies between tables of this kind: optional columns, group or label columns (`()`
    /// for a fixed header).
    type Columns;
    /// One data row.
    type Row;
    /// The command output this table is, as errors name it (`culturelens magbig --out`).
    const SOURCE: &'static str;

    /// The header of a table with `columns`.
    fn header(columns: &Self::Columns) -> Vec<String>;

    /// The columns of a table whose header is `header`; an error (naming `file`) when the header
    /// is not one [`CsvSchema::header`] writes.
    fn columns(file: &str, header: &[String]) -> Result<Self::Columns, SchemaError>;

    /// The cells of `row`, in header order.
    fn record(columns: &Self::Columns, row: &Self::Row) -> Vec<String>;

    /// Reads one row back from its cells.
    fn parse(columns: &Self::Columns, cells: &Cells<'_>) -> Result<Self::Row, SchemaError>;
}

/// Writes `header` and `rows` as CSV (the `csv` crate's default quoting): the writer of every
/// result table, and of the CLI's tables that have no schema of their own (the per-image outputs
/// of `classify` and `clipscore`, whose columns are the input's).
pub fn write_records<R: AsRef<[String]>>(
    w: impl Write,
    header: &[impl AsRef<[u8]>],
    rows: impl IntoIterator<Item = R>,
) -> std::io::Result<()> {
    let mut out = csv::Writer::from_writer(w);
    out.write_record(header)?;
    for row in rows {
        out.write_record(row.as_ref())?;
    }
    out.flush()
}

/// The header and records of `rows` (for writers that take them as strings).
pub fn records<S: CsvSchema>(
    columns: &S::Columns,
    rows: impl IntoIterator<Item = impl Borrow<S::Row>>,
) -> (Vec<String>, Vec<Vec<String>>) {
    (S::header(columns), rows.into_iter().map(|r| S::record(columns, r.borrow())).collect())
}

/// Writes a table of schema `S`.
pub fn write<S: CsvSchema>(
    w: impl Write,
    columns: &S::Columns,
    rows: impl IntoIterator<Item = impl Borrow<S::Row>>,
) -> std::io::Result<()> {
    write_records(w, &S::header(columns), rows.into_iter().map(|r| S::record(columns, r.borrow())))
}

/// Reads a table of schema `S` from `reader` (named `file` in errors): its columns and rows.
pub fn read<S: CsvSchema>(file: &str, reader: impl Read) -> Result<(S::Columns, Vec<S::Row>), SchemaError> {
    let (header, records) = open(file, reader)?;
    let columns = S::columns(file, &header)?;
    let mut rows = Vec::new();
    for (row, record) in records.enumerate() {
        let record = record.map_err(|e| malformed(file, row, e))?;
        let line = record.position().map(|p| p.line());
        rows.push(S::parse(&columns, &Cells { file, row, line, header: &header, record: &record })?);
    }
    Ok((columns, rows))
}

/// `reader` as CSV: its header and its data records (strictly rectangular).
pub(crate) fn open<R: Read>(
    file: &str,
    reader: R,
) -> Result<(Vec<String>, csv::StringRecordsIntoIter<R>), SchemaError> {
    let mut csv = csv::ReaderBuilder::new().has_headers(true).from_reader(reader);
    let header = csv
        .headers()
        .map_err(|e| SchemaError::new(file, format!("cannot read the header row: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    Ok((header, csv.into_records()))
}

/// The error of data row `row` that the CSV reader refused.
pub(crate) fn malformed(file: &str, row: usize, e: csv::Error) -> SchemaError {
    SchemaError::new(file, format!("malformed CSV: {e}")).row(row)
}

/// Checks that `header` is exactly `want`, the header of `source`.
pub(crate) fn expect_header(
    file: &str,
    header: &[String],
    want: &[String],
    source: &str,
) -> Result<(), SchemaError> {
    if header == want { Ok(()) } else { Err(header_error(file, header, &want.join(","), source)) }
}

/// The error of a header that is not the schema's (`want` as shown to the user).
pub(crate) fn header_error(file: &str, header: &[String], want: &str, source: &str) -> SchemaError {
    SchemaError::new(file, format!("header is `{}`, expected `{want}` ({source})", header.join(",")))
}

/// `names` as owned strings.
pub(crate) fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The `header` of a table of `groups` columns (any names) followed by the fixed `tail`, split:
/// the group column names, or the error naming the expected tail.
pub(crate) fn group_columns(
    file: &str,
    header: &[String],
    lead: &[&str],
    tail: &[&str],
    source: &str,
) -> Result<Vec<String>, SchemaError> {
    let fits = header.len() >= lead.len() + tail.len()
        && header[..lead.len()].iter().zip(lead).all(|(h, w)| h == w)
        && header[header.len() - tail.len()..].iter().zip(tail).all(|(h, w)| h == w);
    if !fits {
        let want = lead.iter().copied().chain(["GROUP…"]).chain(tail.iter().copied()).collect::<Vec<_>>();
        return Err(header_error(file, header, &want.join(","), source));
    }
    Ok(header[lead.len()..header.len() - tail.len()].to_vec())
}

/// The cells of one data row, with typed accessors whose errors name file, row, line and column.
pub struct Cells<'a> {
    file: &'a str,
    row: usize,
    line: Option<u64>,
    header: &'a [String],
    record: &'a csv::StringRecord,
}

impl<'a> Cells<'a> {
    /// An error at column `k` of this row.
    pub fn error(&self, k: usize, message: impl Into<String>) -> SchemaError {
        let e = SchemaError::new(self.file, message).row(self.row).column(self.header[k].as_str());
        match self.line {
            Some(line) => e.line(line),
            None => e,
        }
    }

    /// The text of column `k`, as written.
    pub fn text(&self, k: usize) -> &'a str {
        &self.record[k]
    }

    /// The text of column `k`, owned.
    pub fn string(&self, k: usize) -> String {
        self.text(k).to_string()
    }

    /// The non-empty text of column `k` (a key column: model, language, …).
    pub fn key(&self, k: usize) -> Result<String, SchemaError> {
        if self.text(k).trim().is_empty() {
            return Err(self.error(k, "empty value: every row needs one for this column"));
        }
        Ok(self.string(k))
    }

    /// Column `k` parsed as `T` (surrounding spaces ignored).
    pub fn parse<T: std::str::FromStr>(&self, k: usize) -> Result<T, SchemaError> {
        let text = self.text(k);
        text.trim().parse::<T>().map_err(|_| self.error(k, format!("`{text}` is not a number")))
    }

    /// A count (a whole number ≥ 0) in column `k`.
    pub fn count(&self, k: usize) -> Result<usize, SchemaError> {
        self.parse(k)
    }

    /// A finite `f64` in column `k`.
    pub fn finite(&self, k: usize) -> Result<f64, SchemaError> {
        let v: f64 = self.parse(k)?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(self.error(k, format!("`{}` is not a finite number", self.text(k))))
        }
    }

    /// A finite `f32` in column `k` (a value the writer had in single precision).
    pub fn finite_f32(&self, k: usize) -> Result<f32, SchemaError> {
        let v: f32 = self.parse(k)?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(self.error(k, format!("`{}` is not a finite number", self.text(k))))
        }
    }

    /// A finite `f64` in column `k`, or `None` for an empty cell (a value that is undefined).
    pub fn optional_finite(&self, k: usize) -> Result<Option<f64>, SchemaError> {
        if self.text(k).is_empty() { Ok(None) } else { self.finite(k).map(Some) }
    }

    /// `true` or `false` in column `k`.
    pub fn boolean(&self, k: usize) -> Result<bool, SchemaError> {
        match self.text(k).trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(self.error(k, format!("`{other}` is not true or false"))),
        }
    }
}

/// The cell of an optional number: empty for `None` (as the writers of undefined values do).
pub(crate) fn optional(value: Option<f64>) -> String {
    value.map_or(String::new(), |v| v.to_string())
}
