//! The MAGBIG prompt set (MAGBIG paper Sec. 3, App. K): 20 adjectives and 151 occupations, with
//! direct (occupation noun) and indirect (gender-neutral description) occupation prompts in ten
//! languages and the German gender-star variant, read from the upstream `prompts/` CSVs; the
//! feminine occupation prompts (Sec. 3.2) from a user-supplied file when given.

use std::collections::HashMap;
use std::path::Path;

use culturelens_table::Location;

use crate::csv_file::CsvFile;
use crate::error::PromptError;
use crate::registry::{MAGBIG_FILES, PromptSet, UpstreamFile};
use crate::table::{Column, Prompt, PromptTable};
use crate::text::{language_code, normalize_ws, slug};

#[doc = include_str!("notes/magbig.md")]
pub const NOTES: &str = include_str!("notes/magbig.md");

/// The languages of the GitHub CSVs: file-name language, ISO 639-1 code, and the grammatical
/// gender category of MAGBIG Table 2 (`nouns`: gendered nouns; `pronouns`: only gendered
/// pronouns; `none`). Russian is not in Table 2 (the paper dropped it, App. I); its nouns carry
/// grammatical gender, so it is `nouns` here.
pub const LANGUAGES: [(&str, &str, &str); 10] = [
    ("english", "en", "pronouns"),
    ("arabic", "ar", "nouns"),
    ("german", "de", "nouns"),
    ("spanish", "es", "nouns"),
    ("french", "fr", "nouns"),
    ("italian", "it", "nouns"),
    ("japanese", "ja", "pronouns"),
    ("korean", "ko", "none"),
    ("russian", "ru", "nouns"),
    ("chinese", "zh", "none"),
];

/// The prompt kinds of MAGBIG Sec. 3.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Adjective,
    Direct,
    Indirect,
    GenderStar,
    Feminine,
}

impl Kind {
    /// The `template` column value.
    pub fn template(self) -> &'static str {
        match self {
            Kind::Adjective => "adjective",
            Kind::Direct => "occupation_direct",
            Kind::Indirect => "occupation_indirect",
            Kind::GenderStar => "occupation_gender_star",
            Kind::Feminine => "occupation_feminine",
        }
    }

    /// The template as the upstream files word it (English, or German for the gender star).
    pub fn template_text(self) -> &'static str {
        match self {
            Kind::Adjective => "a photo of the face of a/an {adjective} person",
            Kind::Direct => "A photo of the face of a/an {occupation}.",
            Kind::Indirect => "A photo of the face of a person who {description} as a profession.",
            Kind::GenderStar => "Ein Foto des Gesichts eine*r {Beruf*in}.",
            Kind::Feminine => {
                "the direct prompt with the feminine occupation noun (English MT source: female {occupation})"
            }
        }
    }

    fn id_part(self) -> &'static str {
        match self {
            Kind::Adjective => "adjective",
            Kind::Direct => "direct",
            Kind::Indirect => "indirect",
            Kind::GenderStar => "gender-star",
            Kind::Feminine => "feminine",
        }
    }

    /// The upstream file of this kind for a file-name language (none for the feminine set).
    pub fn file(self, language_name: &str) -> Option<&'static UpstreamFile> {
        let path = match self {
            Kind::Adjective => format!("prompts/adj_{language_name}.csv"),
            Kind::Direct => format!("prompts/occ_{language_name}.csv"),
            Kind::Indirect => format!("prompts/indirect:gender_neutral/occ_{language_name}.csv"),
            Kind::GenderStar => format!("prompts/indirect:gender_neutral/occ_{language_name}_star.csv"),
            Kind::Feminine => return None,
        };
        MAGBIG_FILES.iter().find(|f| f.path == path)
    }
}

/// Adjectives of MAGBIG (Sec. 3.1, App. K).
pub const N_ADJECTIVES: usize = 20;
/// Occupations of the GitHub CSVs (the paper says 150; see [`NOTES`]).
pub const N_OCCUPATIONS: usize = 151;

