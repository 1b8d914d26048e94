//! The normalised prompt table every set is turned into, and its CSV / Parquet export.
//!
//! Every table has the [`COMMON_COLUMNS`] (empty where a column does not apply to a set) followed by
//! its set's own columns. All values are strings; the CSV has a header row.

use std::collections::HashSet;
use std::path::Path;

use culturelens_table::Metadata;
#[cfg(feature = "io")]
use culturelens_table::{write_atomic, write_metadata_csv, write_metadata_parquet};

use crate::error::PromptError;
use crate::registry::PromptSet;

/// A documented output column.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub doc: &'static str,
}

/// The columns every exported prompt table starts with, in this order.
pub const COMMON_COLUMNS: [Column; 14] = [
    Column { name: "id", doc: "stable unique id of the prompt, e.g. sos-de-a-honduran-woman" },
    Column { name: "set", doc: "prompt set: sos, magbig, cube or cultext2i" },
    Column {
        name: "language",
        doc: "ISO 639-1 code of the prompt's language (CulText2I: the target language L of the paper's PT = phi(L, CC))",
    },
    Column { name: "prompt", doc: "the text to give the text-to-image model" },
    Column { name: "english", doc: "the English prompt this one was translated or derived from" },
    Column {
        name: "culture",
        doc: "the culture the prompt names or stands for (SoS culture, CUBE country, CulText2I nationality)",
    },
    Column { name: "concept", doc: "CUBE concept (cuisine, landmark, art) or CulText2I cultural concept" },
    Column { name: "occupation", doc: "MAGBIG occupation (English name)" },
    Column { name: "adjective", doc: "MAGBIG adjective (English)" },
    Column { name: "template", doc: "template id within the set (e.g. SoS a/b/c, MAGBIG occupation_direct)" },
    Column { name: "template_text", doc: "the template as the paper or the upstream files write it" },
    Column { name: "person", doc: "person term: person, woman or man (empty where none)" },
    Column {
        name: "gender_form",
        doc: "neutral, feminine, masculine, generic_masculine or gender_star (empty where it does not apply)",
    },
    Column {
        name: "source",
        doc: "where the row comes from: <mirror path>:<line or record>, or the paper location",
    },
];

/// One prompt with the common fields and its set's extra fields (in the order of the set's
/// extra columns).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prompt {
    pub id: String,
    pub language: String,
    pub prompt: String,
    pub english: String,
    pub culture: String,
    pub concept: String,
    pub occupation: String,
    pub adjective: String,
    pub template: String,
    pub template_text: String,
    pub person: String,
    pub gender_form: String,
    pub source: String,
    pub extra: Vec<String>,
}

/// A normalised prompt set.
#[derive(Debug, Clone)]
pub struct PromptTable {
    pub set: PromptSet,
    pub extra_columns: &'static [Column],
    pub rows: Vec<Prompt>,
}

impl PromptTable {
    /// Checks the invariants every consumer relies on: ids unique and non-empty, prompts
    /// non-empty, one extra value per extra column.
    pub fn new(set: PromptSet, extra_columns: &'static [Column], rows: Vec<Prompt>) -> Self {
        let mut ids = HashSet::with_capacity(rows.len());
        for row in &rows {
            assert!(!row.id.is_empty() && !row.prompt.is_empty(), "{set}: empty id or prompt in {row:?}");
            assert_eq!(row.extra.len(), extra_columns.len(), "{set}: {row:?}");
            assert!(ids.insert(row.id.as_str()), "{set}: duplicated id {}", row.id);
        }
        Self { set, extra_columns, rows }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// All column names, common first.
    pub fn column_names(&self) -> Vec<&'static str> {
        COMMON_COLUMNS.iter().chain(self.extra_columns).map(|c| c.name).collect()
    }

    /// Languages in order of first appearance.
    pub fn languages(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for row in &self.rows {
            if !out.contains(&row.language.as_str()) {
                out.push(&row.language);
            }
        }
        out
    }

    /// Number of rows per language, in order of first appearance.
    pub fn counts_by_language(&self) -> Vec<(String, usize)> {
        self.languages()
            .into_iter()
            .map(|l| (l.to_string(), self.rows.iter().filter(|r| r.language == l).count()))
            .collect()
    }

    /// Keeps only rows whose language is in `languages`; every requested language must occur.
    pub fn retain_languages(&mut self, languages: &[String]) -> Result<(), PromptError> {
        let present = self.languages();
        let missing: Vec<&String> = languages.iter().filter(|l| !present.contains(&l.as_str())).collect();
        if !missing.is_empty() {
            return Err(PromptError::Invalid(format!(
                "{} has no prompts in {} (languages: {})",
                self.set,
                missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                present.join(", ")
            )));
        }
        self.rows.retain(|r| languages.contains(&r.language));
        Ok(())
    }

