//! Educator mode: a projector-friendly slide for one culture and person term, showing every
//! language side by side (the images when the bundle has thumbnails, otherwise the scores) with
//! their SoS. ←/→ change the culture, ↑/↓ the person term, `m` the model; the whole slide is in
//! the URL (`view=educator&model=…&culture=…&person=…`), so a teacher can bookmark or share it.

use std::collections::BTreeSet;

use super::colour::{css, diverging_rgb, ink};
use super::heatmap::thumb_url;
use crate::app::{self, with_app};
use crate::dom::{self, esc};

/// Images per language on a slide.
const IMAGES_PER_LANGUAGE: usize = 4;

pub fn wire() {
    dom::on(&dom::document(), "keydown", |e| {
        let Some(key) = e.dyn_ref::<web_sys::KeyboardEvent>().map(|k| k.key()) else { return };
        let handled = with_app(|app| {
            if app.ui.view != "educator" {
                return false;
            }
            let (cultures, persons) = (options(app, "culture"), options(app, "person"));
            let step = |list: &[String], current: &str, delta: i64| -> String {
                if list.is_empty() {
                    return String::new();
                }
                let i = list.iter().position(|v| v == current).unwrap_or(0) as i64;
                list[(i + delta).rem_euclid(list.len() as i64) as usize].clone()
            };
            match key.as_str() {
                "ArrowRight" => app.ui.culture = step(&cultures, &app.ui.culture, 1),
                "ArrowLeft" => app.ui.culture = step(&cultures, &app.ui.culture, -1),
                "ArrowDown" => app.ui.person = step(&persons, &app.ui.person, 1),
                "ArrowUp" => app.ui.person = step(&persons, &app.ui.person, -1),
                "m" => app.ui.model = step(&app.manifest.models.clone(), &app.ui.model, 1),
                _ => return false,
            }
            true
        })
        .unwrap_or(false);
        if handled {
            e.prevent_default();
            app::sync_url();
            render();
        }
    });
    dom::on_id("view-educator", "change", |e| {
        let Some(sel) = e.target().and_then(|t| t.dyn_into::<web_sys::HtmlSelectElement>().ok()) else {
            return;
        };
        let value = sel.value();
        with_app(|app| match sel.id().as_str() {
            "edu-culture" => app.ui.culture = value,
            "edu-person" => app.ui.person = value,
            _ => app.ui.model = value,
        });
        app::sync_url();
        render();
    });
}

use wasm_bindgen::JsCast;

fn options(app: &app::App, column: &str) -> Vec<String> {
    app.columns
        .iter()
        .find(|(c, _)| c == column)
        .map(|(_, v)| v.iter().collect::<BTreeSet<_>>().into_iter().cloned().collect())
        .unwrap_or_default()
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

pub fn render() {
    let html = with_app(|app| {
        let cultures = options(app, "culture");
        let persons = options(app, "person");
        if !cultures.contains(&app.ui.culture) {
            app.ui.culture = cultures.first().cloned().unwrap_or_default();
        }
        if !persons.is_empty() && !persons.contains(&app.ui.person) {
            app.ui.person = persons.first().cloned().unwrap_or_default();
        }
        let scored = app.scored.as_ref()?;
        let col = |n: &str| app.columns.iter().find(|(c, _)| c == n).map(|(_, v)| v.as_slice());
        let (m, l, c) = (col("model")?, col("language")?, col("culture")?);
        let (person, thumbs) = (col("person"), col(culturelens_bundle::THUMBNAIL_COLUMN));
        let ui = &app.ui;
        let languages: BTreeSet<&str> = scored.rows.iter().map(|&r| l[r as usize].as_str()).collect();
        let mut cards = String::new();
        for lang in languages {
            // Per-image scores of this prompt (culture, person) in this language.
            let matches: Vec<(usize, f32)> = scored
                .rows
                .iter()
                .enumerate()
                .filter(|&(_, &r)| {
                    let r = r as usize;
                    m[r] == ui.model && l[r] == lang && c[r] == ui.culture && person.is_none_or(|p| p[r] == ui.person)
                })
                .map(|(i, &r)| (r as usize, scored.per_image[i]))
                .collect();
            if matches.is_empty() {
                continue;
            }
            let mean = matches.iter().map(|(_, s)| f64::from(*s)).sum::<f64>() / matches.len() as f64;
            let joint = scored
                .report
                .joint
                .iter()
                .find(|j| j.model == ui.model && j.language == lang && j.culture == ui.culture)
                .map(|j| j.sos);
            let rgb = diverging_rgb(mean, 0.5);
            let images: String = match thumbs {
                Some(t) => matches
                    .iter()
                    .filter(|(r, _)| !t[*r].is_empty())
                    .take(IMAGES_PER_LANGUAGE)
                    .map(|(r, s)| format!("<figure><img src='{}' alt=''><figcaption>{s:.3}</figcaption></figure>", esc(&thumb_url(&app.thumbs, &t[*r]))))
                    .collect(),
                None => matches.iter().map(|(_, s)| format!("<span class='score'>{s:.3}</span>")).collect(),
            };
            cards.push_str(&format!(
                "<section class='edu-card' data-language='{l}'><h3>{l}</h3>\
                 <div class='edu-sos' style='background:{bg};color:{fg}'>SoS {mean:.3}</div>\
                 <div class='edu-images'>{images}</div>\
                 <p class='muted'>n = {n}; cell (all person terms) {joint}</p></section>",
                l = esc(lang),
                bg = css(rgb),
                fg = ink(rgb),
                n = matches.len(),
                joint = joint.map_or("–".to_string(), |j| format!("{j:.3}"))
            ));
        }
        let person_select = if persons.is_empty() { String::new() } else { select("edu-person", "Person", &persons, &ui.person) };
        Some(format!(
            "<div class='edu-controls'>{}{}{}</div><h2 class='edu-title'>{} · {} · {}</h2>\
             <p class='muted'>Keys: ←/→ culture · ↑/↓ person term · m model. Orange = looks like its language (surface), purple = like its culture (semantics).</p>\
             <div class='edu-row'>{cards}</div>",
            select("edu-model", "Model", &app.manifest.models, &ui.model),
            select("edu-culture", "Culture", &cultures, &ui.culture),
            person_select,
            esc(&ui.culture),
            esc(&ui.person),
            esc(&ui.model),
        ))
    })
    .flatten();
    if let Some(html) = html {
        dom::set_html("view-educator", &html);
        app::sync_url();
    }
}
