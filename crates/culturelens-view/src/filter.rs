//! Which rows take part in the SoS computation: the models and languages ticked in the filter
//! panel, and whether references are pooled per model. The recomputed scores must equal
//! `culturelens sos` on the table of exactly these rows (tests/web/app.test.mjs checks it).

use std::collections::BTreeSet;

/// The filter panel's state.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    /// Distinct model values (sorted), each on or off.
    pub models: Vec<(String, bool)>,
    /// Distinct language values (sorted), each on or off.
    pub languages: Vec<(String, bool)>,
    /// References per model (`--pool per-model`) instead of pooled over all models.
    pub per_model: bool,
}

fn all_on(values: &[String]) -> Vec<(String, bool)> {
    values.iter().collect::<BTreeSet<_>>().into_iter().map(|v| (v.clone(), true)).collect()
}

fn switched_on(list: &[(String, bool)]) -> BTreeSet<&str> {
    list.iter().filter(|(_, on)| *on).map(|(v, _)| v.as_str()).collect()
}

impl Filter {
    /// Every model and language of the columns `model` and `language` switched on.
    pub fn all(model: &[String], language: &[String], per_model: bool) -> Filter {
        Filter { models: all_on(model), languages: all_on(language), per_model }
    }

    /// Applies one control of the filter panel: `kind` is `model` or `language` (switch `value`
    /// on or off) or `pool` (`value` `per-model` or `all`). Returns whether `kind` is known.
    pub fn set(&mut self, kind: &str, value: &str, on: bool) -> bool {
        let list = match kind {
            "model" => &mut self.models,
            "language" => &mut self.languages,
            "pool" => {
                self.per_model = value == "per-model";
                return true;
            }
            _ => return false,
        };
        list.iter_mut().filter(|(v, _)| v == value).for_each(|entry| entry.1 = on);
        true
    }

    /// The rows (in table order) whose model and language are both on, or `None` when the
    /// filter keeps every row.
    pub fn rows(&self, model: &[String], language: &[String]) -> Option<Vec<u32>> {
        assert_eq!(model.len(), language.len(), "one model and one language per row");
        let (models, languages) = (switched_on(&self.models), switched_on(&self.languages));
        if models.len() == self.models.len() && languages.len() == self.languages.len() {
            return None;
        }
        Some(
            (0..model.len())
                .filter(|&i| models.contains(model[i].as_str()) && languages.contains(language[i].as_str()))
                .map(|i| i as u32)
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn all_lists_distinct_sorted_values_switched_on() {
        let f = Filter::all(&s(&["b", "a", "b"]), &s(&["en", "de", "en"]), false);
        assert_eq!(f.models, vec![("a".to_string(), true), ("b".to_string(), true)]);
        assert_eq!(f.languages, vec![("de".to_string(), true), ("en".to_string(), true)]);
        assert!(!f.per_model);
    }

    #[test]
    fn rows_keep_exactly_the_ticked_models_and_languages() {
        let model = s(&["m1", "m1", "m2", "m2", "m1"]);
        let language = s(&["en", "de", "en", "de", "am"]);
        let mut f = Filter::all(&model, &language, false);
        assert_eq!(f.rows(&model, &language), None);
        assert!(f.set("language", "de", false));
        assert_eq!(f.rows(&model, &language), Some(vec![0, 2, 4]));
        assert!(f.set("model", "m2", false));
        assert_eq!(f.rows(&model, &language), Some(vec![0, 4]));
        assert!(f.set("language", "de", true));
        assert_eq!(f.rows(&model, &language), Some(vec![0, 1, 4]));
        assert!(f.set("model", "m1", false));
        assert_eq!(f.rows(&model, &language), Some(vec![]));
    }

    #[test]
    fn pool_and_unknown_controls() {
        let mut f = Filter::all(&s(&["m"]), &s(&["en"]), false);
        assert!(f.set("pool", "per-model", true));
        assert!(f.per_model);
        assert!(f.set("pool", "all", true));
        assert!(!f.per_model);
        let before = f.clone();
        assert!(!f.set("colour", "x", false));
        assert_eq!(f, before);
    }
}