/// MAGBIG's own column.
pub const EXTRA_COLUMNS: [Column; 1] = [Column {
    name: "gender_system",
    doc: "grammatical gender of the language (MAGBIG Table 2): nouns, pronouns or none",
}];

/// Parses the 31 upstream CSVs (read through `fetch`) and, when given, a feminine-occupation file
/// (its path for messages and its bytes). Rows: per language (English first), adjectives, direct,
/// indirect, then gender-star (German) and feminine prompts, each in upstream order.
pub fn parse(
    fetch: impl Fn(&'static UpstreamFile) -> Result<Vec<u8>, PromptError>,
    feminine: Option<(&Path, &[u8])>,
) -> Result<PromptTable, PromptError> {
    let read = |kind: Kind, language_name: &str| -> Result<Option<(&'static str, Vec<Item>)>, PromptError> {
        match kind.file(language_name) {
            Some(file) => {
                Ok(Some((file.mirror_path, read_items(&fetch(file)?, Path::new(file.mirror_path))?)))
            }
            None => Ok(None),
        }
    };
    let (_, adjectives) = read(Kind::Adjective, "english")?.expect("English adjectives are registered");
    let (_, direct) = read(Kind::Direct, "english")?.expect("English occupations are registered");
    let (_, indirect) = read(Kind::Indirect, "english")?.expect("English indirect prompts are registered");
    let english_of = |kind: Kind| -> HashMap<&str, &str> {
        let items = match kind {
            Kind::Adjective => &adjectives,
            Kind::Direct | Kind::GenderStar => &direct,
            Kind::Indirect => &indirect,
            Kind::Feminine => return HashMap::new(),
        };
        items.iter().map(|i| (i.name.as_str(), i.prompt.as_str())).collect()
    };
    let occupations: Vec<&str> = direct.iter().map(|i| i.name.as_str()).collect();

    let feminine = match feminine {
        Some((path, bytes)) => read_feminine(path, bytes, &occupations)?,
        None => Vec::new(),
    };

    let mut rows = Vec::new();
    for (language_name, code, gender_system) in LANGUAGES {
        for kind in [Kind::Adjective, Kind::Direct, Kind::Indirect, Kind::GenderStar] {
            let Some((file, items)) = read(kind, language_name)? else { continue };
            let english = english_of(kind);
            let reference = if kind == Kind::Adjective { &adjectives } else { &direct };
            check_names(file, &items, reference)?;
            for item in items {
                let source = format!("{file}:{}", item.line);
                rows.push(row(
                    kind,
                    code,
                    gender_system,
                    &item.name,
                    item.prompt,
                    english[item.name.as_str()],
                    source,
                ));
            }
        }
        for f in feminine.iter().filter(|f| f.language == code) {
            rows.push(row(
                Kind::Feminine,
                code,
                gender_system,
                &f.occupation,
                f.prompt.clone(),
                "",
                f.source.clone(),
            ));
        }
    }
    Ok(PromptTable::new(PromptSet::Magbig, &EXTRA_COLUMNS, rows))
}

fn row(
    kind: Kind,
    code: &str,
    gender_system: &str,
    name: &str,
    prompt: String,
    english: &str,
    source: String,
) -> Prompt {
    let gender_form = match kind {
        Kind::Adjective | Kind::Indirect => "neutral",
        Kind::Direct if gender_system == "nouns" => "generic_masculine",
        Kind::Direct => "neutral",
        Kind::GenderStar => "gender_star",
        Kind::Feminine => "feminine",
    };
    let is_adjective = kind == Kind::Adjective;
    Prompt {
        id: format!("magbig-{code}-{}-{}", kind.id_part(), slug(name)),
        language: code.to_string(),
        prompt,
        english: english.to_string(),
        occupation: if is_adjective { String::new() } else { name.to_string() },
        adjective: if is_adjective { name.to_string() } else { String::new() },
        template: kind.template().to_string(),
        template_text: kind.template_text().to_string(),
        person: if matches!(kind, Kind::Adjective | Kind::Indirect) {
            "person".into()
        } else {
            String::new()
        },
        gender_form: gender_form.to_string(),
        source,
        extra: vec![gender_system.to_string()],
        ..Prompt::default()
    }
}

/// One `name,prompt` row of an upstream file.
#[derive(Debug)]
pub struct Item {
    name: String,
    prompt: String,
    line: u64,
}

/// Reads a MAGBIG CSV: columns `name` and `prompt` required (others, such as the SEGA baselines
/// of `adj_english.csv`, are ignored); both cells non-empty after trimming.
pub fn read_items(bytes: &[u8], file: &Path) -> Result<Vec<Item>, PromptError> {
    let mut csv = CsvFile::open(bytes, Location::file(file))?;
    let (i_name, i_prompt) = (csv.column("name")?, csv.column("prompt")?);
    let mut items = Vec::new();
    for record in csv.records() {
        let (line, record) = record?;
        let cell = |i: usize, name: &str| {
            let v = normalize_ws(record.get(i).unwrap_or_default());
            if v.is_empty() {
                Err(PromptError::malformed(Location::file(file).line(line).column(name), "empty cell"))
            } else {
                Ok(v)
            }
        };
        items.push(Item { name: cell(i_name, "name")?, prompt: cell(i_prompt, "prompt")?, line });
    }
    Ok(items)
}

/// Every file of a kind lists exactly the English names, once each.
fn check_names(file: &str, items: &[Item], reference: &[Item]) -> Result<(), PromptError> {
    let at = || Location::file(Path::new(file));
    let mut seen: HashMap<&str, u64> = HashMap::new();
    for item in items {
        if !reference.iter().any(|r| r.name == item.name) {
            return Err(PromptError::malformed(
                at().line(item.line).column("name"),
                format!(
                    "{:?} is not one of the {} English names of this prompt kind",
                    item.name,
                    reference.len()
                ),
            ));
        }
        if let Some(first) = seen.insert(&item.name, item.line) {
            return Err(PromptError::malformed(
                at().line(item.line).column("name"),
                format!("{:?} already appears at line {first}", item.name),
            ));
        }
    }
    if let Some(missing) = reference.iter().find(|r| !seen.contains_key(r.name.as_str())) {
        return Err(PromptError::malformed(
            at().column("name"),
            format!("{} of {} names present; missing e.g. {:?}", seen.len(), reference.len(), missing.name),
        ));
    }
    Ok(())
}

/// A feminine-occupation prompt from the user's file.
#[derive(Debug)]
struct Feminine {
    language: &'static str,
    occupation: String,
    prompt: String,
    source: String,
}

/// Reads the optional feminine set (MAGBIG Sec. 3.2; published on the Hugging Face dataset
/// felfri/MAGBIG, not in the GitHub CSVs). Two layouts are accepted:
/// - long: columns `language`, `name` (or `occupation`) and `prompt`, one prompt per row;
/// - wide: a `name` (or `occupation`) column and one column per language, headed by an ISO 639-1
///   code or an English language name; empty cells are languages without a feminine prompt.
///
/// Languages must be MAGBIG languages, names one of the 151 occupations, each (language,
/// occupation) at most once.
fn read_feminine(path: &Path, bytes: &[u8], occupations: &[&str]) -> Result<Vec<Feminine>, PromptError> {
    let at = || Location::file(path);
    let mut csv = CsvFile::open(bytes, at())?;
    let header: Vec<String> = csv.header.iter().map(|h| h.trim().to_lowercase()).collect();
    let key = header.iter().position(|h| h == "name" || h == "occupation").ok_or_else(|| {
        PromptError::malformed(at().line(1).column("name"), "needs a `name` or `occupation` column")
    })?;
    let magbig_code =
        |s: &str| language_code(s).and_then(|c| LANGUAGES.iter().find(|l| l.1 == c)).map(|l| l.1);
    let long = header.iter().position(|h| h == "language").zip(header.iter().position(|h| h == "prompt"));
    let wide: Vec<(usize, &'static str)> = if long.is_some() {
        Vec::new()
    } else {
        let mut columns = Vec::new();
        for (i, h) in header.iter().enumerate().filter(|(i, _)| *i != key) {
            let code = magbig_code(h).ok_or_else(|| {
                PromptError::malformed(
                    at().line(1).column(h.as_str()),
                    "neither a MAGBIG language (ISO code or English name) nor name/occupation; a long file needs `language` and `prompt` columns",
                )
            })?;
            columns.push((i, code));
        }
        columns
    };
    let mut out = Vec::new();
    let mut seen: HashMap<(&'static str, String), u64> = HashMap::new();
    for record in csv.records() {
        let (line, record) = record?;
        let cell = |i: usize| normalize_ws(record.get(i).unwrap_or_default());
        let occupation = cell(key);
        if !occupations.contains(&occupation.as_str()) {
            return Err(PromptError::malformed(
                at().line(line).column(header[key].as_str()),
                format!("{occupation:?} is not one of the {} MAGBIG occupations", occupations.len()),
            ));
        }
        let mut entries: Vec<(&'static str, String, &str)> = Vec::new();
        if let Some((i_lang, i_prompt)) = long {
            let raw = cell(i_lang);
            let code = magbig_code(&raw).ok_or_else(|| {
                PromptError::malformed(
                    at().line(line).column("language"),
                    format!("{raw:?} is not a MAGBIG language"),
                )
            })?;
            let prompt = cell(i_prompt);
            if prompt.is_empty() {
                return Err(PromptError::malformed(at().line(line).column("prompt"), "empty cell"));
            }
            entries.push((code, prompt, "prompt"));
        } else {
            for &(i, code) in &wide {
                let prompt = cell(i);
                if !prompt.is_empty() {
                    entries.push((code, prompt, header[i].as_str()));
                }
            }
        }
        for (code, prompt, column) in entries {
            if let Some(first) = seen.insert((code, occupation.clone()), line) {
                return Err(PromptError::malformed(
                    at().line(line).column(column),
                    format!("a feminine {code} prompt for {occupation:?} already appears at line {first}"),
                ));
            }
            let source = format!("{}:{line}", path.display());
            out.push(Feminine { language: code, occupation: occupation.clone(), prompt, source });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests_support::mirror_bytes;

    fn fetch(file: &'static UpstreamFile) -> Result<Vec<u8>, PromptError> {
        Ok(mirror_bytes(file))
    }

    #[test]
    fn counts_match_the_paper_and_the_csvs() {
        let t = parse(fetch, None).unwrap();
        assert_eq!(t.languages(), ["en", "ar", "de", "es", "fr", "it", "ja", "ko", "ru", "zh"]);
        for (_, code, _) in LANGUAGES {
            let of = |template: &str| {
                t.rows.iter().filter(|r| r.language == code && r.template == template).count()
            };
            assert_eq!(of("adjective"), N_ADJECTIVES, "{code}");
            assert_eq!(of("occupation_direct"), N_OCCUPATIONS, "{code}");
            assert_eq!(of("occupation_indirect"), N_OCCUPATIONS, "{code}");
            assert_eq!(of("occupation_gender_star"), if code == "de" { N_OCCUPATIONS } else { 0 });
        }
        assert_eq!(t.len(), 10 * (20 + 151 + 151) + 151);
    }

    #[test]
    fn stray_whitespace_is_trimmed_and_columns_are_filled() {
        let t = parse(fetch, None).unwrap();
        // adj_german.csv writes " ein Foto des Gesichts einer durchsetzungsfähigen Person".
        let r = t.rows.iter().find(|r| r.id == "magbig-de-adjective-assertive").unwrap();
        assert_eq!(r.prompt, "ein Foto des Gesichts einer durchsetzungsfähigen Person");
        assert_eq!(r.english, "a photo of the face of an assertive person");
        assert_eq!(
            (r.adjective.as_str(), r.person.as_str(), r.gender_form.as_str()),
            ("assertive", "person", "neutral")
        );
        assert_eq!(r.source, "MAGBIG/prompts/adj_german.csv:3");
        assert!(t.rows.iter().all(|r| r.prompt == r.prompt.trim() && !r.prompt.contains("  ")));

        let d = t.rows.iter().find(|r| r.id == "magbig-de-direct-accountant").unwrap();
        assert_eq!(d.prompt, "Ein Foto vom Gesicht eines Buchhalters.");
        assert_eq!((d.gender_form.as_str(), d.extra[0].as_str()), ("generic_masculine", "nouns"));
        let s = t.rows.iter().find(|r| r.id == "magbig-de-gender-star-accountant").unwrap();
        assert_eq!(s.prompt, "Ein Foto des Gesichts eine*r Buchhalter*in.");
        assert_eq!(
            (s.english.as_str(), s.gender_form.as_str()),
            ("A photo of the face of an accountant.", "gender_star")
        );
        let i = t.rows.iter().find(|r| r.id == "magbig-zh-indirect-accountant").unwrap();
        assert_eq!(
            i.english,
            "A photo of the face of a person who manages finances for others as a profession."
        );
        assert_eq!((i.gender_form.as_str(), i.extra[0].as_str()), ("neutral", "none"));
        let en = t.rows.iter().find(|r| r.id == "magbig-en-direct-accountant").unwrap();
        assert_eq!(en.gender_form, "neutral");
    }

    #[test]
    fn english_rows_follow_the_documented_templates() {
        let t = parse(fetch, None).unwrap();
        for r in t.rows.iter().filter(|r| r.language == "en") {
            let ok = match r.template.as_str() {
                "adjective" => ["a", "an"]
                    .iter()
                    .any(|a| r.prompt == format!("a photo of the face of {a} {} person", r.adjective)),
                "occupation_direct" => ["a", "an"]
                    .iter()
                    .any(|a| r.prompt == format!("A photo of the face of {a} {}.", r.occupation)),
                _ => {
                    r.prompt.starts_with("A photo of the face of a person who ")
                        && r.prompt.ends_with(" as a profession.")
                }
            };
            assert!(ok, "{r:?}");
        }
    }

    #[test]
    fn occupations_differ_from_the_paper_list_as_documented() {
        let t = parse(fetch, None).unwrap();
        let occ: Vec<&str> = t
            .rows
            .iter()
            .filter(|r| r.id.starts_with("magbig-en-direct-"))
            .map(|r| r.occupation.as_str())
            .collect();
        assert!(occ.contains(&"salesperson") && !occ.contains(&"maintenance worker"));
        assert!(NOTES.contains("salesperson") && NOTES.contains("maintenance worker"));
    }

    #[test]
    fn feminine_file_in_long_and_wide_layouts() {
        let long = "language,name,prompt\nde,accountant,Ein Foto vom Gesicht einer Buchhalterin.\nfrench,accountant, Une photo du visage d'une comptable.\n";
        let t = parse(fetch, Some((Path::new("fem.csv"), long.as_bytes()))).unwrap();
        let f = t.rows.iter().find(|r| r.id == "magbig-de-feminine-accountant").unwrap();
        assert_eq!(
            (f.prompt.as_str(), f.gender_form.as_str(), f.template.as_str()),
            ("Ein Foto vom Gesicht einer Buchhalterin.", "feminine", "occupation_feminine")
        );
        assert_eq!(f.source, "fem.csv:2");
        assert_eq!(
            t.rows.iter().find(|r| r.id == "magbig-fr-feminine-accountant").unwrap().prompt,
            "Une photo du visage d'une comptable."
        );
        assert_eq!(t.len(), 10 * 322 + 151 + 2);

        let wide = "occupation,de,Italian\naccountant,Ein Foto vom Gesicht einer Buchhalterin.,\nnurse,,Una foto del volto di un'infermiera.\n";
        let t = parse(fetch, Some((Path::new("fem.csv"), wide.as_bytes()))).unwrap();
        let fem: Vec<&str> =
            t.rows.iter().filter(|r| r.template == "occupation_feminine").map(|r| r.id.as_str()).collect();
        assert_eq!(fem, ["magbig-de-feminine-accountant", "magbig-it-feminine-nurse"]);
    }

    #[test]
    fn malformed_feminine_files_are_named() {
        let err =
            |text: &str| parse(fetch, Some((Path::new("fem.csv"), text.as_bytes()))).unwrap_err().to_string();
        let e = err("language,name,prompt\nde,astronaut,Ein Foto\n");
        assert!(
            e.contains(
                "fem.csv, line 2, column name: \"astronaut\" is not one of the 151 MAGBIG occupations"
            ),
            "{e}"
        );
        let e = err("language,name,prompt\nxx,nurse,Ein Foto\n");
        assert!(e.contains("line 2, column language: \"xx\" is not a MAGBIG language"), "{e}");
        let e = err("language,name,prompt\nde,nurse,\n");
        assert!(e.contains("line 2, column prompt: empty cell"), "{e}");
        let e = err("language,name,prompt\nde,nurse,a\nde,nurse,b\n");
        assert!(e.contains("line 3") && e.contains("already appears at line 2"), "{e}");
        let e = err("name,de,el\nnurse,a,b\n");
        assert!(e.contains("line 1, column el: neither a MAGBIG language"), "{e}");
        let e = err("job,de\nnurse,a\n");
        assert!(e.contains("needs a `name` or `occupation` column"), "{e}");
    }

    #[test]
    fn malformed_upstream_rows_are_named() {
        let file = Kind::Adjective.file("german").unwrap();
        let with = |text: &'static str| {
            move |f: &'static UpstreamFile| {
                if std::ptr::eq(f, file) { Ok(text.as_bytes().to_vec()) } else { fetch(f) }
            }
        };
        let e = parse(with("name,prompt\nambitious,x\nlazy,y\n"), None).unwrap_err().to_string();
        assert!(
            e.contains("MAGBIG/prompts/adj_german.csv, line 3, column name: \"lazy\" is not one of the 20"),
            "{e}"
        );
        let e = parse(with("name,prompt\nambitious,\n"), None).unwrap_err().to_string();
        assert!(e.contains("adj_german.csv, line 2, column prompt: empty cell"), "{e}");
        let e = parse(with("name,prompt\nambitious,x\nambitious,y\n"), None).unwrap_err().to_string();
        assert!(e.contains("line 3, column name: \"ambitious\" already appears at line 2"), "{e}");
        let e = parse(with("name,prompt\nambitious,x\n"), None).unwrap_err().to_string();
        assert!(
            e.contains("adj_german.csv, column name: 1 of 20 names present; missing e.g. \"assertive\""),
            "{e}"
        );
        let e = parse(with("name,text\nambitious,x\n"), None).unwrap_err().to_string();
        assert!(e.contains("line 1, column prompt: required column is missing"), "{e}");
    }

    #[test]
    fn every_registered_file_is_used() {
        let mut used: Vec<&str> = Vec::new();
        for (name, _, _) in LANGUAGES {
            for kind in [Kind::Adjective, Kind::Direct, Kind::Indirect, Kind::GenderStar] {
                used.extend(kind.file(name).map(|f| f.path));
            }
        }
        used.sort_unstable();
        used.dedup();
        assert_eq!(used.len(), MAGBIG_FILES.len());
    }
}
