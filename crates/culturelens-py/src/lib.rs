//! `culturelens._native`: the compiled half of the Python package `culturelens` (PyO3, abi3 for
//! every Python ≥ 3.9). Each function is the CLI command's own code path on in-memory inputs:
//! numpy arrays in, the command's result rows out as (header, records) with the cells the
//! command writes (`culturelens_results`' schemas), so a DataFrame built from them has the CLI's
//! columns and, parsed, its values to the last bit. The pure-Python half
//! (`python/culturelens/__init__.py`) turns DataFrames into columns and the records back into
//! DataFrames, so pandas is needed only by the calls that take or return one.
//!
//! Conventions: embeddings are a 2-D numpy array of float16, float32 or float64 in any memory
//! order. A C-contiguous, aligned float32 array is lent to the compute crates and read in place
//! (`culturelens_compute::device::HostRows`: the CPU device and Vendi's cosine rows read it without
//! a copy, and never write it); any other is converted to f32 as the CLI's `.npy` reader converts
//! (f16 exactly, f64 rounded to nearest), with one copy. Validation is the CLI's (`culturelens_table`), and every error is a
//! `ValueError` carrying the CLI's message (row and column; the file part is absent, since there
//! is no file). Each call validates and computes on a thread of its own, without the GIL, while
//! the calling thread waits and runs Python's signal handlers every 50 ms ([`interruptible`]), so
//! Ctrl-C raises `KeyboardInterrupt` in a long call and cancels its work. Embeddings may be 2-D float16/32/64 numpy
//! arrays; the Python half turns DLPack tensors into numpy views first.

use burn::tensor::{AllocationProperty, Bytes, Device};
use culturelens_compute::cultext2i as cultext2i_core;
use culturelens_compute::device::HostRows;
use culturelens_compute::device::Processor;
use culturelens_compute::sos::{
    Blocking, Pooling, ScoreError, Scored, SosCiMode, SosInterned, SosLayout, per_image_scores, score_device,
};
use culturelens_compute::vendi::{
    Collection, CosineRows, ProductPrecision, Route, categorical_features, group_intervals, point_scores,
};
use culturelens_metrics::bootstrap::{CiError, CiMethod, CiSpec};
use culturelens_metrics::cancel::Cancel;
use culturelens_metrics::validation::CLIPSCORE_W;
use culturelens_results::CsvSchema;
use culturelens_results::cultext2i::Groups as Cultext2iGroups;
use culturelens_results::magbig::{ATTRIBUTE_COLUMNS, GENDER, Magbig, MagbigColumns, magbig_rows};
use culturelens_results::sos::{self as schema, JointColumns, PerImageColumns};
use culturelens_results::validate::{Validation, ValidationColumns, validation_rows};
use culturelens_results::vendi::{Order, Table as VendiTable, VendiFile, VendiScores, table_rows};
use culturelens_table::{ColumnCells, EmbeddingTable, Interned, Matrix, Metadata, TableError, validate_rows};
use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The CLI's global allocator (`culturelens-alloc`): the extension's blocks of 4 MiB and more
/// (SoS and Vendi work buffers, converted tables) advised for huge pages, as numpy's own arrays are.
#[global_allocator]
static ALLOCATOR: culturelens_alloc::HugePageHint = culturelens_alloc::HugePageHint;

pub mod device;
mod encoder;
mod pipeline;

use culturelens_metrics::agreement::Level;
use culturelens_prompts::cultext2i::DEFAULT_GIBBERISH_LENGTH;
use culturelens_prompts::text::language_codes;
use culturelens_prompts::{Fetcher, LoadOptions, PromptError, PromptSet, load as load_prompts};

/// A result table as the CLI writes it: its header and the cells of each row.
type Records = (Vec<String>, Vec<Vec<String>>);

/// Embeddings as the functions read them: row-major f32 values (lent or converted) and their
/// shape.
struct Rows {
    values: HostRows,
    n: usize,
    d: usize,
}

/// The rows of `embeddings` (2-D float16/32/64, any order) as row-major f32. A C-contiguous,
/// aligned float32 array is lent, read in place without a copy; any other is converted with one
/// copy. The second value is the array's read-only borrow (numpy's borrow flag, which other Rust
/// extensions respect), held by the caller until its call returns; the lent buffer itself keeps
/// a reference to the array, so the memory outlives an interrupted call's last read.
fn embeddings_rows<'py>(
    embeddings: &Bound<'py, PyAny>,
) -> PyResult<(Rows, Option<PyReadonlyArray2<'py, f32>>)> {
    fn converted<T: numpy::Element + Copy>(a: PyReadonlyArray2<'_, T>, f: impl Fn(T) -> f32) -> Rows {
        let (n, d) = (a.shape()[0], a.shape()[1]);
        // `as_slice` also takes F order (memory order): only a C-order buffer is read as it lies.
        let data: Vec<f32> = match a.as_slice() {
            Ok(s) if a.is_c_contiguous() => s.iter().map(|&v| f(v)).collect(),
            // F order or strided: ndarray's iterator walks the logical (row-major) order.
            _ => a.as_array().iter().map(|&v| f(v)).collect(),
        };
        Rows { values: data.into(), n, d }
    }
    if let Ok(a) = embeddings.extract::<PyReadonlyArray2<'py, f32>>() {
        let (n, d) = (a.shape()[0], a.shape()[1]);
        let lent = match a.as_slice() {
            Ok(s) if a.is_c_contiguous() && !s.is_empty() => {
                let buffer =
                    NumpyBuffer { _array: embeddings.clone().unbind(), values: s.as_ptr(), len: s.len() };
                HostRows::lent(Bytes::from_shared(
                    bytes::Bytes::from_owner(buffer),
                    AllocationProperty::Other,
                ))
            }
            _ => None,
        };
        return Ok(match lent {
            Some(values) => (Rows { values, n, d }, Some(a)),
            None => (converted(a, |v| v), None),
        });
    }
    if let Ok(a) = embeddings.extract::<PyReadonlyArray2<'_, f64>>() {
        return Ok((converted(a, |v| v as f32), None));
    }
    if let Ok(a) = embeddings.extract::<PyReadonlyArray2<'_, half::f16>>() {
        return Ok((converted(a, half::f16::to_f32), None));
    }
    let what = match embeddings.getattr("dtype").and_then(|d| d.str()) {
        Ok(dtype) => format!("a numpy array of dtype {dtype} and {} dimensions", dims(embeddings)),
        Err(_) => format!("a {}", embeddings.get_type().name().map_or("?".into(), |n| n.to_string())),
    };
    Err(PyTypeError::new_err(format!(
        "embeddings: expected a 2-D numpy array of float16, float32 or float64 (N x d), got {what}"
    )))
}

