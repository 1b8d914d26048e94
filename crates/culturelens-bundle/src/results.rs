//! Result tables a bundle may carry beside its embeddings (manifest field `results`): the outputs
//! of `culturelens magbig` (OUT.csv and its attribute table A.csv) and `culturelens cultext2i`
//! (OUT.csv and its `--report` JSON), stored unchanged under `results/` and listed in `files` with
//! size and SHA-256 like every other file. Parsed here, on bytes, for the browser's result views
//! (`web/src/views/magbig.rs`, `cultext2i.rs` and the educator's occupation slide).

use culturelens_files::sha256_hex;
use serde::Deserialize;

use crate::error::BundleError;
use crate::manifest::{FileEntry, MANIFEST, MAX_RESULT_BYTES, Manifest};

/// Header of `culturelens magbig --out` (the MAGBIG contract).
pub const MAGBIG_HEADER: [&str; 8] =
    ["model", "language", "set", "n_prompts", "n_images", "mad", "mad_random", "male_share"];
/// Leading columns of `culturelens cultext2i --out` (`dp_<label>` columns follow).
pub const CULTEXT2I_HEADER: [&str; 8] =
    ["model", "language", "concept", "template", "n", "na", "na_acc", "cd"];
/// Columns the MAGBIG attribute table must have for the educator panel.
pub const ATTRIBUTE_COLUMNS: [&str; 5] = ["model", "language", "set", "prompt_id", "gender"];

/// The result tables to add to a bundle: (bytes of each file), as the commands wrote them.
#[derive(Debug, Clone, Default)]
pub struct ResultFiles {
    pub magbig: Option<Vec<u8>>,
    pub magbig_attributes: Option<Vec<u8>>,
    pub cultext2i: Option<Vec<u8>>,
    pub cultext2i_report: Option<Vec<u8>>,
}

/// Adds `results` to the files of a bundle made by [`crate::build_bundle`] (manifest last): each
/// is parsed first (a table that does not parse is refused, naming the file, row and column),
/// stored under `results/`, listed in `files` and in the manifest's `results`.
pub fn attach_results(files: &mut Vec<(String, Vec<u8>)>, results: ResultFiles) -> Result<(), BundleError> {
    let (name, manifest_bytes) = files.pop().expect("build_bundle returns the manifest last");
    assert_eq!(name, MANIFEST, "build_bundle returns the manifest last");
    let mut manifest = Manifest::parse(&manifest_bytes)?;
    let slots = [
        (results.magbig, "results/magbig.csv", Kind::Magbig),
        (results.magbig_attributes, "results/magbig-attributes.csv", Kind::Attributes),
        (results.cultext2i, "results/cultext2i.csv", Kind::Cultext2i),
        (results.cultext2i_report, "results/cultext2i-report.json", Kind::Cultext2iReport),
    ];
    for (bytes, path, kind) in slots {
        let Some(bytes) = bytes else { continue };
        if bytes.len() as u64 > MAX_RESULT_BYTES {
            return Err(BundleError::new(
                path,
                format!(
                    "{} bytes, more than the {MAX_RESULT_BYTES}-byte limit for a result table",
                    bytes.len()
                ),
            ));
        }
        match kind {
            Kind::Magbig => drop(parse_magbig(path, &bytes)?),
            Kind::Attributes => drop(parse_attributes(path, &bytes)?),
            Kind::Cultext2i => drop(parse_cultext2i(path, &bytes)?),
            Kind::Cultext2iReport => drop(parse_cultext2i_report(path, &bytes)?),
        }
        let slot = match kind {
            Kind::Magbig => &mut manifest.results.magbig,
            Kind::Attributes => &mut manifest.results.magbig_attributes,
            Kind::Cultext2i => &mut manifest.results.cultext2i,
            Kind::Cultext2iReport => &mut manifest.results.cultext2i_report,
        };
        *slot = Some(path.to_string());
        manifest.files.push(FileEntry {
            path: path.to_string(),
            bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
        });
        files.push((path.to_string(), bytes));
    }
    manifest.validate()?;
    files.push((
        MANIFEST.to_string(),
        serde_json::to_vec_pretty(&manifest).expect("a manifest always serialises"),
    ));
    Ok(())
}

#[derive(Clone, Copy)]
enum Kind {
    Magbig,
    Attributes,
    Cultext2i,
    Cultext2iReport,
}

/// One row of the MAGBIG table.
#[derive(Debug, Clone, PartialEq)]
pub struct MagbigRow {
    pub model: String,
    pub language: String,
    pub set: String,
    pub n_prompts: usize,
    pub n_images: usize,
    pub mad: f64,
    pub mad_random: f64,
    pub male_share: f64,
}

/// One row of the CulText2I table; `dp` holds the `dp_<label>` columns as (label, value).
#[derive(Debug, Clone, PartialEq)]
pub struct Cultext2iRow {
    pub model: String,
    pub language: String,
    pub concept: String,
    pub template: String,
    pub n: usize,
    pub na: f64,
    pub na_acc: f64,
    pub cd: f64,
    pub dp: Vec<(String, f64)>,
}

/// A CSV as its header and records, strictly rectangular.
fn read_csv(path: &str, bytes: &[u8]) -> Result<(Vec<String>, Vec<Vec<String>>), BundleError> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| BundleError::new(path, format!("cannot read the header row: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for (row, record) in reader.records().enumerate() {
        let record = record.map_err(|e| BundleError::new(path, format!("malformed CSV: {e}")).row(row))?;
        rows.push(record.iter().map(str::to_string).collect());
    }
    Ok((header, rows))
}

