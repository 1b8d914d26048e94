//! The CulText2I prompt set (CulText2I paper Sec. 4-5): cultural concepts (Table 9) × the five
//! prompt templates (Table 1) × ten languages, with the nationalities of Table 8. No prompt data is
//! released upstream: the tables are typed in here from the paper, translations come from the
//! user, and the gibberish of the "English with Gibberish" template is drawn by a seeded generator
//! from the language's alphabet.

use std::collections::HashMap;
use std::path::Path;

use culturelens_rng::SplitMix64;
use culturelens_table::Location;

use crate::csv_file::CsvFile;
use crate::error::PromptError;
use crate::registry::PromptSet;
use crate::table::{Column, Prompt, PromptTable};
use crate::text::{language_code, normalize_ws, slug};

#[doc = include_str!("notes/cultext2i.md")]
pub const NOTES: &str = include_str!("notes/cultext2i.md");

/// A cultural domain of Table 9 and its concepts; `enrichment` are the concepts the paper lists in
/// parentheses ("additional concepts we added for enrichment"). In the personality domain each
/// entry is an adjective and the concept is "{adjective} person" (`suffix`).
#[derive(Debug)]
pub struct Domain {
    pub name: &'static str,
    pub suffix: &'static str,
    pub concepts: &'static [&'static str],
    pub enrichment: &'static [&'static str],
}

/// CulText2I paper Table 9, in the paper's order (203 entries; "nation" is listed twice).
#[rustfmt::skip]
pub const TABLE9: [Domain; 11] = [
    Domain {
        name: "Moral Discipline and Social Values",
        suffix: "",
        concepts: &["independence", "thrift", "drug addiction", "race", "AIDS", "immigrants", "homosexuality",
            "heavy drinkers", "unmarried couples", "proud parents", "feminism", "housewife", "cheating",
            "abortion", "divorce", "sex", "suicide", "violence", "death penalty", "surveillance", "desire",
            "masculinity", "femininity", "pleasure", "animal"],
        enrichment: &["monster"],
    },
    Domain {
        name: "Education",
        suffix: "",
        concepts: &["university", "teacher", "science", "school", "intelligent person", "expert"],
        enrichment: &["physics", "chemistry", "history", "biology", "engineer", "mathematics", "literature"],
    },
    Domain {
        name: "Economy",
        suffix: "",
        concepts: &["market", "industry", "cash", "bank", "economy", "boss", "job", "factory", "agriculture",
            "salary", "rich person", "poor person", "money"],
        enrichment: &["payroll", "mortgage", "tax"],
    },
    Domain {
        name: "Religion",
        suffix: "",
        concepts: &["holiday", "church", "soul", "religion", "god", "death", "hell", "heaven", "wedding",
            "funeral", "pray"],
        enrichment: &["priest", "synagogue", "Judaism", "Christianity", "Islam", "Hinduism", "Buddhism",
            "cow", "snake"],
    },
    Domain {
        name: "Health",
        suffix: "",
        concepts: &["mental health", "healthcare", "hospital", "doctor", "medicine", "treatment"],
        enrichment: &["baby", "elder", "young", "teenager", "pill", "sleep", "memory"],
    },
    Domain {
        name: "Security",
        suffix: "",
        concepts: &["robbery", "alcohol consumption", "war", "civil war", "terrorism", "crime",
            "jobs vacancy", "missile", "cyber", "unemployment", "protection", "attack", "weapon", "peace"],
        enrichment: &[],
    },
    Domain {
        name: "Aesthetics",
        suffix: "",
        concepts: &["beauty", "art", "music", "drama", "dancing", "sport organization", "food", "fashion",
            "beverage"],
        enrichment: &["nature", "dog", "cat", "fish", "horse", "bird", "shirt", "shoes", "jewelry",
            "baseball"],
    },
    Domain {
        name: "Material Culture",
        suffix: "",
        concepts: &["tool", "transportation", "power", "communication", "technology", "newspaper", "TV",
            "radio", "mobile phone", "computer", "camera", "car", "plane", "bicycle", "train", "ship",
            "robot"],
        enrichment: &["social media"],
    },
    Domain {
        name: "Personality Characteristics and Emotions",
        suffix: " person",
        concepts: &["neurotic", "concerned", "shamed", "angry", "nervous", "happy", "extravert", "introvert",
            "energized", "confident", "curious", "cynical", "capable", "empathic", "obedient", "lazy",
            "expressive", "friendly", "dominant", "communicative", "proud", "polite", "truthful",
            "independent", "creative"],
        enrichment: &[],
    },
    Domain {
        name: "Social Capital Organizational Membership",
        suffix: "",
        concepts: &["family", "city", "children", "father", "mother", "neighborhood", "home", "nation",
            "army", "grandmother", "grandfather", "courts", "government", "political party", "police",
            "elections", "charity", "EU", "UN", "protest", "leader", "democracy", "human rights", "nation",
            "flag", "king", "queen", "soldier"],
        enrichment: &["journalist"],
    },
    Domain {
        name: "Countries",
        suffix: "",
        concepts: &[],
        enrichment: &["America", "China", "Russia", "Germany", "France", "Spain", "Egypt", "India", "Arab",
            "Israel"],
    },
];

