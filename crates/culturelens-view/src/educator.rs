//! The numbers of an educator slide: for one (model, culture, person term), every language's
//! outputs and their mean per-output SoS, in language order; and the ←/→/↑/↓ navigation through
//! the distinct cultures and person terms.

use std::collections::BTreeSet;

/// The metadata columns a slide reads (one value per table row).
#[derive(Clone, Copy, Debug)]
pub struct Columns<'a> {
    pub model: &'a [String],
    pub language: &'a [String],
    pub culture: &'a [String],
    /// Absent when the bundle has no `person` column (then every person term matches).
    pub person: Option<&'a [String]>,
}

/// What the slide shows.
#[derive(Clone, Copy, Debug)]
pub struct Slide<'a> {
    pub model: &'a str,
    pub culture: &'a str,
    pub person: &'a str,
}

/// One language of the slide.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    pub language: String,
    /// (table row, per-output SoS) of the matching outputs, in table order.
    pub outputs: Vec<(usize, f32)>,
    /// Mean of their SoS (f64 accumulation).
    pub mean: f64,
}

/// The cards of `slide` over the scored rows `rows` (table row numbers) whose per-output scores
/// are `per_image` (same order): one card per language of the scored rows that has at least one
/// matching output.
pub fn cards(rows: &[u32], per_image: &[f32], cols: Columns<'_>, slide: Slide<'_>) -> Vec<Card> {
    assert_eq!(rows.len(), per_image.len(), "one score per scored row");
    let languages: BTreeSet<&str> = rows.iter().map(|&r| cols.language[r as usize].as_str()).collect();
    languages
        .into_iter()
        .filter_map(|language| {
            let outputs: Vec<(usize, f32)> = rows
                .iter()
                .zip(per_image)
                .map(|(&r, &s)| (r as usize, s))
                .filter(|&(r, _)| {
                    cols.model[r] == slide.model
                        && cols.language[r] == language
                        && cols.culture[r] == slide.culture
                        && cols.person.is_none_or(|p| p[r] == slide.person)
                })
                .collect();
            if outputs.is_empty() {
                return None;
            }
            let mean = outputs.iter().map(|(_, s)| f64::from(*s)).sum::<f64>() / outputs.len() as f64;
            Some(Card { language: language.to_string(), outputs, mean })
        })
        .collect()
}

/// The distinct values of a column, sorted.
pub fn distinct(values: &[String]) -> Vec<String> {
    values.iter().collect::<BTreeSet<_>>().into_iter().cloned().collect()
}

/// The value `delta` places after `current` in `list`, wrapping around (from the first value
/// when `current` is not in the list); empty for an empty list.
pub fn step(list: &[String], current: &str, delta: i64) -> String {
    if list.is_empty() {
        return String::new();
    }
    let i = list.iter().position(|v| v == current).unwrap_or(0) as i64;
    list[(i + delta).rem_euclid(list.len() as i64) as usize].clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn cards_average_the_matching_outputs_per_language() {
        let model = s(&["m", "m", "m", "m", "x", "m"]);
        let language = s(&["en", "en", "de", "de", "en", "am"]);
        let culture = s(&["JP", "JP", "JP", "JP", "JP", "FR"]);
        let person = s(&["woman", "woman", "woman", "man", "woman", "woman"]);
        let cols = Columns { model: &model, language: &language, culture: &culture, person: Some(&person) };
        let rows = [0, 1, 2, 3, 4, 5];
        let sos = [0.5, 0.25, -0.25, 0.75, 9.0, 1.0];
        let got = cards(&rows, &sos, cols, Slide { model: "m", culture: "JP", person: "woman" });
        assert_eq!(
            got,
            vec![
                Card { language: "de".into(), outputs: vec![(2, -0.25)], mean: -0.25 },
                Card { language: "en".into(), outputs: vec![(0, 0.5), (1, 0.25)], mean: 0.375 },
            ]
        );
        // Without a person column every person term matches; a filtered subset of rows.
        let cols = Columns { person: None, ..cols };
        let got = cards(&[2, 3], &[-0.25, 0.75], cols, Slide { model: "m", culture: "JP", person: "" });
        assert_eq!(
            got,
            vec![Card { language: "de".into(), outputs: vec![(2, -0.25), (3, 0.75)], mean: 0.25 }]
        );
    }

    #[test]
    fn navigation_wraps() {
        let list = s(&["a", "b", "c"]);
        assert_eq!(step(&list, "a", 1), "b");
        assert_eq!(step(&list, "c", 1), "a");
        assert_eq!(step(&list, "a", -1), "c");
        assert_eq!(step(&list, "zzz", 1), "b");
        assert_eq!(step(&[], "a", 1), "");
        assert_eq!(distinct(&s(&["b", "a", "b"])), s(&["a", "b"]));
    }
}