/// A numpy array's float32 buffer, lent to [`HostRows`] for as long as they hold it: the array
/// stays alive through its reference, and its memory is only read.
struct NumpyBuffer {
    _array: Py<PyAny>,
    values: *const f32,
    len: usize,
}

// SAFETY: the buffer is only read, and the array it belongs to lives while `_array` does (`Py`
// is `Send`; dropped off the interpreter, its reference is released at the next attach).
unsafe impl Send for NumpyBuffer {}

impl AsRef<[u8]> for NumpyBuffer {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `values` points at `len` f32s of the array `_array` keeps alive (non-empty,
        // so not dangling); a numpy array cannot be resized while another reference holds it.
        unsafe { std::slice::from_raw_parts(self.values.cast::<u8>(), self.len * size_of::<f32>()) }
    }
}

fn dims(a: &Bound<'_, PyAny>) -> String {
    a.getattr("ndim").map_or("?".into(), |n| n.to_string())
}

fn table_error(e: TableError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Embeddings and metadata columns as the CLI's validated [`EmbeddingTable`] (the rows copied
/// when lent), with the names of the two inputs in its errors as [`checked`] gives them.
fn named_table(
    rows: Rows,
    columns: Option<Vec<(String, Vec<String>)>>,
    names: [&'static str; 2],
) -> PyResult<EmbeddingTable> {
    let meta = checked(&rows, columns, names)?;
    Ok(EmbeddingTable::new(Matrix::new(rows.n, rows.d, rows.values.into_vec()), meta))
}

/// The checks of the CLI's table loading on embeddings and metadata columns (without `columns`,
/// embeddings without metadata, as `--embeddings E.npy` without `--meta`): the metadata, its row
/// count, then every row finite with a non-zero norm; the metadata on success. `names[0]` names
/// the embeddings in errors, `names[1]` the metadata; with the names `embeddings` and `meta` the
/// errors are the CLI's messages without a file.
fn checked(
    rows: &Rows,
    columns: Option<Vec<(String, Vec<String>)>>,
    names: [&'static str; 2],
) -> PyResult<Metadata> {
    let columns = columns.map(|c| c.into_iter().map(|(name, cells)| (name, cells.into())).collect());
    let meta = checked_meta(rows.n, columns, names)?;
    RowsCheck::Later.wait(rows, names[0])?;
    Ok(meta)
}

/// [`checked`]'s checks of the metadata and its row count (`n`, the embeddings').
fn checked_meta(
    n: usize,
    columns: Option<Vec<(String, ColumnCells)>>,
    names: [&'static str; 2],
) -> PyResult<Metadata> {
    let meta_error = |e: PyErr| if names[1] == "meta" { e } else { argument(names[1], e) };
    let meta = match columns {
        Some(columns) => {
            Metadata::from_column_cells(None, columns).map_err(table_error).map_err(meta_error)?
        }
        None => Metadata::empty(n),
    };
    if meta.n_rows() != n {
        return Err(PyValueError::new_err(format!(
            "{}: row-count mismatch: the metadata has {} data rows but {} has {n} embeddings",
            names[1],
            meta.n_rows(),
            names[0]
        )));
    }
    Ok(meta)
}

/// [`checked`]'s check of the rows (named `name` in errors), run when waited for, or started
/// early on a thread of its own for lent rows (a clone shares them): it reads the whole table
/// once, bound by memory on one core, while the caller extracts the metadata and builds SoS's
/// layout on the other. The caller checks the metadata first and waits for this before any error
/// of its own, so the errors keep [`checked`]'s order.
enum RowsCheck {
    Running(std::thread::JoinHandle<PyResult<()>>),
    Later,
}

impl RowsCheck {
    /// The check of lent rows started; a check for later for owned ones (a clone would copy).
    fn start(rows: &Rows, name: &'static str) -> RowsCheck {
        match rows.values.clone_if_lent() {
            Some(values) => {
                let (n, d) = (rows.n, rows.d);
                RowsCheck::Running(std::thread::spawn(move || check_rows(&values, n, d, name)))
            }
            None => RowsCheck::Later,
        }
    }

    /// The check's result, once it is done (`rows` are those it was started on).
    fn wait(self, rows: &Rows, name: &'static str) -> PyResult<()> {
        self.join().unwrap_or_else(|| check_rows(&rows.values, rows.n, rows.d, name))
    }

    /// The started check's result, once it is done; `None` for a check for later.
    fn join(self) -> Option<PyResult<()>> {
        match self {
            RowsCheck::Running(thread) => Some(
                thread
                    .join()
                    .unwrap_or_else(|_| Err(PyRuntimeError::new_err("the embeddings' check panicked"))),
            ),
            RowsCheck::Later => None,
        }
    }
}

/// Every row finite with a non-zero norm (`culturelens_table::validate_rows`), the error naming
/// the embeddings `name`.
fn check_rows(values: &HostRows, n: usize, d: usize, name: &str) -> PyResult<()> {
    validate_rows(values.as_slice(), n, d, None)
        .map_err(table_error)
        .map_err(|e| if name == "embeddings" { e } else { argument(name, e) })
}

/// The `pool` argument as the CLI's `--pool`.
fn pooling(pool: &str) -> PyResult<Pooling> {
    match pool {
        "all" => Ok(Pooling::All),
        "per-model" => Ok(Pooling::PerModel),
        other => Err(PyValueError::new_err(format!(
            "pool: expected 'all' or 'per-model' (as `culturelens sos --pool`), got {other:?}"
        ))),
    }
}

/// SoS of a validated table on the CPU device, as `culturelens sos` scores it (`score_table`),
/// and the table's `image` cells.
fn score_sos(
    rows: Rows,
    meta: Metadata,
    rows_check: RowsCheck,
    pooling: Pooling,
    ci: Option<SosCi>,
) -> PyResult<(Scored, Option<Vec<String>>)> {
    let d = rows.d;
    let images = meta.column(schema::IMAGE).map(<[String]>::to_vec);
    // The metadata's part beside the rows' check, whose error comes first (as the CLI checks the
    // rows when it loads them); the rows are scored only once they passed it.
    let layout = || {
        // The cluster columns first, as the command reads them before scoring.
        let keys = match &ci {
            Some(ci) => ci
                .cluster
                .iter()
                .map(|c| meta.require_nonempty_column(c).map(<[String]>::to_vec))
                .collect::<Result<Vec<_>, _>>()
                .map_err(table_error)?,
            None => Vec::new(),
        };
        let required = |name: &'static str| meta.require_nonempty_interned(name).map_err(table_error);
        // Present or not by name: `Metadata::column` would make an interned column's strings.
        let optional =
            |name: &'static str| meta.names().iter().any(|n| n == name).then(|| required(name)).transpose();
        let (model, language, culture) = (required("model")?, required("language")?, required("culture")?);
        let (layer, person) = (optional("layer")?, optional("person")?);
        let cols = SosInterned {
            model: &model,
            language: &language,
            culture: &culture,
            layer: layer.as_deref(),
            person: person.as_deref(),
        };
        let layout =
            SosLayout::from_interned(cols, pooling).map_err(|e| sos_error(ScoreError::Sos(e.into())))?;
        Ok((layout, keys))
    };
    let layout: PyResult<_> = layout();
    // Lent rows are scored while their check runs on its own thread (an error of the check comes
    // before any of the scoring's, and the report is made of checked rows only); owned rows are
    // checked first.
    let (layout, keys) = match layout {
        Ok(layout) => layout,
        Err(e) => {
            rows_check.wait(&rows, "embeddings")?;
            return Err(e);
        }
    };
    if let RowsCheck::Later = rows_check {
        check_rows(&rows.values, rows.n, d, "embeddings")?;
    }
    let device = Device::flex();
    let (processor, blocking) = (Processor::Cpu, Blocking::Default(Processor::Cpu));
    let scores = score_device(&layout, rows.values, d, &device, processor, blocking, &mut |_| {});
    rows_check.join().transpose()?;
    let (values, blocks) = scores.map_err(sos_error)?;
    let mut scored = Scored::report(layout, values, blocks);
    if let Some(ci) = ci {
        let keys: Vec<&[String]> = keys.iter().map(Vec::as_slice).collect();
        let cluster = (!keys.is_empty()).then_some(keys.as_slice());
        let chunk_rows = blocking.chunk_rows(d);
        scored.add_intervals(cluster, ci.mode, ci.spec, chunk_rows).map_err(|e| {
            PyValueError::new_err(format!("SoS cannot be computed on a bootstrap resample: {e}"))
        })?;
    }
    Ok((scored, images))
}

/// A scoring error as `culturelens sos` reports it.
fn sos_error(e: ScoreError) -> PyErr {
    match e {
        ScoreError::Sos(e) => PyValueError::new_err(format!("SoS cannot be computed for this table: {e}")),
        e @ ScoreError::Upload(_) => PyValueError::new_err(e.to_string()),
    }
}

/// `sos --ci`'s settings: the interval, the mode and the cluster columns.
struct SosCi {
    spec: CiSpec,
    mode: SosCiMode,
    cluster: Vec<String>,
}

/// The `ci`, `ci_mode` and `cluster` arguments of `sos` and `sos_report` as the CLI checks them.
fn sos_ci(spec: Option<CiSpec>, ci_mode: &str, cluster: Vec<String>) -> PyResult<Option<SosCi>> {
    let mode = match ci_mode {
        "fast" => SosCiMode::Fast,
        "exact" => SosCiMode::Exact,
        other => {
            return Err(PyValueError::new_err(format!("ci_mode: expected 'fast' or 'exact', got {other:?}")));
        }
    };
    match spec {
        Some(spec) => Ok(Some(SosCi { spec, mode, cluster })),
        None if !cluster.is_empty() => {
            Err(PyValueError::new_err("cluster resamples for the intervals: give ci too"))
        }
        None => Ok(None),
    }
}

/// SoS scores of a table (SoS paper §4.1 Eq. 1) on the CPU device, as `culturelens sos` writes
/// them: `output` "joint" (`--out`: the joint scores, with `ci` their intervals), "per_image"
/// (`--per-image`: every output's score) or "report" (`--report`: the JSON report, SoS §4.1,
/// §5.1–5.2, Fig. 2 and 5, App. C.4). The tables come back as records, the report as its text.
///
/// `columns` may be a function of no argument that gives them. A column's cells come as a list of
/// strings or as [`Cells::Joined`]; with `kind` (a function of
/// a result column's name giving "int", "float" or "text") a table comes back as its header and
/// typed columns ([`typed_columns`]) instead of records.
#[pyfunction]
#[pyo3(signature = (embeddings, columns, pool = "all", output = "joint", ci = None, bootstrap = 1000,
                    ci_method = "bca", seed = 0, ci_mode = "fast", cluster = Vec::new(), kind = None))]
#[allow(clippy::too_many_arguments)]
fn sos<'py>(
    py: Python<'py>,
    embeddings: &Bound<'py, PyAny>,
    columns: &Bound<'py, PyAny>,
    pool: &str,
    output: &str,
    ci: Option<f64>,
    bootstrap: usize,
    ci_method: &str,
    seed: u64,
    ci_mode: &str,
    cluster: Vec<String>,
    kind: Option<Bound<'py, PyAny>>,
) -> PyResult<(Option<Bound<'py, PyAny>>, Option<String>)> {
    let pooling = pooling(pool)?;
    let ci = sos_ci(ci_spec(ci, bootstrap, ci_method, seed)?, ci_mode, cluster)?;
    let with_ci = ci.is_some();
    let output = match output {
        "joint" | "per_image" | "report" => output.to_string(),
        other => {
            return Err(PyValueError::new_err(format!(
                "output: expected 'joint', 'per_image' or 'report', got {other:?}"
            )));
        }
    };
    let (rows, _borrow) = embeddings_rows(embeddings)?;
    // The rows' check beside the extraction of the columns and the layout.
    let rows_check = RowsCheck::start(&rows, "embeddings");
    // A function giving the columns is called now, so the caller's conversion of its table runs
    // beside the rows' check too.
    let columns = if columns.is_callable() { columns.call0()? } else { columns.clone() };
    let columns: Vec<(String, Cells)> = columns
        .extract()
        .map_err(|e: PyErr| PyTypeError::new_err(format!("argument 'columns': {}", e.value(py))))?;
    let (records, report) = interruptible(py, move || {
        let columns = columns
            .into_iter()
            .map(|(name, cells)| cells.column(&name).map(|cells| (name, cells)))
            .collect::<PyResult<Vec<_>>>()?;
        let meta = checked_meta(rows.n, Some(columns), ["embeddings", "meta"])?;
        let (scored, images) = score_sos(rows, meta, rows_check, pooling, ci)?;
        let report = &scored.report;
        match output.as_str() {
            "per_image" => {
                let layout = &scored.layout;
                let columns = PerImageColumns {
                    image: images.is_some(),
                    layer: layout.has_layer,
                    person: layout.person.is_some(),
                };
                let rows = per_image_scores(layout, &scored.values, images.as_deref());
                Ok((Some(records::<schema::PerImage>(&columns, &rows)), None))
            }
            "report" => Ok((None, Some(json_text(|w| schema::write_report(w, report))?))),
            _ => {
                let layer = report.joint.first().is_some_and(|j| j.layer.is_some());
                let columns = JointColumns { layer, ci: with_ci };
                Ok((Some(records::<schema::Joint>(&columns, &report.joint)), None))
            }
        }
    })?;
    let records = match (records, kind) {
        (Some(records), Some(kind)) => Some(typed_columns(py, records, &kind)?.into_any()),
        (Some(records), None) => Some(records.into_pyobject(py)?.into_any()),
        (None, _) => None,
    };
    Ok((records, report))
}