/// Entries Table 9 lists (the paper says 200).
pub const N_TABLE9_ENTRIES: usize = 203;

/// The six concepts of the unlocking and natural-image experiments (App. B.2.3).
pub const UNLOCKING_CONCEPTS: [&str; 6] = ["city", "food", "king", "market", "nature", "car"];

/// The 40 tangible concepts of the conceptual-coverage analysis (App. B.2.4, Fig. 12).
#[rustfmt::skip]
pub const TANGIBLE_CONCEPTS: [&str; 40] = [
    "university", "teacher", "school", "market", "church", "wedding", "funeral", "hospital", "doctor",
    "missile", "shirt", "shoes", "jewelry", "newspaper", "TV", "radio", "mobile phone", "computer", "camera",
    "car", "plane", "leader", "bicycle", "train", "ship", "robot", "children", "flag", "king", "queen",
    "soldier", "cow", "dog", "cat", "fish", "horse", "bird", "snake", "baby", "elder",
];

/// A language of the study (Sec. 6 "Languages", Table 3 order): ISO 639-1 code, the paper's code,
/// the primary nationality of Table 8 (used by "English with Nation") and Table 8's additional
/// nationalities (second-order National Association).
#[derive(Debug)]
pub struct Language {
    pub code: &'static str,
    pub paper_code: &'static str,
    pub nationality: &'static str,
    pub additional: &'static [&'static str],
    pub alphabet: Alphabet,
}

/// The letters gibberish is drawn from.
#[derive(Debug)]
pub enum Alphabet {
    Letters(&'static str),
    /// An inclusive range of code points (Chinese has no alphabet: CJK Unified Ideographs).
    Range(char, char),
}

impl Alphabet {
    fn len(&self) -> u64 {
        match self {
            Alphabet::Letters(s) => s.chars().count() as u64,
            Alphabet::Range(a, b) => *b as u64 - *a as u64 + 1,
        }
    }

