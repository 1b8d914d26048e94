//! The explorer views. Each renders from the app state into its own container (`#view-<name>`)
//! as SVG/HTML strings; interaction goes through delegated listeners wired once in [`wire`].

pub mod colour;
mod correlation;
mod distribution;
mod educator;
mod flags;
mod heatmap;
mod scatter;
mod scatter_gpu;
mod vendi;

use wasm_bindgen::JsCast;
use web_sys::HtmlInputElement;

use crate::app::{self, VIEWS, with_app};
use crate::dom::{self, esc};
use culturelens_core::sos::Pooling;

/// Wires the tabs, filters and every view's listeners (once per page).
pub fn wire() {
    let tabs: String = VIEWS
        .iter()
        .map(|(id, label)| {
            format!("<button type='button' role='tab' data-view='{id}' id='tab-{id}'>{label}</button>")
        })
        .collect();
    dom::set_html("tabs", &tabs);
    dom::on_id("tabs", "click", |e| {
        if let Some((_, view)) = dom::closest_data(&e, "view") {
            switch(&view);
        }
    });
    dom::on_id("filters", "change", |e| {
        let Some(input) = e.target().and_then(|t| t.dyn_into::<HtmlInputElement>().ok()) else { return };
        let (kind, value, on) = (input.get_attribute("data-kind"), input.value(), input.checked());
        with_app(|app| match kind.as_deref() {
            Some("model") => app.filter.models.iter_mut().filter(|(m, _)| *m == value).for_each(|m| m.1 = on),
            Some("language") => {
                app.filter.languages.iter_mut().filter(|(l, _)| *l == value).for_each(|l| l.1 = on)
            }
            Some("pool") => {
                app.filter.pooling = if value == "per-model" { Pooling::PerModel } else { Pooling::All }
            }
            _ => {}
        });
        app::spawn_recompute();
    });
    dom::on_id("model-select", "change", |_| {
        let model = dom::select_value("model-select");
        with_app(|app| app.ui.model = model);
        app::sync_url();
        render_active();
    });
    heatmap::wire();
    scatter::wire();
    vendi::wire();
    educator::wire();
}

/// Switches the visible view and records it in the URL.
pub fn switch(view: &str) {
    with_app(|app| app.ui.view = view.to_string());
    app::sync_url();
    render_active();
}

/// The filter checkboxes (models, languages) and the pooling choice.
pub fn render_filters() {
    let html = with_app(|app| {
        let boxes = |kind: &str, list: &[(String, bool)]| -> String {
            list.iter()
                .map(|(v, on)| {
                    format!(
                        "<label><input type='checkbox' data-kind='{kind}' value='{v}'{}> {v}</label>",
                        if *on { " checked" } else { "" },
                        v = esc(v)
                    )
                })
                .collect()
        };
        let per_model = app.filter.pooling == Pooling::PerModel;
        let models: String = app
            .manifest
            .models
            .iter()
            .map(|m| {
                format!(
                    "<option value='{v}'{}>{v}</option>",
                    if *m == app.ui.model { " selected" } else { "" },
                    v = esc(m)
                )
            })
            .collect();
        dom::set_html("model-select", &models);
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

/// Renders the active view and marks its tab.
pub fn render_active() {
    let Some(view) = with_app(|app| app.ui.view.clone()) else { return };
    for (id, _) in VIEWS {
        dom::show(&format!("view-{id}"), id == view);
        let tab = dom::by_id(&format!("tab-{id}"));
        tab.set_attribute("aria-selected", if id == view { "true" } else { "false" }).ok();
    }
    dom::set_body_attr("data-view", &view);
    match view.as_str() {
        "heatmap" => heatmap::render(),
        "distribution" => distribution::render(),
        "correlation" => correlation::render(),
        "flags" => flags::render(),
        "scatter" => scatter::render(),
        "vendi" => vendi::render(),
        "educator" => educator::render(),
        _ => {}
    }
}