    /// The value of column `name` in `row`.
    pub fn value<'a>(&self, row: &'a Prompt, name: &str) -> Option<&'a str> {
        let common = match name {
            "id" => &row.id,
            "set" => return Some(self.set.name()),
            "language" => &row.language,
            "prompt" => &row.prompt,
            "english" => &row.english,
            "culture" => &row.culture,
            "concept" => &row.concept,
            "occupation" => &row.occupation,
            "adjective" => &row.adjective,
            "template" => &row.template,
            "template_text" => &row.template_text,
            "person" => &row.person,
            "gender_form" => &row.gender_form,
            "source" => &row.source,
            _ => {
                let i = self.extra_columns.iter().position(|c| c.name == name)?;
                &row.extra[i]
            }
        };
        Some(common)
    }

    /// The table as column-major string metadata (the embedding-table contract of
    /// `culturelens-table`).
    pub fn to_metadata(&self) -> Metadata {
        let columns = self
            .column_names()
            .into_iter()
            .map(|name| {
                let values = self.rows.iter().map(|r| self.value(r, name).expect("known column").to_string());
                (name.to_string(), values.collect())
            })
            .collect();
        Metadata::from_columns(None, columns).expect("column names are unique and columns have equal length")
    }

    /// Writes the table atomically as CSV (header row) or Parquet (all columns UTF-8), chosen by
    /// the extension of `path` (feature `io`).
    #[cfg(feature = "io")]
    pub fn write(&self, path: &Path) -> Result<(), PromptError> {
        let format = OutputFormat::of(path)?;
        let meta = self.to_metadata();
        match format {
            OutputFormat::Csv => write_atomic(path, |w| write_metadata_csv(w, &meta))?,
            OutputFormat::Parquet => write_atomic(path, |w| write_metadata_parquet(w, &meta))?,
        }
        Ok(())
    }
}

/// The export formats, by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Csv,
    Parquet,
}

impl OutputFormat {
    pub fn of(path: &Path) -> Result<Self, PromptError> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("csv") => Ok(Self::Csv),
            Some("parquet") => Ok(Self::Parquet),
            _ => Err(PromptError::Invalid(format!(
                "{}: the output must end in .csv or .parquet",
                path.display()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXTRA: [Column; 1] = [Column { name: "note", doc: "a test column" }];

    fn table() -> PromptTable {
        let row = |id: &str, lang: &str, prompt: &str| Prompt {
            id: id.into(),
            language: lang.into(),
            prompt: prompt.into(),
            extra: vec![format!("n-{id}")],
            ..Prompt::default()
        };
        PromptTable::new(
            PromptSet::Sos,
            &EXTRA,
            vec![
                row("x1", "en", "A photo, \"quoted\""),
                row("x2", "de", "Ein Foto"),
                row("x3", "en", "Zweite"),
            ],
        )
    }

    #[test]
    fn csv_export_has_header_and_quoting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.csv");
        table().write(&path).unwrap();
        let mut r = csv::Reader::from_path(&path).unwrap();
        let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
        assert_eq!(&header[..4], ["id", "set", "language", "prompt"]);
        assert_eq!(header.last().unwrap(), "note");
        assert_eq!(header.len(), COMMON_COLUMNS.len() + 1);
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(&rows[0][3], "A photo, \"quoted\"");
        assert_eq!(&rows[0][1], "sos");
        assert_eq!(&rows[2][header.len() - 1], "n-x3");
    }

    #[test]
    fn parquet_export_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let (parquet, csv) = (dir.path().join("p.parquet"), dir.path().join("p.csv"));
        let t = table();
        t.write(&parquet).unwrap();
        t.write(&csv).unwrap();
        let back = culturelens_table::read_metadata_parquet(&parquet).unwrap();
        let names: Vec<&str> = back.names().iter().map(String::as_str).collect();
        assert_eq!(names, t.column_names());
        assert_eq!(back.column("prompt").unwrap(), ["A photo, \"quoted\"", "Ein Foto", "Zweite"]);
        assert_eq!(back.column("note").unwrap(), ["n-x1", "n-x2", "n-x3"]);
        // Every column equals the CSV export's.
        let from_csv = culturelens_table::read_metadata_csv(&csv).unwrap();
        for name in back.names() {
            assert_eq!(back.column(name), from_csv.column(name), "{name}");
        }
    }

    #[test]
    fn unknown_extension_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let err = table().write(&dir.path().join("p.json")).unwrap_err().to_string();
        assert!(err.contains(".csv or .parquet"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn language_filter_keeps_order_and_rejects_absent_languages() {
        let mut t = table();
        assert_eq!(t.counts_by_language(), [("en".to_string(), 2), ("de".to_string(), 1)]);
        t.retain_languages(&["en".into()]).unwrap();
        assert_eq!(t.rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["x1", "x3"]);
        let err = t.retain_languages(&["am".into()]).unwrap_err().to_string();
        assert!(err.contains("no prompts in am") && err.contains("languages: en"), "{err}");
    }

    #[test]
    #[should_panic(expected = "duplicated id")]
    fn duplicated_ids_are_a_bug() {
        let row = Prompt { id: "a".into(), prompt: "p".into(), ..Prompt::default() };
        PromptTable::new(PromptSet::Cube, &[], vec![row.clone(), row]);
    }
}