    fn get(&self, i: u64) -> char {
        match self {
            Alphabet::Letters(s) => s.chars().nth(i as usize).expect("index below len"),
            Alphabet::Range(a, _) => char::from_u32(*a as u32 + i as u32).expect("a valid code point"),
        }
    }
}

/// CulText2I paper Table 8 (Chinese is missing from it; "Chinese" is the label of the paper's
/// questionnaire, Fig. 19) and each language's lower-case alphabet.
pub const LANGUAGES: [Language; 10] = [
    Language {
        code: "en",
        paper_code: "EN",
        nationality: "American",
        additional: &["British", "Canadian", "Irish", "South-African", "Australian"],
        alphabet: Alphabet::Letters("abcdefghijklmnopqrstuvwxyz"),
    },
    Language {
        code: "es",
        paper_code: "ES",
        nationality: "Spanish",
        additional: &["Mexican", "Argentinian", "Colombian"],
        alphabet: Alphabet::Letters("abcdefghijklmnopqrstuvwxyzáéíñóúü"),
    },
    Language {
        code: "de",
        paper_code: "DE",
        nationality: "German",
        additional: &["Luxembourgish", "Austrian", "Swiss"],
        alphabet: Alphabet::Letters("abcdefghijklmnopqrstuvwxyzäöüß"),
    },
    Language {
        code: "fr",
        paper_code: "FR",
        nationality: "French",
        additional: &["Belgian", "Swiss", "Canadian"],
        alphabet: Alphabet::Letters("abcdefghijklmnopqrstuvwxyzàâæçéèêëîïôœùûüÿ"),
    },
    Language {
        code: "ru",
        paper_code: "RU",
        nationality: "Russian",
        additional: &["Belarusian", "Ukrainian", "Kazakh", "Kyrgyz"],
        alphabet: Alphabet::Letters("абвгдеёжзийклмнопрстуфхцчшщъыьэюя"),
    },
    Language {
        code: "el",
        paper_code: "EL",
        nationality: "Greek",
        additional: &["Cypriot", "Albanian"],
        alphabet: Alphabet::Letters("αβγδεζηθικλμνξοπρστυφχψω"),
    },
    Language {
        code: "ar",
        paper_code: "AR",
        nationality: "Arab",
        additional: &["Moroccan", "Iraqi", "Algerian", "Saudi", "Egyptian"],
        alphabet: Alphabet::Letters("ابتثجحخدذرزسشصضطظعغفقكلمنهوي"),
    },
    Language {
        code: "he",
        paper_code: "IW",
        nationality: "Israeli",
        additional: &[],
        alphabet: Alphabet::Letters("אבגדהוזחטיכלמנסעפצקרשת"),
    },
    Language {
        code: "zh",
        paper_code: "ZH",
        nationality: "Chinese",
        additional: &[],
        alphabet: Alphabet::Range('\u{4E00}', '\u{9FFF}'),
    },
    Language {
        code: "hi",
        paper_code: "HI",
        nationality: "Hindi",
        additional: &["Trinidadian", "Fijian"],
        alphabet: Alphabet::Letters("अआइईउऊऋएऐओऔकखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसह"),
    },
];

/// The prompt templates of Table 1: id, the paper's name, the template (T = translated,
/// EN = English).
pub const TEMPLATES: [(&str, &str, &str); 5] = [
    ("en_reference", "English Reference", "EN: \"a photo of <concept>\""),
    ("translated_prompt", "Fully Translated Prompt", "T: \"a photo of <concept>\""),
    ("translated_concept", "Translated Concept", "EN: \"a photo of\" + T: <concept>"),
    ("en_nation", "English with Nation", "EN: \"a photo of <nationality> <concept>\""),
    ("en_gibberish", "English with Gibberish", "EN: \"a photo of <concept>\" + T: \"<gibberish>\""),
];

/// The English words every template starts with (Table 1).
const LEAD: &str = "a photo of";

/// Letters of gibberish by default: the length of the paper's example "йкуаскымдо" (Table 1),
/// the longest of the lengths 1, 2, 3, 5, 10 it optimises (Sec. 8).
pub const DEFAULT_GIBBERISH_LENGTH: usize = 10;

/// CulText2I's own columns.
pub const EXTRA_COLUMNS: [Column; 5] = [
    Column { name: "domain", doc: "cultural domain of Table 9" },
    Column {
        name: "enrichment",
        doc: "true for concepts Table 9 lists in parentheses (added for enrichment)",
    },
    Column {
        name: "subsets",
        doc: "paper subsets holding the concept, ;-separated: unlocking (App. B.2.3), tangible (App. B.2.4)",
    },
    Column {
        name: "text_language",
        doc: "language of the prompt text: en, the target language, or en+<target> for mixed templates",
    },
    Column { name: "gibberish", doc: "the generated gibberish (en_gibberish rows)" },
];

/// A cultural concept as used in prompts, with its domain.
#[derive(Debug, Clone, PartialEq)]
pub struct Concept {
    pub concept: String,
    pub domain: &'static str,
    pub enrichment: bool,
}

/// The distinct concepts of Table 9 in the paper's order; a repeated entry (the second "nation")
/// is dropped.
pub fn concepts() -> Vec<Concept> {
    let mut out: Vec<Concept> = Vec::new();
    for d in &TABLE9 {
        let listed = d.concepts.iter().map(|c| (c, false)).chain(d.enrichment.iter().map(|c| (c, true)));
        for (c, enrichment) in listed {
            let concept = format!("{c}{}", d.suffix);
            if !out.iter().any(|o| o.concept == concept) {
                out.push(Concept { concept, domain: d.name, enrichment });
            }
        }
    }
    out
}

/// Options of the CulText2I set.
#[derive(Debug, Clone)]
pub struct Options {
    pub gibberish_length: usize,
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { gibberish_length: DEFAULT_GIBBERISH_LENGTH, seed: 0 }
    }
}

