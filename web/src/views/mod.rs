//! The explorer views. Each renders from the app state (`state.rs`) into its own container
//! (`#view-<name>`) as SVG/HTML strings. Interaction goes through delegated listeners: each view
//! lists its [`Handler`]s, which change the state and return the [`Update`] the app applies
//! (URL sync, re-render, recompute); views never call back into the app flow.

mod ci;
pub mod classroom;
pub mod colour;
mod correlation;
mod cultext2i;
mod distribution;
mod educator;
mod flags;
pub mod heatmap;
mod magbig;
mod scatter;
mod scatter_gpu;
pub mod tokens;
mod vendi;

use wasm_bindgen::JsCast;
use web_sys::{Event, HtmlInputElement};

use crate::dom::{self, esc};
use crate::state::{Update, VIEWS, with_app};

/// Where a handler listens.
pub enum Listen {
    /// The element with this id (delegation: events of its descendants bubble to it).
    Id(&'static str),
    /// The whole document (keys, a drag that leaves the canvas).
    Document,
}

/// One event listener of a view: runs on the event, returns what the app must do next.
pub struct Handler {
    pub on: Listen,
    pub event: &'static str,
    pub run: fn(&Event) -> Update,
}

/// Shows the tabs of the views a bundle can show (`views`) and hides the others.
pub fn show_tabs(views: &[&str]) {
    for (id, _) in VIEWS {
        dom::show(&format!("tab-{id}"), views.contains(&id));
    }
}

/// The tab bar (its buttons; the click handler is in [`handlers`]).
pub fn wire_tabs() {
    let tabs: String = VIEWS
        .iter()
        .map(|(id, label)| {
            format!(
                "<button type='button' role='tab' data-view='{id}' id='tab-{id}' aria-controls='view-{id}'>{label}</button>"
            )
        })
        .collect();
    dom::set_html("tabs", &tabs);
}

/// Every listener of the page's views (wired once per page by the app).
pub fn handlers() -> Vec<Handler> {
    let mut all = vec![
        Handler { on: Listen::Id("tabs"), event: "click", run: on_tab },
        Handler { on: Listen::Id("filters"), event: "change", run: on_filter },
        Handler { on: Listen::Id("model-select"), event: "change", run: on_model },
        Handler { on: Listen::Id("present-button"), event: "click", run: educator::on_present_button },
    ];
    all.extend(heatmap::handlers());
    all.extend(scatter::handlers());
    all.extend(vendi::handlers());
    all.extend(educator::handlers());
    all.extend(tokens::handlers());
    all.extend(classroom::handlers());
    all.extend(tip_handlers("view-tokens"));
    for view in ["view-magbig", "view-cultext2i"] {
        all.extend(tip_handlers(view));
    }
    all
}

/// The page's one model selector, `#model-select` in the header: the bundle's models (`ui.model`)
/// for the views of its embeddings, or, for a view that draws a result table, that table's models
/// (`results`: `ui.results_model`).
pub fn model_select(values: &[String], current: &str, results: bool) {
    dom::set_html("model-select", &options(values, current));
    dom::by_id("model-select").set_attribute("data-for", if results { "results" } else { "model" }).ok();
}

/// Puts a view's rendered HTML (if any) into its container `id`; the view's choices are then
/// written to the URL.
fn show_rendered(id: &str, html: Option<String>) -> Update {
    match html {
        Some(html) => {
            dom::set_html(id, &html);
            Update::Url
        }
        None => Update::Nothing,
    }
}

/// Tooltips of the elements of view `id` that carry their text in `data-tip`: shown beside the
/// pointer on hover and beside the element when it has the keyboard focus.
fn tip_handlers(id: &'static str) -> [Handler; 4] {
    [
        Handler { on: Listen::Id(id), event: "mousemove", run: on_tip_hover },
        Handler { on: Listen::Id(id), event: "focusin", run: on_tip_focus },
        Handler { on: Listen::Id(id), event: "focusout", run: hide_tip },
        Handler { on: Listen::Id(id), event: "mouseleave", run: hide_tip },
    ]
}

fn on_tip_hover(e: &Event) -> Update {
    match (dom::closest_data(e, "tip"), e.dyn_ref::<web_sys::MouseEvent>()) {
        (Some((_, tip)), Some(m)) => {
            dom::show_tooltip(&esc(&tip), f64::from(m.page_x()), f64::from(m.page_y()))
        }
        _ => return hide_tip(e),
    }
    Update::Nothing
}

fn on_tip_focus(e: &Event) -> Update {
    if let Some((el, tip)) = dom::closest_data(e, "tip") {
        let r = el.get_bounding_client_rect();
        let (sx, sy) = (dom::window().scroll_x().unwrap_or(0.0), dom::window().scroll_y().unwrap_or(0.0));
        dom::show_tooltip(&esc(&tip), r.right() + sx, r.bottom() + sy);
    }
    Update::Nothing
}

fn hide_tip(_: &Event) -> Update {
    dom::by_id("tooltip").set_attribute("hidden", "").ok();
    Update::Nothing
}

/// A `<select id=ID>` of `values` with `current` selected, labelled `label`.
pub fn select(id: &str, label: &str, values: &[String], current: &str) -> String {
    format!("<label>{label} <select id='{id}'>{}</select></label>", options(values, current))
}

/// The `<option>`s of `values` with `current` selected.
fn options(values: &[String], current: &str) -> String {
    values
        .iter()
        .map(|v| {
            format!(
                "<option value='{e}'{}>{e}</option>",
                if v == current { " selected" } else { "" },
                e = esc(v)
            )
        })
        .collect()
}

/// `current` when it is one of `values`, else the first value (empty for none).
pub fn pick(values: &[String], current: &str) -> String {
    if values.iter().any(|v| v == current) {
        current.to_string()
    } else {
        values.first().cloned().unwrap_or_default()
    }
}

fn on_tab(e: &Event) -> Update {
    match dom::closest_data(e, "view") {
        Some((_, view)) => switch(&view),
        None => Update::Nothing,
    }
}

fn on_filter(e: &Event) -> Update {
    let Some(input) = e.target().and_then(|t| t.dyn_into::<HtmlInputElement>().ok()) else {
        return Update::Nothing;
    };
    let (kind, value, on) =
        (input.get_attribute("data-kind").unwrap_or_default(), input.value(), input.checked());
    with_app(|app| app.filter.set(&kind, &value, on));
    Update::Recompute
}

fn on_model(_: &Event) -> Update {
    let model = dom::select_value("model-select");
    let results = dom::by_id("model-select").get_attribute("data-for").as_deref() == Some("results");
    with_app(|app| if results { app.ui.results_model = model } else { app.ui.model = model });
    Update::Render
}

/// An SVG text label at (`x`, `y`) with `anchor` (`start`/`middle`/`end`) and extra `attrs`;
/// `text` is escaped.
pub fn svg_label(x: f64, y: f64, anchor: &str, attrs: &str, text: &str) -> String {
    format!("<text {attrs} x='{x:.1}' y='{y:.1}' text-anchor='{anchor}'>{}</text>", esc(text))
}

/// Makes `view` the visible view (recorded in the URL).
pub fn switch(view: &str) -> Update {
    with_app(|app| app.ui.view = view.to_string());
    Update::Render
}

/// The filter checkboxes (models, languages) and the pooling choice.
pub fn render_filters() {
    let html = with_app(|app| {
        let boxes = |kind: &str, list: &[(String, bool)]| -> String {
            list.iter()
                .map(|(v, on)| {
                    format!(
                        "<label><input type='checkbox' data-kind='{kind}' value='{v}'{}> {v}</label> ",
                        if *on { " checked" } else { "" },
                        v = esc(v)
                    )
                })
                .collect()
        };
        let per_model = app.filter.per_model;
        model_select(&app.manifest.models, &app.ui.model, false);
        format!(
            "<fieldset><legend>Models</legend>{}</fieldset><fieldset><legend>Languages</legend>{}</fieldset>\
             <fieldset><legend>References</legend>\
             <label><input type='radio' name='pool' data-kind='pool' value='all'{}> pooled over models</label>\
             <label><input type='radio' name='pool' data-kind='pool' value='per-model'{}> per model</label></fieldset>",
            boxes("model", &app.filter.models),
            boxes("language", &app.filter.languages),
            if per_model { "" } else { " checked" },
            if per_model { " checked" } else { "" },
        )
    });
    if let Some(html) = html {
        dom::set_html("filters", &html);
    }
}

/// On a phone the tab bar scrolls sideways: keeps the active tab in sight (once the page shows).
pub fn reveal_active_tab() {
    let Some(view) = with_app(|app| app.ui.view.clone()) else { return };
    let bar = dom::by_id("tabs");
    if let (Some(t), Some(b)) = (
        dom::by_id(&format!("tab-{view}")).dyn_ref::<web_sys::HtmlElement>(),
        bar.dyn_ref::<web_sys::HtmlElement>(),
    ) {
        bar.set_scroll_left(t.offset_left() - b.offset_left() - 8);
    }
}

/// Renders the active view and marks its tab; returns what the view's rendering asks for.
pub fn render_active() -> Update {
    let Some(view) = with_app(|app| app.ui.view.clone()) else { return Update::Nothing };
    for (id, _) in VIEWS {
        dom::show(&format!("view-{id}"), id == view);
        let tab = dom::by_id(&format!("tab-{id}"));
        tab.set_attribute("aria-selected", if id == view { "true" } else { "false" }).ok();
    }
    reveal_active_tab();
    dom::set_body_attr("data-view", &view);
    let present = with_app(|app| app.ui.present).unwrap_or(false);
    dom::set_body_attr("data-present", if present { "true" } else { "false" });
    // The bundle's models; a view of a result table puts its table's models there instead.
    with_app(|app| model_select(&app.manifest.models, &app.ui.model, false));
    match view.as_str() {
        "heatmap" => heatmap::render(),
        "distribution" => distribution::render(),
        "correlation" => correlation::render(),
        "flags" => flags::render(),
        "scatter" => scatter::render(),
        "vendi" => vendi::render(),
        "magbig" => return magbig::render(),
        "cultext2i" => return cultext2i::render(),
        "educator" => return educator::render(),
        _ => {}
    }
    Update::Nothing
}
