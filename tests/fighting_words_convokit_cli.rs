//! `culturelens captions` against ConvoKit's own `FightingWords` (convokit 5.0.0), its parameters
//! set to culturelens' conventions (binary unigram counts times the smoothed idf through its `cv`,
//! the model's pooled corpus as its `prior`, one fit per document against the model's other
//! languages): scripts/fixtures/make_fighting_words_convokit.py wrote
//! tests/fixtures/fighting_words/convokit.json on two corpora, the planted one of
//! tests/fixtures/captions/ and a multilingual one (English, Turkish, German and Russian sentences)
//! whose terms the script made with ICU4C word breaks, ICU's locale lower-casing and spaCy's stop
//! words. The same terms per document show that culturelens' segmentation agrees with that reading
//! on these captions; the z-scores are compared with ConvoKit as shipped (its class counts are
//! float32) and with the same ConvoKit code run with float64 counts.

use std::collections::BTreeMap;
use std::path::Path;

use culturelens_testkit::{fixture, read_fixture};

use crate::common::{Cli, read_csv};

/// Measured: 1.77e-7 (planted) and 2.04e-7 (multilingual), from ConvoKit's float32 counts.
const BOUND_CONVOKIT: f64 = 4e-7;
/// Measured: 4.3e-15 (multilingual; planted below): rounding only.
const BOUND_F64: f64 = 1e-14;

/// z per (document "model/language", term) from the CLI's terms.csv.
fn culturelens_z(dir: &Path, folder: &str) -> BTreeMap<(String, String), f64> {
    let fx = fixture(folder);
    let out = dir.join(folder);
    Cli::new("captions")
        .opt("--captions", fx.join("captions.csv"))
        .opt("--manifest", fx.join("manifest.csv"))
        .opt("--out", &out)
        .run_ok();
    let (header, rows) = read_csv(&out.join("terms.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    rows.iter()
        .map(|r| {
            let doc = format!("{}/{}", r[col("model")], r[col("language")]);
            ((doc, r[col("term")].clone()), r[col("z")].parse().unwrap())
        })
        .collect()
}

fn reference_z(documents: &serde_json::Value) -> BTreeMap<(String, String), f64> {
    let mut out = BTreeMap::new();
    for (doc, terms) in documents.as_object().unwrap() {
        for (term, z) in terms.as_object().unwrap() {
            out.insert((doc.clone(), term.clone()), z.as_f64().unwrap());
        }
    }
    out
}

/// The largest |z| difference and where, after requiring the same (document, term) keys.
fn max_diff(
    got: &BTreeMap<(String, String), f64>,
    want: &BTreeMap<(String, String), f64>,
) -> (f64, (String, String)) {
    let (only_got, only_want): (Vec<_>, Vec<_>) = (
        got.keys().filter(|k| !want.contains_key(*k)).collect(),
        want.keys().filter(|k| !got.contains_key(*k)).collect(),
    );
    assert!(
        only_got.is_empty() && only_want.is_empty(),
        "terms only in culturelens: {only_got:?}; only in the reference: {only_want:?}"
    );
    let mut worst = (0.0, (String::new(), String::new()));
    for (k, w) in want {
        let d = (got[k] - w).abs();
        if d > worst.0 || worst.0.is_nan() || d.is_nan() {
            worst = (d, k.clone());
        }
    }
    worst
}

#[test]
fn captions_z_scores_match_convokit_fighting_words() {
    let dir = tempfile::tempdir().unwrap();
    let reference: serde_json::Value =
        serde_json::from_str(&read_fixture("fighting_words/convokit.json")).unwrap();
    assert_eq!(reference["convokit"], "5.0.0");
    let corpora = reference["corpora"].as_object().unwrap();
    assert_eq!(corpora.len(), 2);
    for (name, corpus) in corpora {
        let got = culturelens_z(dir.path(), corpus["folder"].as_str().unwrap());
        let documents = corpus["documents"].as_object().unwrap().len();
        assert_eq!(documents, 6, "{name}");
        let (convokit, at) = max_diff(&got, &reference_z(&corpus["documents"]));
        let (f64_run, at_f64) = max_diff(&got, &reference_z(&corpus["documents_f64"]));
        println!(
            "{name}: {} terms in {documents} documents; max |z - ConvoKit| = {convokit:.3e} at {at:?}, \
             with float64 counts {f64_run:.3e} at {at_f64:?}",
            got.len()
        );
        assert!(convokit <= BOUND_CONVOKIT, "{name}: {convokit:e} at {at:?}");
        assert!(f64_run <= BOUND_F64, "{name}: {f64_run:e} at {at_f64:?}");
    }
}
