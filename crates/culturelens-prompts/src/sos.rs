//! The SoS prompt set (SoS paper Sec. 3, Table 1): 171 cultures × 3 base templates × 3 person
//! terms = 1,539 English prompts, translated into 13 languages by native speakers, read from the
//! upstream `full_dataset.csv`. The English prompts come from its `prompt_en` column.

use std::collections::HashMap;
use std::path::Path;

use culturelens_table::Location;

use crate::csv_file::CsvFile;
use crate::error::PromptError;
use crate::registry::{PromptSet, SOS_FILES};
use crate::table::{Column, Prompt, PromptTable};
use crate::text::{language_code, normalize_ws, slug};

#[doc = include_str!("notes/sos.md")]
pub const NOTES: &str = include_str!("notes/sos.md");

/// The base templates (SoS paper Table 1): id, the words before the article, the template text.
pub const TEMPLATES: [(&str, &str, &str); 3] = [
    ("a", "A photo of", "A photo of a {c_i} {p_j}"),
    ("b", "", "A {c_i} {p_j}"),
    ("c", "A photorealistic image of", "A photorealistic image of a {c_i} {p_j}"),
];

/// Upstream `Topic` → person term p_j (SoS paper Sec. 3) and gender form.
pub const PERSON_TERMS: [(&str, &str, &str); 3] = [
    ("Person", "person", "neutral"),
    ("Person-female", "woman", "feminine"),
    ("Person-male", "man", "masculine"),
];

/// Culture terms corrected in the `Culture` column and in `prompt_en`: (upstream, used).
pub const CULTURE_FIXES: [(&str, &str); 1] = [("Hondurans", "Honduran")];

/// The cultures of the paper (Sec. 3, "Selection of Cultures").
pub const N_CULTURES: usize = 171;

/// The upstream columns, in file order.
const UPSTREAM_COLUMNS: [&str; 6] =
    ["prompt_template", "prompt_en", "Topic", "Culture", "Language", "prompt_translated"];

/// SoS adds no columns to the common ones.
pub const EXTRA_COLUMNS: [Column; 0] = [];

/// (template id, person term, culture): one English prompt and its translations.
type Key = (&'static str, &'static str, String);

/// Parses `full_dataset.csv` into the normalised table: English rows first, then each translated
/// language in file order; rows within a language keep the file order. Each row is read and
/// checked on its own ([`read_row`]), then against the rows before it ([`Rows::add`]); the whole
/// set must be complete ([`Rows::check_complete`]) before the table is built ([`Rows::build`]).
pub fn parse(bytes: &[u8]) -> Result<PromptTable, PromptError> {
    let mut file = CsvFile::open(bytes, at())?;
    let mut index = [0usize; 6];
    for (slot, name) in index.iter_mut().zip(UPSTREAM_COLUMNS) {
        *slot = file.column(name)?;
    }
    let mut rows = Rows::default();
    for record in file.records() {
        let (line, record) = record?;
        rows.add(read_row(line, &record, &index)?)?;
    }
    rows.check_complete()?;
    Ok(rows.build())
}

/// The upstream file, for error locations and `source` values.
fn at() -> Location {
    Location::file(Path::new(SOS_FILES[0].mirror_path))
}

/// One translated upstream row, with its English prompt rebuilt from the template.
struct Row {
    line: u64,
    language: &'static str,
    key: Key,
    english: String,
    prompt: String,
}

