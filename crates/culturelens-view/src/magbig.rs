//! The numbers of the browser's MAGBIG views (MAGBIG §4–5), from the tables a bundle carries:
//!
//! - [`chart`]: MAD per language and prompt set for one model with the fair-coin baseline
//!   (MAGBIG Fig. 5), with the conventions of `culturelens figures` (`magbig_MODEL`): languages
//!   on the x axis in name order, one bar per set in name order within each language, the
//!   baseline `mad_random` a dashed tick across its own bar, a y axis from 0 ([`Axis`]);
//! - [`occupation_cards`]: the educator slide of one occupation across languages: per language,
//!   the images of (model, set, occupation) counted by perceived gender. Its male share is the
//!   core's `PromptCounts::male_share` of those counts (`#male / (#male + #female)`, images
//!   without a face left out), the `p_m` that `culturelens magbig` averages into `male_share`.
//!
//! The occupation of an attribute-table row is its [`OCCUPATION_COLUMN`] value when the table has
//! that column (prompt tables exported by culturelens name the occupation in English in every
//! language, so it matches across languages; rows with an empty value, such as adjective prompts,
//! have none), and its `prompt_id` otherwise.

use std::collections::BTreeSet;

/// The attribute-table column that names a row's occupation, when present.
pub const OCCUPATION_COLUMN: &str = "occupation";
/// The column that identifies a prompt (the occupation without [`OCCUPATION_COLUMN`]).
pub const PROMPT_COLUMN: &str = "prompt_id";

/// The column holding the occupation in a table with columns `names`.
pub fn occupation_column(names: &[&str]) -> &'static str {
    if names.contains(&OCCUPATION_COLUMN) { OCCUPATION_COLUMN } else { PROMPT_COLUMN }
}

/// One row of `culturelens magbig --out` (the values the chart needs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row<'a> {
    pub model: &'a str,
    pub language: &'a str,
    pub set: &'a str,
    pub mad: f64,
    pub mad_random: f64,
}

/// A y axis from 0 to `top` with ticks every `step`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axis {
    pub top: f64,
    pub step: f64,
}

impl Axis {
    /// The axis for values in `[0, max]`: the step is 1, 2, 2.5 or 5 times a power of ten, the
    /// smallest giving at most 5 intervals, and `top` the first tick at or above `max`
    /// (0.1 for an all-zero chart).
    pub fn fit(max: f64) -> Axis {
        let max = if max.is_finite() && max > 0.0 { max } else { 0.1 };
        // m × 10^e, divided rather than multiplied for e < 0 so that 0.2 or 0.6 come out exact.
        let e = (max / 5.0).log10().floor() as i32;
        let power = 10f64.powi(e.abs());
        let times = |m: f64| if e < 0 { m / power } else { m * power };
        let m = [1.0, 2.0, 2.5, 5.0, 10.0]
            .into_iter()
            .find(|&m| 5.0 * times(m) >= max * (1.0 - 1e-12))
            .expect("10^(e+1) ≥ max");
        let k = (max / times(m) - 1e-9).ceil().max(1.0);
        Axis { top: times(k * m), step: times(m) }
    }

    /// The tick values 0, step, …, top.
    pub fn ticks(&self) -> Vec<f64> {
        let n = (self.top / self.step).round() as usize;
        (0..=n).map(|k| k as f64 * self.step).collect()
    }

    /// Decimals that write every tick exactly (0.025 → 3, 0.2 → 1, 5 → 0).
    pub fn decimals(&self) -> usize {
        (0..=9)
            .find(|&d| {
                let scaled = self.step * 10f64.powi(d as i32);
                (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
            })
            .unwrap_or(9)
    }
}

/// The bar chart of one model.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// x-axis groups, in name order.
    pub languages: Vec<String>,
    /// Bars within a group (series), in name order.
    pub sets: Vec<String>,
    /// `bars[l][s]`: the index (in the rows given) of the row of language `l` and set `s`.
    pub bars: Vec<Vec<Option<usize>>>,
    pub axis: Axis,
}

