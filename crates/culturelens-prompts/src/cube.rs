//! The CUBE prompt set: the 1,002 cultural-awareness prompts of CUBE-1K (CUBE paper Sec. 3.2,
//! Table 7, Table 13) from the upstream `cube_1k.json`, and the under-specified prompts of the
//! cultural-diversity evaluation (Sec. 5, App. J, K, Fig. 8) for global and within-culture runs.

use std::collections::HashMap;
use std::path::Path;

use culturelens_table::Location;
use serde_json::Value;

use crate::error::PromptError;
use crate::registry::{CUBE_FILES, PromptSet};
use crate::table::{Column, Prompt, PromptTable};
use crate::text::{normalize_ws, slug};

#[doc = include_str!("notes/cube.md")]
pub const NOTES: &str = include_str!("notes/cube.md");

/// The eight countries (Sec. 3): the name used by the data, its demonym (as the upstream prompts
/// write it), and Table 7's counts of cuisine, landmark and art artifacts.
pub const COUNTRIES: [(&str, &str, [usize; 3]); 8] = [
    ("Brazil", "Brazilian", [58, 33, 27]),
    ("India", "Indian", [73, 40, 27]),
    ("Japan", "Japanese", [62, 41, 26]),
    ("Nigeria", "Nigerian", [61, 25, 22]),
    ("Turkey", "Turkish", [63, 39, 26]),
    ("Italy", "Italian", [77, 36, 22]),
    ("United States", "American", [56, 44, 22]),
    ("France", "French", [67, 37, 21]),
];

/// The three concepts (Sec. 3) and the upstream `domain` values that mean each: the data labels
/// landmarks "landmarks" for Brazil and India and "landscapes" for the other countries.
pub const CONCEPTS: [(&str, &[&str]); 3] =
    [("cuisine", &["cuisine"]), ("landmark", &["landmarks", "landscapes"]), ("art", &["art"])];

/// Table 13: the prompt templates per concept (art split by art form), with its placeholders.
/// `art_other` is not in Table 13: upstream words some art prompts "Image of {x} art from {country}".
pub const TEMPLATES: [(&str, &str); 6] = [
    ("cuisine", "A high resolution image of <food> from <country_name> cuisine."),
    ("landmark", "A panoramic view of <place_name> in <country_name>."),
    ("clothing", "Image of a person in <clothes> from <country_name>."),
    ("painting", "A <style_of_painting> painting from <country_name>."),
    ("performance", "An image of performance of <performing_art> from <country_name>."),
    ("art_other", "Image of <art> art from <country_name> (upstream wording, not in Table 13)"),
];

/// Table 13's negative prompt, used with every cultural-awareness prompt.
pub const NEGATIVE_PROMPT: &str = "multiple items, blurry, painting, cartoon, people, human, man, woman, artificial, \
multiple images, nsfw, bad quality, bad anatomy, worst quality, low quality, low resolutions, extra fingers, blur, \
blurry, ugly, wrong proportions, watermark, image artifacts, lowres, jpeg artifacts, deformed, noisy";

/// Under-specified prompts for global geo-cultural diversity, quoted from the paper: concept,
/// prompt, where it is quoted.
pub const GLOBAL_PROMPTS: [(&str, &str, &str); 5] = [
    ("cuisine", "Produce a high quality image of a dish.", "CUBE paper Fig. 8"),
    ("landmark", "High definition photo of a monument.", "CUBE paper Fig. 8, Fig. 1(a)"),
    ("landmark", "Image of tourist landmarks", "CUBE paper Sec. 5"),
    ("landmark", "Image of monuments", "CUBE paper App. J.1"),
    ("art", "Image of traditional clothing.", "CUBE paper App. J"),
];

/// Under-specified within-culture templates ({demonym}, {country}): concept, template, source.
/// Only the cuisine wording is the paper's (App. K); the paper gives none for landmarks and art,
/// so theirs add the country to the paper's global wording.
pub const WITHIN_TEMPLATES: [(&str, &str, &str); 3] = [
    ("cuisine", "Image of a dish from {demonym} cuisine.", "CUBE paper App. K"),
    (
        "landmark",
        "High definition photo of a monument in {country}.",
        "culturelens: Fig. 8 wording + country",
    ),
    ("art", "Image of traditional clothing from {country}.", "culturelens: App. J wording + country"),
];

