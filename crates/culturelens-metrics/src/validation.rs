//! The validation of the SoS paper (§4.2, Table 2): the CLIPScore of Hessel et al. (2021), the two
//! automatic labelling rules of an image's tendency and their agreement with human majority labels.
//!
//! - [`clipscore`]: `w · max(cos(image, caption), 0)` with `w = 2.5` ([`CLIPSCORE_W`]), as
//!   torchmetrics' `CLIPScore` (which reports `100 · max(cos, 0)`, i.e. `w = 100`) and Hessel et
//!   al.'s released code (`w = 2.5`);
//! - [`clipscore_means`]: the aggregate the CLIPScore literature reports, the mean over a group's
//!   images, with a bootstrap interval over those images (`clipscore --summary --ci`);
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

use crate::bootstrap::{CiSpec, Interval, Replicates, ratio_jackknife};

/// Hessel et al.'s CLIPScore weight.
pub const CLIPSCORE_W: f64 = 2.5;

/// `w · max(cos, 0)`.
pub fn clipscore(cos: f64, w: f64) -> f64 {
    w * cos.max(0.0)
}

/// The mean CLIPScore of one group of images per caption column (`columns[c]`: the group's
/// images' scores against caption column `c`, in image order), each with, given `spec`, its
/// bootstrap interval over the group's images (`None` where undefined, and without `spec`). One
/// draw of the images serves every column, from the stream of [`clipscore_stratum`]`(group)`, so
/// a group's intervals do not change when other groups or columns are added.
pub fn clipscore_means(
    columns: &[Vec<f64>],
    spec: Option<&CiSpec>,
    group: &[&str],
) -> Vec<(f64, Option<Interval>)> {
    let draws = spec.map(|s| s.draws(columns.first().map_or(0, Vec::len), &clipscore_stratum(group)));
    columns
        .iter()
        .map(|scores| {
            assert!(!scores.is_empty(), "a group has at least one scored image");
            let (mean, _) = ratio_jackknife(scores, &vec![1.0; scores.len()]);
            let ci = spec.zip(draws.as_ref()).and_then(|(spec, draws)| {
                Replicates::of_mean(scores, draws).interval(spec.level, spec.method)
            });
            (mean, ci)
        })
        .collect()
}

/// The stratum key of a `clipscore --group-by` group: `clipscore` and the group's values, joined
/// by U+001F (the unit separator, which no CSV cell of a manifest holds unquoted).
pub fn clipscore_stratum(group: &[&str]) -> String {
    std::iter::once("clipscore").chain(group.iter().copied()).collect::<Vec<_>>().join("\u{1f}")
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
    use crate::bootstrap::CiMethod;
    use Tendency::{Semantic, Surface};

    #[test]
    fn clipscore_means_by_hand() {
        // Means: (0.5 + 1.0 + 2.1) / 3 = 1.2 and (0 + 0.75 + 0.75) / 3 = 0.5.
        let columns = [vec![0.5, 1.0, 2.1], vec![0.0, 0.75, 0.75]];
        let plain = clipscore_means(&columns, None, &["SD21", "ja"]);
        assert_eq!(plain, vec![(1.2, None), (0.5, None)]);
        // One image: every resample is that image, so both intervals are [v, v] (BCa: ẑ₀ = 0 from
        // the ties counted half, â = 0 without a jackknife).
        for method in [CiMethod::Percentile, CiMethod::Bca] {
            let spec = CiSpec::new(0.95, 200, 3, method).unwrap();
            let one = clipscore_means(&[vec![1.75]], Some(&spec), &["m", "en"]);
            assert_eq!(one, vec![(1.75, Some(Interval { lo: 1.75, hi: 1.75 }))], "{method:?}");
        }
        // Two images a = 0.5, b = 1.5, one resample: its mean is 0.5, 1.0 or 1.5 as it draws aa, ab
        // / ba or bb; the percentile interval of one replicate is [it, it]. The first two draws of
        // SplitMix64 seeded with stream_seed(0, "clipscore\u{1f}g") are below(2) = 0, 0 (aa), so
        // the one replicate is 0.5.
        let spec = CiSpec::new(0.9, 1, 0, CiMethod::Percentile).unwrap();
        assert_eq!(spec.draws(2, &clipscore_stratum(&["g"])).resample(0), [0, 0]);
        let two = clipscore_means(&[vec![0.5, 1.5]], Some(&spec), &["g"]);
        assert_eq!(two, vec![(1.0, Some(Interval { lo: 0.5, hi: 0.5 }))]);
        assert_eq!(clipscore_stratum(&["SD21", "ja"]), "clipscore\u{1f}SD21\u{1f}ja");
    }

    #[test]
    fn clipscore_means_match_scipy_from_the_same_indices() {
        // scripts/fixtures/make_bootstrap.py's clipscore_* cases: per group, one case per caption
        // column, scipy.stats.bootstrap on the indices of the group's stream.
        let fixture: serde_json::Value =
            serde_json::from_str(&culturelens_testkit::read_fixture("bootstrap/scipy.json")).unwrap();
        let mut groups: std::collections::BTreeMap<Vec<String>, Vec<&serde_json::Value>> = Default::default();
        for case in fixture["intervals"].as_array().unwrap() {
            if let Some(group) = case["group"].as_array() {
                let group = group.iter().map(|v| v.as_str().unwrap().to_string()).collect();
                groups.entry(group).or_default().push(case);
            }
        }
        assert_eq!(groups.len(), 2, "two groups of two caption columns");
        let mut worst: f64 = 0.0;
        for (group, cases) in &groups {
            let group: Vec<&str> = group.iter().map(String::as_str).collect();
            assert_eq!(cases[0]["key"].as_str().unwrap(), clipscore_stratum(&group));
            let columns: Vec<Vec<f64>> = cases
                .iter()
                .map(|c| c["data"][0].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
                .collect();
            let (resamples, seed) =
                (cases[0]["resamples"].as_u64().unwrap() as usize, cases[0]["seed"].as_u64().unwrap());
            for (k, want) in cases[0]["intervals"].as_array().unwrap().iter().enumerate() {
                let method = match want["method"].as_str().unwrap() {
                    "percentile" => CiMethod::Percentile,
                    _ => CiMethod::Bca,
                };
                let spec = CiSpec::new(want["level"].as_f64().unwrap(), resamples, seed, method).unwrap();
                for ((mean, ci), (case, scores)) in
                    clipscore_means(&columns, Some(&spec), &group).into_iter().zip(cases.iter().zip(&columns))
                {
                    assert_eq!(mean, scores.iter().sum::<f64>() / scores.len() as f64);
                    let ci = ci.unwrap();
                    let want = &case["intervals"][k];
                    for (got, want) in [(ci.lo, &want["lo"]), (ci.hi, &want["hi"])] {
                        worst = worst.max((got - want.as_f64().unwrap()).abs());
                    }
                }
            }
        }
        println!("clipscore means: largest |culturelens - scipy| bound {worst:e}");
        assert!(worst <= 2e-15, "{worst}");
    }

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
