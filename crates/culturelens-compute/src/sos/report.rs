//! Aggregates of per-output SoS scores (host side, f64): joint scores, per-model distributions,
//! per-(model, language) medians with the strong-surface-tendency flag, the language × language
//! Pearson matrix and per-person-term means.

pub use culturelens_results::sos::{JointScore, LanguageCorrelation, LanguageMedian, PersonMean, SosReport};

use super::layout::SosLayout;
use culturelens_metrics::stats::{self, Summary};

/// The report of `per_image` (one score per output, in row order) over `layout`: the types are
/// the `sos --report` schema of `culturelens-results`.
pub fn sos_report(layout: &SosLayout, per_image: &[f32]) -> SosReport {
    assert_eq!(per_image.len(), layout.len(), "one score per output");
    let scores: Vec<f64> = per_image.iter().map(|v| f64::from(*v)).collect();

    let mut by_cell: Vec<Vec<f64>> = vec![Vec::new(); layout.cells.len()];
    for (i, c) in layout.cell.iter().enumerate() {
        by_cell[*c as usize].push(scores[i]);
    }
    assert_eq!(by_cell.len(), layout.cells.len());
    let joint: Vec<JointScore> = layout
        .cells
        .iter()
        .zip(&by_cell)
        .map(|(c, v)| JointScore {
            model: c.model.clone(),
            layer: c.layer.clone(),
            language: c.language.clone(),
            culture: c.culture.clone(),
            n: v.len(),
            sos: stats::mean(v),
            sos_ci: None,
        })
        .collect();

    // Per model and per (model, layer, language): the cells are sorted by (model, layer,
    // language, culture), so each key's cells are consecutive and the keys come out sorted.
    // Every group gets its scores in row order.
    let model_of = runs(&layout.cells, |c| &c.model);
    let pair_of = runs(&layout.cells, |c| (&c.model, &c.layer, &c.language));
    let mut per_model: Vec<Vec<f64>> = vec![Vec::new(); model_of.keys.len()];
    let mut per_pair: Vec<Vec<f64>> = vec![Vec::new(); pair_of.keys.len()];
    for (i, c) in layout.cell.iter().enumerate() {
        per_model[model_of.run[*c as usize]].push(scores[i]);
        per_pair[pair_of.run[*c as usize]].push(scores[i]);
    }
    let per_model =
        model_of.keys.iter().zip(&per_model).map(|(m, v)| ((*m).clone(), Summary::of(v))).collect();
    let per_pair =
        pair_of.keys.into_iter().zip(per_pair).map(|((m, l, g), v)| ((m.clone(), l.clone(), g.clone()), v));

    let mut language_medians: Vec<LanguageMedian> = per_pair
        .into_iter()
        .map(|((model, layer, language), v)| LanguageMedian {
            model,
            layer,
            language,
            n: v.len(),
            mean: stats::mean(&v),
            median: stats::median(&v),
            strong_surface: false,
        })
        .collect();
    let medians: Vec<f64> = language_medians.iter().map(|m| m.median).collect();
    let strong_surface_threshold = stats::quantile_sorted(&stats::sorted(&medians), 0.25);
    for m in &mut language_medians {
        m.strong_surface = m.median <= strong_surface_threshold;
    }

    SosReport {
        language_correlation: language_correlation(&joint),
        person_means: person_means(layout, &model_of, &scores),
        joint,
        per_model,
        language_medians,
        strong_surface_threshold,
    }
}

/// The runs of equal keys in `items` (sorted so that equal keys are consecutive): the keys in
/// order, and the run of every item.
struct Runs<K> {
    keys: Vec<K>,
    run: Vec<usize>,
}

fn runs<'a, T, K: Ord>(items: &'a [T], key: impl Fn(&'a T) -> K) -> Runs<K> {
    let (mut keys, mut run) = (Vec::new(), Vec::with_capacity(items.len()));
    for item in items {
        let k = key(item);
        if keys.last() != Some(&k) {
            debug_assert!(keys.last() < Some(&k), "the items are sorted by the key");
            keys.push(k);
        }
        run.push(keys.len() - 1);
    }
    Runs { keys, run }
}

/// A (model, layer, culture) cell of the correlation: one observation per language.
type CorrelationCell<'a> = (&'a str, Option<&'a str>, &'a str);

fn correlation_cell(j: &JointScore) -> CorrelationCell<'_> {
    (j.model.as_str(), j.layer.as_deref(), j.culture.as_str())
}

fn language_correlation(joint: &[JointScore]) -> LanguageCorrelation {
    // The languages and the correlation cells, each sorted, as dense ids; then per language its
    // joint SoS in every cell it has (a later score of a repeated key replaces the earlier one).
    let mut languages: Vec<&str> = joint.iter().map(|j| j.language.as_str()).collect();
    languages.sort_unstable();
    languages.dedup();
    let mut cells: Vec<CorrelationCell<'_>> = joint.iter().map(correlation_cell).collect();
    cells.sort_unstable();
    cells.dedup();
    let mut table = vec![vec![None; cells.len()]; languages.len()];
    for j in joint {
        let (Ok(l), Ok(c)) =
            (languages.binary_search(&j.language.as_str()), cells.binary_search(&correlation_cell(j)))
        else {
            unreachable!("every language and cell was collected")
        };
        table[l][c] = Some(j.sos);
    }
    let k = languages.len();
    let mut r = vec![vec![None; k]; k];
    let mut pairs = vec![vec![0usize; k]; k];
    for a in 0..k {
        for b in 0..k {
            let both = table[a].iter().zip(&table[b]).filter_map(|(va, vb)| Some(((*va)?, (*vb)?)));
            let (x, y): (Vec<f64>, Vec<f64>) = both.unzip();
            pairs[a][b] = x.len();
            r[a][b] = stats::pearson(&x, &y);
        }
    }
    LanguageCorrelation { languages: languages.into_iter().map(str::to_string).collect(), r, pairs }
}

/// Mean SoS per person term over all models, then per model (models and terms sorted), each
/// summed in row order.
fn person_means(layout: &SosLayout, models: &Runs<&String>, scores: &[f64]) -> Vec<PersonMean> {
    let Some(person) = &layout.person else { return Vec::new() };
    let terms = person.values().len();
    // (n, sum) per term over all models (slot 0) and per model (slot 1 + its index).
    let mut acc = vec![(0usize, 0f64); (1 + models.keys.len()) * terms];
    for (i, c) in layout.cell.iter().enumerate() {
        let term = person.ids()[i] as usize;
        for slot in [0, 1 + models.run[*c as usize]] {
            let e = &mut acc[slot * terms + term];
            e.0 += 1;
            e.1 += scores[i];
        }
    }
    let mut by_name: Vec<usize> = (0..terms).collect();
    by_name.sort_by_key(|&t| &person.values()[t]);
    let model_names = std::iter::once(None).chain(models.keys.iter().map(|m| Some(m.as_str())));
    let mut means = Vec::new();
    for (slot, model) in model_names.enumerate() {
        for &term in &by_name {
            let (n, sum) = acc[slot * terms + term];
            if n > 0 {
                means.push(PersonMean {
                    model: model.map(str::to_string),
                    person: person.values()[term].clone(),
                    n,
                    mean: sum / n as f64,
                });
            }
        }
    }
    means
}