/// Records in CUBE-1K (the paper's text says 1,000; Table 7 sums to 1,005).
pub const N_RECORDS: usize = 1_002;

/// CUBE's own columns.
pub const EXTRA_COLUMNS: [Column; 8] = [
    Column {
        name: "kind",
        doc: "awareness (CUBE-1K), diversity_global or diversity_within (under-specified prompts)",
    },
    Column {
        name: "domain",
        doc: "upstream domain label (cuisine, landmarks, landscapes, art); empty for diversity rows",
    },
    Column { name: "artifact", doc: "the cultural artifact (upstream name, whitespace-normalised)" },
    Column {
        name: "art_form",
        doc: "for art: clothing, painting, performance or other (from the upstream prompt wording)",
    },
    Column { name: "wikidata_id", doc: "Wikidata id of the artifact (Q...) when upstream gives one" },
    Column { name: "negative_prompt", doc: "Table 13 negative prompt (awareness rows)" },
    Column {
        name: "artifact_in_prompt",
        doc: "true if the prompt names the artifact; false for 9 upstream India landmark records whose prompt names a dish",
    },
    Column {
        name: "duplicate_of",
        doc: "id of the first record with the same country, concept and artifact, if any",
    },
];

/// Parses `cube_1k.json` (a JSON array of records with string fields `name`, `country`,
/// `domain`, `prompt`, `id`) and appends the under-specified diversity prompts: each record is
/// read and checked ([`read_record`]), then turned into a row ([`Record::into_prompt`]).
pub fn parse(bytes: &[u8]) -> Result<PromptTable, PromptError> {
    let records: Vec<Value> = serde_json::from_slice(bytes).map_err(|e| {
        PromptError::malformed(at().line(e.line() as u64), format!("not a JSON array of records: {e}"))
    })?;
    let mut rows = Vec::with_capacity(records.len() + GLOBAL_PROMPTS.len() + 24);
    let mut first: HashMap<(String, &str, String), String> = HashMap::new();
    for (i, record) in records.iter().enumerate() {
        let record = read_record(i, record)?;
        let id = format!("cube-{i:04}");
        let first_id = first.entry((record.country.clone(), record.concept, record.artifact.clone()));
        let first_id = first_id.or_insert_with(|| id.clone());
        let duplicate_of = if *first_id == id { String::new() } else { first_id.clone() };
        rows.push(record.into_prompt(i, id, duplicate_of));
    }
    rows.extend(diversity_prompts());
    Ok(PromptTable::new(PromptSet::Cube, &EXTRA_COLUMNS, rows))
}

/// The upstream file, for error locations and `source` values.
fn at() -> Location {
    Location::file(Path::new(CUBE_FILES[0].mirror_path))
}

/// One checked CUBE-1K record.
struct Record {
    country: String,
    domain: String,
    concept: &'static str,
    artifact: String,
    prompt: String,
    upstream_id: String,
}

/// Reads record `i`: string fields, non-empty where required, a CUBE country and a known domain.
fn read_record(i: usize, record: &Value) -> Result<Record, PromptError> {
    let field = |name: &str| -> Result<String, PromptError> {
        let place = || at().row(i).column(name);
        match record.get(name) {
            Some(Value::String(s)) => Ok(normalize_ws(s)),
            Some(other) => Err(PromptError::malformed(place(), format!("expected a string, found {other}"))),
            None => Err(PromptError::malformed(place(), "missing field")),
        }
    };
    let nonempty = |name: &str| {
        let v = field(name)?;
        if v.is_empty() {
            Err(PromptError::malformed(at().row(i).column(name), "empty value"))
        } else {
            Ok(v)
        }
    };
    let country = nonempty("country")?;
    if !COUNTRIES.iter().any(|c| c.0 == country) {
        return Err(PromptError::malformed(
            at().row(i).column("country"),
            format!("{country:?} is not one of the 8 CUBE countries"),
        ));
    }
    let domain = nonempty("domain")?;
    let concept = CONCEPTS.iter().find(|c| c.1.contains(&domain.as_str())).map(|c| c.0).ok_or_else(|| {
        PromptError::malformed(
            at().row(i).column("domain"),
            format!("unknown domain {domain:?} (expected cuisine, landmarks, landscapes or art)"),
        )
    })?;
    let artifact = nonempty("name")?;
    let prompt = nonempty("prompt")?;
    let upstream_id = field("id")?;
    Ok(Record { country, domain, concept, artifact, prompt, upstream_id })
}