/// Reads the record at `line` (`index`: the file positions of [`UPSTREAM_COLUMNS`]) and checks it alone:
/// known template, Topic and language, non-empty cells, an English prompt that follows its template.
fn read_row(line: u64, record: &csv::StringRecord, index: &[usize; 6]) -> Result<Row, PromptError> {
    let [i_template, i_en, i_topic, i_culture, i_language, i_translated] = [0, 1, 2, 3, 4, 5];
    let bad = |slot: usize, message: String| {
        PromptError::malformed(at().line(line).column(UPSTREAM_COLUMNS[slot]), message)
    };
    let cell = |slot: usize| -> Result<String, PromptError> {
        let v = normalize_ws(record.get(index[slot]).unwrap_or_default());
        if v.is_empty() { Err(bad(slot, "empty cell".into())) } else { Ok(v) }
    };

    let template_id = cell(i_template)?;
    let template = TEMPLATES
        .iter()
        .find(|t| t.0 == template_id)
        .ok_or_else(|| bad(i_template, format!("unknown template {template_id:?} (expected a, b or c)")))?;
    let topic = cell(i_topic)?;
    let (_, person, _) = PERSON_TERMS.iter().find(|p| p.0 == topic).ok_or_else(|| {
        bad(i_topic, format!("unknown Topic {topic:?} (expected Person, Person-female or Person-male)"))
    })?;
    let lang_raw = cell(i_language)?;
    let language = language_code(&lang_raw)
        .filter(|c| *c == lang_raw)
        .ok_or_else(|| bad(i_language, format!("unknown ISO 639-1 language code {lang_raw:?}")))?;
    if language == "en" {
        return Err(bad(i_language, "English is the prompt_en column, not a translated language".into()));
    }
    let culture = fixed(cell(i_culture)?);
    let prompt_en = cell(i_en)?;
    let (article, term) = split_english(template, person, &prompt_en).ok_or_else(|| {
        bad(
            i_en,
            format!(
                "{prompt_en:?} does not follow template {} ({:?}) with person term {person:?}",
                template.0, template.2
            ),
        )
    })?;
    let term = fixed(term);
    let english = [template.1, article, &term, person]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let prompt = cell(i_translated)?;
    Ok(Row { line, language, key: (template.0, person, culture), english, prompt })
}

/// The rows read so far, checked against each other.
#[derive(Default)]
struct Rows {
    /// One English prompt per key, in order of first appearance, with its first line.
    english: Vec<(Key, String, u64)>,
    english_index: HashMap<Key, usize>,
    /// Translated languages in order of first appearance.
    languages: Vec<&'static str>,
    /// The line of each (language, key) seen.
    seen: HashMap<(&'static str, Key), u64>,
    translated: Vec<Row>,
}

impl Rows {
    /// Adds a row whose English prompt agrees with the key's earlier rows and whose (language,
    /// key) is new.
    fn add(&mut self, row: Row) -> Result<(), PromptError> {
        match self.english_index.get(&row.key) {
            Some(&k) if self.english[k].1 != row.english => {
                return Err(PromptError::malformed(
                    at().line(row.line).column(UPSTREAM_COLUMNS[1]),
                    format!(
                        "{:?} differs from {:?} at line {} for the same template, person and culture",
                        row.english, self.english[k].1, self.english[k].2
                    ),
                ));
            }
            Some(_) => {}
            None => {
                self.english_index.insert(row.key.clone(), self.english.len());
                self.english.push((row.key.clone(), row.english.clone(), row.line));
            }
        }
        if let Some(first) = self.seen.insert((row.language, row.key.clone()), row.line) {
            return Err(PromptError::malformed(
                at().line(row.line),
                format!("duplicate of line {first}: same language, template, person and culture"),
            ));
        }
        if !self.languages.contains(&row.language) {
            self.languages.push(row.language);
        }
        self.translated.push(row);
        Ok(())
    }