/// A metadata column's cells as the Python half passes them: a list of strings, or `(n, text)`,
/// the `n` cells joined by [`CELL_SEPARATOR`] into one string (a column of strings none of which
/// holds the separator; one string crosses the boundary instead of `n`, and is split here,
/// without the GIL).
#[derive(FromPyObject)]
enum Cells {
    Joined(usize, String),
    List(Vec<String>),
}

/// The separator of [`Cells::Joined`]: the ASCII unit separator, U+001F.
const CELL_SEPARATOR: char = '\u{1f}';

impl Cells {
    /// The cells; a joined text is interned as it is split, without a `String` per cell, and
    /// refused, naming the column, when it does not split into its `n` cells (a cell held the
    /// separator).
    fn column(self, column: &str) -> PyResult<ColumnCells> {
        match self {
            Cells::List(cells) => Ok(ColumnCells::Cells(cells)),
            Cells::Joined(0, text) if text.is_empty() => Ok(ColumnCells::Cells(Vec::new())),
            Cells::Joined(n, text) => {
                let cells = Interned::new(text.split(CELL_SEPARATOR));
                if cells.len() != n {
                    return Err(PyValueError::new_err(format!(
                        "meta: column {column:?}: {n} cells joined by U+001F split into {}: a cell holds U+001F",
                        cells.len()
                    )));
                }
                Ok(ColumnCells::Interned(cells))
            }
        }
    }
}