/// The distinct models of `rows`, in name order.
pub fn models(rows: &[Row<'_>]) -> Vec<String> {
    rows.iter().map(|r| r.model).collect::<BTreeSet<_>>().into_iter().map(str::to_string).collect()
}

/// The chart of `model`'s rows, or `None` when it has none. The axis covers every bar and every
/// baseline.
pub fn chart(rows: &[Row<'_>], model: &str) -> Option<Chart> {
    let mine: Vec<(usize, &Row<'_>)> = rows.iter().enumerate().filter(|(_, r)| r.model == model).collect();
    if mine.is_empty() {
        return None;
    }
    let distinct = |f: for<'r> fn(&'r Row<'r>) -> &'r str| -> Vec<String> {
        mine.iter().map(|(_, r)| f(r)).collect::<BTreeSet<_>>().into_iter().map(str::to_string).collect()
    };
    let (languages, sets) = (distinct(|r| r.language), distinct(|r| r.set));
    let bars = languages
        .iter()
        .map(|l| {
            sets.iter()
                .map(|s| mine.iter().find(|(_, r)| r.language == l && r.set == s).map(|(i, _)| *i))
                .collect()
        })
        .collect();
    let max = mine.iter().map(|(_, r)| r.mad.max(r.mad_random)).fold(0.0, f64::max);
    Some(Chart { languages, sets, bars, axis: Axis::fit(max) })
}

/// The attribute-table columns the occupation slide reads (one value per image).
#[derive(Clone, Copy, Debug)]
pub struct Attributes<'a> {
    pub model: &'a [String],
    pub language: &'a [String],
    pub set: &'a [String],
    /// The occupation of each row ([`occupation_column`]).
    pub occupation: &'a [String],
    /// Perceived gender: `Some(true)` male, `Some(false)` female, `None` unclassified (no face).
    pub is_male: &'a [Option<bool>],
}

impl Attributes<'_> {
    fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        0..self.model.len()
    }

    /// The sets of `model` that have rows with an occupation, in name order.
    pub fn sets(&self, model: &str) -> Vec<String> {
        self.rows()
            .filter(|&r| self.model[r] == model && !self.occupation[r].is_empty())
            .map(|r| self.set[r].as_str())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(str::to_string)
            .collect()
    }

    /// The occupations of (`model`, `set`), in name order.
    pub fn occupations(&self, model: &str, set: &str) -> Vec<String> {
        self.rows()
            .filter(|&r| self.model[r] == model && self.set[r] == set && !self.occupation[r].is_empty())
            .map(|r| self.occupation[r].as_str())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(str::to_string)
            .collect()
    }
}

/// One language of the occupation slide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenderCard {
    pub language: String,
    /// Images perceived as male, as female, and without a usable face.
    pub male: usize,
    pub female: usize,
    pub unclassified: usize,
    /// Their rows in the attribute table, in table order.
    pub rows: Vec<usize>,
}