fn number<T: std::str::FromStr>(path: &str, row: usize, column: &str, text: &str) -> Result<T, BundleError> {
    text.parse::<T>()
        .map_err(|_| BundleError::new(path, format!("`{text}` is not a number")).row(row).column(column))
}

fn finite(path: &str, row: usize, column: &str, text: &str) -> Result<f64, BundleError> {
    let v: f64 = number(path, row, column, text)?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(BundleError::new(path, format!("`{text}` is not a finite number")).row(row).column(column))
    }
}

fn expect_header(path: &str, header: &[String], want: &[&str], command: &str) -> Result<(), BundleError> {
    if header.len() < want.len() || header[..want.len()].iter().zip(want).any(|(h, w)| h != w) {
        return Err(BundleError::new(
            path,
            format!("header is `{}`, expected `{}` ({command})", header.join(","), want.join(",")),
        ));
    }
    Ok(())
}

/// Parses `culturelens magbig --out`: exactly [`MAGBIG_HEADER`], counts and finite numbers.
pub fn parse_magbig(path: &str, bytes: &[u8]) -> Result<Vec<MagbigRow>, BundleError> {
    let (header, rows) = read_csv(path, bytes)?;
    expect_header(path, &header, &MAGBIG_HEADER, "culturelens magbig --out")?;
    if header.len() != MAGBIG_HEADER.len() {
        return Err(BundleError::new(path, format!("header has {} columns, expected 8", header.len())));
    }
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let c = |k: usize| r[k].as_str();
            Ok(MagbigRow {
                model: c(0).to_string(),
                language: c(1).to_string(),
                set: c(2).to_string(),
                n_prompts: number(path, i, "n_prompts", c(3))?,
                n_images: number(path, i, "n_images", c(4))?,
                mad: finite(path, i, "mad", c(5))?,
                mad_random: finite(path, i, "mad_random", c(6))?,
                male_share: finite(path, i, "male_share", c(7))?,
            })
        })
        .collect()
}

/// Parses `culturelens cultext2i --out`: [`CULTEXT2I_HEADER`] then `dp_<label>` columns.
pub fn parse_cultext2i(path: &str, bytes: &[u8]) -> Result<Vec<Cultext2iRow>, BundleError> {
    let (header, rows) = read_csv(path, bytes)?;
    expect_header(path, &header, &CULTEXT2I_HEADER, "culturelens cultext2i --out")?;
    let dp_labels: Vec<&str> = header[CULTEXT2I_HEADER.len()..]
        .iter()
        .map(|h| {
            h.strip_prefix("dp_").ok_or_else(|| {
                BundleError::new(path, "columns after `cd` must be `dp_<label>`").column(h.as_str())
            })
        })
        .collect::<Result<_, _>>()?;
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let c = |k: usize| r[k].as_str();
            let dp = dp_labels
                .iter()
                .enumerate()
                .map(|(k, label)| Ok((label.to_string(), finite(path, i, &header[8 + k], c(8 + k))?)))
                .collect::<Result<_, BundleError>>()?;
            Ok(Cultext2iRow {
                model: c(0).to_string(),
                language: c(1).to_string(),
                concept: c(2).to_string(),
                template: c(3).to_string(),
                n: number(path, i, "n", c(4))?,
                na: finite(path, i, "na", c(5))?,
                na_acc: finite(path, i, "na_acc", c(6))?,
                cd: finite(path, i, "cd", c(7))?,
                dp,
            })
        })
        .collect()
}

/// The MAGBIG attribute table as named columns (every [`ATTRIBUTE_COLUMNS`] present; the gender
/// values are checked by the app with the core's parser).
pub fn parse_attributes(path: &str, bytes: &[u8]) -> Result<Vec<(String, Vec<String>)>, BundleError> {
    let (header, rows) = read_csv(path, bytes)?;
    for required in ATTRIBUTE_COLUMNS {
        if !header.iter().any(|h| h == required) {
            return Err(BundleError::new(
                path,
                format!("missing required column (columns present: {})", header.join(", ")),
            )
            .column(required));
        }
    }
    Ok(header
        .into_iter()
        .enumerate()
        .map(|(k, name)| (name, rows.iter().map(|r| r[k].clone()).collect()))
        .collect())
}

/// One model's NA confusion matrix (rows = true, columns = predicted nationality).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Confusion {
    pub counts: Vec<Vec<usize>>,
    pub n: usize,
    pub accuracy: Option<f64>,
}

/// The parts of `culturelens cultext2i --report` the app shows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Cultext2iReport {
    pub nationalities: Vec<String>,
    /// Per model, in model order.
    pub confusion: std::collections::BTreeMap<String, Confusion>,
}

/// Parses the CulText2I report: the nationality labels and a k × k confusion matrix per model.
pub fn parse_cultext2i_report(path: &str, bytes: &[u8]) -> Result<Cultext2iReport, BundleError> {
    let report: Cultext2iReport = serde_json::from_slice(bytes).map_err(|e| {
        BundleError::new(
            path,
            format!("not a `culturelens cultext2i --report` JSON (invalid JSON or missing field): {e}"),
        )
    })?;
    let k = report.nationalities.len();
    for (model, c) in &report.confusion {
        if c.counts.len() != k || c.counts.iter().any(|r| r.len() != k) {
            return Err(BundleError::new(
                path,
                format!(
                    "confusion matrix of model `{model}` is not {k} × {k} (one row and column per nationality)"
                ),
            ));
        }
    }
    Ok(report)
}
