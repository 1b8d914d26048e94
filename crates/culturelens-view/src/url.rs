//! The UI state mirrored in the page URL, so any view can be bookmarked or shared:
//! `?bundle=…&view=…&model=…&cols=…&rows=…&colour=…&culture=…&person=…&present=1` (`pool=per-model` is read
//! once at load, into the [`Filter`](crate::filter::Filter)). Parsing never fails: an unknown view
//! falls back to the heatmap, an unknown model to the bundle's first model.

/// The views, in tab order; the value is the `view=` URL parameter.
pub const VIEWS: [(&str, &str); 7] = [
    ("heatmap", "Heatmap"),
    ("distribution", "Distribution"),
    ("correlation", "Language correlation"),
    ("flags", "Surface flags"),
    ("scatter", "PCA scatter"),
    ("vendi", "Vendi"),
    ("educator", "Educator"),
];

/// Sort order of the heatmap's columns or rows (`cols=` / `rows=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    Name,
    MeanAsc,
    MeanDesc,
}

impl Sort {
    /// The order a click on the axis label switches to: name → mean ↓ → mean ↑ → name.
    pub fn next(self) -> Sort {
        match self {
            Sort::Name => Sort::MeanDesc,
            Sort::MeanDesc => Sort::MeanAsc,
            Sort::MeanAsc => Sort::Name,
        }
    }

    /// The URL value.
    pub fn param(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::MeanAsc => "asc",
            Sort::MeanDesc => "desc",
        }
    }

    /// Parses a URL value; anything else (or nothing) is [`Sort::Name`].
    pub fn parse(text: Option<&str>) -> Sort {
        match text {
            Some("asc") => Sort::MeanAsc,
            Some("desc") => Sort::MeanDesc,
            _ => Sort::Name,
        }
    }
}

/// View state mirrored in the URL.
#[derive(Clone, Debug, PartialEq)]
pub struct Ui {
    pub view: String,
    pub model: String,
    pub col_sort: Sort,
    pub row_sort: Sort,
    pub colour_by: String,
    pub culture: String,
    pub person: String,
    /// Presentation mode (`present=1`): the educator slide alone, chrome hidden.
    pub present: bool,
}

impl Ui {
    /// The state of a URL whose parameter `name` is `get(name)`, for a bundle with `models`.
    pub fn from_params(get: impl Fn(&str) -> Option<String>, models: &[String]) -> Ui {
        Ui {
            view: get("view")
                .filter(|v| VIEWS.iter().any(|(id, _)| id == v))
                .unwrap_or_else(|| "heatmap".into()),
            model: get("model")
                .filter(|m| models.contains(m))
                .unwrap_or_else(|| models.first().cloned().unwrap_or_default()),
            col_sort: Sort::parse(get("cols").as_deref()),
            row_sort: Sort::parse(get("rows").as_deref()),
            colour_by: get("colour").unwrap_or_else(|| "language".into()),
            culture: get("culture").unwrap_or_default(),
            person: get("person").unwrap_or_default(),
            present: get("present").as_deref() == Some("1"),
        }
    }

    /// The URL parameters of this state; an empty value means the parameter is removed.
    pub fn params(&self) -> [(&'static str, &str); 8] {
        [
            ("view", self.view.as_str()),
            ("model", self.model.as_str()),
            ("cols", self.col_sort.param()),
            ("rows", self.row_sort.param()),
            ("colour", self.colour_by.as_str()),
            ("culture", self.culture.as_str()),
            ("person", self.person.as_str()),
            ("present", if self.present { "1" } else { "" }),
        ]
    }
}

/// Whether the `pool=` URL value asks for per-model references.
pub fn per_model_pooling(pool: Option<&str>) -> bool {
    pool == Some("per-model")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn models() -> Vec<String> {
        vec!["sd21".to_string(), "flux".to_string()]
    }

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn empty_url_gives_the_defaults() {
        let ui = Ui::from_params(lookup(&[]), &models());
        assert_eq!(
            ui,
            Ui {
                view: "heatmap".into(),
                model: "sd21".into(),
                col_sort: Sort::Name,
                row_sort: Sort::Name,
                colour_by: "language".into(),
                culture: String::new(),
                person: String::new(),
                present: false,
            }
        );
    }

    #[test]
    fn unknown_view_and_model_fall_back() {
        let ui = Ui::from_params(lookup(&[("view", "nope"), ("model", "dalle")]), &models());
        assert_eq!((ui.view.as_str(), ui.model.as_str()), ("heatmap", "sd21"));
        let none = Ui::from_params(lookup(&[]), &[]);
        assert_eq!(none.model, "");
    }

    #[test]
    fn params_round_trip() {
        let pairs = [
            ("view", "educator"),
            ("model", "flux"),
            ("cols", "desc"),
            ("rows", "asc"),
            ("colour", "culture"),
            ("culture", "Japan"),
            ("person", "woman"),
            ("present", "1"),
        ];
        let ui = Ui::from_params(lookup(&pairs), &models());
        assert_eq!(ui.params(), pairs);
        let again = Ui::from_params(lookup(&ui.params()), &models());
        assert_eq!(again, ui);
    }

    #[test]
    fn sort_cycles_through_three_orders() {
        assert_eq!(Sort::Name.next(), Sort::MeanDesc);
        assert_eq!(Sort::MeanDesc.next(), Sort::MeanAsc);
        assert_eq!(Sort::MeanAsc.next(), Sort::Name);
        for s in [Sort::Name, Sort::MeanAsc, Sort::MeanDesc] {
            assert_eq!(Sort::parse(Some(s.param())), s);
        }
        assert_eq!(Sort::parse(Some("sideways")), Sort::Name);
    }

    #[test]
    fn pool_parameter() {
        assert!(per_model_pooling(Some("per-model")));
        assert!(!per_model_pooling(Some("all")));
        assert!(!per_model_pooling(None));
    }
}
