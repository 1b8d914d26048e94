//! Educator mode: a projector-friendly slide for one culture and person term, showing every
//! language side by side (the images when the bundle has thumbnails, otherwise the scores) with
//! their SoS. ←/→ change the culture, ↑/↓ the person term, `m` the model; the whole slide is in
//! the URL (`view=educator&model=…&culture=…&person=…`), so a teacher can bookmark or share it.
//! The values come from `culturelens_view::educator::cards`; each card carries them in full
//! precision (`data-sos`: mean per-output SoS, `data-n`, `data-joint`: the cell's joint score).

use culturelens_view::educator::{Columns, Slide, cards, distinct, step};
use wasm_bindgen::JsCast;
use web_sys::Event;

use super::colour::{css, diverging_rgb, ink};
use super::{Handler, Listen};
use crate::dom::{self, esc};
use crate::state::{Update, with_app};

/// Images per language on a slide.
const IMAGES_PER_LANGUAGE: usize = 4;

pub fn handlers() -> [Handler; 2] {
    [
        Handler { on: Listen::Document, event: "keydown", run: on_key },
        Handler { on: Listen::Id("view-educator"), event: "change", run: on_select },
    ]
}

fn on_key(e: &Event) -> Update {
    let Some(key) = e.dyn_ref::<web_sys::KeyboardEvent>().map(|k| k.key()) else { return Update::Nothing };
    let handled = with_app(|app| {
        if app.ui.view != "educator" {
            return false;
        }
        let options = |name: &str| app.column(name).map(distinct).unwrap_or_default();
        let (cultures, persons) = (options("culture"), options("person"));
        let ui = &mut app.ui;
        match key.as_str() {
            "ArrowRight" => ui.culture = step(&cultures, &ui.culture, 1),
            "ArrowLeft" => ui.culture = step(&cultures, &ui.culture, -1),
            "ArrowDown" => ui.person = step(&persons, &ui.person, 1),
            "ArrowUp" => ui.person = step(&persons, &ui.person, -1),
            "m" => ui.model = step(&app.manifest.models, &ui.model, 1),
            _ => return false,
        }
        true
    })
    .unwrap_or(false);
    if !handled {
        return Update::Nothing;
    }
    e.prevent_default();
    Update::Render
}

fn on_select(e: &Event) -> Update {
    let Some(sel) = e.target().and_then(|t| t.dyn_into::<web_sys::HtmlSelectElement>().ok()) else {
        return Update::Nothing;
    };
    let value = sel.value();
    with_app(|app| match sel.id().as_str() {
        "edu-culture" => app.ui.culture = value,
        "edu-person" => app.ui.person = value,
        _ => app.ui.model = value,
    });
    Update::Render
}

fn select(id: &str, label: &str, values: &[String], current: &str) -> String {
    let opts: String = values
        .iter()
        .map(|v| {
            format!(
                "<option value='{e}'{}>{e}</option>",
                if v == current { " selected" } else { "" },
                e = esc(v)
            )
        })
        .collect();
    format!("<label>{label} <select id='{id}'>{opts}</select></label>")
}

/// Renders the slide; a culture or person term not in the bundle is replaced by the first one,
/// so the URL is written back.
pub fn render() -> Update {
    let html = with_app(|app| {
        let cultures = app.column("culture").map(distinct).unwrap_or_default();
        let persons = app.column("person").map(distinct).unwrap_or_default();
        if !cultures.contains(&app.ui.culture) {
            app.ui.culture = cultures.first().cloned().unwrap_or_default();
        }
        if !persons.is_empty() && !persons.contains(&app.ui.person) {
            app.ui.person = persons.first().cloned().unwrap_or_default();
        }
        let scored = app.scored.as_ref()?;
        let cols = Columns {
            model: app.column("model")?,
            language: app.column("language")?,
            culture: app.column("culture")?,
            person: app.column("person"),
        };
        let thumbs = app.column(culturelens_bundle::THUMBNAIL_COLUMN);
        let ui = &app.ui;
        let slide = Slide { model: &ui.model, culture: &ui.culture, person: &ui.person };
        let mut html = String::new();
        for card in cards(&scored.rows, &scored.per_image, cols, slide) {
            let joint = scored
                .report
                .joint
                .iter()
                .find(|j| j.model == ui.model && j.language == card.language && j.culture == ui.culture)
                .map(|j| j.sos);
            let rgb = diverging_rgb(card.mean, 0.5);
            let images: String = match thumbs {
                Some(t) => card
                    .outputs
                    .iter()
                    .filter(|(r, _)| !t[*r].is_empty())
                    .take(IMAGES_PER_LANGUAGE)
                    .map(|(r, s)| {
                        format!(
                            "<figure><img src='{}' alt=''><figcaption>{s:.3}</figcaption></figure>",
                            esc(&app.thumbs.url(&t[*r]))
                        )
                    })
                    .collect(),
                None => card.outputs.iter().map(|(_, s)| format!("<span class='score'>{s:.3}</span>")).collect(),
            };
            html.push_str(&format!(
                "<section class='edu-card' data-language='{l}' data-sos='{mean}' data-n='{n}' data-joint='{joint_value}'><h3>{l}</h3>\
                 <div class='edu-sos' style='background:{bg};color:{fg}'>SoS {mean:.3}</div>\
                 <div class='edu-images'>{images}</div>\
                 <p class='muted'>n = {n}; cell (all person terms) {joint}</p></section>",
                l = esc(&card.language),
                mean = card.mean,
                bg = css(rgb),
                fg = ink(rgb),
                n = card.outputs.len(),
                joint_value = joint.map_or("".to_string(), |j| j.to_string()),
                joint = joint.map_or("–".to_string(), |j| format!("{j:.3}"))
            ));
        }
        let person_select =
            if persons.is_empty() { String::new() } else { select("edu-person", "Person", &persons, &ui.person) };
        Some(format!(
            "<div class='edu-controls'>{}{}{}</div><h2 class='edu-title'>{} · {} · {}</h2>\
             <p class='muted'>Keys: ←/→ culture · ↑/↓ person term · m model. Orange = looks like its language (surface), purple = like its culture (semantics).</p>\
             <div class='edu-row'>{html}</div>",
            select("edu-model", "Model", &app.manifest.models, &ui.model),
            select("edu-culture", "Culture", &cultures, &ui.culture),
            person_select,
            esc(&ui.culture),
            esc(&ui.person),
            esc(&ui.model),
        ))
    })
    .flatten();
    match html {
        Some(html) => {
            dom::set_html("view-educator", &html);
            Update::Url
        }
        None => Update::Nothing,
    }
}