/// User translations of one (language, concept): the fully translated prompt and the translated
/// concept, each optional.
#[derive(Debug, Clone, Default)]
pub struct Translation {
    pub prompt: Option<String>,
    pub concept: Option<String>,
    pub source: String,
}

/// Translations keyed by (ISO 639-1 code, English concept).
pub type Translations = HashMap<(&'static str, String), Translation>;

/// Reads a translation CSV with columns `language` (ISO 639-1, or the paper's code such as IW),
/// `concept` (as in Table 9, e.g. "lazy person"), `translated_prompt` ("a photo of {concept}" in
/// the language) and `translated_concept` (the concept in the language). An empty cell leaves
/// that template out for the pair; a row needs at least one of the two. Other columns are ignored.
pub fn read_translations(path: &Path, bytes: &[u8]) -> Result<Translations, PromptError> {
    let at = || Location::file(path);
    let mut file = CsvFile::open(bytes, at())?;
    let (i_lang, i_concept) = (file.column("language")?, file.column("concept")?);
    let (i_prompt, i_translated) = (file.column("translated_prompt")?, file.column("translated_concept")?);
    let known = concepts();
    let mut out = Translations::new();
    for record in file.records() {
        let (line, record) = record?;
        let cell = |i: usize| normalize_ws(record.get(i).unwrap_or_default());
        let raw = cell(i_lang);
        let code = language_code(&raw)
            .filter(|c| *c != "en" && LANGUAGES.iter().any(|l| l.code == *c))
            .ok_or_else(|| {
                PromptError::malformed(
                    at().line(line).column("language"),
                    format!(
                        "{raw:?} is not a non-English CulText2I language (es, de, fr, ru, el, ar, he, zh, hi)"
                    ),
                )
            })?;
        let concept = cell(i_concept);
        if !known.iter().any(|k| k.concept == concept) {
            return Err(PromptError::malformed(
                at().line(line).column("concept"),
                format!("{concept:?} is not a Table 9 concept (see `culturelens prompts show cultext2i`)"),
            ));
        }
        let nonempty = |s: String| (!s.is_empty()).then_some(s);
        let translation = Translation {
            prompt: nonempty(cell(i_prompt)),
            concept: nonempty(cell(i_translated)),
            source: format!("{}:{line}", path.display()),
        };
        if translation.prompt.is_none() && translation.concept.is_none() {
            return Err(PromptError::malformed(
                at().line(line),
                "both translated_prompt and translated_concept are empty",
            ));
        }
        if let Some(first) = out.insert((code, concept.clone()), translation) {
            return Err(PromptError::malformed(
                at().line(line),
                format!("{code} {concept:?} is already translated at {}", first.source),
            ));
        }
    }
    Ok(out)
}

/// `length` letters of `language`'s alphabet, a pure function of (seed, language, concept) so a
/// subset of languages or concepts gets the same gibberish as the full set.
pub fn gibberish(language: &Language, concept: &str, seed: u64, length: usize) -> String {
    let mut rng = SplitMix64::new(seed ^ fnv1a64(&format!("{}\u{1f}{concept}", language.code)));
    let n = language.alphabet.len();
    (0..length).map(|_| language.alphabet.get(rng.below(n))).collect()
}

/// 64-bit FNV-1a of a string's UTF-8 bytes.
fn fnv1a64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Builds the table: the English reference per concept, then per language "English with Nation",
/// "English with Gibberish" and, where translations are given, the two translated templates.
pub fn build(translations: Option<&Translations>, options: &Options) -> Result<PromptTable, PromptError> {
    if options.gibberish_length == 0 {
        return Err(PromptError::Invalid("the gibberish length must be at least 1".into()));
    }
    let concepts = concepts();
    let english = &LANGUAGES[0];
    let mut rows: Vec<Prompt> = concepts
        .iter()
        .map(|c| {
            let prompt = format!("{LEAD} {}", c.concept);
            let source = table_source("English Reference");
            prompt_row(english, "en_reference", c, prompt, "en".into(), String::new(), source)
        })
        .collect();
    for lang in &LANGUAGES {
        rows.extend(language_rows(lang, &concepts, translations, options));
    }
    Ok(PromptTable::new(PromptSet::Cultext2i, &EXTRA_COLUMNS, rows))
}

/// The rows of one language: "English with Nation" and "English with Gibberish" for every
/// concept, then the translated templates of the concepts the user translated.
fn language_rows(
    lang: &Language,
    concepts: &[Concept],
    translations: Option<&Translations>,
    options: &Options,
) -> Vec<Prompt> {
    let mixed = if lang.code == "en" { "en".to_string() } else { format!("en+{}", lang.code) };
    let mut rows = Vec::new();
    for c in concepts {
        let prompt = format!("{LEAD} {} {}", lang.nationality, c.concept);
        let source = format!("{}, Table 8", table_source("English with Nation"));
        rows.push(prompt_row(lang, "en_nation", c, prompt, "en".into(), String::new(), source));
    }
    for c in concepts {
        let g = gibberish(lang, &c.concept, options.seed, options.gibberish_length);
        let prompt = format!("{LEAD} {} {g}", c.concept);
        let source = format!("{}; seed {}", table_source("English with Gibberish"), options.seed);
        rows.push(prompt_row(lang, "en_gibberish", c, prompt, mixed.clone(), g, source));
    }
    let Some(translations) = translations else { return rows };
    for c in concepts {
        let Some(t) = translations.get(&(lang.code, c.concept.clone())) else { continue };
        if let Some(p) = &t.prompt {
            let (text, source) = (lang.code.to_string(), t.source.clone());
            rows.push(prompt_row(lang, "translated_prompt", c, p.clone(), text, String::new(), source));
        }
        if let Some(tc) = &t.concept {
            let prompt = format!("{LEAD} {tc}");
            let source = t.source.clone();
            rows.push(prompt_row(
                lang,
                "translated_concept",
                c,
                prompt,
                mixed.clone(),
                String::new(),
                source,
            ));
        }
    }
    rows
}

/// Where a template's rows come from in the paper.
fn table_source(template_name: &str) -> String {
    format!("CulText2I paper Table 1 ({template_name}), Table 9")
}

/// The paper subsets holding `concept`, `;`-separated.
fn subsets(concept: &str) -> String {
    let mut s = Vec::new();
    if UNLOCKING_CONCEPTS.contains(&concept) {
        s.push("unlocking");
    }
    if TANGIBLE_CONCEPTS.contains(&concept) {
        s.push("tangible");
    }
    s.join(";")
}

/// One row of `template` (a Table 1 id) for concept `c` in `lang`.
fn prompt_row(
    lang: &Language,
    template: &str,
    c: &Concept,
    prompt: String,
    text_language: String,
    gibberish: String,
    source: String,
) -> Prompt {
    let template_text = TEMPLATES.iter().find(|t| t.0 == template).expect("a Table 1 template").2;
    Prompt {
        id: format!("cultext2i-{}-{template}-{}", lang.code, slug(&c.concept)),
        language: lang.code.into(),
        prompt,
        english: format!("{LEAD} {}", c.concept),
        culture: lang.nationality.into(),
        concept: c.concept.clone(),
        template: template.into(),
        template_text: template_text.into(),
        source,
        extra: vec![c.domain.into(), c.enrichment.to_string(), subsets(&c.concept), text_language, gibberish],
        ..Prompt::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table9_lists_203_entries_and_202_distinct_concepts() {
        let listed: usize = TABLE9.iter().map(|d| d.concepts.len() + d.enrichment.len()).sum();
        assert_eq!(listed, N_TABLE9_ENTRIES);
        let per_domain: Vec<usize> = TABLE9.iter().map(|d| d.concepts.len() + d.enrichment.len()).collect();
        assert_eq!(per_domain, [26, 13, 16, 20, 13, 14, 19, 18, 25, 29, 10]);
        assert_eq!(TABLE9.iter().map(|d| d.enrichment.len()).sum::<usize>(), 49);
        let c = concepts();
        assert_eq!(c.len(), 202);
        let social = &TABLE9[9];
        assert_eq!(social.concepts.iter().filter(|&&x| x == "nation").count(), 2, "the one repeated entry");
        assert!(c.iter().any(|x| x.concept == "lazy person" && x.domain == "Personality Characteristics and Emotions"));
        assert!(c.iter().any(|x| x.concept == "monster" && x.enrichment));
        assert!(NOTES.contains("203") && NOTES.contains("202") && NOTES.contains("nation"));
    }

    #[test]
    fn paper_subsets_are_table9_concepts() {
        let c: Vec<String> = concepts().into_iter().map(|c| c.concept).collect();
        for s in UNLOCKING_CONCEPTS.iter().chain(&TANGIBLE_CONCEPTS) {
            assert!(c.iter().any(|x| x == s), "{s}");
        }
    }

    #[test]
    fn templates_without_translations() {
        let t = build(None, &Options::default()).unwrap();
        assert_eq!(t.len(), 202 + 10 * 202 * 2);
        let counts: Vec<(String, usize)> = t.counts_by_language();
        assert_eq!(counts[0], ("en".to_string(), 202 * 3));
        assert!(counts[1..].iter().all(|(_, n)| *n == 404));
        let r = t.rows.iter().find(|r| r.id == "cultext2i-ru-en_nation-food").unwrap();
        assert_eq!(
            (r.prompt.as_str(), r.culture.as_str(), r.english.as_str()),
            ("a photo of Russian food", "Russian", "a photo of food")
        );
        assert_eq!(r.extra, ["Aesthetics", "false", "unlocking", "en", ""]);
        let e = t.rows.iter().find(|r| r.id == "cultext2i-en-en_reference-lazy-person").unwrap();
        assert_eq!(e.prompt, "a photo of lazy person");
        assert_eq!(
            t.rows.iter().find(|r| r.id == "cultext2i-he-en_nation-king").unwrap().prompt,
            "a photo of Israeli king"
        );
        assert_eq!(TEMPLATES.len(), 5);
    }

    #[test]
    fn gibberish_is_seeded_and_uses_the_alphabet() {
        let ru = &LANGUAGES[4];
        let g = gibberish(ru, "food", 0, 10);
        assert_eq!(g.chars().count(), 10);
        let Alphabet::Letters(letters) = ru.alphabet else { panic!() };
        assert!(g.chars().all(|ch| letters.contains(ch)), "{g}");
        assert_eq!(g, gibberish(ru, "food", 0, 10), "deterministic");
        assert_ne!(g, gibberish(ru, "food", 1, 10), "the seed matters");
        assert_ne!(g, gibberish(ru, "king", 0, 10), "so does the concept");
        let zh = gibberish(&LANGUAGES[8], "food", 0, 5);
        assert!(zh.chars().all(|ch| ('\u{4E00}'..='\u{9FFF}').contains(&ch)), "{zh}");
        let t = build(None, &Options { gibberish_length: 3, seed: 7 }).unwrap();
        let r = t.rows.iter().find(|r| r.id == "cultext2i-ar-en_gibberish-city").unwrap();
        assert_eq!(r.prompt, format!("a photo of city {}", gibberish(&LANGUAGES[6], "city", 7, 3)));
        assert_eq!((r.extra[3].as_str(), r.extra[4].chars().count()), ("en+ar", 3));
        assert!(build(None, &Options { gibberish_length: 0, seed: 0 }).is_err());
    }

    #[test]
    fn gibberish_stream_is_pinned() {
        // FNV-1a of "ru\u{1f}food" seeds SplitMix64; a change here changes every exported prompt.
        assert_eq!(fnv1a64(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64("a"), 0xaf63_dc4c_8601_ec8c);
        let en = &LANGUAGES[0];
        let mut rng = SplitMix64::new(fnv1a64("en\u{1f}car"));
        let expected: String = (0..4).map(|_| en.alphabet.get(rng.below(26))).collect();
        assert_eq!(gibberish(en, "car", 0, 4), expected);
    }

    #[test]
    fn user_translations_add_the_translated_templates() {
        let csv = "language,concept,translated_prompt,translated_concept,note\n\
                   ru,food,фото еда,еда,paper example\nIW,king,,מלך,\n";
        let tr = read_translations(Path::new("tr.csv"), csv.as_bytes()).unwrap();
        let t = build(Some(&tr), &Options::default()).unwrap();
        assert_eq!(t.len(), 202 + 10 * 202 * 2 + 3);
        let full = t.rows.iter().find(|r| r.id == "cultext2i-ru-translated_prompt-food").unwrap();
        assert_eq!(
            (full.prompt.as_str(), full.source.as_str(), full.extra[3].as_str()),
            ("фото еда", "tr.csv:2", "ru")
        );
        let mixed = t.rows.iter().find(|r| r.id == "cultext2i-ru-translated_concept-food").unwrap();
        assert_eq!(mixed.prompt, "a photo of еда");
        assert_eq!(
            t.rows.iter().find(|r| r.id == "cultext2i-he-translated_concept-king").unwrap().prompt,
            "a photo of מלך"
        );
        assert!(!t.rows.iter().any(|r| r.id == "cultext2i-he-translated_prompt-king"));
    }

    #[test]
    fn malformed_translations_are_named() {
        let err = |body: &str| {
            let text = format!("language,concept,translated_prompt,translated_concept\n{body}");
            read_translations(Path::new("tr.csv"), text.as_bytes()).unwrap_err().to_string()
        };
        let e = err("ru,foood,a,b\n");
        assert!(e.contains("tr.csv, line 2, column concept: \"foood\" is not a Table 9 concept"), "{e}");
        let e = err("en,food,a,b\n");
        assert!(e.contains("line 2, column language: \"en\" is not a non-English CulText2I language"), "{e}");
        let e = err("ru,food,,\n");
        assert!(e.contains("line 2: both translated_prompt and translated_concept are empty"), "{e}");
        let e = err("ru,food,a,b\nru,food,c,d\n");
        assert!(e.contains("line 3: ru \"food\" is already translated at tr.csv:2"), "{e}");
        let e = read_translations(Path::new("tr.csv"), b"language,concept,translated_prompt\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("column translated_concept: required column is missing"), "{e}");
    }
}
