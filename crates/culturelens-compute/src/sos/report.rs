//! Aggregates of per-output SoS scores (host side, f64): joint scores, per-model distributions,
//! per-(model, language) medians with the strong-surface-tendency flag, the language × language
//! Pearson matrix and per-person-term means.

use std::collections::BTreeMap;

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

    let mut per_model: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut per_pair: BTreeMap<(String, Option<String>, String), Vec<f64>> = BTreeMap::new();
    for (i, c) in layout.cell.iter().enumerate() {
        let cell = &layout.cells[*c as usize];
        per_model.entry(cell.model.clone()).or_default().push(scores[i]);
        per_pair
            .entry((cell.model.clone(), cell.layer.clone(), cell.language.clone()))
            .or_default()
            .push(scores[i]);
    }
    let per_model = per_model.into_iter().map(|(m, v)| (m, Summary::of(&v))).collect();

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
        person_means: person_means(layout, &scores),
        joint,
        per_model,
        language_medians,
        strong_surface_threshold,
    }
}

/// A (model, layer, culture) cell of the correlation: one observation per language.
type CorrelationCell<'a> = (&'a str, Option<&'a str>, &'a str);

fn language_correlation(joint: &[JointScore]) -> LanguageCorrelation {
    // language -> (model, layer, culture) -> joint SoS
    let mut table: BTreeMap<&str, BTreeMap<CorrelationCell<'_>, f64>> = BTreeMap::new();
    for j in joint {
        table.entry(&j.language).or_default().insert((&j.model, j.layer.as_deref(), &j.culture), j.sos);
    }
    let languages: Vec<String> = table.keys().map(|l| l.to_string()).collect();
    let k = languages.len();
    let mut r = vec![vec![None; k]; k];
    let mut pairs = vec![vec![0usize; k]; k];
    let cols: Vec<_> = table.values().collect();
    for a in 0..k {
        for b in 0..k {
            let (x, y): (Vec<f64>, Vec<f64>) =
                cols[a].iter().filter_map(|(cell, va)| cols[b].get(cell).map(|vb| (*va, *vb))).unzip();
            pairs[a][b] = x.len();
            r[a][b] = stats::pearson(&x, &y);
        }
    }
    LanguageCorrelation { languages, r, pairs }
}

fn person_means(layout: &SosLayout, scores: &[f64]) -> Vec<PersonMean> {
    let Some(person) = &layout.person else { return Vec::new() };
    let mut acc: BTreeMap<(Option<&str>, &str), (usize, f64)> = BTreeMap::new();
    for (i, c) in layout.cell.iter().enumerate() {
        let model = layout.cells[*c as usize].model.as_str();
        for key in [(None, person[i].as_str()), (Some(model), person[i].as_str())] {
            let e = acc.entry(key).or_default();
            e.0 += 1;
            e.1 += scores[i];
        }
    }
    acc.into_iter()
        .map(|((model, person), (n, sum))| PersonMean {
            model: model.map(str::to_string),
            person: person.to_string(),
            n,
            mean: sum / n as f64,
        })
        .collect()
}