/// The slide of `occupation` in (`model`, `set`): one card per language that has an image of
/// it, in language name order.
pub fn occupation_cards(a: Attributes<'_>, model: &str, set: &str, occupation: &str) -> Vec<GenderCard> {
    let rows: Vec<usize> = a
        .rows()
        .filter(|&r| a.model[r] == model && a.set[r] == set && a.occupation[r] == occupation)
        .collect();
    let languages: BTreeSet<&str> = rows.iter().map(|&r| a.language[r].as_str()).collect();
    languages
        .into_iter()
        .map(|language| {
            let mine: Vec<usize> = rows.iter().copied().filter(|&r| a.language[r] == language).collect();
            let count = |want: Option<bool>| mine.iter().filter(|&&r| a.is_male[r] == want).count();
            GenderCard {
                language: language.to_string(),
                male: count(Some(true)),
                female: count(Some(false)),
                unclassified: count(None),
                rows: mine,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(model: &'a str, language: &'a str, set: &'a str, mad: f64, mad_random: f64) -> Row<'a> {
        Row { model, language, set, mad, mad_random }
    }

    #[test]
    fn axis_steps_are_round_and_cover_the_maximum() {
        assert_eq!(Axis::fit(0.83), Axis { top: 1.0, step: 0.2 });
        assert_eq!(Axis::fit(1.0), Axis { top: 1.0, step: 0.2 });
        assert_eq!(Axis::fit(0.6), Axis { top: 0.6, step: 0.2 }, "an exact tick is the top");
        assert_eq!(Axis::fit(0.3), Axis { top: 0.3, step: 0.1 });
        assert_eq!(Axis::fit(0.42), Axis { top: 0.5, step: 0.1 });
        assert_eq!(Axis::fit(0.12), Axis { top: 0.125, step: 0.025 });
        assert_eq!(Axis::fit(0.0796), Axis { top: 0.08, step: 0.02 });
        assert_eq!(Axis::fit(0.0), Axis { top: 0.1, step: 0.02 }, "all zero");
        let t = Axis::fit(0.42).ticks();
        assert_eq!(t.len(), 6);
        assert!((t[5] - 0.5).abs() < 1e-12 && t[0] == 0.0);
        assert_eq!(Axis::fit(0.12).decimals(), 3);
        assert_eq!(Axis::fit(0.83).decimals(), 1);
        assert_eq!(Axis::fit(0.0796).decimals(), 2);
        assert_eq!(Axis::fit(7.0).decimals(), 0);
    }

    #[test]
    fn chart_groups_languages_and_sets_in_name_order() {
        let rows = [
            row("sd", "en", "occupations", 0.8, 0.1),
            row("sd", "de", "occupations", 0.9, 0.1),
            row("sd", "de", "adjectives", 0.3, 0.2),
            row("af", "en", "adjectives", 0.5, 0.05),
        ];
        let c = chart(&rows, "sd").unwrap();
        assert_eq!(c.languages, ["de", "en"]);
        assert_eq!(c.sets, ["adjectives", "occupations"]);
        assert_eq!(c.bars, vec![vec![Some(2), Some(1)], vec![None, Some(0)]], "en has no adjectives bar");
        assert_eq!(c.axis, Axis { top: 1.0, step: 0.2 });
        let c = chart(&rows, "af").unwrap();
        assert_eq!((c.bars.clone(), c.axis.top), (vec![vec![Some(3)]], 0.5));
        assert!(chart(&rows, "none").is_none());
        assert_eq!(models(&rows), ["af", "sd"]);
        // The baseline can set the axis.
        assert_eq!(chart(&[row("m", "ja", "s", 0.05, 0.3)], "m").unwrap().axis.top, 0.3);
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn occupation_cards_count_each_language_by_gender() {
        let model = s(&["sd", "sd", "sd", "sd", "sd", "sd", "x", "sd"]);
        let language = s(&["en", "en", "en", "de", "de", "de", "en", "en"]);
        let set = s(&["direct", "direct", "direct", "direct", "direct", "indirect", "direct", "direct"]);
        let occupation = s(&["nurse", "nurse", "nurse", "nurse", "nurse", "nurse", "nurse", ""]);
        let is_male =
            [Some(true), Some(false), None, Some(true), Some(true), Some(false), Some(false), Some(true)];
        let a = Attributes {
            model: &model,
            language: &language,
            set: &set,
            occupation: &occupation,
            is_male: &is_male,
        };
        let cards = occupation_cards(a, "sd", "direct", "nurse");
        assert_eq!(
            cards,
            [
                GenderCard { language: "de".into(), male: 2, female: 0, unclassified: 0, rows: vec![3, 4] },
                GenderCard {
                    language: "en".into(),
                    male: 1,
                    female: 1,
                    unclassified: 1,
                    rows: vec![0, 1, 2]
                },
            ]
        );
        assert_eq!(a.sets("sd"), ["direct", "indirect"]);
        assert_eq!(a.occupations("sd", "direct"), ["nurse"], "a row without an occupation is none");
        assert!(occupation_cards(a, "sd", "direct", "pilot").is_empty());
        assert_eq!(occupation_column(&["model", "prompt_id", "occupation"]), "occupation");
        assert_eq!(occupation_column(&["model", "prompt_id"]), "prompt_id");
    }
}
