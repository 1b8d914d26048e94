//! `culturelens._native`: the compiled half of the Python package `culturelens` (PyO3, abi3 for
//! every Python ≥ 3.9). Each function is the CLI command's own code path on in-memory inputs:
//! numpy arrays in, the command's result rows out as (header, records) with the cells the
//! command writes (`culturelens_results`' schemas), so a DataFrame built from them has the CLI's
//! columns and, parsed, its values to the last bit. The pure-Python half
//! (`python/culturelens/__init__.py`) turns DataFrames into columns and the records back into
//! DataFrames, so pandas is needed only by the calls that take or return one.
//!
//! Conventions: embeddings are a 2-D numpy array of float16, float32 or float64 in any memory
//! order, converted to f32 as the CLI's `.npy` reader converts (f16 exactly, f64 rounded to
//! nearest); one copy is made, since the device takes ownership of its buffer (on the CPU it
//! then uses it in place). Validation is the CLI's (`culturelens_table`), and every error is a
//! `ValueError` carrying the CLI's message (row and column; the file part is absent, since there
//! is no file). The GIL is released while the table is validated and scored.

use burn::tensor::Device;
use culturelens_compute::device::Processor;
use culturelens_compute::sos::{Blocking, Pooling, ScoreError, SosColumns, per_image_scores, score_rows};
use culturelens_compute::vendi::{
    Collection, CosineRows, ProductPrecision, Route, categorical_features, point_scores,
};
use culturelens_results::CsvSchema;
use culturelens_results::magbig::{ATTRIBUTE_COLUMNS, GENDER, Magbig, MagbigColumns, magbig_rows};
use culturelens_results::sos::{self as schema, JointColumns, PerImageColumns};
use culturelens_results::validate::{Validation, ValidationColumns, validation_rows};
use culturelens_results::vendi::{Order, Table as VendiTable, VendiFile, table_rows};
use culturelens_table::{EmbeddingTable, Matrix, Metadata, TableError};
use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

use culturelens_metrics::agreement::Level;
use culturelens_prompts::cultext2i::DEFAULT_GIBBERISH_LENGTH;
use culturelens_prompts::text::language_codes;
use culturelens_prompts::{Fetcher, LoadOptions, PromptError, PromptSet, load as load_prompts};

/// A result table as the CLI writes it: its header and the cells of each row.
type Records = (Vec<String>, Vec<Vec<String>>);

/// The rows of `embeddings` (2-D float16/32/64, any order) as row-major f32, and the column count.
fn embeddings_f32(embeddings: &Bound<'_, PyAny>) -> PyResult<(Vec<f32>, usize, usize)> {
    fn rows<T: numpy::Element + Copy>(
        a: PyReadonlyArray2<'_, T>,
        f: impl Fn(T) -> f32,
    ) -> (Vec<f32>, usize, usize) {
        let (n, d) = (a.shape()[0], a.shape()[1]);
        // `as_slice` also takes F order (memory order): only a C-order buffer is read as it lies.
        let data = match a.as_slice() {
            Ok(s) if a.is_c_contiguous() => s.iter().map(|&v| f(v)).collect(),
            // F order or strided: ndarray's iterator walks the logical (row-major) order.
            _ => a.as_array().iter().map(|&v| f(v)).collect(),
        };
        (data, n, d)
    }
    if let Ok(a) = embeddings.extract::<PyReadonlyArray2<'_, f32>>() {
        return Ok(rows(a, |v| v));
    }
    if let Ok(a) = embeddings.extract::<PyReadonlyArray2<'_, f64>>() {
        return Ok(rows(a, |v| v as f32));
    }
    if let Ok(a) = embeddings.extract::<PyReadonlyArray2<'_, half::f16>>() {
        return Ok(rows(a, half::f16::to_f32));
    }
    let what = match embeddings.getattr("dtype").and_then(|d| d.str()) {
        Ok(dtype) => format!("a numpy array of dtype {dtype} and {} dimensions", dims(embeddings)),
        Err(_) => format!("a {}", embeddings.get_type().name().map_or("?".into(), |n| n.to_string())),
    };
    Err(PyTypeError::new_err(format!(
        "embeddings: expected a 2-D numpy array of float16, float32 or float64 (N x d), got {what}"
    )))
}