impl Record {
    /// The awareness row of record `i` (`duplicate_of`: the id of an earlier record with the
    /// same country, concept and artifact, or empty).
    fn into_prompt(self, i: usize, id: String, duplicate_of: String) -> Prompt {
        let art_form = if self.concept == "art" { art_form(&self.prompt) } else { "" };
        let template = match (self.concept, art_form) {
            ("art", "other") => "art_other",
            ("art", form) => form,
            (concept, _) => concept,
        };
        let in_prompt = self.prompt.to_lowercase().contains(&self.artifact.to_lowercase());
        let wikidata = if is_wikidata_id(&self.upstream_id) { self.upstream_id } else { String::new() };
        Prompt {
            id,
            language: "en".into(),
            english: self.prompt.clone(),
            prompt: self.prompt,
            culture: self.country,
            concept: self.concept.into(),
            template: template.into(),
            template_text: template_text(template).into(),
            source: format!("{}:record {i}", CUBE_FILES[0].mirror_path),
            extra: vec![
                "awareness".into(),
                self.domain,
                self.artifact,
                art_form.into(),
                wikidata,
                NEGATIVE_PROMPT.into(),
                in_prompt.to_string(),
                duplicate_of,
            ],
            ..Prompt::default()
        }
    }
}

/// The under-specified prompts: [`GLOBAL_PROMPTS`], then [`WITHIN_TEMPLATES`] for every country.
fn diversity_prompts() -> Vec<Prompt> {
    let diversity = |id: String,
                     concept: &str,
                     prompt: String,
                     kind: &str,
                     template: &str,
                     culture: &str,
                     source: &str| {
        let mut extra = vec![String::new(); EXTRA_COLUMNS.len()];
        extra[0] = format!("diversity_{kind}");
        Prompt {
            id,
            language: "en".into(),
            english: prompt.clone(),
            prompt,
            culture: culture.into(),
            concept: concept.into(),
            template: format!("{kind}_{concept}"),
            template_text: template.into(),
            source: source.into(),
            extra,
            ..Prompt::default()
        }
    };
    let mut rows = Vec::new();
    for (concept, prompt, source) in GLOBAL_PROMPTS {
        let k =
            GLOBAL_PROMPTS.iter().filter(|g| g.0 == concept).position(|g| g.1 == prompt).expect("listed") + 1;
        let id = format!("cube-global-{concept}-{k}");
        rows.push(diversity(id, concept, prompt.into(), "global", prompt, "", source));
    }
    for (concept, template, source) in WITHIN_TEMPLATES {
        for (country, demonym, _) in COUNTRIES {
            let prompt = template.replace("{demonym}", demonym).replace("{country}", country);
            let id = format!("cube-within-{concept}-{}", slug(country));
            rows.push(diversity(id, concept, prompt, "within", template, country, source));
        }
    }
    rows
}

/// The art form an upstream art prompt describes: "{x} performance from" → performance,
/// "... clothing" → clothing, "{x} painting from" → painting, anything else ("Image of {x} art
/// from {country}") → other.
fn art_form(prompt: &str) -> &'static str {
    if prompt.contains(" performance from ") {
        "performance"
    } else if prompt.contains(" clothing") {
        "clothing"
    } else if prompt.contains(" painting from ") {
        "painting"
    } else {
        "other"
    }
}

fn template_text(template: &str) -> &'static str {
    TEMPLATES.iter().find(|t| t.0 == template).map(|t| t.1).expect("a Table 13 template id")
}