/// A result table column-wise: its header and, per column, by `kind(name)`: "int", a numpy int64
/// array of the cells parsed as Python's `int` parses them; "float", a numpy float64 array as
/// Python's `float` parses them (Rust's parser rounds correctly too; an empty cell is NaN);
/// "text", the list of cells.
fn typed_columns<'py>(
    py: Python<'py>,
    (header, rows): Records,
    kind: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    let mut columns: Vec<Vec<String>> = header.iter().map(|_| Vec::with_capacity(rows.len())).collect();
    for row in rows {
        for (column, cell) in columns.iter_mut().zip(row) {
            column.push(cell);
        }
    }
    let bad =
        |name: &str, cell: &str| PyValueError::new_err(format!("{name}: cannot parse the cell {cell:?}"));
    let mut typed = Vec::with_capacity(header.len());
    for (name, cells) in header.iter().zip(columns) {
        let column = match kind.call1((name,))?.extract::<String>()?.as_str() {
            "int" => {
                let values = cells
                    .iter()
                    .map(|c| c.parse::<i64>().map_err(|_| bad(name, c)))
                    .collect::<PyResult<Vec<_>>>()?;
                numpy::PyArray1::from_vec(py, values).into_any()
            }
            "float" => {
                let parse = |c: &String| {
                    if c.is_empty() { Ok(f64::NAN) } else { c.parse::<f64>().map_err(|_| bad(name, c)) }
                };
                let values = cells.iter().map(parse).collect::<PyResult<Vec<_>>>()?;
                numpy::PyArray1::from_vec(py, values).into_any()
            }
            _ => cells.into_pyobject(py)?.into_any(),
        };
        typed.push(column);
    }
    (header, typed).into_pyobject(py)
}

