//! Fighting Words (Monroe, Colaresi & Quinn 2008) with IDF weighting, as the SoS paper's §6.1
//! applies it to image descriptions, and the stereotype coverage of its Fig. 6.
//!
//! A *document* is one (model, language): its images' unique terms. For a term `w`:
//! - `c_w^i`: the number of images of document `i` whose terms include `w`; `share` =
//!   `c_w^i / images` (the percentages of SoS Fig. 7).
//! - IDF with smoothing, as scikit-learn's `TfidfTransformer(smooth_idf=True)`:
//!   `idf_w = ln((1 + N) / (1 + df_w)) + 1`, `N` the number of documents (all models and
//!   languages), `df_w` the number of documents containing `w`.
//! - Weighted counts `y_w^i = idf_w · c_w^i`, `n^i = Σ_w y_w^i`.
//! - The comparison corpus `j` of document `i` is the pooled documents of the same model in all
//!   other languages: `y_w^j = Σ_{k ≠ i} y_w^k`, `n^j = Σ_w y_w^j`. The vocabulary is the terms of
//!   the model's documents.
//! - Informative Dirichlet prior (Monroe et al. §3.5.1, the empirical-Bayes prior of the
//!   `tidylo` package): the model's pooled corpus, `α_w = y_w^i + y_w^j`, `α_0 = n^i + n^j`. The
//!   SoS paper names the other languages' pooled terms as the prior; taken literally, a term no
//!   other language has would get `α_w = 0` and an infinite log-odds (and with ConvoKit's 0.01
//!   added, `σ² ≥ 100`, so such a term could never be significant). Here the other languages are
//!   the comparison corpus and the prior is their pool together with the document.
//! - Weighted log-odds (Monroe et al. Eq. 16, ConvoKit `FightingWords`):
//!   `δ_w = ln[(y_w^i + α_w) / (n^i + α_0 − y_w^i − α_w)] − ln[(y_w^j + α_w) / (n^j + α_0 − y_w^j − α_w)]`,
//!   `σ²_w = 1 / (y_w^i + α_w) + 1 / (y_w^j + α_w)`, `z_w = δ_w / σ_w` (Eq. 18–22).
//! - A term is significant when `z_w > 1.96`; [`DocumentScores::top`] ranks significant terms by
//!   z (ties: the term, in code-point order).
//!
//! Checked against ConvoKit's own `FightingWords` (convokit 5.0.0;
//! `scripts/fixtures/make_fighting_words_convokit.py`, `tests/fighting_words_convokit_cli.rs`), with
//! its parameters set to these conventions. How ConvoKit differs as shipped, and how it was matched:
//! - Counts: ConvoKit counts token occurrences (`CountVectorizer(binary=False)`) with no IDF; here a
//!   term counts once per image, times the smoothed IDF. Matched by passing a `cv` whose binary
//!   counts are multiplied by scikit-learn's `TfidfTransformer(smooth_idf=True).idf_` over the
//!   documents of all models.
//! - Vocabulary: ConvoKit's default keeps 1- to 3-grams with `min_df=10`, `max_df=0.5`,
//!   `max_features=15000`; here every unigram term is kept. Matched by a fixed unigram vocabulary.
//! - Text: ConvoKit's `clean_text` transliterates to ASCII (unidecode: non-Latin scripts become
//!   Latin letters, `ı` becomes `i`), lower-cases with `str.lower`, replaces URLs, e-mails, phone
//!   numbers and currency symbols by tokens, and its token pattern `\b\w\w+\b` drops one-character
//!   words (a single ideograph such as `人`) and splits at apostrophes; it removes no stop words.
//!   Matched by a `text_func` returning the terms (made by the script with ICU4C, ICU casing and
//!   spaCy's stop words, the same terms as [`super::segment`] on those captions).
//! - Prior: ConvoKit's default is uniform, `α_w = 0.1`; here the model's pooled corpus. Matched by
//!   passing that vector as `prior`.
//! - Classes: ConvoKit compares two classes and scores every vocabulary term (positive for the
//!   first); here each document is compared with the model's other languages pooled, one fit per
//!   document, and only the document's own terms are reported.
//! - Precision: ConvoKit keeps the class counts in float32, so its z differs from these (float64)
//!   by up to 2.0e-7 on the two test corpora; the same ConvoKit code with float64 counts agrees to
//!   rounding (4.3e-15).
//! - Significance: ConvoKit's `get_ngrams_past_threshold` defaults to |z| > 1 and its annotations to
//!   the top 10 of each class; here `z > 1.96` in the document's favour.

use std::collections::{BTreeMap, BTreeSet};

/// The z-score a term must exceed to be significant (two-sided 5 %, SoS Fig. 7).
pub const Z_SIGNIFICANT: f64 = 1.96;

/// One (model, language) document: the unique terms of each of its images.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub model: String,
    pub language: String,
    pub images: Vec<BTreeSet<String>>,
}

