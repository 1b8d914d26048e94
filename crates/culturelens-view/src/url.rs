//! The UI state mirrored in the page URL, so any view can be bookmarked or shared:
//! `?bundle=…&view=…&model=…&cols=…&rows=…&colour=…&culture=…&person=…&present=1`, and for the
//! result tables `rmodel=…` (their model) and the educator's occupation slide
//! `slide=gender&set=…&occupation=…` (`pool=per-model` is read once at load, into the
//! [`Filter`](crate::filter::Filter)). Parsing never fails: an unknown view, or one the bundle
//! cannot show, falls back to the heatmap, an unknown model to the bundle's first model.

/// The views, in tab order; the value is the `view=` URL parameter.
pub const VIEWS: [(&str, &str); 9] = [
    ("heatmap", "Heatmap"),
    ("distribution", "Distribution"),
    ("correlation", "Language correlation"),
    ("flags", "Surface flags"),
    ("scatter", "PCA scatter"),
    ("vendi", "Vendi"),
    ("magbig", "Gender bias"),
    ("cultext2i", "National association"),
    ("educator", "Educator"),
];

/// The views a bundle can show: every view of its embeddings, the MAGBIG view when it carries
/// a `magbig` table and the CulText2I view when it carries a `cultext2i` table or report.
pub fn views_for(magbig: bool, cultext2i: bool) -> Vec<&'static str> {
    VIEWS
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| match *id {
            "magbig" => magbig,
            "cultext2i" => cultext2i,
            _ => true,
        })
        .collect()
}

/// What the educator slide shows (`slide=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slide {
    /// One culture and person term across languages, with their SoS (the default).
    Sos,
    /// One occupation across languages, with its male share (`slide=gender`; the bundle's
    /// MAGBIG attribute table).
    Gender,
}

impl Slide {
    /// The URL value (empty for the default).
    pub fn param(self) -> &'static str {
        match self {
            Slide::Sos => "",
            Slide::Gender => "gender",
        }
    }

    /// Parses a URL value; anything else (or nothing) is [`Slide::Sos`].
    pub fn parse(text: Option<&str>) -> Slide {
        if text == Some("gender") { Slide::Gender } else { Slide::Sos }
    }
}

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
    /// The model of the result-table views (`rmodel=`; the result tables have their own models).
    pub results_model: String,
    pub slide: Slide,
    /// The prompt set and occupation of the occupation slide.
    pub set: String,
    pub occupation: String,
}

impl Ui {
    /// The state of a URL whose parameter `name` is `get(name)`, for a bundle with `models` that
    /// can show `views` ([`views_for`]).
    pub fn from_params(get: impl Fn(&str) -> Option<String>, models: &[String], views: &[&str]) -> Ui {
        Ui {
            view: get("view").filter(|v| views.contains(&v.as_str())).unwrap_or_else(|| "heatmap".into()),
            model: get("model")
                .filter(|m| models.contains(m))
                .unwrap_or_else(|| models.first().cloned().unwrap_or_default()),
            col_sort: Sort::parse(get("cols").as_deref()),
            row_sort: Sort::parse(get("rows").as_deref()),
            colour_by: get("colour").unwrap_or_else(|| "language".into()),
            culture: get("culture").unwrap_or_default(),
            person: get("person").unwrap_or_default(),
            present: get("present").as_deref() == Some("1"),
            results_model: get("rmodel").unwrap_or_default(),
            slide: Slide::parse(get("slide").as_deref()),
            set: get("set").unwrap_or_default(),
            occupation: get("occupation").unwrap_or_default(),
        }
    }

    /// The URL parameters of this state; an empty value means the parameter is removed.
    pub fn params(&self) -> [(&'static str, &str); 12] {
        [
            ("view", self.view.as_str()),
            ("model", self.model.as_str()),
            ("cols", self.col_sort.param()),
            ("rows", self.row_sort.param()),
            ("colour", self.colour_by.as_str()),
            ("culture", self.culture.as_str()),
            ("person", self.person.as_str()),
            ("present", if self.present { "1" } else { "" }),
            ("rmodel", self.results_model.as_str()),
            ("slide", self.slide.param()),
            ("set", self.set.as_str()),
            ("occupation", self.occupation.as_str()),
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

    fn all_views() -> Vec<&'static str> {
        views_for(true, true)
    }

    #[test]
    fn empty_url_gives_the_defaults() {
        let ui = Ui::from_params(lookup(&[]), &models(), &all_views());
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
                results_model: String::new(),
                slide: Slide::Sos,
                set: String::new(),
                occupation: String::new(),
            }
        );
    }

    #[test]
    fn unknown_view_and_model_fall_back() {
        let ui = Ui::from_params(lookup(&[("view", "nope"), ("model", "dalle")]), &models(), &all_views());
        assert_eq!((ui.view.as_str(), ui.model.as_str()), ("heatmap", "sd21"));
        let none = Ui::from_params(lookup(&[]), &[], &all_views());
        assert_eq!(none.model, "");
        // A result view of a bundle without that result table.
        let views = views_for(false, true);
        assert_eq!(Ui::from_params(lookup(&[("view", "magbig")]), &models(), &views).view, "heatmap");
        assert_eq!(Ui::from_params(lookup(&[("view", "cultext2i")]), &models(), &views).view, "cultext2i");
        assert_eq!(Ui::from_params(lookup(&[("slide", "sideways")]), &models(), &views).slide, Slide::Sos);
    }

    #[test]
    fn result_views_need_their_tables() {
        assert_eq!(views_for(true, true).len(), VIEWS.len());
        assert!(!views_for(false, true).contains(&"magbig"));
        assert!(!views_for(true, false).contains(&"cultext2i"));
        assert_eq!(views_for(false, false).len(), VIEWS.len() - 2);
        assert!(views_for(false, false).contains(&"educator"));
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
            ("rmodel", "altdiffusion"),
            ("slide", "gender"),
            ("set", "direct"),
            ("occupation", "nurse"),
        ];
        let ui = Ui::from_params(lookup(&pairs), &models(), &all_views());
        assert_eq!(ui.params(), pairs);
        let again = Ui::from_params(lookup(&ui.params()), &models(), &all_views());
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