/// What a writer of JSON writes, as text.
fn json_text(write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> PyResult<String> {
    let mut bytes = Vec::new();
    write(&mut bytes).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(String::from_utf8(bytes).expect("JSON is UTF-8"))
}

/// `--ci LEVEL --bootstrap B --ci-method M --seed S` as the CLI reads them; `None` without `ci`.
fn ci_spec(ci: Option<f64>, bootstrap: usize, ci_method: &str, seed: u64) -> PyResult<Option<CiSpec>> {
    let Some(level) = ci else { return Ok(None) };
    let method = match ci_method {
        "bca" => CiMethod::Bca,
        "percentile" => CiMethod::Percentile,
        other => {
            return Err(PyValueError::new_err(format!(
                "ci_method: expected 'bca' or 'percentile', got {other:?}"
            )));
        }
    };
    match CiSpec::new(level, bootstrap, seed, method) {
        Ok(spec) => Ok(Some(spec)),
        Err(e @ CiError::Level(_)) => Err(PyValueError::new_err(format!("ci: {e}"))),
        Err(e @ CiError::Resamples) => Err(PyValueError::new_err(format!("bootstrap: {e}"))),
    }
}

/// MAGBIG's gender bias per (model, language, set) of a per-image attribute table given as its
/// columns (`culturelens magbig --out`, MAGBIG §4, App. B).
#[pyfunction]
#[pyo3(signature = (columns, ci = None, bootstrap = 1000, ci_method = "bca", seed = 0))]
fn magbig(
    py: Python<'_>,
    columns: Vec<(String, Vec<String>)>,
    ci: Option<f64>,
    bootstrap: usize,
    ci_method: &str,
    seed: u64,
) -> PyResult<Records> {
    let spec = ci_spec(ci, bootstrap, ci_method, seed)?;
    interruptible(py, move || {
        let meta = Metadata::from_columns(None, columns).map_err(table_error)?;
        let required = |name| meta.require_nonempty_column(name).map_err(table_error);
        let [model, language, set, prompt_id, _] = ATTRIBUTE_COLUMNS.map(required);
        let (model, language, set, prompt_id) = (model?, language?, set?, prompt_id?);
        let gender = meta.require_column(GENDER).map_err(table_error)?;
        let groups = culturelens_metrics::magbig::prompt_counts(model, language, set, prompt_id, gender)
            .map_err(|(row, e)| table_error(TableError::invalid(meta.cell(row, GENDER), e)))?;
        let rows = magbig_rows(&groups, |(model, language, set), counts| match &spec {
            Some(spec) => culturelens_metrics::magbig::intervals(spec, counts, &[model, language, set]),
            None => [None, None],
        });
        Ok(records::<Magbig>(&MagbigColumns { ci: spec.is_some() }, &rows))
    })
}

/// Vendi scores of a collection, or of each group of `group_by` (`culturelens vendi --csv`, CUBE
/// §5.2 Eq. 2–3): the point estimate (no `--protocol-batch`, no `--ci`) on the CPU device.
#[pyfunction]
#[pyo3(signature = (embeddings, columns, q = "1", kernel = None, categories = Vec::new(), weights = Vec::new(),
                    quality_col = None, group_by = None, route = "auto", intdiv = false, ci = None,
                    bootstrap = 1000, ci_method = "bca", seed = 0))]
#[allow(clippy::too_many_arguments)]
fn vendi(
    py: Python<'_>,
    embeddings: Option<&Bound<'_, PyAny>>,
    columns: Option<Vec<(String, Vec<String>)>>,
    q: &str,
    kernel: Option<&str>,
    categories: Vec<String>,
    weights: Vec<f64>,
    quality_col: Option<String>,
    group_by: Option<String>,
    route: &str,
    intdiv: bool,
    ci: Option<f64>,
    bootstrap: usize,
    ci_method: &str,
    seed: u64,
) -> PyResult<Records> {
    let spec = ci_spec(ci, bootstrap, ci_method, seed)?;
    let value = |e: String| PyValueError::new_err(e);
    let q = Order::parse(q).map_err(|e| value(format!("q: {e}")))?;
    let route = match route {
        "auto" => Route::Auto,
        "kernel" => Route::Kernel,
        "dual" => Route::Dual,
        other => return Err(value(format!("route: expected 'auto', 'kernel' or 'dual', got {other:?}"))),
    };
    let kernel = kernel.unwrap_or(if embeddings.is_some() { "cosine" } else { "categorical" });
    // The checks of `culturelens vendi`'s flags, named by argument.
    match kernel {
        "cosine" | "categorical" | "precomputed" => {}
        other => {
            return Err(value(format!(
                "kernel: expected 'cosine', 'categorical' or 'precomputed', got {other:?}"
            )));
        }
    }
    let categorical = kernel == "categorical";
    if !categorical && (!categories.is_empty() || !weights.is_empty()) {
        return Err(value("categories and weights belong to kernel='categorical'".into()));
    }
    if categorical && embeddings.is_some() {
        return Err(value("kernel='categorical' is built from meta alone; drop embeddings".into()));
    }
    if kernel == "precomputed" && route != Route::Auto {
        return Err(value(
            "route applies to cosine and categorical kernels; a precomputed kernel is diagonalised as given"
                .into(),
        ));
    }
    let (rows, _borrow) = match embeddings {
        Some(e) => {
            let (rows, borrow) = embeddings_rows(e)?;
            (Some(rows), borrow)
        }
        None if categorical => (None, None),
        None => return Err(value(format!("kernel='{kernel}' needs embeddings"))),
    };
    let kernel = kernel.to_string();
    interruptible(py, move || {
        let (items, meta) = match (kernel.as_str(), rows) {
            ("cosine", Some(rows)) => {
                let meta = checked(&rows, columns, ["embeddings", "meta"])?;
                let rows = CosineRows::new(rows.values, rows.n, rows.d)
                    .map_err(|e| value(format!("embeddings: {e}")))?;
                (Collection::Cosine(rows), meta)
            }
            ("precomputed", Some(Rows { values, n, d })) => {
                if n != d {
                    return Err(value(format!(
                        "embeddings: a kernel matrix must be square, found {n} x {d}"
                    )));
                }
                let meta = match columns {
                    Some(columns) => {
                        let meta = Metadata::from_columns(None, columns).map_err(table_error)?;
                        if meta.n_rows() != n {
                            return Err(value(format!(
                                "meta: {} metadata rows but the kernel is {n} x {n}",
                                meta.n_rows()
                            )));
                        }
                        meta
                    }
                    None => Metadata::empty(n),
                };
                // As the CLI reads K.npy: f32 values, then f64.
                (Collection::Kernel { k: values.as_slice().iter().map(|v| f64::from(*v)).collect(), n }, meta)
            }
            (_, _) => {
                let Some(columns) = columns else {
                    return Err(value("kernel='categorical' needs meta with the category columns".into()));
                };
                if categories.is_empty() || categories.len() != weights.len() {
                    return Err(value(format!(
                        "kernel='categorical' needs categories and weights with one weight per column (got {} columns, {} weights)",
                        categories.len(),
                        weights.len()
                    )));
                }
                let meta = Metadata::from_columns(None, columns).map_err(table_error)?;
                let cols: Vec<(&str, &[String])> = categories
                    .iter()
                    .map(|c| meta.require_nonempty_column(c).map(|v| (c.as_str(), v)))
                    .collect::<Result<_, _>>()
                    .map_err(table_error)?;
                let f = categorical_features(&cols, &weights).map_err(|e| value(format!("meta: {e}")))?;
                (Collection::Features(f), meta)
            }
        };
        let quality = quality_col
            .as_deref()
            .map(|c| meta.number_column(c, "quality"))
            .transpose()
            .map_err(table_error)?;
        let groups = match group_by.as_deref() {
            Some(col) => meta.row_groups(col).map_err(table_error)?,
            None => vec![(String::new(), (0..items.n()).collect())],
        };
        let device = Device::flex();
        let precision = ProductPrecision::for_device(&device);
        let mut results = BTreeMap::new();
        for (name, rows) in &groups {
            let sub = (rows.len() != items.n()).then(|| items.subset(rows));
            let group = sub.as_ref().unwrap_or(&items);
            let qual: Option<Vec<f64>> = quality.as_ref().map(|q| rows.iter().map(|&i| q[i]).collect());
            let score = point_scores(
                group,
                q,
                qual.as_deref(),
                route,
                intdiv,
                Processor::Cpu,
                precision,
                &device,
                &mut |_| {},
            )
            .map_err(|e| value(format!("embeddings: {e}")))?;
            let score = match &spec {
                Some(spec) => {
                    let [vs, qvs, qvs_norm] =
                        group_intervals(group, qual.as_deref(), q, None, precision, spec, name);
                    VendiScores { vs_ci: vs, qvs_ci: qvs, qvs_norm_ci: qvs_norm, ..score }
                }
                None => score,
            };
            results.insert(name.clone(), score);
        }
        let file = match group_by {
            Some(_) => VendiFile::Groups(results),
            None => VendiFile::Whole(results.remove("").expect("the ungrouped result")),
        };
        let (columns, rows) = table_rows(&file, group_by.as_deref(), spec.is_some());
        Ok(records::<VendiTable>(&columns, &rows))
    })
}

