//! The caption analysis' reading of text (`culturelens_metrics::words::segment`: words, lower-casing,
//! stop words) against ICU4C and spaCy on every prompt of the four prompt sets, exported here by
//! `culturelens prompts export` from the upstream mirror. scripts/fixtures/make_words_reference.py
//! committed only hashes and counts (tests/fixtures/words/reference.json, never prompt text):
//! - per (set, language), over all prompts: the SHA-256 of the per-prompt hashes of ICU4C's words,
//!   ICU's locale lower-casing and the terms (ICU words less spaCy's stop words), and the totals;
//! - per sampled prompt: those hashes and counts, and spaCy's blank-pipeline tokens, with whether
//!   spaCy's tokens equal ICU's words and spaCy's `lower_` (Python `str.lower`) ICU's lower-casing.
//!   culturelens must equal spaCy exactly where ICU does and differ where ICU does (spaCy splits
//!   clitics, elisions, hyphens and Chinese characters by its own rules; it has no Turkish casing);
//! - a hand-written casing table (Turkish/Azerbaijani I, I + combining dot above, Greek final sigma,
//!   capital sharp s, titlecase digraphs) with ICU's lower-case forms in full.

use std::collections::BTreeMap;
use std::path::Path;

use culturelens_metrics::words::segment::{lowercase, terms, words};
use culturelens_testkit::{read_fixture, sha256, upstream_mirror};
use serde_json::Value;

use crate::common::{Cli, read_csv};

/// Languages ICU4X and ICU4C cut differently by design (module docs of `segment`).
const DICTIONARY: [&str; 3] = ["ja", "zh", "ko"];
/// The share of prompts (%) cut exactly as ICU4C cuts them: the measured share (930/1539, 1539/1539,
/// 1510/1539, 271/322, 320/322, 311/322, 396/404) rounded down to 0.1 %.
const AGREEMENT_FLOOR: [(&str, f64); 7] = [
    ("sos/ja", 60.4),
    ("sos/ko", 100.0),
    ("sos/zh", 98.1),
    ("magbig/ja", 84.1),
    ("magbig/ko", 99.3),
    ("magbig/zh", 96.5),
    ("cultext2i/zh", 98.0),
];

/// The fixture's hash: the first 16 hex digits of SHA-256 of the tokens joined by U+001F.
fn h<S: AsRef<str>>(tokens: &[S]) -> String {
    let joined = tokens.iter().map(AsRef::as_ref).collect::<Vec<_>>().join("\u{1f}");
    sha256(joined.as_bytes())[..16].to_string()
}

/// (id, language, prompt) of a set's export, in export order.
fn export(dir: &Path, set: &str) -> Vec<(String, String, String)> {
    let out = dir.join(format!("{set}.csv"));
    Cli::new("prompts")
        .arg("export")
        .arg(set)
        .opt("--out", &out)
        .opt("--mirror", upstream_mirror())
        .env("CULTURELENS_CACHE", dir.join("cache"))
        .run_ok();
    let (header, rows) = read_csv(&out);
    let col = |name: &str| header.iter().position(|c| c == name).unwrap();
    rows.iter()
        .map(|r| (r[col("id")].clone(), r[col("language")].clone(), r[col("prompt")].clone()))
        .collect()
}

#[test]
fn casing_matches_icu_locale_lowercase() {
    let reference: Value = serde_json::from_str(&read_fixture("words/reference.json")).unwrap();
    let casing = reference["casing"].as_array().unwrap();
    assert_eq!(casing.len(), 8);
    for row in casing {
        let (language, text) = (row["language"].as_str().unwrap(), row["text"].as_str().unwrap());
        let got = lowercase(text, language);
        println!(
            "{language} {text:?}: culturelens {got:?}, ICU {}, Python/spaCy {}",
            row["icu"], row["python"]
        );
        assert_eq!(got, row["icu"].as_str().unwrap(), "{language} {text:?}");
        // Turkish and Azerbaijani differ from str.lower (spaCy's lower_) wherever I or İ occurs.
        let tailored = matches!(language, "tr" | "az") && text.contains(['I', 'İ']);
        assert_eq!(got != row["python"].as_str().unwrap(), tailored, "{language} {text:?}");
    }
}

