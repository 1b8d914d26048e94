//! Result tables a bundle may carry beside its embeddings (manifest field `results`): the outputs
//! of `culturelens magbig` (OUT.csv and its attribute table A.csv) and `culturelens cultext2i`
//! (OUT.csv and its `--report` JSON), stored unchanged under `results/` and listed in `files` with
//! size and SHA-256 like every other file. Parsed here, on bytes, through their schemas in
//! `culturelens-results`, for the browser's result views (`web/src/views/magbig.rs`,
//! `cultext2i.rs` and the educator's occupation slide).

use culturelens_results::cultext2i::{self, Cultext2iReport, Cultext2iRow};
use culturelens_results::magbig::{self, MagbigRow};

use crate::error::BundleError;
use crate::manifest::{FileEntry, MANIFEST, MAX_RESULT_BYTES, Manifest};

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
/// stored under `results/`, listed in `files` (in pieces of `piece_bytes`, as
/// [`crate::BundleSpec::piece_bytes`]) and in the manifest's `results`.
pub fn attach_results(
    files: &mut Vec<(String, Vec<u8>)>,
    results: ResultFiles,
    piece_bytes: u64,
) -> Result<(), BundleError> {
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
        manifest.files.push(FileEntry::new(path, &bytes, piece_bytes));
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

/// Parses `culturelens magbig --out` (the schema [`magbig::Magbig`]): exactly its header, counts
/// and finite numbers.
pub fn parse_magbig(path: &str, bytes: &[u8]) -> Result<Vec<MagbigRow>, BundleError> {
    Ok(culturelens_results::read::<magbig::Magbig>(path, bytes)?.1)
}

/// Parses `culturelens cultext2i --out` (the schema [`cultext2i::Groups`]): its fixed columns then
/// `dp_<label>` columns.
pub fn parse_cultext2i(path: &str, bytes: &[u8]) -> Result<Vec<Cultext2iRow>, BundleError> {
    Ok(culturelens_results::read::<cultext2i::Groups>(path, bytes)?.1)
}

/// The MAGBIG attribute table as named columns (every [`magbig::ATTRIBUTE_COLUMNS`] present; the
/// gender values are checked by the app with the metrics' parser).
pub fn parse_attributes(path: &str, bytes: &[u8]) -> Result<Vec<(String, Vec<String>)>, BundleError> {
    Ok(magbig::read_attributes(path, bytes)?)
}

/// Parses the CulText2I report: the nationality labels and a k × k confusion matrix per model.
pub fn parse_cultext2i_report(path: &str, bytes: &[u8]) -> Result<Cultext2iReport, BundleError> {
    Ok(cultext2i::read_report(path, bytes)?)
}