/// One of the four papers' prompt sets as its normalised table (`culturelens prompts export SET
/// --languages ...`): the upstream files fetched and verified (or read from `mirror` /
/// `CULTURELENS_DATA_MIRROR`), parsed, only `languages` kept (all when empty).
#[pyfunction]
#[pyo3(signature = (set, languages = Vec::new(), mirror = None))]
fn prompts_load(
    py: Python<'_>,
    set: &str,
    languages: Vec<String>,
    mirror: Option<PathBuf>,
) -> PyResult<Records> {
    let set = PromptSet::from_name(set).map_err(|e| PyValueError::new_err(format!("set: {e}")))?;
    let prompt_error = |e: PromptError| PyValueError::new_err(e.to_string());
    interruptible(py, move || {
        let fetcher = Fetcher::from_env(mirror).map_err(prompt_error)?;
        if fetcher.first_use(set) {
            eprintln!("Licence of the {set} prompt set (shown once): {}", set.info().licence);
        }
        let options = LoadOptions {
            cultext2i: culturelens_prompts::cultext2i::Options {
                gibberish_length: DEFAULT_GIBBERISH_LENGTH,
                seed: 0,
            },
            ..LoadOptions::default()
        };
        let mut table = load_prompts(set, &fetcher, &options)
            .map_err(|e| PyValueError::new_err(format!("loading the {set} prompt set: {e}")))?;
        if !languages.is_empty() {
            let codes =
                language_codes(&languages).map_err(|e| PyValueError::new_err(format!("languages: {e}")))?;
            table.retain_languages(&codes).map_err(prompt_error)?;
        }
        let meta = table.to_metadata();
        let header: Vec<String> = meta.names().to_vec();
        let columns: Vec<&[String]> = header.iter().map(|n| meta.column(n).expect("named")).collect();
        let rows = (0..meta.n_rows()).map(|r| columns.iter().map(|c| c[r].clone()).collect()).collect();
        Ok((header, rows))
    })
}

/// Inter-rater agreement of the `raters` columns (`culturelens agreement`, SoS App. B.2): the
/// command's JSON report, as text.
#[pyfunction]
#[pyo3(signature = (columns, raters, level = "nominal"))]
fn agreement(
    py: Python<'_>,
    columns: Vec<(String, Vec<String>)>,
    raters: Vec<String>,
    level: &str,
) -> PyResult<String> {
    let level = match level {
        "nominal" => Level::Nominal,
        "ordinal" => Level::Ordinal,
        other => {
            return Err(PyValueError::new_err(format!(
                "level: expected 'nominal' or 'ordinal', got {other:?}"
            )));
        }
    };
    if raters.len() < 2 {
        return Err(PyValueError::new_err(format!(
            "raters needs at least two rater columns (got {})",
            raters.len()
        )));
    }
    interruptible(py, move || {
        let meta = Metadata::from_columns(None, columns).map_err(table_error)?;
        let cols = raters
            .iter()
            .map(|r| meta.require_column(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(table_error)?;
        let coded = culturelens_metrics::agreement::code_ratings(&cols, level)
            .map_err(|e| table_error(TableError::invalid(meta.cell(e.row, &raters[e.rater]), e.message)))?;
        Ok(culturelens_metrics::agreement::report(&coded, &raters, level))
    })
}

/// The SoS validation against human labels (`culturelens validate --out`, SoS §4.2, Table 2):
/// accuracy, P_sur and P_sem of the SoS-sign and CLIPScore labelling rules, all images and
/// without English prompts; point estimates (no `--ci`).
#[pyfunction]
#[pyo3(signature = (columns, raters, sos = None, clipscore = None, ci = None, bootstrap = 1000,
                    ci_method = "bca", seed = 0))]
