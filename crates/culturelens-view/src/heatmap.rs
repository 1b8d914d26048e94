//! The numbers of the SoS heatmap (SoS paper Fig. 3, App. C) for one model: one value per
//! (language, culture) cell — the joint score, or with layers the n-weighted mean of the layers'
//! joint scores — the column (language) and row (culture) means of those values, their sort
//! orders, and the colour-scale limit. `web/src/views/heatmap.rs` only draws it.

use std::collections::BTreeMap;

use crate::url::Sort;

/// One joint score of the model: (language, culture) cell, SoS and number of outputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Joint<'a> {
    pub language: &'a str,
    pub culture: &'a str,
    pub sos: f64,
    pub n: usize,
}

/// The heatmap grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// Columns, in display order.
    pub languages: Vec<String>,
    /// Rows, in display order.
    pub cultures: Vec<String>,
    /// (language, culture) → (value, n).
    pub value: BTreeMap<(String, String), (f64, usize)>,
    /// Mean of each column's values.
    pub language_mean: BTreeMap<String, f64>,
    /// Mean of each row's values.
    pub culture_mean: BTreeMap<String, f64>,
    /// The colour scale covers `[-limit, limit]`: the largest |value|, at least 0.05.
    pub limit: f64,
}

fn order(means: &BTreeMap<String, f64>, sort: Sort) -> Vec<String> {
    let mut names: Vec<String> = means.keys().cloned().collect();
    match sort {
        Sort::Name => {}
        Sort::MeanAsc => names.sort_by(|a, b| means[a].total_cmp(&means[b])),
        Sort::MeanDesc => names.sort_by(|a, b| means[b].total_cmp(&means[a])),
    }
    names
}

fn means(groups: BTreeMap<String, Vec<f64>>) -> BTreeMap<String, f64> {
    groups.into_iter().map(|(k, v)| (k, v.iter().sum::<f64>() / v.len() as f64)).collect()
}

impl Grid {
    /// The grid of `joint` (the model's joint scores), or `None` when there are none.
    pub fn new<'a>(
        joint: impl IntoIterator<Item = Joint<'a>>,
        col_sort: Sort,
        row_sort: Sort,
    ) -> Option<Grid> {
        let mut sums: BTreeMap<(String, String), (f64, usize)> = BTreeMap::new();
        for j in joint {
            let e = sums.entry((j.language.to_string(), j.culture.to_string())).or_insert((0.0, 0));
            e.0 += j.sos * j.n as f64;
            e.1 += j.n;
        }
        if sums.is_empty() {
            return None;
        }
        let mut by_language: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut by_culture: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let value: BTreeMap<(String, String), (f64, usize)> = sums
            .into_iter()
            .map(|((l, c), (s, n))| {
                let v = s / n as f64;
                by_language.entry(l.clone()).or_default().push(v);
                by_culture.entry(c.clone()).or_default().push(v);
                ((l, c), (v, n))
            })
            .collect();
        let (language_mean, culture_mean) = (means(by_language), means(by_culture));
        let limit = value.values().map(|(s, _)| s.abs()).fold(0.05, f64::max);
        Some(Grid {
            languages: order(&language_mean, col_sort),
            cultures: order(&culture_mean, row_sort),
            value,
            language_mean,
            culture_mean,
            limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j<'a>(language: &'a str, culture: &'a str, sos: f64, n: usize) -> Joint<'a> {
        Joint { language, culture, sos, n }
    }

    #[test]
    fn values_means_and_orders() {
        let joint = [j("en", "JP", 0.2, 4), j("de", "JP", -0.1, 4), j("en", "FR", 0.4, 4)];
        let g = Grid::new(joint, Sort::Name, Sort::Name).unwrap();
        assert_eq!(g.languages, ["de", "en"]);
        assert_eq!(g.cultures, ["FR", "JP"]);
        assert_eq!(g.value[&("en".to_string(), "JP".to_string())], (0.2, 4));
        assert!((g.language_mean["en"] - 0.3).abs() < 1e-15);
        assert_eq!(g.language_mean["de"], -0.1);
        assert!((g.culture_mean["JP"] - 0.05).abs() < 1e-15);
        assert_eq!(g.culture_mean["FR"], 0.4);
        assert_eq!(g.limit, 0.4);
        let g = Grid::new(joint, Sort::MeanDesc, Sort::MeanAsc).unwrap();
        assert_eq!(g.languages, ["en", "de"]);
        assert_eq!(g.cultures, ["JP", "FR"]);
    }

    #[test]
    fn layers_average_weighted_by_n() {
        // Two layers of one cell: (0.1 · 1 + 0.4 · 3) / 4 = 0.325, n = 4.
        let g = Grid::new([j("en", "JP", 0.1, 1), j("en", "JP", 0.4, 3)], Sort::Name, Sort::Name).unwrap();
        let (v, n) = g.value[&("en".to_string(), "JP".to_string())];
        assert!((v - 0.325).abs() < 1e-15 && n == 4, "{v} {n}");
    }

    #[test]
    fn limit_is_at_least_five_hundredths_and_empty_is_none() {
        let g = Grid::new([j("en", "JP", -0.01, 2)], Sort::Name, Sort::Name).unwrap();
        assert_eq!(g.limit, 0.05);
        assert_eq!(Grid::new([], Sort::Name, Sort::Name), None);
    }
}