    /// Every translated language has every (template, person, culture) key.
    fn check_complete(&self) -> Result<(), PromptError> {
        for &lang in &self.languages {
            let missing: Vec<&Key> = self
                .english
                .iter()
                .map(|e| &e.0)
                .filter(|k| !self.seen.contains_key(&(lang, (*k).clone())))
                .collect();
            if let Some(example) = missing.first() {
                return Err(PromptError::malformed(
                    at().column("Language"),
                    format!(
                        "language {lang} lacks {} of the {} (template, person, culture) combinations, e.g. ({}, {}, {})",
                        missing.len(),
                        self.english.len(),
                        example.0,
                        example.1,
                        example.2
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The table: English rows first, then each language's rows in file order.
    fn build(self) -> PromptTable {
        let file = SOS_FILES[0].mirror_path;
        let row = |lang: &str, key: &Key, prompt: String, english: String, source: String| Prompt {
            id: format!("sos-{lang}-{}-{}-{}", key.0, slug(&key.2), key.1),
            language: lang.to_string(),
            prompt,
            english,
            culture: key.2.clone(),
            template: key.0.to_string(),
            template_text: TEMPLATES.iter().find(|t| t.0 == key.0).expect("validated").2.to_string(),
            person: key.1.to_string(),
            gender_form: PERSON_TERMS.iter().find(|p| p.1 == key.1).expect("validated").2.to_string(),
            source,
            ..Prompt::default()
        };
        let mut rows = Vec::with_capacity(self.english.len() * (self.languages.len() + 1));
        for (key, prompt_en, line) in &self.english {
            rows.push(row(
                "en",
                key,
                prompt_en.clone(),
                prompt_en.clone(),
                format!("{file}:{line}:prompt_en"),
            ));
        }
        for &lang in &self.languages {
            for t in self.translated.iter().filter(|t| t.language == lang) {
                let english = self.english[self.english_index[&t.key]].1.clone();
                rows.push(row(lang, &t.key, t.prompt.clone(), english, format!("{file}:{}", t.line)));
            }
        }
        PromptTable::new(PromptSet::Sos, &EXTRA_COLUMNS, rows)
    }
}

/// Applies [`CULTURE_FIXES`] to a culture label or term.
fn fixed(culture: String) -> String {
    CULTURE_FIXES.iter().find(|(from, _)| *from == culture).map_or(culture, |(_, to)| to.to_string())
}

/// Splits an English prompt of `template` into (article, culture term) if it reads
/// `<lead> a|an <culture term> <person>`.
fn split_english(
    template: &(&str, &str, &str),
    person: &str,
    prompt_en: &str,
) -> Option<(&'static str, String)> {
    let rest = if template.1.is_empty() {
        prompt_en
    } else {
        prompt_en.strip_prefix(template.1)?.strip_prefix(' ')?
    };
    let articles: [&'static str; 2] = if template.1.is_empty() { ["A", "An"] } else { ["a", "an"] };
    let (article, rest) =
        articles.iter().find_map(|a| Some((*a, rest.strip_prefix(a)?.strip_prefix(' ')?)))?;
    let (term, last) = rest.rsplit_once(' ')?;
    (last == person && !term.is_empty()).then(|| (article, term.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests_support::mirror_bytes;

    fn dataset() -> PromptTable {
        parse(&mirror_bytes(&SOS_FILES[0])).unwrap()
    }

    #[test]
    fn counts_match_the_paper() {
        let t = dataset();
        assert_eq!(t.len(), 21_546, "14 languages x 1,539 prompts");
        let counts = t.counts_by_language();
        assert_eq!(counts.len(), 14);
        assert_eq!(counts[0].0, "en");
        assert!(counts.iter().all(|(_, n)| *n == 1_539), "{counts:?}");
        let langs: Vec<&str> = counts.iter().map(|(l, _)| l.as_str()).collect();
        let mut sorted = langs[1..].to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, ["am", "ar", "de", "es", "fi", "fr", "hi", "it", "ja", "ko", "ru", "tr", "zh"]);
        let en: Vec<&Prompt> = t.rows.iter().filter(|r| r.language == "en").collect();
        let mut cultures: Vec<&str> = en.iter().map(|r| r.culture.as_str()).collect();
        cultures.sort_unstable();
        cultures.dedup();
        assert_eq!(cultures.len(), N_CULTURES);
        assert_eq!(1_539, N_CULTURES * TEMPLATES.len() * PERSON_TERMS.len());
    }

    #[test]
    fn german_hondurans_is_normalised() {
        let t = dataset();
        assert!(t.rows.iter().all(|r| r.culture != "Hondurans" && !r.english.contains("Hondurans")));
        let de = t.rows.iter().find(|r| r.id == "sos-de-a-honduran-woman").unwrap();
        assert_eq!(de.culture, "Honduran");
        assert_eq!(de.english, "A photo of a Honduran woman");
        assert_eq!(de.prompt, "Ein Foto einer honduranischen Frau");
        assert_eq!(de.person, "woman");
        assert_eq!(de.gender_form, "feminine");
        assert_eq!(t.rows.iter().filter(|r| r.culture == "Honduran").count(), 14 * 9);
    }

    #[test]
    fn rows_carry_template_person_and_source() {
        let t = dataset();
        let am = &t.rows[1_539];
        assert_eq!(am.id, "sos-am-a-zimbabwean-person");
        assert_eq!(am.prompt, "የአንድ ዚምባብዌ ግለሰብ ፎቶ");
        assert_eq!(am.english, "A photo of a Zimbabwean person");
        assert_eq!((am.template.as_str(), am.template_text.as_str()), ("a", "A photo of a {c_i} {p_j}"));
        assert_eq!(am.source, "Surface-Over-Semantics/full_dataset.csv:2");
        let en = &t.rows[0];
        assert_eq!(
            (en.id.as_str(), en.prompt.as_str()),
            ("sos-en-a-zimbabwean-person", "A photo of a Zimbabwean person")
        );
        assert_eq!(en.source, "Surface-Over-Semantics/full_dataset.csv:2:prompt_en");
        let b = t.rows.iter().find(|r| r.id == "sos-en-b-ugandan-man").unwrap();
        assert_eq!(b.prompt, "An Ugandan man", "upstream English kept as written");
        // Upstream's Luxembourg culture is worded "Luxembourgish" in its prompts.
        let lux = t.rows.iter().find(|r| r.id == "sos-en-c-luxembourg-person").unwrap();
        assert_eq!(lux.prompt, "A photorealistic image of a Luxembourgish person");
    }

    #[test]
    fn translation_collisions_are_documented_not_hidden() {
        // 95 translated prompts are shared by two (template, person, culture) keys, e.g. the Amharic
        // prompt for "Somalis" reads "Saudi Arabian" (see NOTES).
        let t = dataset();
        let mut by_text: HashMap<(&str, &str), usize> = HashMap::new();
        for r in t.rows.iter().filter(|r| r.language != "en") {
            *by_text.entry((r.language.as_str(), r.prompt.as_str())).or_default() += 1;
        }
        assert_eq!(by_text.values().filter(|&&n| n > 1).count(), 95);
        assert!(NOTES.contains("95"));
    }

    const HEADER: &str = "prompt_template,prompt_en,Topic,Culture,Language,prompt_translated\n";

    fn parse_err(body: &str) -> String {
        parse(format!("{HEADER}{body}").as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn malformed_rows_are_named() {
        let err = parse_err(
            "a,A photo of a German person,Person,German,de,Ein Foto\nd,A German person,Person,German,de,x\n",
        );
        assert!(
            err.contains("full_dataset.csv, line 3, column prompt_template: unknown template \"d\""),
            "{err}"
        );
        let err = parse_err("a,A photo of a German person,Human,German,de,Ein Foto\n");
        assert!(err.contains("line 2, column Topic: unknown Topic \"Human\""), "{err}");
        let err = parse_err("a,A photo of a German person,Person,German,de,  \n");
        assert!(err.contains("line 2, column prompt_translated: empty cell"), "{err}");
        let err = parse_err("a,A photo of a German woman,Person,German,de,Ein Foto\n");
        assert!(err.contains("column prompt_en") && err.contains("person term \"person\""), "{err}");
        let err = parse_err("a,A photo of a German person,Person,German,xx,Ein Foto\n");
        assert!(err.contains("column Language: unknown ISO 639-1 language code \"xx\""), "{err}");
        let err = parse_err("a,A photo of a German person,Person,German,de\n");
        assert!(err.contains("line 2"), "{err}");
        let err = parse(b"prompt_template,prompt_en,Topic,Culture,Language\n").unwrap_err().to_string();
        assert!(err.contains("column prompt_translated: required column is missing"), "{err}");
    }

    #[test]
    fn duplicates_and_gaps_are_refused() {
        let err = parse_err(
            "a,A photo of a German person,Person,German,de,x\na,A photo of a German person,Person,German,de,y\n",
        );
        assert!(err.contains("line 3") && err.contains("duplicate of line 2"), "{err}");
        let err = parse_err(
            "a,A photo of a German person,Person,German,de,x\na,A photo of a French person,Person,French,de,y\n\
             a,A photo of a German person,Person,German,fr,z\n",
        );
        assert!(err.contains("language fr lacks 1 of the 2") && err.contains("(a, person, French)"), "{err}");
        let err = parse_err(
            "a,A photo of a German person,Person,German,de,x\na,A photo of a Germanic person,Person,German,fr,y\n",
        );
        assert!(err.contains("differs from \"A photo of a German person\" at line 2"), "{err}");
    }
}