/// Why a set of documents cannot be compared.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FightingWordsError {
    #[error("document (model {model:?}, language {language:?}) has no terms in any of its {images} images")]
    EmptyDocument { model: String, language: String, images: usize },
    #[error(
        "model {model:?} has documents in one language only ({language:?}); Fighting Words compares a language with the model's other languages"
    )]
    SingleLanguage { model: String, language: String },
    #[error("document (model {model:?}, language {language:?}) is given twice")]
    Duplicate { model: String, language: String },
}

/// The score of one term in one document (module docs for the symbols).
#[derive(Debug, Clone, PartialEq)]
pub struct TermScore {
    pub term: String,
    /// `c_w^i`.
    pub images: usize,
    /// `c_w^i / images of the document`.
    pub share: f64,
    pub idf: f64,
    /// `y_w^i`.
    pub weighted: f64,
    /// `y_w^j`.
    pub weighted_other: f64,
    pub delta: f64,
    pub z: f64,
}

impl TermScore {
    pub fn significant(&self) -> bool {
        self.z > Z_SIGNIFICANT
    }
}

/// A document's terms, by z descending (ties: the term).
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentScores {
    pub model: String,
    pub language: String,
    pub images: usize,
    pub terms: Vec<TermScore>,
}

impl DocumentScores {
    /// The (at most) `k` significant terms of highest z.
    pub fn top(&self, k: usize) -> impl Iterator<Item = &TermScore> {
        self.terms.iter().filter(|t| t.significant()).take(k)
    }
}

/// Fighting Words for every document, in the order given.
pub fn fighting_words(docs: &[Document]) -> Result<Vec<DocumentScores>, FightingWordsError> {
    let mut seen = BTreeSet::new();
    for d in docs {
        if !seen.insert((&d.model, &d.language)) {
            return Err(FightingWordsError::Duplicate {
                model: d.model.clone(),
                language: d.language.clone(),
            });
        }
        if d.images.iter().all(BTreeSet::is_empty) {
            return Err(FightingWordsError::EmptyDocument {
                model: d.model.clone(),
                language: d.language.clone(),
                images: d.images.len(),
            });
        }
    }
    for d in docs {
        if docs.iter().all(|o| o.model != d.model || o.language == d.language) {
            return Err(FightingWordsError::SingleLanguage {
                model: d.model.clone(),
                language: d.language.clone(),
            });
        }
    }
    let image_counts: Vec<BTreeMap<&str, usize>> = docs
        .iter()
        .map(|d| {
            let mut c = BTreeMap::new();
            for term in d.images.iter().flatten() {
                *c.entry(term.as_str()).or_insert(0) += 1;
            }
            c
        })
        .collect();
    let mut df: BTreeMap<&str, usize> = BTreeMap::new();
    for counts in &image_counts {
        for term in counts.keys() {
            *df.entry(term).or_insert(0) += 1;
        }
    }
    let n_docs = docs.len() as f64;
    let idf = |term: &str| ((1.0 + n_docs) / (1.0 + df[term] as f64)).ln() + 1.0;
    let weighted: Vec<BTreeMap<&str, f64>> = image_counts
        .iter()
        .map(|counts| counts.iter().map(|(&t, &c)| (t, idf(t) * c as f64)).collect())
        .collect();
    Ok(docs
        .iter()
        .enumerate()
        .map(|(i, doc)| {
            let mut other: BTreeMap<&str, f64> = BTreeMap::new();
            for (k, d) in docs.iter().enumerate() {
                if d.model == doc.model {
                    for (&t, &y) in &weighted[k] {
                        *other.entry(t).or_insert(0.0) += if k == i { 0.0 } else { y };
                    }
                }
            }
            let n_i: f64 = weighted[i].values().sum();
            let n_j: f64 = other.values().sum();
            let alpha0 = n_i + n_j;
            let mut terms: Vec<TermScore> = weighted[i]
                .iter()
                .map(|(&t, &y_i)| {
                    let y_j = other[t];
                    let a = y_i + y_j;
                    let delta = ((y_i + a) / (n_i + alpha0 - y_i - a)).ln()
                        - ((y_j + a) / (n_j + alpha0 - y_j - a)).ln();
                    let var = 1.0 / (y_i + a) + 1.0 / (y_j + a);
                    let images = image_counts[i][t];
                    TermScore {
                        term: t.to_string(),
                        images,
                        share: images as f64 / doc.images.len() as f64,
                        idf: idf(t),
                        weighted: y_i,
                        weighted_other: y_j,
                        delta,
                        z: delta / var.sqrt(),
                    }
                })
                .collect();
            terms.sort_by(|a, b| b.z.total_cmp(&a.z).then_with(|| a.term.cmp(&b.term)));
            DocumentScores {
                model: doc.model.clone(),
                language: doc.language.clone(),
                images: doc.images.len(),
                terms,
            }
        })
        .collect())
}

/// Stereotype coverage (SoS Fig. 6): which of a culture's stereotype terms are among a
/// document's significant terms, and their share of the culture's (distinct) terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    pub found: Vec<String>,
    pub stereotypes: usize,
    pub coverage: f64,
}

