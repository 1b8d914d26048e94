//! Per-embedding metadata: named string columns, one value per embedding row, read from and
//! written to CSV with a header row. Known columns are listed in [`KNOWN_COLUMNS`]; any other
//! column is kept and can be used for grouping.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{Location, TableError};
use crate::interned::Interned;

/// The metadata columns culturelens knows by name (the embedding-table contract). `model` is the
/// model that made the item (generate's pipeline); `encoder` the encoder that embedded it
/// (written by `embed` and `embed-text`).
pub const KNOWN_COLUMNS: [&str; 10] =
    ["model", "language", "culture", "template", "person", "seed", "layer", "prompt", "image", "encoder"];

/// Column-major string metadata with a fixed number of rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metadata {
    source: Option<PathBuf>,
    names: Vec<String>,
    columns: Vec<Column>,
    rows: usize,
}

/// A column's cells as a caller gives them: one string per row, or already interned (its strings
/// are then made only if something asks for them, [`Metadata::column`]).
#[derive(Debug, Clone)]
pub enum ColumnCells {
    Cells(Vec<String>),
    Interned(Interned),
}

impl From<Vec<String>> for ColumnCells {
    fn from(cells: Vec<String>) -> Self {
        ColumnCells::Cells(cells)
    }
}

/// A stored column: its strings, or its interned form and the strings made from it on demand.
#[derive(Debug, Clone)]
enum Column {
    Cells(Vec<String>),
    Interned(Interned, OnceLock<Vec<String>>),
}

impl Column {
    fn len(&self) -> usize {
        match self {
            Column::Cells(c) => c.len(),
            Column::Interned(c, _) => c.len(),
        }
    }

    fn cells(&self) -> &[String] {
        match self {
            Column::Cells(c) => c,
            Column::Interned(c, cells) => cells.get_or_init(|| c.cells()),
        }
    }

    fn get(&self, row: usize) -> &str {
        match self {
            Column::Cells(c) => &c[row],
            Column::Interned(c, _) => c.get(row),
        }
    }
}

/// Columns are equal when their cells are, however each is stored.
impl PartialEq for Column {
    fn eq(&self, other: &Column) -> bool {
        match (self, other) {
            (Column::Interned(a, _), Column::Interned(b, _)) if a.values() == b.values() => {
                a.ids() == b.ids()
            }
            _ => self.len() == other.len() && (0..self.len()).all(|r| self.get(r) == other.get(r)),
        }
    }
}

impl Metadata {
    /// Metadata with `rows` rows and no columns (embeddings given without metadata).
    pub fn empty(rows: usize) -> Self {
        Self { rows, ..Self::default() }
    }

    /// Builds metadata from named columns, rejecting duplicated names and ragged columns.
    pub fn from_columns(
        source: Option<PathBuf>,
        columns: Vec<(String, Vec<String>)>,
    ) -> Result<Self, TableError> {
        Self::from_column_cells(source, columns.into_iter().map(|(n, c)| (n, c.into())).collect())
    }

    /// [`Metadata::from_columns`] with each column's cells as strings or [`Interned`].
    pub fn from_column_cells(
        source: Option<PathBuf>,
        columns: Vec<(String, ColumnCells)>,
    ) -> Result<Self, TableError> {
        let at = source.as_deref().map(Location::file).unwrap_or_default();
        let columns = columns.into_iter().map(|(name, cells)| {
            let column = match cells {
                ColumnCells::Cells(c) => Column::Cells(c),
                ColumnCells::Interned(c) => Column::Interned(c, OnceLock::new()),
            };
            (name, column)
        });
        let columns: Vec<(String, Column)> = columns.collect();
        let rows = columns.first().map_or(0, |(_, v)| v.len());
        let mut meta = Self { source, rows, ..Self::default() };
        for (name, values) in columns {
            if meta.names.contains(&name) {
                return Err(TableError::invalid(at.column(name.as_str()), "duplicated column name"));
            }
            if values.len() != rows {
                return Err(TableError::invalid(
                    at.column(name.as_str()),
                    format!("column has {} values but the table has {rows} rows", values.len()),
                ));
            }
            meta.names.push(name);
            meta.columns.push(values);
        }
        Ok(meta)
    }

    pub fn n_rows(&self) -> usize {
        self.rows
    }

