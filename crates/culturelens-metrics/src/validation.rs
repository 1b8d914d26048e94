//! The validation of the SoS paper (§4.2, Table 2): the CLIPScore of Hessel et al. (2021), the two
//! automatic labelling rules of an image's tendency and their agreement with human majority labels.
//!
//! - [`clipscore`]: `w · max(cos(image, caption), 0)` with `w = 2.5` ([`CLIPSCORE_W`]), as
//!   torchmetrics' `CLIPScore` (which reports `100 · max(cos, 0)`, i.e. `w = 100`) and Hessel et
//!   al.'s released code (`w = 2.5`);
//! - [`label_by_sos`]: the sign of the per-image SoS (`cos(semantic) − cos(surface)`): positive →
//!   semantic, negative → surface, exactly zero → no label;
//! - [`label_by_clipscore`]: captions "A photo of a {c} person" for the semantic and the surface
//!   culture; the higher CLIPScore wins, a tie gives no label;
//! - [`score_labels`]: accuracy = share of the items with a human majority label whose predicted
//!   label equals it (a human label other than surface/semantic, e.g. a distractor culture, and a
//!   missing prediction both count as wrong); `P_sur` / `P_sem` = share of the items predicted
//!   surface / semantic whose human label agrees (`None` when nothing was predicted so).
//!
//! Against the SoS authors' `code/get_clip_results.py` (scripts/fixtures/make_authors_sos.py runs it
//! on the tiny CLIP fixture; tests/authors_cli.rs): they write `softmax(100 · [cos(I, language
//! caption), cos(I, culture caption)])`, this module `w · max(cos, 0)`. The winner is the same
//! whenever one cosine is positive; with both negative their softmax still picks one where
//! [`label_by_clipscore`] ties (no label). Their probabilities themselves are `culturelens classify`
//! with the two captions as classes on a checkpoint whose logit scale is 100. Their caption is "A photo of a/an {name} person" with
//! "an" only before a lower-case vowel, so the dataset's capitalised names get "a", as the
//! paper's "A photo of a {c} person" here. They ran open_clip under CUDA autocast (f16), which
//! also drops an RGBA image's alpha channel where transformers' processors (and culturelens)
//! composite it onto white.

use crate::bootstrap::{CiSpec, Interval, Replicates};

/// Hessel et al.'s CLIPScore weight.
pub const CLIPSCORE_W: f64 = 2.5;

/// `w · max(cos, 0)`.
pub fn clipscore(cos: f64, w: f64) -> f64 {
    w * cos.max(0.0)
}

/// An image's tendency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tendency {
    /// The culture of the prompt language (surface).
    Surface,
    /// The culture the prompt names (semantics).
    Semantic,
}

impl Tendency {
    /// `surface` / `semantic`; anything else (a distractor, empty) is `None`.
    pub fn parse(text: &str) -> Option<Tendency> {
        match text {
            "surface" => Some(Tendency::Surface),
            "semantic" => Some(Tendency::Semantic),
            _ => None,
        }
    }
}

/// The SoS rule: the sign of the per-image SoS.
pub fn label_by_sos(sos: f64) -> Option<Tendency> {
    if sos > 0.0 {
        Some(Tendency::Semantic)
    } else if sos < 0.0 {
        Some(Tendency::Surface)
    } else {
        None
    }
}

/// The CLIPScore rule: the caption (surface or semantic culture) with the higher score.
pub fn label_by_clipscore(surface: f64, semantic: f64) -> Option<Tendency> {
    label_by_sos(semantic - surface)
}

/// Table 2's columns for one labelling rule.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LabelScores {
    /// Items with a human majority label.
    pub n: usize,
    pub accuracy: Option<f64>,
    pub p_sur: Option<f64>,
    pub p_sem: Option<f64>,
}

/// Accuracy and precisions of `predicted` against human majority labels: `human[i]` is `None`
/// for an item without a majority (left out), `Some(None)` for a majority on another option,
/// `Some(Some(t))` for a surface or semantic majority.
pub fn score_labels(predicted: &[Option<Tendency>], human: &[Option<Option<Tendency>>]) -> LabelScores {
    assert_eq!(predicted.len(), human.len());
    let items: Vec<(Option<Tendency>, Option<Tendency>)> =
        predicted.iter().zip(human).filter_map(|(&p, h)| h.map(|h| (p, h))).collect();
    let share = |hits: usize, of: usize| (of > 0).then(|| hits as f64 / of as f64);
    let hits = items.iter().filter(|(p, h)| p.is_some() && p == h).count();
    let precision = |t: Tendency| {
        let predicted: Vec<_> = items.iter().filter(|(p, _)| *p == Some(t)).collect();
        share(predicted.iter().filter(|(_, h)| *h == Some(t)).count(), predicted.len())
    };
    LabelScores {
        n: items.len(),
        accuracy: share(hits, items.len()),
        p_sur: precision(Tendency::Surface),
        p_sem: precision(Tendency::Semantic),
    }
}