/// Coverage of `stereotypes` (distinct terms, already lower-cased as the captions are) by the
/// significant terms of `doc`. An empty stereotype list has coverage 0.
pub fn coverage(doc: &DocumentScores, stereotypes: &BTreeSet<String>) -> Coverage {
    let significant: BTreeSet<&str> =
        doc.terms.iter().filter(|t| t.significant()).map(|t| t.term.as_str()).collect();
    let found: Vec<String> =
        stereotypes.iter().filter(|s| significant.contains(s.as_str())).cloned().collect();
    let coverage = if stereotypes.is_empty() { 0.0 } else { found.len() as f64 / stereotypes.len() as f64 };
    Coverage { stereotypes: stereotypes.len(), found, coverage }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(model: &str, language: &str, images: &[&[&str]]) -> Document {
        Document {
            model: model.into(),
            language: language.into(),
            images: images.iter().map(|i| i.iter().map(|t| t.to_string()).collect()).collect(),
        }
    }

    #[test]
    fn log_odds_and_z_match_the_hand_computation() {
        // Document A = one image {x, y}, B = one image {x}. N = 2, df_x = 2, df_y = 1:
        // idf_x = ln(3/3) + 1 = 1, idf_y = ln(3/2) + 1 = 1.405465 (= 1 + l).
        // For A: y^i = {x: 1, y: 1 + l}, n^i = 2 + l; y^j = {x: 1, y: 0}, n^j = 1;
        // α = {x: 2, y: 1 + l}, α_0 = 3 + l.
        // x: δ = ln(3 / (2 + l + 3 + l − 3)) − ln(3 / (1 + 3 + l − 3)) = ln(3 / (2 + 2l)) − ln(3 / (1 + l))
        //      = ln(1/2) = −0.693147, σ² = 1/3 + 1/3, z = −0.693147 / 0.816497 = −0.848928.
        // y: δ = ln((2 + 2l) / (5 + 2l − 2 − 2l)) − ln((1 + l) / (4 + l − 1 − l)) = ln 2 = 0.693147,
        //    σ² = 1 / (2 + 2l) + 1 / (1 + l) = 1.067262, z = 0.693147 / 1.033084 = 0.670950.
        let scores = fighting_words(&[doc("m", "a", &[&["x", "y"]]), doc("m", "b", &[&["x"]])]).unwrap();
        let a = &scores[0];
        assert_eq!(a.terms.iter().map(|t| t.term.as_str()).collect::<Vec<_>>(), ["y", "x"]);
        let (y, x) = (&a.terms[0], &a.terms[1]);
        let ln15 = 1.5f64.ln();
        assert!((x.delta - 0.5f64.ln()).abs() < 1e-12 && (y.delta - 2f64.ln()).abs() < 1e-12);
        assert!((x.z - 0.5f64.ln() / (2.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((x.z - -0.848928).abs() < 1e-6, "{}", x.z);
        assert!((y.z - 0.670950).abs() < 1e-6, "{y:?}");
        assert!((y.idf - (1.0 + ln15)).abs() < 1e-15 && y.images == 1 && y.share == 1.0);
        assert_eq!(a.top(10).count(), 0);
    }

    #[test]
    fn a_planted_term_is_significant_and_ranked_first() {
        // Four images each, three times over (with four, snow's z is 1.81: not yet significant).
        let fi: Vec<&[&str]> =
            [&["snow", "tree"][..], &["snow", "house"], &["snow", "tree"], &["snow"]].repeat(3);
        let de: Vec<&[&str]> = [&["house", "tree"][..], &["house"], &["tree"], &["house", "car"]].repeat(3);
        let scores = fighting_words(&[doc("m", "fi", &fi), doc("m", "de", &de)]).unwrap();
        let top: Vec<&str> = scores[0].top(10).map(|t| t.term.as_str()).collect();
        assert_eq!(top, ["snow"]);
        assert_eq!(scores[0].terms[0].share, 1.0);
        let stereotypes: BTreeSet<String> = ["snow", "sauna"].map(String::from).into();
        let c = coverage(&scores[0], &stereotypes);
        assert_eq!((c.found, c.stereotypes, c.coverage), (vec!["snow".to_string()], 2, 0.5));
        assert_eq!(coverage(&scores[1], &stereotypes).coverage, 0.0);
    }

    #[test]
    fn empty_single_language_and_duplicate_documents_are_errors() {
        let err = fighting_words(&[doc("m", "a", &[&[], &[]]), doc("m", "b", &[&["x"]])]).unwrap_err();
        assert_eq!(
            err,
            FightingWordsError::EmptyDocument { model: "m".into(), language: "a".into(), images: 2 }
        );
        let err = fighting_words(&[doc("m", "a", &[&["x"]]), doc("n", "b", &[&["x"]])]).unwrap_err();
        assert_eq!(err, FightingWordsError::SingleLanguage { model: "m".into(), language: "a".into() });
        let err = fighting_words(&[doc("m", "a", &[&["x"]]), doc("m", "a", &[&["y"]])]).unwrap_err();
        assert!(matches!(err, FightingWordsError::Duplicate { .. }));
    }
}