    /// Column names in file order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The file this metadata was read from, if any.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    pub fn set_source(&mut self, source: PathBuf) {
        self.source = Some(source);
    }

    /// A location in this metadata's source file, for error messages.
    pub fn location(&self) -> Location {
        self.source.as_deref().map(Location::file).unwrap_or_default()
    }

    pub fn column(&self, name: &str) -> Option<&[String]> {
        self.names.iter().position(|n| n == name).map(|i| self.columns[i].cells())
    }

    /// The column `name` interned: as stored when it was given interned, else interned now.
    pub fn interned(&self, name: &str) -> Option<Cow<'_, Interned>> {
        let i = self.names.iter().position(|n| n == name)?;
        Some(match &self.columns[i] {
            Column::Interned(c, _) => Cow::Borrowed(c),
            Column::Cells(c) => Cow::Owned(Interned::new(c.iter().map(String::as_str))),
        })
    }

    /// [`Metadata::require_nonempty_column`] for [`Metadata::interned`]: the same errors, and a
    /// column given interned is never turned into strings.
    pub fn require_nonempty_interned(&self, name: &str) -> Result<Cow<'_, Interned>, TableError> {
        let Some(col) = self.interned(name) else { return Err(self.missing(name)) };
        match col.first_blank() {
            Some(row) => Err(self.blank(row, name)),
            None => Ok(col),
        }
    }

    /// The column `name`; an error naming the file and the columns present when it is missing.
    pub fn require_column(&self, name: &str) -> Result<&[String], TableError> {
        self.column(name).ok_or_else(|| self.missing(name))
    }

    fn missing(&self, name: &str) -> TableError {
        TableError::invalid(
            self.location().column(name),
            format!("required column is missing (columns present: {})", self.names.join(", ")),
        )
    }

    fn blank(&self, row: usize, name: &str) -> TableError {
        TableError::invalid(self.cell(row, name), "empty value: every row needs one for this column")
    }

    /// Like [`Metadata::require_column`], and every value must be non-empty.
    pub fn require_nonempty_column(&self, name: &str) -> Result<&[String], TableError> {
        let col = self.require_column(name)?;
        if let Some(row) = col.iter().position(|v| v.trim().is_empty()) {
            return Err(self.blank(row, name));
        }
        Ok(col)
    }

    /// The rows of each value of the column `name` (non-empty values), in value order: the groups
    /// of a `--group-by`.
    pub fn row_groups(&self, name: &str) -> Result<Vec<(String, Vec<usize>)>, TableError> {
        let mut by: std::collections::BTreeMap<&str, Vec<usize>> = std::collections::BTreeMap::new();
        for (i, v) in self.require_nonempty_column(name)?.iter().enumerate() {
            by.entry(v).or_default().push(i);
        }
        Ok(by.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// The column `name` as finite numbers (values trimmed); a cell that is not one (empty
    /// included) is refused by its location, "expected a number, got ...".
    pub fn numbers(&self, name: &str) -> Result<Vec<f64>, TableError> {
        let col = self.require_column(name)?;
        let number = |(row, v): (usize, &String)| {
            v.trim().parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| {
                TableError::invalid(self.cell(row, name), format!("expected a number, got {v:?}"))
            })
        };
        col.iter().enumerate().map(number).collect()
    }

    /// The column `name` as finite numbers (values trimmed); an error naming the cell says
    /// "`what` must be a finite number".
    pub fn number_column(&self, name: &str, what: &str) -> Result<Vec<f64>, TableError> {
        let values = self.require_nonempty_column(name)?;
        let number = |(row, v): (usize, &String)| match v.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(TableError::invalid(
                self.cell(row, name),
                format!("{what} must be a finite number, got `{v}`"),
            )),
        };
        values.iter().enumerate().map(number).collect()
    }

    /// The location of data row `row` (0-based) in column `name`, with its 1-based line when the
    /// source is a CSV file (header on line 1).
    pub fn cell(&self, row: usize, name: &str) -> Location {
        let at = self.location().row(row).column(name);
        if self.source.as_ref().is_some_and(|p| p.extension().is_some_and(|e| e == "csv")) {
            at.line(row as u64 + 2)
        } else {
            at
        }
    }

    /// Keeps only the rows in `indices` (in that order).
    pub fn select_rows(&self, indices: &[usize]) -> Metadata {
        Metadata {
            source: self.source.clone(),
            names: self.names.clone(),
            columns: self
                .columns
                .iter()
                .map(|c| match c {
                    Column::Cells(c) => Column::Cells(indices.iter().map(|&i| c[i].clone()).collect()),
                    Column::Interned(c, _) => {
                        Column::Interned(c.select(indices.iter().copied()), OnceLock::new())
                    }
                })
                .collect(),
            rows: indices.len(),
        }
    }

    /// Iterates `(name, values)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[String])> {
        assert_eq!(self.names.len(), self.columns.len());
        self.names.iter().map(String::as_str).zip(self.columns.iter().map(Column::cells))
    }
}