#[test]
fn prompt_words_casing_and_terms_match_icu_and_spacy() {
    let dir = tempfile::tempdir().unwrap();
    let reference: Value = serde_json::from_str(&read_fixture("words/reference.json")).unwrap();
    let mut exports = BTreeMap::new();
    let groups = reference["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 35);
    let mut failures = Vec::new();
    for group in groups {
        let (set, language) = (group["set"].as_str().unwrap(), group["language"].as_str().unwrap());
        let prompts = exports.entry(set.to_string()).or_insert_with(|| export(dir.path(), set));
        let prompts: Vec<_> = prompts.iter().filter(|(_, l, _)| l == language).collect();
        // Every prompt of the group: the digest of the per-prompt hashes, and the totals.
        let mut lines = String::new();
        let (mut n_words, mut n_terms) = (0, 0);
        let mut by_id = BTreeMap::new();
        for (id, _, prompt) in &prompts {
            let w = words(prompt);
            let lower = lowercase(prompt, language);
            let t = terms(prompt, language).unwrap();
            lines += &format!("{} {} {}\n", h(&w), h(&[&lower]), h(&t));
            (n_words, n_terms) = (n_words + w.len(), n_terms + t.len());
            by_id.insert(id.as_str(), (prompt.as_str(), w, lower, t));
        }
        let all = &group["all"];
        let joined: String =
            prompts.iter().map(|(_, _, p)| format!("{}\n", h(&[words(p).concat()]))).collect();
        if sha256(joined.as_bytes()) != all["joined_sha256"].as_str().unwrap() {
            failures.push(format!("{set}/{language}: the words cover other characters than ICU4C's"));
        }
        let dictionary = DICTIONARY.contains(&language);
        if dictionary {
            // Same characters, cut by ICU4X's dictionaries: count the prompts cut as ICU4C cuts them.
            let want: Vec<&str> = group["words8"].as_str().unwrap().split(' ').collect();
            assert_eq!(want.len(), prompts.len(), "{set}/{language}");
            let same = prompts.iter().zip(&want).filter(|((_, _, p), w)| &h(&words(p))[..8] == **w).count();
            let floor = AGREEMENT_FLOOR.iter().find(|(g, _)| *g == format!("{set}/{language}")).unwrap().1;
            println!(
                "{set}/{language}: {} prompts, words cover ICU4C's characters; cut as ICU4C cuts them: {same} ({:.1} %, floor {floor} %)",
                prompts.len(),
                100.0 * same as f64 / prompts.len() as f64
            );
            if (same as f64) < floor / 100.0 * prompts.len() as f64 {
                failures.push(format!(
                    "{set}/{language}: {same} prompts cut as ICU4C cuts them, below {floor} %"
                ));
            }
        }
        let got_all = (prompts.len(), n_words, n_terms, sha256(lines.as_bytes()));
        let want_all = (
            all["prompts"].as_u64().unwrap() as usize,
            all["words"].as_u64().unwrap() as usize,
            all["terms"].as_u64().unwrap() as usize,
            all["sha256"].as_str().unwrap().to_string(),
        );
        if !dictionary && got_all != want_all {
            failures.push(format!("{set}/{language} all prompts: {got_all:?} vs ICU/spaCy {want_all:?}"));
        }
        // The sample, prompt by prompt.
        let sample = group["sample"].as_array().unwrap();
        let (mut spacy_rows, mut spacy_equal) = (0, 0);
        for row in sample {
            let id = row["id"].as_str().unwrap();
            let (prompt, w, lower, t) = &by_id[id];
            assert_eq!(h(&[prompt]), row["prompt"].as_str().unwrap(), "{id}: the export changed");
            let lower_equal = row["spacy_lower_equal"].as_bool().unwrap();
            if (h(&[lower]) == row["spacy_lower"].as_str().unwrap()) != lower_equal {
                failures.push(format!("{id}: {lower:?} vs spaCy lower_ (equal to ICU: {lower_equal})"));
            }
            let mut check = |what: &str, got: String, want: &Value, shown: &dyn std::fmt::Debug| {
                if got != want.as_str().unwrap() {
                    failures.push(format!("{id} {what}: culturelens {shown:?}"));
                }
            };
            check("lower", h(&[lower]), &row["lower"], lower);
            if dictionary {
                continue;
            }
            check("words", h(w), &row["words"], w);
            check("terms", h(t), &row["terms"], t);
            if (w.len() as u64, t.len() as u64)
                != (row["n_words"].as_u64().unwrap(), row["n_terms"].as_u64().unwrap())
            {
                failures.push(format!(
                    "{id}: {} words, {} terms vs ICU {} and {}",
                    w.len(),
                    t.len(),
                    row["n_words"],
                    row["n_terms"]
                ));
            }
            // spaCy: equal exactly where its tokens equal ICU's words, different elsewhere.
            if let Some(spacy) = row["spacy"].as_str() {
                spacy_rows += 1;
                let equal = row["spacy_equal"].as_bool().unwrap();
                spacy_equal += usize::from(equal);
                if (h(w) == spacy) != equal {
                    failures.push(format!("{id}: culturelens {w:?} vs spaCy (equal to ICU: {equal})"));
                }
            }
        }
        if dictionary {
            continue;
        }
        println!(
            "{set}/{language}: {} prompts, {n_words} words, {n_terms} terms (ICU4C + spaCy stop words: {} and {}); \
             spaCy tokens = ICU words on {} of all, on {spacy_equal}/{spacy_rows} sampled = culturelens' ({})",
            prompts.len(),
            all["words"],
            all["terms"],
            all["spacy_equal"],
            group["spacy_tokenizer"].as_str().unwrap_or("no spaCy tokenizer installed")
        );
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
}