#[allow(clippy::too_many_arguments)]
fn validate(
    py: Python<'_>,
    columns: Vec<(String, Vec<String>)>,
    raters: Vec<String>,
    sos: Option<String>,
    clipscore: Option<(String, String)>,
    ci: Option<f64>,
    bootstrap: usize,
    ci_method: &str,
    seed: u64,
) -> PyResult<Records> {
    let spec = ci_spec(ci, bootstrap, ci_method, seed)?;
    if sos.is_none() && clipscore.is_none() {
        return Err(PyValueError::new_err(
            "give sos=COL and/or clipscore=(SUR, SEM): there is nothing to validate",
        ));
    }
    interruptible(py, move || {
        let meta = Metadata::from_columns(None, columns).map_err(table_error)?;
        let language = meta.require_column("language").map_err(table_error)?;
        let raters = raters
            .iter()
            .map(|r| meta.require_column(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(table_error)?;
        let sos = sos.as_deref().map(|col| meta.numbers(col)).transpose().map_err(table_error)?;
        let cosines = match &clipscore {
            Some((sur, sem)) => {
                Some((meta.numbers(sur).map_err(table_error)?, meta.numbers(sem).map_err(table_error)?))
            }
            None => None,
        };
        let rows = validation_rows(
            language,
            &raters,
            sos.as_deref(),
            cosines.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice())),
            |name, subset, predicted, human| match &spec {
                Some(spec) => {
                    culturelens_metrics::validation::intervals(spec, name, subset, predicted, human)
                }
                None => [None; 3],
            },
        );
        Ok(records::<Validation>(&ValidationColumns { ci: spec.is_some() }, &rows))
    })
}

/// The CulText2I metrics (`culturelens cultext2i`, CulText2I §6.1, Table 2): NA, NA accuracy, CD
/// and DP per (model, language, concept, template) group, with `ci` their bootstrap intervals,
/// and with `report` the command's JSON report (confusion matrices, CCS, XNA/XDP from `vqa`).
#[pyfunction]
#[pyo3(signature = (images, image_columns, texts, text_columns, temperature = 1.0, report = false,
                    vqa = None, ci = None, bootstrap = 1000, ci_method = "bca", seed = 0))]
#[allow(clippy::too_many_arguments)]
fn cultext2i(
    py: Python<'_>,
    images: &Bound<'_, PyAny>,
    image_columns: Vec<(String, Vec<String>)>,
    texts: &Bound<'_, PyAny>,
    text_columns: Vec<(String, Vec<String>)>,
    temperature: f64,
    report: bool,
    vqa: Option<Vec<(String, Vec<String>)>>,
    ci: Option<f64>,
    bootstrap: usize,
    ci_method: &str,
    seed: u64,
) -> PyResult<(Records, Option<String>)> {
    if !(temperature.is_finite() && temperature > 0.0) {
        return Err(PyValueError::new_err(format!(
            "temperature must be a positive number (got {temperature})"
        )));
    }
    if vqa.is_some() && !report {
        return Err(PyValueError::new_err("vqa answers go into the report: pass report=True"));
    }
    let ci = ci_spec(ci, bootstrap, ci_method, seed)?;
    let (images, _images_borrow) = embeddings_rows(images).map_err(|e| argument("images", e))?;
    let (texts, _texts_borrow) = embeddings_rows(texts).map_err(|e| argument("texts", e))?;
    let (d, dt) = (images.d, texts.d);
    if d != dt {
        return Err(PyValueError::new_err(format!(
            "images has {d}-dimensional embeddings but texts has {dt}: image and text embeddings must come from one model"
        )));
    }
    interruptible(py, move || {
        let images = named_table(images, Some(image_columns), ["images", "image_meta"])?;
        let texts = named_table(texts, Some(text_columns), ["texts", "text_meta"])?;
        let vqa = vqa
            .map(|c| Metadata::from_columns(None, c))
            .transpose()
            .map_err(|e| argument("vqa", table_error(e)))?;
        let options = cultext2i_core::Options { temperature, ci, report: report.then_some(vqa.as_ref()) };
        let result =
            cultext2i_core::cultext2i(&images, &texts, &options, &Device::flex()).map_err(table_error)?;
        let report = result
            .report
            .map(|r| json_text(|w| culturelens_results::cultext2i::write_report(w, &r)))
            .transpose()?;
        Ok((records::<Cultext2iGroups>(&result.columns, &result.rows), report))
    })
}

/// An error about the argument `name`: its message prefixed with the name.
fn argument(name: &str, e: PyErr) -> PyErr {
    Python::attach(|py| {
        let message = e.value(py).to_string();
        // The helpers name their input `embeddings` or `meta`: the caller's name replaces it.
        let message =
            ["embeddings: ", "meta: "].iter().find_map(|p| message.strip_prefix(p)).unwrap_or(&message);
        if message.starts_with(name) {
            e
        } else {
            let prefixed = format!("{name}: {message}");
            if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err(prefixed)
            } else {
                PyValueError::new_err(prefixed)
            }
        }
    })
}