/// Reads a metadata CSV (header row required, comma-separated, UTF-8).
pub fn read_metadata_csv(path: &Path) -> Result<Metadata, TableError> {
    let file = std::fs::File::open(path).map_err(|e| TableError::io(path, e))?;
    read_metadata_csv_from(file, Some(path.to_path_buf()))
}

/// Reads metadata CSV from any reader; `source` names it in errors.
pub fn read_metadata_csv_from(
    reader: impl std::io::Read,
    source: Option<PathBuf>,
) -> Result<Metadata, TableError> {
    let at = source.as_deref().map(Location::file).unwrap_or_default();
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).flexible(false).from_reader(reader);
    let headers = rdr.headers().map_err(|e| csv_error(&at, e))?.clone();
    if headers.is_empty() || headers.iter().all(|h| h.trim().is_empty()) {
        return Err(TableError::format(at, "the CSV has no header row"));
    }
    let names: Vec<String> =
        headers.iter().map(|h| h.trim().trim_start_matches('\u{feff}').to_string()).collect();
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(TableError::format(
                at.line(1).column(format!("#{}", i + 1)),
                "empty column name in header",
            ));
        }
        if names[..i].contains(name) {
            return Err(TableError::format(
                at.line(1).column(name.as_str()),
                "duplicated column name in header",
            ));
        }
    }
    let mut columns: Vec<Vec<String>> = vec![Vec::new(); names.len()];
    for record in rdr.records() {
        let record = record.map_err(|e| csv_error(&at, e))?;
        assert_eq!(
            columns.len(),
            record.len(),
            "the CSV reader is strict: every record has the header's length"
        );
        for (col, value) in columns.iter_mut().zip(record.iter()) {
            col.push(value.to_string());
        }
    }
    assert_eq!(names.len(), columns.len());
    Metadata::from_columns(source, names.into_iter().zip(columns).collect())
}

fn csv_error(at: &Location, e: csv::Error) -> TableError {
    let mut at = at.clone();
    if let Some(pos) = e.position() {
        at = at.line(pos.line());
        if pos.record() > 0 {
            at = at.row(pos.record() as usize - 1);
        }
    }
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("row has {len} fields but the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "invalid UTF-8".to_string(),
        _ => e.to_string(),
    };
    TableError::format(at, message)
}

/// Writes metadata as CSV with a header row.
pub fn write_metadata_csv(w: &mut dyn Write, meta: &Metadata) -> std::io::Result<()> {
    let mut wtr = csv::Writer::from_writer(w);
    wtr.write_record(meta.names())?;
    for row in 0..meta.n_rows() {
        wtr.write_record(meta.columns.iter().map(|c| c.get(row)))?;
    }
    wtr.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Metadata, TableError> {
        read_metadata_csv_from(text.as_bytes(), Some(PathBuf::from("m.csv")))
    }

    #[test]
    fn reads_columns_and_keeps_unknown_ones() {
        let m = read("model,language,culture,extra\nA,en,German,x\nB,de,French,y\n").unwrap();
        assert_eq!(m.n_rows(), 2);
        assert_eq!(m.column("extra").unwrap(), ["x", "y"]);
        assert_eq!(m.require_column("culture").unwrap(), ["German", "French"]);
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let err = read("model,language,model\nA,en,B\n").unwrap_err().to_string();
        assert_eq!(err, "m.csv, line 1, column model: duplicated column name in header");
        let err = read("model,language\nA,en\nB\n").unwrap_err().to_string();
        assert_eq!(err, "m.csv, line 3 (data row 1): row has 1 fields but the header has 2");
        let m = read("model,language\nA,en\nB,\n").unwrap();
        let err = m.require_nonempty_column("language").unwrap_err().to_string();
        assert_eq!(
            err,
            "m.csv, line 3 (data row 1), column language: empty value: every row needs one for this column"
        );
        let err = m.require_column("culture").unwrap_err().to_string();
        assert_eq!(
            err,
            "m.csv, column culture: required column is missing (columns present: model, language)"
        );
    }

    #[test]
    fn csv_roundtrip() {
        let m = read("a,b\n\"x,1\",2\n3,\"q\"\"\"\n").unwrap();
        let mut buf = Vec::new();
        write_metadata_csv(&mut buf, &m).unwrap();
        let back = read(std::str::from_utf8(&buf).unwrap()).unwrap();
        assert_eq!(back.column("a").unwrap(), m.column("a").unwrap());
        assert_eq!(back.column("b").unwrap(), ["2", "q\""]);
    }
}