/// The bootstrap intervals of `acc`, `p_sur` and `p_sem` of one (method, subset) (`validate
/// --ci`): its labelled images resampled with replacement (the stream of `validate`, `method`,
/// `subset`), the three scores recomputed by [`score_labels`] from each resample; none without a
/// labelled image.
pub fn intervals(
    spec: &CiSpec,
    method: &str,
    subset: &str,
    predicted: &[Option<Tendency>],
    human: &[Option<Option<Tendency>>],
) -> [Option<Interval>; 3] {
    let items: Vec<(Option<Tendency>, Option<Option<Tendency>>)> =
        predicted.iter().zip(human).filter(|(_, h)| h.is_some()).map(|(p, h)| (*p, *h)).collect();
    if items.is_empty() {
        return [None; 3];
    }
    let draws = spec.draws(items.len(), &format!("validate\u{1f}{method}\u{1f}{subset}"));
    let replicates = Replicates::of_statistics(&draws, |idx| {
        let (p, h): (Vec<_>, Vec<_>) = idx.iter().map(|&i| items[i as usize]).unzip();
        let s = score_labels(&p, &h);
        [s.accuracy, s.p_sur, s.p_sem]
    });
    replicates.map(|r| r.and_then(|r| r.interval(spec.level, spec.method)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Tendency::{Semantic, Surface};

    #[test]
    fn clipscore_by_hand() {
        assert_eq!(clipscore(0.3, CLIPSCORE_W), 0.75);
        assert_eq!(clipscore(-0.2, CLIPSCORE_W), 0.0);
        assert_eq!(clipscore(0.25, 100.0), 25.0);
    }

    #[test]
    fn labelling_rules() {
        assert_eq!(label_by_sos(0.1), Some(Semantic));
        assert_eq!(label_by_sos(-0.1), Some(Surface));
        assert_eq!(label_by_sos(0.0), None);
        assert_eq!(label_by_clipscore(0.7, 0.5), Some(Surface));
        assert_eq!(label_by_clipscore(0.5, 0.5), None);
        assert_eq!(Tendency::parse("semantic"), Some(Semantic));
        assert_eq!(Tendency::parse("japan"), None);
    }

    #[test]
    fn scores_by_hand() {
        // Items: (pred, human): (sur, sur) ✓, (sur, sem) ✗, (sem, sem) ✓, (sem, other) ✗,
        // (none, sur) ✗, (sur, no majority: left out).
        let predicted = [Some(Surface), Some(Surface), Some(Semantic), Some(Semantic), None, Some(Surface)];
        let human = [
            Some(Some(Surface)),
            Some(Some(Semantic)),
            Some(Some(Semantic)),
            Some(None),
            Some(Some(Surface)),
            None,
        ];
        let s = score_labels(&predicted, &human);
        assert_eq!(s.n, 5);
        assert_eq!(s.accuracy, Some(0.4));
        assert_eq!(s.p_sur, Some(0.5));
        assert_eq!(s.p_sem, Some(0.5));
        let none = score_labels(&[None], &[Some(Some(Surface))]);
        assert_eq!((none.accuracy, none.p_sur, none.p_sem), (Some(0.0), None, None));
    }

    #[test]
    fn clipscore_matches_torchmetrics() {
        // scripts/fixtures/make_clipscore.py: torchmetrics' clip_score of one pair (w = 100).
        let fixture: serde_json::Value =
            serde_json::from_str(&culturelens_testkit::read_fixture("clipscore/torchmetrics.json")).unwrap();
        let w = fixture["w"].as_f64().unwrap();
        let vector = |v: &serde_json::Value| {
            v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect::<Vec<_>>()
        };
        for case in fixture["cases"].as_array().unwrap() {
            let (a, b) = (vector(&case["image"]), vector(&case["text"]));
            let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>();
            let cos = dot(&a, &b) / (dot(&a, &a).sqrt() * dot(&b, &b).sqrt());
            let want = case["score"].as_f64().unwrap();
            assert!((clipscore(cos, w) - want).abs() < 1e-12, "{} vs {want}", clipscore(cos, w));
        }
    }
}