/// CLIPScore of paired image and caption embeddings (`culturelens clipscore`'s `COL_cos` and
/// `COL_clipscore` cells; Hessel et al. 2021, SoS §4.2): `cos(image_i, caption_i)` on the CPU
/// device and `w · max(cos, 0)`.
#[pyfunction]
#[pyo3(signature = (images, captions, w = CLIPSCORE_W))]
fn clipscore(
    py: Python<'_>,
    images: &Bound<'_, PyAny>,
    captions: &Bound<'_, PyAny>,
    w: f64,
) -> PyResult<(Vec<String>, Vec<String>)> {
    let (images, _images_borrow) = embeddings_rows(images).map_err(|e| argument("images", e))?;
    let (captions, _captions_borrow) = embeddings_rows(captions).map_err(|e| argument("captions", e))?;
    let ((n, d), (nc, dc)) = ((images.n, images.d), (captions.n, captions.d));
    if (n, d) != (nc, dc) {
        return Err(PyValueError::new_err(format!(
            "captions: {nc} x {dc} embeddings for {n} x {d} image embeddings: one caption per image, from one model"
        )));
    }
    if !w.is_finite() {
        return Err(PyValueError::new_err(format!("w: expected a finite weight, got {w}")));
    }
    interruptible(py, move || {
        for (name, rows) in [("images", &images), ("captions", &captions)] {
            checked(rows, None, [name, "meta"])?;
        }
        let (images, captions) = (images.values.into_vec(), captions.values.into_vec());
        let scores = culturelens_compute::tensor::clip_scores(images, captions, d, w, &Device::flex());
        Ok(scores.iter().map(|(c, s)| (c.to_string(), s.to_string())).unzip())
    })
}

/// The two-sided Wilcoxon signed-rank test (scipy's defaults; MAGBIG App. C, Tables 5–6) as
/// `culturelens magbig --report --compare` computes it: of `a[k] − b[k]` over the keys in both
/// maps (the report's `test` object), or of the differences `d` (the test's own fields).
#[pyfunction]
#[pyo3(signature = (a = None, b = None, d = None))]
fn wilcoxon(
    a: Option<BTreeMap<String, f64>>,
    b: Option<BTreeMap<String, f64>>,
    d: Option<Vec<f64>>,
) -> PyResult<String> {
    let json = match (a, b, d) {
        (Some(a), Some(b), None) => match culturelens_metrics::magbig::paired_test(&a, &b) {
            Some(test) => serde_json::to_string(&test),
            None => {
                return Err(PyValueError::new_err("a and b have no key in common: there is no pair to test"));
            }
        },
        (None, None, Some(d)) => {
            if let Some(i) = d.iter().position(|x| !x.is_finite()) {
                return Err(PyValueError::new_err(format!(
                    "d[{i}]: expected a finite difference, got {}",
                    d[i]
                )));
            }
            serde_json::to_string(&culturelens_metrics::stats::wilcoxon(&d))
        }
        _ => return Err(PyValueError::new_err("give either a and b (paired by key) or d (the differences)")),
    };
    Ok(json.expect("serialisable"))
}

/// Runs `work` on a thread of its own, without the GIL, and waits for it in slices of
/// [`SIGNAL_POLL`], taking the GIL between them to run Python's signal handlers: Ctrl-C (SIGINT)
/// raises `KeyboardInterrupt` at once (or whatever else a handler raises). The interrupted work
/// is cancelled: its thread runs it under a [`Cancel`] token, which the exception raises, so it
/// stops at its next cancellation point (between bootstrap resamples, Vendi groups, embedding
/// batches: `culturelens_metrics::cancel`) and its partial result is dropped.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> PyResult<T> + Send + 'static,
) -> PyResult<T> {
    use std::sync::mpsc::{RecvTimeoutError, channel};
    let (tx, rx) = channel();
    let cancel = Cancel::new();
    let token = cancel.clone();
    std::thread::Builder::new()
        .name("culturelens".into())
        .spawn(move || {
            // `None`: cancelled, and nobody waits for a result.
            if let Some(result) = token.run(work) {
                let _ = tx.send(result);
            }
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the computation's thread: {e}")))?;
    let mut rx = rx;
    loop {
        // The receiver is `Send`, not `Sync`: it travels into the GIL-free closure and back.
        let (received, back) = py.detach(move || (rx.recv_timeout(SIGNAL_POLL), rx));
        rx = back;
        match received {
            Ok(result) => return result,
            Err(RecvTimeoutError::Timeout) => py.check_signals().inspect_err(|_| cancel.cancel())?,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err("the computation panicked (see the message above)"));
            }
        }
    }
}

/// The built-in SYNTHETIC demo table (`culturelens demo --write DIR`'s `embeddings.npy` and
/// `meta.csv`: `culturelens_metrics::demo::demo_table`, planted tendencies, not data from any
/// model): the `2160 x 64` float32 embeddings and the metadata columns.
#[pyfunction]
fn demo(py: Python<'_>) -> PyResult<Demo<'_>> {
    use numpy::PyArrayMethods;
    let table = culturelens_metrics::demo::demo_table();
    let n = table.len();
    let embeddings = numpy::PyArray1::from_vec(py, table.embeddings).reshape([n, table.dim])?;
    Ok((embeddings, table.columns))
}

/// The demo's embeddings and metadata columns.
type Demo<'py> = (Bound<'py, numpy::PyArray2<f32>>, Vec<(String, Vec<String>)>);

/// How often a waiting call checks for signals.
const SIGNAL_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// The header and cells of `rows` as `S` writes them.
fn records<S: CsvSchema>(columns: &S::Columns, rows: &[S::Row]) -> Records {
    (S::header(columns), rows.iter().map(|r| S::record(columns, r)).collect())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sos, m)?)?;
    m.add_function(wrap_pyfunction!(magbig, m)?)?;
    m.add_function(wrap_pyfunction!(vendi, m)?)?;
    m.add_function(wrap_pyfunction!(prompts_load, m)?)?;
    m.add_function(wrap_pyfunction!(agreement, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(cultext2i, m)?)?;
    m.add_function(wrap_pyfunction!(clipscore, m)?)?;
    m.add_function(wrap_pyfunction!(wilcoxon, m)?)?;
    m.add_function(wrap_pyfunction!(demo, m)?)?;
    m.add_class::<encoder::Encoder>()?;
    m.add_class::<pipeline::Pipeline>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