fn dims(a: &Bound<'_, PyAny>) -> String {
    a.getattr("ndim").map_or("?".into(), |n| n.to_string())
}

fn table_error(e: TableError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Embeddings and metadata columns as the CLI's validated [`EmbeddingTable`]; without `columns`,
/// embeddings without metadata (as `--embeddings E.npy` without `--meta`).
fn table(
    data: Vec<f32>,
    n: usize,
    d: usize,
    columns: Option<Vec<(String, Vec<String>)>>,
) -> PyResult<EmbeddingTable> {
    let meta = match columns {
        Some(columns) => Metadata::from_columns(None, columns).map_err(table_error)?,
        None => Metadata::empty(n),
    };
    if meta.n_rows() != n {
        return Err(PyValueError::new_err(format!(
            "meta: row-count mismatch: the metadata has {} data rows but embeddings has {n} embeddings",
            meta.n_rows()
        )));
    }
    let table = EmbeddingTable::new(Matrix::new(n, d, data), meta);
    table.validate(None).map_err(table_error)?;
    Ok(table)
}

/// SoS scores of a table: the joint scores and, with `per_image`, every output's score
/// (`culturelens sos --out` and `--per-image`, SoS paper §4.1 Eq. 1), on the CPU device.
#[pyfunction]
#[pyo3(signature = (embeddings, columns, pool = "all", per_image = false))]
fn sos(
    py: Python<'_>,
    embeddings: &Bound<'_, PyAny>,
    columns: Vec<(String, Vec<String>)>,
    pool: &str,
    per_image: bool,
) -> PyResult<Records> {
    let pooling = match pool {
        "all" => Pooling::All,
        "per-model" => Pooling::PerModel,
        other => {
            return Err(PyValueError::new_err(format!(
                "pool: expected 'all' or 'per-model' (as `culturelens sos --pool`), got {other:?}"
            )));
        }
    };
    let (data, n, d) = embeddings_f32(embeddings)?;
    py.detach(move || {
        let EmbeddingTable { embeddings, meta } = table(data, n, d, Some(columns))?;
        let images = meta.column(schema::IMAGE).map(<[String]>::to_vec);
        let required = |name| meta.require_nonempty_column(name).map_err(table_error);
        let optional = |name| meta.column(name).map(|_| required(name)).transpose();
        let cols = SosColumns {
            model: required("model")?,
            language: required("language")?,
            culture: required("culture")?,
            layer: optional("layer")?,
            person: optional("person")?,
        };
        let device = Device::flex();
        let scored = score_rows(
            embeddings.into_data(),
            d,
            cols,
            pooling,
            &device,
            Processor::Cpu,
            Blocking::Default(Processor::Cpu),
            &mut |_| {},
        )
        .map_err(|e| match e {
            ScoreError::Sos(e) => {
                PyValueError::new_err(format!("SoS cannot be computed for this table: {e}"))
            }
            e @ ScoreError::Upload(_) => PyValueError::new_err(e.to_string()),
        })?;
        if per_image {
            let layout = &scored.layout;
            let columns = PerImageColumns {
                image: images.is_some(),
                layer: layout.has_layer,
                person: layout.person.is_some(),
            };
            let rows = per_image_scores(layout, &scored.values, images.as_deref());
            Ok(records::<schema::PerImage>(&columns, &rows))
        } else {
            let report = &scored.report;
            let columns =
                JointColumns { layer: report.joint.first().is_some_and(|j| j.layer.is_some()), ci: false };
            Ok(records::<schema::Joint>(&columns, &report.joint))
        }
    })
}

/// MAGBIG's gender bias per (model, language, set) of a per-image attribute table given as its
/// columns (`culturelens magbig --out`, MAGBIG §4, App. B).
#[pyfunction]
fn magbig(py: Python<'_>, columns: Vec<(String, Vec<String>)>) -> PyResult<Records> {
    py.detach(move || {
        let meta = Metadata::from_columns(None, columns).map_err(table_error)?;
        let required = |name| meta.require_nonempty_column(name).map_err(table_error);
        let [model, language, set, prompt_id, _] = ATTRIBUTE_COLUMNS.map(required);
        let (model, language, set, prompt_id) = (model?, language?, set?, prompt_id?);
        let gender = meta.require_column(GENDER).map_err(table_error)?;
        let groups = culturelens_metrics::magbig::prompt_counts(model, language, set, prompt_id, gender)
            .map_err(|(row, e)| table_error(TableError::invalid(meta.cell(row, GENDER), e)))?;
        let rows = magbig_rows(&groups, |_, _| [None, None]);
        Ok(records::<Magbig>(&MagbigColumns { ci: false }, &rows))
    })
}

/// Vendi scores of a collection, or of each group of `group_by` (`culturelens vendi --csv`, CUBE
/// §5.2 Eq. 2–3): the point estimate (no `--protocol-batch`, no `--ci`) on the CPU device.
#[pyfunction]
#[pyo3(signature = (embeddings, columns, q = "1", kernel = None, categories = Vec::new(), weights = Vec::new(),
                    quality_col = None, group_by = None, route = "auto", intdiv = false))]
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
) -> PyResult<Records> {
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
    let rows = match embeddings {
        Some(e) => Some(embeddings_f32(e)?),
        None if categorical => None,
        None => return Err(value(format!("kernel='{kernel}' needs embeddings"))),
    };
    let kernel = kernel.to_string();
    py.detach(move || {
        let (items, meta) = match (kernel.as_str(), rows) {
            ("cosine", Some((data, n, d))) => {
                let EmbeddingTable { embeddings, meta } = table(data, n, d, columns)?;
                let rows = CosineRows::new(embeddings.into_data(), n, d)
                    .map_err(|e| value(format!("embeddings: {e}")))?;
                (Collection::Cosine(rows), meta)
            }
            ("precomputed", Some((data, n, d))) => {
                if n != d {
                    return Err(value(format!("embeddings: a kernel matrix must be square, found {n} x {d}")));
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
                (Collection::Kernel { k: data.iter().map(|v| f64::from(*v)).collect(), n }, meta)
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
        let quality = quality_col.as_deref().map(|c| meta.number_column(c, "quality")).transpose().map_err(table_error)?;
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
            let score =
                point_scores(group, q, qual.as_deref(), route, intdiv, Processor::Cpu, precision, &device, &mut |_| {})
                    .map_err(|e| value(format!("embeddings: {e}")))?;
            results.insert(name.clone(), score);
        }
        let file = match group_by {
            Some(_) => VendiFile::Groups(results),
            None => VendiFile::Whole(results.remove("").expect("the ungrouped result")),
        };
        let (columns, rows) = table_rows(&file, group_by.as_deref(), false);
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
    py.detach(move || {
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
    py.detach(move || {
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
#[pyo3(signature = (columns, raters, sos = None, clipscore = None))]
fn validate(
    py: Python<'_>,
    columns: Vec<(String, Vec<String>)>,
    raters: Vec<String>,
    sos: Option<String>,
    clipscore: Option<(String, String)>,
) -> PyResult<Records> {
    if sos.is_none() && clipscore.is_none() {
        return Err(PyValueError::new_err(
            "give sos=COL and/or clipscore=(SUR, SEM): there is nothing to validate",
        ));
    }
    py.detach(move || {
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
            |_, _, _, _| [None; 3],
        );
        Ok(records::<Validation>(&ValidationColumns { ci: false }, &rows))
    })
}

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
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