fn is_wikidata_id(s: &str) -> bool {
    s.strip_prefix('Q').is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests_support::mirror_bytes;

    fn dataset() -> PromptTable {
        parse(&mirror_bytes(&CUBE_FILES[0])).unwrap()
    }

    fn awareness(t: &PromptTable) -> Vec<&Prompt> {
        t.rows.iter().filter(|r| r.extra[0] == "awareness").collect()
    }

    #[test]
    fn record_and_country_counts() {
        let t = dataset();
        let aw = awareness(&t);
        assert_eq!(aw.len(), N_RECORDS);
        // Per country and concept in the data; Table 7 agrees except Brazil (see NOTES).
        let data: [(&str, [usize; 3]); 8] = [
            ("Brazil", [58, 32, 25]),
            ("India", [73, 40, 27]),
            ("Japan", [62, 41, 26]),
            ("Nigeria", [61, 25, 22]),
            ("Turkey", [63, 39, 26]),
            ("Italy", [77, 36, 22]),
            ("United States", [56, 44, 22]),
            ("France", [67, 37, 21]),
        ];
        for (country, counts) in data {
            for (k, (concept, _)) in CONCEPTS.iter().enumerate() {
                let n = aw.iter().filter(|r| r.culture == country && r.concept == *concept).count();
                assert_eq!(n, counts[k], "{country} {concept}");
            }
            let table7 = COUNTRIES.iter().find(|c| c.0 == country).unwrap().2;
            assert_eq!(table7 == counts, country != "Brazil", "{country}");
        }
        let totals: Vec<usize> =
            data.iter().map(|(c, _)| aw.iter().filter(|r| r.culture == *c).count()).collect();
        assert_eq!(totals, [115, 140, 129, 108, 128, 135, 122, 125]);
        assert_eq!(COUNTRIES.iter().map(|c| c.2.iter().sum::<usize>()).sum::<usize>(), 1_005);
    }

    #[test]
    fn landmarks_and_landscapes_are_one_concept() {
        let t = dataset();
        let aw = awareness(&t);
        let landmark: Vec<&&Prompt> = aw.iter().filter(|r| r.concept == "landmark").collect();
        assert_eq!(landmark.len(), 294);
        assert_eq!(landmark.iter().filter(|r| r.extra[1] == "landmarks").count(), 72);
        assert_eq!(landmark.iter().filter(|r| r.extra[1] == "landscapes").count(), 222);
        assert!(landmark.iter().all(|r| r.template == "landmark" && r.template_text == TEMPLATES[1].1));
        assert!(aw.iter().all(|r| r.extra[5] == NEGATIVE_PROMPT));
    }

    #[test]
    fn upstream_quirks_are_flagged() {
        let t = dataset();
        let aw = awareness(&t);
        let r = aw.iter().find(|r| r.id == "cube-0088").unwrap();
        assert_eq!(r.extra[2], "Pelourinho", "trailing space trimmed");
        assert_eq!(r.prompt, "A panoramic view of Pelourinho in Brazil, realistic", "double space collapsed");
        let mismatched: Vec<&str> =
            aw.iter().filter(|r| r.extra[6] == "false").map(|r| r.id.as_str()).collect();
        assert_eq!(mismatched, (246..=254).map(|i| format!("cube-{i:04}")).collect::<Vec<_>>());
        let shanti = aw.iter().find(|r| r.id == "cube-0246").unwrap();
        assert_eq!(
            (shanti.extra[2].as_str(), shanti.prompt.as_str()),
            ("Shanti Stupa", "A panoramic view of Chingri fry in India, realistic")
        );
        let dups: Vec<&&Prompt> = aw.iter().filter(|r| !r.extra[7].is_empty()).collect();
        assert_eq!(dups.len(), 8, "7 repeated artifacts, Calca three times");
        let calca: Vec<&&Prompt> = aw.iter().filter(|r| r.extra[2] == "Calça").collect();
        assert_eq!(calca.len(), 3);
        assert!(calca[0].extra[7].is_empty());
        assert!(calca[1..].iter().all(|r| r.extra[7] == calca[0].id));
        let unique: std::collections::HashSet<&str> = aw.iter().map(|r| r.prompt.as_str()).collect();
        assert_eq!(unique.len(), 994);
    }

    #[test]
    fn art_forms_and_wikidata_ids() {
        let t = dataset();
        let aw = awareness(&t);
        let count = |form: &str| aw.iter().filter(|r| r.extra[3] == form).count();
        assert_eq!(
            [count("performance"), count("clothing"), count("painting"), count("other")],
            [109, 65, 11, 6]
        );
        assert_eq!(count("performance") + count("clothing") + count("painting") + count("other"), 191);
        let other = aw.iter().find(|r| r.extra[3] == "other").unwrap();
        assert_eq!(other.template, "art_other");
        let madhubani = aw.iter().find(|r| r.extra[2] == "Madhubani").unwrap();
        assert_eq!((madhubani.extra[4].as_str(), madhubani.template.as_str()), ("Q2547125", "painting"));
        assert!(aw.iter().all(|r| r.extra[4].is_empty() || is_wikidata_id(&r.extra[4])));
        assert!(!is_wikidata_id("LLM") && !is_wikidata_id("Q") && is_wikidata_id("Q42"));
    }

    #[test]
    fn diversity_prompts_for_global_and_within_culture_runs() {
        let t = dataset();
        let global: Vec<&Prompt> = t.rows.iter().filter(|r| r.extra[0] == "diversity_global").collect();
        assert_eq!(global.len(), 5);
        let dish = t.rows.iter().find(|r| r.id == "cube-global-cuisine-1").unwrap();
        assert_eq!(
            (dish.prompt.as_str(), dish.source.as_str()),
            ("Produce a high quality image of a dish.", "CUBE paper Fig. 8")
        );
        assert_eq!(
            t.rows.iter().find(|r| r.id == "cube-global-landmark-1").unwrap().prompt,
            "High definition photo of a monument."
        );
        let within: Vec<&Prompt> = t.rows.iter().filter(|r| r.extra[0] == "diversity_within").collect();
        assert_eq!(within.len(), 24);
        let br = t.rows.iter().find(|r| r.id == "cube-within-cuisine-brazil").unwrap();
        assert_eq!(
            (br.prompt.as_str(), br.culture.as_str()),
            ("Image of a dish from Brazilian cuisine.", "Brazil")
        );
        let us = t.rows.iter().find(|r| r.id == "cube-within-landmark-united-states").unwrap();
        assert_eq!(us.prompt, "High definition photo of a monument in United States.");
        assert_eq!(t.len(), N_RECORDS + 5 + 24);
    }

    #[test]
    fn malformed_records_are_named() {
        let err = |text: &str| parse(text.as_bytes()).unwrap_err().to_string();
        let rec = |country: &str, domain: &str| {
            format!(r#"[{{"name":"x","country":"{country}","domain":"{domain}","prompt":"p","id":"LLM"}}]"#)
        };
        assert!(parse(rec("Japan", "cuisine").as_bytes()).is_ok());
        let e = err(&rec("Japan", "music"));
        assert!(e.contains("cube/cube_1k.json, row 0, column domain: unknown domain \"music\""), "{e}");
        let e = err(&rec("Peru", "art"));
        assert!(e.contains("row 0, column country: \"Peru\" is not one of the 8 CUBE countries"), "{e}");
        let e = err(r#"[{"name":"x","country":"Japan","domain":"art","prompt":3,"id":""}]"#);
        assert!(e.contains("row 0, column prompt: expected a string, found 3"), "{e}");
        let e = err(r#"[{"country":"Japan","domain":"art","prompt":"p","id":""}]"#);
        assert!(e.contains("row 0, column name: missing field"), "{e}");
        let e = err(r#"[{"name":" ","country":"Japan","domain":"art","prompt":"p","id":""}]"#);
        assert!(e.contains("row 0, column name: empty value"), "{e}");
        let e = err("{\"records\": 1}");
        assert!(e.contains("cube_1k.json, line 1: not a JSON array of records"), "{e}");
        let e = err("[\n {\"name\": ]");
        assert!(e.contains("cube_1k.json, line 2: not a JSON array of records"), "{e}");
    }
}
